//! The running queue: push, hand out, decide, and the group commit.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::index::{Entry, Index, State};
use super::ledger::{LEDGER_LEN, Ledger};
use super::recover::{Seg, recover};
use super::segment::{HEADER_LEN, Header, MAX_PAYLOAD, segment_name};
use super::segment::{create_segment, remove_segment, sync_dir};
use super::{Nack, QueueConfig, QueueError, QueueStats, Record, Recovery, io_err};

pub(super) const DEAD_LETTER_FILE: &str = "dead-letter.log";
/// Budget drops are logged at most this often (they are counted exactly regardless).
const DROP_LOG_INTERVAL_NS: i64 = 60_000_000_000;
/// The push buffer is kept between pushes up to this size (a typical batch is well below).
const SCRATCH_KEEP: usize = 4 << 20;

/// A durable queue of records in a directory. Send + Sync; all methods take `&self`.
/// Dropping it stops the background commit thread and commits a last time (a clean close).
pub struct Queue {
    inner: Arc<Inner>,
    syncer: Option<JoinHandle<()>>,
}

pub(super) struct Inner {
    pub(super) dir: PathBuf,
    pub(super) state: Mutex<Running>,
    /// Serialises commits (the thread's, `sync`'s, the last one on drop) and owns the ledger.
    pub(super) commit: Mutex<Ledger>,
    /// Wakes the commit thread early: stop, or a new interval.
    pub(super) wake: Condvar,
    pub(super) stop: AtomicBool,
}

pub(super) struct Running {
    pub(super) cfg: QueueConfig,
    pub(super) index: Index,
    /// By first seq; the last one is where pushes go.
    pub(super) segs: BTreeMap<u64, Seg>,
    /// Writes since the last commit's fdatasync.
    pub(super) dirty: bool,
    /// Rolled segments written since the last commit.
    pub(super) unsynced: Vec<(PathBuf, Arc<File>)>,
    /// A segment was created since the last commit: the directory needs an fsync.
    pub(super) dir_dirty: bool,
    /// A failed write may have left a partial record the truncate could not remove: the next
    /// push starts a new segment (the scan at open cuts the partial one).
    pub(super) active_broken: bool,
    /// Header and payload are written with one write(2); this is reused between pushes.
    pub(super) scratch: Vec<u8>,
    pub(super) dead_letter: Option<File>,
    /// Size of the dead-letter file (known without a stat per `stats`).
    pub(super) dead_letter_bytes: u64,
    pub(super) last_sync_error: Option<String>,
    /// Budget drops not logged yet, (records, samples) by reason, and when the last line went.
    pub(super) unlogged_drops: [[u64; 2]; 2],
    pub(super) last_drop_log_ns: i64,
}

pub(super) use crate::util::lock;

pub(super) fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

impl Queue {
    /// Opens or creates `dir`. Never fails because of damaged content (see the module doc);
    /// only I/O errors fail it.
    pub fn open(dir: &Path, cfg: QueueConfig) -> Result<(Queue, Recovery), QueueError> {
        let r = recover(dir)?;
        let mut ledger = r.ledger;
        let mut segs = r.segs;
        let index = r.index;
        // A new segment at every open: no append ever lands after a tail the scan judged.
        let first = index.next_seq;
        let (path, file) = create_segment(dir, first)?;
        segs.insert(
            first,
            Seg {
                path,
                file: Arc::new(file),
                len: 0,
            },
        );
        let active_path = dir.join(segment_name(first));
        let mut running = Running {
            cfg,
            index,
            segs,
            dirty: false,
            unsynced: Vec::new(),
            dir_dirty: false,
            active_broken: false,
            scratch: Vec::new(),
            dead_letter: None,
            dead_letter_bytes: std::fs::metadata(dir.join(DEAD_LETTER_FILE)).map_or(0, |m| m.len()),
            last_sync_error: None,
            unlogged_drops: [[0; 2]; 2],
            last_drop_log_ns: i64::MIN,
        };
        running.enforce(now_ns());
        // The open's commit: the cursor and next seq found, and "not clean" until a close.
        ledger.commit(&running.index.ledger_state())?;
        sync_dir(dir)?;
        // Only now that the ledger is durable (and never the new active segment, which may
        // reuse the name of an old one that held nothing).
        for path in r.obsolete.iter().filter(|p| **p != active_path) {
            remove_segment(path);
        }
        let inner = Arc::new(Inner {
            dir: dir.to_path_buf(),
            state: Mutex::new(running),
            commit: Mutex::new(ledger),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let bg = Arc::clone(&inner);
        let syncer = std::thread::Builder::new()
            .name("wasmon-queue-sync".into())
            .spawn(move || bg.sync_loop())
            .map_err(|e| io_err("start the commit thread for", dir, e))?;
        let rec = r.recovery;
        if rec.damaged_records + rec.truncated_tail_bytes > 0 {
            tracing::warn!(dir = %dir.display(), ?rec, "queue opened with damage repaired");
        }
        Ok((
            Queue {
                inner,
                syncer: Some(syncer),
            },
            rec,
        ))
    }

    /// Appends one record; returns its seq once written with write(2).
    pub fn push(
        &self,
        payload: &[u8],
        samples: u32,
        oldest_sample_ns: i64,
    ) -> Result<u64, QueueError> {
        let len = HEADER_LEN as u64 + payload.len() as u64;
        let mut guard = lock(&self.inner.state);
        let s = &mut *guard;
        let limit = s.cfg.max_size.min(HEADER_LEN as u64 + MAX_PAYLOAD);
        if len > limit {
            return Err(QueueError::TooLarge { len, limit });
        }
        let seq = s.index.next_seq;
        let active_len = s.segs.last_key_value().map_or(0, |(_, g)| g.len);
        if s.active_broken || (active_len > 0 && active_len + len > s.cfg.segment_size) {
            s.roll(&self.inner.dir, seq)?;
        }
        let enqueued_ns = now_ns();
        let header = Header {
            payload_len: payload.len() as u32,
            payload_crc: crc32fast::hash(payload),
            seq,
            samples,
            enqueued_ns,
            oldest_sample_ns,
        };
        s.scratch.clear();
        s.scratch.extend_from_slice(&header.encode());
        s.scratch.extend_from_slice(payload);
        let Some((&seg_id, seg)) = s.segs.last_key_value() else {
            return Err(io_err(
                "find the active segment in",
                &self.inner.dir,
                std::io::ErrorKind::NotFound.into(),
            ));
        };
        let offset = seg.len;
        let written = seg.file.write_all_at(&s.scratch, offset);
        if s.scratch.capacity() > SCRATCH_KEEP {
            s.scratch = Vec::new(); // one huge record must not pin its size for good
        }
        if let Err(e) = written {
            // Take back a partial write so the next record lands right after the last intact one.
            if seg.file.set_len(offset).is_err() {
                s.active_broken = true;
            }
            return Err(io_err("append to segment", &seg.path, e));
        }
        let strict = s.cfg.fsync_interval.is_zero();
        // In strict mode a failed fsync still leaves the record written and queued (it is
        // in the file): the error says it may not be durable, not that it is absent.
        let synced = if strict {
            seg.file
                .sync_data()
                .map_err(|e| io_err("fsync segment", &seg.path, e))
        } else {
            Ok(())
        };
        s.dirty |= !strict;
        if let Some(seg) = s.segs.get_mut(&seg_id) {
            seg.len += len;
        }
        s.index.push(Entry {
            seq,
            seg: seg_id,
            offset,
            len,
            samples,
            enqueued_ns,
            oldest_sample_ns,
            state: State::Open,
        });
        s.enforce(enqueued_ns);
        synced.map(|()| seq)
    }

    /// The oldest record not handed out since open, read back from disk; `None` when all are
    /// out. A record whose checksum fails on the way back is counted as damaged and skipped.
    pub fn next(&self) -> Result<Option<Record>, QueueError> {
        loop {
            let (e, path, file) = {
                let mut s = lock(&self.inner.state);
                s.enforce(now_ns());
                let Some(e) = s.index.take_next() else {
                    return Ok(None);
                };
                match s.segs.get(&e.seg) {
                    Some(g) => (e, g.path.clone(), Arc::clone(&g.file)),
                    None => {
                        // Cannot happen (a segment goes only when nothing in it is queued):
                        // count it rather than hand out something unreadable forever.
                        s.index.damaged(e.seq);
                        continue;
                    }
                }
            };
            // Read outside the lock: a cold backlog read must not stall pushes. The segment
            // may be unlinked meanwhile; the open handle still reads it.
            let mut buf = vec![0u8; e.len as usize];
            if let Err(err) = file.read_exact_at(&mut buf, e.offset) {
                lock(&self.inner.state).index.give_back(e.seq);
                return Err(io_err("read record from", &path, err));
            }
            match check_record(buf, &e) {
                Some(payload) => {
                    return Ok(Some(Record {
                        seq: e.seq,
                        samples: e.samples,
                        enqueued_ns: e.enqueued_ns,
                        oldest_sample_ns: e.oldest_sample_ns,
                        payload,
                    }));
                }
                None => {
                    tracing::warn!(path = %path.display(), seq = e.seq, "queue record damaged since open: skipped, counted");
                    lock(&self.inner.state).index.damaged(e.seq);
                }
            }
        }
    }

    /// The destination acknowledged `seq`: counted as sent (once), removed when it reaches the
    /// front. Unknown or already decided seqs are ignored.
    pub fn ack(&self, seq: u64) -> Result<(), QueueError> {
        lock(&self.inner.state).index.ack(seq);
        Ok(())
    }

    /// A send of `seq` failed: `Retry` keeps it with the sender, `Dropped` means the budget
    /// removed it meanwhile (counted as dropped now) or it was decided already.
    pub fn nack(&self, seq: u64) -> Nack {
        lock(&self.inner.state).index.nack(seq)
    }

    /// The sender kept `seq` after a failed send (`nack` said `Retry`) and is about to send it
    /// again: `false` if the budget removed it during the backoff (counted as dropped now) or
    /// it was decided already. Without the check, a record the budget dropped would still be
    /// delivered once the destination is back, in place of newer data the budget kept.
    pub fn still_queued(&self, seq: u64) -> bool {
        self.nack(seq) == Nack::Retry
    }

    /// Writes `payload` to the dead-letter file (fsynced), then counts `seq` as dead-lettered and
    /// removes it. A seq decided already is left alone (nothing written).
    pub fn dead_letter(&self, seq: u64, payload: &[u8], reason: &str) -> Result<(), QueueError> {
        let mut guard = lock(&self.inner.state);
        let s = &mut *guard;
        let Some(samples) = s.index.undecided(seq) else {
            return Ok(());
        };
        let path = self.inner.dir.join(DEAD_LETTER_FILE);
        if s.dead_letter.is_none() {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| io_err("open dead-letter file", &path, e))?;
            s.dead_letter = Some(f);
            sync_dir(&self.inner.dir)?;
        }
        let mut entry = format!(
            "# seq={seq} time={} samples={samples} bytes={} reason={}\n",
            rfc3339(now_ns()),
            payload.len(),
            reason.replace(['\n', '\r'], " ")
        )
        .into_bytes();
        entry.extend_from_slice(payload);
        entry.push(b'\n');
        if let Some(f) = s.dead_letter.as_mut() {
            f.write_all(&entry)
                .and_then(|()| f.sync_data())
                .map_err(|e| io_err("append to dead-letter file", &path, e))?;
        }
        s.dead_letter_bytes += entry.len() as u64;
        tracing::warn!(seq, samples, reason, "queue record dead-lettered");
        s.index.dead_letter(seq);
        Ok(())
    }

    /// New limits; the content is kept (a smaller budget drops the oldest, counted).
    pub fn reconfigure(&self, cfg: QueueConfig) {
        let mut s = lock(&self.inner.state);
        s.cfg = cfg;
        s.enforce(now_ns());
        self.inner.wake.notify_all();
    }

    /// Commits now: every push so far is on disk and every decision in the ledger.
    pub fn sync(&self) -> Result<(), QueueError> {
        self.inner.commit(false)
    }

    pub fn stats(&self) -> QueueStats {
        let mut s = lock(&self.inner.state);
        s.enforce(now_ns());
        let i = &s.index;
        let front = i.front();
        let evicted = i.evicted_samples();
        let disk = s.segs.values().map(|g| g.len).sum::<u64>();
        QueueStats {
            queued_records: i.open[0],
            queued_samples: i.open[1],
            queued_bytes: i.bytes,
            in_flight_records: i.in_flight[0],
            in_flight_samples: i.in_flight[1],
            evicted_in_flight_records: evicted[0],
            evicted_in_flight_samples: evicted[1],
            oldest_enqueued_ns: front.map_or(0, |e| e.enqueued_ns),
            oldest_sample_ns: front.map_or(0, |e| e.oldest_sample_ns),
            disk_bytes: disk + LEDGER_LEN,
            dead_letter_file_bytes: s.dead_letter_bytes,
            pushed_records: i.pushed[0],
            pushed_samples: i.pushed[1],
            sent_records: i.total.sent[0],
            sent_samples: i.total.sent[1],
            dropped_size_records: i.total.dropped_size[0],
            dropped_size_samples: i.total.dropped_size[1],
            dropped_age_records: i.total.dropped_age[0],
            dropped_age_samples: i.total.dropped_age[1],
            dead_lettered_records: i.total.dead_lettered[0],
            dead_lettered_samples: i.total.dead_lettered[1],
            damaged_records: i.damaged[0],
            damaged_samples: i.damaged[1],
            damaged_bytes: i.damaged[2],
            last_sync_error: s.last_sync_error.clone(),
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        {
            // Under the lock, so the wake-up cannot fall between the thread's check and wait.
            let _s = lock(&self.inner.state);
            self.inner.stop.store(true, Ordering::SeqCst);
            self.inner.wake.notify_all();
        }
        if let Some(h) = self.syncer.take() {
            let _ = h.join();
        }
        if let Err(e) = self.inner.commit(true) {
            tracing::warn!(dir = %self.inner.dir.display(), error = %e, "queue: last commit at close failed");
        }
    }
}

impl Running {
    pub(super) fn enforce(&mut self, now: i64) {
        let dropped = self.index.enforce(self.cfg.max_size, self.cfg.max_age, now);
        for (r, [records, samples]) in dropped.iter().enumerate() {
            self.unlogged_drops[r][0] += records;
            self.unlogged_drops[r][1] += samples;
        }
        // Over budget during an outage every push drops one: a log line per drop would bury the
        // log, so the first goes out at once and the rest as sums at most once per interval.
        if self.unlogged_drops != [[0; 2]; 2]
            && now.saturating_sub(self.last_drop_log_ns) >= DROP_LOG_INTERVAL_NS
        {
            for (reason, [records, samples]) in [
                ("size", self.unlogged_drops[0]),
                ("age", self.unlogged_drops[1]),
            ] {
                if records > 0 {
                    tracing::warn!(
                        reason,
                        records,
                        samples,
                        "queue budget exceeded: dropped the oldest records (counted)"
                    );
                }
            }
            self.unlogged_drops = [[0; 2]; 2];
            self.last_drop_log_ns = now;
        }
    }

    /// Starts a new active segment at `first`; the old one joins the next commit's fsyncs.
    fn roll(&mut self, dir: &Path, first: u64) -> Result<(), QueueError> {
        let (path, file) = create_segment(dir, first)?;
        if let Some((_, old)) = self.segs.last_key_value()
            && self.dirty
        {
            self.unsynced
                .push((old.path.clone(), Arc::clone(&old.file)));
        }
        self.segs.insert(
            first,
            Seg {
                path,
                file: Arc::new(file),
                len: 0,
            },
        );
        if self.cfg.fsync_interval.is_zero() {
            // Strict mode: a push's record is durable when it returns, its file name included.
            sync_dir(dir)?;
        } else {
            self.dir_dirty = true;
        }
        self.active_broken = false;
        Ok(())
    }
}

/// Checks a record read back against its index entry; the payload if it is intact.
fn check_record(buf: Vec<u8>, e: &Entry) -> Option<Bytes> {
    let hb: &[u8; HEADER_LEN] = buf.get(..HEADER_LEN)?.try_into().ok()?;
    let h = Header::decode(hb)?;
    let payload = buf.get(HEADER_LEN..)?;
    let ok = h.seq == e.seq
        && h.payload_len as usize == payload.len()
        && crc32fast::hash(payload) == h.payload_crc;
    // The payload is handed out without a copy: the buffer becomes the `Bytes`.
    ok.then(|| Bytes::from(buf).slice(HEADER_LEN..))
}

/// `2026-11-25T06:10:19.123Z` from Unix nanoseconds (UTC).
pub(super) fn rfc3339(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
impl Queue {
    /// A crash as far as the files go (like SIGKILL): stops the commit thread without the
    /// last commit, and leaks the rest so no destructor writes anything.
    pub(super) fn abandon(mut self) {
        {
            let _s = lock(&self.inner.state);
            self.inner.stop.store(true, Ordering::SeqCst);
            self.inner.wake.notify_all();
        }
        if let Some(h) = self.syncer.take() {
            let _ = h.join();
        }
        lock(&self.inner.commit).unlock();
        std::mem::forget(self);
    }

    /// Applies the budget as if the clock read `now` (age tests without sleeping).
    pub(super) fn enforce_at(&self, now: i64) {
        lock(&self.inner.state).enforce(now);
    }
}
