//! Which store level a pipeline's sample goes to, remembered: the store sink resolves a
//! sample's level from its metadata (`sample::Level::of`: cluster, host, component) and the
//! store's tree, and a receiver's samples share their metadata sets across requests (see
//! `ingest::recent`), so a set's level is looked up once, not once per sample or batch.
//! Knows the store's levels and the samples' sets; writes nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::sample::{Metadata, Sample};
use crate::store::Level;

/// The levels of the metadata sets and resources a batch used last, by their addresses
/// (valid while the batch, which holds them, is written): a host's points alternate between
/// a few sets (one per CPU or device) that all name the host's level, and reading a set's
/// keys again per sample cost more than writing the sample.
#[derive(Default)]
pub(super) struct Sets {
    seen: Vec<((usize, usize), Arc<Level>)>,
    next: usize,
}

impl Sets {
    /// Sets kept: a host's sets in a batch are a handful, mostly one.
    const MAX: usize = 8;

    fn key(s: &Sample) -> (usize, usize) {
        (s.metadata.addr(), s.resource.as_ptr() as usize)
    }

    #[inline]
    pub(super) fn get(&self, s: &Sample) -> Option<&Arc<Level>> {
        let k = Self::key(s);
        self.seen.iter().find(|(key, _)| *key == k).map(|(_, l)| l)
    }

    pub(super) fn put(&mut self, s: &Sample, l: Arc<Level>) -> &Arc<Level> {
        let i = if self.seen.len() < Self::MAX {
            self.seen.push((Self::key(s), l));
            self.seen.len() - 1
        } else {
            let i = self.next % Self::MAX;
            self.seen[i] = (Self::key(s), l);
            i
        };
        self.next += 1;
        &self.seen[i].1
    }
}

/// Bytes of metadata sets (keys, values, resource) [`Levels`] keeps alive: thousands of hosts'
/// sets with tens of labels each. Past it, it starts over.
pub const LEVELS_MEMORY: usize = 16 << 20;

/// The levels of the sets earlier batches used, by the sets' addresses: each entry holds its
/// set and resource, so no other set can have their addresses while it stands. A level the
/// store took out of its tree since (no series left) is written through its path again by
/// the store, so a level found stays good to write to.
#[derive(Default)]
pub struct Levels(Mutex<Kept>);

/// A set and resource (kept alive, so that their addresses stay theirs) and their level.
type Entry = (Metadata, Arc<str>, Arc<Level>);

#[derive(Default)]
struct Kept {
    by_set: HashMap<(usize, usize), Entry, foldhash::fast::FixedState>,
    bytes: usize,
}

impl Levels {
    /// The level of `s`'s set and resource, if an earlier batch resolved it.
    pub fn get(&self, s: &Sample) -> Option<Arc<Level>> {
        let kept = crate::util::lock(&self.0);
        kept.by_set.get(&Sets::key(s)).map(|(_, _, l)| l.clone())
    }

    /// Remembers that `s`'s set and resource are at `level`.
    pub fn put(&self, s: &Sample, level: &Arc<Level>) {
        let cost = 64
            + s.resource.len()
            + s.metadata
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>();
        let mut kept = crate::util::lock(&self.0);
        if kept.bytes + cost > LEVELS_MEMORY {
            kept.by_set.clear();
            kept.bytes = 0;
        }
        let entry = (s.metadata.clone(), s.resource.clone(), level.clone());
        if kept.by_set.insert(Sets::key(s), entry).is_none() {
            kept.bytes += cost;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, StoreConfig};

    /// A set's level is found again while its entry stands; a set of the same pairs but
    /// another allocation is another set; past the budget the memory starts over.
    #[test]
    fn levels_are_found_by_the_set_they_were_resolved_for_within_the_budget() {
        let store = Store::new(StoreConfig::default());
        let (h1, h2) = (
            store.level(&["c", "h1"]).unwrap(),
            store.level(&["c", "h2"]).unwrap(),
        );
        let meta = |h: &str| Metadata::new(vec![("hostname".into(), h.into())]);
        let resource: Arc<str> = "".into();
        let at = |m: &Metadata| Sample {
            metadata: m.clone(),
            resource: resource.clone(),
            ..Sample::new("m", "", 1.0, 1)
        };
        let (m1, m2) = (meta("h1"), meta("h2"));
        let levels = Levels::default();
        assert!(levels.get(&at(&m1)).is_none());
        levels.put(&at(&m1), &h1);
        levels.put(&at(&m2), &h2);
        assert!(Arc::ptr_eq(&levels.get(&at(&m1)).unwrap(), &h1));
        assert!(Arc::ptr_eq(&levels.get(&at(&m2)).unwrap(), &h2));
        assert!(levels.get(&at(&meta("h1"))).is_none(), "another allocation");
        let elsewhere = Sample {
            resource: "".into(),
            ..at(&m1)
        };
        assert!(levels.get(&elsewhere).is_none(), "another resource");
        let big = Metadata::new(vec![("k".into(), "v".repeat(LEVELS_MEMORY / 2).into())]);
        levels.put(&at(&big), &h1);
        levels.put(&at(&big.clone()), &h1);
        let other = Metadata::new(vec![("k".into(), "w".repeat(LEVELS_MEMORY / 2).into())]);
        levels.put(&at(&other), &h2);
        assert!(
            levels.get(&at(&m1)).is_none(),
            "started over past the budget"
        );
        assert!(levels.get(&at(&other)).is_some());
    }
}
