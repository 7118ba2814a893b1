//! A hedged subscription's two streams deliver the same records (a sink with `hedge-stream`
//! publishes each to both, under one `Nats-Msg-Id`): this remembers the ids of the records
//! stored lately so that the second copy is acknowledged and not stored again. Owns only that
//! memory; the consumers (`super`) fetch, store and acknowledge.
//!
//! Bounded by count: the two copies of a record arrive within the time one stream's consumer
//! lags behind the other's (an election, 4-9 s, after a server's loss), far inside the window.
//! A copy that arrives after its id left the window is stored again, which the store absorbs
//! (a slot written twice with the same value); a record is never dropped for a copy it did not
//! have. The memory does not outlive the daemon: after a restart the copies both consumers had
//! not acknowledged are both stored, the same way.

use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

/// Record ids remembered: at 16 bytes an id (its hash in the set and in the order), 4 MB; a
/// central shard of 3,000 nodes sending a record a second each fills it in 87 s, against the
/// seconds by which one stream's copies trail the other's.
const WINDOW: usize = 1 << 18;

/// The ids of recently stored records, as hashes (a random key per daemon: a sender cannot
/// make two ids collide on purpose), oldest first.
pub(super) struct Seen {
    set: HashSet<u64>,
    order: VecDeque<u64>,
    key: std::collections::hash_map::RandomState,
    stored: Arc<crate::telemetry::Counter>,
    duplicates: Arc<crate::telemetry::Counter>,
}

pub(super) type Shared = Arc<Mutex<Seen>>;

impl Seen {
    pub(super) fn shared() -> Shared {
        let r = crate::telemetry::registry();
        Arc::new(Mutex::new(Seen {
            set: HashSet::new(),
            order: VecDeque::new(),
            key: Default::default(),
            stored: r.counter(
                "wasmon_nats_hedge_records_total",
                "Records a hedged NATS subscription stored (the first of their two copies).",
                &[],
            ),
            duplicates: r.counter(
                "wasmon_nats_hedge_duplicates_total",
                "Records a hedged NATS subscription got from its second stream after the first \
                 and did not store again.",
                &[],
            ),
        }))
    }

    /// `true` the first time `id` comes (remembered from then on), and when it comes `again`
    /// from the same consumer.
    fn first_id(&mut self, id: &str, again: bool) -> bool {
        let h = self.key.hash_one(id);
        if !self.set.insert(h) {
            if !again {
                self.duplicates.inc();
            }
            return again;
        }
        self.order.push_back(h);
        if self.order.len() > WINDOW
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.stored.inc();
        true
    }
}

/// Whether message `m` is to be stored: the first copy of its record, or a message without an
/// id (not a wasmon sink's), or one its consumer delivers again (its first delivery may not
/// have reached the store's WAL: stored again, the same values).
pub(super) fn first(seen: &Shared, m: &async_nats::jetstream::Message) -> bool {
    let Some(id) = m
        .headers
        .as_ref()
        .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
    else {
        return true;
    };
    let again = m.info().is_ok_and(|i| i.delivered > 1);
    crate::util::lock(seen).first_id(id.as_str(), again)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_stored_once_within_the_window() {
        let s = Seen::shared();
        let mut s = crate::util::lock(&s);
        assert!(s.first_id("node.f.q.1", false));
        assert!(s.first_id("node.f.q.2", false));
        assert!(!s.first_id("node.f.q.1", false));
        assert!(!s.first_id("node.f.q.2", false));
        for i in 3..(WINDOW as u64 + 3) {
            assert!(s.first_id(&format!("node.f.q.{i}"), false));
        }
        // Out of the window: stored again (the store absorbs the copy), never dropped.
        assert!(s.first_id("node.f.q.1", false));
        assert!(!s.first_id(&format!("node.f.q.{}", WINDOW + 2), false));
        // Delivered again by its consumer: stored again.
        assert!(s.first_id(&format!("node.f.q.{}", WINDOW + 2), true));
        assert!(s.set.len() <= WINDOW && s.order.len() <= WINDOW);
    }
}
