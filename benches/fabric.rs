//! Benchmark of `wasmon::fabric` at the RFC's scale: one agent owning a simulated fat-tree of
//! 1,064,960 ports (k=128, 32 pods, 8 hosts per edge switch: 24,576 nodes) × 16 counters.
//! - `epoch/engine`: one epoch of the engine (rates with wrap/saturation/clear handling,
//!   change filter, traps, one histogram per counter), quiet fabric and 1 % busy ports;
//! - `epoch/sequential-pass`: a plain pass summing the same 17M counters as 64-bit words (the
//!   floor), and `epoch/sequential-pass-narrow` over them in the words the engine keeps;
//! - bytes and messages sent up the tree per epoch, quiet vs 1 % busy (printed);
//! - takeover after an agent stops renewing, as a multiple of the lease (printed; needs
//!   Debian's nats-server, skipped with a note when it is missing).
//!
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
    let reading = rig_reading(&rig);
    // The original floor: the 16 counters as 64-bit words (136 MB).
    let wide: Vec<Vec<u64>> = (0..16)
        .map(|c| (0..rig.ports.len()).map(|i| reading.get(c, i)).collect())
        .collect();
    g.bench_function("sequential-pass", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for col in &wide {
                for v in col.iter() {
                    sum = sum.wrapping_add(*v);
                }
            }
            black_box(sum)
        })
    });
    // The same counters in the words the engine keeps them in (each counter's narrowest:
    // 4x u64, 1x u32, 5x u16, 6x u8 = 52 B a port).
    let narrow: Vec<Narrow> = rig
        .engine
        .schema()
        .iter()
        .zip(&wide)
        .map(|(d, col)| match d.width.max() {
            m if m <= 0xff => Narrow::U8(col.iter().map(|v| *v as u8).collect()),
            m if m <= 0xffff => Narrow::U16(col.iter().map(|v| *v as u16).collect()),
            m if m <= 0xffff_ffff => Narrow::U32(col.iter().map(|v| *v as u32).collect()),
            _ => Narrow::U64(col.clone()),
        })
        .collect();
    g.bench_function("sequential-pass-narrow", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for col in &narrow {
                sum = sum.wrapping_add(match col {
                    Narrow::U8(v) => v.iter().map(|x| u64::from(*x)).sum::<u64>(),
                    Narrow::U16(v) => v.iter().map(|x| u64::from(*x)).sum::<u64>(),
                    Narrow::U32(v) => v.iter().map(|x| u64::from(*x)).sum::<u64>(),
                    Narrow::U64(v) => v.iter().fold(0u64, |a, x| a.wrapping_add(*x)),
                });
            }
            black_box(sum)
        })
    });
    g.finish();
}

enum Narrow {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
}

/// The same 16 counters of 1M ports the engine reads.
fn rig_reading(rig: &Rig) -> wasmon::fabric::Reading {
    let mut r = wasmon::fabric::Reading::default();
    r.resize(rig.engine.schema(), rig.ports.len());
    let mut src = SimSource::new(rig.fabric.clone());
    src.read(&rig.ports, &mut r).unwrap();
    r
}

/// Takeover after an agent stops renewing (cancelled: it stops at once, as if killed), as a
/// multiple of the lease: two agents on a 10,656-port fabric, five rounds, median.
fn takeover(_: &mut Criterion) {
    use futures_util::StreamExt;
    use wasmon::fabric::wire::Owner;
    let bin = std::path::Path::new("/usr/sbin/nats-server");
    if !bin.exists() {
        eprintln!(
            "fabric takeover: skipped (no /usr/sbin/nats-server; apt-get install nats-server)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = std::process::Command::new(bin)
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(dir.path().join("js"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("nats://127.0.0.1:{port}");
    let lease = Duration::from_secs(1);
    let sim_path = dir.path().join("fabric.sim");
    let spec = SimSpec {
        epoch: Duration::from_millis(100),
        ..SimSpec::default()
    };
    let fabric = Arc::new(SimFabric::create(Some(&sim_path), &spec).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ticker = {
        let (f, s) = (fabric.clone(), stop.clone());
        std::thread::spawn(move || f.run(&s))
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut ratios = Vec::new();
    for round in 0..5 {
        let name = format!("bench{round}");
        let agent = |id: &str, parent: &str, attach: &str| {
            let cfg = FabricConfig {
                enabled: true,
                nats: url.clone(),
                name: name.clone(),
                agent: id.into(),
                parent: parent.into(),
                source: wasmon::fabric::SourceKind::Simulated,
                path: Some(sim_path.clone()),
                attach: vec![attach.into()],
                lease,
                ..FabricConfig::default()
            };
            let token = tokio_util::sync::CancellationToken::new();
            let h = wasmon::fabric::FabricHandle::new(cfg);
            let n = Arc::new(wasmon::notify::Notifier::default());
            rt.spawn(wasmon::fabric::run_agent(
                h,
                n,
                Box::new(|_| {}),
                token.clone(),
                wasmon::supervise::Health::new(id),
            ));
            token
        };
        let t1 = agent("a1", "", "hca-p0-0");
        let t2 = agent("a2", "a1", "hca-p5-0");
        let r = rt.block_on(async {
            let client = loop {
                if let Ok(c) = async_nats::connect(url.as_str()).await {
                    break c;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            let js = async_nats::jetstream::new(client);
            let owners = loop {
                if let Ok(kv) = js
                    .get_key_value(wasmon::fabric::wire::owners_bucket(&name))
                    .await
                {
                    break kv;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            };
            let read = || async {
                let keys: Vec<String> = owners
                    .keys()
                    .await
                    .unwrap()
                    .filter_map(|k| async { k.ok() })
                    .collect()
                    .await;
                let mut out = Vec::new();
                for k in keys {
                    if let Ok(Some(v)) = owners.get(&k).await {
                        out.push(serde_json::from_slice::<Owner>(&v).unwrap());
                    }
                }
                out
            };
            // Settled: every node owned, both agents own some, for two seconds.
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let o = read().await;
                if o.len() == fabric.node_count() && o.iter().any(|x| x.agent == "a2") {
                    break;
                }
                assert!(Instant::now() < deadline, "agents did not settle");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
            let kill_ns = wasmon::procfs::now_ns();
            t2.cancel();
            loop {
                let o = read().await;
                if !o.iter().any(|x| x.agent == "a2") {
                    let last = o.iter().map(|x| x.ts_ns).max().unwrap();
                    break (last - kill_ns) as f64 / 1e9;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        t1.cancel();
        eprintln!(
            "fabric takeover round {round}: {r:.3} s = {:.2} leases",
            r / lease.as_secs_f64()
        );
        ratios.push(r / lease.as_secs_f64());
    }
    eprintln!(
        "fabric takeover: median {:.2} leases (lease 1 s, epoch 100 ms, 10,656 ports)",
        median(ratios)
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = ticker.join();
    let _ = server.kill();
    let _ = server.wait();
}

criterion_group!(benches, engine, takeover);
criterion_main!(benches);
