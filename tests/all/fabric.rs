//! The fabric hierarchy end to end: a real nats-server with JetStream on a free loopback
//! port, a simulated fat-tree of 10,656 ports (ticked here, shared through its file), and
//! four `wasmon run` agent daemons in a three-level tree (a1 master; a2, a3 report to a1; a4
//! to a2). Checks: every port owned exactly once; the master's merged histogram equals one
//! computed here from all ports; an error burst on a port of the deepest agent traps at the
//! master within one epoch; a switch removed or added shows within one epoch; a SIGKILLed
//! agent's ports are owned again within two lease periods with no port counted twice; a
//! nats-server restart is survived without double ownership.

mod cluster;
mod leases;
mod rig;

use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmon::fabric::counters::find;

use crate::common::*;

use rig::*;

#[test]
fn four_agents_share_a_simulated_fabric_over_nats() {
    let dir = tempfile::tempdir().unwrap();
    let mut nats = Nats::start(free_port(), &dir.path().join("js"));
    let (fabric, sim_path) = sim_fabric(dir.path(), 24, 10, 12, 42);
    let total_ports = fabric.port_count();
    assert!(total_ports >= 10_000);
    // A core switch that is not there yet: it appears later in the test.
    let late = fabric.find("sw-c7").unwrap();
    fabric.set_present(late, false);
    let stop = Arc::new(AtomicBool::new(false));
    let ticker = {
        let (f, s) = (fabric.clone(), stop.clone());
        std::thread::spawn(move || f.run(&s))
    };
    let _stop_ticker = scopeguard(stop.clone());
    let central = Central::start(fabric.clone());

    let mut daemons: HashMap<&str, DaemonProcess> = HashMap::new();
    for (agent, parent, attach) in AGENTS {
        let cfg = config(dir.path(), &nats.url(), &sim_path, agent, parent, attach);
        if agent == "a4" {
            // One agent feeds its port rates through a transformer to stdout.
            let mut text = std::fs::read_to_string(&cfg).unwrap();
            text.push_str(&format!(
                "pipeline = \"fab\"\n[[pipeline]]\nname = \"fab\"\nsinks = [\"stdout\"]\n\
                 [[pipeline.transformer]]\nguest = \"{}\"\nparams = {{ factor = 8.0, prefix = \"fabric.\", unit = \"x8\" }}\n",
                guest_path("template").display()
            ));
            std::fs::write(&cfg, text).unwrap();
        }
        daemons.insert(agent, DaemonProcess::start(&cfg));
    }
    let bus = Bus::connect(&nats.url());
    let all_nodes = fabric.node_count();
    let present_ports = total_ports - fabric.ports_of(late).len();

    // 1. Every present node owned, every port by exactly one agent: the bucket's owners and
    // the agents' own counts agree, and add up to the fabric.
    let converge = |want_nodes: usize, want_ports: usize, live: &[&str]| {
        let t0 = Instant::now();
        loop {
            let owners = bus.owners();
            let leases = bus.leases();
            let mut per: HashMap<&str, usize> = HashMap::new();
            for a in owners.values() {
                *per.entry(a.as_str()).or_default() += 1;
            }
            let live_owned: usize = live.iter().map(|a| per.get(a).copied().unwrap_or(0)).sum();
            let ports: u32 = live
                .iter()
                .filter_map(|a| leases.get(*a))
                .map(|l| l.ports)
                .sum();
            let state = format!(
                "owned {live_owned}/{want_nodes} nodes, leases count {ports}/{want_ports} ports, \
                 nodes per agent in the bucket {per:?}, in the leases {:?}",
                leases
                    .iter()
                    .map(|(a, l)| (a.clone(), l.nodes))
                    .collect::<BTreeMap<_, _>>()
            );
            // Every live agent owns some node: one that is still starting (a4 compiles a
            // transformer guest first) owns none yet, and the others' counts can add up
            // without it.
            if live_owned == want_nodes
                && ports as usize == want_ports
                && live.iter().all(|a| {
                    per.get(a).is_some_and(|&n| n > 0)
                        && leases.get(*a).map(|l| l.nodes as usize) == per.get(a).copied()
                })
            {
                eprintln!("converged in {:?}: {state}", t0.elapsed());
                return;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                for (a, d) in &daemons {
                    let log = d.stderr.lock().unwrap().clone();
                    let tail: Vec<&str> = log.lines().rev().take(15).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    eprintln!("--- {a}:\n{}", tail.join("\n"));
                }
                panic!("no convergence: {state}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    converge(all_nodes - 1, present_ports, &["a1", "a2", "a3", "a4"]);
    let owners = bus.owners();
    for a in ["a1", "a2", "a3", "a4"] {
        assert!(owners.values().any(|o| o == a), "{a} owns nothing");
    }

    let master = &daemons["a1"];
    // The same answers over HTTP and from the command line.
    let status: Value = daemons["a2"]
        .get("/api/fabric/status")
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(status["agents"].as_array().unwrap().len(), 4, "{status}");
    assert_eq!(status["agent"], "a2");
    // The API answers the bucket's owner. A node still contested after convergence may change
    // hands between the two reads: the answer must match a fresh read of the bucket.
    settle(
        "the API names sw-c0's owner",
        Duration::from_secs(10),
        || {
            let who = bus.owner("sw-c0").unwrap();
            let v: Value = daemons["a4"]
                .get("/api/fabric/owner/sw-c0")
                .unwrap()
                .json()
                .unwrap();
            match v["agent"] == who.as_str() && v["alive"] == true {
                true => Ok(()),
                false => Err(format!("bucket: {who}, API: {v}")),
            }
        },
    );
    assert_eq!(
        daemons["a4"]
            .get("/api/fabric/owner/no-such-node")
            .unwrap()
            .status(),
        404
    );
    let cli = |args: &[&str]| {
        let out = output_ok(
            Command::new(crate::common::wasmon_bin())
                .arg("fabric")
                .args(args),
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // The leases' counts trail the bucket by up to an epoch while a contested node changes
    // hands after convergence: the status must settle on the fabric's ports.
    let want = format!("{present_ports} ports");
    let cli_settles = |what: &str, args: &[&str], ok: &dyn Fn(&str) -> bool| {
        settle(what, Duration::from_secs(10), || {
            let text = cli(args);
            if ok(&text) { Ok(()) } else { Err(text) }
        })
    };
    let url = nats.url();
    cli_settles(
        "the status counts the fabric",
        &["--nats", &url, "--name", NAME, "status"],
        &|t| t.contains("4 agents") && t.contains(&want),
    );
    // The master merges what each agent reported for the last epoch: an agent that took its
    // first nodes this epoch reports from the next one.
    cli_settles(
        "the histogram merges 4 agents",
        &["--url", &master.url(""), "histogram", "port_xmit_data"],
        &|t| t.contains("merged from 4 agents") && t.contains("total"),
    );
    settle(
        "the CLI names sw-c0's owner",
        Duration::from_secs(10),
        || {
            let who = bus.owner("sw-c0").unwrap();
            let text = cli(&["--nats", &nats.url(), "--name", NAME, "owner", "sw-c0"]);
            match text.starts_with(&format!("sw-c0: {who} (")) {
                true => Ok(()),
                false => Err(format!("bucket: {who}, CLI: {text}")),
            }
        },
    );
    // Thresholds for the whole tree, checked against the counter table.
    let r = master.post(
        "/api/fabric/thresholds",
        r#"{"traps":{"no_such_counter":1}}"#,
    );
    assert_eq!(r.status(), 400);
    let r = master.post("/api/fabric/thresholds", r#"{"traps":{"link_downed":60}}"#);
    let v: Value = r.json().unwrap();
    assert_eq!(v["agents"].as_array().unwrap().len(), 4, "{v}");

    // Port rates enter the agent's pipeline: a transformer sees them, the sink gets them.
    let a4 = &daemons["a4"];
    let s = a4.next_sample();
    let name = s["name"].as_str().unwrap();
    let counter = name
        .strip_prefix("fabric.")
        .unwrap_or_else(|| panic!("{s}"));
    assert!(
        find(&wasmon::fabric::counters::IB_EXTENDED, counter).is_some(),
        "{s}"
    );
    let (node, port) = s["resource"].as_str().unwrap().split_once('/').unwrap();
    assert!(
        fabric.find(node).is_some() && port.parse::<u32>().is_ok(),
        "{s}"
    );
    assert!(
        s["value"]
            .as_f64()
            .is_some_and(|v| v.is_finite() && v >= 0.0),
        "{s}"
    );
    assert_eq!(s["unit"], "x8", "the transformer's unit: {s}");

    eprintln!(
        "fabric test: step 2: histograms at epoch {}",
        fabric.epoch()
    );
    // 2. The master's merged histogram is the central one, bucket for bucket. Nodes taken from
    // a live agent while the tree formed count half a lease after their take (and a new
    // owner's first reading is a baseline): from the first epoch with every port, every one.
    let took = wait(
        "an epoch with every port counted",
        Duration::from_secs(10),
        || {
            let v = histogram(master, "port_xmit_data", None);
            !v["histogram"].is_null() && hist_of(&v).total() as usize == present_ports
        },
    );
    eprintln!("every port counted {took:?} after the bucket and the leases agreed");
    let mut compared = 0;
    let t0 = Instant::now();
    while compared < 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no histogram matched the central one"
        );
        for counter in ["port_xmit_data", "port_xmit_wait"] {
            let v = histogram(master, counter, None);
            let epoch = v["epoch"].as_u64().unwrap();
            assert!(v["missing"].as_array().unwrap().is_empty(), "{v}");
            assert_eq!(v["agents"].as_array().unwrap().len(), 4, "{v}");
            let merged = hist_of(&v);
            assert_eq!(
                merged.total() as usize,
                present_ports,
                "every port counted once"
            );
            let c = find(&wasmon::fabric::counters::IB_EXTENDED, counter).unwrap();
            let central = central
                .hist
                .lock()
                .unwrap()
                .get(&epoch)
                .map(|h| h[c].clone());
            let central = central.expect("the central reader has the epoch");
            // The late switch is missing centrally and not owned by any agent.
            let mut expect = central.clone();
            expect.missing -= fabric.ports_of(late).len() as u64;
            if merged == expect {
                compared += 1;
            } else {
                // Ownership may have moved within the last epochs: a new owner's first
                // reading is only a baseline. Never more observations than ports.
                assert!(
                    merged.total() <= expect.total(),
                    "merged {merged:?}\ncentral {expect:?}"
                );
            }
        }
        std::thread::sleep(EPOCH);
    }

    eprintln!("fabric test: step 3: trap at epoch {}", fabric.epoch());
    // 3. An error burst on a port of the deepest agent (a4 -> a2 -> a1) traps at the master
    // within one epoch.
    let owners = bus.owners();
    let node = owners
        .iter()
        .find(|(n, a)| a.as_str() == "a4" && n.starts_with("sw-"))
        .map(|(n, _)| n.clone())
        .unwrap();
    let port = fabric.ports_of(fabric.find(&node).unwrap()).start + 2;
    let e0 = fabric.epoch();
    fabric.inject_errors(port, 500);
    let instance = format!("{node}/3");
    wait("the trap at the master", Duration::from_secs(5), || {
        let traps: Value = master.get("/api/fabric/traps").unwrap().json().unwrap();
        traps.as_array().unwrap().iter().any(|t| {
            t["node"] == node.as_str() && t["port"] == "3" && t["counter"] == "symbol_error"
        })
    });
    let seen_at = fabric.epoch();
    assert!(
        seen_at <= e0 + 2,
        "injected after {e0}, applied at {}, seen at the master at {seen_at}",
        e0 + 1
    );
    let traps: Value = master.get("/api/fabric/traps").unwrap().json().unwrap();
    let t = traps
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["node"] == node.as_str() && t["counter"] == "symbol_error")
        .unwrap();
    assert_eq!(t["agent"], "a4");
    assert!(t["increase"].as_u64().unwrap() >= 500, "{t}");
    // The master's notifier has it too (subscriber wasmon.fabric).
    let v: Value = master
        .get("/api/notify/subscribers/wasmon.fabric")
        .unwrap()
        .json()
        .unwrap();
    assert!(v["sent"].as_u64().unwrap_or(0) >= 1, "{v} ({instance})");
    let _ = instance;

    eprintln!(
        "fabric test: step 4: switch removed/added at epoch {}",
        fabric.epoch()
    );
    // 4. A switch removed shows in its owner's status within one epoch; back, likewise.
    let sw = owners
        .iter()
        .find(|(n, a)| a.as_str() == "a3" && n.starts_with("sw-p"))
        .map(|(n, _)| n.clone())
        .unwrap();
    let swn = fabric.find(&sw).unwrap();
    let e1 = fabric.epoch();
    fabric.set_present(swn, false);
    let mut first = None;
    wait(
        "the removed switch in a3's status",
        Duration::from_secs(5),
        || {
            first = bus
                .leases()
                .remove("a3")
                .filter(|l| l.epoch > e1 && l.missing_nodes.contains(&sw));
            first.is_some()
        },
    );
    let l = first.unwrap();
    assert!(
        l.epoch <= e1 + 2,
        "removed after epoch {e1}, shown for epoch {}",
        l.epoch
    );
    assert_eq!(l.ports_missing as usize, fabric.ports_of(swn).len());
    let e2 = fabric.epoch();
    fabric.set_present(swn, true);
    let mut back = None;
    wait(
        "the switch back in a3's status",
        Duration::from_secs(5),
        || {
            back = bus
                .leases()
                .remove("a3")
                .filter(|l| l.epoch > e2 && l.ports_missing == 0);
            back.is_some()
        },
    );
    assert!(back.unwrap().epoch <= e2 + 2, "back after epoch {e2}");
    // A switch never seen before is discovered and owned within one epoch.
    let e3 = fabric.epoch();
    fabric.set_present(late, true);
    wait("the new switch owned", Duration::from_secs(5), || {
        bus.owner("sw-c7").is_some()
    });
    assert!(
        fabric.epoch() <= e3 + 2,
        "added after {e3}, owned at {}",
        fabric.epoch()
    );
    converge(all_nodes, total_ports, &["a1", "a2", "a3", "a4"]);

    eprintln!("fabric test: step 5: SIGKILL at epoch {}", fabric.epoch());
    // 5. SIGKILL a3: its ports are owned again within two lease periods, never twice.
    let a3_nodes: Vec<String> = bus
        .owners()
        .into_iter()
        .filter(|(_, a)| a == "a3")
        .map(|(n, _)| n)
        .collect();
    assert!(!a3_nodes.is_empty());
    let killed_at_epoch = fabric.epoch();
    let kill_ns = wasmon::procfs::now_ns();
    daemons.get("a3").unwrap().signal("-KILL");
    wait("a3's nodes taken over", 4 * LEASE, || {
        !bus.owners().values().any(|a| a == "a3")
    });
    // When each node was claimed: the taker's timestamp in the owner value.
    let claimed_ns = bus.rt.block_on(async {
        let mut last = 0i64;
        for n in &a3_nodes {
            let (o, _) = wasmon::fabric::tree::owner(&bus.b, n)
                .await
                .unwrap()
                .unwrap();
            assert_ne!(o.agent, "a3");
            last = last.max(o.ts_ns);
        }
        last
    });
    let took = Duration::from_nanos((claimed_ns - kill_ns).max(0) as u64);
    eprintln!(
        "takeover of {} nodes after SIGKILL: {took:?} = {:.2} leases",
        a3_nodes.len(),
        took.as_secs_f64() / LEASE.as_secs_f64()
    );
    assert!(took <= 2 * LEASE, "takeover took {took:?}");
    converge(all_nodes, total_ports, &["a1", "a2", "a4"]);
    // No port counted twice in any epoch since the kill; every port once at the end.
    std::thread::sleep(2 * EPOCH);
    let last = histogram(master, "port_xmit_data", None)["epoch"]
        .as_u64()
        .unwrap();
    for e in killed_at_epoch..=last {
        let v = histogram(master, "port_xmit_data", Some(e));
        if v["histogram"].is_null() {
            continue;
        }
        let total = hist_of(&v).total() as usize;
        assert!(
            total <= total_ports,
            "epoch {e}: {total} observations of {total_ports} ports"
        );
    }
    assert_eq!(
        hist_of(&histogram(master, "port_xmit_data", Some(last))).total() as usize,
        total_ports
    );

    eprintln!(
        "fabric test: step 6: nats-server restart at epoch {}",
        fabric.epoch()
    );
    // 6. nats-server restarted: the agents reconnect and go on, no node owned twice.
    let before: HashMap<String, u64> = bus
        .leases()
        .into_iter()
        .map(|(a, l)| (a, l.epoch))
        .collect();
    nats.restart(Duration::from_millis(500));
    let bus = Bus::connect(&nats.url());
    wait("the agents renewing again", Duration::from_secs(20), || {
        let l = bus.leases();
        ["a1", "a2", "a4"]
            .iter()
            .all(|a| l.get(*a).is_some_and(|x| x.epoch > before[*a] + 4))
    });
    converge(all_nodes, total_ports, &["a1", "a2", "a4"]);
    // The master's newest epoch may still wait for a subtree that reconnected last: within a
    // few epochs one holds every port again (the check below names what is missing if not).
    let deadline = Instant::now() + Duration::from_secs(20);
    let v = loop {
        let v = histogram(master, "port_xmit_data", None);
        let whole = !v["histogram"].is_null() && hist_of(&v).total() as usize == total_ports;
        if whole || Instant::now() > deadline {
            break v;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let e = v["epoch"].as_u64();
    let subtrees: Vec<String> = ["a1", "a2", "a4"]
        .iter()
        .map(|a| {
            // For the message only: a subtree may not hold the master's epoch (yet).
            let s = histogram(&daemons[a], "port_xmit_data", e);
            if s["histogram"].is_null() {
                format!("{a}: no histogram at epoch {e:?}: {s}")
            } else {
                format!("{a}: {} from {}", hist_of(&s).total(), s["agents"])
            }
        })
        .collect();
    assert!(
        !v["histogram"].is_null(),
        "no histogram at the master's newest epoch 20 s after the restart: {v}\n{subtrees:?}"
    );
    assert_eq!(
        hist_of(&v).total() as usize,
        total_ports,
        "{v}\n{subtrees:?}\n{:?}",
        bus.leases()
    );
    assert!(v["missing"].as_array().unwrap().is_empty(), "{v}");

    drop(central);
    stop.store(true, Ordering::Relaxed);
    let _ = ticker.join();
}
