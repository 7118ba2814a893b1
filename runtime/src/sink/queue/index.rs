//! The in-memory index of the records on disk, and every decision about them.
//!
//! One small entry per unremoved record (no payload): where it is, what it holds, and whether
//! it was decided (sent, dead-lettered, damaged) above the removal cursor. All accounting lives
//! here, so the invariant `pushed == sent + dropped + dead_lettered + damaged + queued +
//! evicted_in_flight` is kept by one piece of code, without I/O, under the queue's lock.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use super::Nack;
use super::ledger::{Counts, LedgerState};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Not decided: waiting, or handed out (seq below the read cursor) and in flight.
    Open,
    Sent,
    DeadLettered,
    /// Read back with a bad checksum after open: skipped, counted as damaged.
    Damaged,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reason {
    Size,
    Age,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub seq: u64,
    /// The segment holding it, by first seq.
    pub seg: u64,
    pub offset: u64,
    /// Header plus payload.
    pub len: u64,
    pub samples: u32,
    pub enqueued_ns: i64,
    pub oldest_sample_ns: i64,
    pub state: State,
}

#[derive(Debug, Default)]
pub(super) struct Index {
    entries: VecDeque<Entry>,
    /// `next` hands out the first open entry at or above this seq.
    read_cursor: u64,
    /// Handed out, then given back because reading them failed: handed out again first.
    returned: BTreeSet<u64>,
    pub next_seq: u64,
    /// Bytes of all entries (the size budget's measure: unremoved records incl. headers).
    pub bytes: u64,
    /// Open entries: (records, samples).
    pub open: [u64; 2],
    /// Open entries handed out: (records, samples).
    pub in_flight: [u64; 2],
    /// Removed by the budget while in flight, decided by the sender's next ack or nack.
    pub evicted: HashMap<u64, (u32, Reason)>,
    /// Every decision since the queue was created (stats).
    pub total: Counts,
    /// Decisions of the records removed from the front (what the ledger persists).
    removed: Counts,
    /// Records pushed since the queue was created, as far as the ledger and the segments tell.
    pub pushed: [u64; 2],
    /// Damaged records found since open: (records, samples, bytes).
    pub damaged: [u64; 3],
}

impl Index {
    /// An index continuing from a ledger's counts, before the records found are added.
    pub fn new(counts: Counts, cursor: u64, next_seq: u64) -> Index {
        Index {
            read_cursor: cursor,
            next_seq,
            total: counts,
            removed: counts,
            pushed: [counts.records(), counts.samples()],
            ..Index::default()
        }
    }

    pub fn front(&self) -> Option<&Entry> {
        self.entries.front()
    }

    /// Appends a record (pushed now, or found at open). Seqs must increase.
    pub fn push(&mut self, e: Entry) {
        debug_assert!(self.entries.back().is_none_or(|b| b.seq < e.seq));
        self.next_seq = self.next_seq.max(e.seq + 1);
        self.bytes += e.len;
        add(&mut self.open, e.samples);
        add(&mut self.pushed, e.samples);
        self.entries.push_back(e);
    }

    /// Counts a damaged record found at open (it was pushed once, so it enters `pushed` too).
    pub fn found_damaged(&mut self, records: u64, samples: u64, bytes: u64) {
        self.pushed[0] += records;
        self.pushed[1] += samples;
        self.damaged[0] += records;
        self.damaged[1] += samples;
        self.damaged[2] += bytes;
    }

    fn pos(&self, seq: u64) -> Option<usize> {
        let i = self.entries.partition_point(|e| e.seq < seq);
        (self.entries.get(i)?.seq == seq).then_some(i)
    }

    /// Takes the next record to hand out and marks it in flight.
    pub fn take_next(&mut self) -> Option<Entry> {
        while let Some(seq) = self.returned.pop_first() {
            if let Some(i) = self.pos(seq)
                && self.entries[i].state == State::Open
            {
                let e = self.entries[i];
                add(&mut self.in_flight, e.samples);
                return Some(e);
            }
        }
        let start = self.entries.partition_point(|e| e.seq < self.read_cursor);
        let e = *self
            .entries
            .range(start..)
            .find(|e| e.state == State::Open)?;
        self.read_cursor = e.seq + 1;
        add(&mut self.in_flight, e.samples);
        Some(e)
    }

    /// Gives back a record `take_next` returned but that could not be read: handed out again.
    pub fn give_back(&mut self, seq: u64) {
        // Evicted meanwhile: nobody holds it to ack or nack, so it is dropped now.
        if let Some((samples, reason)) = self.evicted.remove(&seq) {
            sub(&mut self.in_flight, samples);
            count_drop(&mut self.total, reason, samples);
            count_drop(&mut self.removed, reason, samples);
            return;
        }
        if let Some(i) = self.pos(seq)
            && self.entries[i].state == State::Open
        {
            sub(&mut self.in_flight, self.entries[i].samples);
            self.returned.insert(seq);
        }
    }

    fn handed_out(&self, seq: u64) -> bool {
        seq < self.read_cursor && !self.returned.contains(&seq)
    }

    /// Decides an open or evicted record; false if it was decided already (or is unknown).
    fn decide(&mut self, seq: u64, to: State) -> bool {
        if let Some((samples, _)) = self.evicted.remove(&seq) {
            // Removed from disk already: straight into the removed counts.
            sub(&mut self.in_flight, samples);
            count(&mut self.total, to, samples);
            count(&mut self.removed, to, samples);
            if to == State::Damaged {
                self.damaged[0] += 1;
                self.damaged[1] += u64::from(samples);
            }
            return true;
        }
        let Some(i) = self.pos(seq) else {
            return false;
        };
        let e = self.entries[i];
        if e.state != State::Open {
            return false;
        }
        if self.handed_out(seq) {
            sub(&mut self.in_flight, e.samples);
        }
        sub(&mut self.open, e.samples);
        self.entries[i].state = to;
        count(&mut self.total, to, e.samples);
        if to == State::Damaged {
            self.damaged[0] += 1;
            self.damaged[1] += u64::from(e.samples);
            self.damaged[2] += e.len;
        }
        self.pop_decided();
        true
    }

    pub fn ack(&mut self, seq: u64) -> bool {
        self.decide(seq, State::Sent)
    }

    pub fn dead_letter(&mut self, seq: u64) -> bool {
        self.decide(seq, State::DeadLettered)
    }

    pub fn damaged(&mut self, seq: u64) -> bool {
        self.decide(seq, State::Damaged)
    }

    /// Samples of `seq` if it can still be decided (open or evicted in flight).
    pub fn undecided(&self, seq: u64) -> Option<u32> {
        if let Some((s, _)) = self.evicted.get(&seq) {
            return Some(*s);
        }
        let e = self.entries.get(self.pos(seq)?)?;
        (e.state == State::Open).then_some(e.samples)
    }

    pub fn nack(&mut self, seq: u64) -> Nack {
        if let Some((samples, reason)) = self.evicted.remove(&seq) {
            sub(&mut self.in_flight, samples);
            count_drop(&mut self.total, reason, samples);
            count_drop(&mut self.removed, reason, samples);
            return Nack::Dropped;
        }
        match self.pos(seq) {
            Some(i) if self.entries[i].state == State::Open => Nack::Retry,
            // Decided already (removed, or acked above the cursor): nothing to send again.
            _ => Nack::Dropped,
        }
    }

    /// Removes decided records from the front: removal is always a prefix in seq order.
    fn pop_decided(&mut self) {
        while let Some(e) = self.entries.front().copied() {
            if e.state == State::Open {
                break;
            }
            self.entries.pop_front();
            self.bytes -= e.len;
            if e.state != State::Damaged {
                count(&mut self.removed, e.state, e.samples);
            }
        }
    }

    /// Removes the oldest records while over `max_size` bytes or older than `max_age`;
    /// returns (records, samples) dropped per reason, for the log.
    pub fn enforce(&mut self, max_size: u64, max_age: Duration, now_ns: i64) -> [[u64; 2]; 2] {
        let age_ns = i64::try_from(max_age.as_nanos()).unwrap_or(i64::MAX);
        let horizon = now_ns.saturating_sub(age_ns);
        let mut dropped = [[0u64; 2]; 2];
        while let Some(e) = self.entries.front().copied() {
            let reason = if self.bytes > max_size {
                Reason::Size
            } else if e.enqueued_ns < horizon {
                Reason::Age
            } else {
                break;
            };
            self.entries.pop_front();
            self.bytes -= e.len;
            match e.state {
                State::Open => {
                    sub(&mut self.open, e.samples);
                    add(&mut dropped[reason as usize], e.samples);
                    if self.handed_out(e.seq) {
                        // In flight: the sender's next ack or nack decides it.
                        self.evicted.insert(e.seq, (e.samples, reason));
                    } else {
                        self.returned.remove(&e.seq);
                        count_drop(&mut self.total, reason, e.samples);
                        count_drop(&mut self.removed, reason, e.samples);
                    }
                }
                State::Damaged => {}
                decided => count(&mut self.removed, decided, e.samples),
            }
            self.pop_decided();
        }
        dropped
    }

    /// What the ledger persists now: the cursor is the front's seq (or the next seq when
    /// empty). Records evicted in flight count as dropped there: after a crash no sender holds
    /// them any more and they are not on disk, so dropped is all they can be.
    pub fn ledger_state(&self) -> LedgerState {
        let mut counts = self.removed;
        for (samples, reason) in self.evicted.values() {
            count_drop(&mut counts, *reason, *samples);
        }
        LedgerState {
            cursor: self.entries.front().map_or(self.next_seq, |e| e.seq),
            next_seq: self.next_seq,
            clean: false,
            counts,
        }
    }

    pub fn evicted_samples(&self) -> [u64; 2] {
        let s = self.evicted.values().map(|(s, _)| u64::from(*s)).sum();
        [self.evicted.len() as u64, s]
    }
}

fn add(c: &mut [u64; 2], samples: u32) {
    c[0] += 1;
    c[1] += u64::from(samples);
}

fn sub(c: &mut [u64; 2], samples: u32) {
    c[0] -= 1;
    c[1] -= u64::from(samples);
}

fn count(c: &mut Counts, state: State, samples: u32) {
    match state {
        State::Sent => add(&mut c.sent, samples),
        State::DeadLettered => add(&mut c.dead_lettered, samples),
        State::Open | State::Damaged => {}
    }
}

fn count_drop(c: &mut Counts, reason: Reason, samples: u32) {
    match reason {
        Reason::Size => add(&mut c.dropped_size, samples),
        Reason::Age => add(&mut c.dropped_age, samples),
    }
}
