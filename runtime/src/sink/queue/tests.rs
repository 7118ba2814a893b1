//! The queue's behaviour: order, acks, restarts, segments, budgets, dead letters, the ledger.

use std::path::Path;
use std::time::Duration;

use super::running::{now_ns, rfc3339};
use super::segment::{HEADER_LEN, Header};
use super::{LedgerFound, Nack, Queue, QueueConfig, QueueStats, Record};

/// No background commit during a test unless it asks: commits happen at `sync` and close,
/// so what is on disk is decided by the test, not by timing.
const NO_TIMER: Duration = Duration::from_secs(3600);

pub(super) fn cfg() -> QueueConfig {
    QueueConfig {
        fsync_interval: NO_TIMER,
        ..QueueConfig::default()
    }
}

/// A payload that names its record, of a size that varies with `i`.
pub(super) fn payload(i: u64) -> Vec<u8> {
    let mut p = format!("record {i};").into_bytes();
    p.resize(20 + (i as usize * 7) % 90, b'a' + (i % 26) as u8);
    p
}

pub(super) fn samples(i: u64) -> u32 {
    (i % 5 + 1) as u32
}

/// Pushes records `from..to` (payload and samples from `i`), returns their seqs.
pub(super) fn push_range(q: &Queue, from: u64, to: u64) -> Vec<u64> {
    (from..to)
        .map(|i| {
            q.push(&payload(i), samples(i), 1000 + i as i64)
                .expect("push")
        })
        .collect()
}

pub(super) fn drain(q: &Queue) -> Vec<Record> {
    std::iter::from_fn(|| q.next().expect("next")).collect()
}

/// The accounting invariant, records and samples.
pub(super) fn check(q: &Queue) -> QueueStats {
    let s = q.stats();
    assert_eq!(s.pushed_samples, s.accounted_samples(), "{s:#?}");
    assert_eq!(s.pushed_records, s.accounted_records(), "{s:#?}");
    s
}

pub(super) fn seg_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    v.sort();
    v
}

/// Flips the bits `mask` of the byte at `at` of file `path` (damage, as a bad disk does it).
pub(super) fn xor_byte(path: &Path, at: u64, mask: u8) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open");
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).expect("read");
    f.write_all_at(&[b[0] ^ mask], at).expect("write");
}

/// Acks `records`, which must all be handed out.
pub(super) fn ack_all(q: &Queue, records: &[Record]) {
    for r in records {
        q.ack(r.seq).expect("ack");
    }
}

/// The seqs of what `q` hands out until it is empty.
pub(super) fn drained_seqs(q: &Queue) -> Vec<u64> {
    drain(q).iter().map(|r| r.seq).collect()
}

/// [`cfg`] with segments of `size` bytes (small ones: tests that roll many).
pub(super) fn segments_of(size: u64) -> QueueConfig {
    QueueConfig {
        segment_size: size,
        ..cfg()
    }
}

/// `q` has sent `sent` records and holds none.
pub(super) fn assert_all_sent(q: &Queue, sent: u64) {
    let s = check(q);
    assert_eq!(
        (s.sent_records, s.queued_records, s.queued_bytes),
        (sent, 0, 0)
    );
}

/// A new queue with config `c` in a directory of its own (kept while the queue is used).
pub(super) fn fresh(c: QueueConfig) -> (tempfile::TempDir, Queue) {
    let d = tempfile::tempdir().expect("tempdir");
    let (q, _) = Queue::open(d.path(), c).expect("open");
    (d, q)
}

/// A fresh queue with records `0..n` pushed and all handed out: their seqs, the records.
pub(super) fn handed_out(n: u64) -> (tempfile::TempDir, Queue, Vec<u64>, Vec<Record>) {
    let (d, q) = fresh(cfg());
    let seqs = push_range(&q, 0, n);
    let got = drain(&q);
    (d, q, seqs, got)
}

/// The environment variable naming a child test's queue directory (see [`child_test`]).
const CHILD_DIR_ENV: &str = "WASMON_QUEUE_CHILD_DIR";

/// This test binary running only test `name` of `module` (a `module_path!()`), ignored as it
/// is (a child test, run only this way), on a queue in `dir` ([`child_queue`]).
pub(super) fn child_test(module: &str, name: &str, dir: &Path) -> std::process::Command {
    // The module's path without the crate name: the same in the scratch crate and in wasmon.
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    let mut cmd = std::process::Command::new(std::env::current_exe().expect("exe"));
    cmd.args([
        "--exact",
        &format!("{module}::{name}"),
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_DIR_ENV, dir);
    cmd
}

/// In a child test run by [`child_test`]: its directory and the queue opened there with `c`;
/// `None` in a plain test run (the child then does nothing).
pub(super) fn child_queue(c: QueueConfig) -> Option<(std::path::PathBuf, Queue)> {
    let dir = std::path::PathBuf::from(std::env::var_os(CHILD_DIR_ENV)?);
    let (q, _) = Queue::open(&dir, c).expect("open");
    Some((dir, q))
}

fn rec_len(i: u64) -> u64 {
    (HEADER_LEN + payload(i).len()) as u64
}

#[test]
fn push_next_ack_in_order() {
    let d = tempfile::tempdir().expect("tempdir");
    let (q, rec) = Queue::open(d.path(), cfg()).expect("open");
    assert_eq!(rec.records, 0);
    assert_eq!(rec.ledger, LedgerFound::Missing);
    let seqs = push_range(&q, 0, 10);
    assert!(seqs.windows(2).all(|w| w[0] + 1 == w[1]), "{seqs:?}");
    let s = check(&q);
    assert_eq!((s.queued_records, s.pushed_records), (10, 10));
    assert_eq!(s.queued_bytes, (0..10).map(rec_len).sum::<u64>());
    assert_eq!(s.oldest_sample_ns, 1000);
    assert!(s.oldest_enqueued_ns > 0);
    let got = drain(&q);
    assert_eq!(got.len(), 10);
    for (i, r) in got.iter().enumerate() {
        let i = i as u64;
        assert_eq!(r.seq, seqs[i as usize]);
        assert_eq!(&r.payload[..], &payload(i)[..]);
        assert_eq!(
            (r.samples, r.oldest_sample_ns),
            (samples(i), 1000 + i as i64)
        );
    }
    assert_eq!(check(&q).in_flight_records, 10);
    for r in &got {
        q.ack(r.seq).expect("ack");
        q.ack(r.seq).expect("a second ack is ignored");
    }
    let s = check(&q);
    assert_eq!(
        (s.sent_records, s.sent_samples),
        (10, (0..10).map(|i| u64::from(samples(i))).sum())
    );
    assert_eq!(
        (s.queued_records, s.queued_bytes, s.in_flight_records),
        (0, 0, 0)
    );
    assert_eq!(s.oldest_enqueued_ns, 0);
    assert!(q.next().expect("next").is_none());
}

#[test]
fn out_of_order_acks_remove_a_prefix() {
    let (_d, q, seqs, _) = handed_out(5);
    q.ack(seqs[2]).expect("ack");
    q.ack(seqs[4]).expect("ack");
    let s = check(&q);
    // Counted as sent at once, removed only when the front reaches them.
    assert_eq!((s.sent_records, s.queued_records), (2, 3));
    assert_eq!(s.queued_bytes, (0..5).map(rec_len).sum::<u64>());
    q.ack(seqs[0]).expect("ack");
    assert_eq!(check(&q).queued_bytes, (1..5).map(rec_len).sum::<u64>());
    q.ack(seqs[1]).expect("ack"); // removes 1, 2
    assert_eq!(check(&q).queued_bytes, rec_len(3) + rec_len(4));
    assert_eq!(q.nack(seqs[3]), Nack::Retry);
    q.ack(seqs[3]).expect("ack");
    assert_all_sent(&q, 5);
}

#[test]
fn restart_hands_out_exactly_the_unacked() {
    let (d, q, seqs, got) = handed_out(20);
    ack_all(&q, &got[..10]);
    drop(q); // a clean close commits
    let (q, rec) = Queue::open(d.path(), cfg()).expect("reopen");
    assert_eq!(
        (rec.records, rec.unclean, rec.ledger),
        (10, false, LedgerFound::Intact)
    );
    let again = drained_seqs(&q);
    assert_eq!(again, seqs[10..]);
    let s = check(&q);
    assert_eq!(
        (s.sent_records, s.pushed_records, s.queued_records),
        (10, 20, 10)
    );
    // A clean close continues the seqs.
    assert_eq!(q.push(b"x", 1, 0).expect("push"), seqs[19] + 1);
}

#[test]
fn acked_above_the_cursor_comes_again_at_most_once_after_a_restart() {
    let (d, q, seqs, _) = handed_out(6);
    q.ack(seqs[0]).expect("ack");
    q.ack(seqs[3]).expect("ack"); // above the cursor: kept in memory only
    drop(q);
    let (q, _) = Queue::open(d.path(), cfg()).expect("reopen");
    let again = drained_seqs(&q);
    assert_eq!(again, seqs[1..]);
    assert_eq!(check(&q).sent_records, 1);
}

#[test]
fn many_segments_are_rolled_and_deleted() {
    let c = segments_of(1024);
    let (d, q) = fresh(c.clone());
    let seqs = push_range(&q, 0, 300);
    let n = seg_files(d.path()).len();
    assert!(n > 30, "{n} segments");
    // The names are the first seqs.
    let first = seg_files(d.path())[0]
        .file_stem()
        .and_then(|s| s.to_str())
        .map(str::to_owned);
    assert_eq!(first, Some(format!("{:020}", seqs[0])));
    let got = drain(&q);
    assert_eq!(got.len(), 300);
    ack_all(&q, &got[..150]);
    // Deleted only by the commit, after the ledger moved past them.
    assert_eq!(seg_files(d.path()).len(), n);
    q.sync().expect("sync");
    let left = seg_files(d.path()).len();
    assert!(left < n / 2 + 2, "{left} of {n} left");
    ack_all(&q, &got[150..]);
    q.sync().expect("sync");
    assert_eq!(seg_files(d.path()).len(), 1, "the active segment stays");
    let s = check(&q);
    assert_eq!((s.sent_records, s.queued_records), (300, 0));
    drop(q);
    let (q, rec) = Queue::open(d.path(), c).expect("reopen");
    assert_eq!(rec.records, 0);
    assert!(q.next().expect("next").is_none());
    assert_eq!(check(&q).sent_records, 300);
}

#[test]
fn the_size_budget_drops_the_oldest_exactly() {
    let d = tempfile::tempdir().expect("tempdir");
    // Room for records 15..25 exactly: the budget counts headers too.
    let room: u64 = (15..25).map(rec_len).sum();
    let c = QueueConfig {
        max_size: room,
        segment_size: 512,
        ..cfg()
    };
    let (q, _) = Queue::open(d.path(), c.clone()).expect("open");
    let seqs = push_range(&q, 0, 25);
    let s = check(&q);
    assert_eq!((s.dropped_size_records, s.queued_records), (15, 10));
    assert_eq!(
        s.dropped_size_samples,
        (0..15).map(|i| u64::from(samples(i))).sum::<u64>()
    );
    assert_eq!(s.queued_bytes, room);
    // The newest data is what arrives.
    let got = drained_seqs(&q);
    assert_eq!(got, seqs[15..]);
    // Exact across a restart too.
    q.sync().expect("sync");
    drop(q);
    let (q, _) = Queue::open(d.path(), c).expect("reopen");
    let s = check(&q);
    assert_eq!(
        (s.dropped_size_records, s.queued_records, s.pushed_records),
        (15, 10, 25)
    );
    // A record larger than the whole budget is refused, not allowed to empty the queue.
    assert!(matches!(
        q.push(&vec![0; room as usize], 1, 0),
        Err(super::QueueError::TooLarge { .. })
    ));
    assert_eq!(check(&q).queued_records, 10);
}

#[test]
fn records_dropped_in_flight_are_decided_exactly_once() {
    let d = tempfile::tempdir().expect("tempdir");
    let room: u64 = (0..5).map(|_| (HEADER_LEN + 100) as u64).sum();
    let c = QueueConfig {
        max_size: room,
        ..cfg()
    };
    let (q, _) = Queue::open(d.path(), c).expect("open");
    let seqs: Vec<u64> = (0..5)
        .map(|_| q.push(&[7; 100], 10, 0).expect("push"))
        .collect();
    let out: Vec<u64> = (0..3)
        .map(|_| q.next().expect("next").expect("some").seq)
        .collect();
    assert_eq!(out, seqs[..3]);
    // Two more push the two oldest (in flight) out.
    q.push(&[7; 100], 10, 0).expect("push");
    q.push(&[7; 100], 10, 0).expect("push");
    let s = check(&q);
    assert_eq!(
        (s.evicted_in_flight_records, s.dropped_size_records),
        (2, 0)
    );
    assert_eq!((s.in_flight_records, s.queued_records), (3, 5));
    q.ack(seqs[0]).expect("ack"); // the ack came first: sent
    assert_eq!(q.nack(seqs[1]), Nack::Dropped); // the nack came first: dropped
    assert_eq!(q.nack(seqs[1]), Nack::Dropped);
    q.ack(seqs[1]).expect("a late ack changes nothing");
    assert_eq!(
        q.nack(seqs[0]),
        Nack::Dropped,
        "decided already: not to be sent again"
    );
    let s = check(&q);
    assert_eq!(
        (
            s.sent_records,
            s.dropped_size_records,
            s.evicted_in_flight_records
        ),
        (1, 1, 0)
    );
    assert_eq!((s.sent_samples, s.dropped_size_samples), (10, 10));
    assert_eq!(q.nack(seqs[2]), Nack::Retry);
    // Evicted and undecided at a crash: the ledger counts it as dropped.
    q.push(&[7; 100], 10, 0).expect("push"); // evicts seqs[2], in flight
    assert_eq!(check(&q).evicted_in_flight_records, 1);
    q.sync().expect("sync");
    q.abandon();
    let (q, _) = Queue::open(d.path(), cfg()).expect("reopen");
    let s = check(&q);
    assert_eq!(
        (s.sent_records, s.dropped_size_records, s.queued_records),
        (1, 2, 5)
    );
    assert_eq!(s.pushed_records, 8);
}

#[test]
fn a_record_kept_for_a_retry_and_evicted_meanwhile_is_not_sent_again() {
    let d = tempfile::tempdir().expect("tempdir");
    let c = QueueConfig {
        max_size: 3 * (HEADER_LEN + 100) as u64,
        ..cfg()
    };
    let (q, _) = Queue::open(d.path(), c).expect("open");
    let first = q.push(&[7; 100], 10, 0).expect("push");
    assert_eq!(q.next().expect("next").map(|r| r.seq), Some(first));
    assert_eq!(q.nack(first), Nack::Retry);
    assert!(q.still_queued(first), "nothing evicted it yet");
    // Pushes during the backoff push it out of the budget.
    for _ in 0..3 {
        q.push(&[7; 100], 10, 0).expect("push");
    }
    assert!(!q.still_queued(first));
    assert!(!q.still_queued(first), "asked twice, counted once");
    let s = check(&q);
    assert_eq!(
        (
            s.dropped_size_records,
            s.evicted_in_flight_records,
            s.queued_records
        ),
        (1, 0, 3)
    );
    assert_eq!(q.next().expect("next").map(|r| r.seq), Some(first + 1));
}

#[test]
fn the_age_budget_drops_the_oldest_exactly_in_flight_too() {
    let d = tempfile::tempdir().expect("tempdir");
    let hour = Duration::from_secs(3600);
    let c = QueueConfig {
        max_age: hour,
        ..cfg()
    };
    let (q, _) = Queue::open(d.path(), c).expect("open");
    let old = push_range(&q, 0, 3);
    std::thread::sleep(Duration::from_millis(2));
    let mid = now_ns();
    std::thread::sleep(Duration::from_millis(2));
    let new = push_range(&q, 3, 5);
    assert_eq!(q.next().expect("next").map(|r| r.seq), Some(old[0]));
    q.enforce_at(mid + hour.as_nanos() as i64);
    let s = check(&q);
    assert_eq!(
        (
            s.dropped_age_records,
            s.evicted_in_flight_records,
            s.queued_records
        ),
        (2, 1, 2)
    );
    assert_eq!(s.dropped_age_samples, u64::from(samples(1) + samples(2)));
    assert_eq!(q.nack(old[0]), Nack::Dropped);
    let s = check(&q);
    assert_eq!(
        (s.dropped_age_records, s.dropped_age_samples),
        (3, (0..3).map(|i| u64::from(samples(i))).sum())
    );
    let got = drained_seqs(&q);
    assert_eq!(got, new);
}

#[test]
fn reconfigure_keeps_the_content_and_a_smaller_budget_drops_the_oldest() {
    let (_d, q) = fresh(cfg());
    let seqs = push_range(&q, 0, 10);
    q.reconfigure(QueueConfig {
        max_size: (6..10).map(rec_len).sum(),
        ..cfg()
    });
    let s = check(&q);
    assert_eq!((s.dropped_size_records, s.queued_records), (6, 4));
    let got = drained_seqs(&q);
    assert_eq!(got, seqs[6..]);
}

#[test]
fn dead_letters_are_written_counted_and_removed_once() {
    let (d, q, seqs, got) = handed_out(3);
    q.dead_letter(seqs[1], &got[1].payload, "HTTP 400: bad\nline")
        .expect("dead letter");
    let file = d.path().join(super::running::DEAD_LETTER_FILE);
    let text = std::fs::read(&file).expect("dead-letter file");
    let head = format!("# seq={} time=", seqs[1]);
    assert!(
        text.starts_with(head.as_bytes()),
        "{}",
        String::from_utf8_lossy(&text)
    );
    let nl = text.iter().position(|&b| b == b'\n').expect("header line");
    let line = String::from_utf8_lossy(&text[..nl]).into_owned();
    assert!(
        line.ends_with(&format!(
            "samples={} bytes={} reason=HTTP 400: bad line",
            samples(1),
            payload(1).len()
        )),
        "{line}"
    );
    assert_eq!(&text[nl + 1..nl + 1 + payload(1).len()], &payload(1)[..]);
    // Decided already: nothing more written, nothing counted twice.
    q.dead_letter(seqs[1], &got[1].payload, "again")
        .expect("dead letter");
    q.ack(seqs[1]).expect("ack");
    assert_eq!(std::fs::read(&file).expect("read").len(), text.len());
    q.ack(seqs[0]).expect("ack");
    q.ack(seqs[2]).expect("ack");
    let s = check(&q);
    assert_eq!(
        (
            s.dead_lettered_records,
            s.dead_lettered_samples,
            s.sent_records
        ),
        (1, u64::from(samples(1)), 2)
    );
    assert_eq!((s.queued_records, s.queued_bytes), (0, 0));
    assert_eq!(s.dead_letter_file_bytes, text.len() as u64);
    drop(q);
    let (q, _) = Queue::open(d.path(), cfg()).expect("reopen");
    assert!(q.next().expect("next").is_none());
    assert_eq!(check(&q).dead_lettered_records, 1);
}

#[test]
fn the_queue_is_send_and_sync_and_pushes_from_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Queue>();
    let d = tempfile::tempdir().expect("tempdir");
    let c = QueueConfig {
        segment_size: 4096,
        fsync_interval: Duration::from_millis(2),
        ..QueueConfig::default()
    };
    let (q, _) = Queue::open(d.path(), c).expect("open");
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let q = &q;
            s.spawn(move || push_range(q, t * 1000, t * 1000 + 200));
        }
        s.spawn(|| {
            let mut n = 0;
            while n < 800 {
                match q.next().expect("next") {
                    Some(r) => {
                        q.ack(r.seq).expect("ack");
                        n += 1;
                    }
                    None => std::thread::yield_now(),
                }
            }
        });
    });
    assert_all_sent(&q, 800);
}

#[test]
fn header_round_trip_and_time_format() {
    let h = Header {
        payload_len: 5,
        payload_crc: 9,
        seq: u64::MAX - 1,
        samples: 3,
        enqueued_ns: -1,
        oldest_sample_ns: i64::MIN,
    };
    let mut b = h.encode();
    assert_eq!(Header::decode(&b), Some(h));
    b[30] = 1; // reserved
    assert_eq!(Header::decode(&b), None);
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(
        rfc3339(1_764_051_019_123_000_000),
        "2025-11-25T06:10:19.123Z"
    );
    assert_eq!(rfc3339(951_782_400_000_000_000), "2000-02-29T00:00:00.000Z");
}
