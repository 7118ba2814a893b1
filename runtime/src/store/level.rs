//! The level tree: a node per cluster, host, component and sub-component, each holding its
//! own series (one [`Chain`] per metric) and its children. Owns the per-level locking and the
//! memory layout of a node (the store's per-series overhead is mostly here).
//!
//! Locking: a level with children has an `RwLock` on its children table (read-mostly; taken for
//! writing only when a child is created; allocated with the first child, so the leaves, most
//! levels, do not carry one) and every level a spin lock over its series (`SpinSlice`, see `spin` for why). A write takes one mutex (plus
//! read locks while descending); there is no store-wide lock on the hot path.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, LazyLock, RwLock};

use hashbrown::HashTable;

use super::buffer::{Chain, Pool};
use super::spin::SpinSlice;
use super::thin::ThinBytes;
use super::{MetricInfo, StoreError, read, validate_name, write};

/// One series of a level: its chain, which carries the metric id (40 bytes).
pub(crate) type Slot = Chain;

/// Children by name. The name is not stored twice: it is the tail of the child's encoded
/// path, so a bucket is one pointer.
type Children = HashTable<Arc<Level>>;

/// One seed for every children table (a table per level would cost 8 bytes per level).
static SEED: LazyLock<foldhash::fast::RandomState> = LazyLock::new(Default::default);

fn hash(name: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    SEED.hash_one(name)
}

/// A node of the level tree. Obtain with [`super::Store::level`]; writing through a cached
/// level skips the descent from the root (what the line-protocol ingest does per host).
/// 32 bytes: most levels are leaves (hardware threads, processes) with a few series each.
/// `repr(C)` keeps the series' pointer next to the `Arc`'s counts, which the ingest has just
/// touched.
#[repr(C)]
pub struct Level {
    /// This level's own series; a handful per level, so a linear search beats a map, and an
    /// exactly sized slice (a series is added rarely) beats a Vec's spare capacity. Its
    /// pointer is read without the lock by [`Level::prefetch`]; its flag marks the level
    /// removed from the tree.
    pub(crate) metrics: SpinSlice<Slot>,
    /// The selector path, pre-encoded for WAL records: `depth, (u16 len, name)*depth`.
    pub(crate) wal_path: ThinBytes,
    /// Null until the first child (leaves do not pay for a lock and a table): then the
    /// table with its lock, set once (under the series' lock, see `install_children`) and
    /// freed with the level.
    children: AtomicPtr<RwLock<Children>>,
}

impl Level {
    pub(crate) fn root() -> Level {
        Level::new(root_path())
    }

    fn new(wal_path: ThinBytes) -> Level {
        Level {
            wal_path,
            children: AtomicPtr::new(std::ptr::null_mut()),
            metrics: SpinSlice::default(),
        }
    }

    fn depth(&self) -> usize {
        self.wal_path[0] as usize
    }

    /// This level's name (empty for the root).
    pub(crate) fn name(&self) -> &str {
        let mut p = &self.wal_path[1..];
        let mut name: &[u8] = &[];
        while let Some((len, rest)) = p.split_first_chunk::<2>() {
            let len = u16::from_le_bytes(*len) as usize;
            (name, p) = rest.split_at(len.min(rest.len()));
        }
        // Paths are built from `&str` names only.
        std::str::from_utf8(name).unwrap_or_default()
    }

    /// Whether `child` (a child of this level) is called `name`: its name starts right after
    /// this level's path plus the length prefix.
    #[inline]
    fn is_named(&self, child: &Level, name: &[u8]) -> bool {
        child
            .wal_path
            .get(self.wal_path.len() + 2..)
            .is_some_and(|n| eq_short(n, name))
    }

    /// The child `name`, created if missing.
    pub fn child(&self, name: &str) -> Result<Arc<Level>, StoreError> {
        if let Some(c) = self.get_child(name) {
            return Ok(c);
        }
        self.create_child(name)
    }

    #[cold]
    fn create_child(&self, name: &str) -> Result<Arc<Level>, StoreError> {
        validate_name(name)?;
        if self.depth() >= 32 {
            // The WAL encodes depth in a byte; real trees are 4 deep.
            return Err(StoreError::InvalidName {
                name: name.to_string(),
                reason: "level tree deeper than 32",
            });
        }
        let lock = match self.children_lock() {
            Some(l) => l,
            None => self.install_children()?,
        };
        let mut table = write(lock);
        if self.is_removed() {
            return Err(StoreError::Removed);
        }
        let h = hash(name.as_bytes());
        if let Some(c) = table.find(h, |c| self.is_named(c, name.as_bytes())) {
            return Ok(c.clone());
        }
        let c = Arc::new(Level::new(extend_path(&self.wal_path, name)));
        let plen = self.wal_path.len() + 2;
        table.insert_unique(h, c.clone(), |c| hash(&c.wal_path[plen..]));
        Ok(c)
    }

    /// The children table's lock, once the level has had a child.
    #[inline]
    fn children_lock(&self) -> Option<&RwLock<Children>> {
        // SAFETY: a non-null pointer is the table `install_children` leaked, freed only when
        // the level is dropped.
        unsafe { self.children.load(Ordering::Acquire).as_ref() }
    }

    /// Allocates the children table for the first child. Under the series' lock, which
    /// `remove_if_empty` holds while it decides: a level is never removed between a child's
    /// table being installed and the child being inserted (the creator sees it removed).
    #[cold]
    fn install_children(&self) -> Result<&RwLock<Children>, StoreError> {
        let _metrics = self.metrics.lock();
        if self.is_removed() {
            return Err(StoreError::Removed);
        }
        if let Some(l) = self.children_lock() {
            return Ok(l);
        }
        let table = Box::into_raw(Box::new(RwLock::new(Children::new())));
        self.children.store(table, Ordering::Release);
        // SAFETY: just leaked; freed only with the level.
        Ok(unsafe { &*table })
    }

    pub(crate) fn get_child(&self, name: &str) -> Option<Arc<Level>> {
        let table = read(self.children_lock()?);
        table
            .find(hash(name.as_bytes()), |c| self.is_named(c, name.as_bytes()))
            .cloned()
    }

    /// The children (unordered).
    pub(crate) fn children(&self) -> Vec<Arc<Level>> {
        self.children_lock()
            .map_or_else(Vec::new, |l| read(l).iter().cloned().collect())
    }

    /// Starts loading this level's series into the cache: ingest calls it when it resolves
    /// a level and writes the level's samples a few lines later, by when the slots (a cache
    /// miss at 16,896 series) have arrived.
    #[inline]
    pub fn prefetch(&self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let p = self.metrics.peek() as *const i8;
            // Four series are 160 bytes: three cache lines.
            for off in [0, 64, 128] {
                // SAFETY: a prefetch is a hint; it never faults and reads nothing into Rust.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off)) };
            }
        }
    }

    /// Memory-only write of one sample.
    #[inline(always)]
    pub(crate) fn write(
        &self,
        m: MetricInfo,
        ts: i64,
        value: f64,
        pool: &Pool,
    ) -> Result<(), StoreError> {
        let mut metrics = self.metrics.lock();
        match metrics.iter_mut().find(|s| s.id == m.id) {
            Some(s) => s.write(ts, value, pool),
            None if self.is_removed() => Err(StoreError::Removed),
            None => add(&mut metrics, m, ts, value, pool),
        }
    }

    /// Memory-only write of several samples under one lock acquisition. Besides saving
    /// atomics, the stores to the different pages are not separated by a locked instruction,
    /// so their cache misses overlap instead of being paid one after the other.
    #[inline]
    pub(crate) fn write_group<T>(
        &self,
        items: &[T],
        get: impl Fn(&T) -> (MetricInfo, i64, f64),
        pool: &Pool,
        mut result: impl FnMut(usize, Result<(), StoreError>),
    ) {
        let mut metrics = self.metrics.lock();
        for (i, it) in items.iter().enumerate() {
            let (m, ts, value) = get(it);
            let r = match metrics.iter_mut().find(|s| s.id == m.id) {
                Some(s) => s.write(ts, value, pool),
                None if self.is_removed() => Err(StoreError::Removed),
                None => add(&mut metrics, m, ts, value, pool),
            };
            result(i, r);
        }
    }

    /// Runs `f` on this level's chain for metric `id`, if it has one.
    pub(crate) fn with_chain<R>(&self, id: u32, f: impl FnOnce(&Chain) -> R) -> Option<R> {
        self.metrics.lock().iter().find(|s| s.id == id).map(f)
    }

    /// Installs a restored chain, replacing (and releasing) an existing one of its metric.
    pub(crate) fn put_chain(&self, chain: Chain, pool: &Pool) {
        let mut metrics = self.metrics.lock();
        match metrics.iter_mut().find(|s| s.id == chain.id) {
            Some(s) => {
                std::mem::replace(s, chain).release(pool);
            }
            None => {
                grow(&mut metrics, chain);
            }
        }
    }

    /// Heap bytes this level holds itself (not its children): the node in its `Arc`, its
    /// path, its children table and its series with their buffers.
    pub(crate) fn heap_bytes(&self) -> usize {
        let table = self.children_lock().map_or(0, |l| {
            let cap = read(l).capacity();
            std::mem::size_of::<RwLock<Children>>()
                + cap * (std::mem::size_of::<Arc<Level>>() + 1)
                + if cap > 0 { 16 } else { 0 }
        });
        let metrics = self.metrics.lock();
        // An `Arc`'s two counts, the node, the path.
        16 + std::mem::size_of::<Level>()
            + self.wal_path.heap_bytes()
            + table
            + std::mem::size_of_val::<[Slot]>(&metrics)
            + metrics.iter().map(Chain::heap_bytes).sum::<usize>()
    }

    /// The background pass over this level's chains (`Chain::compact`), one chain per lock
    /// hold so writes to the level wait for one chain's encoding at most; chains `expired`
    /// calls expired (judged again under the lock) are dropped. Returns the chains visited.
    pub(crate) fn compact(&self, now: i64, pool: &Pool, expired: &dyn Fn(&Chain) -> bool) -> usize {
        let (mut i, mut dead) = (0, false);
        loop {
            let mut metrics = self.metrics.lock();
            let Some(c) = metrics.get_mut(i) else {
                break;
            };
            if expired(c) {
                dead = true;
            } else {
                c.compact(now, pool);
            }
            i += 1;
        }
        if dead {
            let mut metrics = self.metrics.lock();
            let (gone, keep): (Vec<Slot>, Vec<Slot>) = std::mem::take(&mut *metrics)
                .into_vec()
                .into_iter()
                .partition(|c| expired(c));
            *metrics = keep.into_boxed_slice();
            drop(metrics);
            for c in gone {
                c.release(pool);
            }
        }
        i
    }

    fn is_removed(&self) -> bool {
        self.metrics.flag.load(Ordering::Relaxed)
    }

    /// Takes the children that hold no series and have no children out of the tree (each
    /// marked removed under its own locks, so a writer holding it learns it and goes to the
    /// tree again). Returns how many.
    fn prune(&self) -> usize {
        let Some(lock) = self.children_lock() else {
            return 0;
        };
        let mut table = write(lock);
        let before = table.len();
        table.retain(|c| !c.remove_if_empty());
        let n = before - table.len();
        if table.is_empty() {
            // Its buckets back; the lock stays until the level goes.
            *table = Children::new();
        }
        n
    }

    /// Marks this level removed if it holds no series and no children. Lock order: its
    /// children table, then its series (as `heap_bytes` and every other path take them).
    fn remove_if_empty(&self) -> bool {
        let children = self.children_lock().map(write);
        if children.as_ref().is_some_and(|t| !t.is_empty()) {
            return false;
        }
        let metrics = self.metrics.lock();
        // A table installed since the look above: a child is being created.
        if !metrics.is_empty() || (children.is_none() && self.children_lock().is_some()) {
            return false;
        }
        self.metrics.flag.store(true, Ordering::Relaxed);
        true
    }

    /// The level's path from the root, as names.
    pub(crate) fn names(&self) -> Vec<&str> {
        let mut p = &self.wal_path[1..];
        let mut out = Vec::new();
        while let Some((len, rest)) = p.split_first_chunk::<2>() {
            let len = u16::from_le_bytes(*len) as usize;
            let (name, r) = rest.split_at(len.min(rest.len()));
            // Paths are built from `&str` names only.
            out.push(std::str::from_utf8(name).unwrap_or_default());
            p = r;
        }
        out
    }

    pub(crate) fn free(&self, t: i64, pool: &Pool) -> usize {
        let mut n = 0;
        {
            let mut metrics = self.metrics.lock();
            let mut gone = false;
            for s in metrics.iter_mut() {
                let (freed, all) = s.free_before(t, pool);
                n += freed;
                gone |= all;
            }
            if gone {
                let (dead, keep): (Vec<Slot>, Vec<Slot>) = std::mem::take(&mut *metrics)
                    .into_vec()
                    .into_iter()
                    .partition(|s| s.is_expired(t));
                for s in dead {
                    s.release(pool);
                }
                *metrics = keep.into_boxed_slice();
            }
        }
        for c in self.children() {
            n += c.free(t, pool);
        }
        n
    }
}

impl Drop for Level {
    fn drop(&mut self) {
        let table = *self.children.get_mut();
        if !table.is_null() {
            // SAFETY: leaked by `install_children`, owned by this level alone.
            drop(unsafe { Box::from_raw(table) });
        }
    }
}

/// A new series with its first sample.
#[cold]
fn add(
    metrics: &mut Box<[Slot]>,
    m: MetricInfo,
    ts: i64,
    value: f64,
    pool: &Pool,
) -> Result<(), StoreError> {
    let c = Chain::new(m.id, m.frequency as u16, ts, value, pool)?;
    grow(metrics, c);
    Ok(())
}

fn grow(metrics: &mut Box<[Slot]>, c: Chain) {
    let mut v = std::mem::take(metrics).into_vec();
    v.reserve_exact(1);
    v.push(c);
    *metrics = v.into_boxed_slice();
}

/// `a == b` for names: up to 16 bytes with two overlapping word loads per side instead of a
/// `memcmp` call (level names are host and component names, mostly under 16 bytes).
#[inline]
fn eq_short(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    match n {
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

/// The background pass over `level` and every level below it, children first, so a level
/// its last series left is taken out of the tree in the same pass. Returns the series visited.
pub(crate) fn compact_tree(
    level: &Arc<Level>,
    now: i64,
    pool: &Pool,
    expired: &dyn Fn(&Chain) -> bool,
) -> usize {
    let mut n = level.compact(now, pool, expired);
    let children = level.children();
    if !children.is_empty() {
        for c in &children {
            n += compact_tree(c, now, pool, expired);
        }
        level.prune();
    }
    n
}

/// Depth-first walk in name order, handing each level with its path to `f`.
pub(crate) fn walk(
    level: &Arc<Level>,
    path: &mut Vec<Box<str>>,
    f: &mut dyn FnMut(&[Box<str>], &Level),
) {
    f(path, level);
    let mut children = level.children();
    children.sort_by(|a, b| a.name().cmp(b.name()));
    for c in children {
        path.push(c.name().into());
        walk(&c, path, f);
        path.pop();
    }
}

/// The root's path as the WAL records a level: depth 0, no names.
fn root_path() -> ThinBytes {
    ThinBytes::new(&[0u8])
}

/// The encoded path of a child: depth + 1, then the name appended.
fn extend_path(parent: &[u8], name: &str) -> ThinBytes {
    let mut v = Vec::with_capacity(parent.len() + 2 + name.len());
    v.push(parent[0].saturating_add(1));
    v.extend_from_slice(&parent[1..]);
    v.extend_from_slice(&(name.len() as u16).to_le_bytes());
    v.extend_from_slice(name.as_bytes());
    ThinBytes::new(&v)
}
