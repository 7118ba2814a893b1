//! The same transform (the `template` scale transformer) as a Rust, Python, JavaScript and C
//! guest, against native Rust, on the 512-sample batch; plus each component's size, compile
//! time, instantiation time and linear memory per instance (issue 11).
//! `cargo bench -p wasmon-benches --bench polyglot`. The Python, JS and C components are built
//! from `guests/` by the kit (`wasmon guest build`), with toolchains in `target/guest-toolchains`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use wasmon::host::{Compiled, GuestConfig, Image, Runtime, TransformerWorld};
use wasmon::sample::{Name, Sample};

const BATCH: usize = 512;
const PARAMS: &str = r#"{"factor": 0.001, "prefix": "disk.", "unit": "KB"}"#;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The component of `lang`'s template (Rust: the bundled one, built by runtime/build.rs).
fn component(lang: &str) -> Vec<u8> {
    let path = if lang == "rust" {
        PathBuf::from(wasmon::BUILT_GUESTS_DIR).join("template.wasm")
    } else {
        let target = repo().join("target");
        wasmon::kit::build(
            &repo().join("guests").join(lang).join("template"),
            Some(&target.join("polyglot/built").join(lang)),
            &target.join("guest-toolchains"),
        )
        .unwrap_or_else(|e| panic!("building the {lang} template: {e:#}"))
        .path
    };
    std::fs::read(&path).unwrap()
}

/// Half the samples under the `disk.` prefix, 256 resources, as a source produces them.
fn batch() -> Vec<Sample> {
    let names = [Name::new("disk.read"), Name::new("cpu.busy")];
    let resources: Vec<Arc<str>> = (0..BATCH / 2).map(|i| format!("dev{i}").into()).collect();
    (0..BATCH)
        .map(|i| Sample {
            name: names[i % 2],
            resource: resources[i / 2].clone(),
            ..Sample::new("", "", 1000.0 + i as f64, 1_700_000_000_000_000_000)
        })
        .collect()
}

fn load(
    rt: &Arc<Runtime>,
    compiled: &Compiled,
    memory: u64,
) -> anyhow::Result<wasmon::host::TransformerInstance> {
    let mut cfg = GuestConfig::new("template", PARAMS);
    cfg.memory = memory;
    cfg.deadline = Duration::from_secs(5);
    Image::<TransformerWorld>::load(rt, compiled, cfg)
}

/// The smallest linear-memory cap (64 KiB steps) under which the guest loads and handles a
/// 512-sample batch: what an instance needs.
fn memory_needed(rt: &Arc<Runtime>, compiled: &Compiled) -> u64 {
    let b = batch();
    let fits = |cap: u64| load(rt, compiled, cap).is_ok_and(|mut g| g.handle(&b).is_ok());
    let (mut lo, mut hi) = (0u64, 1u64 << 30);
    assert!(fits(hi));
    while hi - lo > 65536 {
        let mid = (lo + hi) / 2 / 65536 * 65536;
        if fits(mid) { hi = mid } else { lo = mid }
    }
    hi
}

fn polyglot(c: &mut Criterion) {
    let b = batch();
    let mut group = c.benchmark_group("template_512");
    group.throughput(Throughput::Elements(BATCH as u64));
    // Native baseline: the same scaling over the host's own samples, no boundary.
    let prefix = "disk.";
    let unit = Name::new("KB");
    group.bench_function(BenchmarkId::new("native", BATCH), |bench| {
        bench.iter(|| {
            let out: Vec<Sample> = b
                .iter()
                .map(|s| {
                    let mut s = s.clone();
                    if s.name.as_str().starts_with(prefix) {
                        s.value *= 0.001;
                        s.unit = unit;
                    }
                    s
                })
                .collect();
            assert_eq!(out.len(), BATCH);
        })
    });
    for lang in ["rust", "c", "js", "python"] {
        let bytes = component(lang);
        // Compile time: a runtime without a disk cache compiles from scratch (once: tens of
        // seconds for the big ones).
        let rt = Runtime::new(None).unwrap();
        let t = Instant::now();
        let compiled = rt.compile(&bytes, lang).unwrap();
        let compile = t.elapsed();
        let t = Instant::now();
        let n = 5;
        for _ in 0..n {
            load(&rt, &compiled, 256 << 20).unwrap();
        }
        let instantiate = t.elapsed() / n;
        let memory = memory_needed(&rt, &compiled);
        eprintln!(
            "{lang}: component {:.2} MB, compile {:.2} s, instantiate+configure {:.2} ms, linear memory per instance {:.1} MiB",
            bytes.len() as f64 / 1e6,
            compile.as_secs_f64(),
            instantiate.as_secs_f64() * 1e3,
            memory as f64 / (1 << 20) as f64
        );
        let mut g = load(&rt, &compiled, 256 << 20).unwrap();
        group.bench_function(BenchmarkId::new(lang, BATCH), |bench| {
            bench.iter(|| assert_eq!(g.handle(&b).unwrap().len(), BATCH))
        });
    }
    group.finish();
}

criterion_group!(benches, polyglot);
criterion_main!(benches);
