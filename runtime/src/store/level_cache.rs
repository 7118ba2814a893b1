//! Levels by a caller's key text, remembered across requests. A collector sends the same
//! hosts' tags every interval, so the line-protocol ingest keys levels by a line's raw tag
//! section: one hash and one compare, instead of descending the tree (a read lock, a hash
//! probe and an `Arc` clone per level, a cache miss each at thousands of levels).
//!
//! Caches wait in a pool of the store: a request takes one (one lock) and gives it back when
//! done, so look-ups during a request touch no shared state. A cached level the background
//! pass took out of the tree (it held no series) refuses writes, and the store's write paths
//! then find the level at its path again, so a cached level never loses a sample.

use std::sync::{Arc, Mutex};

use hashbrown::HashTable;

use super::Level;

/// Keys one cache holds before it starts over: far more than the tag sections of a large
/// cluster's collectors, and a bound on what a client sending ever-new tags can make it hold.
const MAX_KEYS: usize = 1 << 17;

/// Caches kept in the pool: one per concurrent request is enough; more are dropped.
const MAX_POOLED: usize = 16;

/// Key text → level, for one `context` (the caller's defaults that give a key its meaning,
/// e.g. the default cluster of a request).
pub struct LevelCache {
    context: Box<str>,
    keys: HashTable<u32>,
    entries: Vec<(Box<str>, Arc<Level>)>,
}

fn hash(key: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one(key)
}

impl LevelCache {
    fn new(context: &str) -> LevelCache {
        LevelCache {
            context: context.into(),
            keys: HashTable::new(),
            entries: Vec::new(),
        }
    }

    /// The handle of the level `key` resolved to, if it is cached.
    #[inline]
    pub fn get(&self, key: &str) -> Option<u32> {
        let entries = &self.entries;
        self.keys
            .find(hash(key.as_bytes()), |&i| *entries[i as usize].0 == *key)
            .copied()
    }

    /// Remembers that `key` resolves to `level`; returns its handle.
    pub fn insert(&mut self, key: &str, level: Arc<Level>) -> u32 {
        if self.entries.len() >= MAX_KEYS {
            self.keys.clear();
            self.entries.clear();
        }
        let i = self.entries.len() as u32;
        self.entries.push((key.into(), level));
        let entries = &self.entries;
        self.keys.insert_unique(hash(key.as_bytes()), i, |&j| {
            hash(entries[j as usize].0.as_bytes())
        });
        i
    }

    /// The level of a handle from [`Self::get`] or [`Self::insert`] (valid until the next
    /// `insert`, which may start over).
    #[inline]
    pub fn level(&self, handle: u32) -> &Level {
        &self.entries[handle as usize].1
    }
}

/// The store's idle caches.
#[derive(Default)]
pub(crate) struct Pool(Mutex<Vec<LevelCache>>);

impl Pool {
    /// A cache for `context`: an idle one made for it if there is one, else a fresh one.
    pub(crate) fn take(&self, context: &str) -> LevelCache {
        let mut idle = crate::util::lock(&self.0);
        match idle.iter().rposition(|c| &*c.context == context) {
            Some(i) => idle.swap_remove(i),
            None => LevelCache::new(context),
        }
    }

    pub(crate) fn give_back(&self, cache: LevelCache) {
        let mut idle = crate::util::lock(&self.0);
        if idle.len() < MAX_POOLED {
            idle.push(cache);
        }
    }
}

/// A cache taken from the store's pool, returned when dropped.
pub struct LevelCacheGuard<'s> {
    pub(crate) pool: &'s Pool,
    pub(crate) cache: LevelCache,
}

impl std::ops::Deref for LevelCacheGuard<'_> {
    type Target = LevelCache;
    fn deref(&self) -> &LevelCache {
        &self.cache
    }
}

impl std::ops::DerefMut for LevelCacheGuard<'_> {
    fn deref_mut(&mut self) -> &mut LevelCache {
        &mut self.cache
    }
}

impl Drop for LevelCacheGuard<'_> {
    fn drop(&mut self) {
        // An empty cache allocates nothing.
        let c = std::mem::replace(&mut self.cache, LevelCache::new(""));
        self.pool.give_back(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, StoreConfig};

    #[test]
    fn a_full_cache_starts_over_and_still_answers() {
        let s = Store::new(StoreConfig::default());
        let (a, b) = (s.level(&["c", "a"]).unwrap(), s.level(&["c", "b"]).unwrap());
        let mut cache = s.level_cache("");
        let first = cache.insert("a", a.clone());
        assert_eq!(cache.get("a"), Some(first));
        assert!(std::ptr::eq(cache.level(first), &*a));
        for i in 1..MAX_KEYS {
            cache.insert(&i.to_string(), b.clone());
        }
        assert_eq!(cache.get("a"), Some(first));
        // One more key: the cache starts over.
        let h = cache.insert("b", b.clone());
        assert_eq!(cache.get("a"), None);
        assert!(std::ptr::eq(cache.level(cache.get("b").unwrap()), &*b));
        assert_eq!(h, 0);
    }

    #[test]
    fn caches_go_back_to_the_pool_per_context() {
        let s = Store::new(StoreConfig::default());
        let l = s.level(&["c", "a"]).unwrap();
        {
            let mut one = s.level_cache("x");
            one.insert("k", l.clone());
            // A concurrent request gets a cache of its own.
            assert_eq!(s.level_cache("x").get("k"), None);
        }
        assert!(s.level_cache("x").get("k").is_some());
        assert_eq!(s.level_cache("y").get("k"), None);
    }
}
