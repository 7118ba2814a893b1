//! Benchmarks of `wasmon::notify`: cost of `Notifier::observe` per sample with 100k thresholds
//! registered (goal: at most 50 ns), and ingest with a stalled versus a keeping-up subscriber
//! (goal: the stalled one slows ingest by less than 5%). Owns nothing but this file.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use wasmon::notify::{Notifier, NotifierConfig, Selector, ThresholdSpec};

const THRESHOLDS: usize = 100_000;
const BATCH: usize = 1000;

fn notifier() -> Notifier {
    Notifier::new(NotifierConfig {
        queue_capacity: 1024,
        log: false,
        ..Default::default()
    })
}

/// 100k per-instance thresholds on `bench.local` (one per instance, 100 owners), plus a global
/// threshold on `bench.global` and minor/major levels on one hot instance.
fn loaded() -> (Notifier, Vec<String>) {
    let n = notifier();
    let insts: Vec<String> = (0..THRESHOLDS).map(|i| i.to_string()).collect();
    for (i, inst) in insts.iter().enumerate() {
        let spec = ThresholdSpec::rising(Selector::instance("bench.local", inst.as_str()), 1e9);
        n.add(&format!("owner{}", i % 100), spec).unwrap();
    }
    n.add(
        "g",
        ThresholdSpec::rising(Selector::any("bench.global"), 1e9),
    )
    .unwrap();
    n.add(
        "hot",
        ThresholdSpec::rising(Selector::instance("bench.hot", "4768"), 40.0),
    )
    .unwrap();
    n.add(
        "hot",
        ThresholdSpec::rising(Selector::instance("bench.hot", "4768"), 80.0),
    )
    .unwrap();
    assert_eq!(n.threshold_count(), THRESHOLDS + 3);
    (n, insts)
}

fn per_sample(c: &mut Criterion) {
    let (n, insts) = loaded();
    let mut g = c.benchmark_group("observe_100k_thresholds");
    g.throughput(Throughput::Elements(BATCH as u64));
    // One series with two thresholds, evaluated without crossing.
    g.bench_function("hot_instance", |b| {
        b.iter(|| {
            for i in 0..BATCH {
                n.observe(
                    black_box("bench.hot"),
                    black_box("4768"),
                    (i % 30) as f64,
                    i as i64,
                );
            }
        })
    });
    // A metric without thresholds: the path every other sample of the pipeline takes.
    g.bench_function("no_threshold_metric", |b| {
        b.iter(|| {
            for i in 0..BATCH {
                n.observe(
                    black_box("bench.none"),
                    black_box("4768"),
                    i as f64,
                    i as i64,
                );
            }
        })
    });
    // Walk all 100k thresholded instances (cache-unfriendly: each sample hits a cold entry).
    let mut k = 0usize;
    g.bench_function("rotating_100k_instances", |b| {
        b.iter(|| {
            for i in 0..BATCH {
                k = if k + 1 == THRESHOLDS { 0 } else { k + 1 };
                n.observe("bench.local", &insts[k], i as f64, i as i64);
            }
        })
    });
    // One global threshold, instances rotating over 100k (entries exist after the first lap).
    for inst in &insts {
        n.observe("bench.global", inst, 0.0, 0);
    }
    let mut k = 0usize;
    g.bench_function("global_threshold_100k_instances", |b| {
        b.iter(|| {
            for i in 0..BATCH {
                k = if k + 1 == THRESHOLDS { 0 } else { k + 1 };
                n.observe("bench.global", &insts[k], i as f64, i as i64);
            }
        })
    });
    g.finish();
}

/// Every other sample crosses a threshold: ingest with a consumer that keeps up versus one
/// that never reads (its queue stays full, every further notification is dropped and counted).
fn stalled_subscriber(c: &mut Criterion) {
    let mut g = c.benchmark_group("ingest_with_subscriber");
    g.throughput(Throughput::Elements(BATCH as u64));
    for stalled in [false, true] {
        let n = Arc::new(notifier());
        n.add(
            "s",
            ThresholdSpec::rising(Selector::instance("m", "1"), 1.0),
        )
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = (!stalled).then(|| {
            let (n, stop) = (Arc::clone(&n), Arc::clone(&stop));
            std::thread::spawn(move || {
                let s = n.subscriber("s");
                while !stop.load(Ordering::Relaxed) {
                    if s.try_recv().is_none() {
                        std::thread::sleep(Duration::from_micros(50));
                    }
                }
            })
        });
        let name = if stalled { "stalled" } else { "keeping_up" };
        g.bench_function(name, |b| {
            b.iter(|| {
                for i in 0..BATCH {
                    n.observe("m", "1", (i % 2) as f64 * 2.0, i as i64);
                }
            })
        });
        stop.store(true, Ordering::Relaxed);
        if let Some(t) = consumer {
            t.join().unwrap();
        }
        let st = n.subscriber("s").stats();
        assert_eq!(
            st.sent,
            st.delivered + st.dropped + st.queued,
            "drops counted exactly"
        );
        eprintln!(
            "{name}: sent {} delivered {} dropped {} queued {}",
            st.sent, st.delivered, st.dropped, st.queued
        );
    }
    g.finish();
}

criterion_group!(benches, per_sample, stalled_subscriber);
criterion_main!(benches);
