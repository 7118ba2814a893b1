//! The notifier's evaluation index: sharded hash tables from (metric, instance) to the thresholds
//! that apply and the per-instance edge state. Owns the hot path of `Notifier::observe`; knows
//! nothing about handles' allocation, subscribers' queues or transports (it calls back `fire`).
//!
//! Layout: 16 shards chosen by a hash of (metric, instance), each behind its own `RwLock`, so
//! threads ingesting different series rarely touch the same lock word. In every shard, a metric
//! that has at least one threshold has a slot holding a copy of the metric's global thresholds
//! (replicated per shard: globals change rarely, samples arrive constantly) and the instance
//! entries that hash to that shard. A Bloom filter of metrics with thresholds lets a sample of
//! any other metric return after one string hash, without a lock or an allocation. Otherwise a
//! sample costs two hashes, a read lock and two probes, plus its own resource's thresholds: the
//! cost does not grow with thresholds elsewhere.
//!
//! Mutations (`add_*`, `remove_*`, `drop_metric`) are serialised by the caller (the notifier's
//! registry mutex); `observe` and the readers run concurrently with them.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use std::hash::BuildHasher;

use super::subscriber::Subscriber;
use super::types::{CurrentValue, Direction, Handle};

const SHARDS: usize = 16;

/// One registered threshold, shared by the registry and every shard it is replicated into.
pub(crate) struct Threshold {
    pub handle: Handle,
    pub owner: Arc<Subscriber>,
    pub metric: Arc<str>,
    pub instance: Option<Arc<str>>,
    pub value: f64,
    pub direction: Direction,
    pub hysteresis: f64,
}

/// What evaluation needs of a threshold, copied next to the data that refers to it so the hot
/// path does not chase the `Arc` (a cache miss per threshold on a cold entry).
#[derive(Clone)]
struct Local {
    value: f64,
    hysteresis: f64,
    direction: Direction,
    handle: Handle,
    t: Arc<Threshold>,
}

impl Local {
    fn new(t: &Arc<Threshold>) -> Self {
        Local {
            value: t.value,
            hysteresis: t.hysteresis,
            direction: t.direction,
            handle: t.handle,
            t: Arc::clone(t),
        }
    }

    /// The value is on the firing side.
    #[inline]
    fn beyond(&self, v: f64) -> bool {
        match self.direction {
            Direction::Rising => v >= self.value,
            Direction::Falling => v < self.value,
        }
    }

    /// The value is far enough back on the near side to re-arm.
    #[inline]
    fn rearms(&self, v: f64) -> bool {
        match self.direction {
            Direction::Rising => v < self.value - self.hysteresis,
            Direction::Falling => v >= self.value + self.hysteresis,
        }
    }
}

/// An instance's own thresholds; the first one inline (the common case is one or two).
/// `repr(C)`: `first` must come first, see `InstanceEntry`.
#[derive(Default)]
#[repr(C)]
struct Locals {
    first: Option<Local>,
    more: Vec<Local>,
}

impl Locals {
    #[inline]
    fn iter(&self) -> impl Iterator<Item = &Local> {
        self.first.iter().chain(self.more.iter())
    }

    fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    fn push(&mut self, l: Local) {
        if self.first.is_none() {
            self.first = Some(l)
        } else {
            self.more.push(l)
        }
    }

    fn remove(&mut self, h: Handle) {
        self.more.retain(|l| l.handle != h);
        if self.first.as_ref().is_some_and(|l| l.handle == h) {
            self.first = self.more.pop();
        }
    }
}

/// Instance names up to this length are also kept inline, so matching a sample against its
/// entry does not dereference the name's heap allocation (pids and `pid/tid` fit).
const SHORT: usize = 14;

/// Value and edge state of one (metric, instance).
///
/// Laid out so that everything a sample touches when it crosses nothing (name check, value,
/// timestamp, the first own threshold, the disarmed hint) is in the first cache line: with 100k
/// instances the entries do not fit in L2, and each extra line is another miss.
#[repr(C, align(64))]
struct InstanceEntry {
    /// Length of `short`, or `u8::MAX` when the name is longer than `SHORT`.
    short_len: u8,
    /// `!disarmed.is_empty()`, readable without the lock for the common re-arm check.
    any_disarmed: AtomicBool,
    short: [u8; SHORT],
    /// f64 bits; NaN until the first sample.
    value: AtomicU64,
    ts_ns: AtomicI64,
    /// Thresholds on exactly this instance. Changed only under the shard's write lock.
    locals: Locals,
    name: Arc<str>,
    hash: u64,
    /// Handles that fired and have not re-armed yet. A threshold is armed when created and when
    /// an instance is first seen, so a value already past it fires on the next sample.
    disarmed: Mutex<Vec<Handle>>,
}

impl InstanceEntry {
    fn new(name: &str, hash: u64) -> Self {
        let mut short = [0u8; SHORT];
        let short_len = if name.len() <= SHORT {
            short[..name.len()].copy_from_slice(name.as_bytes());
            name.len() as u8
        } else {
            u8::MAX
        };
        InstanceEntry {
            name: Arc::from(name),
            hash,
            short,
            short_len,
            value: AtomicU64::new(f64::NAN.to_bits()),
            ts_ns: AtomicI64::new(i64::MIN),
            locals: Locals::default(),
            disarmed: Mutex::new(Vec::new()),
            any_disarmed: AtomicBool::new(false),
        }
    }

    #[inline]
    fn is(&self, name: &str) -> bool {
        if self.short_len == u8::MAX {
            &*self.name == name
        } else {
            &self.short[..self.short_len as usize] == name.as_bytes()
        }
    }

    fn disarmed(&self) -> std::sync::MutexGuard<'_, Vec<Handle>> {
        crate::util::lock(&self.disarmed)
    }

    fn clear_handle(&self, h: Handle) {
        let mut d = self.disarmed();
        d.retain(|x| *x != h);
        self.any_disarmed.store(!d.is_empty(), Ordering::Relaxed);
    }

    fn evaluate<F>(&self, t: &Local, v: f64, fire: &mut F)
    where
        F: FnMut(&Threshold, &Arc<str>),
    {
        if t.beyond(v) {
            // Check-and-set under the lock: two threads racing on one series fire once.
            let mut d = self.disarmed();
            if !d.contains(&t.handle) {
                d.push(t.handle);
                self.any_disarmed.store(true, Ordering::Relaxed);
                drop(d);
                fire(&t.t, &self.name);
            }
        } else if t.rearms(v) && self.any_disarmed.load(Ordering::Relaxed) {
            let mut d = self.disarmed();
            if let Some(p) = d.iter().position(|x| *x == t.handle) {
                d.swap_remove(p);
                self.any_disarmed.store(!d.is_empty(), Ordering::Relaxed);
            }
        }
    }
}

struct MetricSlot {
    name: Arc<str>,
    hash: u64,
    globals: Vec<Local>,
    instances: HashTable<InstanceEntry>,
}

#[derive(Default)]
struct ShardInner {
    metrics: HashTable<MetricSlot>,
}

impl ShardInner {
    fn slot(&self, hm: u64, metric: &str) -> Option<&MetricSlot> {
        self.metrics.find(hm, |s| &*s.name == metric)
    }

    fn slot_mut(&mut self, hm: u64, metric: &str) -> Option<&mut MetricSlot> {
        self.metrics.find_mut(hm, |s| &*s.name == metric)
    }

    fn slot_or_insert(&mut self, hm: u64, metric: &Arc<str>) -> &mut MetricSlot {
        self.metrics
            .entry(hm, |s| s.name == *metric, |s| s.hash)
            .or_insert_with(|| MetricSlot {
                name: Arc::clone(metric),
                hash: hm,
                globals: Vec::new(),
                instances: HashTable::new(),
            })
            .into_mut()
    }
}

/// Padded so two shards' lock words never share a cache line.
#[repr(align(128))]
#[derive(Default)]
struct Shard(RwLock<ShardInner>);

impl Shard {
    fn read(&self) -> RwLockReadGuard<'_, ShardInner> {
        // Index mutations are small and complete before unlocking; a poisoned lock is usable.
        crate::util::read(&self.0)
    }
    fn write(&self) -> RwLockWriteGuard<'_, ShardInner> {
        crate::util::write(&self.0)
    }
}

pub(crate) struct Index {
    hasher: RandomState,
    shards: Box<[Shard]>,
    /// Which metrics have thresholds, as a 4096-bit Bloom filter over the metric hash: a sample
    /// of any other metric returns after one hash and one load, without taking a lock.
    filter: Box<[AtomicU64; FILTER_WORDS]>,
}

const FILTER_WORDS: usize = 64;

#[inline]
fn filter_bit(hm: u64) -> (usize, u64) {
    // Bits 40.. of the hash: hashbrown uses the low bits and the top 7, the shard the top 4 of
    // a product; any fixed slice of a good 64-bit hash will do.
    let b = (hm >> 40) as usize % (FILTER_WORDS * 64);
    (b / 64, 1u64 << (b % 64))
}

impl Index {
    pub fn new() -> Self {
        Index {
            hasher: RandomState::default(),
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            filter: Box::new([const { AtomicU64::new(0) }; FILTER_WORDS]),
        }
    }

    #[inline]
    fn hash(&self, s: &str) -> u64 {
        self.hasher.hash_one(s)
    }

    #[inline]
    fn shard(&self, hm: u64, hi: u64) -> &Shard {
        // Mix both hashes; use the high bits (hashbrown uses low bits and the top 7 as tag, on
        // different hashes, so the shard choice does not skew the tables).
        let x = (hm ^ hi.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        &self.shards[(x >> 60) as usize % SHARDS]
    }

    #[inline]
    fn may_have(&self, hm: u64) -> bool {
        let (w, bit) = filter_bit(hm);
        self.filter[w].load(Ordering::Acquire) & bit != 0
    }

    fn mark(&self, hm: u64) {
        let (w, bit) = filter_bit(hm);
        self.filter[w].fetch_or(bit, Ordering::Release);
    }

    /// Recompute the filter from the metrics that still have slots. Each word is replaced by a
    /// superset of the live metrics' bits in it, so a live metric is never hidden, even briefly.
    fn rebuild_filter(&self) {
        let mut words = [0u64; FILTER_WORDS];
        // Every metric with a threshold has a slot in every shard; shard 0 lists them all.
        for slot in self.shards[0].read().metrics.iter() {
            let (w, bit) = filter_bit(slot.hash);
            words[w] |= bit;
        }
        for (a, w) in self.filter.iter().zip(words) {
            a.store(w, Ordering::Release);
        }
    }

    /// Record a sample and call `fire` for each threshold it crosses.
    #[inline]
    pub fn observe<F>(&self, metric: &str, instance: &str, v: f64, ts_ns: i64, mut fire: F)
    where
        F: FnMut(&Threshold, &Arc<str>),
    {
        if v.is_nan() {
            return;
        }
        let hm = self.hash(metric);
        if !self.may_have(hm) {
            return;
        }
        let hi = self.hash(instance);
        let shard = self.shard(hm, hi);
        {
            let g = shard.read();
            let Some(slot) = g.slot(hm, metric) else {
                return;
            };
            if let Some(e) = slot.instances.find(hi, |e| e.is(instance)) {
                Self::record(slot, e, v, ts_ns, &mut fire);
                return;
            }
            if slot.globals.is_empty() {
                return;
            }
        }
        // First sample of an instance of a metric with global thresholds: allocate its entry.
        let mut g = shard.write();
        {
            let Some(slot) = g.slot_mut(hm, metric) else {
                return;
            };
            if slot.globals.is_empty() {
                return; // removed while we waited for the write lock
            }
            slot.instances
                .entry(hi, |e| e.is(instance), |e| e.hash)
                .or_insert_with(|| InstanceEntry::new(instance, hi));
        }
        let g = &*g;
        let Some(slot) = g.slot(hm, metric) else {
            return;
        };
        let Some(e) = slot.instances.find(hi, |e| e.is(instance)) else {
            return;
        };
        Self::record(slot, e, v, ts_ns, &mut fire);
    }

    #[inline]
    fn record<F>(slot: &MetricSlot, e: &InstanceEntry, v: f64, ts_ns: i64, fire: &mut F)
    where
        F: FnMut(&Threshold, &Arc<str>),
    {
        e.value.store(v.to_bits(), Ordering::Relaxed);
        e.ts_ns.store(ts_ns, Ordering::Relaxed);
        for t in e.locals.iter().chain(slot.globals.iter()) {
            e.evaluate(t, v, fire);
        }
    }

    pub fn value(&self, metric: &str, instance: &str) -> Option<CurrentValue> {
        let (hm, hi) = (self.hash(metric), self.hash(instance));
        let g = self.shard(hm, hi).read();
        let e = g.slot(hm, metric)?.instances.find(hi, |e| e.is(instance))?;
        let ts_ns = e.ts_ns.load(Ordering::Relaxed);
        (ts_ns != i64::MIN).then(|| CurrentValue {
            value: f64::from_bits(e.value.load(Ordering::Relaxed)),
            ts_ns,
        })
    }

    /// Make sure every shard has a slot for `metric` (so `observe` finds it wherever the
    /// instance hashes).
    fn ensure_metric(&self, metric: &Arc<str>) -> u64 {
        let hm = self.hash(metric);
        for s in self.shards.iter() {
            s.write().slot_or_insert(hm, metric);
        }
        self.mark(hm);
        hm
    }

    pub fn add_global(&self, t: &Arc<Threshold>) {
        let hm = self.hash(&t.metric);
        for s in self.shards.iter() {
            s.write()
                .slot_or_insert(hm, &t.metric)
                .globals
                .push(Local::new(t));
        }
        self.mark(hm);
    }

    pub fn add_local(&self, t: &Arc<Threshold>, instance: &str) {
        let hm = self.ensure_metric(&t.metric);
        let hi = self.hash(instance);
        let mut g = self.shard(hm, hi).write();
        let slot = g.slot_or_insert(hm, &t.metric);
        let e = slot
            .instances
            .entry(hi, |e| e.is(instance), |e| e.hash)
            .or_insert_with(|| InstanceEntry::new(instance, hi))
            .into_mut();
        e.locals.push(Local::new(t));
    }

    pub fn remove_global(&self, t: &Threshold) {
        let hm = self.hash(&t.metric);
        for s in self.shards.iter() {
            let mut g = s.write();
            if let Some(slot) = g.slot_mut(hm, &t.metric) {
                slot.globals.retain(|x| x.handle != t.handle);
                for e in slot.instances.iter() {
                    e.clear_handle(t.handle);
                }
                if slot.globals.is_empty() {
                    // Without globals an entry is only kept for its own thresholds.
                    slot.instances.retain(|e| !e.locals.is_empty());
                }
            }
        }
    }

    pub fn remove_local(&self, t: &Threshold, instance: &str) {
        let (hm, hi) = (self.hash(&t.metric), self.hash(instance));
        let mut g = self.shard(hm, hi).write();
        let Some(slot) = g.slot_mut(hm, &t.metric) else {
            return;
        };
        let keep_entries = !slot.globals.is_empty();
        if let Ok(mut occ) = slot.instances.find_entry(hi, |e| e.is(instance)) {
            let e = occ.get_mut();
            e.locals.remove(t.handle);
            e.clear_handle(t.handle);
            if e.locals.is_empty() && !keep_entries {
                occ.remove();
            }
        }
    }

    /// Drop every trace of a metric that has no thresholds left.
    pub fn drop_metric(&self, metric: &str) {
        let hm = self.hash(metric);
        for s in self.shards.iter() {
            let mut g = s.write();
            if let Ok(occ) = g.metrics.find_entry(hm, |s| &*s.name == metric) {
                occ.remove();
            }
        }
        self.rebuild_filter();
    }

    /// Forget an instance (e.g. a pid that exited): its value and edge state go; its own
    /// thresholds stay, re-armed. Returns whether anything was known about it.
    pub fn forget(&self, metric: &str, instance: &str) -> bool {
        let (hm, hi) = (self.hash(metric), self.hash(instance));
        let mut g = self.shard(hm, hi).write();
        let Some(slot) = g.slot_mut(hm, metric) else {
            return false;
        };
        let Ok(mut occ) = slot.instances.find_entry(hi, |e| e.is(instance)) else {
            return false;
        };
        let e = occ.get_mut();
        if e.locals.is_empty() {
            occ.remove();
        } else {
            e.value.store(f64::NAN.to_bits(), Ordering::Relaxed);
            e.ts_ns.store(i64::MIN, Ordering::Relaxed);
            e.disarmed().clear();
            e.any_disarmed.store(false, Ordering::Relaxed);
        }
        true
    }

    /// Remove instance entries without own thresholds whose last sample is older than the
    /// cutoff (instances that stopped reporting). Returns how many went.
    pub fn expire(&self, cutoff_ts_ns: i64) -> usize {
        let mut n = 0;
        for s in self.shards.iter() {
            let mut g = s.write();
            for slot in g.metrics.iter_mut() {
                slot.instances.retain(|e| {
                    let keep =
                        !e.locals.is_empty() || e.ts_ns.load(Ordering::Relaxed) >= cutoff_ts_ns;
                    n += usize::from(!keep);
                    keep
                });
            }
        }
        n
    }

    /// Number of instance entries (tests, stats).
    pub fn instance_count(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.read()
                    .metrics
                    .iter()
                    .map(|m| m.instances.len())
                    .sum::<usize>()
            })
            .sum()
    }
}
