//! The `[fabric]` section of the daemon's config: which fabric this agent reads, where it
//! sits in the tree, its epoch and lease, and the programmable thresholds. Plain serde
//! structs with defaults; checked by [`FabricConfig::check`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::counters::{Class, CounterDesc};
use super::engine::Thresholds;

/// Which counters an agent reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// `/sys/class/net/*/statistics` of this host.
    Net,
    /// `/sys/class/infiniband/*/ports/*/counters` of this host.
    Infiniband,
    /// A fabric simulated by `wasmon fabric simulate` (its file is `path`).
    Simulated,
}

crate::nats::section! {
    /// `[fabric]`: one agent of the fabric hierarchy, and its NATS credentials and TLS as in
    /// `[nats]`.
    #[derive(Clone, Debug, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
    pub struct FabricConfig as FabricToml (servers: nats, "fabric.nats") {
        /// Run the fabric agent at all.
        pub enabled: bool,
        /// The NATS server (with JetStream) the agents coordinate through, or a cluster's seeds
        /// (a list, or URLs separated by commas).
        #[serde(deserialize_with = "crate::nats::servers")]
        pub nats: String,
        /// The fabric's name: buckets are `wasmon-fabric-NAME-leases` / `-owners`, subjects
        /// start with `wasmon.fabric.NAME`. Letters, digits, `-` and `_`.
        pub name: String,
        /// This agent's id, unique in the fabric (default: the host name).
        pub agent: String,
        /// The agent this one reports to; empty: this is the master.
        pub parent: String,
        pub source: SourceKind,
        /// `simulated`: the fabric file; `net` / `infiniband`: the sysfs directory (default
        /// `/sys/class/net` / `/sys/class/infiniband`).
        pub path: Option<PathBuf>,
        /// Nodes discovery starts from (the adapters this agent's host is plugged into).
        /// Empty: every node of a sysfs source (they are all local).
        pub attach: Vec<String>,
        /// How often counters are read (sysfs sources; a simulated fabric paces its own epochs).
        #[serde(with = "crate::duration::serde")]
        pub epoch: Duration,
        /// Lease of an agent: its ports are taken over when it has not renewed for this long.
        /// The lease bucket's `max_age`. At least two epochs.
        #[serde(with = "crate::duration::serde")]
        pub lease: Duration,
        /// The pipeline reported port counters (`fabric.COUNTER`, resource `NODE/PORT`) enter.
        pub pipeline: Option<String>,
        /// Subscriber that owns the trap thresholds and receives the traps.
        pub subscriber: String,
        /// Trap thresholds of error counters: an increase of at least N in one epoch traps.
        /// Counters not named use `trap-default`; 0 disables a counter's traps.
        pub traps: BTreeMap<String, u64>,
        pub trap_default: u64,
        /// Change thresholds of data, packet and congestion counters (bytes for data):
        /// a counter is reported when it changed by more than N since it was last reported.
        /// Counters not named use the defaults below.
        pub change: BTreeMap<String, u64>,
        pub change_bytes_default: u64,
        pub change_count_default: u64,
        /// Replicas of the fabric's key-value buckets when this agent creates them (1 when not
        /// set; 3 on a 3-server cluster). When set, an existing bucket with another number is
        /// reported, not used.
        pub replicas: Option<usize>,
    }
}

/// The section's defaults for the keys a `[fabric]` leaves out.
impl Default for FabricToml {
    fn default() -> Self {
        FabricConfig::default().into()
    }
}

impl Default for FabricConfig {
    fn default() -> Self {
        FabricConfig {
            enabled: false,
            nats: "nats://127.0.0.1:4222".into(),
            name: "fabric".into(),
            agent: String::new(),
            parent: String::new(),
            source: SourceKind::Net,
            path: None,
            attach: Vec::new(),
            epoch: Duration::from_secs(10),
            lease: Duration::from_secs(30),
            pipeline: None,
            subscriber: "wasmon.fabric".into(),
            traps: BTreeMap::new(),
            trap_default: 10,
            change: BTreeMap::new(),
            change_bytes_default: 1 << 20,
            change_count_default: 10_000,
            replicas: None,
            auth: Default::default(),
        }
    }
}

fn name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl FabricConfig {
    /// The agent id: `agent`, or the host name.
    pub fn agent_id(&self) -> String {
        crate::util::name_or_host(&self.agent)
    }

    pub fn check(&self) -> Result<(), String> {
        self.connection()
            .check(None)
            .map_err(|(f, p)| format!("{f}: {p}"))?;
        if let Some(r) = self.replicas {
            crate::nats::check_replicas(r).map_err(|e| format!("fabric.replicas = {e}"))?;
        }
        if !name_ok(&self.name) {
            return Err(format!(
                "fabric.name {:?}: letters, digits, '-' and '_' only",
                self.name
            ));
        }
        for (what, v) in [("agent", &self.agent), ("parent", &self.parent)] {
            if !v.is_empty() && !name_ok(v) {
                return Err(format!(
                    "fabric.{what} {v:?}: letters, digits, '-' and '_' only"
                ));
            }
        }
        if !self.parent.is_empty() && self.parent == self.agent_id() {
            return Err("fabric.parent: an agent cannot report to itself".into());
        }
        if self.epoch < Duration::from_millis(10) {
            return Err("fabric.epoch must be at least 10ms".into());
        }
        if self.lease < 2 * self.epoch && self.source != SourceKind::Simulated {
            return Err(format!(
                "fabric.lease ({:?}) must be at least two epochs ({:?})",
                self.lease,
                2 * self.epoch
            ));
        }
        if self.lease < Duration::from_millis(200) {
            return Err("fabric.lease must be at least 200ms".into());
        }
        if self.source == SourceKind::Simulated && self.path.is_none() {
            return Err(
                "fabric.path: a simulated fabric needs the file of `wasmon fabric simulate`".into(),
            );
        }
        Ok(())
    }

    /// The thresholds for a source's counter table; names that are not in it are refused.
    pub fn thresholds(&self, schema: &[CounterDesc]) -> Result<Thresholds, String> {
        for (map, what) in [(&self.traps, "traps"), (&self.change, "change")] {
            for k in map.keys() {
                if !schema.iter().any(|c| c.name == k) {
                    let known: Vec<&str> = schema.iter().map(|c| c.name).collect();
                    return Err(format!(
                        "fabric.{what}: no counter {k:?} (known: {})",
                        known.join(", ")
                    ));
                }
            }
        }
        Ok(Thresholds {
            trap: schema
                .iter()
                .map(|c| match c.class {
                    Class::Error => *self.traps.get(c.name).unwrap_or(&self.trap_default),
                    _ => 0,
                })
                .collect(),
            change: schema
                .iter()
                .map(|c| {
                    self.change.get(c.name).copied().unwrap_or(match c.class {
                        Class::Data => self.change_bytes_default,
                        _ => self.change_count_default,
                    })
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::counters::{IB_EXTENDED, find};

    #[test]
    fn a_fabric_section_parses_with_defaults_and_refuses_unknowns() {
        let c: FabricConfig = toml::from_str(
            "enabled = true\nagent = \"a2\"\nparent = \"a1\"\nsource = \"simulated\"\npath = \"f.sim\"\nlease = \"1s\"\ntraps = { symbol_error = 100 }\n",
        )
        .unwrap();
        assert_eq!(c.epoch, Duration::from_secs(10));
        c.check().unwrap();
        let t = c.thresholds(&IB_EXTENDED).unwrap();
        assert_eq!(t.trap[find(&IB_EXTENDED, "symbol_error").unwrap()], 100);
        assert_eq!(t.trap[find(&IB_EXTENDED, "link_downed").unwrap()], 10);
        assert_eq!(t.trap[0], 0, "data counters never trap");
        assert_eq!(t.change[0], 1 << 20);
        let e = toml::from_str::<FabricConfig>("epochs = \"1s\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("epochs"), "{e}");
        let bad = FabricConfig {
            traps: [("symbol_errors".to_string(), 1)].into(),
            ..c.clone()
        };
        assert!(
            bad.thresholds(&IB_EXTENDED)
                .unwrap_err()
                .contains("symbol_errors")
        );
        let me = FabricConfig {
            parent: "a2".into(),
            ..c.clone()
        };
        assert!(me.check().unwrap_err().contains("itself"));
        let short = FabricConfig {
            source: SourceKind::Net,
            lease: Duration::from_secs(1),
            ..c.clone()
        };
        assert!(short.check().unwrap_err().contains("two epochs"));
        let nofile = FabricConfig { path: None, ..c };
        assert!(nofile.check().unwrap_err().contains("fabric.path"));
    }
}
