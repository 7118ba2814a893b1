//! Guests bundled in the binary, and how a guest reference in config or on the command line
//! resolves to component bytes: a path (anything ending in `.wasm` or containing `/`), else
//! `NAME.wasm` in the guests directory, else the bundled guest `NAME`: compiled into the binary
//! (Rust), or built from its embedded sources on first use (C and Python, `kit::bundled`).
//! Also what each bundled agent brings to its `[[agent]]` entry ([`agent_defaults`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// What a bundled agent brings to an `[[agent]]` entry whose `guest` names it, so that `name`
/// and `guest` are all the entry needs: each field the entry gives itself wins. The agent's
/// names, PMIDs, descriptors and help are its own (it answers for the roots of `pmns`
/// dynamically); these are only what the daemon must know before it asks.
#[derive(Debug)]
pub struct AgentDefaults {
    /// The bundled guest's name.
    pub guest: &'static str,
    /// The PCP domain of its PMIDs: that of the PCP agent it stands in for, where PCP has one.
    pub domain: u32,
    /// Its part of the PMNS, in PCP's ASCII format.
    pub pmns: &'static str,
    /// Directories it reads, each granted read-only at the same path in the sandbox.
    pub dirs: &'static [&'static str],
}

/// The bundled agents' defaults (another language's agent, built into guests-dir under one of
/// these names, gets them too).
pub const AGENT_DEFAULTS: &[AgentDefaults] = &[
    AgentDefaults {
        guest: "foo",
        domain: 44,
        pmns: "root { foo }\nfoo {\n    version 44:0:1\n    count   44:*:*\n    memory  44:0:2\n}\n",
        dirs: &[],
    },
    // pmdainfiniband's domain.
    AgentDefaults {
        guest: "infiniband",
        domain: 91,
        pmns: "root { infiniband 91:*:* }",
        dirs: &["/sys"],
    },
    // pmdadenki's domain.
    AgentDefaults {
        guest: "denki",
        domain: 156,
        pmns: "root { denki 156:*:* }",
        dirs: &["/sys"],
    },
    // No PCP agent has these names: a domain PCP's stdpmid leaves unassigned (159-240).
    AgentDefaults {
        guest: "hwmon",
        domain: 180,
        pmns: "root { hwmon 180:*:* }",
        dirs: &["/sys"],
    },
    // pmdalustre's domain; debugfs (Lustre 2.12 and later) under /sys, else /proc.
    AgentDefaults {
        guest: "lustre",
        domain: 134,
        pmns: "root { lustre 134:*:* }",
        dirs: &["/sys", "/proc"],
    },
    // schedstat, cpufreq and core topology per CPU, which PCP's linux PMDA does not read.
    AgentDefaults {
        guest: "cpusys",
        domain: 181,
        pmns: "root { cpusys 181:*:* }",
        dirs: &["/proc", "/sys"],
    },
    // C, built from source on first use: pmdanfsclient's domain and names.
    AgentDefaults {
        guest: "nfsclient",
        domain: 62,
        pmns: "root { nfsclient 62:*:* }\n",
        dirs: &["/proc"],
    },
    // Python, built from source on first use (`wasmon guest prepare slurm`): PCP's own slurm
    // PMDA (domain 23) asks slurmctld, so this one takes an end-user domain.
    AgentDefaults {
        guest: "slurm",
        domain: 490,
        pmns: "root { slurm 490:*:* }\n",
        // The jobs' cgroups, and the online CPUs (slurm_cgroup's zeros for idle threads).
        dirs: &["/sys/fs/cgroup", "/sys/devices/system/cpu"],
    },
];

/// The defaults of the bundled agent `guest` (a bare name, not a path).
pub fn agent_defaults(guest: &str) -> Option<&'static AgentDefaults> {
    AGENT_DEFAULTS.iter().find(|d| d.guest == guest)
}

/// Where a guest's bytes came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Bundled(&'static str),
    File(PathBuf),
    /// Published to the fleet: the guest's name and the component's sha256.
    Fleet(String, String),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Bundled(n) => write!(f, "bundled guest `{n}`"),
            Origin::File(p) => write!(f, "{}", p.display()),
            Origin::Fleet(n, h) => write!(f, "fleet guest `{n}` ({})", &h[..h.len().min(12)]),
        }
    }
}

/// Component bytes and where they came from.
pub struct Source {
    pub bytes: Vec<u8>,
    pub origin: Origin,
}

/// Names of the bundled guests (compiled in, and built from source on first use).
pub fn bundled_names() -> impl Iterator<Item = &'static str> {
    BUNDLED
        .iter()
        .map(|(n, _)| *n)
        .chain(crate::kit::bundled::names())
}

/// Resolves `reference`; relative paths are taken from `base` (the config file's directory).
pub fn resolve(reference: &str, guests_dir: Option<&Path>, base: &Path) -> Result<Source> {
    if reference.ends_with(".wasm") || reference.contains('/') {
        let path = base.join(reference);
        let bytes =
            std::fs::read(&path).with_context(|| format!("reading guest {}", path.display()))?;
        return Ok(Source {
            bytes,
            origin: Origin::File(path),
        });
    }
    if let Some(dir) = guests_dir.filter(|d| !d.as_os_str().is_empty()) {
        let path = base.join(dir).join(format!("{reference}.wasm"));
        if path.exists() {
            let bytes = std::fs::read(&path)
                .with_context(|| format!("reading guest {}", path.display()))?;
            return Ok(Source {
                bytes,
                origin: Origin::File(path),
            });
        }
    }
    if let Some((name, bytes)) = BUNDLED.iter().find(|(n, _)| *n == reference) {
        return Ok(Source {
            bytes: bytes.to_vec(),
            origin: Origin::Bundled(name),
        });
    }
    let built = crate::kit::bundled::component(
        reference,
        &crate::kit::bundled::cache_dir(),
        &crate::kit::toolchains_dir(),
        false,
    )?;
    match built {
        Some(path) => {
            let bytes = std::fs::read(&path)
                .with_context(|| format!("reading guest {}", path.display()))?;
            Ok(Source {
                bytes,
                origin: Origin::File(path),
            })
        }
        None => bail!(
            "no guest named {reference:?}: not a .wasm path, not in the guests directory, and not bundled (bundled: {})",
            bundled_names().collect::<Vec<_>>().join(", ")
        ),
    }
}
