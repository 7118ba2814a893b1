//! A hung server (SIGSTOP: its sockets stay open, it answers nothing) on a 3-server cluster,
//! with a node forwarding 20,000 samples/s through a `jetstream` sink (replicas 3) to a central
//! daemon's durable consumer: first the server the central daemon is connected to is frozen
//! for 30 s (not the stream's leader), then the stream's leader (not the central's server).
//! The servers run with `write_deadline: "2s"` (the README's advice for a cluster).
//! The central must leave the hung server and resume from its durable position through
//! another well before the server resumes; afterwards every acknowledged sample is in the
//! central store with its value and the stream holds each record once. The stalls are printed
//! (`--nocapture`; benches/README.md has the figures).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::*;

/// The servers' config: see the README's "Under faults".
const WRITE_DEADLINE: &str = "write_deadline: \"2s\"\n";

/// The rate for the forwarding tests.
const RATE: u64 = 20_000;

/// Asks the stream `FWD` to elect another leader, until its leader is not server `not`
/// (nats-server picks the new one among the current replicas: after a freeze the thawed
/// server may take a while to be current again, and a step-down meanwhile has only `not` to
/// go back to, seen once on 2.9.10).
fn lead_elsewhere(cluster: &Cluster, rt: &tokio::runtime::Runtime, not: usize) {
    for _ in 0..30 {
        if cluster.leader(rt, "FWD").is_some_and(|l| l != not) {
            return;
        }
        let urls = cluster.urls();
        rt.block_on(async {
            let addrs: Vec<&str> = urls.split(',').collect();
            let c = async_nats::connect(addrs).await.unwrap();
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                c.request("$JS.API.STREAM.LEADER.STEPDOWN.FWD", "".into()),
            )
            .await;
        });
        std::thread::sleep(Duration::from_secs(1));
    }
    panic!("the stream's leader stayed on s{not}");
}

/// The leader of the central's consumer, as its info says.
fn consumer_leader(cluster: &Cluster, rt: &tokio::runtime::Runtime) -> Option<String> {
    let urls = cluster.urls();
    rt.block_on(async {
        let addrs: Vec<&str> = urls.split(',').collect();
        let c = async_nats::connect(addrs).await.ok()?;
        let m = tokio::time::timeout(
            Duration::from_secs(2),
            c.request("$JS.API.CONSUMER.INFO.FWD.central", "".into()),
        )
        .await
        .ok()?
        .ok()?;
        let v: Value = serde_json::from_slice(&m.payload).ok()?;
        v["cluster"]["leader"].as_str().map(String::from)
    })
}

/// Freezes server `s` (SIGSTOP) for `frozen`, resumes it and waits for delivery to recover;
/// returns when, on the monitor's clock, the freeze began.
fn freeze(cluster: &Cluster, monitor: &Monitor, s: usize, frozen: Duration) -> f64 {
    let at = monitor.now();
    eprintln!("{at:.2} freeze s{s}");
    cluster.freeze(s);
    std::thread::sleep(frozen);
    cluster.thaw(s);
    recovered(monitor);
    at
}

/// How a fault's description says whether the frozen server also held that role.
fn too(also: bool) -> &'static str {
    if also { "too" } else { "not" }
}

fn a_hung_server_is_left(bin: PathBuf) {
    let frozen = Duration::from_secs(30);
    let tmp = tempfile::tempdir().unwrap();
    let version = version(&bin);
    // As the README has it for a cluster: a server's routes to a hung peer are dropped after
    // 2 s of blocked writes, not the default 10 s during which the peer's writers wait (the
    // stall that is the servers', whatever a client does).
    let cluster = Cluster::start_with(&bin, &tmp.path().join("nats"), 3, WRITE_DEADLINE);
    let rt = runtime();
    let central = write(
        tmp.path(),
        "central.toml",
        central_config(&tmp.path().join("central"), &cluster.urls(), "central", 3),
    );
    let (central_d, node_d, node_port) = start_pair(
        &central,
        tmp.path(),
        node_config(&tmp.path().join("node"), &cluster.toml_list()),
    );
    let base = now() - 8 * 3600;
    let t0 = Instant::now();
    let monitor = Monitor::start(node_d.url(""), cluster.urls(), t0);
    let client = Client::start(node_port, "host", RATE, base);
    wait_until("the first delivery", Duration::from_secs(60), || {
        monitor.latest.lock().unwrap().acked > 0
    });
    recovered(&monitor);

    let mut faults: Vec<(String, f64, f64)> = Vec::new();
    // 1. The central's server hangs; it does not lead the stream.
    let theirs = cluster
        .connected_from(central_d.child.id())
        .expect("the central is connected to one of the servers");
    lead_elsewhere(&cluster, &rt, theirs);
    let consumer = consumer_leader(&cluster, &rt);
    let at = freeze(&cluster, &monitor, theirs, frozen);
    faults.push((
        format!(
            "the central's server SIGSTOPped {} s (not the stream leader; consumer leader {})",
            frozen.as_secs(),
            too(consumer.as_deref() == Some(cluster.servers[theirs].name.as_str()))
        ),
        at,
        monitor.now(),
    ));
    // 2. The stream's leader hangs; the central is connected to another server.
    let theirs = cluster
        .connected_from(central_d.child.id())
        .expect("the central is connected to one of the servers");
    let leader = cluster.leader(&rt, "FWD").expect("FWD has a leader");
    let leader = if leader == theirs {
        lead_elsewhere(&cluster, &rt, theirs);
        cluster.leader(&rt, "FWD").expect("FWD has a leader")
    } else {
        leader
    };
    let consumer = consumer_leader(&cluster, &rt);
    let node_on = cluster.connected_from(node_d.child.id());
    let at = freeze(&cluster, &monitor, leader, frozen);
    faults.push((
        format!(
            "the stream leader SIGSTOPped {} s (not the central's server; consumer leader {}; the node's server {})",
            frozen.as_secs(),
            too(consumer.as_deref() == Some(cluster.servers[leader].name.as_str())),
            too(node_on == Some(leader))
        ),
        at,
        monitor.now(),
    ));

    let acked = client.stop();
    delivered_once(
        &format!("central behind a hung server ({version})"),
        (&cluster, &rt),
        (&node_d, &central_d),
        &acked,
        base,
    );
    let log = monitor.stop();
    let stderr = central_d.stderr.lock().unwrap().clone();
    if std::env::var_os("WASMON_CLUSTER_LOGS").is_some() {
        eprintln!("central:\n{stderr}");
    }
    for (what, from, to) in &faults {
        let central = stall(&log, |p| p.delivered, *from, *to);
        let election = elected(&log, *from, *to)
            .map(|e| {
                format!(
                    "; stream leader answering {:.1} s after the fault",
                    e - from
                )
            })
            .unwrap_or_default();
        eprintln!(
            "nats-server {version}, {RATE} samples/s: {what}: node stalled {:.1} s, central {central:.1} s (ack floor {:.1} s){election}",
            stall(&log, |p| p.sent, *from, *to),
            stall(&log, |p| p.acked, *from, *to),
        );
        // Left, not waited out: delivery resumes while the server is still frozen (a daemon
        // that stays on it stalls the whole freeze and more: 34.9 s measured). On 2.15.1 the
        // central is back within seconds; on 2.9.10 the servers themselves stall 10-15 s on
        // a hung peer and the consumer's leader, when it was the frozen one, is elected
        // anew besides (20 s seen under load), which no client reaches.
        let bound = if version.starts_with("v2.9.") {
            frozen.as_secs_f64()
        } else {
            frozen.as_secs_f64() / 2.0
        };
        assert!(
            central < bound,
            "{what}: the central stalled {central:.1} s of the {} s freeze (bound {bound:.0} s on {version})",
            frozen.as_secs()
        );
    }
    assert!(
        stderr.contains("NATS server stopped answering"),
        "the central left its hung server: {stderr}"
    );
}

// Session 16 saw this fail on 2.9.10 (the central not caught up 120 s after the frozen
// leader); 20 runs on 2026-11-28 did not see it again, the last 3 (side by side, load 6-8)
// with the central fetching through its known consumer on a new connection. One run failed to move the stream's
// leader off the central's server after the first freeze (10 step-downs, the thawed replica
// not current yet); the step-downs are now asked for 30 s.
#[test]
fn a_hung_server_is_left_nats_2_9() {
    a_hung_server_is_left(debian_server());
}

#[test]
fn a_hung_server_is_left_current_nats() {
    a_hung_server_is_left(current_server());
}
