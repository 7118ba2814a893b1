//! The data path on a 3-server JetStream cluster (issue 31): a node forwards through a
//! `jetstream` sink (replicas 3) to a central daemon's durable consumer while, in turn, the
//! stream's leader is SIGKILLed and started again, the server the node is connected to is
//! SIGKILLed and started again, a server is frozen with SIGSTOP and resumed, all three are
//! restarted one after another, and two of three are down for 30 s (no quorum: the node
//! queues on disk and says so once). Afterwards
//! every acknowledged sample is in the central store with its value, the stream holds each
//! record once (re-sends carried the same `Nats-Msg-Id`), and the stall of each fault is
//! printed with what the stream's leader election took of it (`--nocapture`;
//! benches/README.md has the figures). Both daemons' first seed is a
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

mod frozen;
mod hedge;
mod partition;

/// A runtime for the test's own NATS requests.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// One poll of the monitor.
#[derive(Clone, Debug, Default)]
struct Poll {
    /// Seconds since the run began.
    t: f64,
    /// Records the node's sink has had acknowledged by a PubAck.
    sent: u64,
    /// The stream sequence the central's consumer acknowledged (its ack floor) and the one
    /// it was delivered last.
    acked: u64,
    delivered: u64,
    /// The stream's leader, when a server answered for the stream within the poll's limit.
    leader: Option<String>,
    /// With a central to watch ([`Monitor::watching`]): the newest timestamp of host `h0`'s
    /// samples in its store (what it stored, through whichever stream), and the leader of the
    /// hedge's stream `FWDB`.
    stored: u64,
    hedge_leader: Option<String>,
}

/// Progress of the node's sink and of the central's consumer, and the stream's leader,
/// sampled every 50 ms.
struct Monitor {
    stop: Arc<AtomicBool>,
    latest: Arc<std::sync::Mutex<Poll>>,
    thread: Option<std::thread::JoinHandle<Vec<Poll>>>,
    t0: Instant,
}

impl Monitor {
    fn start(node: String, urls: String, t0: Instant) -> Monitor {
        Self::watching(node, urls, t0, None)
    }

    /// [`Monitor::start`], and with `central` (its URL and the samples' base timestamp) what
    /// the central daemon stored.
    fn watching(
        node: String,
        urls: String,
        t0: Instant,
        central: Option<(String, i64)>,
    ) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let latest = Arc::new(std::sync::Mutex::new(Poll::default()));
        let l = latest.clone();
        let thread = std::thread::spawn(move || {
            let rt = runtime();
            let http = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(1))
                .build()
                .unwrap();
            // A connection to a server, given up after a few unanswered polls: a frozen
            // server would otherwise hide the others' progress for as long as it hangs
            // (async-nats pings only an idle connection, and these polls never let it idle).
            let connect = || {
                rt.block_on(async {
                    let addrs: Vec<&str> = urls.split(',').collect();
                    tokio::time::timeout(
                        Duration::from_secs(1),
                        async_nats::ConnectOptions::new()
                            .ping_interval(Duration::from_secs(1))
                            .connect(addrs),
                    )
                    .await
                    .ok()?
                    .ok()
                })
            };
            let nats = std::cell::RefCell::new(connect());
            let unanswered = std::cell::Cell::new(0u32);
            let ask = |subject: &'static str| {
                if nats.borrow().is_none() || unanswered.get() >= 4 {
                    *nats.borrow_mut() = connect();
                    unanswered.set(0);
                }
                let client = nats.borrow().clone()?;
                let got = rt.block_on(async {
                    let r = tokio::time::timeout(
                        Duration::from_millis(300),
                        client.request(subject, "".into()),
                    )
                    .await;
                    let m = r.ok()?.ok()?;
                    serde_json::from_slice::<Value>(&m.payload).ok()
                });
                unanswered.set(if got.is_some() {
                    0
                } else {
                    unanswered.get() + 1
                });
                got
            };
            let mut out = Vec::new();
            let mut p = Poll::default();
            while !s.load(Ordering::Relaxed) {
                if let Ok(v) = http
                    .get(format!("{node}/api/sinks"))
                    .send()
                    .and_then(|r| r.json::<Value>())
                {
                    p.sent = v["sinks"][0]["sent-records"].as_u64().unwrap_or(p.sent);
                }
                if let Some(v) = ask("$JS.API.CONSUMER.INFO.FWD.central") {
                    if let Some(seq) = v["ack_floor"]["stream_seq"].as_u64() {
                        p.acked = p.acked.max(seq);
                    }
                    if let Some(seq) = v["delivered"]["stream_seq"].as_u64() {
                        p.delivered = p.delivered.max(seq);
                    }
                }
                p.leader = ask("$JS.API.STREAM.INFO.FWD")
                    .and_then(|v| v["cluster"]["leader"].as_str().map(String::from));
                if let Some((central, base)) = &central {
                    p.hedge_leader = ask("$JS.API.STREAM.INFO.FWDB")
                        .and_then(|v| v["cluster"]["leader"].as_str().map(String::from));
                    p.stored = p.stored.max(newest_stored(&http, central, *base, p.stored));
                }
                p.t = t0.elapsed().as_secs_f64();
                out.push(p.clone());
                *l.lock().unwrap() = p.clone();
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

    fn stop(mut self) -> Vec<Poll> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }

    /// [`Monitor::stop`], and with `WASMON_CLUSTER_LOGS` set the daemons' logs and every poll
    /// shown.
    fn stop_showing(self, node: &DaemonProcess, central: &DaemonProcess) -> Vec<Poll> {
        let log = self.stop();
        if std::env::var_os("WASMON_CLUSTER_LOGS").is_some() {
            eprintln!(
                "node:\n{}\ncentral:\n{}",
                node.stderr.lock().unwrap(),
                central.stderr.lock().unwrap()
            );
            for p in &log {
                eprintln!("{p:?}");
            }
        }
        log
    }
}

/// The newest timestamp (seconds after `base`) of host `h0`'s samples in the store of the
/// daemon at `url`, looked for from `after` on (0 when none, or the daemon did not answer).
fn newest_stored(http: &reqwest::blocking::Client, url: &str, base: i64, after: u64) -> u64 {
    let from = base + after as i64;
    let body = serde_json::json!({"cluster": "local", "from": from, "to": from + 100_000,
        "queries": [{"metric": "fwd", "host": "h0"}], "with-stats": false, "with-padding": false});
    let Ok(v) = http
        .post(format!("{url}/api/query"))
        .json(&body)
        .send()
        .and_then(|r| r.json::<Value>())
    else {
        return 0;
    };
    let r = &v["results"][0][0];
    let (Some(start), Some(data)) = (r["from"].as_i64(), r["data"].as_array()) else {
        return 0;
    };
    data.iter()
        .rposition(|x| x.as_f64().is_some())
        .map_or(0, |k| (start + k as i64 - base) as u64)
}

/// The times `value` rose.
fn rises(log: &[Poll], value: impl Fn(&Poll) -> u64) -> Vec<f64> {
    log.windows(2)
        .filter(|w| value(&w[1]) > value(&w[0]))
        .map(|w| w[1].t)
        .collect()
}

/// The longest time without progress of `value` that ended in `(from, to]` (the gap that
/// spans `from` included): the stall a fault at `from` caused, until both sides ran again.
fn stall(log: &[Poll], value: impl Fn(&Poll) -> u64, from: f64, to: f64) -> f64 {
    rises(log, value)
        .windows(2)
        .filter(|w| w[1] > from && w[1] <= to)
        .map(|w| w[1] - w[0])
        .fold(0.0, f64::max)
}

/// When the stream had a leader answering again after the fault at `from`: the end of the
/// last run of polls in `(from, to]` that no leader answered (the election the fault caused;
/// None when every poll was answered).
fn elected(log: &[Poll], from: f64, to: f64) -> Option<f64> {
    log.windows(2)
        .filter(|w| w[1].t > from && w[1].t <= to && w[0].leader.is_none() && w[1].leader.is_some())
        .map(|w| w[1].t)
        .next_back()
}

/// Waits until the node delivers again and the central consumes again (both progressed in
/// five polls in a row), so the next fault's stall is its own.
fn recovered(monitor: &Monitor) {
    let now = || {
        let p = monitor.latest.lock().unwrap();
        (p.sent, p.acked)
    };
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

/// How a server goes away in [`outage`]: SIGKILLed and started again, or frozen (SIGSTOP) and
/// resumed, after so many seconds.
enum Down {
    Killed(u64),
    Frozen(u64),
}

/// The faults of a run: each one's name, when it began and when both sides ran again.
#[derive(Default)]
struct Faults(Vec<(String, f64, f64)>);

impl Faults {
    /// Takes server `s` away and back as `how` says, waits until delivery recovered and
    /// records the fault as `what`.
    fn outage(
        &mut self,
        cluster: &mut Cluster,
        monitor: &Monitor,
        s: usize,
        how: Down,
        what: String,
    ) {
        let at = monitor.now();
        let secs = match how {
            Down::Killed(secs) | Down::Frozen(secs) => secs,
        };
        eprintln!("{at:.2} {} s{s}: {what}", chrono::Utc::now());
        match how {
            Down::Killed(_) => cluster.kill(s),
            Down::Frozen(_) => cluster.freeze(s),
        }
        std::thread::sleep(Duration::from_secs(secs));
        match how {
            Down::Killed(_) => cluster.restart(s),
            Down::Frozen(_) => cluster.thaw(s),
        }
        self.after(what, at, monitor);
    }

    /// Waits until delivery recovered from the fault `what` that began at `at`, and records it.
    fn after(&mut self, what: String, at: f64, monitor: &Monitor) {
        recovered(monitor);
        self.0.push((what, at, monitor.now()));
    }
}

fn write(dir: &Path, name: &str, text: String) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Starts the central daemon on config `central`, then a node (its config `node` written into
/// `dir`) on a port of its own, which it returns.
fn start_pair(central: &Path, dir: &Path, node: String) -> (DaemonProcess, DaemonProcess, u16) {
    let central_d = DaemonProcess::start(central);
    let node = write(dir, "node.toml", node);
    let node_port = free_port();
    let node_d = DaemonProcess::start_at(&node, node_port, |_| {});
    (central_d, node_d, node_port)
}

/// A node whose `host` pipeline forwards through a `jetstream` sink (replicas 3) to the
/// servers `servers` (a TOML list).
fn node_config(dir: &Path, servers: &str) -> String {
    format!(
        "[daemon]\ndata-dir = \"{}\"\n\n[[pipeline]]\nname = \"host\"\nsinks = [\"to-js\"]\n\n\
         [[sink]]\nname = \"to-js\"\ntype = \"jetstream\"\nurl = {servers}\nsubject = \"fwd.lp\"\n\
         stream = \"FWD\"\nreplicas = 3\n",
        dir.display()
    )
}

fn central_config(dir: &Path, servers: &str, durable: &str, replicas: usize) -> String {
    format!(
        "[daemon]\ndata-dir = \"{}\"\n\n[store]\ndefault-frequency = 1\n\n[nats]\naddress = \"{servers}\"\n\n\
         [[nats.subscriptions]]\nsubscribe-to = \"fwd.lp\"\nstream = \"FWD\"\ndurable = \"{durable}\"\nreplicas = {replicas}\n",
        dir.display()
    )
}

/// After the client stopped: the node's queue drains, every acknowledged sample is in the
/// central store with its value, and each record the node sent is in the stream `FWD` once (a
/// re-send after a lost PubAck carried the same `Nats-Msg-Id` and was dropped as a duplicate).
/// Returns the stream's replicas.
fn delivered_once(
    what: &str,
    (cluster, rt): (&Cluster, &tokio::runtime::Runtime),
    (node_d, central_d): (&DaemonProcess, &DaemonProcess),
    acked: &[(u64, u64)],
    base: i64,
) -> usize {
    let total: u64 = acked.iter().map(|(a, b)| b - a).sum();
    wait_until("the node's queue drained", Duration::from_secs(120), || {
        sink(node_d, "to-js")["queued-records"].as_u64() == Some(0)
    });
    let to = base + (total / HOSTS) as i64 + 2;
    wait_until("the central caught up", Duration::from_secs(120), || {
        central_values(central_d, base, to).len() as u64 >= total
    });
    assert_all_there(what, acked, &central_values(central_d, base, to), base);
    let sent = sink(node_d, "to-js")["sent-records"].as_u64().unwrap();
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
    assert_eq!(messages, sent, "stream messages vs records the node sent");
    replicas
}

fn forwarding_survives_the_loss_of_a_server(bin: PathBuf, frozen: Duration) {
    let tmp = tempfile::tempdir().unwrap();
    let version = version(&bin);
    let mut cluster = Cluster::start(&bin, &tmp.path().join("nats"), 3);
    let rt = runtime();
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
    let (central_d, node_d, node_port) = start_pair(
        &central,
        tmp.path(),
        node_config(&tmp.path().join("node"), &node_list),
    );
    let base = now() - 8 * 3600;
    let t0 = Instant::now();
    let monitor = Monitor::start(node_d.url(""), cluster.urls(), t0);
    let first_post = Instant::now();
    let client = Client::start(node_port, "host", RATE, base);
    // The sink connects at its first record, its first seed refusing: the time to the first
    // PubAck includes finding (creating) the stream.
    while sink(&node_d, "to-js")["sent-records"].as_u64() == Some(0) {
        assert!(
            first_post.elapsed() < Duration::from_secs(30),
            "no record acknowledged within 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let first_ack = first_post.elapsed();
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

    let mut faults = Faults::default();
    // 1. The stream's leader dies and comes back 3 s later.
    let leader = cluster.leader(&rt, "FWD").expect("FWD has a leader");
    faults.outage(
        &mut cluster,
        &monitor,
        leader,
        Down::Killed(3),
        "stream leader SIGKILLed (3 s down)".into(),
    );
    // 2. The server the node is connected to dies and comes back 3 s later.
    let connected = cluster
        .connected_from(node_d.child.id())
        .expect("the node is connected to one of the servers");
    let was_leader = cluster.leader(&rt, "FWD") == Some(connected);
    let what = if was_leader {
        "the stream leader"
    } else {
        "not the stream leader"
    };
    faults.outage(
        &mut cluster,
        &monitor,
        connected,
        Down::Killed(3),
        format!("node's server SIGKILLed (3 s down; {what})"),
    );
    // 3. A server hangs (the leader: the worst one to lose) and resumes.
    let hung = cluster.leader(&rt, "FWD").unwrap_or(0);
    faults.outage(
        &mut cluster,
        &monitor,
        hung,
        Down::Frozen(frozen.as_secs()),
        format!("stream leader SIGSTOPped {} s", frozen.as_secs()),
    );
    // 4. A rolling restart: each server killed and started again once the one before it
    // answers for JetStream.
    let at = monitor.now();
    eprintln!("{:.2} {} rolling restart", at, chrono::Utc::now());
    for i in 0..cluster.servers.len() {
        cluster.kill(i);
        cluster.restart(i);
        cluster.wait_ready(Duration::from_secs(60));
    }
    faults.after("all three restarted one after another".into(), at, &monitor);
    // 5. Two of three down for `frozen` (no quorum): the node queues on disk and says so
    // once; the two come back.
    let warned = || {
        node_d
            .stderr
            .lock()
            .unwrap()
            .matches("cannot deliver; queuing on disk")
            .count()
    };
    let warnings_before = warned();
    let leader = cluster.leader(&rt, "FWD").unwrap_or(0);
    let other = (leader + 1) % cluster.servers.len();
    let at = monitor.now();
    eprintln!(
        "{:.2} {} kill s{leader} and s{other}",
        at,
        chrono::Utc::now()
    );
    cluster.kill(leader);
    cluster.kill(other);
    std::thread::sleep(frozen);
    let queued = sink(&node_d, "to-js")["queued-records"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        queued > 10,
        "no quorum for {frozen:?}: {queued} records queued"
    );
    assert_eq!(
        warned() - warnings_before,
        1,
        "the sink says once that it queues: {}",
        node_d.stderr.lock().unwrap()
    );
    cluster.restart(leader);
    cluster.restart(other);
    faults.after(
        format!(
            "two of three SIGKILLed for {} s (no quorum)",
            frozen.as_secs()
        ),
        at,
        &monitor,
    );
    let acked = client.stop();
    let total: u64 = acked.iter().map(|(a, b)| b - a).sum();
    assert!(total > 0);

    let replicas = delivered_once(
        &format!("central behind a 3-server cluster ({version})"),
        (&cluster, &rt),
        (&node_d, &central_d),
        &acked,
        base,
    );
    assert_eq!(replicas, 3, "the sink created the stream with replicas = 3");
    let s = sink(&node_d, "to-js");
    assert_eq!(s["dropped"]["queue-size"], 0, "{s}");
    assert_eq!(s["dead-lettered-samples"], 0, "{s}");
    let to = base + (total / HOSTS) as i64 + 2;
    let log = monitor.stop_showing(&node_d, &central_d);
    eprintln!(
        "nats-server {version}: first PubAck {:.2} s after the node's first sample (its first seed refusing)",
        first_ack.as_secs_f64()
    );
    for (what, from, to) in &faults.0 {
        // What the server's election took, and what wasmon took after it.
        let election = match elected(&log, *from, *to) {
            Some(e) => {
                let after = |v: fn(&Poll) -> u64| {
                    rises(&log, v)
                        .into_iter()
                        .find(|t| *t >= e)
                        .map_or(f64::NAN, |t| t - e)
                };
                format!(
                    "; stream leader answering {:.1} s after the fault, node resumed {:.2} s and central {:.2} s after that",
                    e - from,
                    after(|p| p.sent),
                    after(|p| p.delivered)
                )
            }
            None => String::new(),
        };
        eprintln!(
            "nats-server {version}, {RATE} samples/s: {what}: node stalled {:.1} s, central {:.1} s (ack floor {:.1} s){election}",
            stall(&log, |p| p.sent, *from, *to),
            stall(&log, |p| p.delivered, *from, *to),
            stall(&log, |p| p.acked, *from, *to),
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
