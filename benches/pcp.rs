//! PCP port benchmarks (criterion), wasmon beside a reference pmcd on the same machine:
//! - `fetch_all_linux`: one client's FETCH of every metric of the linux agent (PCP's linux
//!   PMDA under pmcd), request to decoded reply length, over loopback TCP;
//! - `pminfo_f_linux`: Debian's `pminfo -f` of the same metrics, a process per run (connect,
//!   handshake, traverse, names, descriptors, instances, fetch);
//! - `fetch_mmv_10k` and `pminfo_f_mmv_10k`: the same for an MMV file of 10,000 values (100
//!   metrics x 100 instances, written by python3-pcp into /var/lib/pcp/tmp/mmv), through
//!   wasmon's `mmv` guest and through pmcd's MMV PMDA;
//! - `fetch_all_proc`: one FETCH of all 153 `proc.*` metrics over every process, through
//!   wasmon's native proc agent and through pmcd with PCP's pmdaproc (`-A`, so it answers
//!   values to a client that did not authenticate).
//!
//! wasmon's port runs in this process over the native linux agent. The reference pmcd runs
//! when Debian's pcp is installed (`apt-get install pcp`, see tests/all/pcp.rs for doing it
//! without systemd); without it only wasmon's figures are measured.

use std::process::{Command, Stdio};
use std::time::Duration;

#[path = "pcp_wire.rs"]
mod pcp_wire;
use pcp_wire::{Client, Pmcd, free_port, pdu, pmcd_with, pmids, pminfo, reference_pmcd};

use criterion::{Criterion, criterion_group, criterion_main};
use wasmon::daemon::agents::{AgentSet, GuestAgent};
use wasmon::daemon::pcp::PcpSource;
use wasmon::host::{AgentWorld, Grants, GuestConfig, Image, MappedDir, Runtime};
use wasmon::linux::LinuxAgent;
use wasmon::namespace::{Agent, Namespace};
use wasmon::procfs::agent::{PROC_PMNS, ProcAgent};

const MMV_WRITER: &str = r#"
import sys, time
from pcp import mmv, pmapi
import cmmv
indom = mmv.mmv_indom(serial=1, shorttext="i", helptext="i")
indom.set_instances([mmv.mmv_instance(i, "i%d" % i) for i in range(100)])
v = mmv.MemoryMappedValues(sys.argv[1], cluster=0)
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
sys.stdin.read()
"#;

/// 10,000 MMV values served by wasmon's mmv guest on a port of this process and by the
/// reference pmcd's MMV PMDA, side by side.
fn mmv(c: &mut Criterion, rt: &tokio::runtime::Runtime, pmcd: Option<&Pmcd>) {
    let dir = std::path::Path::new("/var/lib/pcp/tmp/mmv");
    if std::fs::create_dir_all(dir).is_err() {
        eprintln!(
            "pcp: no {} to write an MMV file into: no MMV figures",
            dir.display()
        );
        return;
    }
    let name = format!("wasmonbench{}", std::process::id());
    let path = dir.join(&name);
    let Ok(mut writer) = Command::new("/usr/bin/python3")
        .args(["-c", MMV_WRITER])
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    else {
        eprintln!("pcp: no python3-pcp: no MMV figures");
        return;
    };
    let mut ready = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(writer.stdout.as_mut().unwrap()),
        &mut ready,
    )
    .unwrap();
    assert_eq!(ready.trim(), "ready", "the MMV writer (python3-pcp) failed");

    let wrt = Runtime::new(None).unwrap();
    let bytes = std::fs::read(format!("{}/mmv.wasm", wasmon::BUILT_GUESTS_DIR)).unwrap();
    let compiled = wrt.compile(&bytes, "mmv").unwrap();
    let mut cfg = GuestConfig::new("mmv", r#"{"dir":"mmv","root":"mmv"}"#);
    cfg.grants = Grants {
        mapped: vec![MappedDir {
            name: "mmv".into(),
            host: dir.to_path_buf(),
        }],
        ..Default::default()
    };
    let guest: Box<dyn Agent> = Box::new(GuestAgent(
        Image::<AgentWorld>::load(&wrt, &compiled, cfg).unwrap(),
    ));
    let ns = Namespace::from_pmns(&[("mmv", "root { mmv 70:*:* }")]).unwrap();
    let set = AgentSet::new(ns, std::collections::BTreeMap::from([(70, guest)]));
    let port = free_port();
    rt.block_on(wasmon::pcp::start(
        format!("127.0.0.1:{port}").parse().unwrap(),
        Box::new(PcpSource(set)),
        "bench".into(),
        tokio_util::sync::CancellationToken::new(),
    ))
    .unwrap()
    .expect("a free port");
    let prefix = format!("mmv.{name}");
    let mut servers = vec![("wasmon", port)];
    if let Some(p) = pmcd {
        let mut seen = false;
        for _ in 0..300 {
            if pmids(p.port, &prefix).len() == 100 {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if seen {
            servers.push(("pmcd", p.port));
        } else {
            eprintln!("pcp: pmcd's MMV PMDA did not list {prefix}: wasmon only");
        }
    }
    let mut g = c.benchmark_group("pcp");
    for (who, port) in &servers {
        let ids = pmids(*port, &prefix);
        assert_eq!(ids.len(), 100, "{who}: {prefix}");
        let mut body = vec![0u32, 0, 0, ids.len() as u32];
        body.extend(&ids);
        let fetch = pdu(0x7003, &body);
        let mut client = Client::connect(*port);
        let mut buf = Vec::new();
        let len = client.fetch(&fetch, &mut buf);
        eprintln!("pcp: {who}: a fetch of 10,000 MMV values is a {len}-byte RESULT");
        g.bench_function(format!("fetch_mmv_10k/{who}"), |b| {
            b.iter(|| client.fetch(&fetch, &mut buf))
        });
        g.bench_function(format!("pminfo_f_mmv_10k/{who}"), |b| {
            b.iter(|| assert!(pminfo(*port, &["-f", &prefix])))
        });
    }
    g.finish();
    let _ = writer.kill();
    let _ = writer.wait();
    let _ = std::fs::remove_file(&path);
}

/// pmcd with its pmcd PMDA and pmdaproc only (`-A`: values for any client), once pmdaproc
/// answers.
fn proc_pmcd() -> Option<Pmcd> {
    let p = pmcd_with(Some(
        "pmcd\t2\tdso\tpmcd_init\t/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so\n\
         proc\t3\tpipe\tbinary\t/var/lib/pcp/pmdas/proc/pmdaproc -d 3 -A\n",
    ))?;
    for _ in 0..600 {
        if pminfo(p.port, &["-f", "proc.psinfo.pid"]) {
            return Some(p);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("pcp: pmdaproc did not answer: wasmon only");
    None
}

/// A FETCH of every `proc.*` metric over every process: wasmon's proc agent on a port of
/// this process, and pmcd with pmdaproc.
fn proc_all(c: &mut Criterion, rt: &tokio::runtime::Runtime) {
    let ns = Namespace::from_pmns(&[("proc", PROC_PMNS.as_str())]).unwrap();
    let mut agents: std::collections::BTreeMap<u32, Box<dyn Agent>> = Default::default();
    agents.insert(3, Box::new(ProcAgent::new()));
    let set = AgentSet::new(ns, agents);
    let names = set.traverse("proc").unwrap().names;
    let ids: Vec<u32> = names
        .iter()
        .map(|n| set.lookup(n).unwrap().to_raw())
        .collect();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    rt.block_on(wasmon::pcp::start(
        addr,
        Box::new(PcpSource(set)),
        "bench".into(),
        tokio_util::sync::CancellationToken::new(),
    ))
    .unwrap()
    .expect("a free port");
    let pmcd = proc_pmcd();
    let mut body = vec![0u32, 0, 0, ids.len() as u32];
    body.extend(&ids);
    let fetch = pdu(0x7003, &body);
    let mut servers = vec![("wasmon", port)];
    if let Some(p) = &pmcd {
        servers.push(("pmcd", p.port));
    }
    let mut g = c.benchmark_group("pcp");
    for (who, port) in &servers {
        let mut client = Client::connect(*port);
        let mut buf = Vec::new();
        let len = client.fetch(&fetch, &mut buf);
        eprintln!(
            "pcp: {who}: a fetch of {} proc metrics over every process is a {len}-byte RESULT",
            ids.len()
        );
        g.bench_function(format!("fetch_all_proc/{who}"), |b| {
            b.iter(|| client.fetch(&fetch, &mut buf))
        });
    }
    g.finish();
    drop(pmcd);
}

fn bench(c: &mut Criterion) {
    let pmns = LinuxAgent::pmns();
    let ns = Namespace::from_pmns(&[("linux", &pmns)]).unwrap();
    let mut agents: std::collections::BTreeMap<u32, Box<dyn Agent>> = Default::default();
    agents.insert(60, Box::new(LinuxAgent::new()));
    let set = AgentSet::new(ns, agents);
    let names = set.traverse("").unwrap().names;
    let ids: Vec<u32> = names
        .iter()
        .map(|n| set.lookup(n).unwrap().to_raw())
        .collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    rt.block_on(wasmon::pcp::start(
        addr,
        Box::new(PcpSource(set)),
        "bench".into(),
        tokio_util::sync::CancellationToken::new(),
    ))
    .unwrap()
    .expect("a free port");
    let pmcd = reference_pmcd();

    let mut body = vec![0u32, 0, 0, ids.len() as u32];
    body.extend(&ids);
    let fetch = pdu(0x7003, &body);
    let mut g = c.benchmark_group("pcp");
    let mut servers = vec![("wasmon", port)];
    if let Some(p) = &pmcd {
        servers.push(("pmcd", p.port));
    }
    for (who, port) in &servers {
        let mut client = Client::connect(*port);
        let mut buf = Vec::new();
        let len = client.fetch(&fetch, &mut buf);
        eprintln!(
            "pcp: {who}: a fetch of {} linux metrics is a {len}-byte RESULT",
            ids.len()
        );
        g.bench_function(format!("fetch_all_linux/{who}"), |b| {
            b.iter(|| client.fetch(&fetch, &mut buf))
        });
    }
    let mut args = vec!["-f"];
    args.extend(names.iter().map(String::as_str));
    let have_pminfo = pminfo(port, &["hinv.ncpu"]);
    for (who, port) in servers.iter().filter(|_| have_pminfo) {
        g.bench_function(format!("pminfo_f_linux/{who}"), |b| {
            b.iter(|| assert!(pminfo(*port, &args)))
        });
    }
    g.finish();
    mmv(c, &rt, pmcd.as_ref());
    drop(pmcd);
    proc_all(c, &rt);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench
}
criterion_main!(benches);
