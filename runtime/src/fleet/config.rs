//! The `[fleet]` section: which NATS server and fleet this daemon follows, its rollout groups,
//! the keys a published component must be signed by, and the rollout's limits. Plain serde
//! structs with defaults, checked by [`FleetConfig::check`]; read at start only.

use std::time::Duration;

use base64::Engine as _;

/// The group every daemon of a fleet is in: a release published without `--group`.
pub const ALL: &str = "all";

/// How long after a swap a quarantine rolls the new version back.
pub const DEFAULT_ROLLBACK_WINDOW: Duration = Duration::from_secs(120);
/// The largest component a daemon fetches: Python guests (componentize-py) are ~18 MB; four
/// times that leaves room while a hostile 1 GB object is refused before its first chunk.
pub const DEFAULT_MAX_COMPONENT_SIZE: u64 = 64 << 20;
/// How long a start waits for NATS before it runs the last verified versions from disk.
pub const DEFAULT_START_WAIT: Duration = Duration::from_secs(5);
pub use crate::nats::MAX_REPLICAS;

crate::nats::section! {
    /// `[fleet]`: guests published once into JetStream, run by every daemon of the fleet, and
    /// the NATS credentials and TLS (paths relative to the config file).
    #[derive(Clone, Debug, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    pub struct FleetConfig as FleetToml (servers: nats, "fleet.nats") {
        /// The NATS server (with JetStream) the fleet's buckets live on, or a cluster's seeds (a
        /// list, or URLs separated by commas).
        #[serde(deserialize_with = "crate::nats::servers")]
        pub nats: String,
        /// The fleet's name: its buckets are `wasmon-fleet-NAME` (components),
        /// `wasmon-fleet-NAME-releases` and `wasmon-fleet-NAME-health`. Letters, digits, `-`, `_`.
        pub name: String,
        /// Rollout groups this daemon belongs to (it always follows releases to `all`).
        #[serde(default)]
        pub groups: Vec<String>,
        /// Base64 Ed25519 public keys; a published component must be signed by one of them.
        /// Empty: unsigned components are accepted (with a warning at start).
        #[serde(default)]
        pub trusted_keys: Vec<String>,
        /// This daemon's name in the health bucket (default: the host name).
        #[serde(default)]
        pub node: String,
        /// A new version quarantined within this time after its swap is rolled back.
        #[serde(default = "rollback_window", with = "crate::duration::serde")]
        pub rollback_window: Duration,
        /// Components larger than this are refused before they are fetched.
        #[serde(default = "max_size", with = "crate::util::size")]
        pub max_component_size: u64,
        /// How long a start waits for NATS before running the last verified versions from disk.
        #[serde(default = "start_wait", with = "crate::duration::serde")]
        pub start_wait: Duration,
        /// Replicas of the fleet's buckets when this daemon creates them (1 to 5, 1 when not set;
        /// more than 1 needs a JetStream cluster of at least that many servers). When set, an
        /// existing bucket with another number is reported, not used.
        #[serde(default)]
        pub replicas: Option<usize>,
    }
}

fn rollback_window() -> Duration {
    DEFAULT_ROLLBACK_WINDOW
}
fn max_size() -> u64 {
    DEFAULT_MAX_COMPONENT_SIZE
}
fn start_wait() -> Duration {
    DEFAULT_START_WAIT
}

/// Letters, digits, `-` and `_`: safe in bucket names, KV keys and subjects.
pub fn name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Decodes a base64 Ed25519 public key.
pub fn parse_key(b64: &str) -> Result<ed25519_dalek::VerifyingKey, String> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    let bytes: [u8; 32] = raw
        .try_into()
        .map_err(|v: Vec<u8>| format!("{} bytes, an Ed25519 public key has 32", v.len()))?;
    ed25519_dalek::VerifyingKey::from_bytes(&bytes).map_err(|e| format!("not a valid key: {e}"))
}

impl FleetConfig {
    /// The node name: `node`, or the host name made key-safe.
    pub fn node_id(&self) -> String {
        crate::util::name_or_host(&self.node)
    }

    /// The trusted keys, decoded.
    pub fn keys(&self) -> Vec<ed25519_dalek::VerifyingKey> {
        self.trusted_keys
            .iter()
            .filter_map(|k| parse_key(k).ok())
            .collect()
    }

    pub fn check(&self) -> Result<(), String> {
        if !name_ok(&self.name) {
            return Err(format!(
                "fleet.name {:?}: letters, digits, '-' and '_' only",
                self.name
            ));
        }
        self.connection()
            .check(None)
            .map_err(|(f, p)| format!("{f}: {p}"))?;
        for (i, g) in self.groups.iter().enumerate() {
            if !name_ok(g) {
                return Err(format!(
                    "fleet.groups[{i}] {g:?}: letters, digits, '-' and '_' only"
                ));
            }
        }
        if !self.node.is_empty() && !name_ok(&self.node) {
            return Err(format!(
                "fleet.node {:?}: letters, digits, '-' and '_' only",
                self.node
            ));
        }
        for (i, k) in self.trusted_keys.iter().enumerate() {
            parse_key(k).map_err(|e| format!("fleet.trusted-keys[{i}]: {e}"))?;
        }
        if let Some(r) = self.replicas {
            crate::nats::check_replicas(r).map_err(|e| format!("fleet.replicas = {e}"))?;
        }
        if self.max_component_size == 0 {
            return Err("fleet.max-component-size must be positive".into());
        }
        Ok(())
    }

    /// Whether a release to `group` is for this daemon.
    pub fn follows(&self, group: &str) -> bool {
        group == ALL || self.groups.iter().any(|g| g == group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &str) -> Result<FleetConfig, String> {
        let text = format!("nats = \"nats://h:4222\"\nname = \"prod\"\n{extra}");
        let c: FleetConfig = toml::from_str(&text).map_err(|e| e.to_string())?;
        c.check()?;
        Ok(c)
    }

    #[test]
    fn fleet_config_defaults_and_errors_name_the_field() {
        let c = parse("groups = [\"canary\"]").unwrap();
        assert!(c.follows("all") && c.follows("canary") && !c.follows("rack7"));
        assert_eq!(c.rollback_window, DEFAULT_ROLLBACK_WINDOW);
        assert_eq!(c.replicas, None);
        assert_eq!(parse("replicas = 3").unwrap().replicas, Some(3));
        assert_eq!(
            parse("").unwrap().connection().addresses().unwrap().len(),
            1
        );
        assert_eq!(
            parse("max-component-size = \"1MiB\"")
                .unwrap()
                .max_component_size,
            1 << 20
        );
        for (extra, names) in [
            ("trusted-keys = [\"bm90IGEga2V5\"]", "trusted-keys[0]"),
            ("trusted-keys = [\"%%%\"]", "trusted-keys[0]"),
            ("groups = [\"a.b\"]", "groups[0]"),
            ("node = \"x y\"", "fleet.node"),
            ("tls-cert = \"c.pem\"", "tls-key"),
            ("username = \"u\"", "fleet.username"),
            ("rollback-windw = \"1s\"", "rollback-windw"),
            ("replicas = 0", "fleet.replicas = 0"),
            ("replicas = 6", "fleet.replicas = 6"),
        ] {
            let e = parse(extra).unwrap_err();
            assert!(e.contains(names), "{extra}: {e}");
        }
        let key = base64::engine::general_purpose::STANDARD.encode(
            ed25519_dalek::SigningKey::from_bytes(&[3; 32])
                .verifying_key()
                .as_bytes(),
        );
        let c = parse(&format!("trusted-keys = [\"{key}\"]")).unwrap();
        assert_eq!(c.keys().len(), 1);
        let seeds = |v: &str| {
            let c: FleetConfig = toml::from_str(&format!("nats = {v}\nname = \"prod\"")).unwrap();
            c.check()
                .map(|()| c.connection().addresses().unwrap().len())
        };
        assert_eq!(seeds("['nats://a:1', 'nats://b:2', 'tls://c:3']"), Ok(3));
        assert_eq!(seeds("'nats://a:1,nats://b:2'"), Ok(2));
        let e = seeds("'nats://a:1,nats://b:port'").unwrap_err();
        assert!(e.starts_with("fleet.nats: server 2 of 2"), "{e}");
    }
}
