//! Store persistence tests: snapshot and reopen, WAL replay, group commit, archives, damaged
//! WAL and snapshot tails restored up to the damage, and a real `kill -9` of a writer.

use std::sync::Arc;

use super::tests::{cfg, sel};
use super::*;

fn queries(s: &Store) -> Vec<ReadResult> {
    let mut out = Vec::new();
    for p in [&["c", "h0"][..], &["c", "h1", "cpu0"], &["c", "h1"]] {
        for m in ["a", "b"] {
            if let Ok(r) = s.read(&sel(p), m, 0, 1_000_000, 0) {
                out.push(r);
            }
        }
    }
    out
}

fn fill(s: &Store, n: i64) {
    for i in 0..n {
        s.write(&["c", "h0"], "a", i * 10, i as f64).unwrap();
        s.write(&["c", "h1", "cpu0"], "b", i * 10, -(i as f64))
            .unwrap();
        s.write(&["c", "h1", "cpu1"], "b", i * 10, 0.5).unwrap();
    }
}

fn pcfg() -> StoreConfig {
    cfg(&[("a", 10, Aggregation::None), ("b", 10, Aggregation::Sum)])
}

fn same(a: &[ReadResult], b: &[ReadResult]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (x.from, x.to, x.resolution) == (y.from, y.to, y.resolution)
                && x.data.len() == y.data.len()
                && x.data
                    .iter()
                    .zip(&y.data)
                    .all(|(p, q)| p.to_bits() == q.to_bits())
        })
}

#[tokio::test]
async fn snapshot_reopen_identical_results() {
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let s = Arc::new(Store::open(pcfg(), dir.path()).unwrap());
        fill(&s, 1500);
        s.commit().await.unwrap();
        s.checkpoint().await.unwrap();
        before = queries(&s);
    }
    let s = Store::open(pcfg(), dir.path()).unwrap();
    assert_eq!(before.len(), 3);
    assert!(same(&before, &queries(&s)));
    assert_eq!(s.counters().snapshot_damage.load(Ordering::Relaxed), 0);
}

#[tokio::test]
async fn wal_survives_without_snapshot_and_after_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(Store::open(pcfg(), dir.path()).unwrap());
    fill(&s, 600);
    s.checkpoint().await.unwrap();
    // Written after the snapshot: only the WAL has these.
    s.write(&["c", "h0"], "a", 6000, 42.0).unwrap();
    s.commit().await.unwrap();
    let before = queries(&s);
    // No shutdown path runs (as after kill -9): the store is leaked, not dropped.
    std::mem::forget(s);
    let s2 = Store::open(pcfg(), dir.path()).unwrap();
    assert!(same(&before, &queries(&s2)));
    let r = s2.read(&sel(&["c", "h0"]), "a", 6000, 6001, 0).unwrap();
    assert_eq!(r.data, vec![42.0]);
    assert!(s2.counters().wal_records_replayed.load(Ordering::Relaxed) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_shares_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(Store::open(pcfg(), dir.path()).unwrap());
    let writers = 32;
    let mut tasks = Vec::new();
    for w in 0..writers {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..20 {
                s.write(&["c", &format!("h{w}")], "a", i * 10, i as f64)
                    .unwrap();
                s.commit().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let commits = writers * 20;
    let fsyncs = s.wal_fsyncs();
    assert!(
        fsyncs > 0 && fsyncs < commits as u64,
        "fsyncs {fsyncs} for {commits} commits"
    );
}

/// Writes three separately committed WAL frames; returns the WAL file and frame boundaries.
async fn three_frames(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u64>) {
    let s = Store::open(pcfg(), dir).unwrap();
    let path = wal::wal_file(dir, wal::list(dir)[0]);
    let mut ends = Vec::new();
    for i in 0..3i64 {
        s.write(&["c", "h0"], "a", i * 10, i as f64).unwrap();
        s.commit().await.unwrap();
        ends.push(std::fs::metadata(&path).unwrap().len());
    }
    std::mem::forget(s);
    (path, ends)
}

#[tokio::test]
async fn damaged_wal_tails_restore_the_prefix() {
    type Damage = fn(&mut Vec<u8>, &[u64]);
    let damages: [(&str, Damage); 4] = [
        ("truncated", |b, e| b.truncate(e[1] as usize + 5)),
        ("bit flip", |b, e| b[e[1] as usize + 10] ^= 0x40),
        ("wrong length", |b, e| b[e[1] as usize] = 0xff),
        ("garbage appended", |b, _| b.extend_from_slice(&[1, 2, 3])),
    ];
    for (what, damage) in damages {
        let dir = tempfile::tempdir().unwrap();
        let (path, ends) = three_frames(dir.path()).await;
        let mut bytes = std::fs::read(&path).unwrap();
        damage(&mut bytes, &ends);
        std::fs::write(&path, &bytes).unwrap();
        let s = Store::open(pcfg(), dir.path()).unwrap();
        let r = s.read(&sel(&["c", "h0"]), "a", 0, 100, 0).unwrap();
        let expect: &[f64] = if what == "garbage appended" {
            &[0.0, 1.0, 2.0]
        } else {
            &[0.0, 1.0]
        };
        assert_eq!(r.data, expect, "{what}");
        assert_eq!(s.counters().wal_damage.load(Ordering::Relaxed), 1, "{what}");
        // The damage was cut: a second open is clean.
        drop(s);
        let s = Store::open(pcfg(), dir.path()).unwrap();
        assert_eq!(
            s.counters().wal_damage.load(Ordering::Relaxed),
            0,
            "{what} reopen"
        );
    }
}

#[tokio::test]
async fn damaged_snapshots_restore_the_prefix() {
    type Damage = fn(&mut Vec<u8>);
    let damages: [(&str, Damage); 4] = [
        ("truncated", |b| b.truncate(b.len() * 2 / 3)),
        ("bit flip", |b| {
            let n = b.len() - 20;
            b[n] ^= 1
        }),
        ("wrong length", |b| {
            let n = b.len();
            b[n - 8] = 7 // the end marker now claims a payload
        }),
        ("header", |b| b[0] = b'X'),
    ];
    for (what, damage) in damages {
        let dir = tempfile::tempdir().unwrap();
        let mut c = pcfg();
        c.wal = false; // the snapshot alone must carry the data
        let s = Arc::new(Store::open(c.clone(), dir.path()).unwrap());
        for h in 0..20 {
            for i in 0..100 {
                s.write(
                    &["c", &format!("h{h:02}")],
                    "a",
                    i * 10,
                    (h * 1000 + i) as f64,
                )
                .unwrap();
            }
        }
        let path = s.checkpoint().await.unwrap();
        drop(s);
        let mut bytes = std::fs::read(&path).unwrap();
        damage(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        let s = Store::open(c, dir.path()).unwrap();
        assert_eq!(
            s.counters().snapshot_damage.load(Ordering::Relaxed),
            1,
            "{what}"
        );
        let restored = s.usage().series;
        if what == "header" {
            assert_eq!(restored, 0);
            continue;
        }
        if what == "truncated" {
            assert!((1..20).contains(&restored), "{what}: {restored}");
        }
        // Series are written in path order: h00 is first and intact.
        let r = s.read(&sel(&["c", "h00"]), "a", 0, 10_000, 0).unwrap();
        assert_eq!(
            r.data,
            (0..100).map(|i| i as f64).collect::<Vec<_>>(),
            "{what}"
        );
    }
}

#[tokio::test]
async fn archive_and_wal_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(Store::open(pcfg(), dir.path()).unwrap());
    fill(&s, 50);
    let first = s.checkpoint().await.unwrap();
    fill(&s, 60);
    let second = s.checkpoint().await.unwrap();
    assert!(!first.exists() && second.exists());
    let gz = dir.path().join("archive").join(format!(
        "{}.gz",
        first.file_name().unwrap().to_string_lossy()
    ));
    assert!(gz.exists());
    // Only the WAL generation started by the newest checkpoint remains.
    assert_eq!(wal::list(dir.path()).len(), 1);
    let mut raw = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(gz).unwrap()),
        &mut raw,
    )
    .unwrap();
    assert_eq!(&raw[..8], b"WMSNAP02");
}

#[tokio::test]
async fn workers_write_final_snapshot_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = pcfg();
    c.wal = false;
    let s = Arc::new(Store::open(c.clone(), dir.path()).unwrap());
    let token = tokio_util::sync::CancellationToken::new();
    let h = tokio::spawn(run_workers(s.clone(), token.clone()));
    s.write(&["c", "h0"], "a", 100, 5.0).unwrap();
    token.cancel();
    h.await.unwrap();
    assert_eq!(snapshot::list(dir.path()).len(), 1);
    drop(s);
    let s = Store::open(c, dir.path()).unwrap();
    assert_eq!(
        s.read(&sel(&["c", "h0"]), "a", 0, 200, 0).unwrap().data,
        vec![5.0]
    );
}

/// Child half of `acknowledged_writes_survive_kill_9`: writes and commits forever, printing
/// each acknowledged step. Ignored so it only runs when the parent starts it.
#[tokio::test]
#[ignore = "helper process for acknowledged_writes_survive_kill_9"]
async fn kill9_child() {
    let Ok(dir) = std::env::var("WASMON_KILL9_DIR") else {
        return;
    };
    let s = Store::open(pcfg(), &dir).unwrap();
    for i in 0i64.. {
        s.write(&["c", "h0"], "a", i * 10, i as f64).unwrap();
        s.write(&["c", "h1", "cpu0"], "b", i * 10, -(i as f64))
            .unwrap();
        s.commit().await.unwrap();
        println!("acked {i}");
    }
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "store::tests_persistence::kill9_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("WASMON_KILL9_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut last = None;
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("acked ") {
            last = Some(n.parse::<i64>().unwrap());
            if last == Some(300) {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL: no destructor, no final snapshot
    child.wait().unwrap();
    let acked = last.expect("child acknowledged nothing");
    let s = Store::open(pcfg(), dir.path()).unwrap();
    let r = s
        .read(&sel(&["c", "h0"]), "a", 0, acked * 10 + 1, 0)
        .unwrap();
    assert_eq!(r.data, (0..=acked).map(|i| i as f64).collect::<Vec<_>>());
    let r = s
        .read(
            &sel(&["c", "h1", "cpu0"]),
            "b",
            acked * 10,
            acked * 10 + 1,
            0,
        )
        .unwrap();
    assert_eq!(r.data, vec![-(acked as f64)]);
}

#[tokio::test]
async fn one_frame_with_many_levels_metrics_and_times_replays() {
    let dir = tempfile::tempdir().unwrap();
    let paths: [&[&str]; 3] = [&["c", "h0"], &["c", "h1", "cpu0"], &["c", "h1", "cpu1"]];
    let before;
    {
        let s = Store::open(pcfg(), dir.path()).unwrap();
        let mut samples = Vec::new();
        // Levels, metrics and timestamps change in every pattern within one frame, and a
        // dynamic metric is named in the middle of it.
        for i in 0..600i64 {
            let p = paths[(i % 3) as usize];
            let m = ["a", "b", "dyn"][(i / 3 % 3) as usize];
            samples.push(Sample {
                path: p,
                metric: m,
                ts: (i / 7) * 10,
                value: i as f64,
            });
        }
        assert!(s.write_batch(&samples).is_empty());
        s.commit().await.unwrap();
        before = queries(&s);
        assert!(
            s.read(&sel(&["c", "h1", "cpu1"]), "dyn", 0, 10_000, 0)
                .is_ok()
        );
    }
    let s = Store::open(pcfg(), dir.path()).unwrap();
    assert!(same(&before, &queries(&s)));
    assert_eq!(
        s.counters().wal_records_replayed.load(Ordering::Relaxed),
        600
    );
    assert_eq!(s.counters().wal_damage.load(Ordering::Relaxed), 0);
}

#[test]
fn format_1_wal_files_still_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = b"WMWAL001".to_vec();
    file.extend_from_slice(&1u64.to_le_bytes());
    let mut payload = Vec::new();
    for (i, (path, m)) in [(&["c", "h0"][..], "a"), (&["c", "h1", "cpu0"][..], "b")]
        .iter()
        .enumerate()
    {
        payload.push(path.len() as u8);
        for p in *path {
            payload.extend_from_slice(&(p.len() as u16).to_le_bytes());
            payload.extend_from_slice(p.as_bytes());
        }
        payload.extend_from_slice(&(m.len() as u16).to_le_bytes());
        payload.extend_from_slice(m.as_bytes());
        payload.extend_from_slice(&100i64.to_le_bytes());
        payload.extend_from_slice(&(i as f64 + 0.5).to_le_bytes());
    }
    file.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    file.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    file.extend_from_slice(&payload);
    std::fs::write(wal::wal_file(dir.path(), 1), &file).unwrap();
    let s = Store::open(pcfg(), dir.path()).unwrap();
    assert_eq!(s.counters().wal_damage.load(Ordering::Relaxed), 0);
    let r = |p: &[&str], m| s.read(&sel(p), m, 100, 101, 0).unwrap().data;
    assert_eq!(r(&["c", "h0"], "a"), vec![0.5]);
    assert_eq!(r(&["c", "h1", "cpu0"], "b"), vec![1.5]);
}

/// Issue 18's late samples and issue 22's grid through both paths back: a series whose grid
/// starts off the step's multiples, written newest first, reads the same after a replay of the
/// WAL alone and after a snapshot.
#[tokio::test]
async fn late_samples_and_grid_phase_survive_wal_and_snapshot() {
    let now = chrono::Utc::now().timestamp();
    // Seven seconds past a multiple of the step: the grid must come back at that phase.
    let t0 = now - now.rem_euclid(10) - 30_000 + 7;
    let write = |s: &Store| {
        for i in 0..1000 {
            s.write(&["c", "h0"], "a", t0 + 10_000 + i * 10, i as f64)
                .unwrap();
        }
        // A lagging forwarder: 1,000 older samples in time order after the newer ones.
        for i in 0..1000 {
            s.write(&["c", "h0"], "a", t0 + i * 10, -(i as f64))
                .unwrap();
        }
    };
    let read = |s: &Store| s.read(&sel(&["c", "h0"]), "a", 0, t0 + 20_000, 0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let s = Store::open(pcfg(), dir.path()).unwrap();
        write(&s);
        s.commit().await.unwrap();
        before = read(&s);
        assert_eq!(s.counters().samples_rejected.load(Ordering::Relaxed), 0);
        std::mem::forget(s); // as after kill -9: only the WAL has it
    }
    assert_eq!(before.from, t0);
    assert_eq!(before.data.len(), 2000);
    assert_eq!((before.data[0], before.data[999]), (0.0, -999.0));
    assert_eq!(before.data[1000], 0.0);
    let s = Arc::new(Store::open(pcfg(), dir.path()).unwrap());
    assert!(same(std::slice::from_ref(&before), &[read(&s)]));
    s.checkpoint().await.unwrap();
    drop(s);
    let s = Store::open(pcfg(), dir.path()).unwrap();
    assert!(same(&[before], &[read(&s)]));
}

#[tokio::test]
async fn snapshots_keep_encoded_buffers_bit_for_bit() {
    // Several closed (encoded) buffers of awkward values, a late write into one of them, then
    // a restart from the snapshot alone (the WAL after it is empty).
    let dir = tempfile::tempdir().unwrap();
    let value = |i: i64| match i % 41 {
        0 => f64::NAN,
        1 => -0.0,
        2 => 5e-324,
        3 => f64::NEG_INFINITY,
        _ => (i * 125 + 100) as f64 / 1000.0,
    };
    let before = {
        let s = Arc::new(Store::open(pcfg(), dir.path()).unwrap());
        for i in 0..1800 {
            s.write(&["c", "h0"], "a", i * 10, value(i)).unwrap();
        }
        s.write(&["c", "h0"], "a", 50, 123.5).unwrap();
        s.checkpoint().await.unwrap();
        s.read(&sel(&["c", "h0"]), "a", 0, 1_000_000, 0).unwrap()
    };
    let snap = snapshot::list(dir.path());
    let bytes = std::fs::metadata(dir.path().join(format!("snap-{:020}.bin", snap[0])))
        .unwrap()
        .len();
    // Raw would be 1,800 × 8 bytes; two-decimal-ish values with specials as exceptions.
    assert!(bytes < 1800 * 8 / 2, "{bytes}");
    let s = Store::open(pcfg(), dir.path()).unwrap();
    let after = s.read(&sel(&["c", "h0"]), "a", 0, 1_000_000, 0).unwrap();
    assert_eq!(after.data.len(), 1800);
    assert_eq!(after.data[5], 123.5);
    for (i, (a, b)) in before.data.iter().zip(&after.data).enumerate() {
        assert!(
            (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            "slot {i}: {a} vs {b}"
        );
    }
}
