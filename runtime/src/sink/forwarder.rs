//! One forwarding sink: batches from pipelines are encoded and appended to the sink's durable
//! queue on the pipeline's thread (a `write(2)`, no network), and a sender task delivers the
//! queue oldest first, removing a record only when the destination acknowledged it. Retries
//! back off from 100 ms to `max-backoff` with full jitter and never give up; a backlog drains
//! at most at `catch-up-rate` samples per second. A guest sink queues the samples themselves
//! and has its exporter encode them at send time (`guest.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::config::{MAX_RECORD_BYTES, SinkConfig, SinkType};
use super::encode::{self, Context};
use super::exporter::Exporter;
use super::guest::GuestSend;
use super::queue::{Nack, Queue, QueueConfig, Recovery};
use super::transport::{Outcome, Transport};
use crate::sample::Sample;

/// How a sink's records reach the destination: its transport, and a guest sink's exporter.
pub type Route = (Transport, Option<Arc<dyn Exporter>>);

/// Where the sink's samples come from and go: set at start, changed by a reload.
struct Settings {
    cfg: SinkConfig,
    transport: Arc<Transport>,
    /// A guest sink's exporter.
    exporter: Option<Arc<dyn Exporter>>,
    /// The cluster of samples without one of their own: the URL's `?cluster=`, else the
    /// daemon's ([`SinkConfig::url_cluster`]).
    cluster: String,
}

pub struct Forwarder {
    name: String,
    settings: RwLock<Settings>,
    queue: Arc<Queue>,
    default_cluster: String,
    hostname: String,
    /// `NODE.SINK.QUEUE`: this daemon's id, the sink's name and its queue's (both kept on
    /// disk). Record ids are `NODE.SINK.QUEUE.SEQ`, unique across the fleet and stable across
    /// restarts, so receivers recognise a re-sent record; and a queue made anew under the same
    /// name (the old one deleted), whose seqs start again at 1, is another sender to them.
    queue_id: String,
    wake: tokio::sync::Notify,
    counters: Counters,
    last_error: Mutex<Option<(i64, String)>>,
    /// The sender is failing (logged once when it starts and once when it ends).
    failing: AtomicBool,
    /// Records cut from a torn tail when the queue was opened (a push that never returned, or
    /// an OS crash before the group commit).
    truncated_tail_records: u64,
}

/// Samples dropped, by reason.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Dropped {
    pub queue_size: u64,
    pub queue_age: u64,
    pub unencodable: u64,
    pub queue_error: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    accepted: AtomicU64,
    unencodable: AtomicU64,
    queue_errors: AtomicU64,
    attempts: AtomicU64,
    retries: AtomicU64,
    pub(super) encode_failures: AtomicU64,
}

/// What `/api/sinks`, `/metrics` and the live view show of a sink.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct SinkStatus {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub url: String,
    /// Samples pipelines handed this sink since the start.
    pub accepted: u64,
    /// In the queue now (in flight included).
    pub queued_records: u64,
    pub queued_samples: u64,
    pub queued_bytes: u64,
    /// The queue's files on disk.
    pub disk_bytes: u64,
    /// Seconds since the oldest queued sample was taken (0 when the queue is empty).
    pub oldest_age_seconds: f64,
    /// Acknowledged by the destination since the start.
    pub sent_records: u64,
    pub sent_samples: u64,
    /// Samples dropped, by reason: the queue's size and age budgets; a value that cannot be
    /// encoded (NaN, infinities); the queue could not write them (disk full, I/O error).
    pub dropped: Dropped,
    /// Refused by the destination as malformed: in the queue's dead-letter file.
    pub dead_lettered_records: u64,
    pub dead_lettered_samples: u64,
    /// Records found damaged in the queue's files (skipped, counted).
    pub damaged_records: u64,
    pub damaged_samples: u64,
    /// Records cut from a torn tail of the queue at this start: pushes a crash interrupted
    /// before they returned (never acknowledged), or lost by an OS crash before the fsync.
    pub truncated_tail_records: u64,
    /// Samples the budget removed while they were being sent: counted as sent or as dropped
    /// when that attempt ends (so accepted = queued + in flight removed + sent + dropped +
    /// dead-lettered + damaged at every moment).
    pub evicted_in_flight_samples: u64,
    pub attempts: u64,
    pub retries: u64,
    /// A guest sink: calls to its exporter that failed (trap, deadline, memory cap, malformed
    /// requests); each batch stayed queued and was tried again on a fresh instance.
    pub encode_failures: u64,
    /// Whether the last attempt failed.
    pub failing: bool,
    /// When (Unix seconds) and what.
    pub last_error: Option<(i64, String)>,
}

/// Retries start here and double up to `max-backoff`.
const MIN_BACKOFF: Duration = Duration::from_millis(100);

impl Forwarder {
    pub fn new(
        cfg: SinkConfig,
        (transport, exporter): Route,
        (queue, recovery): (Queue, &Recovery),
        queue_id: &str,
        default_cluster: &str,
        hostname: &str,
    ) -> Arc<Forwarder> {
        Arc::new(Forwarder {
            truncated_tail_records: recovery.truncated_tail_records,
            name: cfg.name.clone(),
            settings: RwLock::new(Settings {
                cluster: cfg.url_cluster().unwrap_or_else(|| default_cluster.into()),
                cfg,
                transport: Arc::new(transport),
                exporter,
            }),
            queue: Arc::new(queue),
            default_cluster: default_cluster.into(),
            hostname: hostname.into(),
            queue_id: queue_id.into(),
            wake: tokio::sync::Notify::new(),
            counters: Counters::default(),
            last_error: Mutex::new(None),
            failing: AtomicBool::new(false),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn config(&self) -> SinkConfig {
        crate::util::read(&self.settings).cfg.clone()
    }

    /// The identity of a guest sink's exporter (see [`Exporter::identity`]).
    pub fn exporter_identity(&self) -> Option<String> {
        crate::util::read(&self.settings)
            .exporter
            .as_ref()
            .map(|e| e.identity())
    }

    /// A reload changed the sink: new transport, limits and exporter, same queue.
    pub fn reconfigure(&self, cfg: SinkConfig, (transport, exporter): Route) {
        self.queue.reconfigure(queue_config(&cfg));
        *crate::util::write(&self.settings) = Settings {
            cluster: cfg
                .url_cluster()
                .unwrap_or_else(|| self.default_cluster.clone()),
            cfg,
            transport: Arc::new(transport),
            exporter,
        };
        self.wake.notify_one();
    }

    /// Encodes `samples` into records of at most `batch-size` samples and
    /// [`MAX_RECORD_BYTES`], and queues them. Returns once they are written to the queue's
    /// file (they survive a SIGKILL of the daemon from then on).
    pub fn accept(&self, samples: &[Sample]) {
        if samples.is_empty() {
            return;
        }
        self.counters
            .accepted
            .fetch_add(samples.len() as u64, Relaxed);
        let (kind, gzip, batch, tags, cluster) = {
            let s = crate::util::read(&self.settings);
            (
                s.cfg.kind,
                s.cfg.gzip,
                s.cfg.batch_size,
                s.cfg.meta_as_tags.clone(),
                s.cluster.clone(),
            )
        };
        let cx = Context {
            default_cluster: &cluster,
            hostname: &self.hostname,
            meta_as_tags: &tags,
        };
        for chunk in samples.chunks(batch) {
            self.queue_chunk(kind, gzip, &cx, chunk);
        }
        self.wake.notify_one();
    }

    fn queue_chunk(&self, kind: SinkType, gzip: bool, cx: &Context, chunk: &[Sample]) {
        let mut enc = match kind {
            SinkType::RemoteWrite => encode::remote_write(chunk),
            SinkType::Guest => encode::Encoded {
                bytes: super::raw::encode(chunk),
                samples: chunk.len() as u32,
                unencodable: 0,
                oldest_ns: chunk.iter().map(|s| s.timestamp_ns).min().unwrap_or(0),
            },
            _ => encode::line_protocol(chunk, cx),
        };
        if enc.bytes.len() > MAX_RECORD_BYTES && chunk.len() > 1 {
            let (a, b) = chunk.split_at(chunk.len() / 2);
            self.queue_chunk(kind, gzip, cx, a);
            self.queue_chunk(kind, gzip, cx, b);
            return;
        }
        self.counters
            .unencodable
            .fetch_add(u64::from(enc.unencodable), Relaxed);
        if enc.samples == 0 {
            return;
        }
        if kind == SinkType::Http && gzip {
            enc.bytes = encode::gzip(&enc.bytes);
        }
        if let Err(e) = self.queue.push(&enc.bytes, enc.samples, enc.oldest_ns) {
            self.counters
                .queue_errors
                .fetch_add(u64::from(enc.samples), Relaxed);
            self.note_error(format!("queue: {e}"));
            tracing::error!(sink = %self.name, error = %e, samples = enc.samples, "cannot queue samples: dropped");
        }
    }

    pub fn status(&self) -> SinkStatus {
        let s = crate::util::read(&self.settings);
        let queue = self.queue.stats();
        let now = now_ns();
        let oldest_age_seconds = if queue.queued_records > 0 {
            (now - queue.oldest_sample_ns).max(0) as f64 / 1e9
        } else {
            0.0
        };
        SinkStatus {
            name: self.name.clone(),
            kind: s.cfg.kind.as_str(),
            url: s.cfg.url.clone(),
            accepted: self.counters.accepted.load(Relaxed),
            queued_records: queue.queued_records,
            queued_samples: queue.queued_samples,
            queued_bytes: queue.queued_bytes,
            disk_bytes: queue.disk_bytes,
            oldest_age_seconds,
            sent_records: queue.sent_records,
            sent_samples: queue.sent_samples,
            dropped: Dropped {
                queue_size: queue.dropped_size_samples,
                queue_age: queue.dropped_age_samples,
                unencodable: self.counters.unencodable.load(Relaxed),
                queue_error: self.counters.queue_errors.load(Relaxed),
            },
            dead_lettered_records: queue.dead_lettered_records,
            dead_lettered_samples: queue.dead_lettered_samples,
            damaged_records: queue.damaged_records,
            damaged_samples: queue.damaged_samples,
            truncated_tail_records: self.truncated_tail_records,
            evicted_in_flight_samples: queue.evicted_in_flight_samples,
            attempts: self.counters.attempts.load(Relaxed),
            retries: self.counters.retries.load(Relaxed),
            encode_failures: self.counters.encode_failures.load(Relaxed),
            failing: self.failing.load(Relaxed),
            last_error: crate::util::lock(&self.last_error).clone(),
        }
    }

    pub(super) fn note_error(&self, e: String) {
        *crate::util::lock(&self.last_error) = Some((now_ns() / 1_000_000_000, e));
    }

    /// fsyncs the queue (at shutdown).
    pub fn sync(&self) {
        if let Err(e) = self.queue.sync() {
            tracing::error!(sink = %self.name, error = %e, "syncing the queue");
        }
    }

    /// Delivers the queue until `stop` is cancelled; a record in flight then stays queued and
    /// is sent again at the next start.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut pending: Option<super::queue::Record> = None;
        let mut guest = GuestSend::default();
        let mut backoff = MIN_BACKOFF;
        let mut limiter = Limiter::new();
        loop {
            if stop.is_cancelled() {
                return;
            }
            let record = match pending.take() {
                // Held across a backoff: the budget may have dropped it meanwhile.
                Some(r) if self.queue.still_queued(r.seq) => r,
                Some(_) => continue,
                None => match self.queue.next() {
                    Ok(Some(r)) => r,
                    Ok(None) => {
                        tokio::select! {
                            _ = stop.cancelled() => return,
                            _ = self.wake.notified() => {}
                            // A wake-up lost between `next` and `notified` costs at most this.
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                        continue;
                    }
                    Err(e) => {
                        self.note_error(format!("reading the queue: {e}"));
                        tracing::error!(sink = %self.name, error = %e, "reading the queue");
                        if sleep_or_stop(&stop, Duration::from_secs(1)).await {
                            return;
                        }
                        continue;
                    }
                },
            };
            let (transport, exporter, rate, max_backoff, max_failures) = {
                let s = crate::util::read(&self.settings);
                let c = &s.cfg;
                (
                    s.transport.clone(),
                    s.exporter.clone(),
                    c.catch_up_rate,
                    c.max_backoff,
                    c.max_encode_failures,
                )
            };
            // Live traffic (the record just queued) goes at once; a backlog is paced.
            if rate > 0 && self.queue.stats().queued_records > 1 {
                let wait = limiter.take(u64::from(record.samples), rate);
                if !wait.is_zero() && sleep_or_stop(&stop, wait).await {
                    return;
                }
            }
            let id = format!("{}.{}", self.queue_id, record.seq);
            self.counters.attempts.fetch_add(1, Relaxed);
            let outcome = tokio::select! {
                _ = stop.cancelled() => return,
                o = async {
                    match &exporter {
                        Some(e) => guest.send(&self.counters.encode_failures, e, &transport, &record, &id, max_failures).await,
                        None => transport.send(&record.payload, &id).await,
                    }
                } => o,
            };
            match outcome {
                Outcome::Delivered => {
                    if let Err(e) = self.queue.ack(record.seq) {
                        tracing::error!(sink = %self.name, error = %e, "acknowledging a record");
                    }
                    backoff = MIN_BACKOFF;
                    if self.failing.swap(false, Relaxed) {
                        let q = self.queue.stats();
                        tracing::info!(sink = %self.name, backlog_records = q.queued_records, "delivering again; draining the backlog");
                    }
                }
                Outcome::Refused(why) => {
                    tracing::warn!(sink = %self.name, seq = record.seq, samples = record.samples, reason = %why, "destination refused a batch: dead-lettered");
                    self.note_error(format!("refused: {why}"));
                    if let Err(e) = self.queue.dead_letter(record.seq, &record.payload, &why) {
                        tracing::error!(sink = %self.name, error = %e, "writing the dead-letter file");
                    }
                }
                Outcome::Wait(d) => {
                    if let Nack::Retry = self.queue.nack(record.seq) {
                        pending = Some(record);
                    }
                    if sleep_or_stop(&stop, d).await {
                        return;
                    }
                }
                Outcome::Retry(why) => {
                    self.counters.retries.fetch_add(1, Relaxed);
                    self.note_error(why.clone());
                    if !self.failing.swap(true, Relaxed) {
                        tracing::warn!(sink = %self.name, error = %why, "cannot deliver; queuing on disk and retrying (logged again when delivery resumes)");
                    } else {
                        tracing::debug!(sink = %self.name, error = %why, "retry failed");
                    }
                    if let Nack::Retry = self.queue.nack(record.seq) {
                        pending = Some(record);
                    }
                    // Full jitter: nodes that lost the same upstream come back spread out.
                    let wait = backoff.mul_f64(rand::random::<f64>());
                    backoff = (backoff * 2).min(max_backoff);
                    if sleep_or_stop(&stop, wait.max(Duration::from_millis(10))).await {
                        return;
                    }
                }
            }
        }
    }
}

/// Sleeps; true when `stop` was cancelled meanwhile.
async fn sleep_or_stop(stop: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        _ = stop.cancelled() => true,
        _ = tokio::time::sleep(d) => false,
    }
}

/// A token bucket in samples: one second's worth of burst.
struct Limiter {
    tokens: f64,
    at: Instant,
}

impl Limiter {
    fn new() -> Limiter {
        Limiter {
            tokens: 0.0,
            at: Instant::now(),
        }
    }

    /// Takes `n` samples' worth at `rate` per second; how long to wait first.
    fn take(&mut self, n: u64, rate: u64) -> Duration {
        let now = Instant::now();
        let rate = rate as f64;
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * rate).min(rate);
        self.at = now;
        self.tokens -= n as f64;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / rate)
        }
    }
}

pub fn queue_config(cfg: &SinkConfig) -> QueueConfig {
    QueueConfig {
        max_size: cfg.queue_max_size,
        max_age: cfg.queue_max_age,
        ..QueueConfig::default()
    }
}

fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}
