//! The store's grouped write: how the receivers' samples enter the store, line protocol's
//! ingest (`/api/write`, NATS) and a pipeline's `store` sink (remote write, OTLP, `/samples`)
//! alike. One WAL record for a body or batch; the samples of one level written together under
//! one lock of the level; the next level's slots loading while the previous level's group is
//! written. Callers name levels their own way ([`LevelKeys`]: a handle of a [`LevelCache`], a
//! level they hold) and resolve them themselves; this owns no level and no cache.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Level, LevelCache, MetricInfo, Store, StoreError, WalBatch};

/// One sample of a group: a resolved metric, for the level its group is written to.
#[derive(Debug, Clone, Copy)]
pub struct Pending<'a> {
    pub name: &'a str,
    pub metric: MetricInfo,
    pub ts: i64,
    pub value: f64,
}

/// What a caller queues in a [`GroupWrite`]: a [`Pending`] sample, with whatever else the
/// caller names a refused sample by (a line number, a metric name).
pub trait Queued: Clone {
    fn pending(&self) -> Pending<'_>;
}

impl Queued for Pending<'_> {
    #[inline(always)]
    fn pending(&self) -> Pending<'_> {
        *self
    }
}

/// How a caller names the levels it writes to: a [`GroupWrite`] compares keys to tell where
/// one level's group ends, and asks for the level only then.
pub trait LevelKeys {
    type Key: Clone;
    fn same(a: &Self::Key, b: &Self::Key) -> bool;
    fn level<'a>(&'a self, key: &'a Self::Key) -> &'a Level;
}

/// Levels the caller holds: the same key when it is the same level.
pub struct Held;

impl LevelKeys for Held {
    type Key = Arc<Level>;
    #[inline(always)]
    fn same(a: &Arc<Level>, b: &Arc<Level>) -> bool {
        Arc::ptr_eq(a, b)
    }
    #[inline(always)]
    fn level<'a>(&'a self, key: &'a Arc<Level>) -> &'a Level {
        key
    }
}

/// Handles of a level cache (valid until its next insert: flush the group before one).
impl LevelKeys for LevelCache {
    type Key = u32;
    #[inline(always)]
    fn same(a: &u32, b: &u32) -> bool {
        a == b
    }
    #[inline(always)]
    fn level<'a>(&'a self, key: &'a u32) -> &'a Level {
        LevelCache::level(self, *key)
    }
}

/// A body's or batch's writes: samples queued level by level, each level's group written when
/// the next level starts (or on [`GroupWrite::flush`]), one WAL record at [`GroupWrite::finish`].
pub struct GroupWrite<'s, K, T> {
    store: &'s Store,
    batch: WalBatch,
    /// The level the queued `items` belong to.
    target: Option<K>,
    items: Vec<T>,
    stored: usize,
    refused: Vec<(T, StoreError)>,
}

/// What a [`GroupWrite`] did: samples stored, samples the store refused (with why), and the
/// WAL sequence number that covers the stored ones (wait on it with [`Store::wait_durable`]
/// before acknowledging), or why the WAL refused the batch.
pub struct Written<T> {
    pub stored: usize,
    pub refused: Vec<(T, StoreError)>,
    pub wal: Result<u64, StoreError>,
}

impl Store {
    /// A grouped write of about `samples` samples (allocates no WAL record without a WAL).
    pub fn group_write<K, T>(&self, samples: usize) -> GroupWrite<'_, K, T> {
        GroupWrite {
            store: self,
            batch: match self.wal {
                // A record's sample: a path index, a metric id, a timestamp and a value.
                Some(_) => WalBatch::with_capacity(samples * 16 + 1024),
                None => WalBatch::default(),
            },
            target: None,
            items: Vec::with_capacity(64),
            stored: 0,
            refused: Vec::new(),
        }
    }
}

impl<K: Clone, T: Queued> GroupWrite<'_, K, T> {
    /// Queues `item` for the level `key` names in `levels`. When that is not the level of the
    /// queued group, the new level's slots start loading and the old group is written: its
    /// page stores complete while the next samples are gathered.
    #[inline]
    pub fn push<L: LevelKeys<Key = K>>(&mut self, levels: &L, key: &K, item: T) {
        if !self.target.as_ref().is_some_and(|t| L::same(t, key)) {
            levels.level(key).prefetch();
            self.flush(levels);
            self.target = Some(key.clone());
        }
        self.items.push(item);
    }

    /// Writes the queued group into its level under one lock of it (before the caller's keys
    /// change their meaning, e.g. a level cache's insert).
    pub fn flush<L: LevelKeys<Key = K>>(&mut self, levels: &L) {
        let Some(target) = self.target.take() else {
            return;
        };
        let level = levels.level(&target);
        let Self {
            store,
            batch,
            items,
            stored,
            refused,
            ..
        } = self;
        let wal = store.wal.is_some();
        let mut rejected = 0;
        let mut moved = Vec::new();
        level.write_group(
            items,
            |it| {
                let p = it.pending();
                (p.metric, p.ts, p.value)
            },
            &store.pool,
            |i, r| match r {
                Ok(()) => {
                    *stored += 1;
                    batch.samples += 1;
                    if wal {
                        let p = items[i].pending();
                        batch.push(&level.wal_path, p.metric.id, p.name, p.ts, p.value);
                    }
                }
                Err(StoreError::Removed) => moved.push(i),
                Err(e) => {
                    rejected += 1;
                    refused.push((items[i].clone(), e));
                }
            },
        );
        // A level the background pass took out of the tree meanwhile: each sample through
        // `write_to`, which finds the level at its path again (rare: a cached level whose
        // series had all expired).
        for i in moved {
            let p = items[i].pending();
            match store.write_to(batch, level, p.name, p.metric, p.ts, p.value) {
                Ok(()) => *stored += 1,
                Err(e) => refused.push((items[i].clone(), e)),
            }
        }
        if rejected > 0 {
            store
                .counters
                .samples_rejected
                .fetch_add(rejected, Ordering::Relaxed);
        }
        items.clear();
    }

    /// Writes the queued group and hands the batch to the WAL (no wait).
    pub fn finish<L: LevelKeys<Key = K>>(mut self, levels: &L) -> Written<T> {
        self.flush(levels);
        let wal = self.store.submit(&mut self.batch);
        Written {
            stored: self.stored,
            refused: self.refused,
            wal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreConfig, selector};

    /// Samples of alternating levels each land at their own level; a sample the store refuses
    /// comes back with its caller's item and error, the others are stored and in the WAL.
    #[test]
    fn a_group_write_stores_by_level_and_returns_what_was_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = StoreConfig {
            default_frequency: 60,
            ..Default::default()
        };
        let store = Store::open(cfg, dir.path()).unwrap();
        let (a, b) = (
            store.level(&["c", "a"]).unwrap(),
            store.level(&["c", "b"]).unwrap(),
        );
        let m = store.metric("m").unwrap();
        let at = |ts, value| Pending {
            name: "m",
            metric: m,
            ts,
            value,
        };
        let mut w = store.group_write(4);
        w.push(&Held, &a, at(60, 1.0));
        w.push(&Held, &a, at(120, 2.0));
        w.push(&Held, &b, at(60, 3.0));
        w.push(&Held, &b, at(i64::MAX / 2, 9.0));
        w.push(&Held, &a, at(180, 4.0));
        let written = w.finish(&Held);
        assert_eq!(written.stored, 4);
        assert_eq!(written.refused.len(), 1);
        assert_eq!(written.refused[0].0.value, 9.0);
        assert!(
            matches!(written.refused[0].1, StoreError::TimestampOutOfRange { .. }),
            "{}",
            written.refused[0].1
        );
        assert!(written.wal.unwrap() > 0, "the batch went to the WAL");
        let read = |p: &[&str]| store.read(&selector(p), "m", 60, 181, 0).unwrap().data;
        assert_eq!(read(&["c", "a"]), vec![1.0, 2.0, 4.0]);
        assert_eq!(read(&["c", "b"])[0], 3.0);
        assert_eq!(store.counters().samples_written.load(Ordering::Relaxed), 4);
        assert_eq!(store.counters().samples_rejected.load(Ordering::Relaxed), 1);
    }
}
