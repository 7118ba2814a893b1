//! The guest boundary: `arithmetic` in WASM against the same transformer as native Rust
//! (512-sample batches), the cost of an empty `handle` call, and the latency of swapping in a
//! precompiled component. `cargo bench -p wasmon-benches --bench guest`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use wasmon::host::{GuestConfig, Image, Runtime, TransformerWorld};
use wasmon::pipeline::{Pipeline, Sink, Swap};
use wasmon::sample::{Name, Sample};
use wasmon_guest::Transformer;

const EXPR: &str = "100.0 * $(memory.usage) / $(memory)";
const BATCH: usize = 512;

fn params() -> serde_json::Value {
    serde_json::json!({"target": {"name": "memory_util", "unit": "%", "type": "gauge", "expr": EXPR}})
}

fn guest(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/{name}.wasm", wasmon::BUILT_GUESTS_DIR)).unwrap()
}

/// 256 resources x (memory, memory.usage): one flush yields 256 samples. Resources are shared
/// as a source that keeps them produces them (and as `guest_batch` has them).
fn host_batch() -> Vec<Sample> {
    let names = [Name::new("memory"), Name::new("memory.usage")];
    let resources: Vec<Arc<str>> = (0..BATCH / 2).map(|i| format!("host{i}").into()).collect();
    (0..BATCH)
        .map(|i| Sample {
            name: names[i % 2],
            resource: resources[i / 2].clone(),
            ..Sample::new("", "", 1000.0 + i as f64, 1_700_000_000_000_000_000)
        })
        .collect()
}

fn guest_batch() -> Vec<wasmon_guest::Sample> {
    // Shared names as the host's decoder produces them: one allocation per distinct string.
    let names: [wasmon_guest::Str; 2] = ["memory".into(), "memory.usage".into()];
    let resources: Vec<wasmon_guest::Str> =
        (0..BATCH / 2).map(|i| format!("host{i}").into()).collect();
    (0..BATCH)
        .map(|i| wasmon_guest::Sample {
            name: names[i % 2].clone(),
            resource: resources[i / 2].clone(),
            unit: "".into(),
            kind: wasmon_guest::Kind::Gauge,
            value: 1000.0 + i as f64,
            timestamp_ns: 1_700_000_000_000_000_000,
            metadata: Default::default(),
        })
        .collect()
}

fn arithmetic(c: &mut Criterion) {
    let rt = Runtime::new(None).unwrap();
    let compiled = rt.compile(&guest("arithmetic"), "arithmetic").unwrap();
    let mut wasm = Image::<TransformerWorld>::load(
        &rt,
        &compiled,
        GuestConfig::new("arithmetic", &params().to_string()),
    )
    .unwrap();
    let batch = host_batch();

    let mut group = c.benchmark_group("arithmetic_512");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function(BenchmarkId::new("wasm", BATCH), |b| {
        b.iter(|| {
            wasm.handle(&batch).unwrap();
            assert_eq!(wasm.flush().unwrap().len(), BATCH / 2);
        })
    });
    let params = match params() {
        serde_json::Value::Object(m) => m,
        _ => unreachable!(),
    };
    let mut native = wasmon_ceilometer::Arithmetic::configure(&params).unwrap();
    let input = guest_batch();
    group.bench_function(BenchmarkId::new("native", BATCH), |b| {
        b.iter(|| {
            let mut out = Vec::new();
            native.handle(input.iter().cloned(), &mut out);
            native.flush(&mut out);
            assert_eq!(out.len(), BATCH / 2);
        })
    });
    group.finish();
}

/// Where a 512-sample round trip goes: the host's interning encode alone, and a guest that
/// only decodes and re-encodes (the template with factor 1: no arithmetic).
fn boundary(c: &mut Criterion) {
    let batch = host_batch();
    let mut group = c.benchmark_group("boundary_512");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut table = wasmon::host::StringTable::default();
    group.bench_function("host_encode", |b| {
        b.iter(|| wasmon::host::encode(&batch, &mut table))
    });
    let rt = Runtime::new(None).unwrap();
    let compiled = rt.compile(&guest("template"), "template").unwrap();
    let mut g = Image::<TransformerWorld>::load(&rt, &compiled, GuestConfig::new("template", "{}"))
        .unwrap();
    group.bench_function("passthrough_guest", |b| {
        b.iter(|| assert_eq!(g.handle(&batch).unwrap().len(), BATCH))
    });
    group.finish();
}

fn empty_call(c: &mut Criterion) {
    let rt = Runtime::new(None).unwrap();
    let compiled = rt.compile(&guest("template"), "template").unwrap();
    let mut g = Image::<TransformerWorld>::load(&rt, &compiled, GuestConfig::new("template", "{}"))
        .unwrap();
    c.bench_function("empty_handle_call", |b| b.iter(|| g.handle(&[]).unwrap()));
}

struct Null;
impl Sink for Null {
    fn name(&self) -> &str {
        "null"
    }
    fn accept(&self, _: &str, _: &[Sample]) {}
}

/// From a component already in the disk cache to the new version running in a pipeline:
/// load (deserialize) + link + instantiate + configure + swap between batches.
fn swap(c: &mut Criterion) {
    let cache = tempfile::tempdir().unwrap();
    let rt = Runtime::new(Some(cache.path().to_path_buf())).unwrap();
    let bytes = guest("arithmetic");
    rt.compile(&bytes, "arithmetic").unwrap(); // warms the disk cache
    let load = |tag: u64| {
        let compiled = rt.compile(&bytes, "arithmetic").unwrap();
        let mut p = params();
        p["target"]["name"] = format!("v{tag}").into();
        Image::<TransformerWorld>::load(
            &rt,
            &compiled,
            GuestConfig::new("arithmetic", &p.to_string()),
        )
        .unwrap()
    };
    let pipeline = Pipeline::start(
        "bench",
        vec![load(0)],
        None,
        vec![Arc::new(Null) as Arc<dyn Sink>],
    );
    let mut n = 0;
    c.bench_function("swap_precompiled_component", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                let start = Instant::now();
                let chain = vec![load(n)];
                let swap = Swap {
                    chain,
                    sinks: None,
                    flush: None.into(),
                    fallback: None,
                };
                pipeline.swap(swap).unwrap();
                total += start.elapsed();
            }
            total
        })
    });
}

criterion_group!(benches, arithmetic, boundary, empty_call, swap);
criterion_main!(benches);
