//! `config` owns the daemon's configuration: its TOML shape (every struct refuses unknown
//! fields), defaults, the embedded default file, and checks that serde cannot express. It
//! loads nothing else: guests are resolved and compiled by the daemon.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::host::{Grants, limits};

/// The configuration `wasmon run` uses without `--config`; `wasmon config default` prints it.
pub const DEFAULT: &str = include_str!("default-config.toml");

/// Configurations for a role (`wasmon config default --profile NAME`): `clustercockpit`, a
/// node sending what cc-metric-collector's example collector config sends.
pub const PROFILES: &[(&str, &str)] = &[(
    "clustercockpit",
    include_str!("profile-clustercockpit.toml"),
)];

/// The profile named `name`, or an error listing the ones there are.
pub fn profile(name: &str) -> anyhow::Result<&'static str> {
    PROFILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
        .ok_or_else(|| {
            let known: Vec<&str> = PROFILES.iter().map(|(n, _)| *n).collect();
            anyhow::anyhow!("no profile {name:?} (profiles: {})", known.join(", "))
        })
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    #[serde(default)]
    pub daemon: DaemonConfig,
    #[serde(default)]
    pub guest_defaults: GuestDefaults,
    #[serde(default, rename = "pipeline")]
    pub pipelines: Vec<PipelineConfig>,
    /// Forwarding sinks pipelines name in their `sinks` (`[[sink]]`).
    #[serde(default, rename = "sink", skip_serializing_if = "Vec::is_empty")]
    pub sinks: Vec<crate::sink::SinkConfig>,
    #[serde(default)]
    pub namespace: NamespaceConfig,
    #[serde(default, rename = "agent")]
    pub agents: Vec<AgentConfig>,
    /// The buffer store (`[store]`); read at start only.
    #[serde(default)]
    pub store: crate::store::config::StoreConfig,
    /// The HTTP API: auth, TLS, query limits, receivers (`[api]`).
    #[serde(default)]
    pub api: ApiConfig,
    /// Line protocol from NATS subjects into the store (`[nats]`).
    #[serde(default)]
    pub nats: Option<crate::ingest::NatsConfig>,
    /// Thresholds and their subscribers (`[notify]`, `[notify.nats]`).
    #[serde(default)]
    pub notify: crate::notify::NotifierConfig,
    /// The process reader and its detectors (`[procfs]`).
    #[serde(default)]
    pub procfs: crate::procfs::ProcfsConfig,
    /// The fabric poller and its agent hierarchy over NATS (`[fabric]`); read at start only.
    #[serde(default)]
    pub fabric: crate::fabric::FabricConfig,
    /// The daemon's log: level and format (`[log]`); read at start only.
    #[serde(default)]
    pub log: crate::logging::LogConfig,
    /// The pmcd-compatible port for PCP's tools (`[pcp]`); read at start only.
    #[serde(default)]
    pub pcp: crate::pcp::PcpConfig,
    /// Guests published to a fleet over NATS JetStream (`[fleet]`); read at start only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<crate::fleet::FleetConfig>,
}

/// `[api]`: the HTTP API's authentication and TLS, the query limits of cc-metric-store's
/// routes, and the pipelines the Prometheus and OTLP receivers feed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct ApiConfig {
    /// Base64 Ed25519 public key; when set every request needs a valid `Bearer` JWT.
    pub jwt_public_key: Option<String>,
    /// Roles (JWT `roles` claim) allowed to call `/api/free` and `/api/debug`.
    pub admin_roles: Vec<String>,
    /// `/api/healthcheck?cluster=&node=` reports a node unhealthy when its newest sample is
    /// older than this.
    #[serde(with = "crate::duration::serde")]
    pub healthcheck_max_age: Duration,
    /// Series (selectors) one `/api/query` request may read; more is refused with 413.
    pub max_query_series: usize,
    /// Values (data and padding) one `/api/query` request may return; more is refused with
    /// 413. Each value costs the daemon ~40 bytes while the answer is built and sent.
    pub max_query_values: usize,
    /// PEM certificate chain: with `tls-key`, the API is served over HTTPS only.
    pub tls_cert: Option<std::path::PathBuf>,
    /// PEM private key of `tls-cert`.
    pub tls_key: Option<std::path::PathBuf>,
    /// PEM CA(s): clients must present a certificate that chains to one of them (mutual TLS).
    pub tls_client_ca: Option<std::path::PathBuf>,
    /// The pipeline Prometheus remote write to the conventional `/api/v1/write` goes into
    /// (unset: that path answers 404; `/api/pipelines/NAME/prometheus` works regardless).
    pub prometheus_pipeline: Option<String>,
    /// The pipeline OTLP/HTTP metrics to the conventional `/v1/metrics` go into (unset: 404;
    /// `/api/pipelines/NAME/otlp` works regardless).
    pub otlp_pipeline: Option<String>,
    /// Samples one remote-write or OTLP request may carry, histogram buckets counted; more is
    /// refused whole with 413 naming it.
    pub max_receive_samples: usize,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            jwt_public_key: None,
            admin_roles: vec!["admin".into()],
            healthcheck_max_age: Duration::from_secs(300),
            max_query_series: MAX_QUERY_SERIES,
            max_query_values: MAX_QUERY_VALUES,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            prometheus_pipeline: None,
            otlp_pipeline: None,
            max_receive_samples: MAX_RECEIVE_SAMPLES,
        }
    }
}

/// Default of `[api] max-receive-samples`. Senders batch far below it (Prometheus sends at
/// most 2,000 samples a request by default, OpenTelemetry SDKs one export per interval);
/// a request's samples are held decoded until the pipeline took them, ~100 bytes each with
/// their metadata, so 100,000 cost ~10 MB.
pub const MAX_RECEIVE_SAMPLES: usize = 100_000;

/// Default of `[api] max-query-series`: series (selectors) one request may read.
/// `type-ids` x `subtype-ids` multiply, and a careless client can name millions; the largest
/// real case, every core of every node of a big job, is in the tens of thousands.
pub const MAX_QUERY_SERIES: usize = 100_000;
/// Default of `[api] max-query-values`: values (data and padding) one request may return.
/// 4 M values cost the daemon ~160 MB while the answer is built (numbers, then JSON): a day
/// of 60 s data from 1,000 nodes x 2 metrics, or an hour of 10 s data from 1,000 x 10. Past
/// it the request is refused with 413 naming the limit, instead of growing the daemon by
/// gigabytes.
pub const MAX_QUERY_VALUES: usize = 4 << 20;

/// The metric namespace beyond what agents bring.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct NamespaceConfig {
    /// PMNS files in PCP's ASCII format, relative to the config file.
    #[serde(default)]
    pub pmns: Vec<PathBuf>,
}

/// A guest's limits and grants, in `[[agent]]` and `[[pipeline.transformer]]` alike: each
/// limit left out is `[guest-defaults]`'s.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GuestLimits {
    /// Wall time one call may take.
    pub deadline: Option<Duration>,
    /// The instance's memory cap.
    pub memory: Option<u64>,
    /// Failed calls in a row before the guest is quarantined.
    pub quarantine_after: Option<u32>,
    /// Directories and mapped files it may read.
    pub grants: Grants,
}

/// Declares a section that runs a guest (see [`crate::flat::section!`]): the struct as
/// written plus `limits` ([`GuestLimits`]), spelt flat (`deadline = "50ms"`, `grants.dirs`).
macro_rules! guest_section {
    (
        $(#[doc = $doc:literal])*
        #[derive($($derive:path),* $(,)?)]
        #[serde($($container:tt)*)]
        pub struct $name:ident as $flat:ident {
            $($body:tt)*
        }
    ) => {
        crate::flat::section! {
            group limits: GuestLimits {
                #[serde(
                    default,
                    with = "crate::duration::serde::option",
                    skip_serializing_if = "Option::is_none"
                )]
                deadline: Option<Duration>,
                #[serde(
                    default,
                    with = "crate::util::size::option",
                    skip_serializing_if = "Option::is_none"
                )]
                memory: Option<u64>,
                #[serde(default)]
                quarantine_after: Option<u32>,
                #[serde(default)]
                grants: Grants,
            }
            $(#[doc = $doc])*
            #[derive($($derive),*)]
            #[serde($($container)*)]
            pub struct $name as $flat {
                $($body)*
            }
        }
    };
}

guest_section! {
    /// An agent: it owns part of the namespace and fetches values.
    #[derive(Debug, Clone, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    pub struct AgentConfig as AgentToml {
        /// Name for logs and counters.
        pub name: String,
        /// A guest of the `agent` world: bundled name, NAME in guests-dir, or a `.wasm` path.
        #[serde(default)]
        pub guest: Option<String>,
        /// An agent built into the daemon instead of a guest: `linux` or `proc`.
        #[serde(default)]
        pub native: Option<String>,
        /// The PCP domain it serves (defaults for native agents: linux 60, proc 3).
        #[serde(default)]
        pub domain: Option<u32>,
        /// Its part of the PMNS in PCP's ASCII format (static names, and dynamic roots such as
        /// `count 44:*:*`); native agents bring their own.
        #[serde(default)]
        pub pmns: Option<String>,
        /// Handed to the guest's `configure` as a JSON object.
        #[serde(default = "empty_table")]
        pub params: toml::Table,
        /// Fetch the agent's metrics on this interval and send them to `pipeline`.
        #[serde(
            default,
            with = "crate::duration::serde::option",
            skip_serializing_if = "Option::is_none"
        )]
        pub poll_interval: Option<Duration>,
        /// Names (or non-leaf prefixes) to poll; default: everything under the names its PMNS
        /// puts at the root.
        #[serde(default)]
        pub poll_names: Vec<String>,
        /// The pipeline polled samples enter.
        #[serde(default)]
        pub pipeline: Option<String>,
        /// More pipelines fed on the same `poll-interval`, each with the names it wants (a
        /// `rate_of_change` pipeline takes the CPU counters only).
        #[serde(default, rename = "feed", skip_serializing_if = "Vec::is_empty")]
        pub feeds: Vec<FeedConfig>,
        /// Native agents: the directory their `proc/` and `sys/` are read under (`/` by
        /// default; PCP's `LINUX_STATSPATH`): a captured tree, or a host's /proc mounted in a
        /// container.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub root: Option<PathBuf>,
        /// The linux agent: which disks, interfaces and filesystems it reports.
        #[serde(default, skip_serializing_if = "is_default")]
        pub devices: crate::linux::Devices,
        /// Guest agents: a path as the guest sees it (under one of its `grants.dirs`), checked
        /// at start and at every reload: while it does not exist the agent is not run (the
        /// embedded config's hardware agents: `/sys/class/infiniband`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub when_present: Option<String>,
    }
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Agents built into the daemon, with their PCP domains.
pub const NATIVE_AGENTS: &[(&str, u32)] = &[
    ("linux", crate::linux::LINUX_DOMAIN),
    ("proc", crate::procfs::agent::PROC_DOMAIN),
];

impl AgentConfig {
    /// Fills what the entry leaves out from its bundled agent's defaults.
    fn fill_bundled_defaults(&mut self) {
        let Some(d) = self
            .guest
            .as_deref()
            .and_then(crate::guests::agent_defaults)
        else {
            return;
        };
        self.domain.get_or_insert(d.domain);
        self.pmns.get_or_insert_with(|| d.pmns.to_string());
        if self.limits.grants.dirs.is_empty() {
            self.limits.grants.dirs = d
                .dirs
                .iter()
                .map(|dir| crate::host::DirGrant {
                    host: dir.into(),
                    guest: dir.to_string(),
                    read_only: true,
                })
                .collect();
        }
    }

    /// `when-present` on the host: the path under the grant that holds it, the grant's host
    /// directory taken from `base` when relative. `None`: not set, or under no grant.
    pub fn when_present_on_host(&self, base: &Path) -> Option<PathBuf> {
        let path = Path::new(self.when_present.as_deref()?);
        self.limits
            .grants
            .dirs
            .iter()
            .filter_map(|d| Some((d, path.strip_prefix(&d.guest).ok()?)))
            .max_by_key(|(d, _)| d.guest.len())
            .map(|(d, rest)| base.join(&d.host).join(rest))
    }

    /// The PCP domain it serves: its own, or its native agent's.
    pub fn served_domain(&self) -> u32 {
        self.domain.unwrap_or_else(|| {
            let native = self.native.as_deref().unwrap_or("");
            NATIVE_AGENTS
                .iter()
                .find(|(n, _)| *n == native)
                .map_or(crate::linux::LINUX_DOMAIN, |(_, d)| *d)
        })
    }
}

fn native_names() -> String {
    NATIVE_AGENTS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DaemonConfig {
    /// Address of the HTTP API.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// State directory.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// Directory of guest components, watched for changes; empty for none.
    #[serde(default)]
    pub guests_dir: PathBuf,
    /// How often the config file and guests-dir are checked for changes.
    #[serde(default = "default_watch", with = "crate::duration::serde")]
    pub watch_interval: Duration,
    /// The cluster samples from this daemon are stored under (unless their metadata names one).
    #[serde(default = "default_cluster")]
    pub cluster: String,
}

fn default_cluster() -> String {
    "local".into()
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            listen: default_listen(),
            data_dir: default_data_dir(),
            guests_dir: PathBuf::new(),
            watch_interval: default_watch(),
            cluster: default_cluster(),
        }
    }
}

fn default_listen() -> SocketAddr {
    "127.0.0.1:8082".parse().unwrap()
}
fn default_data_dir() -> PathBuf {
    "wasmon-data".into()
}
fn default_watch() -> Duration {
    Duration::from_secs(1)
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GuestDefaults {
    #[serde(default = "default_deadline", with = "crate::duration::serde")]
    pub deadline: Duration,
    #[serde(default = "default_memory", with = "crate::util::size")]
    pub memory: u64,
    #[serde(default = "default_quarantine")]
    pub quarantine_after: u32,
}

impl Default for GuestDefaults {
    fn default() -> Self {
        GuestDefaults {
            deadline: default_deadline(),
            memory: default_memory(),
            quarantine_after: default_quarantine(),
        }
    }
}

fn default_deadline() -> Duration {
    limits::DEFAULT_DEADLINE
}
fn default_memory() -> u64 {
    limits::DEFAULT_MEMORY
}
fn default_quarantine() -> u32 {
    limits::QUARANTINE_AFTER
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PipelineConfig {
    pub name: String,
    #[serde(
        default,
        with = "crate::duration::serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub flush_interval: Option<Duration>,
    /// Flush the chain right after each batch (see `pipeline::Flush::after_batch`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flush_after_batch: bool,
    #[serde(default = "default_sinks")]
    pub sinks: Vec<String>,
    #[serde(default, rename = "transformer")]
    pub transformers: Vec<StageConfig>,
}

impl PipelineConfig {
    /// When the pipeline's chain is flushed.
    pub fn flush(&self) -> crate::pipeline::Flush {
        crate::pipeline::Flush {
            interval: self.flush_interval,
            after_batch: self.flush_after_batch,
        }
    }
}

fn default_sinks() -> Vec<String> {
    vec!["log".into()]
}

/// `[[agent.feed]]`: names of an agent polled into one more pipeline.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FeedConfig {
    pub pipeline: String,
    /// Names (or non-leaf prefixes) to poll for this pipeline.
    pub names: Vec<String>,
}

guest_section! {
    /// One transformer of a pipeline.
    #[derive(Debug, Clone, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    pub struct StageConfig as StageToml {
        /// Bundled guest name, NAME in guests-dir, or a path to a `.wasm` file.
        pub guest: String,
        /// Handed to the guest's `configure` as a JSON object.
        #[serde(default = "empty_table")]
        pub params: toml::Table,
    }
}

fn empty_table() -> toml::Table {
    toml::Table::new()
}

/// A parse error headed by the section it is in (`[fleet]: TOML parse error at line 7 ...`):
/// toml shows the key's line only, and sections share key names (`username`, `deadline`).
fn in_section(text: &str, e: toml::de::Error) -> anyhow::Error {
    let header = e
        .span()
        .and_then(|at| text.get(..at.start))
        .and_then(|before| {
            before
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| l.starts_with('['))
        })
        .map(|l| l.split_once('#').map_or(l, |(h, _)| h).trim_end());
    match header {
        Some(h) => anyhow::anyhow!("{h}: {e}"),
        None => e.into(),
    }
}

/// Built-in sinks a pipeline may name besides its `[[sink]]`s.
pub const SINKS: &[&str] = crate::sink::config::BUILT_IN;

impl Config {
    /// Parses and checks a configuration; errors name the field (and line) at fault.
    pub fn parse(text: &str) -> Result<Config> {
        let mut config: Config = toml::from_str(text).map_err(|e| in_section(text, e))?;
        for a in &mut config.agents {
            a.fill_bundled_defaults();
        }
        config.check()?;
        Ok(config)
    }

    /// Reads `path`, or the embedded default when `None`.
    pub fn load(path: Option<&Path>) -> Result<Config> {
        match path {
            None => Config::parse(DEFAULT).context("the embedded default config"),
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("reading {}", p.display()))?;
                Config::parse(&text).with_context(|| format!("in {}", p.display()))
            }
        }
    }

    fn check(&self) -> Result<()> {
        self.log.check().map_err(anyhow::Error::msg)?;
        if self.api.tls_cert.is_some() != self.api.tls_key.is_some() {
            bail!("api: tls-cert and tls-key go together");
        }
        if self.api.tls_client_ca.is_some() && self.api.tls_cert.is_none() {
            bail!(
                "api: tls-client-ca needs tls-cert and tls-key (client certificates are a TLS feature)"
            );
        }
        if let Some(n) = &self.nats {
            n.check().map_err(anyhow::Error::msg)?;
        }
        if let Some(n) = &self.notify.nats {
            n.connection()
                .check(None)
                .map_err(|(f, p)| anyhow::anyhow!("{f}: {p}"))?;
        }
        let mut names = std::collections::HashSet::new();
        for (i, s) in self.sinks.iter().enumerate() {
            if !names.insert(&s.name) {
                bail!("sink[{i}].name: {:?} is used twice", s.name);
            }
            s.check(None)?;
        }
        let mut seen = std::collections::HashSet::new();
        for (i, p) in self.pipelines.iter().enumerate() {
            if p.name.is_empty()
                || !p
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                bail!(
                    "pipeline[{i}].name: {:?} must be non-empty letters, digits, '-', '_' or '.'",
                    p.name
                );
            }
            if !seen.insert(&p.name) {
                bail!("pipeline[{i}].name: {:?} is used twice", p.name);
            }
            if p.flush_interval == Some(Duration::ZERO) {
                bail!("pipeline {:?}: flush-interval must be positive", p.name);
            }
            for s in &p.sinks {
                if !SINKS.contains(&s.as_str()) && !self.sinks.iter().any(|x| &x.name == s) {
                    bail!(
                        "pipeline {:?}: sinks: unknown sink {s:?} (built in: {}; or a [[sink]] by that name)",
                        p.name,
                        SINKS.join(", ")
                    );
                }
            }
            for (j, t) in p.transformers.iter().enumerate() {
                if t.guest.is_empty() {
                    bail!(
                        "pipeline {:?}: transformer[{j}].guest must not be empty",
                        p.name
                    );
                }
                if t.limits.deadline == Some(Duration::ZERO) {
                    bail!(
                        "pipeline {:?}: transformer[{j}].deadline must be positive",
                        p.name
                    );
                }
            }
        }
        if let Some(p) = &self.procfs.pipeline
            && !self.pipelines.iter().any(|x| &x.name == p)
        {
            bail!("procfs.pipeline: no pipeline named {p:?}");
        }
        if self.fabric.enabled {
            self.fabric.check().map_err(anyhow::Error::msg)?;
            if let Some(p) = &self.fabric.pipeline
                && !self.pipelines.iter().any(|x| &x.name == p)
            {
                bail!("fabric.pipeline: no pipeline named {p:?}");
            }
        }
        if let Some(f) = &self.fleet {
            f.check().map_err(anyhow::Error::msg)?;
        }
        let mut domains = std::collections::HashMap::new();
        for (i, a) in self.agents.iter().enumerate() {
            let what = format!("agent[{i}] ({:?})", a.name);
            match (&a.guest, &a.native) {
                (Some(_), Some(_)) => bail!("{what}: give either `guest` or `native`, not both"),
                (None, None) => bail!(
                    "{what}: needs `guest` (a component) or `native` (one of {})",
                    native_names()
                ),
                (None, Some(n)) if !NATIVE_AGENTS.iter().any(|(k, _)| k == n) => {
                    bail!(
                        "{what}: native: unknown agent {n:?} (known: {})",
                        native_names()
                    )
                }
                (Some(_), None) if a.root.is_some() => {
                    bail!(
                        "{what}: `root` is for native agents (a guest reads what `grants.dirs` maps)"
                    )
                }
                (Some(_), None) if a.devices != crate::linux::Devices::default() => {
                    bail!("{what}: `devices` is for the native linux agent")
                }
                (Some(_), None) if a.domain.is_none() || a.pmns.is_none() => {
                    bail!(
                        "{what}: a guest agent needs `domain` and `pmns` (only bundled agents bring their own)"
                    )
                }
                (None, Some(_)) if a.when_present.is_some() => {
                    bail!("{what}: `when-present` is for guest agents")
                }
                _ => {}
            }
            if let Some(p) = &a.when_present
                && (!p.starts_with('/') || a.when_present_on_host(Path::new("")).is_none())
            {
                bail!(
                    "{what}: when-present: {p:?} is not an absolute path under one of the agent's grants.dirs"
                );
            }
            let domain = a.served_domain();
            if domain > 510 {
                bail!("{what}: domain {domain} is out of range (0-510)");
            }
            if let Some(other) = domains.insert(domain, &a.name) {
                bail!("{what}: domain {domain} is already served by agent {other:?}");
            }
            if a.poll_interval.is_some() != a.pipeline.is_some() {
                bail!("{what}: `poll-interval` and `pipeline` go together");
            }
            if let Some(p) = &a.pipeline
                && !self.pipelines.iter().any(|x| &x.name == p)
            {
                bail!("{what}: pipeline: no pipeline named {p:?}");
            }
            if a.poll_interval == Some(Duration::ZERO) {
                bail!("{what}: poll-interval must be positive");
            }
            for (j, f) in a.feeds.iter().enumerate() {
                if a.poll_interval.is_none() {
                    bail!("{what}: feed[{j}] needs the agent's `poll-interval`");
                }
                if !self.pipelines.iter().any(|x| x.name == f.pipeline) {
                    bail!(
                        "{what}: feed[{j}].pipeline: no pipeline named {:?}",
                        f.pipeline
                    );
                }
                if f.names.is_empty() {
                    bail!("{what}: feed[{j}].names must not be empty");
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
