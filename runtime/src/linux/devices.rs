//! Which disks, interfaces and filesystems the linux agent reports: include and exclude
//! patterns per kind (`[agent.devices]` in the config). By default every device is reported,
//! as pmdalinux does, so answers match pmcd's; an operator narrows them (loop devices,
//! container veths, a site's scratch mounts).
//!
//! Owns only the patterns and their matching.

use serde::{Deserialize, Serialize};

/// Patterns for one kind of device. A name is reported when it matches an `include`
/// pattern (or `include` is empty) and no `exclude` pattern. Patterns are globs: `*` any
/// run of characters, `?` one character, everything else itself (`loop*`, `veth*`,
/// `/run/user/*`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceFilter {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
}

impl DeviceFilter {
    pub fn admits(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|p| glob(p, name)))
            && !self.exclude.iter().any(|p| glob(p, name))
    }
}

/// The filters of each kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Devices {
    /// Block devices by kernel name (`sda`, `nvme0n1p1`, `dm-0`, `md127`).
    #[serde(default)]
    pub disks: DeviceFilter,
    /// Network interfaces by name (`eth0`, `lo`, `veth1a2b`).
    #[serde(default)]
    pub interfaces: DeviceFilter,
    /// Filesystems by mount point (`/`, `/scratch`, `/run/user/1000`).
    #[serde(default)]
    pub filesystems: DeviceFilter,
}

/// Glob match with `*` and `?`, iterative (no recursion a hostile pattern could deepen).
fn glob(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    // Where the last `*` was, and the name position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_filters() {
        assert!(glob("loop*", "loop0"));
        assert!(glob("*", ""));
        assert!(glob("sd?", "sda") && !glob("sd?", "sda1"));
        assert!(glob("/run/user/*", "/run/user/1000"));
        assert!(glob("*a*b", "xxaxxb") && !glob("*a*b", "xxaxxbc"));
        assert!(!glob("", "x"));
        let f = DeviceFilter {
            include: vec![],
            exclude: vec!["loop*".into(), "ram*".into()],
        };
        assert!(f.admits("sda") && !f.admits("loop3"));
        let f = DeviceFilter {
            include: vec!["eth*".into()],
            exclude: vec!["eth9".into()],
        };
        assert!(f.admits("eth0") && !f.admits("eth9") && !f.admits("lo"));
        assert!(DeviceFilter::default().admits("anything"));
    }
}
