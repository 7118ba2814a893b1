//! Store tests: cc-metric-store's memory-store scenarios (its grid starts at a series' first
//! write, `to` is exclusive), and concurrency; persistence is in `tests_persistence.rs`, the
//! cases taken one by one from the reference sources in `tests_conformance.rs`.

use std::sync::Arc;

use super::*;

pub(super) fn cfg(metrics: &[(&str, u64, Aggregation)]) -> StoreConfig {
    let mut c = StoreConfig::default();
    for (n, f, a) in metrics {
        c.metrics.insert(
            n.to_string(),
            MetricConfig {
                frequency: *f,
                aggregation: *a,
                precision: None,
            },
        );
    }
    c
}

pub(super) fn sel(p: &[&str]) -> Vec<SelectorElement> {
    selector(p)
}

#[test]
fn basics_two_frequencies() {
    let (f, start, count) = (10i64, 100i64, 5000i64);
    let s = Store::new(cfg(&[
        ("a", 10, Aggregation::None),
        ("b", 20, Aggregation::None),
    ]));
    for i in 0..count {
        s.write(&["testhost"], "a", start + i * f, i as f64)
            .unwrap();
        s.write(&["testhost"], "b", start + i * f, (i / 2) as f64)
            .unwrap();
    }
    let a = s
        .read(&sel(&["testhost"]), "a", start, start + count * f, 0)
        .unwrap();
    assert_eq!((a.from, a.to, a.resolution), (start, start + count * f, f));
    assert_eq!(a.data, (0..count).map(|i| i as f64).collect::<Vec<_>>());
    let b = s
        .read(&sel(&["testhost"]), "b", start, start + count * f, 0)
        .unwrap();
    assert_eq!(b.resolution, 20);
    // 5000 writes every 10 s: 2500 steps of 20 s before `to` (cc-metric-store's
    // TestMemoryStoreBasics: `len(bdata) == count/2`); each slot's last write is the one on it.
    assert_eq!(b.data.len(), (count / 2) as usize);
    assert_eq!(b.data, (0..count / 2).map(|i| i as f64).collect::<Vec<_>>());
}

#[test]
fn too_many_writes_all_frequencies() {
    let f = 10i64;
    let count = (BUFFER_CAP * 3 + 10) as i64;
    let s = Store::new(cfg(&[
        ("a", 10, Aggregation::None),
        ("b", 20, Aggregation::None),
        ("c", 5, Aggregation::None),
        ("d", 30, Aggregation::None),
    ]));
    let start = 100;
    for i in 0..count {
        let ts = start + i * f;
        s.write(&["test"], "a", ts, i as f64).unwrap();
        s.write(&["test"], "b", ts, (i / 2) as f64).unwrap();
        s.write(&["test"], "c", ts, (i * 2) as f64).unwrap();
        s.write(&["test"], "d", ts, (i / 3) as f64).unwrap();
    }
    let end = start + count * f;
    let last = end - f;
    for (m, step) in [("a", 10i64), ("b", 20), ("c", 5), ("d", 30)] {
        let r = s.read(&sel(&["test"]), m, start, end, 0).unwrap();
        // Every grid starts at `start`; the answer ends at the newest slot or before `to`.
        let last_slot = (last - start + step / 2).div_euclid(step);
        let n = (last_slot + 1).min((end - start + step - 1) / step);
        assert_eq!(r.from, start, "{m} from");
        assert_eq!(r.to, start + n * step, "{m} to");
        assert_eq!(r.data.len() as i64, n, "{m} len");
        assert_eq!(r.resolution, step);
    }
    // Spot checks against cc-metric-store's expectations where the grids agree.
    let a = s.read(&sel(&["test"]), "a", start, end, 0).unwrap();
    assert_eq!(a.data.len() as i64, count);
    assert_eq!(a.data[1000], 1000.0);
    let c = s.read(&sel(&["test"]), "c", start, end, 0).unwrap();
    assert_eq!(c.data.len() as i64, count * 2 - 1);
    assert_eq!(c.to, end - f / 2);
    assert_eq!(c.data[2], 2.0);
    assert!(c.data[1].is_nan());
    let d = s.read(&sel(&["test"]), "d", start, end, 0).unwrap();
    assert_eq!(d.data.len() as i64, count / 3 + 1);
    let b = s.read(&sel(&["test"]), "b", start, end, 0).unwrap();
    assert_eq!(b.data.len() as i64, count / 2);
}

#[test]
fn reads_outside_the_data() {
    let (count, toffset) = (2000i64, 1000i64);
    let s = Store::new(cfg(&[("a", 60, Aggregation::None)]));
    for i in 0..count {
        s.write(&["cluster", "host", "cpu"], "a", toffset + i * 60, i as f64)
            .unwrap();
    }
    let p = sel(&["cluster", "host", "cpu"]);
    let r = s.read(&p, "a", 500, toffset + count * 60 + 500, 0).unwrap();
    assert_eq!(r.data.len() as i64, count);
    assert_eq!(r.data[0], 0.0);
    assert_eq!(*r.data.last().unwrap(), (count - 1) as f64);
    assert_eq!(r.from, 1000); // the grid starts at the first write
    assert_eq!(r.to, 1000 + count * 60);

    // After the data: empty, at the requested `from`; before it: empty, at the first write.
    let after = s.read(&p, "a", 100_000_000, 100_010_000, 0).unwrap();
    assert!(after.data.is_empty());
    assert_eq!((after.from, after.to), (100_000_000, 100_000_000));
    let before = s.read(&p, "a", 0, 10, 0).unwrap();
    assert!(before.data.is_empty());
    assert_eq!((before.from, before.to), (1000, 1000));
    assert!(matches!(
        s.read(&p, "a", 10, 0, 0),
        Err(StoreError::InvalidRange)
    ));
    assert!(matches!(
        s.read(&sel(&["nope"]), "a", 0, 10, 0),
        Err(StoreError::NotFound)
    ));
    assert!(matches!(
        s.read(&p, "zzz", 0, 10, 0),
        Err(StoreError::UnknownMetric(_))
    ));
}

#[test]
fn every_third_value_rest_nan() {
    let count = 3000i64;
    let s = Store::new(cfg(&[("a", 1, Aggregation::None)]));
    for i in (0..count).filter(|i| i % 3 == 0) {
        s.write(&["testhost"], "a", i, i as f64).unwrap();
    }
    let r = s.read(&sel(&["testhost"]), "a", 0, count, 0).unwrap();
    assert_eq!(r.data.len() as i64, count - 2);
    for (i, v) in r.data.iter().enumerate() {
        if i % 3 == 0 {
            assert_eq!(*v, i as f64);
        } else {
            assert!(v.is_nan(), "index {i}: {v}");
        }
    }
}

#[test]
fn sum_and_avg_over_children() {
    let count = 3000i64;
    let s = Store::new(cfg(&[
        ("s", 1, Aggregation::Sum),
        ("v", 1, Aggregation::Avg),
    ]));
    for i in 0..count {
        for m in ["s", "v"] {
            s.write(&["host0", "cpu0"], m, i, i as f64 / 2.0).unwrap();
            s.write(&["host0", "cpu1"], m, i, i as f64 * 2.0).unwrap();
        }
    }
    let r = s.read(&sel(&["host0"]), "s", 0, count, 0).unwrap();
    assert_eq!((r.data.len() as i64, r.from, r.to), (count, 0, count));
    for (i, v) in r.data.iter().enumerate() {
        assert_eq!(*v, i as f64 / 2.0 + i as f64 * 2.0);
    }
    let r = s.read(&sel(&["host0"]), "v", 0, count, 0).unwrap();
    for (i, v) in r.data.iter().enumerate() {
        assert_eq!(*v, (i as f64 / 2.0 + i as f64 * 2.0) / 2.0);
    }
    // A group selector picks a subset.
    let g = vec![
        SelectorElement::from("host0"),
        SelectorElement::Group(vec!["cpu1".into()]),
    ];
    assert_eq!(s.read(&g, "s", 5, 6, 0).unwrap().data, vec![10.0]);
    let any = vec![SelectorElement::from("host0"), SelectorElement::Any];
    assert_eq!(s.read(&any, "s", 5, 6, 0).unwrap().data, vec![12.5]);
    // `to` is exclusive: from == to reads nothing.
    assert!(s.read(&any, "s", 5, 5, 0).unwrap().data.is_empty());
}

#[test]
fn no_aggregation_and_misaligned_children_are_errors() {
    let s = Store::new(cfg(&[
        ("n", 10, Aggregation::None),
        ("x", 10, Aggregation::Sum),
    ]));
    s.write(&["h", "c0"], "n", 100, 1.0).unwrap();
    s.write(&["h", "c1"], "n", 100, 1.0).unwrap();
    assert!(matches!(
        s.read(&sel(&["h"]), "n", 0, 200, 0),
        Err(StoreError::NoAggregation { matches: 2, .. })
    ));
    s.write(&["h", "c0"], "x", 100, 1.0).unwrap();
    s.write(&["h", "c1"], "x", 100, 1.0).unwrap();
    // A chain with another step (as a snapshot from another configuration would restore).
    let l = s.level(&["h", "c1"]).unwrap();
    let id = s.metric("x").unwrap().id;
    l.metrics
        .lock()
        .iter_mut()
        .find(|s| s.id == id)
        .unwrap()
        .freq = 7;
    assert!(matches!(
        s.read(&sel(&["h"]), "x", 0, 200, 0),
        Err(StoreError::DataDoesNotAlign)
    ));
}

#[test]
fn children_with_different_spans_give_nan_where_one_is_missing() {
    let s = Store::new(cfg(&[("x", 1, Aggregation::Sum)]));
    for t in 0..10 {
        s.write(&["h", "c0"], "x", t, 1.0).unwrap();
    }
    for t in 5..15 {
        s.write(&["h", "c1"], "x", t, 2.0).unwrap();
    }
    let r = s.read(&sel(&["h"]), "x", 0, 100, 0).unwrap();
    assert_eq!((r.from, r.to, r.data.len()), (0, 15, 15));
    assert!(r.data[4].is_nan());
    assert_eq!(r.data[5], 3.0);
    assert!(r.data[12].is_nan());
}

/// Sums and averages over children of random spans (some starting after the read's
/// `from`, some ending early, gaps, encoded blocks and frozen pieces after passes) against
/// the sum computed from what was written: the answer starts at `from` (or the oldest
/// sample), runs to the newest series' end, and is NaN wherever a series has no value.
/// Values are small multiples of 1/4, so the sum does not depend on the children's order.
#[test]
fn sums_over_children_of_random_spans_match_the_written_values() {
    let mut rng = crate::util::TestRng(0x5u64 << 40 | 0xC0B1);
    for round in 0..12 {
        let s = Store::new(cfg(&[
            ("s", 1, Aggregation::Sum),
            ("a", 1, Aggregation::Avg),
        ]));
        let kids = 2 + rng.below(5);
        // Per child: its first time and its values (None: not written).
        let mut series = Vec::new();
        for c in 0..kids {
            let t0 = rng.below(1500) as i64;
            let len = 1 + rng.below(1800);
            let vals: Vec<Option<f64>> = (0..len)
                .map(|i| match rng.below(40) {
                    0 if i > 0 && i + 1 < len => None,
                    1 => Some(0.0),
                    _ => Some((rng.below(4000) as f64 - 2000.0) / 4.0),
                })
                .collect();
            for (i, v) in vals.iter().enumerate() {
                if let Some(v) = v {
                    for m in ["s", "a"] {
                        s.write(&["h", &format!("c{c}")], m, t0 + i as i64, *v)
                            .unwrap();
                    }
                }
                if round % 2 == 1 && i % 97 == 0 {
                    s.compact(t0 + i as i64);
                }
            }
            series.push((t0, vals));
        }
        if round % 3 != 0 {
            s.compact(4000);
        }
        let oldest = series.iter().map(|x| x.0).min().unwrap();
        let value = |c: usize, t: i64| -> f64 {
            let (t0, v) = &series[c];
            (t - t0)
                .try_into()
                .ok()
                .and_then(|i: usize| v.get(i).copied().flatten())
                .unwrap_or(f64::NAN)
        };
        for _ in 0..20 {
            let from = rng.below(3500) as i64 - 100;
            let to = from + rng.below(3500) as i64;
            let start = from.max(oldest);
            let wanted = (to - start).max(0);
            let n = series
                .iter()
                .map(|(t0, v)| (t0 + v.len() as i64 - start).clamp(0, wanted))
                .max()
                .unwrap();
            let want: Vec<f64> = (start..start + n)
                .map(|t| (0..kids).map(|c| value(c, t)).sum())
                .collect();
            for m in ["s", "a"] {
                let r = s.read(&sel(&["h"]), m, from, to, 0).unwrap();
                let ctx = format!("round {round}, {m}, from {from}, to {to}");
                assert_eq!((r.from, r.to), (start, start + n), "{ctx}");
                let scale = if m == "a" { 1.0 / kids as f64 } else { 1.0 };
                assert_eq!(r.data.len(), want.len(), "{ctx}");
                for (i, (g, w)) in r.data.iter().zip(&want).enumerate() {
                    let w = w * scale;
                    assert!(
                        g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                        "{ctx}, step {i}: {g} != {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn stats_over_raw_samples() {
    let count = 3000i64;
    let s = Store::new(cfg(&[
        ("a", 1, Aggregation::None),
        ("b", 1, Aggregation::Avg),
    ]));
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % 100) as f64 - 50.0
    };
    let (mut samples, mut asum, mut amin, mut amax) = (0usize, 0.0, f64::MAX, f64::MIN);
    let (mut bsum, mut bmin, mut bmax) = (0.0, f64::MAX, f64::MIN);
    for i in 0..count {
        if i % 5 == 0 {
            continue;
        }
        samples += 1;
        let (a, b) = (next(), next());
        asum += a;
        amin = amin.min(a);
        amax = amax.max(a);
        bsum += 2.0 * b;
        bmin = bmin.min(b);
        bmax = bmax.max(b);
        s.write(&["cluster", "host1"], "a", i, a).unwrap();
        s.write(&["cluster", "host2", "left"], "b", i, b).unwrap();
        s.write(&["cluster", "host2", "right"], "b", i, b).unwrap();
    }
    let (st, from, to) = s.stats(&sel(&["cluster", "host1"]), "a", 0, count).unwrap();
    assert_eq!((from, to, st.samples), (1, count, samples));
    assert_eq!(
        (st.avg, st.min, st.max),
        (asum / samples as f64, amin, amax)
    );
    let (st, _, _) = s.stats(&sel(&["cluster", "host2"]), "b", 0, count).unwrap();
    assert_eq!(st.samples, samples * 2);
    assert!((st.avg - bsum / (2 * samples) as f64).abs() < 1e-9);
    assert_eq!((st.min, st.max), (bmin, bmax));
    // Stats of a read result ignore NaN.
    let r = s
        .read(&sel(&["cluster", "host1"]), "a", 0, count, 0)
        .unwrap();
    assert_eq!(r.stats().samples, samples);
}

#[test]
fn free_releases_old_buffers() {
    let s = Store::new(cfg(&[
        ("a", 1, Aggregation::None),
        ("b", 2, Aggregation::None),
    ]));
    let count = 3000i64;
    for i in 0..count {
        s.write(&["cluster", "host", "1"], "a", i, i as f64)
            .unwrap();
        s.write(&["cluster", "host", "1"], "b", i, i as f64)
            .unwrap();
    }
    s.compact(count);
    // The pass encoded the closed blocks and pooled their raw pages.
    let pooled = s.usage().pooled_buffers;
    let n = s.free(&["cluster", "host"], (BUFFER_CAP * 2) as i64 + 100);
    assert_eq!(n, 3); // two of "a", one of "b"
    let r = s
        .read(&sel(&["cluster", "host", "1"]), "a", 0, count, 0)
        .unwrap();
    assert_eq!(r.from, (BUFFER_CAP * 2) as i64);
    assert_eq!(r.to, count);
    assert_eq!(r.data.len(), count as usize - 2 * BUFFER_CAP);
    assert_eq!(r.data[0], (BUFFER_CAP * 2) as f64);
    assert_eq!(*r.data.last().unwrap(), (count - 1) as f64);
    // Writes older than the chain and than retention are rejected. Freed closed buffers were
    // encoded, so they return no page to the pool; a new series starts in a small array.
    assert!(matches!(
        s.write(&["cluster", "host", "1"], "a", 5, 1.0),
        Err(StoreError::TooOld { .. })
    ));
    assert_eq!(s.usage().pooled_buffers, pooled);
    s.write(&["cluster", "host", "2"], "a", 0, 1.0).unwrap();
    assert_eq!(s.usage().pooled_buffers, pooled);
    assert_eq!(s.free(&["no", "such"], i64::MAX), 0);
}

#[test]
fn unknown_metrics_and_names() {
    let mut c = cfg(&[]);
    c.default_frequency = 15;
    let s = Store::new(c.clone());
    s.write(&["c", "h"], "new_metric", 30, 1.0).unwrap();
    let r = s.read(&sel(&["c", "h"]), "new_metric", 0, 100, 0).unwrap();
    assert_eq!((r.resolution, r.from, r.data.clone()), (15, 30, vec![1.0]));
    c.refuse_unknown_metrics = true;
    let s = Store::new(c);
    assert!(matches!(
        s.write(&["c", "h"], "new_metric", 30, 1.0),
        Err(StoreError::UnknownMetric(_))
    ));
    for bad in ["a/b", "..", "x..y", ""] {
        assert!(
            matches!(s.level(&["c", bad]), Err(StoreError::InvalidName { .. })),
            "{bad}"
        );
    }
}

#[test]
fn resolution_downsamples_with_lttb() {
    let s = Store::new(cfg(&[("a", 10, Aggregation::None)]));
    let n = 2000i64;
    for i in 0..n {
        // A flat line with one spike: LTTB keeps it, a bucket mean would not.
        let v = if i == 1234 { 100.0 } else { 1.0 };
        s.write(&["h"], "a", i * 10, v).unwrap();
    }
    let r = s.read(&sel(&["h"]), "a", 0, n * 10, 60).unwrap();
    assert_eq!((r.resolution, r.step, r.from, r.to), (60, 10, 0, n * 10));
    assert_eq!(r.data.len() as i64, n / 6);
    assert!(r.data.contains(&100.0));
    // Shorter than cc-lib's minimum: native.
    let r = s.read(&sel(&["h"]), "a", 0, 990, 60).unwrap();
    assert_eq!((r.resolution, r.data.len()), (10, 99));
    // Not a multiple of the step: cc-lib's error.
    let e = s.read(&sel(&["h"]), "a", 0, n * 10, 25).unwrap_err();
    assert_eq!(
        e.to_string(),
        "new sampling frequency (25) must be a multiple of old frequency (10)"
    );
    // `resampling-minimum-points` (cc-backend's `resampling.minimum-points`) moves the bar:
    // at 100 the same 99 values stay native, 100 are downsampled.
    let mut c = cfg(&[("a", 10, Aggregation::None)]);
    c.resampling_minimum_points = 100;
    let s = Store::new(c);
    for i in 0..n {
        s.write(&["h"], "a", i * 10, 1.0).unwrap();
    }
    let r = s.read(&sel(&["h"]), "a", 0, 990, 60).unwrap();
    assert_eq!((r.resolution, r.data.len()), (10, 99));
    let r = s.read(&sel(&["h"]), "a", 0, 1000, 60).unwrap();
    assert_eq!(r.resolution, 60);
    assert!(r.data.len() < 100, "{}", r.data.len());
}

#[test]
fn latest_values_and_children() {
    let s = Store::new(cfg(&[("a", 10, Aggregation::None)]));
    s.write(&["c", "h1"], "a", 100, 1.0).unwrap();
    s.write(&["c", "h1"], "a", 110, 2.0).unwrap();
    s.write(&["c", "h2", "cpu0"], "a", 100, 3.0).unwrap();
    let mut seen = Vec::new();
    s.for_each_latest(|p, m, ts, v| seen.push((p.join("/"), m.to_string(), ts, v)));
    assert_eq!(
        seen,
        vec![
            ("c/h1".into(), "a".into(), 110, 2.0),
            ("c/h2/cpu0".into(), "a".into(), 100, 3.0)
        ]
    );
    let mut kids = s.list_children(&["c"]);
    kids.sort();
    assert_eq!(kids, vec!["h1", "h2"]);
    let dump = s.debug_dump(&["c"]).unwrap();
    assert_eq!(dump["children"]["h1"]["metrics"]["a"]["samples"], 2);
}

#[test]
fn concurrent_writers_and_readers() {
    let s = Arc::new(Store::new(cfg(&[("a", 1, Aggregation::Sum)])));
    let n = 20_000i64;
    let mut handles = Vec::new();
    for t in 0..4 {
        let s = s.clone();
        handles.push(std::thread::spawn(move || {
            let host = format!("host{t}");
            let level = s.level(&["cluster", &host, "cpu0"]).unwrap();
            let m = s.metric("a").unwrap();
            let mut b = WalBatch::default();
            for i in 0..n {
                s.write_to(&mut b, &level, "a", m, i, i as f64).unwrap();
            }
        }));
    }
    let reader = {
        let s = s.clone();
        std::thread::spawn(move || {
            for _ in 0..200 {
                if let Ok(r) = s.read(&sel(&["cluster"]), "a", 0, n, 0) {
                    assert!(r.data.len() as i64 <= n);
                }
            }
        })
    };
    for h in handles {
        h.join().unwrap();
    }
    reader.join().unwrap();
    for t in 0..4 {
        let r = s
            .read(
                &sel(&["cluster", &format!("host{t}"), "cpu0"]),
                "a",
                0,
                n,
                0,
            )
            .unwrap();
        assert_eq!(r.data, (0..n).map(|i| i as f64).collect::<Vec<_>>());
    }
    let all = s.read(&sel(&["cluster"]), "a", 0, n, 0).unwrap();
    assert_eq!(all.data[100], 400.0);
}

#[test]
fn level_stays_small() {
    // The memory goal (≤ 8.1 bytes per sample including the tree) depends on it: most levels
    // are hardware threads with four series.
    assert_eq!(std::mem::size_of::<Level>(), 32);
}

/// A read ending in the gap between a series' older data and its open buffer (the series
/// paused for longer than the read reaches): NaN up to the end (the open buffer's slots
/// were once indexed from before its start).
#[test]
fn a_read_ending_before_the_open_buffer_reads_the_gap_as_nan() {
    let s = Store::new(cfg(&[("x", 1, Aggregation::Sum)]));
    for t in (0..40).chain(600..610) {
        s.write(&["h", "c0"], "x", t, t as f64).unwrap();
        s.write(&["h", "c1"], "x", t, 1.0).unwrap();
    }
    let r = s.read(&sel(&["h", "c0"]), "x", 0, 300, 0).unwrap();
    assert_eq!((r.from, r.to, r.data.len()), (0, 300, 300));
    assert_eq!(r.data[39], 39.0);
    assert!(r.data[40..].iter().all(|x| x.is_nan()));
    let r = s.read(&sel(&["h"]), "x", 0, 300, 0).unwrap();
    assert_eq!((r.data[39], r.data.len()), (40.0, 300));
    assert!(r.data[40..].iter().all(|x| x.is_nan()));
}
