//! The ledger: where removal stands, and the decided counts that go with it.
//!
//! One file, `ledger`, of two fixed slots written alternately in place (pwrite + fdatasync),
//! each with its own CRC and a generation. A write torn by a crash damages at most the slot being
//! written, and the other still holds the previous commit; open takes the valid slot with the
//! highest generation. Neither valid: the queue falls back to its segments (everything found is
//! handed out again, counts restart at zero) and says so; it never refuses to start.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{QueueError, io_err};

pub(super) const LEDGER_FILE: &str = "ledger";
/// "WQL1": wasmon queue ledger, format 1.
const SLOT_MAGIC: [u8; 4] = *b"WQL1";
/// How long `open` waits for another holder of the directory's lock to let go.
const LOCK_WAIT: Duration = Duration::from_secs(1);
const LOCK_RETRY: Duration = Duration::from_millis(5);
/// The file's size once both slots were written.
pub(super) const LEDGER_LEN: u64 = (SLOT_STRIDE + SLOT_LEN) as u64;
/// Room for the fields plus growth.
const SLOT_LEN: usize = 256;
/// Slot 1 starts a page after slot 0, so the slots never share a sector or a page: a torn
/// write damages one slot at most.
const SLOT_STRIDE: usize = 4096;
const FLAG_CLEAN: u32 = 1;

/// Counts of decided records (records, samples), persisted so totals survive restarts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Counts {
    pub sent: [u64; 2],
    pub dropped_size: [u64; 2],
    pub dropped_age: [u64; 2],
    pub dead_lettered: [u64; 2],
}

impl Counts {
    pub fn samples(&self) -> u64 {
        self.sent[1] + self.dropped_size[1] + self.dropped_age[1] + self.dead_lettered[1]
    }
    pub fn records(&self) -> u64 {
        self.sent[0] + self.dropped_size[0] + self.dropped_age[0] + self.dead_lettered[0]
    }
    fn fields(&self) -> [u64; 8] {
        let c = self;
        [
            c.sent[0],
            c.sent[1],
            c.dropped_size[0],
            c.dropped_size[1],
            c.dropped_age[0],
            c.dropped_age[1],
            c.dead_lettered[0],
            c.dead_lettered[1],
        ]
    }
    fn from_fields(f: [u64; 8]) -> Counts {
        Counts {
            sent: [f[0], f[1]],
            dropped_size: [f[2], f[3]],
            dropped_age: [f[4], f[5]],
            dead_lettered: [f[6], f[7]],
        }
    }
}

/// One commit of the ledger.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct LedgerState {
    /// Every record with a seq below this is removed (sent, dropped or dead-lettered).
    pub cursor: u64,
    /// No seq below this may be handed out again to a new record.
    pub next_seq: u64,
    /// Written by a clean close: no push after this commit can have been lost.
    pub clean: bool,
    /// Decisions for the records below `cursor`.
    pub counts: Counts,
}

/// How the ledger was found at open.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum LedgerFound {
    /// No ledger (or never written): a new queue, or one whose ledger was deleted.
    #[default]
    Missing,
    /// Both slots valid, the newer one used.
    Intact,
    /// One slot damaged (a torn write), the other used: records removed since that commit are
    /// handed out again.
    OneSlotDamaged,
    /// Both slots damaged: everything in the segments is handed out again, counts restart.
    Lost,
}

pub(super) struct Ledger {
    path: PathBuf,
    file: File,
    generation: u64,
    last: Option<LedgerState>,
}

impl Ledger {
    /// Opens (creating if missing) the ledger in `dir` and reads the newest valid slot.
    pub fn open(dir: &Path) -> Result<(Ledger, Option<LedgerState>, LedgerFound), QueueError> {
        let path = dir.join(LEDGER_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io_err("open ledger", &path, e))?;
        lock_exclusive(&file, dir, &path)?;
        let mut buf = vec![0u8; SLOT_STRIDE + SLOT_LEN];
        let len = file
            .metadata()
            .map_err(|e| io_err("stat ledger", &path, e))?
            .len();
        let n = (len as usize).min(buf.len());
        file.read_exact_at(&mut buf[..n], 0)
            .map_err(|e| io_err("read ledger", &path, e))?;
        if len < LEDGER_LEN {
            // Real zeros, not a hole: a slot written later must not need a block from a full
            // disk, or removal (which frees the space) could never be committed.
            let fill = vec![0u8; (LEDGER_LEN - len) as usize];
            file.write_all_at(&fill, len)
                .and_then(|()| file.sync_all())
                .map_err(|e| io_err("allocate ledger", &path, e))?;
            // The file's name too, on the first open.
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_err("fsync directory", dir, e))?;
        }
        let slots = [decode(&buf[..SLOT_LEN]), decode(&buf[SLOT_STRIDE..])];
        // A slot never written (a new file, or slot 0 before the second commit) is all zeros.
        let empty = |b: &[u8]| b.iter().all(|&x| x == 0);
        let damaged = [&buf[..SLOT_LEN], &buf[SLOT_STRIDE..]]
            .iter()
            .zip(&slots)
            .filter(|(b, s)| s.is_none() && !empty(b))
            .count();
        let valid = slots.iter().flatten().count();
        let found = match (valid, damaged) {
            (0, 0) => LedgerFound::Missing,
            (0, _) => LedgerFound::Lost,
            (_, 0) => LedgerFound::Intact,
            _ => LedgerFound::OneSlotDamaged,
        };
        let best = slots.into_iter().flatten().max_by_key(|(g, _)| *g);
        let ledger = Ledger {
            path,
            file,
            generation: best.map_or(0, |(g, _)| g),
            last: None,
        };
        Ok((ledger, best.map(|(_, s)| s), found))
    }

    /// Lets another `open` in this process take the directory (tests of a crash: the
    /// abandoned queue's descriptors stay open).
    #[cfg(test)]
    pub fn unlock(&self) {
        // SAFETY: as in `open`.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `state` durably into the slot not holding the last commit. A no-op when `state`
    /// is what was last written.
    pub fn commit(&mut self, state: &LedgerState) -> Result<(), QueueError> {
        if self.last.as_ref() == Some(state) {
            return Ok(());
        }
        let generation = self.generation + 1;
        let slot = encode(generation, state);
        let off = (generation % 2) * SLOT_STRIDE as u64;
        self.file
            .write_all_at(&slot, off)
            .map_err(|e| io_err("write ledger", &self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| io_err("fsync ledger", &self.path, e))?;
        self.generation = generation;
        self.last = Some(*state);
        Ok(())
    }
}

/// One queue per directory: a second writer would reuse seqs and truncate the first's active
/// segment. flock is per open file, so this holds within one process too, and the kernel drops
/// it when the process dies (no stale lock after SIGKILL). A process that forks (to exec
/// something) holds a copy until its exec, so a lock just released can stay taken for a moment:
/// retried for up to [`LOCK_WAIT`] before giving up.
fn lock_exclusive(file: &File, dir: &Path, path: &Path) -> Result<(), QueueError> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        // SAFETY: flock on a descriptor `file` owns; no memory is passed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::WouldBlock {
            return Err(io_err("lock ledger", path, e));
        }
        if Instant::now() >= deadline {
            return Err(QueueError::Locked {
                dir: dir.to_path_buf(),
            });
        }
        std::thread::sleep(LOCK_RETRY);
    }
}

fn encode(generation: u64, s: &LedgerState) -> [u8; SLOT_LEN] {
    let mut b = [0u8; SLOT_LEN];
    b[0..4].copy_from_slice(&SLOT_MAGIC);
    b[8..16].copy_from_slice(&generation.to_le_bytes());
    b[16..24].copy_from_slice(&s.cursor.to_le_bytes());
    b[24..32].copy_from_slice(&s.next_seq.to_le_bytes());
    let flags = if s.clean { FLAG_CLEAN } else { 0 };
    b[32..36].copy_from_slice(&flags.to_le_bytes());
    for (i, v) in s.counts.fields().iter().enumerate() {
        b[40 + 8 * i..48 + 8 * i].copy_from_slice(&v.to_le_bytes());
    }
    let crc = crc32fast::hash(&b[8..]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode(b: &[u8]) -> Option<(u64, LedgerState)> {
    let u64_at = |o: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(a)
    };
    let crc = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    if b[0..4] != SLOT_MAGIC || crc != crc32fast::hash(&b[8..SLOT_LEN]) {
        return None;
    }
    let flags = u32::from_le_bytes([b[32], b[33], b[34], b[35]]);
    let mut f = [0u64; 8];
    for (i, v) in f.iter_mut().enumerate() {
        *v = u64_at(40 + 8 * i);
    }
    let state = LedgerState {
        cursor: u64_at(16),
        next_seq: u64_at(24),
        clean: flags & FLAG_CLEAN != 0,
        counts: Counts::from_fields(f),
    };
    Some((u64_at(8), state))
}
