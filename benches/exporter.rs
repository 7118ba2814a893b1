//! The `otlp` exporter guest in wasmtime against the same encoding compiled natively (the
//! `otlp` crate's `Exporter::encode`, the very code the guest runs, without the boundary):
//! nanoseconds per sample for batches of 512 and 4096, medians, and the ratio. Not criterion:
//! the two are measured in alternating rounds of one run, so a busy machine slows both alike.
//!
//! Before timing, the guest's body must equal the native one byte for byte, and wasmon's own
//! OTLP receiver must read it back as the samples sent (the round trip exact).
//!
//! Workload: 64 hosts x 8 metrics (4 gauges, 2 cumulative, 2 delta, with units), each sample's
//! resource its host and its metadata `hostname` and `cluster` (one set per host, shared).
//!
//! `cargo bench -p wasmon-benches --bench exporter`; `EXPORTER_ROUNDS` rounds (default 31),
//! `EXPORTER_WASM` another build of the component (the native side stays the one compiled in,
//! so the bodies must still match).

use std::sync::Arc;
use std::time::Instant;

use wasmon::host::{ExporterWorld, GuestConfig, Image, Runtime};
use wasmon::ingest::Limits;
use wasmon::ingest::otlp::decode_protobuf;
use wasmon::sample::{Kind, Metadata, Name, Sample};
use wasmon_guest::exporter::Exporter;

const HOSTS: usize = 64;
const METRICS: [(&str, &str, Kind); 8] = [
    ("cpu_load", "", Kind::Gauge),
    ("mem_used", "B", Kind::Gauge),
    ("temperature", "Cel", Kind::Gauge),
    ("power", "W", Kind::Gauge),
    ("cpu_time", "ns", Kind::Cumulative),
    ("net_rx", "B", Kind::Cumulative),
    ("disk_io", "B", Kind::Delta),
    ("jobs", "", Kind::Delta),
];
const T0: i64 = 1_700_000_000_123_456_789;

/// `n` samples on the host: a step of every series, then the next step.
fn host_samples(n: usize) -> Vec<Sample> {
    let hosts: Vec<(Arc<str>, Metadata)> = (0..HOSTS)
        .map(|h| {
            let host: Arc<str> = format!("node{h:03}").into();
            let meta = Metadata::new(vec![
                ("hostname".into(), host.clone()),
                ("cluster".into(), "alex".into()),
            ]);
            (host, meta)
        })
        .collect();
    (0..n)
        .map(|i| {
            let (name, unit, kind) = METRICS[i % METRICS.len()];
            let (host, meta) = &hosts[i / METRICS.len() % HOSTS];
            let step = (i / (METRICS.len() * HOSTS)) as i64;
            Sample {
                name: Name::new(name),
                resource: host.clone(),
                unit: Name::new(unit),
                kind,
                value: (i as f64).mul_add(0.37, -3.0),
                timestamp_ns: T0 + step * 10_000_000_000,
                metadata: meta.clone(),
            }
        })
        .collect()
}

/// The same samples as the guest's SDK hands them over: one `Rc` per distinct string.
fn guest_samples(host: &[Sample]) -> Vec<wasmon_guest::Sample> {
    let mut strings: std::collections::HashMap<String, wasmon_guest::Str> = Default::default();
    let mut s = |t: &str| {
        strings
            .entry(t.to_string())
            .or_insert_with(|| t.into())
            .clone()
    };
    let mut sets: std::collections::HashMap<*const (Arc<str>, Arc<str>), wasmon_guest::Metadata> =
        Default::default();
    host.iter()
        .map(|x| {
            let pairs = x.metadata.pairs();
            let metadata = sets
                .entry(pairs.as_ptr())
                .or_insert_with(|| {
                    wasmon_guest::Metadata::new(pairs.iter().map(|(k, v)| (s(k), s(v))).collect())
                })
                .clone();
            wasmon_guest::Sample {
                name: s(x.name.as_str()),
                resource: s(&x.resource),
                unit: s(x.unit.as_str()),
                kind: match x.kind {
                    Kind::Gauge => wasmon_guest::Kind::Gauge,
                    Kind::Delta => wasmon_guest::Kind::Delta,
                    Kind::Cumulative => wasmon_guest::Kind::Cumulative,
                },
                value: x.value,
                timestamp_ns: x.timestamp_ns,
                metadata,
            }
        })
        .collect()
}

/// wasmon's receiver reads `body` back as `sent` (in the encoder's metric order; a resource
/// travels as the `wasmon.resource` attribute until the receiver maps it back).
fn check_round_trip(body: &[u8], sent: &[Sample]) {
    let limits = Limits {
        max_samples: 1 << 20,
        max_body: 1 << 30,
    };
    let Ok(back) = decode_protobuf(body, limits) else {
        panic!("wasmon's receiver refused the body")
    };
    assert_eq!(back.rejected, 0, "{}", back.error_message);
    let key = |s: &Sample| (s.name.as_str(), s.unit.as_str(), s.kind);
    let mut expected: Vec<&Sample> = sent.iter().collect();
    let order: Vec<_> = {
        let mut seen = Vec::new();
        for s in sent {
            if !seen.contains(&key(s)) {
                seen.push(key(s));
            }
        }
        seen
    };
    expected.sort_by_key(|s| order.iter().position(|k| *k == key(s)));
    assert_eq!(back.samples.len(), expected.len());
    for (got, want) in back.samples.iter().zip(expected) {
        let mut want = want.clone();
        if got.resource.is_empty() {
            let mut pairs = want.metadata.pairs().to_vec();
            pairs.push(("wasmon.resource".into(), want.resource.clone()));
            want.metadata = Metadata::new(pairs);
            want.resource = "".into();
        }
        assert_eq!(*got, want);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Nanoseconds per sample of `f` over enough calls to take about 20 ms.
fn per_sample(n: usize, calls: usize, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        f();
    }
    start.elapsed().as_nanos() as f64 / (calls * n) as f64
}

fn main() {
    let rounds: usize = std::env::var("EXPORTER_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(31);
    let rt = Runtime::new(None).unwrap();
    let path = std::env::var("EXPORTER_WASM")
        .unwrap_or_else(|_| format!("{}/otlp.wasm", wasmon::BUILT_GUESTS_DIR));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let compiled = rt.compile(&bytes, "otlp").unwrap();
    let params = r#"{"resource": {"service.name": "wasmon-bench"}}"#;
    let mut wasm =
        Image::<ExporterWorld>::load(&rt, &compiled, GuestConfig::new("otlp", params)).unwrap();
    let mut native = otlp::Otlp::configure(&wasmon_guest::parse_params(params).unwrap()).unwrap();

    println!("| batch | `otlp` guest in wasmtime | native (same crate) | ratio |");
    println!("|---|---|---|---|");
    for n in [512, 4096] {
        let host = host_samples(n);
        let guest = guest_samples(&host);
        let requests = wasm.encode(&host).unwrap().unwrap();
        let mut out = Vec::new();
        native.encode(guest.iter().cloned(), &mut out).unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(
            requests[0].body, out[0].body,
            "guest and native bodies differ"
        );
        // Without the `resource` parameter the receiver's samples carry no extra metadata.
        check_round_trip(&otlp::encode_request(&guest, &Default::default()), &host);

        let calls = (200_000 / n).max(1);
        let (mut w, mut nat) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            w.push(per_sample(n, calls, || {
                std::hint::black_box(wasm.encode(&host).unwrap().unwrap());
            }));
            nat.push(per_sample(n, calls, || {
                let mut out = Vec::new();
                native.encode(guest.iter().cloned(), &mut out).unwrap();
                std::hint::black_box(out);
            }));
        }
        let (w, nat) = (median(w), median(nat));
        println!(
            "| {n} samples ({} B body) | {w:.1} ns/sample | {nat:.1} ns/sample | {:.2}x |",
            out[0].body.len(),
            w / nat
        );
    }
}
