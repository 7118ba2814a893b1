//! The buffer store (cc-metric-store's memory store): a tree of levels (cluster → host →
//! component → sub-component), each holding one buffer chain per metric. Owns writes, reads
//! with aggregation over children, stats, free/retention and the metric registry; persistence
//! lives in `wal`, `snapshot` and `workers`.
//!
//! Locking: every level has an `RwLock` on its children map (read-mostly; taken for writing
//! only when a child is created) and a `Mutex` over its metric chains. A write takes one mutex
//! (plus read locks while descending); there is no store-wide lock on the hot path.

mod buffer;
pub mod config;
mod query;
mod registry;
mod selector;
pub mod snapshot;
mod wal;
pub mod workers;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

pub use buffer::BUFFER_CAP;
pub use config::{Aggregation, ArchiveConfig, MetricConfig, StoreConfig};
pub use query::{ReadResult, Stats};
pub use selector::{SelectorElement, selector};
pub use wal::WalBatch;
pub use workers::run_workers;

use buffer::{Chain, Pool};
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
    #[error("cannot write to the past: timestamp {ts} is older than the oldest buffer ({oldest})")]
    TooOld { ts: i64, oldest: i64 },
    #[error("metric or host not found")]
    NotFound,
    #[error("invalid time range")]
    InvalidRange,
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

pub(crate) fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
pub(crate) fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}
pub(crate) fn lock<T>(l: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

/// A node of the level tree. Obtain with [`Store::level`]; writing through a cached level
/// skips the descent from the root (what the line-protocol ingest does per host).
pub struct Level {
    /// The selector path, pre-encoded for WAL records.
    wal_path: Box<[u8]>,
    depth: usize,
    children: RwLock<FastMap<Box<str>, Arc<Level>>>,
    /// This level's own series; a handful per level, so a linear search beats a map.
    metrics: Mutex<Vec<Slot>>,
}

/// One series of a level: metric id and its chain (64 bytes, one cache line).
pub(crate) struct Slot {
    pub(crate) id: u32,
    pub(crate) chain: Chain,
}

impl Level {
    fn new(wal_path: Box<[u8]>, depth: usize) -> Level {
        Level {
            wal_path,
            depth,
            children: RwLock::default(),
            metrics: Mutex::new(Vec::new()),
        }
    }

    /// The child `name`, created if missing.
    pub fn child(&self, name: &str) -> Result<Arc<Level>, StoreError> {
        if let Some(c) = read(&self.children).get(name) {
            return Ok(c.clone());
        }
        self.create_child(name)
    }

    #[cold]
    fn create_child(&self, name: &str) -> Result<Arc<Level>, StoreError> {
        validate_name(name)?;
        if self.depth >= 32 {
            // The WAL encodes depth in a byte; real trees are 4 deep.
            return Err(StoreError::InvalidName {
                name: name.to_string(),
                reason: "level tree deeper than 32",
            });
        }
        let mut children = write(&self.children);
        if let Some(c) = children.get(name) {
            return Ok(c.clone());
        }
        let path = wal::extend_path(&self.wal_path, name);
        let c = Arc::new(Level::new(path, self.depth + 1));
        children.insert(name.into(), c.clone());
        Ok(c)
    }

    fn get_child(&self, name: &str) -> Option<Arc<Level>> {
        read(&self.children).get(name).cloned()
    }

    fn children(&self) -> Vec<(Box<str>, Arc<Level>)> {
        read(&self.children)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Memory-only write of one sample.
    #[inline]
    fn write(&self, m: MetricInfo, ts: i64, value: f64, pool: &Pool) -> Result<(), StoreError> {
        let mut metrics = lock(&self.metrics);
        match metrics.iter_mut().find(|s| s.id == m.id) {
            Some(s) => s.chain.write(ts, value, pool),
            None => {
                metrics.push(Slot {
                    id: m.id,
                    chain: Chain::new(m.frequency, ts, value, pool),
                });
                Ok(())
            }
        }
    }

    /// Memory-only write of several samples under one lock acquisition. Besides saving
    /// atomics, the stores to the different pages are not separated by a locked instruction,
    /// so their cache misses overlap instead of being paid one after the other.
    fn write_group<T>(
        &self,
        items: &[T],
        get: impl Fn(&T) -> Pending<'_>,
        pool: &Pool,
        mut result: impl FnMut(usize, Result<(), StoreError>),
    ) {
        let mut metrics = lock(&self.metrics);
        for (i, it) in items.iter().enumerate() {
            let it = get(it);
            let r = match metrics.iter_mut().find(|s| s.id == it.metric.id) {
                Some(s) => s.chain.write(it.ts, it.value, pool),
                None => {
                    metrics.push(Slot {
                        id: it.metric.id,
                        chain: Chain::new(it.metric.frequency, it.ts, it.value, pool),
                    });
                    Ok(())
                }
            };
            result(i, r);
        }
    }

    /// Runs `f` on this level's chain for metric `id`, if it has one.
    pub(crate) fn with_chain<R>(&self, id: u32, f: impl FnOnce(&Chain) -> R) -> Option<R> {
        lock(&self.metrics)
            .iter()
            .find(|s| s.id == id)
            .map(|s| f(&s.chain))
    }

    fn free(&self, t: i64, pool: &Pool) -> usize {
        let mut n = 0;
        {
            let mut metrics = lock(&self.metrics);
            let mut i = 0;
            while i < metrics.len() {
                let (freed, gone) = metrics[i].chain.free_before(t, pool);
                n += freed;
                if gone {
                    metrics.swap_remove(i).chain.release(pool);
                } else {
                    i += 1;
                }
            }
        }
        for (_, c) in self.children() {
            n += c.free(t, pool);
        }
        n
    }
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
}

impl Store {
    /// A memory-only store (no WAL, no snapshots).
    pub fn new(config: StoreConfig) -> Store {
        Store {
            registry: Registry::new(&config),
            pool: Pool::new(config.buffer_pool_max),
            config,
            root: Arc::new(Level::new(wal::root_path(), 0)),
            counters: StoreCounters::default(),
            data_dir: None,
            wal: None,
            checkpoint_lock: tokio::sync::Mutex::new(()),
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

    /// The level at `path` (created if missing), e.g. `["alex", "a903", "hwthread1"]`.
    pub fn level(&self, path: &[&str]) -> Result<Arc<Level>, StoreError> {
        let mut l = self.root.clone();
        for name in path {
            l = l.child(name)?;
        }
        Ok(l)
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
    /// the WAL generation that holds it (see `snapshot::checkpoint`).
    #[inline]
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
            Ok(()) => {
                // Counted per batch: a shared atomic per sample would bounce between cores.
                batch.samples += 1;
                if self.wal.is_some() {
                    batch.push(&level.wal_path, metric_name, ts, value);
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

    /// Writes several samples into one level (one lock acquisition) and records them in
    /// `batch`; `result(i, r)` reports each item's outcome.
    pub fn write_group<T>(
        &self,
        batch: &mut WalBatch,
        level: &Level,
        items: &[T],
        get: impl Fn(&T) -> Pending<'_> + Copy,
        mut result: impl FnMut(usize, Result<(), StoreError>),
    ) {
        let wal = self.wal.is_some();
        level.write_group(items, get, &self.pool, |i, r| {
            match &r {
                Ok(()) => {
                    batch.samples += 1;
                    if wal {
                        let it = get(&items[i]);
                        batch.push(&level.wal_path, it.name, it.ts, it.value);
                    }
                }
                Err(_) => {
                    self.counters
                        .samples_rejected
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            result(i, r)
        });
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

    /// Names of the children of the level at `path` (empty if it does not exist).
    pub fn list_children(&self, path: &[&str]) -> Vec<String> {
        match self.find_level(path) {
            Some(l) => read(&l.children).keys().map(|k| k.to_string()).collect(),
            None => Vec::new(),
        }
    }

    /// Calls `f(path, metric, ts, value)` with the newest non-NaN value of every series.
    pub fn for_each_latest(&self, mut f: impl FnMut(&[&str], &str, i64, f64)) {
        let names = self.registry.all_names();
        let mut path = Vec::new();
        walk(&self.root, &mut path, &mut |path, level| {
            let metrics = lock(&level.metrics);
            let p: Vec<&str> = path.iter().map(|s| &**s).collect();
            for s in metrics.iter() {
                if let Some((ts, v)) = s.chain.latest() {
                    f(&p, &names[s.id as usize], ts, v);
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
            for s in lock(&l.metrics).iter() {
                if let Some((ts, _)) = s.chain.latest() {
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
            ..Usage::default()
        };
        let mut path = Vec::new();
        walk(&self.root, &mut path, &mut |_, level| {
            u.levels += 1;
            for s in lock(&level.metrics).iter() {
                u.series += 1;
                u.buffers += s.chain.buffer_count();
                u.samples += s.chain.samples();
            }
        });
        u
    }

    /// A JSON dump of the tree below `path`: per level its metrics (step, buffers, first/last
    /// timestamp, samples) and children.
    pub fn debug_dump(&self, path: &[&str]) -> Result<serde_json::Value, StoreError> {
        let level = self.find_level(path).ok_or(StoreError::NotFound)?;
        Ok(dump(&level, &self.registry.all_names()))
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
}

/// One sample for [`Store::write_group`]: a resolved metric for an already known level.
#[derive(Debug, Clone, Copy)]
pub struct Pending<'a> {
    pub name: &'a str,
    pub metric: MetricInfo,
    pub ts: i64,
    pub value: f64,
}

/// One sample for [`Store::write_batch`].
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    pub path: &'a [&'a str],
    pub metric: &'a str,
    pub ts: i64,
    pub value: f64,
}

/// Depth-first walk, handing each level with its path to `f`.
fn walk(level: &Arc<Level>, path: &mut Vec<Box<str>>, f: &mut dyn FnMut(&[Box<str>], &Level)) {
    f(path, level);
    let mut children = level.children();
    children.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, c) in children {
        path.push(name);
        walk(&c, path, f);
        path.pop();
    }
}

fn dump(level: &Level, names: &[Arc<str>]) -> serde_json::Value {
    let mut metrics = serde_json::Map::new();
    for s in lock(&level.metrics).iter() {
        let c = &s.chain;
        let (k0, k1) = c.span();
        {
            metrics.insert(
                names[s.id as usize].to_string(),
                serde_json::json!({
                    "frequency": c.freq,
                    "buffers": c.buffer_count(),
                    "first": k0 * c.freq,
                    "last": (k1 - 1) * c.freq,
                    "samples": c.samples(),
                }),
            );
        }
    }
    let mut children = serde_json::Map::new();
    for (name, c) in level.children() {
        children.insert(name.to_string(), dump(&c, names));
    }
    serde_json::json!({ "metrics": metrics, "children": children })
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_persistence;
