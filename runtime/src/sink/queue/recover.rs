//! `Queue::open`'s recovery: read the ledger, scan the segments, cut torn tails, build the index.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::index::{Entry, Index, State};
use super::ledger::{Ledger, LedgerFound};
use super::segment;
use super::{FIRST_SEQ, QueueError, Recovery, SEQ_GAP_AFTER_CRASH, io_err};

/// A segment file the running queue knows.
pub(super) struct Seg {
    pub path: PathBuf,
    pub file: Arc<File>,
    pub len: u64,
}

/// Everything `open` hands to the running queue.
pub(super) struct Recovered {
    pub ledger: Ledger,
    pub index: Index,
    /// Old segments still holding queued records, by first seq (the new active one not yet).
    pub segs: BTreeMap<u64, Seg>,
    /// Old segments holding nothing queued: deleted once the open's ledger commit is durable.
    pub obsolete: Vec<PathBuf>,
    pub recovery: Recovery,
}

pub(super) fn recover(dir: &Path) -> Result<Recovered, QueueError> {
    std::fs::create_dir_all(dir).map_err(|e| io_err("create directory", dir, e))?;
    let (ledger, lstate, found) = Ledger::open(dir)?;
    let mut names = Vec::new();
    for ent in std::fs::read_dir(dir).map_err(|e| io_err("list directory", dir, e))? {
        let ent = ent.map_err(|e| io_err("list directory", dir, e))?;
        if let Some(first) = ent
            .file_name()
            .to_str()
            .and_then(segment::parse_segment_name)
        {
            names.push(first);
        }
    }
    names.sort_unstable();
    let mut rec = Recovery {
        ledger: found,
        ..Recovery::default()
    };
    match found {
        LedgerFound::OneSlotDamaged => tracing::warn!(
            path = %ledger.path().display(),
            "queue ledger: one slot damaged, using the previous commit (records removed since are sent again)"
        ),
        LedgerFound::Lost => tracing::warn!(
            path = %ledger.path().display(),
            "queue ledger damaged: every record found is sent again, counts restart at zero"
        ),
        LedgerFound::Missing if !names.is_empty() => tracing::warn!(
            path = %ledger.path().display(),
            "queue ledger missing: every record found is sent again, counts restart at zero"
        ),
        _ => {}
    }
    let lstate = lstate.unwrap_or_default();
    let cursor = lstate.cursor;
    rec.unclean = match found {
        LedgerFound::Intact => !lstate.clean,
        LedgerFound::Missing => !names.is_empty(),
        LedgerFound::OneSlotDamaged | LedgerFound::Lost => true,
    };

    let mut index = Index::new(lstate.counts, cursor, lstate.next_seq.max(FIRST_SEQ));
    let mut segs = BTreeMap::new();
    let mut obsolete = Vec::new();
    // The highest seq seen in any header, intact or not: never to be given out again.
    let mut max_seen = None::<u64>;
    // The seq the next intact record must reach.
    let mut next_found = 0u64;
    for (i, &first) in names.iter().enumerate() {
        let path = dir.join(segment::segment_name(first));
        // All of this segment's seqs are below the next segment's first: wholly removed.
        if names.get(i + 1).is_some_and(|&next| next <= cursor) {
            obsolete.push(path);
            continue;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| io_err("open segment", &path, e))?;
        let scan = segment::scan(&path, &file, first, cursor)?;
        rec.segments += 1;
        if scan.damaged_records > 0 || scan.damaged_bytes > 0 {
            tracing::warn!(
                path = %path.display(),
                records = scan.damaged_records,
                samples = scan.damaged_samples,
                bytes = scan.damaged_bytes,
                "queue segment damaged: skipped the damaged records, kept the intact ones after them"
            );
        }
        rec.damaged_records += scan.damaged_records;
        rec.damaged_samples += scan.damaged_samples;
        rec.damaged_bytes += scan.damaged_bytes;
        index.found_damaged(
            scan.damaged_records,
            scan.damaged_samples,
            scan.damaged_bytes,
        );
        max_seen = max_seen.max(scan.max_seq);
        if scan.good_end < scan.file_len {
            let cut = scan.file_len - scan.good_end;
            tracing::warn!(
                path = %path.display(),
                bytes = cut,
                torn_records = scan.tail_records,
                "queue segment: cut a torn or corrupt tail after the last intact record"
            );
            file.set_len(scan.good_end)
                .map_err(|e| io_err("truncate segment", &path, e))?;
            file.sync_all()
                .map_err(|e| io_err("fsync segment", &path, e))?;
            rec.truncated_tail_bytes += cut;
            rec.truncated_tail_records += scan.tail_records;
        }
        let mut kept = false;
        for f in scan.records.iter().filter(|f| f.header.seq >= cursor) {
            let h = f.header;
            // Seqs only grow from segment to segment; one that does not (a segment copied
            // under another name) would be handed out twice: skipped, counted as damage.
            if h.seq < next_found {
                rec.damaged_records += 1;
                rec.damaged_bytes += h.record_len();
                index.found_damaged(1, u64::from(h.samples), h.record_len());
                continue;
            }
            next_found = h.seq + 1;
            index.push(Entry {
                seq: h.seq,
                seg: first,
                offset: f.offset,
                len: h.record_len(),
                samples: h.samples,
                enqueued_ns: h.enqueued_ns,
                oldest_sample_ns: h.oldest_sample_ns,
                state: State::Open,
            });
            rec.records += 1;
            rec.samples += u64::from(h.samples);
            kept = true;
        }
        if kept {
            let file = Arc::new(file);
            let len = scan.good_end;
            segs.insert(first, Seg { path, file, len });
        } else {
            obsolete.push(path);
        }
    }
    // Past every segment name too: a new segment's name is then above all others, and the
    // "wholly below the next segment's first seq" rule stays true.
    let mut next_seq = index
        .next_seq
        .max(cursor)
        .max(names.last().copied().unwrap_or(0));
    if let Some(m) = max_seen {
        next_seq = next_seq.max(m + 1);
    }
    if rec.unclean {
        next_seq = next_seq.saturating_add(SEQ_GAP_AFTER_CRASH);
    }
    index.next_seq = next_seq;
    Ok(Recovered {
        ledger,
        index,
        segs,
        obsolete,
        recovery: rec,
    })
}
