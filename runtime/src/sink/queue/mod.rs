//! The durable on-disk queue each forwarding sink keeps: a record (one encoded batch) leaves it
//! only when the destination acknowledged it, when the budget (`max_size`, `max_age`) drops it,
//! or when it is dead-lettered, and every one of those is counted. It survives SIGKILL (a push
//! returns after write(2)), power loss (group commit: fsync within `fsync_interval`) and damaged
//! files (the daemon always starts; what was damaged is counted and logged).
//!
//! # Files in `dir`
//! - `NNNNNNNNNNNNNNNNNNNN.seg`: segments, named by the seq they start at (20 digits). Records
//!   are appended to the newest one only; past `segment_size` the next push starts a new one,
//!   and every open starts a new one (an old segment is never written again, only truncated).
//! - `ledger`: the removal cursor (every seq below it is removed), the next seq, a clean-close
//!   flag and the decided counts (sent, dropped by size/age, dead-lettered: records and
//!   samples) for the records below the cursor. Two CRC'd slots at 0 and 4096, written in turn
//!   (pwrite + fdatasync); open uses the valid slot with the higher generation.
//! - `dead-letter.log`: permanent refusals, append-only: a line
//!   `# seq=.. time=<RFC 3339> samples=.. bytes=<n> reason=..` then the n payload bytes and `\n`.
//!
//! # Record (little endian, 48-byte header, then the payload)
//! `magic "WQR1" | u32 crc32(bytes 8..48) | u32 payload_len | u32 crc32(payload) | u64 seq |
//! u32 samples | u32 reserved=0 | i64 enqueued_ns | i64 oldest_sample_ns | payload`
//!
//! # Recovery at open
//! Each segment not wholly below the cursor is scanned: a header whose CRC fails is skipped by
//! searching forward for the next magic whose header checks (its seq must not go backwards);
//! a record whose header checks but whose payload CRC fails is skipped by its length. Seqs are
//! contiguous within a segment, so the seq gap counts the records lost in between. Whatever
//! follows the last intact record of a segment (torn write, zero fill after a power loss,
//! appended garbage) is cut (`truncated_tail_bytes`). A missing or damaged ledger never stops
//! the open: the other slot is used, or, with both damaged, everything found is handed out again.
//!
//! # Durability and ordering
//! - A background thread (`wasmon-queue-sync`) commits every `fsync_interval`: fdatasync of the
//!   segments written since, fsync of the directory if a segment was created, then the ledger,
//!   then deletion of the segments wholly below the cursor just made durable (deleting first
//!   would let a crash resurrect removed records or, as in Vector PR #25570, break the open).
//!   A thread rather than "the next push": the last push before a quiet spell would otherwise
//!   stay unsynced indefinitely, and the interval would not bound the loss on power failure.
//! - Acks are persisted at the commit, not one by one: after a crash up to one interval of
//!   acknowledged records is handed out again (duplicates, which receivers absorb: Nats-Msg-Id
//!   de-dup, cc-metric-store's slot overwrite, Prometheus' identical-sample rule).
//! - A seq is never given to two records: after an unclean stop (no clean flag) the next seq
//!   jumps by [`SEQ_GAP_AFTER_CRASH`], because pushes after the last commit may have been lost
//!   by a power failure after they were sent upstream under their seq (the batch id).
//! - `dead_letter` fsyncs the dead-letter file before it decides the record; a crash before the
//!   next commit can hand it out again and so dead-letter it twice (never lose it).
//! - Dropping the [`Queue`] is the clean close: it stops the thread and commits with the clean
//!   flag. `sync` alone makes everything durable; without the drop the next open sees an unclean
//!   stop, which costs only the seq jump.
//! - One queue per directory: `open` takes an exclusive flock on the ledger (released by the
//!   kernel when the process dies) and fails with [`QueueError::Locked`] while another holds it.
//! - Memory: one index entry (56 bytes) per unremoved record, never the payloads; one open file
//!   per segment holding queued records.
//!
//! # Accounting
//! Every pushed record is decided exactly once: sent (`ack`), dropped by size or age (the
//! budget; a record in flight when the budget removes it is decided by the sender's next `ack`
//! (sent) or `nack` (dropped)), dead-lettered, or damaged; until then it is queued. Removal is
//! always a prefix in seq order: a record acked above an older unacked one is counted as sent at
//! once and removed when the front reaches it (after a restart it is handed out again).
//! [`QueueStats::accounted_samples`] equals `pushed_samples` at every moment, and `pushed`
//! carries over restarts and crashes exactly (the ledger's counts plus the records found; only
//! the samples of a record whose header was damaged are unknown). Records evicted in flight and
//! undecided at a crash are counted as dropped (no sender holds them any more).

// Parts: `segment` (record format, scan), `ledger` (the two-slot cursor file), `index` (the
// in-memory index and all accounting), `recover` (open), `running` (the API), `commit` (the
// group commit thread and segment deletion).
mod commit;
mod index;
mod ledger;
mod recover;
mod running;
mod segment;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_crash;
#[cfg(test)]
mod tests_damage;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use ledger::LedgerFound;
pub use running::Queue;

/// The first seq of a new queue (0 stays free as "none" for callers).
const FIRST_SEQ: u64 = 1;
/// How far the next seq jumps after an unclean stop: more than any number of pushes between
/// two commits, and 2^64 / 2^32 leaves room for four billion crashes.
pub const SEQ_GAP_AFTER_CRASH: u64 = 1 << 32;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// Bytes of queued (unremoved) records including headers.
    pub max_size: u64,
    /// By enqueue time.
    pub max_age: Duration,
    /// Roll to a new segment file past this.
    pub segment_size: u64,
    /// Group commit: fsync at most this long after a push. Zero: every push fsyncs its segment
    /// before it returns (the ledger still follows at the next commit).
    pub fsync_interval: Duration,
}

/// The default budget: about a week of a node's compressed forwarding.
pub const DEFAULT_MAX_SIZE: u64 = 1 << 30;
/// A week: a long weekend's outage plus the time to notice it.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// Disk is freed a segment at a time, so the budget can overshoot by one; 64 MiB is 1/16 of the
/// default budget and keeps the file (and descriptor) count at 16 or so.
pub const DEFAULT_SEGMENT_SIZE: u64 = 64 << 20;
/// At most a second of acknowledged pushes lost on power failure (the bound; Vector
/// uses 500 ms), one fsync a second however many pushes.
pub const DEFAULT_FSYNC_INTERVAL: Duration = Duration::from_secs(1);

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            max_size: DEFAULT_MAX_SIZE,
            max_age: DEFAULT_MAX_AGE,
            segment_size: DEFAULT_SEGMENT_SIZE,
            fsync_interval: DEFAULT_FSYNC_INTERVAL,
        }
    }
}

/// One queued batch as `next` hands it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub samples: u32,
    pub enqueued_ns: i64,
    pub oldest_sample_ns: i64,
    pub payload: bytes::Bytes,
}

/// What `open` found and repaired.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Intact records queued (not yet removed).
    pub records: u64,
    pub samples: u64,
    /// Records lost between intact ones (bad payload CRC, or bridged by a resync).
    pub damaged_records: u64,
    /// Samples of the damaged records whose header survived (the others' are unknown).
    pub damaged_samples: u64,
    pub damaged_bytes: u64,
    /// Bytes cut after the last intact record of a segment.
    pub truncated_tail_bytes: u64,
    /// Records whose header survived inside a cut tail (a torn last write).
    pub truncated_tail_records: u64,
    /// Segment files scanned.
    pub segments: u64,
    pub ledger: LedgerFound,
    /// The previous run did not close the queue (crash, SIGKILL, power loss).
    pub unclean: bool,
}

/// The sender's side of a failed send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nack {
    /// Keep the record and try again later.
    Retry,
    /// The budget removed it while in flight (now counted as dropped), or it was decided
    /// already: do not send it again.
    Dropped,
}

/// Counters and gauges. Record/sample counts are (records, samples). Decided counts continue
/// across restarts (from the ledger); `damaged_*` count since open. At every moment
/// `pushed == sent + dropped_size + dropped_age + dead_lettered + damaged + queued +
/// evicted_in_flight` (samples and records alike).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QueueStats {
    /// Undecided records still in the queue (in flight included).
    pub queued_records: u64,
    pub queued_samples: u64,
    /// Unremoved records' bytes including headers: what `max_size` bounds.
    pub queued_bytes: u64,
    /// Handed out by `next`, not yet decided (evicted ones included).
    pub in_flight_records: u64,
    pub in_flight_samples: u64,
    /// Removed by the budget while in flight; the sender's next ack/nack decides them.
    pub evicted_in_flight_records: u64,
    pub evicted_in_flight_samples: u64,
    /// Of the oldest unremoved record; 0 when the queue is empty.
    pub oldest_enqueued_ns: i64,
    pub oldest_sample_ns: i64,
    /// Segment files and the ledger.
    pub disk_bytes: u64,
    pub dead_letter_file_bytes: u64,
    pub pushed_records: u64,
    pub pushed_samples: u64,
    pub sent_records: u64,
    pub sent_samples: u64,
    pub dropped_size_records: u64,
    pub dropped_size_samples: u64,
    pub dropped_age_records: u64,
    pub dropped_age_samples: u64,
    pub dead_lettered_records: u64,
    pub dead_lettered_samples: u64,
    pub damaged_records: u64,
    pub damaged_samples: u64,
    pub damaged_bytes: u64,
    /// The last failed background commit, cleared by the next good one.
    pub last_sync_error: Option<String>,
}

impl QueueStats {
    /// Samples accounted for: equal to `pushed_samples` at every moment.
    pub fn accounted_samples(&self) -> u64 {
        self.sent_samples
            + self.dropped_size_samples
            + self.dropped_age_samples
            + self.dead_lettered_samples
            + self.damaged_samples
            + self.queued_samples
            + self.evicted_in_flight_samples
    }

    /// Records accounted for: equal to `pushed_records` at every moment.
    pub fn accounted_records(&self) -> u64 {
        self.sent_records
            + self.dropped_size_records
            + self.dropped_age_records
            + self.dead_lettered_records
            + self.damaged_records
            + self.queued_records
            + self.evicted_in_flight_records
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("queue: cannot {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("queue: a record of {len} bytes exceeds the limit of {limit} bytes")]
    TooLarge { len: u64, limit: u64 },
    #[error("queue: {} is in use by another queue (one writer per directory)", dir.display())]
    Locked { dir: PathBuf },
}

fn io_err(op: &'static str, path: &Path, source: std::io::Error) -> QueueError {
    QueueError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}
