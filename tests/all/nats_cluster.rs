//! The data path on a 3-server JetStream cluster (issue 31): a node forwards through a
//! `jetstream` sink (replicas 3) to a central daemon's durable consumer while, in turn, the
//! stream's leader is SIGKILLed and started again, the server the node is connected to is
//! SIGKILLed and started again, and a server is frozen with SIGSTOP and resumed. Afterwards
//! every acknowledged sample is in the central store with its value, the stream holds each
//! record once (re-sends carried the same `Nats-Msg-Id`), and the stall of each fault is
//! printed (`--nocapture`; benches/README.md has the figures). Both daemons' first seed is a
//! port nobody listens on. Run on Debian's nats-server 2.9.10 and on a current one.
//! Also: a config whose servers list is bad is refused naming the field, and a consumer
//! whose `replicas` differs from the stream's is reported (healthcheck, metrics), not used.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cluster::*;
use crate::common::*;
use crate::forward::rig::*;

/// Samples per second the client posts: enough to see a stall to the tenth of a second
/// (a record every 100 ms), little enough for two clusters side by side on two cores.
const RATE: u64 = 10_000;

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Progress of the node's sink (records acknowledged by a PubAck) and of the central's
/// consumer (its acknowledged stream sequence), sampled every 50 ms.
struct Monitor {
    stop: Arc<AtomicBool>,
    /// The latest (records the node sent, stream sequence the central acknowledged).
    latest: Arc<std::sync::Mutex<(u64, u64)>>,
    thread: Option<std::thread::JoinHandle<Vec<(f64, u64, u64)>>>,
    t0: Instant,
}

impl Monitor {
    fn start(node: String, urls: String, t0: Instant) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let latest = Arc::new(std::sync::Mutex::new((0, 0)));
        let l = latest.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let http = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(1))
                .build()
                .unwrap();
            let nats = rt.block_on(async {
                let addrs: Vec<&str> = urls.split(',').collect();
                async_nats::connect(addrs).await.unwrap()
            });
            let mut out = Vec::new();
            let (mut sent, mut acked) = (0, 0);
            while !s.load(Ordering::Relaxed) {
                if let Ok(v) = http
                    .get(format!("{node}/api/sinks"))
                    .send()
                    .and_then(|r| r.json::<Value>())
                {
                    sent = v["sinks"][0]["sent-records"].as_u64().unwrap_or(sent);
                }
                let info = rt.block_on(async {
                    let r = tokio::time::timeout(
                        Duration::from_millis(300),
                        nats.request("$JS.API.CONSUMER.INFO.FWD.central", "".into()),
                    )
                    .await;
                    let m = r.ok()?.ok()?;
                    serde_json::from_slice::<Value>(&m.payload).ok()
                });
                if let Some(seq) = info.and_then(|v| v["ack_floor"]["stream_seq"].as_u64()) {
                    acked = acked.max(seq);
                }
                out.push((t0.elapsed().as_secs_f64(), sent, acked));
                *l.lock().unwrap() = (sent, acked);
                std::thread::sleep(Duration::from_millis(50));
            }
            out
        });
        Monitor {
            stop,
            latest,
            thread: Some(thread),
            t0,
        }
    }

    fn now(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn stop(mut self) -> Vec<(f64, u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// The longest time without progress of `value` that ended in `(from, to]` (the gap that
/// spans `from` included): the stall a fault at `from` caused, until both sides ran again.
fn stall(
    log: &[(f64, u64, u64)],
    value: impl Fn(&(f64, u64, u64)) -> u64,
    from: f64,
    to: f64,
) -> f64 {
    let rises: Vec<f64> = log
        .windows(2)
        .filter(|w| value(&w[1]) > value(&w[0]))
        .map(|w| w[1].0)
        .collect();
    rises
        .windows(2)
        .filter(|w| w[1] > from && w[1] <= to)
        .map(|w| w[1] - w[0])
        .fold(0.0, f64::max)
}

/// Waits until the node delivers again and the central consumes again (both progressed in
/// five polls in a row), so the next fault's stall is its own.
fn recovered(monitor: &Monitor) {
    let now = || *monitor.latest.lock().unwrap();
    let (mut last, mut rising) = (now(), 0);
    let deadline = Instant::now() + Duration::from_secs(90);
    while rising < 5 {
        assert!(
            Instant::now() < deadline,
            "delivery did not resume within 90 s"
        );
        std::thread::sleep(Duration::from_millis(300));
        let n = now();
        rising = if n.0 > last.0 && n.1 > last.1 {
            rising + 1
        } else {
            0
        };
        last = n;
    }
}

fn write(dir: &Path, name: &str, text: String) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn central_config(dir: &Path, servers: &str, durable: &str, replicas: usize) -> String {
    format!(
        "[daemon]\ndata-dir = \"{}\"\n\n[store]\ndefault-frequency = 1\n\n[nats]\naddress = \"{servers}\"\n\n\
         [[nats.subscriptions]]\nsubscribe-to = \"fwd.lp\"\nstream = \"FWD\"\ndurable = \"{durable}\"\nreplicas = {replicas}\n",
        dir.display()
    )
}

fn forwarding_survives_the_loss_of_a_server(bin: PathBuf, frozen: Duration) {
    let tmp = tempfile::tempdir().unwrap();
    let version = version(&bin);
    let mut cluster = Cluster::start(&bin, &tmp.path().join("nats"), 3);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dead = format!("nats://127.0.0.1:{}", free_port());
    // The central's servers as a comma-separated string, the node's as a TOML list; both
    // begin with a seed nobody answers on.
    let central = write(
        tmp.path(),
        "central.toml",
        central_config(
            &tmp.path().join("central"),
            &format!("{dead},{}", cluster.urls()),
            "central",
            3,
        ),
    );
    let node_list = cluster
        .toml_list()
        .replacen('[', &format!("[\"{dead}\", "), 1);
    let node = write(
        tmp.path(),
        "node.toml",
        format!(
            "[daemon]\ndata-dir = \"{}\"\n\n[[pipeline]]\nname = \"host\"\nsinks = [\"to-js\"]\n\n\
             [[sink]]\nname = \"to-js\"\ntype = \"jetstream\"\nurl = {node_list}\nsubject = \"fwd.lp\"\n\
             stream = \"FWD\"\nreplicas = 3\nmax-backoff = \"1s\"\ntimeout = \"2s\"\n",
            tmp.path().join("node").display()
        ),
    );
    let central_d = DaemonProcess::start(&central);
    let node_port = free_port();
    let node_d = DaemonProcess::start_at(&node, node_port, |_| {});
    let base = now() - 8 * 3600;
    let t0 = Instant::now();
    let monitor = Monitor::start(node_d.url(""), cluster.urls(), t0);
    let client = Client::start(node_port, "host", RATE, base);
    wait_until(
        "the first records acknowledged",
        Duration::from_secs(30),
        || sink(&node_d, "to-js")["sent-records"].as_u64() > Some(0),
    );
    // A consumer that asks for another number of replicas than the stream has reports it and
    // does not consume: healthcheck 503 naming it, its task failing in /metrics.
    let mismatched = write(
        tmp.path(),
        "mismatched.toml",
        central_config(&tmp.path().join("m"), &cluster.urls(), "other", 1),
    );
    let m = DaemonProcess::start(&mismatched);
    wait_until("the mismatch reported", Duration::from_secs(30), || {
        let r = m.get("/api/healthcheck").unwrap();
        r.status() == 503
            && r.text()
                .unwrap()
                .contains("stream \\\"FWD\\\" has 3 replica(s) and replicas = 1 asks for 1")
    });
    let metrics = m.get("/metrics").unwrap().text().unwrap();
    assert!(
        metrics.contains("wasmon_task_failing{task=\"nats-ingest FWD/other\"} 1"),
        "{metrics}"
    );
    let mismatched_d = m;
    std::thread::sleep(Duration::from_secs(3));

    let mut faults: Vec<(String, f64, f64)> = Vec::new();
    // 1. The stream's leader dies and comes back 3 s later.
    let leader = cluster.leader(&rt, "FWD").expect("FWD has a leader");
    let at = monitor.now();
    eprintln!("{:.2} {} kill leader s{leader}", at, chrono::Utc::now());
    cluster.kill(leader);
    std::thread::sleep(Duration::from_secs(3));
    cluster.restart(leader);
    faults.push((
        "stream leader SIGKILLed (3 s down)".into(),
        at,
        monitor.now() + 4.0,
    ));
    recovered(&monitor);
    faults.last_mut().unwrap().2 = monitor.now();
    // 2. The server the node is connected to dies and comes back 3 s later.
    let connected = cluster
        .connected_from(node_d.child.id())
        .expect("the node is connected to one of the servers");
    let at = monitor.now();
    let was_leader = cluster.leader(&rt, "FWD") == Some(connected);
    eprintln!("{:.2} {} kill node's s{connected}", at, chrono::Utc::now());
    cluster.kill(connected);
    std::thread::sleep(Duration::from_secs(3));
    cluster.restart(connected);
    faults.push((
        format!(
            "node's server SIGKILLed (3 s down; {})",
            if was_leader {
                "the stream leader"
            } else {
                "not the stream leader"
            }
        ),
        at,
        monitor.now() + 4.0,
    ));
    recovered(&monitor);
    faults.last_mut().unwrap().2 = monitor.now();
    // 3. A server hangs (the leader: the worst one to lose) and resumes.
    let hung = cluster.leader(&rt, "FWD").unwrap_or(0);
    let at = monitor.now();
    eprintln!("{:.2} {} freeze s{hung}", at, chrono::Utc::now());
    cluster.freeze(hung);
    std::thread::sleep(frozen);
    cluster.thaw(hung);
    faults.push((
        format!("stream leader SIGSTOPped {} s", frozen.as_secs()),
        at,
        monitor.now() + 4.0,
    ));
    recovered(&monitor);
    faults.last_mut().unwrap().2 = monitor.now();
    let acked = client.stop();
    let total: u64 = acked.iter().map(|(a, b)| b - a).sum();
    assert!(total > 0);

    wait_until("the node's queue drained", Duration::from_secs(120), || {
        sink(&node_d, "to-js")["queued-records"].as_u64() == Some(0)
    });
    let s = sink(&node_d, "to-js");
    assert_eq!(s["dropped"]["queue-size"], 0, "{s}");
    assert_eq!(s["dead-lettered-samples"], 0, "{s}");
    let to = base + (total / HOSTS) as i64 + 2;
    wait_until("the central caught up", Duration::from_secs(120), || {
        central_values(&central_d, base, to).len() as u64 >= total
    });
    assert_all_there(
        &format!("central behind a 3-server cluster ({version})"),
        &acked,
        &central_values(&central_d, base, to),
        base,
    );
    // Each record is in the stream once: a re-send after a lost PubAck carried the same
    // Nats-Msg-Id and was dropped as a duplicate.
    let sent = sink(&node_d, "to-js")["sent-records"].as_u64().unwrap();
    let (messages, replicas) = rt.block_on(async {
        let addrs: Vec<String> = cluster.urls().split(',').map(String::from).collect();
        let c = async_nats::connect(addrs).await.unwrap();
        let mut st = async_nats::jetstream::new(c)
            .get_stream("FWD")
            .await
            .unwrap();
        let info = st.info().await.unwrap();
        (info.state.messages, info.config.num_replicas)
    });
    assert_eq!(replicas, 3, "the sink created the stream with replicas = 3");
    assert_eq!(messages, sent, "stream messages vs records the node sent");
    let log = monitor.stop();
    if std::env::var_os("WASMON_CLUSTER_LOGS").is_some() {
        eprintln!(
            "node:\n{}\ncentral:\n{}",
            node_d.stderr.lock().unwrap(),
            central_d.stderr.lock().unwrap()
        );
        for (t, a, b) in &log {
            eprintln!("{t:.2} {a} {b}");
        }
    }
    for (what, from, to) in &faults {
        eprintln!(
            "nats-server {version}, {RATE} samples/s: {what}: node stalled {:.1} s, central {:.1} s",
            stall(&log, |e| e.1, *from, *to),
            stall(&log, |e| e.2, *from, *to),
        );
    }
    // The mismatched consumer stored nothing all along.
    assert!(
        central_values(&mismatched_d, base, to).is_empty(),
        "a consumer with mismatched replicas consumed"
    );
}

#[test]
fn forwarding_survives_the_loss_of_a_server_nats_2_9() {
    forwarding_survives_the_loss_of_a_server(debian_server(), Duration::from_secs(30));
}

#[test]
fn forwarding_survives_the_loss_of_a_server_current_nats() {
    forwarding_survives_the_loss_of_a_server(current_server(), Duration::from_secs(30));
}

/// `wasmon config check` refuses a servers list it could not connect with, naming the field
/// and the entry, in each section that talks to NATS.
#[test]
fn config_check_refuses_bad_server_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let check = |name: &str, text: &str| {
        let p = write(tmp.path(), name, text.to_string());
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmon"))
            .args(["config", "check"])
            .arg(&p)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    for (name, text, expect) in [
        (
            "ingest.toml",
            "[nats]\naddress = \"nats://127.0.0.1:4222,nats://127.0.0.1:42x\"\nsubscriptions = []\n",
            "nats.address: server 2 of 2 (\"nats://127.0.0.1:42x\")",
        ),
        (
            "empty.toml",
            "[nats]\naddress = []\nsubscriptions = []\n",
            "an empty list of servers",
        ),
        (
            "sink.toml",
            "[[sink]]\nname = \"f\"\ntype = \"jetstream\"\nurl = [\"nats://a:4222\", \"http://b:4222\"]\nsubject = \"s\"\nstream = \"S\"\n",
            "sink \"f\": url: server 2 of 2 (\"http://b:4222\"): a NATS server's URL starts with nats:// or tls://",
        ),
        (
            "replicas.toml",
            "[[sink]]\nname = \"f\"\ntype = \"jetstream\"\nurl = \"nats://a:4222\"\nsubject = \"s\"\nstream = \"S\"\nreplicas = 7\n",
            "sink \"f\": replicas: 7: from 1 to 5",
        ),
        (
            "fleet.toml",
            "[fleet]\nnats = \"nats://a:4222,,nats://b:4222\"\nname = \"prod\"\n",
            "fleet.nats: server 2 of 3 (\"\"): is empty",
        ),
        (
            "fabric.toml",
            "[fabric]\nenabled = true\nnats = \"nats://a:4222\"\nreplicas = 0\n",
            "fabric.replicas = 0",
        ),
        (
            "subscription.toml",
            "[nats]\naddress = \"nats://a:4222\"\n[[nats.subscriptions]]\nsubscribe-to = \"x\"\nreplicas = 3\n",
            "nats.subscriptions[0].replicas: goes with `stream`",
        ),
    ] {
        let (ok, err) = check(name, text);
        assert!(!ok, "{name} passed");
        assert!(err.contains(expect), "{name}: {err}");
    }
    let (ok, err) = check(
        "good.toml",
        "[nats]\naddress = [\"nats://a:4222\", \"nats://b:4222\"]\n\
         [[nats.subscriptions]]\nsubscribe-to = \"x\"\nstream = \"X\"\nreplicas = 3\n",
    );
    assert!(ok, "{err}");
}
