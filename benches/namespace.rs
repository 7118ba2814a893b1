//! PMNS benchmarks (criterion): name → PMID lookup in a static tree of 1,048,576 leaves
//! (64 hosts x 128 components x 128 metrics, names like `h12.c34.metric56`), a miss, a name
//! under a dynamic root (local mode), and PMID → names. Build time is printed once.

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group};
use wasmon::namespace::{Namespace, Pmid};

const HOSTS: u32 = 64;
const COMPONENTS: u32 = 128;
const METRICS: u32 = 128;

fn names() -> Vec<(String, Pmid)> {
    let mut v = Vec::with_capacity((HOSTS * COMPONENTS * METRICS) as usize);
    for h in 0..HOSTS {
        for c in 0..COMPONENTS {
            for m in 0..METRICS {
                // Unique PMIDs: domain = host, cluster = component, item = metric.
                v.push((
                    format!("h{h}.c{c}.metric{m}"),
                    Pmid {
                        domain: h + 1,
                        cluster: c,
                        item: m,
                    },
                ));
            }
        }
    }
    v
}

fn bench(c: &mut Criterion) {
    let all = names();
    let t = Instant::now();
    let ns = Namespace::builder()
        .names(all.iter().cloned())
        .name("dyn.root", Pmid::dynamic_root(400))
        .build()
        .expect("valid tree");
    eprintln!("namespace: built {} leaves in {:?}", ns.len(), t.elapsed());

    // Probe in a scattered order so the hash map is not walked sequentially.
    let probes: Vec<&str> = (0..4096usize)
        .map(|i| all[(i * 7_919_993) % all.len()].0.as_str())
        .collect();
    let ids: Vec<Pmid> = (0..4096usize)
        .map(|i| all[(i * 7_919_993) % all.len()].1)
        .collect();

    let mut g = c.benchmark_group("namespace");
    g.bench_function("lookup_hit_1M", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & 4095;
            black_box(ns.lookup(black_box(probes[i]), None)).unwrap()
        })
    });
    g.bench_function("lookup_miss_1M", |b| {
        b.iter(|| black_box(ns.lookup(black_box("h12.c34.nosuchmetric"), None)).unwrap_err())
    });
    g.bench_function("lookup_under_dynamic_root_local", |b| {
        b.iter(|| black_box(ns.lookup(black_box("dyn.root.some.metric"), None)).unwrap())
    });
    g.bench_function("names_of_1M", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & 4095;
            black_box(ns.names_of(black_box(ids[i]), None)).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
