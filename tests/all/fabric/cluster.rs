//! The fabric on a 3-server JetStream cluster (issue 31), its buckets with replicas 3, on
//! Debian's nats-server 2.9.10 and on a current one:
//! - compare-and-set as the fabric uses it: agents on different servers race updates naming
//!   the same revision of one owner key, round after round; how many succeed is counted (one
//!   on a current server; 2.9.10 lets several through), and after each agent's fence exactly
//!   one agent holds the node in its view, the one the bucket names;
//! - three agents over a simulated fat-tree through a SIGKILL of the owners stream's leader:
//!   every epoch from the kill until the server is back has every port counted exactly once
//!   (none twice, none lost: the agents go on counting while the stream elects a leader), and
//!   no node changes hands.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmon::fabric::ownership::{self, Buckets, View};
use wasmon::fabric::wire::{Owner, owners_bucket};

use super::rig::*;
use crate::cluster::{Cluster, current_server, debian_server};
use crate::common::*;

/// Races per test: each a fresh key, so rounds are independent.
const ROUNDS: usize = 60;
/// Agents racing for each key, each on its own connection.
const RACERS: usize = 3;

fn owner_value(agent: &str) -> bytes::Bytes {
    serde_json::to_vec(&Owner {
        agent: agent.into(),
        hops: 1,
        ts_ns: 0,
    })
    .unwrap()
    .into()
}

/// Connects to `url` (one server) and opens the fabric `name`'s buckets with replicas 3.
async fn open(url: &str, name: &str) -> Buckets {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(c) = async_nats::connect(url).await {
            let js = async_nats::jetstream::new(c);
            match ownership::open_buckets(&js, name, Duration::from_secs(60), Some(3)).await {
                Ok(b) => return b,
                Err(e) => assert!(Instant::now() < deadline, "buckets on {url}: {e:#}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn updates_naming_one_revision(bin: PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let server = crate::cluster::version(&bin);
    let cas_safe = wasmon::nats::jetstream::cas_safe(&server).expect("a version");
    let cluster = Cluster::start(&bin, dir.path(), 3);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (won, doubles) = rt.block_on(async {
        // Each racer on another server: one of them is on the leader's, the others' updates
        // reach it through a route.
        let mut racers = Vec::new();
        for i in 0..RACERS {
            let b = open(&cluster.servers[i % 3].url(), "race").await;
            let view: ownership::SharedView = Arc::new(Mutex::new(View::default()));
            racers.push((format!("r{i}"), b, view));
        }
        let mut won = vec![0usize; RACERS + 1];
        let mut doubles = 0;
        for round in 0..ROUNDS {
            let key = format!("node-{round}");
            let first = racers[0]
                .1
                .owners
                .create(&key, owner_value("old"))
                .await
                .unwrap();
            let tries = racers.iter().map(|(name, b, _)| {
                let (key, value) = (key.clone(), owner_value(name));
                async move { b.owners.update(&key, value, first).await.is_ok() }
            });
            let ok = futures_util::future::join_all(tries).await;
            let n = ok.iter().filter(|x| **x).count();
            won[n] += 1;
            if n > 1 {
                doubles += 1;
            }
            assert!(
                n >= 1,
                "round {round}: no update naming the current revision succeeded"
            );
            // Every racer fences and reads the key in its view: one holds it, the one the
            // bucket names.
            let mut holders = Vec::new();
            for (name, b, view) in &racers {
                ownership::fence(b, view, Duration::from_secs(5))
                    .await
                    .unwrap_or_else(|e| panic!("{name}'s fence: {e}"));
                let v = view.lock().unwrap();
                if v.owners.get(&key).is_some_and(|r| &r.owner.agent == name) {
                    holders.push(name.clone());
                }
            }
            let latest = wasmon::nats::jetstream::latest_entry(&racers[0].1.owners, &key)
                .await
                .unwrap()
                .unwrap();
            let bucket: Owner = serde_json::from_slice(&latest.value).unwrap();
            assert_eq!(
                holders,
                std::slice::from_ref(&bucket.agent),
                "round {round} ({n} updates succeeded): the holders after the fences"
            );
        }
        (won, doubles)
    });
    eprintln!(
        "nats-server {server}: {ROUNDS} rounds of {RACERS} updates naming one revision: \
         rounds with 1, 2, 3 successes: {:?}; {doubles} with more than one",
        &won[1..]
    );
    if cas_safe {
        assert_eq!(doubles, 0, "nats-server {server} let two updates win");
    } else {
        // What the README says of 2.9.10, and why the fabric fences its takes.
        assert!(
            doubles > 0,
            "nats-server {server}: no round let two updates win (the README says it does)"
        );
    }
}

#[test]
fn kv_updates_naming_one_revision_on_a_cluster_nats_2_9() {
    updates_naming_one_revision(debian_server());
}

#[test]
fn kv_updates_naming_one_revision_on_a_cluster_current_nats() {
    updates_naming_one_revision(current_server());
}

/// The agents of this test: a1 the master, a2 and a3 under it.
const THREE: [(&str, &str, &str); 3] = [
    ("a1", "", "hca-p0-0"),
    ("a2", "a1", "hca-p2-0"),
    ("a3", "a1", "hca-p4-0"),
];

/// The default lease: half of it is how long an agent counts with a view it could not
/// refresh, longer than nats-server's election (4-9 s).
const CLUSTER_LEASE: &str = "30s";

fn fabric_survives_a_leader_kill(bin: PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let server = crate::cluster::version(&bin);
    let mut cluster = Cluster::start(&bin, &dir.path().join("nats"), 3);
    let urls = cluster.urls();
    let (fabric, sim_path) = sim_fabric(dir.path(), 16, 6, 8, 7);
    let total_ports = fabric.port_count();
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (f, s) = (fabric.clone(), stop.clone());
        std::thread::spawn(move || f.run(&s))
    };
    let _stop_ticker = scopeguard(stop.clone());
    let mut daemons: HashMap<&str, DaemonProcess> = HashMap::new();
    for (agent, parent, attach) in THREE {
        let cfg = config(dir.path(), &urls, &sim_path, agent, parent, attach);
        let text = std::fs::read_to_string(&cfg).unwrap().replace(
            &format!("lease = \"{}ms\"", LEASE.as_millis()),
            &format!("lease = \"{CLUSTER_LEASE}\""),
        );
        // `[fabric]` is the config's last section.
        std::fs::write(&cfg, format!("{text}replicas = 3\n")).unwrap();
        daemons.insert(agent, DaemonProcess::start(&cfg));
    }
    let master = &daemons["a1"];
    let dump = |daemons: &HashMap<&str, DaemonProcess>| {
        for (a, d) in daemons {
            let log = d.stderr.lock().unwrap().clone();
            let tail: Vec<&str> = log.lines().rev().take(25).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            eprintln!("--- {a}:\n{}", tail.join("\n"));
        }
    };
    // Every port counted once in an epoch: the master's merged histogram of that epoch.
    let counted = |e: u64| -> Option<(usize, usize)> {
        let r = master
            .get(&format!("/api/fabric/histogram/port_xmit_data?epoch={e}"))
            .ok()
            .filter(|r| r.status().is_success())?;
        let v: serde_json::Value = r.json().ok()?;
        if v["histogram"].is_null() {
            return None;
        }
        Some((
            hist_of(&v).total() as usize,
            v["agents"].as_array().map_or(0, Vec::len),
        ))
    };
    let t0 = Instant::now();
    let mut good = 0;
    let mut last_seen = String::new();
    // Converged: a run of epochs with every port counted once by the three agents (takes
    // from a live agent wait half a lease before they count).
    while good < 8 {
        if t0.elapsed() > Duration::from_secs(90) {
            dump(&daemons);
            panic!("nats-server {server}: no convergence: {last_seen}");
        }
        std::thread::sleep(EPOCH);
        let e = fabric.epoch().saturating_sub(2);
        match counted(e) {
            Some((n, 3)) if n == total_ports => good += 1,
            other => {
                good = 0;
                last_seen = format!("epoch {e}: {other:?} of {total_ports} ports");
            }
        }
    }
    eprintln!(
        "nats-server {server}: converged after {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    // The start-up warning names a server whose compare-and-set does not hold on a cluster.
    let cas_safe = wasmon::nats::jetstream::cas_safe(&server).expect("a version");
    for (a, d) in &daemons {
        let log = d.stderr.lock().unwrap().clone();
        let warned = log.contains(&format!(
            "nats-server {} on a cluster",
            server.trim_start_matches('v')
        ));
        assert_eq!(warned, !cas_safe, "{a}'s warning on {server}:\n{log}");
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let stream = format!("KV_{}", owners_bucket(NAME));
    let leader = cluster
        .leader(&rt, &stream)
        .expect("the owners stream has a leader");
    // The test's own reader, on a server that stays.
    let bus = Bus::connect(&cluster.servers[(leader + 1) % 3].url());
    let owners_before = bus.owners();
    assert_eq!(owners_before.len(), fabric.node_count(), "every node owned");
    let leases_leader = cluster.leader(
        &rt,
        &format!("KV_{}", wasmon::fabric::wire::leases_bucket(NAME)),
    );
    let killed_at = fabric.epoch();
    let t = Instant::now();
    cluster.kill(leader);
    eprintln!(
        "nats-server {server}: s{leader} (the owners stream's leader; the leases' is s{leases_leader:?}) SIGKILLed at epoch {killed_at}"
    );
    // Every epoch while the server is down: each port counted once. Checked as the epochs
    // pass (the master keeps 64 epochs of histograms).
    let down_for = Duration::from_secs(15);
    let mut next = killed_at + 1;
    let mut checked = 0;
    let mut short = Vec::new();
    let mut elected = None;
    while t.elapsed() < down_for || next + 2 < fabric.epoch() {
        std::thread::sleep(EPOCH);
        if elected.is_none() && cluster.leader(&rt, &stream).is_some_and(|l| l != leader) {
            elected = Some(t.elapsed());
        }
        while next + 2 < fabric.epoch() {
            match counted(next) {
                Some((n, 3)) if n == total_ports => {}
                other => short.push((next, other)),
            }
            checked += 1;
            next += 1;
        }
    }
    cluster.restart(leader);
    cluster.wait_ready(Duration::from_secs(60));
    let back_at = fabric.epoch();
    std::thread::sleep(10 * EPOCH);
    for e in back_at..fabric.epoch() - 2 {
        match counted(e) {
            Some((n, 3)) if n == total_ports => {}
            other => short.push((e, other)),
        }
        checked += 1;
    }
    eprintln!(
        "nats-server {server}: the owners stream had a new leader {elected:?} after the kill; \
         {checked} epochs checked through the loss and the return, {} not counted whole: {short:?}",
        short.len()
    );
    if !short.is_empty() {
        dump(&daemons);
    }
    assert!(
        short.is_empty(),
        "nats-server {server}: epochs without every port counted once (epoch, (observations, agents)): {short:?}"
    );
    // No node changed hands: the owners are those before the kill.
    let owners_after = bus.owners();
    assert_eq!(
        owners_after, owners_before,
        "owners changed through the kill"
    );
    stop.store(true, Ordering::Relaxed);
    let _ = ticker.join();
}

#[test]
fn fabric_on_a_cluster_survives_a_leader_kill_nats_2_9() {
    fabric_survives_a_leader_kill(debian_server());
}

#[test]
fn fabric_on_a_cluster_survives_a_leader_kill_current_nats() {
    fabric_survives_a_leader_kill(current_server());
}
