//! Segment files: their names, creating and removing them, the record header, and the
//! recovery scan.
//!
//! A segment is a plain sequence of records, `header | payload`, with no file header: every
//! record carries its own magic and checksums, so the scan can resynchronise after damage at
//! any offset. Only the newest segment is ever appended to, and only by the running queue.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{QueueError, io_err};

/// Marks the start of a record; the scan looks for it after a damaged header. "WQR1": wasmon
/// queue record, format 1.
pub(super) const RECORD_MAGIC: [u8; 4] = *b"WQR1";
/// Fixed header size: magic, header CRC, payload length, payload CRC, seq, samples, reserved,
/// enqueued_ns, oldest_sample_ns.
pub(super) const HEADER_LEN: usize = 48;
/// The header CRC covers everything after the CRC field itself.
const HEADER_CRC_FROM: usize = 8;
/// A payload length above this in a header whose CRC checks is still treated as damage: a sink
/// batch is a few MiB at most, and the bound keeps a freak CRC match from skipping gigabytes.
pub(super) const MAX_PAYLOAD: u64 = 256 << 20;
/// Chunk size for checksumming payloads and searching for the next magic during the scan:
/// big enough to amortise the syscalls, small enough to stay out of the RSS budget.
const SCAN_CHUNK: usize = 256 << 10;
/// Segment files end in this; the stem is the first seq, 20 digits (u64::MAX has 20).
pub(super) const SEGMENT_SUFFIX: &str = ".seg";

pub(super) fn segment_name(first_seq: u64) -> String {
    format!("{first_seq:020}{SEGMENT_SUFFIX}")
}

pub(super) fn parse_segment_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(SEGMENT_SUFFIX)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub payload_len: u32,
    pub payload_crc: u32,
    pub seq: u64,
    pub samples: u32,
    pub enqueued_ns: i64,
    pub oldest_sample_ns: i64,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&RECORD_MAGIC);
        b[8..12].copy_from_slice(&self.payload_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.payload_crc.to_le_bytes());
        b[16..24].copy_from_slice(&self.seq.to_le_bytes());
        b[24..28].copy_from_slice(&self.samples.to_le_bytes());
        // 28..32 reserved, zero.
        b[32..40].copy_from_slice(&self.enqueued_ns.to_le_bytes());
        b[40..48].copy_from_slice(&self.oldest_sample_ns.to_le_bytes());
        let crc = crc32fast::hash(&b[HEADER_CRC_FROM..]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// `None` unless magic, header CRC, reserved field and length bound all check.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Option<Header> {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(a)
        };
        if b[0..4] != RECORD_MAGIC || u32_at(4) != crc32fast::hash(&b[HEADER_CRC_FROM..]) {
            return None;
        }
        let h = Header {
            payload_len: u32_at(8),
            payload_crc: u32_at(12),
            seq: u64_at(16),
            samples: u32_at(24),
            enqueued_ns: u64_at(32) as i64,
            oldest_sample_ns: u64_at(40) as i64,
        };
        (u32_at(28) == 0 && u64::from(h.payload_len) <= MAX_PAYLOAD).then_some(h)
    }

    pub fn record_len(&self) -> u64 {
        HEADER_LEN as u64 + u64::from(self.payload_len)
    }
}

/// An intact record found by the scan.
#[derive(Debug, Clone, Copy)]
pub(super) struct Found {
    pub offset: u64,
    pub header: Header,
}

/// What the scan of one segment found.
#[derive(Debug, Default)]
pub(super) struct Scan {
    pub records: Vec<Found>,
    /// Records known lost between intact ones (damaged payload, or a seq gap bridged by a resync).
    pub damaged_records: u64,
    /// Samples of the damaged records whose header was intact (others are unknown).
    pub damaged_samples: u64,
    /// Bytes skipped between intact records.
    pub damaged_bytes: u64,
    /// Where the last intact record ends: everything after it is a torn or corrupt tail.
    pub good_end: u64,
    pub file_len: u64,
    /// Records with an intact header inside the tail (a torn last write).
    pub tail_records: u64,
    /// The highest seq in any header whose CRC checks, intact payload or not.
    pub max_seq: Option<u64>,
}

/// Reads one segment and classifies every byte as an intact record, damage between intact
/// records, or tail. Seqs in a segment strictly increase from `first_seq` (the name), which the
/// scan uses both to reject stale headers and to count records lost in a damaged stretch.
/// Damage wholly below `cursor` (records removed already) is not counted.
pub(super) fn scan(
    path: &Path,
    file: &File,
    first_seq: u64,
    cursor: u64,
) -> Result<Scan, QueueError> {
    let file_len = file
        .metadata()
        .map_err(|e| io_err("stat segment", path, e))?
        .len();
    let mut s = Scan {
        file_len,
        ..Scan::default()
    };
    let mut buf = vec![0u8; SCAN_CHUNK];
    let mut off = 0u64;
    // The seq the next record should have if nothing is lost.
    let mut expect = first_seq;
    // Damage seen since the last intact record: committed when another intact one follows,
    // otherwise it is part of the tail.
    let mut pend = (0u64, 0u64, 0u64, 0u64); // (records, samples, bytes, records with header)
    while off + HEADER_LEN as u64 <= file_len {
        let h = read_header(file, path, off)?.filter(|h| h.seq >= expect);
        let Some(h) = h else {
            // Damaged header: resynchronise on the next magic whose header checks.
            match resync(file, path, off + 1, file_len, expect, &mut buf)? {
                Some(next) => {
                    pend.2 += next - off;
                    off = next;
                    continue;
                }
                None => break,
            }
        };
        let end = off + h.record_len();
        if end > file_len {
            // Header written, payload cut: a torn last write, one record of the tail.
            pend.3 += 1;
            break;
        }
        // Records skipped by a resync show as a seq gap.
        let gap = h.seq - expect;
        s.max_seq = s.max_seq.max(Some(h.seq));
        if payload_crc(file, path, off + HEADER_LEN as u64, h.payload_len, &mut buf)?
            == h.payload_crc
        {
            if h.seq > cursor {
                s.damaged_records += pend.0 + gap;
                s.damaged_samples += pend.1;
                s.damaged_bytes += pend.2;
            }
            pend = (0, 0, 0, 0);
            s.records.push(Found {
                offset: off,
                header: h,
            });
            s.good_end = end;
        } else {
            pend.0 += 1 + gap;
            pend.1 += u64::from(h.samples);
            pend.2 += h.record_len();
            pend.3 += 1;
        }
        expect = h.seq + 1;
        off = end;
    }
    s.tail_records = pend.3;
    Ok(s)
}

fn read_header(file: &File, path: &Path, off: u64) -> Result<Option<Header>, QueueError> {
    let mut hb = [0u8; HEADER_LEN];
    file.read_exact_at(&mut hb, off)
        .map_err(|e| io_err("read record header", path, e))?;
    Ok(Header::decode(&hb))
}

fn payload_crc(
    file: &File,
    path: &Path,
    mut off: u64,
    len: u32,
    buf: &mut [u8],
) -> Result<u32, QueueError> {
    let mut h = crc32fast::Hasher::new();
    let mut left = len as usize;
    while left > 0 {
        let n = left.min(buf.len());
        file.read_exact_at(&mut buf[..n], off)
            .map_err(|e| io_err("read record payload", path, e))?;
        h.update(&buf[..n]);
        left -= n;
        off += n as u64;
    }
    Ok(h.finalize())
}

/// The offset of the next header at or after `from` whose magic and CRC check, whose seq is
/// not behind `expect`, and whose record fits in the file; `None` if there is none.
fn resync(
    file: &File,
    path: &Path,
    mut from: u64,
    file_len: u64,
    expect: u64,
    buf: &mut [u8],
) -> Result<Option<u64>, QueueError> {
    while from + HEADER_LEN as u64 <= file_len {
        let n = (buf.len() as u64).min(file_len - from) as usize;
        file.read_exact_at(&mut buf[..n], from)
            .map_err(|e| io_err("scan segment", path, e))?;
        for i in 0..n.saturating_sub(RECORD_MAGIC.len() - 1) {
            if buf[i..i + RECORD_MAGIC.len()] != RECORD_MAGIC {
                continue;
            }
            let cand = from + i as u64;
            if cand + HEADER_LEN as u64 > file_len {
                return Ok(None);
            }
            if let Some(h) = read_header(file, path, cand)?
                && h.seq >= expect
                && cand + h.record_len() <= file_len
            {
                return Ok(Some(cand));
            }
        }
        // Overlap by the magic's length so a magic straddling two chunks is seen.
        from += (n - (RECORD_MAGIC.len() - 1)) as u64;
    }
    Ok(None)
}

pub(super) fn create_segment(dir: &Path, first: u64) -> Result<(PathBuf, File), QueueError> {
    let path = dir.join(segment_name(first));
    // Truncate: a file by this name can only be an old segment with no intact record (open
    // cut it to nothing), since every intact record's seq is below `first`.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| io_err("create segment", &path, e))?;
    Ok((path, file))
}

pub(super) fn remove_segment(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %e, "queue: cannot delete a removed segment");
    }
}

pub(super) fn sync_dir(dir: &Path) -> Result<(), QueueError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err("fsync directory", dir, e))
}
