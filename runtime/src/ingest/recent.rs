//! What recent bodies' bytes decoded to, kept across requests: a sender sends the same series
//! (remote write's labels, OTLP's resources) every scrape or export, and recognising their
//! bytes costs one hash and one compare where decoding them again costs UTF-8 checks, label
//! checks and an interning lookup per string. An entry is only ever made from bytes that
//! decoded without error, and a hit compares the whole key, so a hit is exactly what
//! decoding those bytes again would give.
//!
//! Bounded by bytes, in two generations: entries go into the new one; when it holds half the
//! budget it becomes the old one and the older is dropped; a hit in the old generation moves
//! the entry back into the new one. What senders keep sending stays; what they stopped
//! sending leaves within two turns, whatever a sender sends.

use std::hash::BuildHasher;
use std::sync::{RwLock, RwLockReadGuard};

use hashbrown::HashTable;

use crate::util::eq_bytes;

/// Entries by their key's hash, compared word by word ([`eq_bytes`]): the keys are tens of
/// bytes, for which a `memcmp` call costs more than the compare.
type Map<T> = HashTable<(Box<[u8]>, T)>;

fn hash(key: &[u8]) -> u64 {
    foldhash::fast::FixedState::default().hash_one(key)
}

fn find<'m, T>(map: &'m Map<T>, h: u64, key: &[u8]) -> Option<&'m T> {
    map.find(h, |(k, _)| eq_bytes(k, key)).map(|(_, v)| v)
}

/// What an entry costs beside its key: the map's slot, the boxed key's header, and the
/// value's own allocations (a metadata set, a resource string: about as long as the key).
const ENTRY_OVERHEAD: usize = 96;

/// Keys longer than this are not kept: real series and resources are a few hundred bytes,
/// and a sender of longer ones only pays the ordinary decode.
pub const MAX_KEY: usize = 4 << 10;

struct Generations<T> {
    new: Map<T>,
    old: Map<T>,
    bytes: usize,
}

/// A bounded memory from bytes to what they decoded to.
pub struct Recent<T> {
    gens: RwLock<Generations<T>>,
    budget: usize,
}

impl<T: Clone> Recent<T> {
    /// At most `budget` bytes (keys and [`ENTRY_OVERHEAD`]) across both generations.
    pub fn new(budget: usize) -> Recent<T> {
        Recent {
            gens: RwLock::new(Generations {
                new: Map::new(),
                old: Map::new(),
                bytes: 0,
            }),
            budget,
        }
    }

    /// A request's view: lookups share the lock with other requests; what the request
    /// decodes anew is kept by [`Lookup::keep`] once it is done.
    pub fn lookup(&self) -> Lookup<'_, T> {
        Lookup {
            recent: self,
            gens: Some(crate::util::read(&self.gens)),
            learned: Vec::new(),
        }
    }

    /// Forgets everything (what the entries were derived from changed).
    pub fn clear(&self) {
        let mut g = crate::util::write(&self.gens);
        g.new.clear();
        g.old.clear();
        g.bytes = 0;
    }

    fn remember(&self, learned: Vec<(Box<[u8]>, T)>) {
        if learned.is_empty() {
            return;
        }
        let mut g = crate::util::write(&self.gens);
        for (key, value) in learned {
            let cost = key.len() + ENTRY_OVERHEAD;
            if g.bytes + cost > self.budget / 2 {
                g.old = std::mem::take(&mut g.new);
                g.bytes = 0;
            }
            let h = hash(&key);
            match g.new.entry(h, |(k, _)| eq_bytes(k, &key), |(k, _)| hash(k)) {
                hashbrown::hash_table::Entry::Occupied(mut e) => e.get_mut().1 = value,
                hashbrown::hash_table::Entry::Vacant(e) => {
                    e.insert((key, value));
                    g.bytes += cost;
                }
            }
        }
    }

    /// Entries in the newer generation (tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        crate::util::read(&self.gens).new.len()
    }
}

/// One request's lookups, and what it learned.
pub struct Lookup<'r, T> {
    recent: &'r Recent<T>,
    gens: Option<RwLockReadGuard<'r, Generations<T>>>,
    learned: Vec<(Box<[u8]>, T)>,
}

impl<T: Clone> Lookup<'_, T> {
    /// What `key` decoded to, if a recent request had these bytes.
    #[inline]
    pub fn get(&mut self, key: &[u8]) -> Option<&T> {
        let g = self.gens.as_deref()?;
        let h = hash(key);
        if let Some(v) = find(&g.new, h, key) {
            return Some(v);
        }
        let v = find(&g.old, h, key)?;
        // Still sent: back into the new generation, so that it outlives the old one.
        self.learned.push((key.into(), v.clone()));
        Some(v)
    }

    /// `key` decoded to `value`: kept for the next requests by [`Lookup::keep`].
    #[inline]
    pub fn learn(&mut self, key: &[u8], value: &T) {
        if key.len() <= MAX_KEY {
            self.learned.push((key.into(), value.clone()));
        }
    }

    /// Keeps what the request learned: call it once the whole body decoded (a refused body
    /// teaches nothing).
    pub fn keep(mut self) {
        self.gens = None;
        let learned = std::mem::take(&mut self.learned);
        self.recent.remember(learned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_is_what_was_learned_and_a_refused_request_teaches_nothing() {
        let r: Recent<u32> = Recent::new(1 << 20);
        let mut l = r.lookup();
        assert_eq!(l.get(b"a"), None);
        l.learn(b"a", &1);
        drop(l); // refused: not kept
        assert_eq!(r.lookup().get(b"a"), None);
        let mut l = r.lookup();
        l.learn(b"a", &1);
        l.learn(&[0; MAX_KEY + 1], &2);
        l.keep();
        assert_eq!(r.lookup().get(b"a"), Some(&1));
        assert_eq!(r.lookup().get(&[0; MAX_KEY + 1]), None, "too long to keep");
        assert_eq!(r.lookup().get(b"ab"), None, "the whole key is compared");
        r.clear();
        assert_eq!(r.lookup().get(b"a"), None);
    }

    /// The budget holds whatever is sent; what is still sent survives a turn of generations.
    #[test]
    fn generations_bound_the_bytes_and_keep_what_is_still_sent() {
        let per = 8 + ENTRY_OVERHEAD;
        let r: Recent<u64> = Recent::new(per * 100);
        let key = |i: u64| i.to_le_bytes();
        for i in 0..1000u64 {
            let mut l = r.lookup();
            // Key 0 is sent with every request.
            if l.get(&key(0)).is_none() {
                l.learn(&key(0), &0);
            }
            l.learn(&key(i), &i);
            l.keep();
            let g = crate::util::read(&r.gens);
            assert!(g.new.len() + g.old.len() <= 100, "at {i}");
        }
        assert_eq!(r.lookup().get(&key(0)), Some(&0));
        assert_eq!(r.lookup().get(&key(999)), Some(&999));
        assert_eq!(r.lookup().get(&key(1)), None, "not sent since: forgotten");
    }
}
