//! Forwarding sinks with real parts: wasmon daemons (a node and central daemons) as child
//! processes, Debian's nats-server with JetStream, SIGKILLs, restarts and damaged queue files.
//! The property: every sample a node acknowledged reaches every central store once, with its
//! value; every sample that does not is counted.

#[path = "forward/rig.rs"]
pub mod rig;

#[path = "forward/prometheus.rs"]
mod prometheus;

#[path = "forward/tls.rs"]
mod tls;

#[path = "forward/damage.rs"]
mod damage;

#[path = "forward/bad_input.rs"]
mod bad_input;

#[path = "forward/reload.rs"]
mod reload;

#[path = "forward/nats_core.rs"]
mod nats_core;

#[path = "forward/levels.rs"]
mod levels;

#[path = "forward/formats.rs"]
mod formats;

#[path = "forward/nats_tls.rs"]
mod nats_tls;

#[path = "forward/recreated.rs"]
mod recreated;

#[path = "forward/central.rs"]
mod central;

use std::time::Duration;

use rig::*;

use crate::common::*;

fn node_config(dir: &std::path::Path, sinks: &str, defs: &str) -> String {
    format!(
        "[daemon]\ndata-dir = \"{}\"\n\n[[pipeline]]\nname = \"host\"\nsinks = [{sinks}]\n\n{defs}",
        dir.display()
    )
}

/// Writes `DIR/node.toml`: [`node_config`] with its state in `DIR/node`.
fn write_node(dir: &std::path::Path, sinks: &str, defs: &str) -> std::path::PathBuf {
    let path = dir.join("node.toml");
    std::fs::write(&path, node_config(&dir.join("node"), sinks, defs)).unwrap();
    path
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A node forwards over `http` to one central daemon and over `jetstream` to another while a
/// client posts 20,000 samples/s to it. The HTTP central is SIGKILLed for 30 s, the node is
/// SIGKILLed with a backlog and restarted, and nats-server is restarted: afterwards both
/// centrals hold every acknowledged sample once, with its value, and so does a replica started
/// afterwards with its own durable consumer.
#[test]
fn acknowledged_samples_survive_crashes_of_every_party() {
    let tmp = tempfile::tempdir().unwrap();
    let mut nats = NatsServer::start(free_port(), &tmp.path().join("nats"));
    let (http_port, js_port, node_port) = (free_port(), free_port(), free_port());
    let write = |name: &str, text: String| {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let c_http = write(
        "central-http.toml",
        central_config(&tmp.path().join("ch"), None),
    );
    let c_js = write(
        "central-js.toml",
        central_config(
            &tmp.path().join("cj"),
            Some((&nats.url(), "FWD", "central")),
        ),
    );
    let node = write(
        "node.toml",
        node_config(
            &tmp.path().join("node"),
            "\"to-http\", \"to-js\"",
            &format!(
                "[[sink]]\nname = \"to-http\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{http_port}/api/write\"\nmax-backoff = \"1s\"\n\n\
                 [[sink]]\nname = \"to-js\"\ntype = \"jetstream\"\nurl = \"{}\"\nsubject = \"fwd.lp\"\nstream = \"FWD\"\nmax-backoff = \"1s\"\n",
                nats.url()
            ),
        ),
    );
    let mut central_http = DaemonProcess::start_at(&c_http, http_port, |_| {});
    let central_js = DaemonProcess::start_at(&c_js, js_port, |_| {});
    let mut n = DaemonProcess::start_at(&node, node_port, |_| {});
    let base = now() - 6 * 3600;
    let client = Client::start(node_port, "host", 20_000, base);

    std::thread::sleep(Duration::from_secs(3));
    central_http.child.kill().unwrap();
    central_http.child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(5));
    // The node has a backlog for the HTTP central now: kill it mid-stream, start it again.
    assert!(sink(&n, "to-http")["queued-records"].as_u64().unwrap() > 0);
    n.child.kill().unwrap();
    n.child.wait().unwrap();
    n = DaemonProcess::start_at(&node, node_port, |_| {});
    std::thread::sleep(Duration::from_secs(5));
    nats.restart(Duration::from_secs(2));
    std::thread::sleep(Duration::from_secs(16));
    central_http = DaemonProcess::start_at(&c_http, http_port, |_| {});
    std::thread::sleep(Duration::from_secs(4));
    let acked = client.stop();
    let total: u64 = acked.iter().map(|(a, b)| b - a).sum();
    assert!(
        total >= 20_000 * 25,
        "the client got only {total} samples acknowledged"
    );

    for name in ["to-http", "to-js"] {
        wait_until(&format!("{name} drained"), Duration::from_secs(120), || {
            sink(&n, name)["queued-records"].as_u64() == Some(0)
        });
        let s = sink(&n, name);
        assert_eq!(s["dropped"]["queue-size"], 0, "{s}");
        assert_eq!(s["dead-lettered-samples"], 0, "{s}");
    }
    let to = base + (total / HOSTS) as i64 + 2;
    assert_all_there(
        "central (http)",
        &acked,
        &central_values(&central_http, base, to),
        base,
    );
    // The JetStream central acknowledges after its WAL; give it the last messages.
    wait_until(
        "the JetStream central caught up",
        Duration::from_secs(60),
        || central_values(&central_js, base, to).len() as u64 >= total,
    );
    assert_all_there(
        "central (jetstream)",
        &acked,
        &central_values(&central_js, base, to),
        base,
    );
    // A replica: another central daemon with its own durable consumer catches up from the
    // stream, though it was not running while any of this happened.
    let c_replica = write(
        "replica.toml",
        central_config(
            &tmp.path().join("cr"),
            Some((&nats.url(), "FWD", "replica")),
        ),
    );
    let replica = DaemonProcess::start(&c_replica);
    wait_until("the replica caught up", Duration::from_secs(120), || {
        central_values(&replica, base, to).len() as u64 >= total
    });
    assert_all_there(
        "replica (jetstream)",
        &acked,
        &central_values(&replica, base, to),
        base,
    );
}

/// During an outage the queue's budget is exceeded: the oldest records are dropped, the count
/// is exact (sent + dropped = accepted) and the newest data is what arrives.
#[test]
fn over_budget_the_oldest_is_dropped_and_counted_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let central_port = free_port();
    let node = write_node(
        tmp.path(),
        "\"up\"",
        &format!(
            "[[sink]]\nname = \"up\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{central_port}/api/write\"\n\
             gzip = false\nmax-backoff = \"200ms\"\nbatch-size = 1000\nqueue-max-size = \"4MiB\"\n"
        ),
    );
    let n = DaemonProcess::start(&node);
    let base = now() - 3600;
    // ~80 B of line protocol a sample: 200,000 samples are ~16 MB, four times the budget.
    let total = 200_000u64;
    for chunk in (0..total).collect::<Vec<_>>().chunks(10_000) {
        let body: String = chunk.iter().map(|&i| sample_line(i, base)).collect();
        let r = n.post("/api/pipelines/host/samples", &body);
        assert!(r.status().is_success());
    }
    let s = sink(&n, "up");
    let dropped = s["dropped"]["queue-size"].as_u64().unwrap();
    assert_eq!(s["accepted"], total);
    assert!(dropped > total / 2, "{s}");
    assert_eq!(
        s["queued-samples"].as_u64().unwrap()
            + s["evicted-in-flight-samples"].as_u64().unwrap()
            + dropped,
        total,
        "queued + dropped = accepted: {s}"
    );
    let central = start_central(tmp.path(), Some(central_port));
    wait_until("the node drained", Duration::from_secs(60), || {
        sink(&n, "up")["queued-records"].as_u64() == Some(0)
    });
    let s = sink(&n, "up");
    let dropped = s["dropped"]["queue-size"].as_u64().unwrap();
    let sent = s["sent-samples"].as_u64().unwrap();
    assert_eq!(sent + dropped, total, "sent + dropped = accepted: {s}");
    // What arrived is the newest `sent` samples, exactly.
    let values = central_values(&central, base, base + (total / HOSTS) as i64 + 1);
    assert_all_there("central", &[(total - sent, total)], &values, base);
}
