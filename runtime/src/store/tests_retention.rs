//! Store tests of idle retention: series of exited processes dropped with their levels,
//! and the removal of idle levels racing writers that hold them.

use std::sync::Arc;

use super::tests::{cfg, sel};
use super::*;

#[test]
fn series_of_exited_processes_go_after_idle_retention_and_their_levels_with_them() {
    // Default: `proc.*` series dropped an hour after their newest sample; others stay.
    let s = Store::new(cfg(&[("cpu", 10, Aggregation::None)]));
    let t0 = 1_000_000;
    for i in 0..20 {
        s.write(
            &["c", "h", "4242"],
            "proc.psinfo.utime",
            t0 + i * 10,
            i as f64,
        )
        .unwrap();
        s.write(&["c", "h", "7"], "proc.psinfo.utime", t0 + i * 10, i as f64)
            .unwrap();
        s.write(&["c", "h"], "cpu", t0 + i * 10, i as f64).unwrap();
        s.write(&["c", "h", "disk0"], "disk.read", t0 + i * 10, i as f64)
            .unwrap();
    }
    let held = s.level(&["c", "h", "4242"]).unwrap();
    // Process 7 goes on; 4242 exited at t0 + 190.
    let later = t0 + 190 + 3600;
    for t in (t0 + 200..=later).step_by(10) {
        s.write(&["c", "h", "7"], "proc.psinfo.utime", t, 1.0)
            .unwrap();
    }
    // Within the hour: kept (frozen, not dropped).
    s.compact(later - 20);
    assert_eq!(s.usage().series, 4);
    s.compact(later + 10);
    let mut kids = s.list_children(&["c", "h"]);
    kids.sort();
    assert_eq!(
        kids,
        vec!["7", "disk0"],
        "the exited process' level is gone"
    );
    assert_eq!(s.usage().series, 3);
    // Old series of metrics outside `idle-metrics` stay for the whole retention.
    let r = s
        .read(&sel(&["c", "h", "disk0"]), "disk.read", t0, t0 + 200, 0)
        .unwrap();
    assert_eq!(r.data[19], 19.0);
    // A writer that still holds the removed level (a cache): the sample lands in the level
    // at its path, created again, through both write paths.
    let m = s.metric("proc.psinfo.utime").unwrap();
    let mut batch = WalBatch::default();
    s.write_to(&mut batch, &held, "proc.psinfo.utime", m, later, 5.0)
        .unwrap();
    let r = s.read(
        &sel(&["c", "h", "4242"]),
        "proc.psinfo.utime",
        later,
        later + 10,
        0,
    );
    assert_eq!(r.unwrap().data, vec![5.0]);
    s.compact(later + 7200);
    let mut w = s.group_write(1);
    let at = |ts, value| Pending {
        name: "proc.psinfo.utime",
        metric: m,
        ts,
        value,
    };
    w.push(&Held, &held, at(later + 7200, 6.0));
    let written = w.finish(&Held);
    assert_eq!((written.stored, written.refused.len()), (1, 0));
    let r = s.read(
        &sel(&["c", "h", "4242"]),
        "proc.psinfo.utime",
        later + 7200,
        later + 7210,
        0,
    );
    assert_eq!(r.unwrap().data, vec![6.0]);
    // A child of a removed level is created under the live one.
    let child = s.child(&held, "t1").unwrap();
    s.write_to(&mut batch, &child, "cpu", m_cpu(&s), later, 1.0)
        .unwrap();
    assert_eq!(s.list_children(&["c", "h", "4242"]), vec!["t1"]);
}

fn m_cpu(s: &Store) -> MetricInfo {
    s.metric("cpu").unwrap()
}

#[test]
fn idle_retention_zero_keeps_exited_processes_for_the_whole_retention() {
    let mut c = cfg(&[]);
    c.idle_retention = std::time::Duration::ZERO;
    let s = Store::new(c);
    s.write(&["c", "h", "1"], "proc.x", 1000, 1.0).unwrap();
    s.compact(1_000_000);
    assert_eq!(s.usage().series, 1);
    assert_eq!(s.list_children(&["c", "h"]), vec!["1"]);
}

#[test]
fn idle_levels_removed_under_concurrent_writes_lose_no_later_write() {
    // Writers keep writing old samples of exited-looking processes (through the tree and
    // through a level they hold) while passes far in the future remove every such series and
    // its level. No write may fail or land in a level already taken out of the tree: once
    // the passes stop, a write through a held level reads back.
    let s = Arc::new(Store::new(cfg(&[])));
    let m = s.metric("proc.x").unwrap();
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    // Passes that took levels out.
    let removing = Arc::new(AtomicUsize::new(0));
    let passes = {
        let (s, stop, removing) = (s.clone(), stop.clone(), removing.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let before = s.usage().levels;
                s.compact(10_000_000);
                if s.usage().levels < before {
                    removing.fetch_add(1, Ordering::Relaxed);
                }
                // A pass a millisecond (the daemon's come a minute apart).
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let (s, removing) = (s.clone(), removing.clone());
            std::thread::spawn(move || {
                let pids: Vec<String> = (0..20).map(|p| format!("{w}-{p}")).collect();
                let mut held: Vec<Arc<Level>> = pids
                    .iter()
                    .map(|p| s.level(&["c", "h", p]).unwrap())
                    .collect();
                let mut batch = WalBatch::default();
                // Rounds until the passes have taken levels out under the writes (a loaded
                // machine may not schedule the passes' thread during one round).
                let t0 = std::time::Instant::now();
                loop {
                    for k in 0..300i64 {
                        for (i, p) in pids.iter().enumerate() {
                            let ts = 1_000 + k * 10;
                            s.write(&["c", "h", p], "proc.x", ts, k as f64).unwrap();
                            s.write_to(&mut batch, &held[i], "proc.x", m, ts + 5, k as f64)
                                .unwrap();
                            if k % 50 == 0 {
                                held[i] = s.level(&["c", "h", p]).unwrap();
                            }
                        }
                    }
                    let done = removing.load(Ordering::Relaxed) > 0;
                    if done || t0.elapsed() > std::time::Duration::from_secs(20) {
                        break;
                    }
                }
                (pids, held)
            })
        })
        .collect();
    let done: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    passes.join().unwrap();
    assert!(
        removing.load(Ordering::Relaxed) > 0,
        "no pass removed a level in 20 s of writes"
    );
    let mut batch = WalBatch::default();
    for (pids, held) in done {
        for (p, l) in pids.iter().zip(&held) {
            s.write_to(&mut batch, l, "proc.x", m, 9_000_000, 7.0)
                .unwrap();
            let r = s
                .read(&sel(&["c", "h", p]), "proc.x", 9_000_000, 9_000_010, 0)
                .unwrap();
            assert_eq!(r.data, vec![7.0], "{p}");
        }
    }
    // One pass more takes every level out again (none left behind half-removed).
    s.compact(20_000_000);
    assert_eq!(s.usage().series, 0);
    assert!(s.list_children(&["c", "h"]).is_empty());
}
