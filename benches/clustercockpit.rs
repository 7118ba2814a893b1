//! What the ClusterCockpit profile costs a node per interval, on this host's /proc and /sys:
//! one poll of the profile's `poll-names` and its `cc-mem-used` feed by the native linux agent,
//! the `clustercockpit` transformer (and `arithmetic` with its `clustercockpit` stage) through
//! the sandbox, and the `http` sink's line-protocol encoding: the thread's CPU per interval
//! (median), the read(2) calls it made (/proc/self/io `syscr`), the PCP values fetched and the
//! cc-metric-collector samples sent. cc-metric-collector's same collectors, from its source:
//! one open and read of /proc/stat, /proc/loadavg, /proc/meminfo, /proc/net/dev,
//! /proc/self/mounts (plus a statfs per mount), /proc/diskstats, /proc/cpuinfo, and one
//! numastat per NUMA node.
//!
//! `cargo bench -p wasmon-benches --bench clustercockpit`; `CC_ROUNDS` intervals (default 200),
//! `CC_GUESTS_DIR` a directory of the guests' components to use instead of the bundled ones.

#[path = "thread_cpu.rs"]
mod thread_cpu;
use std::time::Duration;
use thread_cpu::thread_cpu;

use wasmon::host::{GuestConfig, Image, Runtime, TransformerInstance, TransformerWorld};
use wasmon::linux::{LinuxAgent, table};
use wasmon::namespace::Agent;
use wasmon::sample::Sample;
use wasmon::sink::encode::{Context, line_protocol};

/// read(2)-family calls this process has made.
fn syscr() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("syscr: ")?.trim().parse().ok())
        .unwrap()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn strings(v: &toml::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn guest(rt: &std::sync::Arc<Runtime>, name: &str, params: &toml::Value) -> TransformerInstance {
    // CC_GUESTS_DIR: components to use instead of the bundled ones (a guests-dir).
    let dir = std::env::var_os("CC_GUESTS_DIR").map(std::path::PathBuf::from);
    let source = wasmon::guests::resolve(name, dir.as_deref(), std::path::Path::new(".")).unwrap();
    let compiled = rt.compile(&source.bytes, name).unwrap();
    let params = serde_json::to_string(params).unwrap();
    Image::<TransformerWorld>::load(rt, &compiled, GuestConfig::new(name, &params)).unwrap()
}

/// The linux metrics a poll of `names` (leaves or prefixes) fetches.
fn metrics(names: &[String]) -> Vec<(wasmon::namespace::Pmid, &'static str)> {
    table()
        .metrics
        .iter()
        .filter(|m| {
            names.iter().any(|n| {
                m.name == n
                    || m.name
                        .strip_prefix(n.as_str())
                        .is_some_and(|r| r.starts_with('.'))
            })
        })
        .map(|m| (m.pmid(), m.name))
        .collect()
}

fn samples(
    agent: &mut LinuxAgent,
    want: &[(wasmon::namespace::Pmid, &'static str)],
    ts: i64,
) -> Vec<Sample> {
    let ids: Vec<_> = want.iter().map(|(p, _)| *p).collect();
    let mut out = Vec::new();
    for ((_, values), (_, name)) in agent.fetch(&ids).into_iter().zip(want) {
        for (inst, v) in values.unwrap_or_default() {
            if let Some(x) = v.as_f64() {
                out.push(Sample::new(name, &inst, x, ts));
            }
        }
    }
    out
}

fn main() {
    let rounds: usize = std::env::var("CC_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let config: toml::Value =
        toml::from_str(wasmon::config::profile("clustercockpit").unwrap()).unwrap();
    // The linux agent's entry (the guest agents' come before and after it).
    let agent_cfg = config["agent"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a.get("native").and_then(|n| n.as_str()) == Some("linux"))
        .expect("the profile runs the linux agent");
    let polled = metrics(&strings(&agent_cfg["poll-names"]));
    let fed = metrics(&strings(&agent_cfg["feed"][0]["names"]));
    let rt = std::sync::Arc::new(Runtime::new(None).unwrap());
    let stage = |p: usize, t: usize| &config["pipeline"][p]["transformer"][t];
    let mut cc = guest(&rt, "clustercockpit", &stage(0, 0)["params"]);
    let mut arithmetic = guest(&rt, "arithmetic", &stage(1, 0)["params"]);
    let mut mem_cc = guest(&rt, "clustercockpit", &stage(1, 1)["params"]);
    let tags: Vec<String> = strings(&config["sink"][0]["meta-as-tags"]);
    let cx = Context {
        default_cluster: "testcluster",
        hostname: "node001",
        meta_as_tags: &tags,
    };
    let mut agent = LinuxAgent::with_root("/");

    let (mut fetch_t, mut guest_t, mut encode_t, mut all_t) = (vec![], vec![], vec![], vec![]);
    let (mut values, mut sent, mut bytes, mut reads) = (0, 0, 0, 0);
    for round in 0..rounds + 2 {
        // Ten seconds apart, as the profile polls (rates need a step).
        let ts = 1_800_000_000_000_000_000 + round as i64 * 10_000_000_000;
        let (r0, t0) = (syscr(), thread_cpu());
        let polled_s = samples(&mut agent, &polled, ts);
        let fed_s = samples(&mut agent, &fed, ts);
        let t1 = thread_cpu();
        let mut out = cc.handle(&polled_s).unwrap();
        arithmetic.handle(&fed_s).unwrap();
        out.extend(mem_cc.handle(&arithmetic.flush().unwrap()).unwrap());
        let t2 = thread_cpu();
        let enc = line_protocol(&out, &cx);
        let t3 = thread_cpu();
        let r1 = syscr();
        if round >= 2 {
            fetch_t.push(t1 - t0);
            guest_t.push(t2 - t1);
            encode_t.push(t3 - t2);
            all_t.push(t3 - t0);
            (values, sent, bytes, reads) = (
                polled_s.len() + fed_s.len(),
                out.len(),
                enc.bytes.len(),
                r1 - r0,
            );
        }
    }
    let ms = |v: Vec<Duration>| median(v).as_secs_f64() * 1e3;
    let ncpu = std::thread::available_parallelism().map_or(0, |n| n.get());
    let nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.starts_with("node"))
                })
                .count()
        })
        .unwrap_or(0);
    println!(
        "ClusterCockpit profile, one 10 s interval on this host ({ncpu} CPUs, {nodes} NUMA node(s)), median of {rounds}:\n"
    );
    println!("| part | CPU per interval |");
    println!("|---|---|");
    println!(
        "| linux agent: fetch of {} + {} metrics | {:.3} ms |",
        polled.len(),
        fed.len(),
        ms(fetch_t)
    );
    println!(
        "| transformers (clustercockpit; arithmetic + clustercockpit) | {:.3} ms |",
        ms(guest_t)
    );
    println!(
        "| line protocol for the http sink | {:.3} ms |",
        ms(encode_t)
    );
    println!("| all | {:.3} ms |", ms(all_t));
    println!(
        "\nPCP values fetched: {values}; cc-metric-collector samples sent: {sent} ({bytes} bytes of line protocol); read(2) calls: {reads}"
    );
}
