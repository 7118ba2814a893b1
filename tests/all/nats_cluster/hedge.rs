//! The hedge on a 3-server cluster (issue 31's ≤ 3 s after a stream leader's crash): a node's
//! `jetstream` sink (replicas 3) publishes every record to two streams, `FWD` and `FWDB`, and
//! is answered by whichever acknowledges first; the central daemon consumes both with one
//! durable and stores each record once, and keeps the streams' leaders (and their consumers')
//! on different servers. In turn: `FWD`'s leader is SIGKILLed and started again 3 s later, the
//! server the node is connected to is SIGKILLed and started again, `FWD`'s leader is frozen
//! (SIGSTOP) for 30 s, and the server the central is connected to is frozen for 30 s. Before each fault the leaders must be apart. Afterwards every
//! acknowledged sample is in the central store with its value, and the central stored exactly
//! as many records as the node had acknowledged (one copy each). The stall of each fault at
//! the node (its PubAcks) and at the central (the newest sample in its store) is printed
//! (`--nocapture`; benches/README.md has the figures). The same faults against one stream
//! (no hedge) give the figures it is compared with. Run on Debian's nats-server 2.9.10 and a
//! current one.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::*;

/// The node's config: `to-js` forwards to `FWD` on `fwd.lp`, and with `hedge` to `FWDB` on
/// `fwd.lpb` too.
fn node_config(dir: &Path, servers: &str, hedge: bool) -> String {
    let mut c = super::node_config(dir, servers);
    if hedge {
        c.push_str("hedge-stream = \"FWDB\"\nhedge-subject = \"fwd.lpb\"\n");
    }
    c
}

fn central_config(dir: &Path, servers: &str, hedge: bool) -> String {
    let mut c = super::central_config(dir, servers, "central", 3);
    if hedge {
        c.push_str("hedge-stream = \"FWDB\"\nhedge-subject = \"fwd.lpb\"\n");
    }
    c
}

/// How long the daemons' hedge lanes take at most to leave a server that leads the other
/// stream's way, after the leaders moved.
const LANES_FOLLOW: Duration = Duration::from_secs(6);

/// The servers leading `FWD`, its consumer, `FWDB` and its consumer.
fn ways(cluster: &Cluster, rt: &tokio::runtime::Runtime) -> Option<[usize; 4]> {
    Some([
        cluster.leader_of(rt, "$JS.API.STREAM.INFO.FWD")?,
        cluster.leader_of(rt, "$JS.API.CONSUMER.INFO.FWD.central")?,
        cluster.leader_of(rt, "$JS.API.STREAM.INFO.FWDB")?,
        cluster.leader_of(rt, "$JS.API.CONSUMER.INFO.FWDB.central")?,
    ])
}

/// Whether every replica of what the JetStream info request `subject` describes is current
/// (a server started again has caught up: until then losing another is losing two).
fn all_current(cluster: &Cluster, rt: &tokio::runtime::Runtime, subject: &str) -> bool {
    let urls = cluster.urls();
    let subject = subject.to_string();
    rt.block_on(async {
        let addrs: Vec<&str> = urls.split(',').collect();
        let c = async_nats::connect(addrs).await.ok()?;
        let m = tokio::time::timeout(Duration::from_secs(2), c.request(subject, "".into()))
            .await
            .ok()?
            .ok()?;
        let v: serde_json::Value = serde_json::from_slice(&m.payload).ok()?;
        let replicas = v["cluster"]["replicas"].as_array()?;
        Some(replicas.len() == 2 && replicas.iter().all(|r| r["current"] == true))
    })
    .unwrap_or(false)
}

/// Waits until no server leads a part of both streams' ways (the central's doing) and every
/// replica of both streams and consumers is current; returns how long that took.
fn apart(cluster: &Cluster, rt: &tokio::runtime::Runtime) -> Duration {
    let t = Instant::now();
    let mut last = None;
    while t.elapsed() < Duration::from_secs(60) {
        last = ways(cluster, rt);
        if let Some([sa, ca, sb, cb]) = last
            && ![sa, ca].iter().any(|x| *x == sb || *x == cb)
            && [
                "$JS.API.STREAM.INFO.FWD",
                "$JS.API.CONSUMER.INFO.FWD.central",
                "$JS.API.STREAM.INFO.FWDB",
                "$JS.API.CONSUMER.INFO.FWDB.central",
            ]
            .iter()
            .all(|s| all_current(cluster, rt, s))
        {
            return t.elapsed();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "the streams' leaders not apart (or a replica not current) within 60 s: FWD, its consumer, FWDB, its consumer on {last:?}"
    );
}

/// The central's counter `name` from /metrics.
fn counter(d: &DaemonProcess, name: &str) -> u64 {
    let text = d.get("/metrics").unwrap().text().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0)
}

/// Messages in stream `name`.
fn messages(cluster: &Cluster, rt: &tokio::runtime::Runtime, name: &str) -> u64 {
    rt.block_on(async {
        let addrs: Vec<String> = cluster.urls().split(',').map(String::from).collect();
        let c = async_nats::connect(addrs).await.unwrap();
        let mut st = async_nats::jetstream::new(c)
            .get_stream(name)
            .await
            .unwrap();
        st.info().await.unwrap().state.messages
    })
}

fn leader_crash(bin: PathBuf, hedge: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let version = version(&bin);
    let mut cluster = Cluster::start(&bin, &tmp.path().join("nats"), 3);
    let rt = runtime();
    let central = write(
        tmp.path(),
        "central.toml",
        central_config(&tmp.path().join("central"), &cluster.urls(), hedge),
    );
    let (central_d, node_d, node_port) = start_pair(
        &central,
        tmp.path(),
        node_config(&tmp.path().join("node"), &cluster.toml_list(), hedge),
    );
    let base = now() - 8 * 3600;
    let t0 = Instant::now();
    let monitor = Monitor::watching(
        node_d.url(""),
        cluster.urls(),
        t0,
        Some((central_d.url(""), base)),
    );
    let client = Client::start(node_port, "host", RATE, base);
    wait_until("a record acknowledged", Duration::from_secs(30), || {
        sink(&node_d, "to-js")["sent-records"].as_u64() > Some(0)
    });
    let mode = if hedge {
        "hedged (FWD + FWDB)"
    } else {
        "one stream"
    };
    let placed = |cluster: &Cluster| {
        if hedge {
            let took = apart(cluster, &rt);
            eprintln!(
                "{:.2} leaders apart after {:.1} s: {:?}",
                monitor.now(),
                took.as_secs_f64(),
                ways(cluster, &rt)
            );
            // The daemons' lanes follow the leaders: the node's look every 5 s, the central's
            // every second after 3 s on a server.
            std::thread::sleep(LANES_FOLLOW);
        }
    };
    placed(&cluster);
    std::thread::sleep(Duration::from_secs(2));
    let mut faults = Faults::default();
    // Each fault says how many parts of the two ways its server led, and is followed by the
    // leaders' moving apart again.
    let outage = |cluster: &mut Cluster, faults: &mut Faults, s: usize, how: Down, what: &str| {
        let led = ways(cluster, &rt).map(|w| w.iter().filter(|x| **x == s).count());
        let what = format!("{what} (it led {led:?} of FWD, its consumer, FWDB, its consumer)");
        faults.outage(cluster, &monitor, s, how, what);
        placed(cluster);
    };
    // 1. FWD's leader dies and comes back 3 s later.
    let s = cluster.leader(&rt, "FWD").expect("FWD has a leader");
    outage(
        &mut cluster,
        &mut faults,
        s,
        Down::Killed(3),
        "FWD's leader SIGKILLed (3 s down)",
    );
    // 2. The server the node is connected to dies and comes back 3 s later.
    let s = cluster
        .connected_from(node_d.child.id())
        .expect("the node is connected to one of the servers");
    outage(
        &mut cluster,
        &mut faults,
        s,
        Down::Killed(3),
        "node's server SIGKILLed (3 s down)",
    );
    // 3. FWD's leader hangs for 30 s.
    let s = cluster.leader(&rt, "FWD").unwrap_or(0);
    outage(
        &mut cluster,
        &mut faults,
        s,
        Down::Frozen(30),
        "FWD's leader SIGSTOPped 30 s",
    );
    // 4. The server the central is connected to hangs for 30 s.
    let s = cluster
        .connected_from(central_d.child.id())
        .expect("the central is connected to one of the servers");
    outage(
        &mut cluster,
        &mut faults,
        s,
        Down::Frozen(30),
        "central's server SIGSTOPped 30 s",
    );

    let acked = client.stop();
    let total: u64 = acked.iter().map(|(a, b)| b - a).sum();
    assert!(total > 0);
    wait_until("the node's queue drained", Duration::from_secs(120), || {
        sink(&node_d, "to-js")["queued-records"].as_u64() == Some(0)
    });
    let to = base + (total / HOSTS) as i64 + 2;
    wait_until("the central caught up", Duration::from_secs(120), || {
        central_values(&central_d, base, to).len() as u64 >= total
    });
    let what = format!("{mode} behind a 3-server cluster ({version})");
    assert_all_there(&what, &acked, &central_values(&central_d, base, to), base);
    let sent = sink(&node_d, "to-js")["sent-records"].as_u64().unwrap();
    let fwd = messages(&cluster, &rt, "FWD");
    if hedge {
        // Each record is in one stream at least (its PubAck came from one) and was stored
        // once: the central's first copies are the node's acknowledged records.
        let fwdb = messages(&cluster, &rt, "FWDB");
        assert!(
            fwd <= sent && fwdb <= sent,
            "FWD {fwd}, FWDB {fwdb}, sent {sent}"
        );
        wait_until(
            "the central counted every record",
            Duration::from_secs(60),
            || counter(&central_d, "wasmon_nats_hedge_records_total") >= sent,
        );
        let stored = counter(&central_d, "wasmon_nats_hedge_records_total");
        let dropped = counter(&central_d, "wasmon_nats_hedge_duplicates_total");
        assert_eq!(stored, sent, "records stored once vs records the node sent");
        eprintln!(
            "{what}: {sent} records acknowledged, FWD holds {fwd}, FWDB {fwdb}; the central stored {stored}, dropped {dropped} second copies; {} leader step-downs",
            counter(&central_d, "wasmon_nats_hedge_stepdowns_total")
        );
    } else {
        assert_eq!(fwd, sent, "stream messages vs records the node sent");
    }
    let log = monitor.stop_showing(&node_d, &central_d);
    for (what, from, to) in &faults.0 {
        let election = elected(&log, *from, *to).map_or(String::new(), |e| {
            format!("; FWD's leader answering {:.1} s after the fault", e - from)
        });
        eprintln!(
            "nats-server {version}, {mode}, {RATE} samples/s: {what}: node stalled {:.1} s, central store {:.1} s (FWD's consumer {:.1} s){election}",
            stall(&log, |p| p.sent, *from, *to),
            stall(&log, |p| p.stored, *from, *to),
            stall(&log, |p| p.delivered, *from, *to),
        );
    }
}

#[test]
fn a_hedged_sink_rides_out_a_leader_crash_nats_2_9() {
    leader_crash(debian_server(), true);
}

#[test]
fn a_hedged_sink_rides_out_a_leader_crash_current_nats() {
    leader_crash(current_server(), true);
}

#[test]
fn one_stream_stalls_for_the_election_nats_2_9() {
    leader_crash(debian_server(), false);
}

#[test]
fn one_stream_stalls_for_the_election_current_nats() {
    leader_crash(current_server(), false);
}
