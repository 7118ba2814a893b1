//! Durations in config files and on command lines ("250ms", "10s", "5m", "2h", "1d",
//! "1h30m", "1.5s"): the one parser and the one serde adapter every part's config uses.
//! A leaf: below every part, knows nothing of them.

use std::time::Duration;

/// The units [`parse`] knows, for error messages.
const UNITS: &str = "ms, s, m (min), h, d";

/// Parses "250ms", "10s", "5m", "2h", "1d", sums such as "1h30m", fractions ("1.5s") and a
/// bare number (seconds).
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err(format!(
            "empty duration: expected a number and a unit ({UNITS})"
        ));
    }
    if let Ok(n) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(n).map_err(|e| format!("invalid duration {s:?}: {e}"));
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..digits].parse().map_err(|_| {
            format!("invalid duration {s:?}: expected a number and a unit ({UNITS})")
        })?;
        rest = rest[digits..].trim_start();
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = rest[..unit_len].trim();
        rest = &rest[unit_len..];
        let secs = match unit {
            "ms" => n / 1e3,
            "s" => n,
            // `min` as well: the process reader's settings took it before they came here.
            "m" | "min" => n * 60.0,
            "h" => n * 3600.0,
            "d" => n * 86400.0,
            other => {
                return Err(format!(
                    "invalid duration {s:?}: unknown unit {other:?} ({UNITS})"
                ));
            }
        };
        let d = Duration::try_from_secs_f64(secs)
            .map_err(|e| format!("invalid duration {s:?}: {e}"))?;
        total = total.saturating_add(d);
    }
    Ok(total)
}

/// For `#[serde(with = "crate::duration::serde")]`: reads "250ms", "48h", "1h30m" or a number
/// of seconds; writes whole seconds as "5s", anything finer in milliseconds ("250ms").
pub mod serde {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        if d.subsec_nanos() == 0 {
            s.serialize_str(&format!("{}s", d.as_secs()))
        } else {
            s.serialize_str(&format!("{}ms", d.as_millis()))
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Whole(u64),
        Negative(i64),
        Secs(f64),
        Text(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match Raw::deserialize(d)? {
            Raw::Whole(n) => Ok(Duration::from_secs(n)),
            Raw::Negative(n) => Err(D::Error::custom(format!("negative duration: {n}"))),
            Raw::Secs(s) => Duration::try_from_secs_f64(s).map_err(D::Error::custom),
            Raw::Text(t) => super::parse(&t).map_err(D::Error::custom),
        }
    }

    /// The same for `Option<Duration>` fields (with `default` and
    /// `skip_serializing_if = "Option::is_none"`).
    pub mod option {
        use std::time::Duration;

        use serde::{Deserializer, Serializer};

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            super::deserialize(d).map(Some)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_sums_fractions_and_bare_seconds() {
        assert_eq!(parse("48h").unwrap(), Duration::from_secs(48 * 3600));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("120").unwrap(), Duration::from_secs(120));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("2d").unwrap(), Duration::from_secs(2 * 86400));
        assert_eq!(parse("2min").unwrap(), Duration::from_secs(120));
        for bad in ["h", "3x", "", "fast", "-1s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let e = parse("10 parsecs").unwrap_err();
        assert!(e.contains("parsecs") && e.contains("ms, s"), "{e}");
    }

    #[derive(::serde::Deserialize, ::serde::Serialize, Debug, PartialEq)]
    struct T {
        #[serde(with = "super::serde")]
        d: Duration,
    }

    #[test]
    fn serde_reads_numbers_and_text_and_writes_what_it_reads() {
        for (text, want) in [
            ("d = 5", 5_000),
            ("d = 0.25", 250),
            ("d = \"1h30m\"", 5_400_000),
        ] {
            let t: T = toml::from_str(text).unwrap();
            assert_eq!(t.d, Duration::from_millis(want), "{text}");
            let back: T = toml::from_str(&toml::to_string(&t).unwrap()).unwrap();
            assert_eq!(back, t);
        }
        assert!(toml::from_str::<T>("d = -3").is_err());
        let out = toml::to_string(&T {
            d: Duration::from_millis(200),
        })
        .unwrap();
        assert_eq!(out.trim(), "d = \"200ms\"");
        let out = toml::to_string(&T {
            d: Duration::from_secs(90),
        })
        .unwrap();
        assert_eq!(out.trim(), "d = \"90s\"");
    }
}
