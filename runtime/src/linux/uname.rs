//! Kernel and agent identity (cluster 12): uname(2)'s fields, their one-line join
//! (`pmda.uname`), the PCP version whose linux PMDA this agent mirrors, and the distribution
//! named by the first of `/etc/debian_version`, `oracle-release`, ... found under the root.
//!
//! uname(2) describes the live kernel, not a captured tree: under another root its fields
//! have no value. The distribution file is read as pmdalinux reads it: its first line,
//! `Debian ` before Debian's bare version number, `DISTRIB_ID=` dropped from `lsb-release`,
//! and `?` when no file is present.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// The PCP release whose linux PMDA this agent answers as (`pmda.version`).
pub const PCP_VERSION: &str = "6.0.3";

/// Distribution release files under `etc/`, in pmdalinux's order of preference.
const RELEASE_FILES: [&str; 8] = [
    "debian_version",
    "oracle-release",
    "fedora-release",
    "redhat-release",
    "slackware-version",
    "SuSE-release",
    "lsb-release",
    "amazon-linux-release",
];

#[derive(Default)]
pub struct Uname {
    /// sysname, nodename, release, version, machine (live root only).
    uts: Option<[String; 5]>,
    distro: String,
    machine: Option<String>,
}

/// uname(2)'s five fields.
fn uname() -> Option<[String; 5]> {
    // SAFETY: utsname is plain data; uname fills it and NUL-terminates each field.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let f = |b: &[libc::c_char]| {
        let bytes: Vec<u8> = b
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Some([
        f(&u.sysname),
        f(&u.nodename),
        f(&u.release),
        f(&u.version),
        f(&u.machine),
    ])
}

/// The distribution's name as pmdalinux derives it from the first release file present.
fn distro(ctx: &Ctx) -> String {
    let mut buf = String::new();
    for (i, name) in RELEASE_FILES.iter().enumerate() {
        let Ok(text) = ctx.root.read(&format!("etc/{name}"), &mut buf) else {
            continue;
        };
        let mut s: &str = text;
        if *name == "lsb-release" {
            s = s
                .strip_prefix("DISTRIB_ID = ")
                .or_else(|| s.strip_prefix("DISTRIB_ID="))
                .unwrap_or(s);
        }
        let line = s.split('\n').next().unwrap_or("");
        // An empty file reads nothing: pmdalinux then gives no name ("?").
        if text.is_empty() {
            break;
        }
        return if i == 0 {
            format!("Debian {line}")
        } else {
            line.to_string()
        };
    }
    "?".to_string()
}

impl Group for Uname {
    fn answers(&self, m: &Metric) -> bool {
        // hinv.machine (18.7) is uname's machine too, though pmdalinux files it with cpuinfo.
        m.cluster == 12 || (m.cluster == 18 && m.item == 7)
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.uts = if ctx.root.is_live() { uname() } else { None };
        self.distro = distro(ctx);
        self.machine = machine(ctx);
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let text =
            |out: &mut Values, s: &str| out.push((String::new(), Value::Text(s.to_string())));
        if m.cluster == 18 {
            if let Some(s) = &self.machine {
                text(out, s);
            }
            return;
        }
        match (m.item, &self.uts) {
            (0, Some(u)) => text(out, &u[2]),
            (1, Some(u)) => text(out, &u[3]),
            (2, Some(u)) => text(out, &u[0]),
            (3, Some(u)) => text(out, &u[4]),
            (4, Some(u)) => text(out, &u[1]),
            (5, Some(u)) => text(out, &u.join(" ")),
            (6, _) => text(out, PCP_VERSION),
            (7, _) => text(out, &self.distro),
            _ => {}
        }
    }
}

/// hinv.machine: pmdalinux's SGI PROM name when present, else uname's machine (live root
/// only).
fn machine(ctx: &Ctx) -> Option<String> {
    let mut buf = String::new();
    if let Ok(text) = ctx.root.read("proc/sgi_prominfo/node0/version", &mut buf)
        && let Some(line) = text.lines().find(|l| l.starts_with("SGI"))
        && let Some(p) = line.find(" IP")
    {
        return Some(line[p + 1..].chars().take(4).collect());
    }
    if ctx.root.is_live() {
        uname().map(|u| u[4].clone())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, fetch};
    use crate::namespace::Value;

    fn text(a: &mut LinuxAgent, name: &str) -> Option<String> {
        match fetch(a, name).pop() {
            Some((_, Value::Text(s))) => Some(s),
            _ => None,
        }
    }

    #[test]
    fn distro_from_release_files_in_pmdalinux_order() {
        for (files, want) in [
            (
                &[
                    ("etc/debian_version", "12.11\n"),
                    ("etc/lsb-release", "DISTRIB_ID=Ubuntu\n"),
                ][..],
                "Debian 12.11",
            ),
            (
                &[(
                    "etc/lsb-release",
                    "DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE=22.04\n",
                )],
                "Ubuntu",
            ),
            (
                &[(
                    "etc/redhat-release",
                    "Red Hat Enterprise Linux release 9.2 (Plow)\n",
                )],
                "Red Hat Enterprise Linux release 9.2 (Plow)",
            ),
            (&[], "?"),
        ] {
            let (_dir, mut a) = agent(files);
            assert_eq!(
                text(&mut a, "kernel.uname.distro").as_deref(),
                Some(want),
                "{files:?}"
            );
            // A captured tree: no uname(2) values, but the agent's version.
            assert_eq!(text(&mut a, "kernel.uname.release"), None);
            assert_eq!(text(&mut a, "pmda.uname"), None);
            assert_eq!(text(&mut a, "pmda.version").as_deref(), Some("6.0.3"));
        }
    }

    #[test]
    fn live_uname_matches_proc_sys_kernel() {
        let mut a = LinuxAgent::new();
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        assert_eq!(
            text(&mut a, "kernel.uname.release").as_deref(),
            Some(release.trim())
        );
        let sysname = text(&mut a, "kernel.uname.sysname").unwrap();
        assert_eq!(sysname, "Linux");
        let machine = text(&mut a, "kernel.uname.machine").unwrap();
        assert_eq!(text(&mut a, "hinv.machine"), Some(machine));
        let all = text(&mut a, "pmda.uname").unwrap();
        assert!(
            all.starts_with("Linux ") && all.contains(release.trim()),
            "{all}"
        );
    }
}
