//! PCP units (as `pmUnitsStr` writes them) to Prometheus' base units: the name suffix
//! (`bytes`, `seconds`, `bytes_per_second`) and the factor that turns a stored value into it.
//! Facts only; no I/O.

/// A unit as Prometheus names it, and the factor from the PCP unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BaseUnit {
    /// The name suffix without its leading `_`; empty for counts and dimensionless values.
    pub suffix: &'static str,
    pub scale: f64,
}

/// One dimension of a PCP unit: (suffix, factor to the base unit).
fn dimension(word: &str) -> Option<(&'static str, f64)> {
    const KIB: f64 = 1024.0;
    Some(match word {
        "byte" => ("bytes", 1.0),
        "Kbyte" => ("bytes", KIB),
        "Mbyte" => ("bytes", KIB * KIB),
        "Gbyte" => ("bytes", KIB * KIB * KIB),
        "Tbyte" => ("bytes", KIB.powi(4)),
        "Pbyte" => ("bytes", KIB.powi(5)),
        "Ebyte" => ("bytes", KIB.powi(6)),
        "nanosec" => ("seconds", 1e-9),
        "microsec" => ("seconds", 1e-6),
        "millisec" => ("seconds", 1e-3),
        "sec" => ("seconds", 1.0),
        "min" => ("seconds", 60.0),
        "hour" => ("seconds", 3600.0),
        "count" | "" | "none" => ("", 1.0),
        _ => return None,
    })
}

/// `count x 10^N` and plain dimensions.
fn numerator(text: &str) -> Option<(&'static str, f64)> {
    let text = text.trim();
    if let Some(exp) = text.strip_prefix("count x 10^") {
        let n: i32 = exp.trim().parse().ok()?;
        return (-18..=18).contains(&n).then(|| ("", 10f64.powi(n)));
    }
    dimension(text)
}

/// The base unit of a PCP unit string; `None` for units Prometheus has no name for (`byte /
/// count`, `Kbyte^2`): such a metric keeps its value and name as stored, and its HELP says
/// the unit.
pub fn base_unit(pcp: &str) -> Option<BaseUnit> {
    let (top, bottom) = match pcp.split_once('/') {
        Some((t, b)) => (t, Some(b.trim())),
        None => (pcp, None),
    };
    let (suffix, scale) = numerator(top)?;
    let Some(bottom) = bottom else {
        return Some(BaseUnit { suffix, scale });
    };
    // Rates: only per time has a Prometheus name.
    let (per, per_scale) = dimension(bottom)?;
    if per != "seconds" {
        return None;
    }
    let suffix = match suffix {
        "" => "per_second",
        "bytes" => "bytes_per_second",
        _ => return None,
    };
    Some(BaseUnit {
        suffix,
        scale: scale / per_scale,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(s: &str) -> Option<(&'static str, f64)> {
        base_unit(s).map(|u| (u.suffix, u.scale))
    }

    #[test]
    fn pcp_units_become_base_units() {
        // Every unit the linux PMDA's descriptors use (pminfo -d of domain 60).
        assert_eq!(unit(""), Some(("", 1.0)));
        assert_eq!(unit("count"), Some(("", 1.0)));
        assert_eq!(unit("byte"), Some(("bytes", 1.0)));
        assert_eq!(unit("Kbyte"), Some(("bytes", 1024.0)));
        assert_eq!(unit("Mbyte"), Some(("bytes", 1048576.0)));
        assert_eq!(unit("millisec"), Some(("seconds", 1e-3)));
        assert_eq!(unit("microsec"), Some(("seconds", 1e-6)));
        assert_eq!(unit("nanosec"), Some(("seconds", 1e-9)));
        assert_eq!(unit("sec"), Some(("seconds", 1.0)));
        assert_eq!(unit("Mbyte / sec"), Some(("bytes_per_second", 1048576.0)));
        assert_eq!(unit("byte / sec"), Some(("bytes_per_second", 1.0)));
        assert_eq!(unit("count / sec"), Some(("per_second", 1.0)));
        assert_eq!(unit(" / microsec"), Some(("per_second", 1e6)));
        assert_eq!(unit("count x 10^3"), Some(("", 1000.0)));
        // No Prometheus name: kept as stored.
        assert_eq!(unit("byte / count"), None);
        assert_eq!(unit("furlong"), None);
        assert_eq!(unit("count x 10^99"), None);
    }
}
