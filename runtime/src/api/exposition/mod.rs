//! `GET /metrics`: the Prometheus text exposition (format 0.0.4) of wasmon's own counters and
//! of the newest value of every live series in the store. Owns how a stored series becomes a
//! Prometheus family and series (name, type, unit, HELP, labels); it reads the store, the
//! agents' descriptions and `/proc/PID/comm`, and changes none of them.
//!
//! The rules (issue 33), each so that a real Prometheus takes every sample:
//! - **No timestamps.** The store keeps a value per slot of its step, stamped with the slot's
//!   time, while a reader may write more often: a slot's time would come back with a new
//!   value. Without a timestamp Prometheus stamps the scrape, and marks a series that left
//!   the exposition stale at once.
//! - **Live series only.** A series whose newest value is older than [`STALE_INTERVALS`] of
//!   its write interval (its step, or the gap between its two newest values when wider) has
//!   stopped (an exited process, a removed interface) and is left out.
//! - **Names, types, units from what describes the metric**: an agent's descriptor (PCP
//!   semantics and units) or the process reader's table. PCP `counter` is a Prometheus
//!   `counter` named `..._total`; units become base units in the name (`_bytes`, `_seconds`,
//!   `_bytes_per_second`) and the value is scaled to them (`millisec` x 0.001). Every family
//!   has HELP; a `# PCP name semantics units` comment line (as pmproxy writes) keeps the origin.
//! - **Labels**: `cluster` and `hostname`, then for an agent's metric its instance as PCP names
//!   it, `instname` (and `instid`, for this host's own series, when the agent numbers its
//!   instances), as pmproxy's `/metrics` does; for a process `pid`, `tid` for a thread, and
//!   `command`; for anything else cc-metric-store's levels (`type`/`type_id`,
//!   `stype`/`stype_id`, deeper ones `level4`, ...).

pub mod node;
pub mod units;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::daemon::Daemon;
use crate::namespace::{Agent, Semantics};
use crate::sample::{sanitize_metric_name, split_id};
use crate::store::{Newest, Store};
use units::base_unit;

/// Store families carry this prefix: they never clash with a Prometheus user's other jobs'
/// names, and wasmon's own families (also `wasmon_`) are checked for clashes by name.
pub const PREFIX: &str = "wasmon_";

/// A series not written for this many of its write intervals has stopped: Prometheus scrapes
/// at any phase of the writer's interval, and a loaded machine delays a write by up to an
/// interval, so two missed writes are still a live series and three are not.
pub const STALE_INTERVALS: i64 = 3;

/// A gap between a series' two newest values wider than this is a pause (a restart, a
/// backfill), not its write interval: the staleness rule then uses the step.
const MAX_WRITE_INTERVAL_SECS: i64 = 3600;

/// Bytes read from `/proc/PID/comm` (the kernel's limit is 16, `TASK_COMM_LEN`).
const MAX_COMM_BYTES: u64 = 64;

pub fn routes(daemon: Arc<Daemon>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(Arc::new(Exposition {
            daemon,
            commands: Mutex::new(HashMap::new()),
        }))
}

/// The exposition's memory between scrapes.
pub struct Exposition {
    daemon: Arc<Daemon>,
    /// Command names by pid, read once per process while its series are exposed (a series
    /// keeps its labels when the process has exited and its last values are still shown).
    /// A pid reused within [`STALE_INTERVALS`] keeps the earlier command: the store files
    /// both processes under the same pid.
    commands: Mutex<HashMap<u32, Option<String>>>,
}

/// `/metrics` query parameters (Prometheus sends a scrape config's `params` as these).
#[derive(serde::Deserialize)]
struct Params {
    profile: Option<String>,
}

async fn metrics(State(e): State<Arc<Exposition>>, Query(p): Query<Params>) -> Response {
    let node = match p.profile.as_deref() {
        None | Some("") => false,
        Some(node::PROFILE) => true,
        Some(other) => {
            return super::error::error(
                StatusCode::BAD_REQUEST,
                format!(
                    "unknown profile {other:?}: `/metrics` (wasmon's families) or \
                     `/metrics?profile={}` (node_exporter's)",
                    node::PROFILE
                ),
            );
        }
    };
    // Agents' descriptions and fetches are synchronous calls (a guest agent's within its
    // deadline).
    let rendered = tokio::task::spawn_blocking(move || {
        if node {
            e.render_node()
        } else {
            Ok(e.render(now_secs()))
        }
    })
    .await;
    match rendered {
        Ok(Ok(out)) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response(),
        Ok(Err(msg)) => super::error::error(StatusCode::SERVICE_UNAVAILABLE, msg),
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Exposition {
    /// node_exporter's families from a fetch of the linux agent now; an error when no agent
    /// answers any of the names (the daemon runs no native linux agent).
    fn render_node(&self) -> Result<String, String> {
        let fetched = self.daemon.agents().fetch(&node::names());
        let values: HashMap<String, crate::namespace::Values> = fetched
            .into_iter()
            .filter(|f| f.error.is_none() && f.pmid.split('.').next() == Some(node::LINUX_DOMAIN))
            .map(|f| (f.name, f.values))
            .collect();
        if values.is_empty() {
            return Err(format!(
                "profile {:?} reads the native linux agent (PCP domain 60), and none runs in \
                 this daemon's config (add an [[agent]] with native = \"linux\")",
                node::PROFILE
            ));
        }
        let mut out = String::new();
        node::render(&values, &node::Env::read(), &mut out);
        Ok(out)
    }

    fn render(&self, now: i64) -> String {
        let d = &self.daemon;
        let mut out = String::new();
        crate::telemetry::registry().render(&mut out);
        super::sinks::render_prometheus(&d.sinks().statuses(), &mut out);
        crate::supervise::render_prometheus(&mut out);
        render_store_counters(&d.parts().store, &mut out);
        let own: BTreeSet<String> = out
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .map(str::to_string)
            .collect();
        let host = crate::util::hostname();
        let cluster = d.config().daemon.cluster;
        let mut describer = AgentDescriber { daemon: d };
        let mut commands = crate::util::lock(&self.commands);
        let mut seen_pids = BTreeSet::new();
        let mut lookup = Lookup {
            describer: &mut describer,
            own_host: (&cluster, &host),
            instance_ids: HashMap::new(),
            commands: &mut commands,
            seen_pids: &mut seen_pids,
        };
        render_store(&d.parts().store, now, &own, &mut lookup, &mut out);
        commands.retain(|pid, _| seen_pids.contains(pid));
        out
    }
}

/// What a stored metric is, from whoever describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Description {
    pub counter: bool,
    /// PCP's units text; `None` when nothing states units.
    pub units: Option<String>,
    pub help: String,
    pub instances: Instances,
    /// PCP's semantics word for the `# PCP` comment line, when an agent described it.
    pub semantics: Option<&'static str>,
}

/// What a level below the host is for a metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Instances {
    /// An agent's instance: `domain` answers for instance ids of indom `indom`.
    Pcp { domain: u32, indom: Option<u32> },
    /// The process reader's: `PID` or `PID-TID`.
    Process { thread: bool },
    /// cc-metric-store's levels (line protocol, posted samples, pipelines' outputs).
    Levels,
}

/// Where descriptions come from (the daemon's agents; a table in tests).
pub trait Describe {
    fn describe(&mut self, metric: &str) -> Description;
    /// The instance id `domain`'s agent gives instance `name` of indom `indom`.
    fn instance_id(&mut self, domain: u32, indom: u32, name: &str) -> Option<u32>;
}

struct AgentDescriber<'a> {
    daemon: &'a Daemon,
}

impl Describe for AgentDescriber<'_> {
    fn describe(&mut self, metric: &str) -> Description {
        let agents = self.daemon.agents();
        if let Ok(id) = agents.lookup(metric)
            && !id.is_dynamic_root()
            && let Some(mut agent) = agents.agent(id.domain)
            && let Ok(desc) = agent.describe(id)
        {
            let semantics = match desc.semantics {
                Semantics::Counter => "counter",
                Semantics::Instant => "instant",
                Semantics::Discrete => "discrete",
            };
            return Description {
                counter: desc.semantics == Semantics::Counter,
                units: Some(desc.units),
                help: desc.help,
                instances: Instances::Pcp {
                    domain: id.domain,
                    indom: desc.indom,
                },
                semantics: Some(semantics),
            };
        }
        fallback(metric)
    }

    fn instance_id(&mut self, domain: u32, indom: u32, name: &str) -> Option<u32> {
        self.daemon.agents().agent(domain)?.instance_id(indom, name)
    }
}

/// The process reader's table, else a gauge of cc-metric-store's levels.
pub fn fallback(metric: &str) -> Description {
    if let Some(p) = crate::procfs::describe_metric(metric) {
        return Description {
            counter: p.counter,
            units: Some(p.units.to_string()),
            help: p.help.to_string(),
            instances: Instances::Process { thread: p.thread },
            semantics: Some(if p.counter { "counter" } else { "instant" }),
        };
    }
    Description {
        counter: false,
        units: None,
        help: format!("{metric} as stored (no agent describes it: a gauge, units not known)"),
        instances: Instances::Levels,
        semantics: None,
    }
}

/// A family as it is exposed.
struct Family {
    /// The stored metric it comes from.
    metric: String,
    desc: Description,
    series: BTreeMap<String, f64>,
}

/// The family name of `metric` as `desc` describes it, and the factor to its base unit.
pub fn family_name(metric: &str, desc: &Description) -> (String, f64) {
    let mut name = snake_case(&sanitize_metric_name(PREFIX, metric));
    let unit = desc.units.as_deref().and_then(base_unit);
    if let Some(u) = unit
        && !u.suffix.is_empty()
        && !name.ends_with(&format!("_{}", u.suffix))
    {
        name.push('_');
        name.push_str(u.suffix);
    }
    if desc.counter && !name.ends_with("_total") {
        name.push_str("_total");
    }
    (name, unit.map_or(1.0, |u| u.scale))
}

/// `swapCached` as `swap_cached` (PCP names mix cases; Prometheus' are snake case).
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else {
            out.push(c);
            // `directMap2M` is `direct_map2m`: a capital after a digit is part of a number's
            // unit, not a new word (`_2_m` reads as an abbreviated unit).
            prev_lower = c.is_ascii_lowercase();
        }
    }
    out
}

/// Instance ids and command names, looked up once per scrape (ids) or per process (names).
pub struct Lookup<'a> {
    pub describer: &'a mut dyn Describe,
    /// (cluster, host) of this daemon: only its own series get instance ids from its agents.
    pub own_host: (&'a str, &'a str),
    pub instance_ids: HashMap<(u32, u32, String), Option<u32>>,
    pub commands: &'a mut HashMap<u32, Option<String>>,
    pub seen_pids: &'a mut BTreeSet<u32>,
}

impl Lookup<'_> {
    fn command(&mut self, pid: u32) -> Option<String> {
        self.seen_pids.insert(pid);
        self.commands
            .entry(pid)
            .or_insert_with(|| read_comm(pid))
            .clone()
    }
}

fn read_comm(pid: u32) -> Option<String> {
    use std::io::Read;
    let f = std::fs::File::open(format!("/proc/{pid}/comm")).ok()?;
    let mut s = String::new();
    f.take(MAX_COMM_BYTES).read_to_string(&mut s).ok()?;
    Some(s.trim_end_matches('\n').to_string())
}

/// Whether a series written at `n` is still live at `now`.
pub fn is_live(n: &Newest, now: i64) -> bool {
    let gap = n
        .previous
        .map(|p| n.ts - p)
        .filter(|g| *g <= MAX_WRITE_INTERVAL_SECS)
        .unwrap_or(0);
    let interval = n.step.max(gap).max(1);
    now - n.ts <= STALE_INTERVALS * interval
}

/// Renders the store's live series, grouped by family, skipping names in `taken` (wasmon's
/// own families) and a second metric that would make the same family name (the first, in
/// name order, keeps it).
pub fn render_store(
    store: &Store,
    now: i64,
    taken: &BTreeSet<String>,
    lookup: &mut Lookup,
    out: &mut String,
) {
    let mut live: Vec<(Vec<String>, String, f64)> = Vec::new();
    store.for_each_newest(|path, metric, n| {
        if is_live(n, now) {
            live.push((
                path.iter().map(|p| p.to_string()).collect(),
                metric.to_string(),
                n.value,
            ));
        }
    });
    let mut described: HashMap<String, Description> = HashMap::new();
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for (path, metric, value) in live {
        let desc = described
            .entry(metric.clone())
            .or_insert_with(|| lookup.describer.describe(&metric))
            .clone();
        let (name, scale) = family_name(&metric, &desc);
        if taken.contains(&name) {
            continue;
        }
        let family = families.entry(name).or_insert_with(|| Family {
            metric: metric.clone(),
            desc: desc.clone(),
            series: BTreeMap::new(),
        });
        if family.metric != metric {
            continue;
        }
        let labels = labels(&path, &desc.instances, lookup);
        family.series.entry(labels).or_insert(value * scale);
    }
    for (name, f) in families {
        if let Some(sem) = f.desc.semantics {
            let units = f.desc.units.as_deref().unwrap_or("");
            let units = if units.is_empty() { "none" } else { units };
            let _ = writeln!(out, "# PCP {} {sem} {units}", f.metric);
        }
        let mut help = f.desc.help.lines().next().unwrap_or("").trim().to_string();
        if help.is_empty() {
            help = format!("PCP metric {}", f.metric);
        }
        if let Some(u) = f.desc.units.as_deref()
            && base_unit(u).is_none()
        {
            let _ = write!(help, " (units: {u})");
        }
        let _ = writeln!(out, "# HELP {name} {}", escape_help(&help));
        let kind = if f.desc.counter { "counter" } else { "gauge" };
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, v) in f.series {
            let _ = writeln!(out, "{name}{{{labels}}} {}", format_value(v));
        }
    }
}

/// wasmon's store counters (`samples_rejected` and the rest), as its other own counters.
fn render_store_counters(store: &Store, out: &mut String) {
    use std::sync::atomic::Ordering::Relaxed;
    let c = store.counters();
    let rows: [(&str, &str, &std::sync::atomic::AtomicU64); 7] = [
        (
            "samples_written",
            "Samples written into the store.",
            &c.samples_written,
        ),
        (
            "samples_rejected",
            "Samples the store refused (older than retention, unknown metric when refused, bad level).",
            &c.samples_rejected,
        ),
        (
            "buffers_freed",
            "Buffers retention or /api/free released.",
            &c.buffers_freed,
        ),
        (
            "wal_records_replayed",
            "Write-ahead log records replayed at start.",
            &c.wal_records_replayed,
        ),
        (
            "wal_damage",
            "Damaged write-ahead log tails or records found at start.",
            &c.wal_damage,
        ),
        (
            "snapshot_damage",
            "Damaged snapshots found at start.",
            &c.snapshot_damage,
        ),
        (
            "snapshots_written",
            "Snapshots the store wrote.",
            &c.snapshots_written,
        ),
    ];
    for (name, help, v) in rows {
        let v = v.load(Relaxed);
        let _ = writeln!(
            out,
            "# HELP wasmon_store_{name}_total {help}\n# TYPE wasmon_store_{name}_total counter\nwasmon_store_{name}_total {v}"
        );
    }
}

fn escape_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn escape_label(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn add(k: &str, v: &str, out: &mut String) {
    if !out.is_empty() {
        out.push(',');
    }
    out.push_str(k);
    out.push_str("=\"");
    escape_label(v, out);
    out.push('"');
}

/// `1234` or `1234-5678` (the store's name for instance `1234/5678`).
fn pid_tid(level: &str) -> Option<(u32, Option<u32>)> {
    match level.split_once('-') {
        Some((p, t)) => Some((p.parse().ok()?, Some(t.parse().ok()?))),
        None => Some((level.parse().ok()?, None)),
    }
}

/// The labels of the series at `path`.
fn labels(path: &[String], instances: &Instances, lookup: &mut Lookup) -> String {
    let mut out = String::new();
    if let Some(c) = path.first() {
        add("cluster", c, &mut out);
    }
    if let Some(h) = path.get(1) {
        add("hostname", h, &mut out);
    }
    let Some(level) = path.get(2) else {
        return out;
    };
    match *instances {
        Instances::Pcp { domain, indom } => {
            add("instname", level, &mut out);
            let own = path[0] == lookup.own_host.0 && path[1] == lookup.own_host.1;
            if let (true, Some(indom)) = (own, indom) {
                let key = (domain, indom, level.clone());
                let id = match lookup.instance_ids.get(&key) {
                    Some(id) => *id,
                    None => {
                        let id = lookup.describer.instance_id(domain, indom, level);
                        lookup.instance_ids.insert(key, id);
                        id
                    }
                };
                if let Some(id) = id {
                    add("instid", &id.to_string(), &mut out);
                }
            }
            deeper(path, 3, &mut out);
        }
        Instances::Process { .. } => match pid_tid(level) {
            Some((pid, tid)) => {
                add("pid", &pid.to_string(), &mut out);
                if let Some(tid) = tid {
                    add("tid", &tid.to_string(), &mut out);
                }
                let command = lookup.command(pid).unwrap_or_default();
                add("command", &command, &mut out);
                deeper(path, 3, &mut out);
            }
            None => {
                add("instname", level, &mut out);
                deeper(path, 3, &mut out);
            }
        },
        Instances::Levels => {
            for (depth, p) in path.iter().enumerate().skip(2).take(2) {
                let (t, id) = split_id(p);
                let (tk, ik) = if depth == 2 {
                    ("type", "type_id")
                } else {
                    ("stype", "stype_id")
                };
                add(tk, t, &mut out);
                if !id.is_empty() {
                    add(ik, id, &mut out);
                }
            }
            deeper(path, 4, &mut out);
        }
    }
    out
}

fn deeper(path: &[String], from: usize, out: &mut String) {
    for (d, p) in path.iter().enumerate().skip(from) {
        add(&format!("level{d}"), p, out);
    }
}

fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests;
