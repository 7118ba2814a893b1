//! Agents through the sandbox: a delegated namespace lookup answered by a guest (`foo`), and
//! a fetch of 10,000 MMV values (100 metrics x 100 instances, written by PCP's own writer)
//! through the `mmv` guest. `cargo bench -p wasmon-benches --bench agents`.

use std::collections::BTreeMap;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use wasmon::daemon::agents::{AgentSet, GuestAgent};
use wasmon::host::{AgentWorld, Grants, GuestConfig, Image, MappedDir, Runtime};
use wasmon::namespace::{Agent, Namespace};

fn agent(rt: &std::sync::Arc<Runtime>, name: &str, grants: Grants) -> Box<dyn Agent> {
    let bytes = std::fs::read(format!("{}/{name}.wasm", wasmon::BUILT_GUESTS_DIR)).unwrap();
    let compiled = rt.compile(&bytes, name).unwrap();
    let mut cfg = GuestConfig::new(name, "{}");
    cfg.grants = grants;
    Box::new(GuestAgent(
        Image::<AgentWorld>::load(rt, &compiled, cfg).unwrap(),
    ))
}

fn lookup(c: &mut Criterion) {
    let rt = Runtime::new(None).unwrap();
    let ns = Namespace::from_pmns(&[(
        "foo",
        "root { foo }\nfoo { version 44:0:1 count 44:*:* memory 44:0:2 }",
    )])
    .unwrap();
    let set = AgentSet::new(
        ns,
        BTreeMap::from([(44, agent(&rt, "foo", Grants::default()))]),
    );
    c.bench_function("lookup_static_leaf", |b| {
        b.iter(|| set.lookup("foo.version").unwrap())
    });
    c.bench_function("lookup_delegated_to_guest", |b| {
        b.iter(|| set.lookup("foo.count.ops").unwrap())
    });
}

const WRITER: &str = r#"
import os, time
from pcp import mmv, pmapi
import cmmv
indom = mmv.mmv_indom(serial=1, shorttext="i", helptext="i")
indom.set_instances([mmv.mmv_instance(i, "i%d" % i) for i in range(100)])
v = mmv.MemoryMappedValues(os.path.join(os.environ["DIR"], "big"), cluster=0)
v.add_indoms([indom])
ms = []
for k in range(100):
    m = mmv.mmv_metric("m%d" % k, k + 1, cmmv.MMV_TYPE_U64, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(0,0,1,0,0,0), 1, "m", "m")
    m.semantics = cmmv.MMV_SEM_COUNTER; m.dimension = pmapi.pmUnits(0,0,1,0,0,0)
    ms.append(m)
v.add_metrics(ms)
v.start()
for k in range(100):
    for i in range(100):
        v.lookup_add("m%d" % k, "i%d" % i, k * 100 + i)
print("ready", flush=True)
time.sleep(3600)
"#;

fn mmv_fetch(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = std::process::Command::new("/usr/bin/python3")
        .args(["-c", WRITER])
        .env("DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 with pcp.mmv (apt-get install python3-pcp)");
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(writer.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready.trim(), "ready");

    let rt = Runtime::new(None).unwrap();
    let grants = Grants {
        mapped: vec![MappedDir {
            name: "mmv".into(),
            host: dir.path().to_path_buf(),
        }],
        ..Default::default()
    };
    let ns = Namespace::from_pmns(&[("mmv", "root { mmv 70:*:* }")]).unwrap();
    let set = AgentSet::new(ns, BTreeMap::from([(70, agent(&rt, "mmv", grants))]));
    let names = vec!["mmv.big".to_string()];
    let values: usize = set.fetch(&names).iter().map(|f| f.values.len()).sum();
    assert_eq!(values, 10_000);

    let mut g = c.benchmark_group("mmv");
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("fetch_10k_values", |b| b.iter(|| set.fetch(&names)));
    g.finish();
    let _ = writer.kill();
    let _ = writer.wait();
}

criterion_group!(benches, lookup, mmv_fetch);
criterion_main!(benches);
