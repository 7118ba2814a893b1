//! A node's queue damaged on disk while the node is down: a record's payload and another's
//! header corrupted in the middle of a segment, garbage after the last record. The daemon
//! starts, every intact record arrives (those after the damaged ones too), and the damage is
//! counted: what was accepted before the kill is sent or damaged, nothing unaccounted.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::rig::*;
use super::write_node;
use crate::common::*;

/// The record format of `runtime/src/sink/queue/mod.rs`: a 48-byte header whose bytes 8..12
/// are the payload's length, then the payload.
const HEADER_LEN: usize = 48;

/// (offset, payload) of every record in a segment.
fn records(seg: &[u8]) -> Vec<(usize, &[u8])> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + HEADER_LEN <= seg.len() {
        assert_eq!(&seg[off..off + 4], b"WQR1", "record at {off}");
        let len = u32::from_le_bytes(seg[off + 8..off + 12].try_into().unwrap()) as usize;
        out.push((off, &seg[off + HEADER_LEN..off + HEADER_LEN + len]));
        off += HEADER_LEN + len;
    }
    assert_eq!(off, seg.len(), "the segment ends with a whole record");
    out
}

/// The client's sample numbers in a record of uncompressed line protocol (the value is the
/// number: see [`sample_line`]).
fn samples_in(payload: &[u8]) -> Vec<u64> {
    std::str::from_utf8(payload)
        .unwrap()
        .lines()
        .map(|l| {
            let v = l.split(' ').nth(1).unwrap().strip_prefix("value=").unwrap();
            v.parse::<f64>().unwrap() as u64
        })
        .collect()
}

/// The segment file holding records (the queue starts a new, empty one at each open).
fn segment(dir: &Path) -> PathBuf {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .filter(|p| std::fs::metadata(p).unwrap().len() > 0)
        .collect();
    assert_eq!(segs.len(), 1, "{segs:?}");
    segs.pop().unwrap()
}

/// Sorted sample numbers as ranges, as [`assert_all_there`] takes them.
fn ranges(set: &BTreeSet<u64>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &i in set {
        match out.last_mut() {
            Some((_, b)) if *b == i => *b += 1,
            _ => out.push((i, i + 1)),
        }
    }
    out
}

/// A node whose sink points at `central_port` (nothing listens there yet) with samples
/// `0..total` queued in records of 10: its config file and the running daemon.
fn queued_node(dir: &Path, central_port: u16, total: u64, base: i64) -> (PathBuf, DaemonProcess) {
    let node_toml = write_node(
        dir,
        "\"up\"",
        &format!(
            "[[sink]]\nname = \"up\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{central_port}/api/write\"\n\
             gzip = false\nmax-backoff = \"200ms\"\nbatch-size = 10\n"
        ),
    );
    let node = DaemonProcess::start(&node_toml);
    post_hosts(&node, 0..total, base);
    (node_toml, node)
}

#[test]
fn a_damaged_queue_delivers_every_intact_record_and_counts_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let central_port = free_port();
    let base = chrono::Utc::now().timestamp() - 3600;
    let total = 10 * HOSTS;
    let (node_toml, mut node) = queued_node(tmp.path(), central_port, total, base);
    let before = sink(&node, "up");
    assert_eq!(before["accepted"], total, "{before}");
    assert_eq!(before["queued-samples"], total, "{before}");
    let pushed_records = before["queued-records"].as_u64().unwrap();
    node.child.kill().unwrap();
    node.child.wait().unwrap();

    let seg_path = segment(&tmp.path().join("node/sinks/up"));
    let mut seg = std::fs::read(&seg_path).unwrap();
    let recs: Vec<(usize, Vec<u64>)> = records(&seg)
        .into_iter()
        .map(|(off, p)| (off, samples_in(p)))
        .collect();
    assert_eq!(recs.len() as u64, pushed_records);
    assert!(recs.len() >= 30, "{} records", recs.len());
    // A payload byte of one record (its CRC fails, its header still says how many samples
    // it held) and the seq in the header of another (the scan must find the next record).
    let (bad_payload, bad_header) = (recs.len() / 3, 2 * recs.len() / 3);
    seg[recs[bad_payload].0 + HEADER_LEN + 5] ^= 0xff;
    seg[recs[bad_header].0 + 16] ^= 0x5a;
    // After the last record: a header that claims more than the file holds, then noise.
    let mut fake = seg[recs[0].0..recs[0].0 + HEADER_LEN].to_vec();
    fake[8..12].copy_from_slice(&(1u32 << 20).to_le_bytes());
    seg.extend_from_slice(&fake);
    seg.extend((0..3000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    std::fs::write(&seg_path, &seg).unwrap();

    let central = start_central(tmp.path(), Some(central_port));
    let node = DaemonProcess::start(&node_toml);
    wait_until("the node drained", Duration::from_secs(60), || {
        sink(&node, "up")["queued-records"] == 0
    });
    let s = sink(&node, "up");
    let damaged_records = s["damaged-records"].as_u64().unwrap();
    let sent_records = s["sent-records"].as_u64().unwrap();
    assert_eq!(damaged_records, 2, "{s}");
    assert_eq!(sent_records + damaged_records, pushed_records, "{s}");
    // Samples: the record with the damaged payload is counted with its samples; the one
    // whose header was lost is counted as a record only (its sample count was in the header).
    let lost_header = recs[bad_header].1.len() as u64;
    assert_eq!(
        s["damaged-samples"].as_u64().unwrap(),
        recs[bad_payload].1.len() as u64,
        "{s}"
    );
    let dropped: u64 = s["dropped"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(dropped, 0, "{s}");
    assert_eq!(
        s["sent-samples"].as_u64().unwrap() + s["damaged-samples"].as_u64().unwrap() + dropped,
        total - lost_header,
        "accepted before the kill = sent + damaged + dropped: {s}"
    );

    // The central holds exactly the samples of the intact records, before and after the
    // damaged ones.
    let damaged: BTreeSet<u64> = recs[bad_payload]
        .1
        .iter()
        .chain(&recs[bad_header].1)
        .copied()
        .collect();
    let intact: BTreeSet<u64> = (0..total).filter(|i| !damaged.contains(i)).collect();
    assert!(intact.iter().any(|&i| i > *damaged.last().unwrap()));
    let values = central_values(&central, base, base + (total / HOSTS) as i64);
    assert_all_there("central", &ranges(&intact), &values, base);
}

/// A torn last record (a push a crash cut short, or an OS crash before the fsync): cut at
/// start, counted as `truncated-tail-records`, every record before it delivered.
#[test]
fn a_torn_last_record_is_cut_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let central_port = free_port();
    let base = chrono::Utc::now().timestamp() - 3600;
    let total = 3 * HOSTS;
    let (node_toml, mut node) = queued_node(tmp.path(), central_port, total, base);
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    let seg_path = segment(&tmp.path().join("node/sinks/up"));
    let seg = std::fs::read(&seg_path).unwrap();
    let recs = records(&seg);
    let (last_off, last) = *recs.last().unwrap();
    // Half the last record's payload is gone.
    std::fs::write(&seg_path, &seg[..last_off + HEADER_LEN + last.len() / 2]).unwrap();

    let central = start_central(tmp.path(), Some(central_port));
    let node = DaemonProcess::start(&node_toml);
    wait_until("the node drained", Duration::from_secs(60), || {
        sink(&node, "up")["queued-records"] == 0
    });
    let s = sink(&node, "up");
    assert_eq!(s["truncated-tail-records"], 1, "{s}");
    assert_eq!(s["sent-records"], recs.len() as u64 - 1, "{s}");
    let torn: BTreeSet<u64> =
        samples_in(&seg[last_off + HEADER_LEN..last_off + HEADER_LEN + last.len()])
            .into_iter()
            .collect();
    let intact: BTreeSet<u64> = (0..total).filter(|i| !torn.contains(i)).collect();
    let values = central_values(&central, base, base + (total / HOSTS) as i64 + 1);
    assert_all_there("central", &ranges(&intact), &values, base);
}
