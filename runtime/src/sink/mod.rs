//! `sink` owns forwarding: the named `[[sink]]`s that send what pipelines emit to another
//! wasmon, cc-metric-store, InfluxDB, VictoriaMetrics, a NATS subject, a JetStream stream, a
//! Prometheus remote-write receiver, or wherever an exporter guest's requests go; each with a
//! durable on-disk queue (`data-dir/sinks/NAME`), retries without end, acknowledgements, dead
//! letters and TLS clients. It knows samples (from `sample`) and nothing of pipelines, wasm,
//! the store or HTTP serving: the daemon hands it batches, and the exporters of guest sinks
//! behind the [`Exporter`] trait, and shows its status.
//!
//! Delivery is at least once: a record leaves the queue only when the destination acknowledged
//! it, and a crash re-sends what was in flight. Receivers make that effectively once: JetStream
//! by `Nats-Msg-Id`, wasmon by the record id header, and cc-metric-store's store by writing a
//! re-sent sample into the slot it already holds.

pub mod config;
pub mod encode;
pub mod exporter;
mod forwarder;
mod guest;
pub mod queue;
pub mod raw;
pub mod tls;
pub mod transport;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use config::{SinkConfig, SinkType};
pub use exporter::{Encoding, Exporter, Request};
pub use forwarder::{Forwarder, Route, SinkStatus, queue_config};
pub use transport::{BATCH_ID_HEADER, Transport};

/// The daemon's forwarding sinks.
pub struct SinkSet {
    dir: PathBuf,
    node_id: String,
    default_cluster: String,
    hostname: String,
    running: Mutex<BTreeMap<String, Running>>,
}

struct Running {
    fwd: Arc<Forwarder>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// Sinks built by [`SinkSet::prepare`], applied by [`SinkSet::apply`]: between the two
/// nothing runs differently, so a reload that fails elsewhere changes no sink.
pub struct Prepared {
    new: Vec<Arc<Forwarder>>,
    changed: Vec<(SinkConfig, Route)>,
    keep: Vec<String>,
}

/// Makes a guest sink's exporter (the daemon's: it knows the guests).
pub type MakeExporter<'a> = &'a dyn Fn(&SinkConfig) -> anyhow::Result<Arc<dyn Exporter>>;

/// What a reload did to the sinks.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SinksOutcome {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub started: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reconfigured: Vec<String>,
    /// Removed from the config: stopped, their queues kept on disk (see `GET /api/sinks`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stopped: Vec<String>,
}

/// A queue on disk whose sink is not configured (removed by a reload, or renamed): kept until
/// it is deleted on purpose (`DELETE /api/sinks/NAME/queue`).
#[derive(Debug, Clone, Serialize)]
pub struct KeptQueue {
    pub name: String,
    pub bytes: u64,
}

impl SinkSet {
    /// Sinks under `data_dir/sinks`; this daemon's id is read from `data_dir/node-id` (made
    /// once, at the first start).
    pub fn new(data_dir: &Path, default_cluster: &str, hostname: &str) -> std::io::Result<SinkSet> {
        let dir = data_dir.join("sinks");
        std::fs::create_dir_all(&dir)?;
        Ok(SinkSet {
            node_id: random_id(data_dir, "node-id")?,
            dir,
            default_cluster: default_cluster.into(),
            hostname: hostname.into(),
            running: Mutex::new(BTreeMap::new()),
        })
    }

    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// Checks every sink, builds the transports (and guest sinks' exporters) of new and
    /// changed ones and opens new ones' queues. Fails naming the sink and field; nothing
    /// running is touched.
    pub fn prepare(
        &self,
        configs: &[SinkConfig],
        base: &Path,
        make_exporter: MakeExporter,
    ) -> anyhow::Result<Prepared> {
        let running = crate::util::lock(&self.running);
        let mut p = Prepared {
            new: Vec::new(),
            changed: Vec::new(),
            keep: Vec::new(),
        };
        for cfg in configs {
            cfg.check(Some(base))?;
            let exporter = match cfg.kind {
                SinkType::Guest => Some(
                    make_exporter(cfg)
                        .map_err(|e| anyhow::anyhow!("sink {:?}: guest: {e:#}", cfg.name))?,
                ),
                _ => None,
            };
            let identity = exporter.as_ref().map(|e| e.identity());
            match running.get(&cfg.name) {
                Some(r) if r.fwd.config() == *cfg && r.fwd.exporter_identity() == identity => {
                    p.keep.push(cfg.name.clone())
                }
                Some(r) => {
                    let was = r.fwd.config().kind;
                    if was.record_format() != cfg.kind.record_format() {
                        return Err(format_changed(cfg, was.record_format()).into());
                    }
                    p.changed
                        .push((cfg.clone(), (Transport::build(cfg, base)?, exporter)))
                }
                None => {
                    let transport = (Transport::build(cfg, base)?, exporter);
                    let dir = self.dir.join(&cfg.name);
                    let (queue, recovery) =
                        queue::Queue::open(&dir, queue_config(cfg)).map_err(|e| {
                            anyhow::anyhow!("sink {:?}: opening its queue: {e}", cfg.name)
                        })?;
                    check_format(&dir, cfg, recovery.records)?;
                    let queue_id = random_id(&dir, QUEUE_ID_FILE)
                        .map_err(|e| anyhow::anyhow!("sink {:?}: the queue's id: {e}", cfg.name))?;
                    if recovery.damaged_records > 0 || recovery.truncated_tail_bytes > 0 {
                        tracing::warn!(sink = %cfg.name, damaged_records = recovery.damaged_records,
                            damaged_bytes = recovery.damaged_bytes, truncated_tail_bytes = recovery.truncated_tail_bytes,
                            "the sink's queue was damaged: the intact records are delivered");
                    }
                    if recovery.records > 0 {
                        tracing::info!(sink = %cfg.name, records = recovery.records, samples = recovery.samples, "queued records from before the restart will be sent");
                    }
                    p.new.push(Forwarder::new(
                        cfg.clone(),
                        transport,
                        (queue, &recovery),
                        &format!("{}.{}.{queue_id}", self.node_id, cfg.name),
                        &self.default_cluster,
                        &self.hostname,
                    ));
                }
            }
        }
        Ok(p)
    }

    /// Starts new sinks' senders, reconfigures changed ones and stops removed ones (their
    /// queues stay on disk).
    pub fn apply(&self, p: Prepared) -> SinksOutcome {
        let mut out = SinksOutcome::default();
        let mut running = crate::util::lock(&self.running);
        for (cfg, parts) in p.changed {
            if let Some(r) = running.get(&cfg.name) {
                out.reconfigured.push(cfg.name.clone());
                r.fwd.reconfigure(cfg, parts);
            }
        }
        let configured: Vec<String> = p
            .new
            .iter()
            .map(|f| f.name().to_string())
            .chain(p.keep)
            .chain(out.reconfigured.iter().cloned())
            .collect();
        let gone: Vec<String> = running
            .keys()
            .filter(|n| !configured.contains(n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = running.remove(&name) {
                r.stop.cancel();
                r.fwd.sync();
                out.stopped.push(name);
            }
        }
        for fwd in p.new {
            let stop = CancellationToken::new();
            // Supervised: a sender that panics is counted and started again.
            let (f, s) = (fwd.clone(), stop.clone());
            let task =
                crate::supervise::spawn(&format!("sink {}", fwd.name()), stop.clone(), move |_| {
                    let (f, s) = (f.clone(), s.clone());
                    async move {
                        f.run(s).await;
                        Ok(())
                    }
                });
            out.started.push(fwd.name().to_string());
            running.insert(fwd.name().to_string(), Running { fwd, stop, task });
        }
        out
    }

    pub fn get(&self, name: &str) -> Option<Arc<Forwarder>> {
        crate::util::lock(&self.running)
            .get(name)
            .map(|r| r.fwd.clone())
    }

    pub fn statuses(&self) -> Vec<SinkStatus> {
        let running: Vec<_> = crate::util::lock(&self.running)
            .values()
            .map(|r| r.fwd.clone())
            .collect();
        running.iter().map(|f| f.status()).collect()
    }

    /// Queues on disk of sinks that are not running.
    pub fn kept_queues(&self) -> Vec<KeptQueue> {
        let running = crate::util::lock(&self.running);
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut kept: Vec<KeptQueue> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !running.contains_key(n))
            .map(|name| KeptQueue {
                bytes: dir_size(&self.dir.join(&name)),
                name,
            })
            .collect();
        kept.sort_by(|a, b| a.name.cmp(&b.name));
        kept
    }

    /// Deletes the kept queue of a sink that is not running.
    pub fn delete_kept_queue(&self, name: &str) -> Result<u64, String> {
        if crate::util::lock(&self.running).contains_key(name) {
            return Err(format!(
                "sink {name:?} is running: remove it from the config first"
            ));
        }
        let Some(q) = self.kept_queues().into_iter().find(|q| q.name == name) else {
            return Err(format!("no kept queue named {name:?}"));
        };
        std::fs::remove_dir_all(self.dir.join(name))
            .map_err(|e| format!("deleting {}: {e}", self.dir.join(name).display()))?;
        tracing::warn!(
            sink = name,
            bytes = q.bytes,
            "kept queue deleted on request"
        );
        Ok(q.bytes)
    }

    /// Stops every sender (records in flight stay queued) and fsyncs the queues.
    pub async fn stop(&self) {
        let running: Vec<Running> = std::mem::take(&mut *crate::util::lock(&self.running))
            .into_values()
            .collect();
        for r in &running {
            r.stop.cancel();
        }
        for r in running {
            let _ = r.task.await;
            r.fwd.sync();
        }
    }
}

/// The file in a queue's directory naming its records' format ([`SinkType::record_format`]).
const FORMAT_FILE: &str = "format";

fn format_changed(cfg: &SinkConfig, queued: &str) -> config::SinkConfigError {
    config::SinkConfigError {
        sink: cfg.name.clone(),
        field: "type",
        problem: format!(
            "{:?}: its queue holds {queued} records, which a {} sink cannot send; give the sink \
             a new name (the queue is kept under this one)",
            cfg.kind.as_str(),
            cfg.kind.as_str()
        ),
    }
}

/// At a sink's start: refuses a queue holding records of another format than the sink's type
/// sends (the type was changed while the daemon was stopped), and notes the format otherwise.
fn check_format(dir: &Path, cfg: &SinkConfig, queued: u64) -> anyhow::Result<()> {
    let path = dir.join(FORMAT_FILE);
    let want = cfg.kind.record_format();
    let found = std::fs::read_to_string(&path).ok();
    match found.as_deref().map(str::trim) {
        Some(f) if f == want => Ok(()),
        Some(f) if queued > 0 => Err(format_changed(cfg, f).into()),
        _ => std::fs::write(&path, format!("{want}\n"))
            .map_err(|e| anyhow::anyhow!("sink {:?}: writing {}: {e}", cfg.name, path.display())),
    }
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|es| {
            es.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// The file in a queue's directory holding the queue's id: made with the queue, gone with it.
const QUEUE_ID_FILE: &str = "queue-id";

/// 16 random hex digits, made once and kept in `dir/file`: this daemon's id (`node-id` in the
/// data directory) and each queue's.
fn random_id(dir: &Path, file: &str) -> std::io::Result<String> {
    let path = dir.join(file);
    if let Ok(id) = std::fs::read_to_string(&path) {
        let id = id.trim();
        if id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(id.to_string());
        }
    }
    let id = format!("{:016x}", rand::random::<u64>());
    let tmp = dir.join(format!("{file}.tmp"));
    std::fs::write(&tmp, format!("{id}\n"))?;
    std::fs::rename(&tmp, &path)?;
    Ok(id)
}
