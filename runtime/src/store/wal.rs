//! Write-ahead log with group commit. Writers encode samples into a `WalBatch` and append it
//! as one checksummed frame to a shared pending buffer; a dedicated thread writes whatever is
//! pending and fdatasyncs once for all of it, so concurrent writers share one fsync. Files are
//! `wal-<generation>.log`; a checkpoint rotates to a new generation and deletes older ones once
//! the snapshot is durable. Replay stops at the first torn or corrupt frame of a file.
//!
//! Frame: `u32 len | u32 crc32(payload) | payload` (little endian). A payload is a sequence
//! of records that set context once for the samples after them, so a sample of a run with
//! one level and timestamp (a body is mostly that) costs 13 bytes and no strings (format 2,
//! `WMWAL002`):
//! - `1 | u8 depth | (u16 len, name)*depth`: the level of the following samples;
//! - `2 | u32 id | u16 len | name`: names the metric `id` stands for within this frame;
//! - `4 | i64 ts`: the timestamp of the following samples;
//! - `3 | u32 id | f64 value`: a sample.
//!
//! Format 1 (`WMWAL001`, still replayed) had one self-contained entry per sample:
//! `u8 depth | (u16 len, bytes)*depth | u16 len, metric | i64 ts | f64 value`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::{Store, StoreError, lock};

const MAGIC: &[u8; 8] = b"WMWAL002";
const MAGIC_V1: &[u8; 8] = b"WMWAL001";
const REC_PATH: u8 = 1;
const REC_METRIC: u8 = 2;
const REC_SAMPLE: u8 = 3;
const REC_TIME: u8 = 4;
const HEADER_LEN: usize = 16;
/// A frame larger than this is treated as corruption (a body is limited far below it).
const MAX_FRAME: usize = 1 << 30;

thread_local! {
    /// The last appended batch's buffer on this thread, reused by the next
    /// [`WalBatch::with_capacity`]: an ingest's batch is hundreds of KiB, and a fresh one
    /// page-faults its way through every body.
    static SPARE: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}
/// Buffers above this are freed rather than kept per thread.
const MAX_SPARE: usize = 8 << 20;
/// Buffers below this are not worth keeping (a single `Store::write`).
const SPARE_MIN: usize = 4096;

/// Samples encoded for one WAL append (one frame).
#[derive(Default)]
pub struct WalBatch {
    buf: Vec<u8>,
    pub(crate) samples: u64,
    /// Address of the encoded path the last path record wrote: consecutive samples of one
    /// level share it. Levels are never dropped while their store lives, and the batch is
    /// reset whenever it is handed to the WAL, so an address cannot stand for another level.
    path: usize,
    /// Metric ids already named in this frame (bitset).
    named: Vec<u64>,
    /// The timestamp the last time record set (`None` before the first).
    ts: Option<i64>,
}

impl WalBatch {
    /// A batch with room for `bytes` of records (a 13-byte sample per ~90-byte line: growing
    /// from empty would copy and page-fault the buffer several times per body).
    pub fn with_capacity(bytes: usize) -> WalBatch {
        let mut buf = SPARE.take();
        buf.reserve(bytes);
        WalBatch {
            buf,
            ..WalBatch::default()
        }
    }

    /// Keeps the (now empty) buffer for this thread's next batch, unless it is huge.
    fn recycle(&mut self) {
        if self.buf.capacity() <= MAX_SPARE && self.buf.capacity() > SPARE_MIN {
            self.buf.clear();
            SPARE.set(std::mem::take(&mut self.buf));
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, path: &[u8], id: u32, metric: &str, ts: i64, value: f64) {
        if path.as_ptr() as usize != self.path {
            self.set_path(path);
        }
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        if self.named.get(word).is_none_or(|w| w & bit == 0) {
            self.name(id, metric);
        }
        if self.ts != Some(ts) {
            self.set_time(ts);
        }
        let mut rec = [0u8; 13];
        rec[0] = REC_SAMPLE;
        rec[1..5].copy_from_slice(&id.to_le_bytes());
        rec[5..].copy_from_slice(&value.to_le_bytes());
        self.buf.extend_from_slice(&rec);
    }

    #[cold]
    fn set_time(&mut self, ts: i64) {
        self.ts = Some(ts);
        self.buf.push(REC_TIME);
        self.buf.extend_from_slice(&ts.to_le_bytes());
    }

    #[cold]
    fn set_path(&mut self, path: &[u8]) {
        self.path = path.as_ptr() as usize;
        self.buf.push(REC_PATH);
        self.buf.extend_from_slice(path);
    }

    #[cold]
    fn name(&mut self, id: u32, metric: &str) {
        let word = id as usize / 64;
        if self.named.len() <= word {
            self.named.resize(word + 1, 0);
        }
        self.named[word] |= 1 << (id % 64);
        self.buf.push(REC_METRIC);
        self.buf.extend_from_slice(&id.to_le_bytes());
        self.buf
            .extend_from_slice(&(metric.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(metric.as_bytes());
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.path = 0;
        self.named.fill(0);
        self.ts = None;
    }
}

pub(crate) fn wal_file(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("wal-{generation:020}.log"))
}

/// Generations of the WAL files in `dir`, ascending.
pub(crate) fn list(dir: &Path) -> Vec<u64> {
    super::generations(dir, "wal-", ".log")
}

struct State {
    pending: Vec<u8>,
    appended: u64,
    rotate: Option<(u64, tokio::sync::oneshot::Sender<Result<(), String>>)>,
    shutdown: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    durable: tokio::sync::watch::Sender<u64>,
    failed: AtomicBool,
    fsyncs: AtomicU64,
}

pub(crate) struct Wal {
    shared: Arc<Shared>,
    generation: AtomicU64,
    thread: Option<JoinHandle<()>>,
}

impl Wal {
    /// Starts a new generation after `after_generation` (and any file already present).
    pub(crate) fn open(dir: &Path, after_generation: u64) -> Result<Wal, StoreError> {
        let generation = list(dir).last().copied().unwrap_or(0).max(after_generation) + 1;
        let file = create(dir, generation)?;
        let (durable, _) = tokio::sync::watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pending: Vec::new(),
                appended: 0,
                rotate: None,
                shutdown: false,
            }),
            wake: Condvar::new(),
            durable,
            failed: AtomicBool::new(false),
            fsyncs: AtomicU64::new(0),
        });
        let s = shared.clone();
        let dir = dir.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("wal-sync".into())
            .spawn(move || sync_loop(s, file, dir))
            .map_err(|e| StoreError::Wal(e.to_string()))?;
        Ok(Wal {
            shared,
            generation: AtomicU64::new(generation),
            thread: Some(thread),
        })
    }

    pub(crate) fn append(&self, batch: &mut WalBatch) -> Result<u64, StoreError> {
        if self.shared.failed.load(Ordering::Relaxed) {
            return Err(StoreError::Wal("an earlier write or fsync failed".into()));
        }
        let crc = crc32fast::hash(&batch.buf);
        let seq = {
            let mut st = lock(&self.shared.state);
            st.pending
                .extend_from_slice(&(batch.buf.len() as u32).to_le_bytes());
            st.pending.extend_from_slice(&crc.to_le_bytes());
            st.pending.extend_from_slice(&batch.buf);
            st.appended += 1;
            st.appended
        };
        self.shared.wake.notify_one();
        batch.clear();
        batch.recycle();
        Ok(seq)
    }

    pub(crate) fn appended(&self) -> u64 {
        lock(&self.shared.state).appended
    }

    pub(crate) async fn wait_durable(&self, seq: u64) -> Result<(), StoreError> {
        let mut rx = self.shared.durable.subscribe();
        let failed = &self.shared.failed;
        let r = rx
            .wait_for(|d| *d >= seq || failed.load(Ordering::Relaxed))
            .await;
        if r.is_err() || failed.load(Ordering::Relaxed) {
            return Err(StoreError::Wal("write or fsync failed".into()));
        }
        Ok(())
    }

    pub(crate) fn fsyncs(&self) -> u64 {
        self.shared.fsyncs.load(Ordering::Relaxed)
    }

    /// Switches to a new generation: everything appended before this call lands in (and is
    /// synced to) the old file, everything after in the new one. Returns the new generation.
    pub(crate) async fn rotate(&self) -> Result<u64, StoreError> {
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let (tx, rx) = tokio::sync::oneshot::channel();
        lock(&self.shared.state).rotate = Some((generation, tx));
        self.shared.wake.notify_one();
        match rx.await {
            Ok(Ok(())) => Ok(generation),
            Ok(Err(e)) => Err(StoreError::Wal(e)),
            Err(_) => Err(StoreError::Wal("sync thread gone".into())),
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        lock(&self.shared.state).shutdown = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn create(dir: &Path, generation: u64) -> Result<File, StoreError> {
    let path = wal_file(dir, generation);
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| StoreError::io(&path, e))?;
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(MAGIC);
    header[8..].copy_from_slice(&generation.to_le_bytes());
    f.write_all(&header).map_err(|e| StoreError::io(&path, e))?;
    f.sync_all().map_err(|e| StoreError::io(&path, e))?;
    sync_dir(dir);
    Ok(f)
}

/// Makes a create/rename durable. Best effort: some filesystems refuse fsync on directories.
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

fn sync_loop(shared: Arc<Shared>, mut file: File, dir: PathBuf) {
    let mut spare = Vec::new();
    loop {
        let (seq, rotate, shutdown) = {
            let mut st = lock(&shared.state);
            while st.pending.is_empty() && st.rotate.is_none() && !st.shutdown {
                st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            std::mem::swap(&mut st.pending, &mut spare);
            (st.appended, st.rotate.take(), st.shutdown)
        };
        if !spare.is_empty() {
            let r = file.write_all(&spare).and_then(|_| file.sync_data());
            spare.clear();
            if let Err(e) = r {
                tracing::error!(error = %e, "WAL write failed; further writes are refused");
                shared.failed.store(true, Ordering::Relaxed);
            }
            shared.fsyncs.fetch_add(1, Ordering::Relaxed);
        }
        shared.durable.send_replace(seq);
        if let Some((generation, reply)) = rotate {
            let r = create(&dir, generation)
                .map(|f| file = f)
                .map_err(|e| e.to_string());
            let _ = reply.send(r);
        }
        if shutdown {
            return;
        }
    }
}

/// Replays WAL generations `>= from_generation` into `store`. A torn/corrupt tail is logged,
/// counted and cut off; everything before it is applied. Returns the last generation seen.
pub(crate) fn replay(store: &Store, dir: &Path, from_generation: u64) -> u64 {
    let mut last = from_generation;
    for generation in list(dir) {
        last = last.max(generation);
        if generation < from_generation {
            continue;
        }
        let path = wal_file(dir, generation);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read WAL file");
                store.counters.wal_damage.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        let (good, damage) = replay_bytes(store, &bytes);
        if let Some(reason) = damage {
            tracing::warn!(path = %path.display(), offset = good, reason, "damaged WAL tail skipped");
            store.counters.wal_damage.fetch_add(1, Ordering::Relaxed);
            // Cut the damage so it is not reported again; the bytes after it cannot be framed.
            if let Ok(f) = OpenOptions::new().write(true).open(&path) {
                let _ = f.set_len(good.max(HEADER_LEN) as u64);
            }
        }
    }
    last
}

/// Applies the frames of one file; returns the length of the intact prefix and the damage.
fn replay_bytes(store: &Store, bytes: &[u8]) -> (usize, Option<&'static str>) {
    if bytes.len() < HEADER_LEN {
        return (0, Some("bad header"));
    }
    let v1 = match &bytes[..8] {
        m if m == MAGIC => false,
        m if m == MAGIC_V1 => true,
        _ => return (0, Some("bad header")),
    };
    let mut pos = HEADER_LEN;
    while pos < bytes.len() {
        let Some(head) = bytes.get(pos..pos + 8) else {
            return (pos, Some("torn frame header"));
        };
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        if len > MAX_FRAME {
            return (pos, Some("implausible frame length"));
        }
        let Some(payload) = bytes.get(pos + 8..pos + 8 + len) else {
            return (pos, Some("torn frame"));
        };
        if crc32fast::hash(payload) != crc {
            return (pos, Some("checksum mismatch"));
        }
        let ok = if v1 {
            decode_entries(payload, |path, metric, ts, v| {
                // Rejections (too old after retention, refused metric) are not damage.
                if store.apply(path, metric, ts, v).is_ok() {
                    store
                        .counters
                        .wal_records_replayed
                        .fetch_add(1, Ordering::Relaxed);
                }
            })
        } else {
            replay_records(store, payload)
        };
        if ok.is_none() {
            return (pos, Some("undecodable frame"));
        }
        pos += 8 + len;
    }
    (pos, None)
}

/// The next `n` bytes of a record, consumed (`None` past its end). Snapshots use it too.
pub(super) fn take<'a>(p: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (a, b) = (p.get(..n)?, p.get(n..)?);
    *p = b;
    Some(a)
}

/// A `u16`-length-prefixed UTF-8 string of a record, consumed.
pub(super) fn string<'a>(p: &mut &'a [u8]) -> Option<&'a str> {
    let len = u16::from_le_bytes(take(p, 2)?.try_into().ok()?) as usize;
    std::str::from_utf8(take(p, len)?).ok()
}

fn le<const N: usize>(p: &mut &[u8]) -> Option<[u8; N]> {
    take(p, N)?.try_into().ok()
}

/// Applies a format-2 payload; `None` if it is malformed (only possible with a colliding
/// checksum). A sample whose level or metric the store refuses now is skipped, not damage.
fn replay_records(store: &Store, mut p: &[u8]) -> Option<()> {
    let mut level: Option<Arc<super::Level>> = None;
    let mut metrics: super::FastMap<u32, Option<super::MetricInfo>> = Default::default();
    let mut path: Vec<&str> = Vec::with_capacity(4);
    let mut have_path = false;
    let mut time = None;
    while let Some((&kind, rest)) = p.split_first() {
        p = rest;
        match kind {
            REC_PATH => {
                let depth = take(&mut p, 1)?[0] as usize;
                path.clear();
                for _ in 0..depth {
                    path.push(string(&mut p)?);
                }
                level = store.level(&path).ok();
                have_path = true;
            }
            REC_METRIC => {
                let id = u32::from_le_bytes(le(&mut p)?);
                let name = string(&mut p)?;
                metrics.insert(id, store.metric(name).ok());
            }
            REC_TIME => time = Some(i64::from_le_bytes(le(&mut p)?)),
            REC_SAMPLE => {
                let id = u32::from_le_bytes(le(&mut p)?);
                let v = f64::from_le_bytes(le(&mut p)?);
                // A sample before its path, name or time record is malformed.
                let m = *metrics.get(&id)?;
                let ts = time?;
                if !have_path {
                    return None;
                }
                if let (Some(l), Some(m)) = (&level, m)
                    && l.write(m, ts, v, &store.pool).is_ok()
                {
                    store
                        .counters
                        .wal_records_replayed
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => return None,
        }
    }
    Some(())
}

/// Decodes a format-1 payload; `None` if it is malformed.
fn decode_entries(mut p: &[u8], mut f: impl FnMut(&[&str], &str, i64, f64)) -> Option<()> {
    let mut path: Vec<&str> = Vec::with_capacity(4);
    while !p.is_empty() {
        let depth = take(&mut p, 1)?[0] as usize;
        path.clear();
        for _ in 0..depth {
            path.push(string(&mut p)?);
        }
        let metric = string(&mut p)?;
        let ts = i64::from_le_bytes(take(&mut p, 8)?.try_into().ok()?);
        let v = f64::from_le_bytes(take(&mut p, 8)?.try_into().ok()?);
        f(&path, metric, ts, v);
    }
    Some(())
}

impl Store {
    /// Number of fdatasync calls the WAL made (compare with writes to see group commit).
    pub fn wal_fsyncs(&self) -> u64 {
        self.wal.as_ref().map(|w| w.fsyncs()).unwrap_or(0)
    }

    pub(crate) async fn rotate_wal(&self) -> Result<Option<u64>, StoreError> {
        match &self.wal {
            Some(w) => w.rotate().await.map(Some),
            None => Ok(None),
        }
    }
}
