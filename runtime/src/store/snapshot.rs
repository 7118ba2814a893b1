//! Snapshots (checkpoints): the whole tree in a compact checksummed binary file, written to a
//! temp file, fsynced and renamed; restore at start; archiving of superseded snapshots
//! (gzip) and WAL truncation once a snapshot is durable.
//!
//! File `snap-<generation>.bin`: `"WMSNAP02" | u64 generation | i64 created`, then frames
//! `u32 len | u32 crc32(payload) | payload`, one per series:
//! `path (as in the WAL) | u16 len, metric | i64 step | u32 buffers | (i64 block | u16 lo |
//! u16 hi | u32 len | len bytes: the values as `codec` encodes a closed buffer)*`; a
//! zero-length frame ends a complete file. The snapshot of generation G holds everything
//! written before WAL generation G was started. `WMSNAP01` files (the values as `(hi-lo)` raw
//! f64 instead of the length and the encoding) are still read.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::buffer::{BUFFER_CAP, Chain, Closed};
use super::codec;
use super::wal::{self, string, sync_dir, take};
use super::{Store, StoreError, walk};

const MAGIC: &[u8; 8] = b"WMSNAP02";
/// The raw format before buffers were encoded; restored, never written.
const MAGIC_RAW: &[u8; 8] = b"WMSNAP01";
const HEADER_LEN: usize = 24;

fn snap_file(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("snap-{generation:020}.bin"))
}

/// Generations of the snapshots in `dir`, ascending.
pub fn list(dir: &Path) -> Vec<u64> {
    super::generations(dir, "snap-", ".bin")
}

impl Store {
    /// Writes a snapshot now (rotating the WAL first), then archives older snapshots and
    /// deletes the WAL generations the snapshot covers. Returns the snapshot's path.
    pub async fn checkpoint(self: &Arc<Self>) -> Result<PathBuf, StoreError> {
        let dir = self
            .data_dir
            .clone()
            .ok_or_else(|| StoreError::Wal("memory-only store has no data directory".into()))?;
        let _guard = self.checkpoint_lock.lock().await;
        // Rotate before reading memory: a value missing from the snapshot was written to
        // memory after this point, so its WAL record is in the new generation.
        let generation = match self.rotate_wal().await? {
            Some(g) => g,
            None => list(&dir).last().copied().unwrap_or(0) + 1,
        };
        let store = self.clone();
        let d = dir.clone();
        let path = tokio::task::spawn_blocking(move || store.write_snapshot(&d, generation))
            .await
            .map_err(|e| StoreError::Wal(format!("snapshot task failed: {e}")))??;
        self.counters
            .snapshots_written
            .fetch_add(1, Ordering::Relaxed);
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.retire_before(&dir, generation))
            .await
            .map_err(|e| StoreError::Wal(format!("archive task failed: {e}")))?;
        Ok(path)
    }

    fn write_snapshot(&self, dir: &Path, generation: u64) -> Result<PathBuf, StoreError> {
        let final_path = snap_file(dir, generation);
        let tmp = final_path.with_extension("bin.tmp");
        let io = |e| StoreError::io(&tmp, e);
        let mut w = BufWriter::with_capacity(1 << 20, File::create(&tmp).map_err(io)?);
        w.write_all(MAGIC).map_err(io)?;
        w.write_all(&generation.to_le_bytes()).map_err(io)?;
        w.write_all(&chrono::Utc::now().timestamp().to_le_bytes())
            .map_err(io)?;
        let names = self.registry.all_names();
        let mut payload = Vec::new();
        let mut frames = Vec::new();
        let mut result = Ok(());
        let mut path = Vec::new();
        walk(&self.root, &mut path, &mut |_, level| {
            if result.is_err() {
                return;
            }
            // Encode under the level's lock, write after releasing it: writers spin on it.
            frames.clear();
            for chain in level.metrics.lock().iter() {
                payload.clear();
                encode_series(
                    &mut payload,
                    &level.wal_path,
                    &self.registry.name_of(&names, chain.id),
                    chain,
                );
                write_frame(&mut frames, &payload).expect("writing to a Vec cannot fail");
            }
            if let Err(e) = w.write_all(&frames) {
                result = Err(e);
            }
        });
        result.map_err(io)?;
        write_frame(&mut w, &[]).map_err(io)?;
        let f = w.into_inner().map_err(|e| io(e.into_error()))?;
        f.sync_all().map_err(io)?;
        drop(f);
        std::fs::rename(&tmp, &final_path).map_err(io)?;
        sync_dir(dir);
        Ok(final_path)
    }

    /// Archives (or deletes) snapshots older than `generation` and deletes covered WAL files.
    fn retire_before(&self, dir: &Path, generation: u64) {
        let archive = &self.config.archive;
        let archive_dir = dir.join(&archive.directory);
        for g in list(dir).into_iter().filter(|g| *g < generation) {
            let src = snap_file(dir, g);
            if archive.enabled
                && let Err(e) = compress(&src, &archive_dir, archive.compression_level)
            {
                tracing::warn!(path = %src.display(), error = %e, "archiving snapshot failed");
                continue; // keep it rather than lose it
            }
            let _ = std::fs::remove_file(&src);
        }
        for g in wal::list(dir).into_iter().filter(|g| *g < generation) {
            let _ = std::fs::remove_file(wal::wal_file(dir, g));
        }
        if archive.enabled && !archive.keep_for.is_zero() {
            prune(&archive_dir, archive.keep_for);
        }
    }
}

fn write_frame(w: &mut impl Write, payload: &[u8]) -> std::io::Result<()> {
    w.write_all(&(payload.len() as u32).to_le_bytes())?;
    w.write_all(&crc32fast::hash(payload).to_le_bytes())?;
    w.write_all(payload)
}

fn encode_series(out: &mut Vec<u8>, path: &[u8], metric: &str, c: &Chain) {
    out.extend_from_slice(path);
    out.extend_from_slice(&(metric.len() as u16).to_le_bytes());
    out.extend_from_slice(metric.as_bytes());
    // Step in the low 32 bits, the grid's phase in the high 32: a snapshot written before
    // chains had a phase reads as phase 0, the absolute grid those chains were on.
    let step_phase = c.step() | c.phase() << 32;
    out.extend_from_slice(&step_phase.to_le_bytes());
    out.extend_from_slice(&(c.buffer_count() as u32).to_le_bytes());
    let (older, head) = c.parts();
    let mut put = |block: i32, lo: u16, hi: u16, bytes: &[u8]| {
        out.extend_from_slice(&(block as i64).to_le_bytes());
        out.extend_from_slice(&lo.to_le_bytes());
        out.extend_from_slice(&hi.to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    };
    for b in older {
        put(b.block, b.lo, b.hi, &b.encoded());
    }
    // The open block whole (its frozen part and raw tail): one buffer in the file.
    let mut page = [0f64; BUFFER_CAP];
    let lo = c.open_values(&mut page);
    let mut enc = Vec::new();
    codec::encode(&page[lo as usize..head.hi as usize], &mut enc);
    put(head.block, lo, head.hi, &enc);
}

fn compress(src: &Path, archive_dir: &Path, level: u32) -> std::io::Result<()> {
    std::fs::create_dir_all(archive_dir)?;
    let name = src
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string();
    let dst = archive_dir.join(format!("{name}.gz"));
    let tmp = archive_dir.join(format!("{name}.gz.tmp"));
    let mut input = File::open(src)?;
    let out = File::create(&tmp)?;
    let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::new(level.min(9)));
    std::io::copy(&mut input, &mut enc)?;
    enc.finish()?.sync_all()?;
    std::fs::rename(&tmp, &dst)?;
    sync_dir(archive_dir);
    Ok(())
}

fn prune(archive_dir: &Path, keep: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(archive_dir) else {
        return;
    };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > keep);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Restores the newest readable snapshot and replays the WAL after it. Returns the newest
/// generation seen, after which the new WAL generation starts.
pub(crate) fn restore(store: &Store, dir: &Path) -> Result<u64, StoreError> {
    let _ = std::fs::read_dir(dir).map_err(|e| StoreError::io(dir, e))?;
    let mut from_generation = 0;
    for g in list(dir).into_iter().rev() {
        let path = snap_file(dir, g);
        match std::fs::read(&path) {
            Ok(bytes) => match load(store, &bytes) {
                Ok(None) => {
                    from_generation = g;
                    break;
                }
                Ok(Some((offset, reason))) => {
                    tracing::warn!(path = %path.display(), offset, reason,
                        "damaged snapshot: restored the series before the damage");
                    store
                        .counters
                        .snapshot_damage
                        .fetch_add(1, Ordering::Relaxed);
                    from_generation = g;
                    break;
                }
                Err(reason) => {
                    tracing::warn!(path = %path.display(), reason, "unreadable snapshot skipped");
                    store
                        .counters
                        .snapshot_damage
                        .fetch_add(1, Ordering::Relaxed);
                }
            },
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read snapshot");
                store
                    .counters
                    .snapshot_damage
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    let last_wal = wal::replay(store, dir, from_generation);
    Ok(last_wal.max(list(dir).last().copied().unwrap_or(0)))
}

/// Loads one snapshot. `Err` if the header is unusable; `Ok(Some(damage))` if it stops early.
fn load(store: &Store, bytes: &[u8]) -> Result<Option<(usize, &'static str)>, &'static str> {
    if bytes.len() < HEADER_LEN || (&bytes[..8] != MAGIC && &bytes[..8] != MAGIC_RAW) {
        return Err("bad header");
    }
    let raw = &bytes[..8] == MAGIC_RAW;
    let mut pos = HEADER_LEN;
    loop {
        let Some(head) = bytes.get(pos..pos + 8) else {
            return Ok(Some((pos, "truncated (no end marker)")));
        };
        let len = u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        let Some(payload) = bytes.get(pos + 8..pos + 8 + len) else {
            return Ok(Some((pos, "torn frame")));
        };
        if crc32fast::hash(payload) != crc {
            return Ok(Some((pos, "checksum mismatch")));
        }
        if len == 0 {
            return Ok(if pos + 8 == bytes.len() {
                None
            } else {
                Some((pos, "trailing bytes"))
            });
        }
        if decode_series(store, payload, raw).is_none() {
            return Ok(Some((pos, "undecodable series")));
        }
        pos += 8 + len;
    }
}

/// One series' frame; `raw`: the `WMSNAP01` form (raw f64 values).
fn decode_series(store: &Store, mut p: &[u8], raw: bool) -> Option<()> {
    let depth = take(&mut p, 1)?[0] as usize;
    let mut path = Vec::with_capacity(depth);
    for _ in 0..depth {
        path.push(string(&mut p)?);
    }
    let metric = string(&mut p)?;
    let step_phase = u64::from_le_bytes(take(&mut p, 8)?.try_into().ok()?);
    let n = u32::from_le_bytes(take(&mut p, 4)?.try_into().ok()?) as usize;
    let freq = u16::try_from(step_phase & u64::from(u32::MAX)).ok()?;
    let phase = u16::try_from(step_phase >> 32).ok()?;
    if n == 0 {
        return None;
    }
    let mut older: Vec<Closed> = Vec::with_capacity(n.min(1 << 16) - 1);
    let mut head = None;
    let mut values = [0f64; BUFFER_CAP];
    let mut encoded = Vec::new();
    let mut prev = None;
    for i in 0..n {
        let block = i64::from_le_bytes(take(&mut p, 8)?.try_into().ok()?);
        let block = i32::try_from(block).ok()?;
        let lo = u16::from_le_bytes(take(&mut p, 2)?.try_into().ok()?);
        let hi = u16::from_le_bytes(take(&mut p, 2)?.try_into().ok()?);
        if lo >= hi || hi as usize > BUFFER_CAP || prev.is_some_and(|b| b >= block) {
            return None;
        }
        prev = Some(block);
        let len = (hi - lo) as usize;
        let bytes = if raw {
            let src = take(&mut p, len * 8)?;
            for (v, c) in values.iter_mut().zip(src.chunks_exact(8)) {
                *v = f64::from_le_bytes(c.try_into().ok()?);
            }
            encoded.clear();
            codec::encode(&values[..len], &mut encoded);
            &encoded[..]
        } else {
            let l = u32::from_le_bytes(take(&mut p, 4)?.try_into().ok()?) as usize;
            take(&mut p, l)?
        };
        if i + 1 < n {
            older.push(Closed::from_encoded(block, lo, hi, bytes)?);
        } else {
            codec::decode(bytes, &mut values[..len]).ok()?;
            head = Some((block, lo, len));
        }
    }
    if !p.is_empty() {
        return None;
    }
    // A series of a metric the configuration now refuses, or with a name now invalid, is
    // skipped: not damage, a policy decision.
    let (Ok(m), Ok(level)) = (store.metric(metric), store.level(&path)) else {
        tracing::warn!(metric, "snapshot series skipped (metric or path refused)");
        return Some(());
    };
    let (block, lo, len) = head?;
    let Some(chain) = Chain::from_parts(
        m.id,
        freq,
        phase,
        older,
        block,
        lo,
        &values[..len],
        &store.pool,
    ) else {
        return Some(());
    };
    level.put_chain(chain, &store.pool);
    Some(())
}
