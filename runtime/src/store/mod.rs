//! The buffer store (cc-metric-store's memory store): a tree of levels (cluster → host →
//! component → sub-component), each holding one buffer chain per metric. Owns writes, reads
//! with aggregation over children, stats, free/retention and the metric registry; persistence
//! lives in `wal`, `snapshot` and `workers`; the tree and its locking in `level`; the grouped
//! write every receiver's samples take into the store in `grouped`.

mod buffer;
pub mod codec;
pub mod config;
mod grouped;
mod level;
mod level_cache;
mod page;
mod query;
mod registry;
mod selector;
pub mod snapshot;
mod spin;
mod thin;
mod wal;
pub mod workers;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use buffer::{BUFFER_CAP, IDLE_AFTER, MAX_FREQUENCY, Newest};

/// Walks from the root that [`Store::level`] starts again when a level on the way was removed
/// meanwhile: the background pass removes a level once per pass at most.
const MAX_TRIES: u32 = 8;

/// How often the workers run [`Store::compact`]: the open buffers' raw slots hold what a
/// series wrote since the last pass (6 values at 10 s), so the interval bounds them.
pub const COMPACT_EVERY: std::time::Duration = std::time::Duration::from_secs(60);
pub use config::{Aggregation, ArchiveConfig, LTTB_MIN_POINTS, MetricConfig, StoreConfig};
pub use grouped::{GroupWrite, Held, LevelKeys, Pending, Queued, Written};
pub use query::{ReadResult, Stats, lttb};
pub use selector::{SelectorElement, selector};
pub use wal::WalBatch;
pub use workers::run_workers;

use buffer::Pool;
pub use level::Level;
use level::walk;
pub use level_cache::{LevelCache, LevelCacheGuard};
use registry::Registry;
pub use registry::validate_name;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Errors of the store. Read errors are reported per query (cc-metric-store puts them into
/// the query result's `error` field).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("unknown metric: {0}")]
    UnknownMetric(String),
    #[error("invalid name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error(
        "cannot write to the past: timestamp {ts} is older than the series and than retention \
         ({oldest})"
    )]
    TooOld { ts: i64, oldest: i64 },
    #[error("timestamp {ts} is out of range (more than 35,000 years from 1970 at a 1 s step)")]
    TimestampOutOfRange { ts: i64 },
    #[error("metric or host not found")]
    NotFound,
    #[error("invalid time range")]
    InvalidRange,
    /// cc-lib's words, so a cc-backend user sees the message cc-metric-store gives.
    #[error("new sampling frequency ({resolution}) must be a multiple of old frequency ({step})")]
    Resolution { resolution: i64, step: i64 },
    #[error("data from lower granularities does not align")]
    DataDoesNotAlign,
    #[error("metric {metric} has no aggregation but {matches} series match")]
    NoAggregation { metric: String, matches: usize },
    #[error("i/o error on {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("write-ahead log unavailable: {0}")]
    Wal(String),
    /// The level was taken out of the tree (it held no series) while the caller held it:
    /// [`Store`]'s write paths resolve the path again and write there.
    #[error("level removed from the tree while in use")]
    Removed,
}

impl StoreError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Resolved metric: dense id (index into a level's chains), step and aggregation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricInfo {
    pub id: u32,
    pub frequency: i64,
    pub aggregation: Aggregation,
}

/// Counters the daemon exports next to its own (`/metrics`).
#[derive(Debug, Default)]
pub struct StoreCounters {
    pub samples_written: AtomicU64,
    pub samples_rejected: AtomicU64,
    pub buffers_freed: AtomicU64,
    pub wal_records_replayed: AtomicU64,
    pub wal_damage: AtomicU64,
    pub snapshot_damage: AtomicU64,
    pub snapshots_written: AtomicU64,
}

pub(crate) use crate::util::{lock, read, write};

/// The generations `N` of the files `PREFIX N SUFFIX` in `dir` (snapshots, WAL files),
/// ascending; other names are not the store's and are passed over.
fn generations(dir: &std::path::Path, prefix: &str, suffix: &str) -> Vec<u64> {
    let mut v: Vec<u64> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix(prefix)?
                .strip_suffix(suffix)?
                .parse()
                .ok()
        })
        .collect();
    v.sort_unstable();
    v
}

/// The in-memory time-series store. Cheap to share as `Arc<Store>`.
pub struct Store {
    config: StoreConfig,
    registry: Registry,
    root: Arc<Level>,
    pool: Pool,
    counters: StoreCounters,
    data_dir: Option<PathBuf>,
    wal: Option<wal::Wal>,
    /// Serialises snapshot/rotation so two checkpoints never interleave.
    checkpoint_lock: tokio::sync::Mutex<()>,
    level_caches: level_cache::Pool,
}

impl Store {
    /// A memory-only store (no WAL, no snapshots).
    pub fn new(config: StoreConfig) -> Store {
        Store {
            registry: Registry::new(&config),
            pool: Pool::with_retention(
                config.buffer_pool_max,
                config.retention_in_memory.as_secs(),
            )
            .with_precision(config.precision_by_id()),
            config,
            root: Arc::new(Level::root()),
            counters: StoreCounters::default(),
            data_dir: None,
            wal: None,
            checkpoint_lock: tokio::sync::Mutex::new(()),
            level_caches: Default::default(),
        }
    }

    /// Opens the store under `data_dir`: restores the newest snapshot, replays the WAL written
    /// after it, and starts a fresh WAL generation. Damage is logged, counted and skipped.
    pub fn open(config: StoreConfig, data_dir: impl AsRef<Path>) -> Result<Store, StoreError> {
        let dir = data_dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
        let mut store = Store::new(config);
        store.data_dir = Some(dir.clone());
        let generation = snapshot::restore(&store, &dir)?;
        if store.config.wal {
            store.wal = Some(wal::Wal::open(&dir, generation)?);
        }
        Ok(store)
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    pub fn counters(&self) -> &StoreCounters {
        &self.counters
    }

    pub fn data_dir(&self) -> Option<&Path> {
        self.data_dir.as_deref()
    }

    /// Resolves a metric name (registering an unknown one unless the config refuses them).
    #[inline]
    pub fn metric(&self, name: &str) -> Result<MetricInfo, StoreError> {
        self.registry.get(name)
    }

    /// A cache of levels by key text for one request (see `level_cache`); `context` is what
    /// else gives the keys their meaning (the request's default cluster).
    pub fn level_cache(&self, context: &str) -> LevelCacheGuard<'_> {
        LevelCacheGuard {
            pool: &self.level_caches,
            cache: self.level_caches.take(context),
        }
    }

    /// The level at `path` (created if missing), e.g. `["alex", "a903", "hwthread1"]`.
    pub fn level(&self, path: &[&str]) -> Result<Arc<Level>, StoreError> {
        // A level the background pass removes between the look-up of it and of its child
        // refuses the child: start again from the root (the pass removes only empty levels,
        // so the next walk creates them anew).
        let mut tries = 0;
        'walk: loop {
            let mut l = self.root.clone();
            for name in path {
                l = match l.child(name) {
                    Err(StoreError::Removed) if tries < MAX_TRIES => {
                        tries += 1;
                        continue 'walk;
                    }
                    r => r?,
                };
            }
            return Ok(l);
        }
    }

    /// The child `name` of `level`, found again from the root if `level` was removed from
    /// the tree while the caller held it.
    pub fn child(&self, level: &Level, name: &str) -> Result<Arc<Level>, StoreError> {
        match level.child(name) {
            Err(StoreError::Removed) => {
                let mut path = level.names();
                path.push(name);
                self.level(&path)
            }
            r => r,
        }
    }

    fn find_level(&self, path: &[&str]) -> Option<Arc<Level>> {
        let mut l = self.root.clone();
        for name in path {
            l = l.get_child(name)?;
        }
        Some(l)
    }

    /// Writes one sample. Durable once a later [`Store::commit`] returns.
    pub fn write(
        &self,
        path: &[&str],
        metric: &str,
        ts: i64,
        value: f64,
    ) -> Result<(), StoreError> {
        let mut batch = WalBatch::default();
        let level = self.level(path)?;
        let m = self.metric(metric)?;
        self.write_to(&mut batch, &level, metric, m, ts, value)?;
        self.submit(&mut batch)?;
        Ok(())
    }

    /// Writes many samples with one WAL append; returns the errors by sample index.
    pub fn write_batch(&self, samples: &[Sample<'_>]) -> Vec<(usize, StoreError)> {
        let mut batch = WalBatch::default();
        let mut errors = Vec::new();
        for (i, s) in samples.iter().enumerate() {
            let r = self.level(s.path).and_then(|l| {
                let m = self.metric(s.metric)?;
                self.write_to(&mut batch, &l, s.metric, m, s.ts, s.value)
            });
            if let Err(e) = r {
                errors.push((i, e));
            }
        }
        if let Err(e) = self.submit(&mut batch) {
            errors.push((samples.len(), e));
        }
        errors
    }

    /// The hot path: writes one sample into `level` and records it in `batch` for the WAL.
    /// Memory is written first, WAL second: a snapshot that misses the value is followed by
    /// the WAL generation that holds it (see `snapshot::checkpoint`). Always inlined: the
    /// caller's loop then overlaps one write's bookkeeping with the previous one's store.
    #[inline(always)]
    pub fn write_to(
        &self,
        batch: &mut WalBatch,
        level: &Level,
        metric_name: &str,
        m: MetricInfo,
        ts: i64,
        value: f64,
    ) -> Result<(), StoreError> {
        match level.write(m, ts, value, &self.pool) {
            Err(StoreError::Removed) => self.write_moved(batch, level, (metric_name, m, ts, value)),
            Ok(()) => {
                // Counted per batch: a shared atomic per sample would bounce between cores.
                batch.samples += 1;
                if self.wal.is_some() {
                    batch.push(&level.wal_path, m.id, metric_name, ts, value);
                }
                Ok(())
            }
            Err(e) => {
                self.counters
                    .samples_rejected
                    .fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// [`Store::write_to`] for a level the background pass took out of the tree (a cached
    /// level of a series that had expired): the level at its path now takes the sample.
    #[cold]
    #[inline(never)]
    fn write_moved(
        &self,
        batch: &mut WalBatch,
        level: &Level,
        (name, m, ts, value): (&str, MetricInfo, i64, f64),
    ) -> Result<(), StoreError> {
        let now = self.level(&level.names())?;
        self.write_to(batch, &now, name, m, ts, value)
    }

    /// Hands a batch to the WAL (no wait). Returns the sequence number to wait for.
    pub fn submit(&self, batch: &mut WalBatch) -> Result<u64, StoreError> {
        let n = std::mem::take(&mut batch.samples);
        self.counters
            .samples_written
            .fetch_add(n, Ordering::Relaxed);
        match &self.wal {
            Some(w) if !batch.is_empty() => w.append(batch),
            Some(w) => Ok(w.appended()),
            None => {
                batch.clear();
                Ok(0)
            }
        }
    }

    /// Waits until every WAL record appended so far is on disk (group commit: concurrent
    /// callers share one fdatasync). A no-op without a WAL.
    pub async fn commit(&self) -> Result<(), StoreError> {
        match &self.wal {
            Some(w) => w.wait_durable(w.appended()).await,
            None => Ok(()),
        }
    }

    /// Waits until the WAL is durable up to `seq` (from [`Store::submit`]).
    pub async fn wait_durable(&self, seq: u64) -> Result<(), StoreError> {
        match &self.wal {
            Some(w) => w.wait_durable(seq).await,
            None => Ok(()),
        }
    }

    /// Memory-only write used by WAL replay.
    fn apply(&self, path: &[&str], metric: &str, ts: i64, value: f64) -> Result<(), StoreError> {
        let m = self.metric(metric)?;
        self.level(path)?.write(m, ts, value, &self.pool)
    }

    /// Frees all buffers below `path` whose data is entirely older than `t`. Returns count.
    pub fn free(&self, path: &[&str], t: i64) -> usize {
        let n = match self.find_level(path) {
            Some(l) => l.free(t, &self.pool),
            None => 0,
        };
        self.counters
            .buffers_freed
            .fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// The background pass the workers run every [`COMPACT_EVERY`]: encodes what the write
    /// path leaves raw (closed blocks, the open blocks' older slots), shrinks series no longer
    /// written (`buffer::Chain::compact`), drops series of `idle-metrics` whose newest sample
    /// is older than `idle-retention`, and takes levels left without series or children out
    /// of the tree. `now`: the time idleness is measured from (seconds). Returns the series
    /// visited.
    pub fn compact(&self, now: i64) -> usize {
        let keep = self.config.idle_retention.as_secs() as i64;
        let prefixes = &self.config.idle_metrics;
        let idle: Vec<bool> = if keep == 0 || prefixes.is_empty() {
            Vec::new()
        } else {
            let names = self.registry.all_names();
            names
                .iter()
                .map(|n| prefixes.iter().any(|p| n.starts_with(p.as_str())))
                .collect()
        };
        let cutoff = now.saturating_sub(keep);
        let expired = |c: &buffer::Chain| {
            idle.get(c.id as usize).copied().unwrap_or(false) && c.newest_time() < cutoff
        };
        level::compact_tree(&self.root, now, &self.pool, &expired)
    }

    /// Names of the children of the level at `path` (empty if it does not exist).
    pub fn list_children(&self, path: &[&str]) -> Vec<String> {
        match self.find_level(path) {
            Some(l) => l.children().iter().map(|c| c.name().to_string()).collect(),
            None => Vec::new(),
        }
    }

    /// Names of the metrics held at the level at `path` itself, not below it (empty if the
    /// level does not exist).
    pub fn list_metrics(&self, path: &[&str]) -> Vec<String> {
        let Some(level) = self.find_level(path) else {
            return Vec::new();
        };
        let names = self.registry.all_names();
        let metrics = level.metrics.lock();
        metrics
            .iter()
            .map(|s| self.registry.name_of(&names, s.id).to_string())
            .collect()
    }

    /// Calls `f(path, metric, ts, value)` with the newest non-NaN value of every series.
    pub fn for_each_latest(&self, mut f: impl FnMut(&[&str], &str, i64, f64)) {
        self.for_each_newest(|path, metric, n| f(path, metric, n.ts, n.value));
    }

    /// Calls `f(path, metric, newest)` for every series with a value: its newest value, the
    /// series' step and the slot written before it.
    pub fn for_each_newest(&self, mut f: impl FnMut(&[&str], &str, &Newest)) {
        let names = self.registry.all_names();
        let mut path = Vec::new();
        walk(&self.root, &mut path, &mut |path, level| {
            let metrics = level.metrics.lock();
            let p: Vec<&str> = path.iter().map(|s| &**s).collect();
            for s in metrics.iter() {
                if let Some(n) = s.newest() {
                    f(&p, &self.registry.name_of(&names, s.id), &n);
                }
            }
        });
    }

    /// Newest sample time anywhere below `path`: `None` if the level does not exist,
    /// `Some(None)` if it holds no data.
    pub fn latest_timestamp(&self, path: &[&str]) -> Option<Option<i64>> {
        let level = self.find_level(path)?;
        let mut newest = None;
        let mut p = Vec::new();
        walk(&level, &mut p, &mut |_, l| {
            for s in l.metrics.lock().iter() {
                if let Some((ts, _)) = s.latest() {
                    newest = newest.max(Some(ts));
                }
            }
        });
        Some(newest)
    }

    /// Buffers in use and samples held (for `/api/debug` and the memory figure).
    pub fn usage(&self) -> Usage {
        let mut u = Usage {
            pooled_buffers: self.pool.len(),
            bytes: self.pool.len() * BUFFER_CAP * 8,
            ..Usage::default()
        };
        let mut path = Vec::new();
        walk(&self.root, &mut path, &mut |_, level| {
            u.levels += 1;
            u.bytes += level.heap_bytes();
            for s in level.metrics.lock().iter() {
                u.series += 1;
                u.buffers += s.buffer_count();
                u.samples += s.samples();
            }
        });
        u
    }

    /// A JSON dump of the tree below `path`: per level its metrics (step, buffers, first/last
    /// timestamp, samples) and children.
    pub fn debug_dump(&self, path: &[&str]) -> Result<serde_json::Value, StoreError> {
        let level = self.find_level(path).ok_or(StoreError::NotFound)?;
        Ok(dump(&level, &self.registry, &self.registry.all_names()))
    }
}

/// Memory figures of the store.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Usage {
    pub levels: usize,
    pub series: usize,
    pub buffers: usize,
    pub samples: usize,
    pub pooled_buffers: usize,
    /// Heap bytes of the whole tree: levels, series, open and closed buffers, pooled pages.
    pub bytes: usize,
}

/// One sample for [`Store::write_batch`].
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub path: &'a [&'a str],
    pub metric: &'a str,
    pub ts: i64,
    pub value: f64,
}

fn dump(level: &Level, reg: &registry::Registry, names: &[Arc<str>]) -> serde_json::Value {
    let mut metrics = serde_json::Map::new();
    for c in level.metrics.lock().iter() {
        let (k0, k1) = c.span();
        {
            metrics.insert(
                reg.name_of(names, c.id).to_string(),
                serde_json::json!({
                    "frequency": c.freq,
                    "buffers": c.buffer_count(),
                    "first": c.time(k0),
                    "last": c.time(k1 - 1),
                    "samples": c.samples(),
                }),
            );
        }
    }
    let mut children = serde_json::Map::new();
    for c in level.children() {
        children.insert(c.name().to_string(), dump(&c, reg, names));
    }
    serde_json::json!({ "metrics": metrics, "children": children })
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_conformance;
#[cfg(test)]
mod tests_persistence;
#[cfg(test)]
mod tests_retention;
