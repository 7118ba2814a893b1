//! Benchmark of `wasmon::fabric` at the RFC's scale: one agent owning a simulated fat-tree of
//! 1,064,960 ports (k=128, 32 pods, 8 hosts per edge switch: 24,576 nodes) × 16 counters.
//! - `epoch/engine`: one epoch of the engine (rates with wrap/saturation/clear handling,
//!   change filter, traps, one histogram per counter), quiet fabric and 1 % busy ports;
//! - `epoch/sequential-pass`: a plain pass summing the same 17M counters (the floor);
//! - bytes and messages sent up the tree per epoch, quiet vs 1 % busy (printed);
//! - takeover after an agent stops renewing, as a multiple of the lease (printed; needs
//!   Debian's nats-server, skipped with a note when it is missing).
//! Goal: an engine epoch within 25 ms on one core.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use wasmon::fabric::wire::{DataBatch, DataEntry};
use wasmon::fabric::{
    CounterSource, Engine, FabricConfig, Output, SimFabric, SimSource, SimSpec, Thresholds,
};

fn spec(busy_ppm: u32) -> SimSpec {
    SimSpec {
        radix: 128,
        pods: 32,
        hosts_per_edge: 8,
        seed: 3,
        epoch: Duration::from_secs(10),
        busy_ppm,
        error_ppm: 20,
        flap_ppm: 5,
        wrap_ppm: 1000,
    }
}

struct Rig {
    fabric: Arc<SimFabric>,
    src: SimSource,
    engine: Engine,
    out: Output,
    ports: Vec<u32>,
    epoch: i64,
}

impl Rig {
    fn new(busy_ppm: u32) -> Rig {
        let fabric = Arc::new(SimFabric::create(None, &spec(busy_ppm)).unwrap());
        let src = SimSource::new(fabric.clone());
        let schema = src.schema().to_vec();
        let cfg = FabricConfig::default();
        let t: Thresholds = cfg.thresholds(&schema).unwrap();
        let mut engine = Engine::new(&schema, t, true);
        let ports: Vec<u32> = (0..fabric.port_count() as u32).collect();
        engine.set_ports(ports.clone());
        let mut r = Rig {
            fabric,
            src,
            engine,
            out: Output::default(),
            ports,
            epoch: 0,
        };
        // Two epochs so every port has a baseline.
        r.next_reading();
        r.engine.process(&mut r.out);
        r.next_reading();
        r
    }

    /// Tick the fabric and read every port (not timed).
    fn next_reading(&mut self) {
        self.epoch += 1;
        self.fabric.tick(self.epoch * 10_000_000_000);
        self.src
            .read(&self.ports, self.engine.reading_mut())
            .unwrap();
    }

    /// What goes up the tree for the last processed epoch: (bytes, messages).
    fn upstream(&self) -> (usize, usize) {
        let schema = self.engine.schema();
        let batch = DataBatch {
            agent: "bench".into(),
            epoch: self.out.epoch,
            ts_ns: self.out.ts_ns,
            entries: self
                .out
                .reports
                .iter()
                .map(|r| {
                    let p = self.ports[r.slot as usize] as usize;
                    DataEntry {
                        resource: format!(
                            "{}/{}",
                            self.src.node_name(self.src.port_node(p)),
                            self.src.port_number(p)
                        ),
                        counter: schema[r.counter as usize].name.into(),
                        change: r.change,
                        rate: r.rate,
                    }
                })
                .collect(),
        };
        let (mut bytes, mut msgs) = (0, 0);
        if !batch.entries.is_empty() {
            for m in batch.encode() {
                bytes += m.len();
                msgs += 1;
            }
        }
        if !self.out.traps.is_empty() {
            // Traps travel as JSON, about this much each.
            bytes += self.out.traps.len() * 200;
            msgs += 1;
        }
        (bytes, msgs)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn engine(c: &mut Criterion) {
    let mut g = c.benchmark_group("epoch");
    g.sample_size(10);
    for (label, busy) in [("quiet", 0), ("busy-1pct", 10_000)] {
        let mut rig = Rig::new(busy);
        eprintln!(
            "fabric: {} ports x {} counters, {} nodes",
            rig.ports.len(),
            rig.engine.schema().len(),
            rig.fabric.node_count()
        );
        g.bench_function(format!("engine/{label}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let t = Instant::now();
                    rig.engine.process(&mut rig.out);
                    total += t.elapsed();
                    black_box(&rig.out);
                    rig.next_reading();
                }
                total
            })
        });
        // Upstream traffic over ten more epochs.
        let mut bytes = Vec::new();
        let mut msgs = Vec::new();
        for _ in 0..10 {
            rig.engine.process(&mut rig.out);
            let (b, m) = rig.upstream();
            bytes.push(b as f64);
            msgs.push(m as f64);
            rig.next_reading();
        }
        eprintln!(
            "fabric upstream per epoch, {label}: median {:.0} bytes in {:.0} messages ({} reports, {} traps in the last)",
            median(bytes),
            median(msgs),
            rig.out.reports.len(),
            rig.out.traps.len()
        );
    }
    let rig = Rig::new(10_000);
    let cols = rig_columns(&rig);
    g.bench_function("sequential-pass", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for col in &cols {
                for v in col.iter() {
                    sum = sum.wrapping_add(*v);
                }
            }
            black_box(sum)
        })
    });
    g.finish();
}

/// The same 16 columns of 1M counters the engine reads, as plain vectors.
fn rig_columns(rig: &Rig) -> Vec<Vec<u64>> {
    let mut r = wasmon::fabric::Reading::default();
    r.resize(16, rig.ports.len());
    let mut src = SimSource::new(rig.fabric.clone());
    src.read(&rig.ports, &mut r).unwrap();
    r.cols
}

criterion_group!(benches, engine);
criterion_main!(benches);
