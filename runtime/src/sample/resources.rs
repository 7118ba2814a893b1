//! Resources kept from one poll to the next: a source that emits the same instances poll after
//! poll (a CPU, a disk, a pid) hands out the same `Arc<str>` for each, so that the store sink
//! finds their level by the resource's address (`pipeline::levels`) instead of resolving it
//! again and remembering a new entry per sample and poll. Owns only the strings.

use std::collections::HashSet;
use std::sync::Arc;

/// Resources a source keeps between polls. Past it the set starts over (a source whose
/// instances churn, such as a process reader on a host that forks thousands of short jobs,
/// costs an allocation per sample again, never unbounded memory): ~100 bytes a resource.
pub const MAX_RESOURCES: usize = 1 << 17;

/// The resources of the current poll and of the one before: an instance seen in neither is
/// allocated, one not seen for a whole poll is let go.
#[derive(Default)]
pub struct Resources {
    now: HashSet<Arc<str>, foldhash::fast::FixedState>,
    before: HashSet<Arc<str>, foldhash::fast::FixedState>,
}

impl Resources {
    /// `text` as the `Arc<str>` handed out for it before (this poll or the last), or a new one.
    pub fn get(&mut self, text: &str) -> Arc<str> {
        if let Some(r) = self.now.get(text) {
            return r.clone();
        }
        let r = self.before.take(text).unwrap_or_else(|| text.into());
        if self.now.len() >= MAX_RESOURCES {
            self.now.clear();
        }
        self.now.insert(r.clone());
        r
    }

    /// Ends a poll: what it did not ask for is kept one poll more, then let go.
    pub fn next_poll(&mut self) {
        std::mem::swap(&mut self.now, &mut self.before);
        self.now.clear();
    }

    /// Resources held (this poll's and the last's).
    pub fn len(&self) -> usize {
        self.now.len() + self.before.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same text is the same allocation within a poll and into the next; a resource not
    /// asked for during a whole poll is let go, and comes back as a new allocation.
    #[test]
    fn a_resource_is_the_same_allocation_while_it_is_asked_for() {
        let mut r = Resources::default();
        let cpu0 = r.get("cpu0");
        assert!(Arc::ptr_eq(&cpu0, &r.get("cpu0")));
        let cpu1 = r.get("cpu1");
        assert_eq!(&*cpu1, "cpu1");
        r.next_poll();
        assert!(
            Arc::ptr_eq(&cpu0, &r.get("cpu0")),
            "kept into the next poll"
        );
        assert_eq!(r.len(), 2, "cpu0 asked for again, cpu1 kept one poll more");
        r.next_poll();
        assert_eq!(r.len(), 1, "cpu1 let go after a whole poll without it");
        assert!(!Arc::ptr_eq(&cpu1, &r.get("cpu1")), "a new allocation");
        r.next_poll();
        r.next_poll();
        assert!(r.is_empty());
    }

    /// Past the bound the current poll's set starts over: still the right text.
    #[test]
    fn the_set_is_bounded() {
        let mut r = Resources::default();
        for i in 0..MAX_RESOURCES + 10 {
            assert_eq!(&*r.get(&i.to_string()), i.to_string());
        }
        assert!(r.len() <= MAX_RESOURCES);
    }
}
