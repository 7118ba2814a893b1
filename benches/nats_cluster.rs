//! JetStream on a 3-server cluster against one server (issue 31): what a `jetstream` sink's
//! transport carries, measured with the sink's own way of sending (one record at a time, each
//! a line-protocol message with a `Nats-Msg-Id`, the next sent when the PubAck came):
//! - records/s and samples/s, and PubAck latency percentiles, through one server (R1), a
//!   3-server cluster with a replicas-1 stream and with a replicas-3 stream, for records of
//!   5,000 samples (the sinks' default `batch-size`) and of 500;
//! - the time a client needs to be connected again, and to have JetStream answer, after the
//!   server it is connected to is SIGKILLed (it fails over to a server it learned from the
//!   cluster);
//! - the time to connect when the first seed listed is down;
//! - the server's election alone: the time from a SIGKILL of the R3 stream's leader to the
//!   first PubAck a bare client on another server gets, and the same for a SIGTERM (a server
//!   shutting down hands its leaderships over).
//!
//! `cargo bench -p wasmon-benches --bench nats_cluster`; `NATS_SERVER` picks the nats-server
//! binary (default Debian's `/usr/sbin/nats-server`), `NATS_RECORDS` the records per run.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Server {
    name: String,
    port: u16,
    cluster_port: u16,
    store: PathBuf,
    child: Option<Child>,
}

struct Servers {
    bin: PathBuf,
    list: Vec<Server>,
}

impl Servers {
    fn start(bin: &Path, dir: &Path, n: usize) -> Servers {
        let list = (0..n)
            .map(|i| Server {
                name: format!("s{i}"),
                port: free_port(),
                cluster_port: free_port(),
                store: dir.join(format!("s{i}")),
                child: None,
            })
            .collect();
        let mut s = Servers {
            bin: bin.to_path_buf(),
            list,
        };
        for i in 0..n {
            s.launch(i);
        }
        s
    }

    fn launch(&mut self, i: usize) {
        let n = self.list.len();
        let routes: Vec<String> = (0..n)
            .filter(|j| *j != i)
            .map(|j| format!("nats://127.0.0.1:{}", self.list[j].cluster_port))
            .collect();
        let s = &self.list[i];
        let mut c = Command::new(&self.bin);
        c.args([
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            &s.port.to_string(),
            "-n",
            &s.name,
        ])
        .arg("-sd")
        .arg(&s.store);
        if n > 1 {
            c.args(["--cluster_name", "bench"])
                .args(["--cluster", &format!("nats://127.0.0.1:{}", s.cluster_port)])
                .args(["--routes", &routes.join(",")]);
        }
        let child = c
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let port = s.port;
        self.list[i].child = Some(child);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn urls(&self) -> Vec<String> {
        self.list
            .iter()
            .map(|s| format!("nats://127.0.0.1:{}", s.port))
            .collect()
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.list[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, not waited for: the server shuts down as an operator's restart does.
    fn term(&mut self, i: usize) -> Option<Child> {
        let c = self.list[i].child.take()?;
        // SAFETY: kill(2) on a child of ours that has not been waited for.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        Some(c)
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for i in 0..self.list.len() {
            self.kill(i);
        }
    }
}

/// A record as a sink queues it: `n` samples of line protocol (~60 bytes each).
fn record(n: usize, k: usize) -> bytes::Bytes {
    let mut s = String::with_capacity(n * 64);
    for i in 0..n {
        s.push_str(&format!(
            "cpu_load,cluster=hpc,hostname=n{:04},type=node value={}.{} {}\n",
            i % 1000,
            i,
            k,
            1_700_000_000 + k as i64
        ));
    }
    s.into()
}

async fn client(urls: &[String]) -> async_nats::Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(c) = async_nats::ConnectOptions::new()
            .ping_interval(Duration::from_secs(1))
            .connect(urls.to_vec())
            .await
        {
            // JetStream answers once the meta leader is elected.
            let js = async_nats::jetstream::new(c.clone());
            if js.get_stream("none-such").await.is_err()
                && c.request("$JS.API.INFO", "".into())
                    .await
                    .is_ok_and(|m| !String::from_utf8_lossy(&m.payload).contains("\"error\""))
            {
                return c;
            }
        }
        assert!(Instant::now() < deadline, "JetStream did not come up");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Publishes `records` records of `samples` samples one at a time; prints the rates and
/// the PubAck latencies.
async fn throughput(what: &str, urls: &[String], replicas: usize, records: usize, samples: usize) {
    use async_nats::jetstream::stream;
    let c = client(urls).await;
    let js = async_nats::jetstream::new(c);
    let name = format!("B{replicas}x{samples}");
    js.get_or_create_stream(stream::Config {
        name: name.clone(),
        subjects: vec![format!("b.{name}")],
        num_replicas: replicas,
        duplicate_window: Duration::from_secs(24 * 3600),
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .unwrap();
    let bodies: Vec<bytes::Bytes> = (0..16).map(|k| record(samples, k)).collect();
    let bytes = bodies[0].len();
    let mut lat = Vec::with_capacity(records);
    let t0 = Instant::now();
    for k in 0..records {
        let mut h = async_nats::HeaderMap::new();
        h.insert(
            async_nats::header::NATS_MESSAGE_ID,
            format!("bench.{name}.{k}").as_str(),
        );
        let t = Instant::now();
        js.publish_with_headers(format!("b.{name}"), h, bodies[k % 16].clone())
            .await
            .unwrap()
            .await
            .unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let secs = t0.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    println!(
        "{what:<34} {samples:>5} samples/record ({:>3} KB): {:>7.0} records/s {:>10.0} samples/s {:>6.1} MB/s; PubAck ms p50 {:.2} p90 {:.2} p99 {:.2} max {:.2}",
        bytes / 1000,
        records as f64 / secs,
        (records * samples) as f64 / secs,
        (records * bytes) as f64 / secs / 1e6,
        pct(&lat, 0.5),
        pct(&lat, 0.9),
        pct(&lat, 0.99),
        lat[lat.len() - 1],
    );
}

fn main() {
    let bin = PathBuf::from(
        std::env::var("NATS_SERVER").unwrap_or_else(|_| "/usr/sbin/nats-server".into()),
    );
    let version =
        String::from_utf8_lossy(&Command::new(&bin).arg("--version").output().unwrap().stdout)
            .trim()
            .to_string();
    let records: usize = std::env::var("NATS_RECORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    println!("{version}, loopback, {records} records per run, one in flight (as a sink sends)");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();

    {
        let one = Servers::start(&bin, &tmp.path().join("one"), 1);
        for samples in [5_000, 500] {
            rt.block_on(throughput(
                "one server, R1",
                &one.urls(),
                1,
                records,
                samples,
            ));
        }
    }
    let mut three = Servers::start(&bin, &tmp.path().join("three"), 3);
    for replicas in [1, 3] {
        for samples in [5_000, 500] {
            rt.block_on(throughput(
                &format!("3-server cluster, R{replicas}"),
                &three.urls(),
                replicas,
                records,
                samples,
            ));
        }
    }

    // Fail-over: the connected server SIGKILLed; connected again, JetStream answering again.
    let mut reconnect = Vec::new();
    let mut answering = Vec::new();
    for round in 0..5 {
        let urls = three.urls();
        let (name, c) = rt.block_on(async {
            let c = client(&urls).await;
            (c.server_info().server_name, c)
        });
        let i = three.list.iter().position(|s| s.name == name).unwrap();
        let t = Instant::now();
        three.kill(i);
        let (r, a) = rt.block_on(async {
            // The client notices the closed socket, then connects to another server.
            while c.connection_state() == async_nats::connection::State::Connected
                && c.server_info().server_name == name
            {
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            while c.connection_state() != async_nats::connection::State::Connected {
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            let r = t.elapsed();
            let js = async_nats::jetstream::new(c.clone());
            loop {
                let mut s = js.get_stream("B3x500").await;
                if let Ok(s) = s.as_mut()
                    && s.info().await.is_ok()
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (r, t.elapsed())
        });
        reconnect.push(r.as_secs_f64() * 1e3);
        answering.push(a.as_secs_f64() * 1e3);
        three.launch(i);
        rt.block_on(async {
            let _ = client(&urls).await;
        });
        // Let the restarted server catch up before the next round.
        std::thread::sleep(Duration::from_secs(3));
        let _ = round;
    }
    reconnect.sort_by(f64::total_cmp);
    answering.sort_by(f64::total_cmp);
    println!(
        "connected server SIGKILLed (5 rounds): connected again after {:.1}-{:.1} ms (median {:.1}); the R3 stream's info answered after {:.0}-{:.0} ms (median {:.0})",
        reconnect[0], reconnect[4], reconnect[2], answering[0], answering[4], answering[2]
    );

    // The election alone: the R3 stream's leader SIGKILLed while a bare client connected to
    // another server (no reconnect to make) publishes one message again and again, each try
    // waiting 250 ms for its PubAck (a `jetstream` sink's re-publish period), until one comes.
    for signal in ["SIGKILL", "SIGTERM"] {
        let mut election = Vec::new();
        for round in 0..5 {
            let urls = three.urls();
            let leader = rt.block_on(async {
                let js = async_nats::jetstream::new(client(&urls).await);
                let mut s = js.get_stream("B3x500").await.unwrap();
                let info = s.info().await.unwrap();
                info.cluster
                    .as_ref()
                    .and_then(|c| c.leader.clone())
                    .unwrap()
            });
            let i = three.list.iter().position(|s| s.name == leader).unwrap();
            let other = urls[(i + 1) % 3].clone();
            let c = rt.block_on(client(std::slice::from_ref(&other)));
            let body = record(500, round);
            let t = Instant::now();
            let mut exiting = None;
            if signal == "SIGKILL" {
                three.kill(i);
            } else {
                exiting = three.term(i);
            }
            let took = rt.block_on(async {
                let js = async_nats::jetstream::new(c);
                loop {
                    let mut h = async_nats::HeaderMap::new();
                    h.insert(
                        async_nats::header::NATS_MESSAGE_ID,
                        format!("bench.election.{signal}.{round}").as_str(),
                    );
                    let tried = Instant::now();
                    let ack = async {
                        js.publish_with_headers("b.B3x500", h, body.clone())
                            .await?
                            .await
                            .map_err(async_nats::Error::from)
                    };
                    if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(250), ack).await {
                        return t.elapsed();
                    }
                    // A refusal that came at once is not a reason to spin.
                    if tried.elapsed() < Duration::from_millis(250) {
                        tokio::time::sleep(Duration::from_millis(250) - tried.elapsed()).await;
                    }
                }
            });
            election.push(took.as_secs_f64());
            if let Some(mut c) = exiting {
                let _ = c.wait();
            }
            three.launch(i);
            rt.block_on(async {
                let _ = client(&urls).await;
            });
            std::thread::sleep(Duration::from_secs(3));
        }
        let mut sorted = election.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "R3 stream leader {signal}ed, a bare client on another server publishing (250 ms per try): first PubAck after {:.2}-{:.2} s (median {:.2}; rounds {:?})",
            sorted[0],
            sorted[4],
            sorted[2],
            election
                .iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
        );
    }

    // The first seed listed is down: the client tries the seeds in random order.
    let dead = format!("nats://127.0.0.1:{}", free_port());
    let mut seeds = vec![dead];
    seeds.extend(three.urls());
    let mut times = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let c = rt.block_on(async_nats::ConnectOptions::new().connect(seeds.clone()));
        assert!(c.is_ok());
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "first of 4 seeds down: connected in {:.1}-{:.1} ms (median {:.1}, 20 connects)",
        times[0], times[19], times[10]
    );
}
