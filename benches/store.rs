//! Buffer-store benchmarks (criterion): line-protocol body → store per line, write per sample
//! (16,896 series x 1024 steps: 64 hosts x (8 node metrics + 64 hwthreads x 4 metrics)),
//! bytes per sample at full buffers (printed, measured with a counting allocator), reading one
//! series of 1024 points, averaging 64 hwthreads x 1024 points, and the same samples through a
//! pipeline's `store` sink (the write path of remote write, OTLP and `/samples`).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use criterion::{Criterion, Throughput, criterion_group};
use wasmon::ingest::ingest;
use wasmon::lineproto::{for_each_line, parse_lines};
use wasmon::pipeline::levels::Levels;
use wasmon::pipeline::{Sink, StoreSink};
use wasmon::sample::{Metadata, Sample};
use wasmon::store::{
    Aggregation, BUFFER_CAP, Level, MetricConfig, MetricInfo, SelectorElement, Store, StoreConfig,
    WalBatch, selector,
};

mod store_common;
use store_common::{CPU_METRICS, Counting, LIVE, NODE_METRICS};

#[global_allocator]
static A: Counting = Counting;

const HOSTS: usize = 64;
const THREADS: usize = 64;
const STEPS: i64 = 1024;
const FREQ: i64 = 60;
/// Start on a buffer boundary so 1024 steps fill exactly two buffers per series.
const T0: i64 = FREQ * BUFFER_CAP as i64 * 3_000;

fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    for m in NODE_METRICS {
        c.metrics.insert(
            m.into(),
            MetricConfig {
                frequency: FREQ as u64,
                aggregation: Aggregation::Sum,
                precision: None,
            },
        );
    }
    for m in CPU_METRICS {
        c.metrics.insert(
            m.into(),
            MetricConfig {
                frequency: FREQ as u64,
                aggregation: Aggregation::Avg,
                precision: None,
            },
        );
    }
    c
}

/// Every series as (level, metric name, metric).
fn series(store: &Store) -> Vec<(Arc<Level>, &'static str, MetricInfo)> {
    let mut out = Vec::new();
    for h in 0..HOSTS {
        let host = format!("host{h}");
        let hl = store.level(&["bench", &host]).unwrap();
        for m in NODE_METRICS {
            out.push((hl.clone(), m, store.metric(m).unwrap()));
        }
        for t in 0..THREADS {
            let tl = hl.child(&format!("hwthread{t}")).unwrap();
            for m in CPU_METRICS {
                out.push((tl.clone(), m, store.metric(m).unwrap()));
            }
        }
    }
    out
}

/// 1,024 steps of every series, with the store's background pass after each step (a step is
/// the daemon's 60 s between two passes).
fn fill(store: &Store, all: &[(Arc<Level>, &'static str, MetricInfo)]) {
    let mut b = WalBatch::default();
    for step in 0..STEPS {
        for (i, (l, name, m)) in all.iter().enumerate() {
            store
                .write_to(
                    &mut b,
                    l,
                    name,
                    *m,
                    T0 + step * FREQ,
                    (i as i64 + step) as f64,
                )
                .unwrap();
        }
        // After the step's writes: a pass before a level's first write would find it
        // empty and take it out of the tree.
        store.compact(T0 + step * FREQ);
    }
}

fn body(ts: i64) -> Vec<u8> {
    let mut s = String::new();
    for h in 0..HOSTS {
        for m in NODE_METRICS {
            s.push_str(&format!(
                "{m},cluster=bench,hostname=host{h},type=node value={h}.5 {ts}\n"
            ));
        }
        for t in 0..THREADS {
            for m in CPU_METRICS {
                s.push_str(&format!("{m},cluster=bench,hostname=host{h},type=hwthread,type-id={t} value={t}.25 {ts}\n"));
            }
        }
    }
    s.into_bytes()
}

/// [`body`]'s samples as a pipeline's: the level's tags as each sample's metadata.
fn pipeline_samples(ts: i64) -> Vec<Sample> {
    let meta = |pairs: &[(&str, String)]| {
        Metadata::new(
            pairs
                .iter()
                .map(|(k, v)| (Arc::from(*k), Arc::from(v.as_str())))
                .collect(),
        )
    };
    let at = |m: &str, v: f64, metadata: &Metadata| Sample {
        metadata: metadata.clone(),
        ..Sample::new(m, "", v, ts * 1_000_000_000)
    };
    let mut out = Vec::new();
    for h in 0..HOSTS {
        let host = |t: &str| {
            let mut p = vec![
                ("cluster", "bench".to_string()),
                ("hostname", format!("host{h}")),
                ("type", t.to_string()),
            ];
            if t != "node" {
                p.push(("type-id", String::new()));
            }
            p
        };
        let node = meta(&host("node"));
        for m in NODE_METRICS {
            out.push(at(m, h as f64 + 0.5, &node));
        }
        for t in 0..THREADS {
            let mut pairs = host("hwthread");
            pairs[3].1 = t.to_string();
            let thread = meta(&pairs);
            for m in CPU_METRICS {
                out.push(at(m, t as f64 + 0.25, &thread));
            }
        }
    }
    out
}

fn memory_figure() {
    let before = LIVE.load(Ordering::Relaxed);
    let store = Store::new(config());
    let all = series(&store);
    // The bench's own handle list is not store memory.
    let handles = (all.capacity() * std::mem::size_of::<(Arc<Level>, &str, MetricInfo)>()) as isize;
    let tree = LIVE.load(Ordering::Relaxed) - before - handles;
    fill(&store, &all);
    let bytes = LIVE.load(Ordering::Relaxed) - before - handles;
    let samples = all.len() as f64 * STEPS as f64;
    let u = store.usage();
    println!(
        "memory: {} series x {} steps: {:.3} bytes/sample including levels and maps ({} bytes live, {} buffers)",
        u.series,
        STEPS,
        bytes as f64 / samples,
        bytes,
        u.buffers
    );
    println!(
        "memory: level tree without data: {:.1} bytes per series",
        tree as f64 / all.len() as f64
    );
    // Marginal cost of further full buffers (the steady state of a long retention window).
    let mid = LIVE.load(Ordering::Relaxed);
    let mut b = WalBatch::default();
    for step in STEPS..2 * STEPS {
        for (l, name, m) in &all {
            store
                .write_to(&mut b, l, name, *m, T0 + step * FREQ, 1.0)
                .unwrap();
        }
        store.compact(T0 + step * FREQ);
    }
    let delta = LIVE.load(Ordering::Relaxed) - mid;
    println!(
        "memory: next {} steps: {:.3} bytes/sample at full buffers",
        STEPS,
        delta as f64 / samples
    );
}

fn benches(c: &mut Criterion) {
    let lines = HOSTS * (NODE_METRICS.len() + THREADS * CPU_METRICS.len());
    let mut g = c.benchmark_group("lineproto");
    g.throughput(Throughput::Elements(lines as u64));
    let b = body(T0);
    // What ingest uses: each line handed over by reference.
    g.bench_function("parse_only_per_line", |bench| {
        bench.iter(|| {
            let mut n = 0;
            for_each_line(black_box(&b), |l| n += l.is_ok() as usize);
            n
        })
    });
    // The iterator moves each (200-byte) line through an `Option<Result<..>>`.
    g.bench_function("parse_only_iterator_per_line", |bench| {
        bench.iter(|| parse_lines(black_box(&b)).filter(|l| l.is_ok()).count())
    });
    let store = Store::new(config());
    g.bench_function("body_to_store_per_line", |bench| {
        bench.iter(|| {
            let out = ingest(&store, black_box(&b), None, 0);
            assert_eq!(out.stored, lines);
        })
    });
    let dir = tempfile::tempdir().unwrap();
    let wal_store = Store::open(config(), dir.path()).unwrap();
    g.bench_function("body_to_store_with_wal_per_line", |bench| {
        bench.iter(|| ingest(&wal_store, black_box(&b), None, 0).stored)
    });
    g.finish();
    drop(wal_store);

    // The same samples as a pipeline hands them to its `store` sink (what remote write, OTLP
    // and `/samples` come to): one metadata set per level, as a receiver's decoder shares them.
    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Elements(lines as u64));
    let samples = pipeline_samples(T0);
    let sink = StoreSink {
        store: Arc::new(Store::new(config())),
        default_cluster: "bench".into(),
        hostname: "me".into(),
        levels: Levels::default(),
    };
    g.bench_function("store_sink_per_sample", |bench| {
        bench.iter(|| sink.accept("p", black_box(&samples)))
    });
    g.finish();

    let store = Store::new(config());
    let all = series(&store);
    let mut g = c.benchmark_group("write");
    g.throughput(Throughput::Elements(all.len() as u64));
    let mut step = 0i64;
    g.bench_function("per_sample_cached_level", |bench| {
        let mut batch = WalBatch::default();
        bench.iter(|| {
            // Wrap after 1024 steps so memory stays bounded (later rounds overwrite).
            let ts = T0 + (step % STEPS) * FREQ;
            step += 1;
            for (l, name, m) in &all {
                store.write_to(&mut batch, l, name, *m, ts, 1.0).unwrap();
            }
        })
    });
    // The steady state of ingest: every sample is the next step of its series (mostly the
    // append fast path), with retention freeing a buffer per series every 512 steps and new
    // buffers coming from the pool (both included in the time).
    {
        let mut cfg = config();
        cfg.buffer_pool_max = all.len() * 2;
        let store = Store::new(cfg);
        let all = series(&store);
        let mut step = 0i64;
        g.bench_function("per_sample_append", |bench| {
            let mut batch = WalBatch::default();
            bench.iter(|| {
                let ts = T0 + step * FREQ;
                step += 1;
                for (l, name, m) in &all {
                    store.write_to(&mut batch, l, name, *m, ts, 1.0).unwrap();
                }
                if step % BUFFER_CAP as i64 == 0 {
                    store.free(&[], ts - 2 * BUFFER_CAP as i64 * FREQ);
                }
            })
        });
    }
    // The background pass that encodes what the appends left raw (every 60 s in the daemon),
    // after 6 steps of every series (a minute at 10 s): its time per sample appended.
    {
        let store = Store::new(config());
        let all = series(&store);
        let mut step = 0i64;
        let mut batch = WalBatch::default();
        g.throughput(Throughput::Elements(6 * all.len() as u64));
        g.bench_function("background_pass_per_sample", |bench| {
            bench.iter_custom(|iters| {
                let mut t = std::time::Duration::ZERO;
                for _ in 0..iters {
                    for _ in 0..6 {
                        let ts = T0 + step * FREQ;
                        step += 1;
                        for (l, name, m) in &all {
                            store
                                .write_to(&mut batch, l, name, *m, ts, step as f64)
                                .unwrap();
                        }
                        if step % BUFFER_CAP as i64 == 0 {
                            store.free(&[], ts - 2 * BUFFER_CAP as i64 * FREQ);
                        }
                    }
                    let start = std::time::Instant::now();
                    store.compact(T0 + step * FREQ);
                    t += start.elapsed();
                }
                t
            })
        });
        g.throughput(Throughput::Elements(all.len() as u64));
    }
    let paths: Vec<(Vec<String>, &str)> = (0..HOSTS)
        .flat_map(|h| {
            let mut v: Vec<(Vec<String>, &str)> = NODE_METRICS
                .iter()
                .map(|m| (vec!["bench".into(), format!("host{h}")], *m))
                .collect();
            for t in 0..THREADS {
                for m in CPU_METRICS {
                    v.push((
                        vec!["bench".into(), format!("host{h}"), format!("hwthread{t}")],
                        m,
                    ));
                }
            }
            v
        })
        .collect();
    g.bench_function("per_sample_by_path", |bench| {
        bench.iter(|| {
            let ts = T0 + (step % STEPS) * FREQ;
            step += 1;
            for (p, m) in &paths {
                let p: [&str; 3] = [&p[0], &p[1], p.get(2).map_or("", |s| s)];
                let path = if p[2].is_empty() { &p[..2] } else { &p[..] };
                store.write(path, m, ts, 1.0).unwrap();
            }
        })
    });
    g.finish();

    fill(&store, &all);
    let mut g = c.benchmark_group("read");
    let one = selector(&["bench", "host3", "hwthread7"]);
    g.bench_function("one_series_1024_points", |bench| {
        bench.iter(|| {
            let r = store
                .read(black_box(&one), "flops_any", T0, T0 + STEPS * FREQ, 0)
                .unwrap();
            assert_eq!(r.data.len(), STEPS as usize);
        })
    });
    let host: Vec<SelectorElement> = selector(&["bench", "host3"]);
    g.bench_function("avg_64_hwthreads_1024_points", |bench| {
        bench.iter(|| {
            let r = store
                .read(black_box(&host), "flops_any", T0, T0 + STEPS * FREQ, 0)
                .unwrap();
            assert_eq!(r.data.len(), STEPS as usize);
        })
    });
    g.finish();
}

criterion_group!(store_benches, benches);

fn main() {
    memory_figure();
    store_benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
