//! Durations in config files and on command lines ("250ms", "10s", "5m", "2h", "1d"): the
//! parser and the serde adapter the parts' configs share. Below every part; knows nothing
//! of them.

use std::time::Duration;

/// Parses "250ms", "10s", "5m", "2h", "1d" (a bare number is seconds).
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| {
        format!("invalid duration {s:?}: expected a number and a unit (ms, s, m, h, d)")
    })?;
    let secs = match unit.trim() {
        "ms" => n / 1e3,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        other => {
            return Err(format!(
                "invalid duration {s:?}: unknown unit {other:?} (ms, s, m, h, d)"
            ));
        }
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("invalid duration {s:?}: {e}"))
}

/// For `#[serde(with = "crate::duration::serde")]`: durations as "250ms", "5s", "2m" or
/// seconds as a number; written back in milliseconds.
pub mod serde {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}ms", d.as_millis()))
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Secs(f64),
        Text(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match Raw::deserialize(d)? {
            Raw::Secs(s) => Duration::try_from_secs_f64(s).map_err(D::Error::custom),
            Raw::Text(t) => super::parse(&t).map_err(D::Error::custom),
        }
    }
}
