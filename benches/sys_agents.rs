//! The `/sys` guest agents (`infiniband`, `denki`, `hwmon`, `lustre`): one poll (a fetch of every metric
//! the agent has) in the sandbox against the same crate called natively on the same captured
//! tree, in the same run. The trees are the tests' (node_exporter's shapes).
//! `cargo bench -p wasmon-benches --bench sys_agents`; `SYS_AGENTS_GUESTS=DIR` takes the
//! components from DIR instead of the build's (another version of the guests: a before and
//! after of a change to the SDK).

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use wasmon::host::agent_types::Pmid;
use wasmon::host::{AgentWorld, DirGrant, Grants, GuestConfig, Image, Runtime};
use wasmon_guest::agent::Agent;
use wasmon_guest::names::Metric;

#[path = "../tests/all/guest_agents/trees.rs"]
#[allow(dead_code)] // the tests' other trees (Lustre 2.10's procfs layout)
mod trees;

fn ids(domain: u32, metrics: &[Metric]) -> Vec<Pmid> {
    metrics
        .iter()
        .map(|m| Pmid {
            domain,
            cluster: m.cluster,
            item: m.item,
        })
        .collect()
}

fn native_ids(domain: u32, metrics: &[Metric]) -> Vec<wasmon_guest::agent::Pmid> {
    metrics
        .iter()
        .map(|m| wasmon_guest::agent::Pmid {
            domain,
            cluster: m.cluster,
            item: m.item,
        })
        .collect()
}

fn bench_agent<A: Agent>(
    c: &mut Criterion,
    name: &str,
    tree: &Path,
    (domain, metrics): (u32, &[Metric]),
    mut native: A,
) {
    let rt = Runtime::new(None).unwrap();
    let dir =
        std::env::var("SYS_AGENTS_GUESTS").unwrap_or_else(|_| wasmon::BUILT_GUESTS_DIR.to_string());
    let bytes = std::fs::read(format!("{dir}/{name}.wasm")).unwrap();
    let compiled = rt.compile(&bytes, name).unwrap();
    let mut cfg = GuestConfig::new(name, "{}");
    // A loaded machine can stall one call past the default 100 ms of wall time.
    cfg.deadline = std::time::Duration::from_secs(5);
    cfg.grants = Grants {
        dirs: vec![DirGrant {
            host: tree.join("sys"),
            guest: "/sys".into(),
            read_only: true,
        }],
        ..Default::default()
    };
    let mut guest = Image::<AgentWorld>::load(&rt, &compiled, cfg).unwrap();
    let wasm_ids = ids(domain, metrics);
    let values = |sets: usize, n: usize| assert_eq!(sets, n);
    values(guest.fetch(&wasm_ids).unwrap().len(), metrics.len());
    c.bench_function(&format!("{name}_poll_wasm"), |b| {
        b.iter(|| guest.fetch(&wasm_ids).unwrap())
    });
    let nids = native_ids(domain, metrics);
    c.bench_function(&format!("{name}_poll_native"), |b| {
        b.iter(|| native.fetch(&nids))
    });
}

fn agents(c: &mut Criterion) {
    let tree = tempfile::tempdir().unwrap();
    trees::infiniband(tree.path());
    trees::powercap(tree.path());
    trees::hwmon(tree.path());
    trees::lustre_debugfs(tree.path());
    let root = tree.path();
    bench_agent(
        c,
        "infiniband",
        root,
        (infiniband::DOMAIN, infiniband::METRICS),
        infiniband::Infiniband::at(root),
    );
    bench_agent(
        c,
        "denki",
        root,
        (denki::DOMAIN, denki::METRICS),
        denki::Denki::at(root),
    );
    bench_agent(
        c,
        "hwmon",
        root,
        (hwmon::DOMAIN, hwmon::METRICS),
        hwmon::Hwmon::at(root),
    );
    bench_agent(
        c,
        "lustre",
        root,
        (lustre::DOMAIN, lustre::METRICS),
        lustre::Lustre::at(root),
    );
}

criterion_group!(benches, agents);
criterion_main!(benches);
