//! The fabric test's rig: nats-server, a central reader of the whole simulated fabric,
//! the agents' config, a client of the ownership buckets, and small waits.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmon::fabric::histogram::{Histogram, WireHistogram};
use wasmon::fabric::ownership::Buckets;
use wasmon::fabric::wire::{Owner, leases_bucket, owners_bucket};
use wasmon::fabric::{CounterSource, Engine, Output, SimFabric, SimSource, SimSpec, Thresholds};

use crate::common::*;

pub(super) const EPOCH: Duration = Duration::from_millis(250);
pub(super) const LEASE: Duration = Duration::from_millis(1000);
pub(super) const NAME: &str = "t";
/// The longest the test waits for one bucket read (a server restart can stall a consumer).
pub(super) const KV_WAIT: Duration = Duration::from_secs(3);
pub(super) const AGENTS: [(&str, &str, &str); 4] = [
    ("a1", "", "hca-p0-0"),
    ("a2", "a1", "hca-p3-0"),
    ("a3", "a1", "hca-p6-0"),
    ("a4", "a2", "hca-p9-0"),
];

pub(super) use crate::common::NatsServer as Nats;

/// A simulated fabric ticking every [`EPOCH`] (`radix`-port switches, `pods` pods,
/// `hosts_per_edge` hosts per edge switch), shared through `dir/fabric.sim`, the file the
/// agents' `simulated` source reads; returns the fabric and that path.
pub(super) fn sim_fabric(
    dir: &Path,
    radix: u32,
    pods: u32,
    hosts_per_edge: u32,
    seed: u64,
) -> (Arc<SimFabric>, PathBuf) {
    let spec = SimSpec {
        radix,
        pods,
        hosts_per_edge,
        seed,
        epoch: EPOCH,
        ..SimSpec::default()
    };
    let path = dir.join("fabric.sim");
    (
        Arc::new(SimFabric::create(Some(&path), &spec).unwrap()),
        path,
    )
}

/// A reader of every port, processing every epoch: the central histograms to compare with.
pub(super) struct Central {
    pub(super) hist: Arc<Mutex<BTreeMap<u64, Vec<Histogram>>>>,
    stop: Arc<AtomicBool>,
}

impl Central {
    pub(super) fn start(fabric: Arc<SimFabric>) -> Central {
        let hist = Arc::new(Mutex::new(BTreeMap::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, s) = (hist.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut src = SimSource::new(fabric.clone());
            let schema = src.schema().to_vec();
            let t = Thresholds {
                trap: vec![0; schema.len()],
                change: vec![u64::MAX; schema.len()],
            };
            let mut e = Engine::new(&schema, t, false);
            e.set_ports((0..fabric.port_count() as u32).collect());
            let mut out = Output::default();
            let mut last = fabric.epoch();
            while !s.load(Ordering::Relaxed) {
                if fabric.epoch() == last {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                }
                let ports = e.ports().to_vec();
                src.read(&ports, e.reading_mut()).unwrap();
                e.process(&mut out);
                assert_eq!(out.epoch, last + 1, "the central reader missed an epoch");
                last = out.epoch;
                let mut h = h.lock().unwrap();
                h.insert(out.epoch, out.hist.clone());
                while h.len() > 200 {
                    h.pop_first();
                }
            }
        });
        Central { hist, stop }
    }
}

impl Drop for Central {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

pub(super) fn config(
    dir: &Path,
    nats: &str,
    sim: &Path,
    agent: &str,
    parent: &str,
    attach: &str,
) -> PathBuf {
    let path = dir.join(format!("{agent}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
[daemon]
data-dir = "{agent}-data"
[procfs]
enabled = false
[notify]
log = false
[fabric]
enabled = true
nats = "{nats}"
name = "{NAME}"
agent = "{agent}"
parent = "{parent}"
source = "simulated"
path = "{}"
attach = ["{attach}"]
lease = "{}ms"
trap-default = 50
"#,
            sim.display(),
            LEASE.as_millis()
        ),
    )
    .unwrap();
    path
}

pub(super) struct Bus {
    pub(super) rt: tokio::runtime::Runtime,
    pub(super) b: Buckets,
}

impl Bus {
    pub(super) fn connect(url: &str) -> Bus {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let b = rt.block_on(async {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Ok(c) = async_nats::connect(url).await {
                    let js = async_nats::jetstream::new(c);
                    if let (Ok(leases), Ok(owners)) = (
                        js.get_key_value(leases_bucket(NAME)).await,
                        js.get_key_value(owners_bucket(NAME)).await,
                    ) {
                        return Buckets { leases, owners };
                    }
                }
                assert!(
                    Instant::now() < deadline,
                    "the agents never made their buckets"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Bus { rt, b }
    }

    /// Node -> owning agent, from the bucket's leader (empty if it does not answer in time).
    pub(super) fn owners(&self) -> HashMap<String, String> {
        self.rt.block_on(async {
            let read = wasmon::nats::jetstream::latest(&self.b.owners);
            match tokio::time::timeout(KV_WAIT, read).await {
                Ok(Ok(entries)) => entries
                    .into_iter()
                    .filter_map(|e| {
                        let o = serde_json::from_slice::<Owner>(&e.value).ok()?;
                        Some((e.key, o.agent))
                    })
                    .collect(),
                _ => HashMap::new(),
            }
        })
    }

    pub(super) fn owner(&self, node: &str) -> Option<String> {
        self.rt
            .block_on(async {
                tokio::time::timeout(KV_WAIT, wasmon::fabric::tree::owner(&self.b, node)).await
            })
            .ok()
            .and_then(Result::ok)
            .flatten()
            .map(|(o, _)| o.agent)
    }

    pub(super) fn leases(&self) -> HashMap<String, wasmon::fabric::wire::Lease> {
        self.rt
            .block_on(async {
                tokio::time::timeout(KV_WAIT, wasmon::fabric::tree::status(&self.b)).await
            })
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default()
            .into_iter()
            .map(|a| (a.lease.agent.clone(), a.lease))
            .collect()
    }
}

pub(super) fn histogram(d: &DaemonProcess, counter: &str, epoch: Option<u64>) -> Value {
    let q = epoch.map(|e| format!("?epoch={e}")).unwrap_or_default();
    let r = d
        .get(&format!("/api/fabric/histogram/{counter}{q}"))
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text());
    r.json().unwrap()
}

pub(super) fn hist_of(v: &Value) -> Histogram {
    let w: WireHistogram = serde_json::from_value(v["histogram"].clone()).unwrap();
    Histogram::from_wire(&w).unwrap()
}

pub(super) fn wait(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t0.elapsed()
}

/// Polls `check` until it passes; on timeout, panics with what it last said was wrong.
/// For answers that trail the bucket by up to an epoch (counts, owners, merges).
pub(super) fn settle(what: &str, limit: Duration, mut check: impl FnMut() -> Result<(), String>) {
    let t0 = Instant::now();
    loop {
        match check() {
            Ok(()) => return,
            Err(last) if t0.elapsed() > limit => {
                panic!("{what}: not so after {limit:?}; last: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Stops the ticker when the test ends, also on panic.
pub(super) fn scopeguard(stop: Arc<AtomicBool>) -> impl Drop {
    struct G(Arc<AtomicBool>);
    impl Drop for G {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    G(stop)
}
