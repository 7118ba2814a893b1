//! Forwarding, end to end (issue 18): a node's `http` sink (in this process: encode, gzip, the
//! durable queue with group commit, the sender) delivering to a central `wasmon run` (the
//! release binary, a child process: `/api/write`, gzip, WAL with fsync) on loopback.
//!
//! Prints, side by side in one run:
//! - samples/s per core on each side (CPU time from getrusage for this process and
//!   /proc/PID/stat for the central), with the queue and with the queue off (the floor: the
//!   same encoding POSTed directly, one request at a time);
//! - bytes per sample on the wire and on the queue's disk;
//! - catch-up after a 1-hour outage of a node collecting 2,000 samples/s: the backlog's drain
//!   rate against the live rate, and how late the live collection fell meanwhile.
//!
//! `cargo bench -p wasmon-benches --bench forward` (builds `target/release/wasmon` first);
//! `WASMON_BIN` picks another binary, `FORWARD_SAMPLES` the size of the throughput runs.

#[path = "release.rs"]
mod release;
use release::binary;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmon::sample::{Metadata, Pair, Sample};
use wasmon::sink::{SinkConfig, SinkSet, SinkStatus, encode};

const HOSTS: usize = 1000;
const METRICS: [&str; 10] = [
    "cpu_load",
    "cpu_user",
    "mem_used",
    "flops_any",
    "mem_bw",
    "net_bw",
    "ib_bw",
    "clock",
    "power",
    "disk_free",
];
const BATCH: usize = 5_000;
/// Seconds between a series' samples (the central's `default-frequency`).
const STEP: i64 = 10;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Central {
    child: Child,
    port: u16,
}

impl Central {
    fn start(bin: &Path, dir: &Path, port: u16) -> Central {
        std::fs::create_dir_all(dir).unwrap();
        let cfg = dir.join("central.toml");
        std::fs::write(
            &cfg,
            format!(
                "[daemon]\ndata-dir = \"{}\"\n[store]\ndefault-frequency = {STEP}\n",
                dir.join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .args(["run", "--config"])
            .arg(&cfg)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !healthy(port) {
            assert!(Instant::now() < deadline, "central did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Central { child, port }
    }

    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        Duration::from_secs_f64(ticks as f64 / clock_ticks())
    }
}

impl Drop for Central {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf reads a constant.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

fn healthy(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(b"GET /api/healthcheck HTTP/1.0\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.contains(" 200 ")
}

/// CPU time of this process (every thread).
fn self_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// `n` samples as a collector makes them: 1,000 hosts x 10 metrics, one sample per series and
/// step, values with a few significant digits drifting slowly; batches of [`BATCH`].
fn samples(n: usize, t0: i64) -> Vec<Vec<Sample>> {
    let metas: Vec<Metadata> = (0..HOSTS)
        .map(|h| {
            Metadata::new(vec![(
                Arc::<str>::from("hostname"),
                Arc::<str>::from(format!("node{h:04}")),
            ) as Pair])
        })
        .collect();
    let per_step = HOSTS * METRICS.len();
    let mut x = 0x9e3779b97f4a7c15u64;
    (0..n)
        .map(|i| {
            let (step, k) = (i / per_step, i % per_step);
            let (h, m) = (k / METRICS.len(), k % METRICS.len());
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = ((h * 7 + m * 13) % 100) as f64 + (x % 100) as f64 / 100.0;
            let mut s = Sample::new(METRICS[m], "", v, (t0 + step as i64 * STEP) * 1_000_000_000);
            s.metadata = metas[h].clone();
            s
        })
        .collect::<Vec<_>>()
        .chunks(BATCH)
        .map(<[Sample]>::to_vec)
        .collect()
}

fn sink_config(port: u16) -> SinkConfig {
    let text = format!(
        "name = \"central\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/api/write\"\nmax-backoff = \"1s\"\ncatch-up-rate = 0\n"
    );
    toml::from_str(&text).unwrap()
}

fn status(set: &SinkSet) -> SinkStatus {
    set.statuses().into_iter().next().unwrap()
}

fn wait_sent(set: &SinkSet, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while status(set).sent_samples < n {
        assert!(
            Instant::now() < deadline,
            "not delivered: {:?}",
            status(set)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

struct Run {
    wall: Duration,
    node_cpu: Duration,
    central_cpu: Duration,
}

impl Run {
    fn row(&self, what: &str, n: usize) {
        let per = |d: Duration| n as f64 / d.as_secs_f64();
        println!(
            "| {what} | {:.0} | {:.0} | {:.0} |",
            per(self.wall),
            per(self.node_cpu),
            per(self.central_cpu)
        );
    }
}

/// With the queue: accept every batch (encode, gzip, queue), wait until all are acknowledged.
fn with_queue(set: &SinkSet, central: &Central, batches: &[Vec<Sample>], already: u64) -> Run {
    let fwd = set.get("central").unwrap();
    let n: usize = batches.iter().map(Vec::len).sum();
    let (c0, n0, t0) = (central.cpu(), self_cpu(), Instant::now());
    for b in batches {
        fwd.accept(b);
    }
    wait_sent(set, already + n as u64);
    Run {
        wall: t0.elapsed(),
        node_cpu: self_cpu() - n0,
        central_cpu: central.cpu() - c0,
    }
}

/// The floor: the same encoding POSTed directly, one request at a time, no queue.
fn without_queue(central: &Central, batches: &[Vec<Sample>]) -> Run {
    let http = reqwest::blocking::Client::new();
    let url = format!("http://127.0.0.1:{}/api/write", central.port);
    let cx = encode::Context {
        default_cluster: "local",
        hostname: "bench",
        meta_as_tags: &[],
    };
    let (c0, n0, t0) = (central.cpu(), self_cpu(), Instant::now());
    for b in batches {
        let body = encode::gzip(&encode::line_protocol(b, &cx).bytes);
        let r = http
            .post(&url)
            .header("content-encoding", "gzip")
            .body(body)
            .send()
            .unwrap();
        assert!(r.status().is_success());
    }
    Run {
        wall: t0.elapsed(),
        node_cpu: self_cpu() - n0,
        central_cpu: central.cpu() - c0,
    }
}

fn main() {
    let bin = binary();
    let n: usize = std::env::var("FORWARD_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut central = Central::start(&bin, &tmp.path().join("central"), port);
    let set = SinkSet::new(&tmp.path().join("node"), "local", "bench").unwrap();
    set.apply(
        set.prepare(&[sink_config(port)], tmp.path(), &no_guests)
            .unwrap(),
    );

    let t0 = chrono::Utc::now().timestamp() - 40 * 3600;
    let per_step = (HOSTS * METRICS.len()) as i64;
    let warm = samples(100_000, t0);
    with_queue(&set, &central, &warm, 0);
    println!(
        "## Throughput, {n} samples of {HOSTS} hosts x {} metrics, batches of {BATCH}\n",
        METRICS.len()
    );
    println!(
        "| path | samples/s (wall) | samples/s per core, node | samples/s per core, central |"
    );
    println!("|---|---|---|---|");
    let mut sent = 100_000u64;
    let mut t = t0 + 100_000 / per_step * STEP + STEP;
    let mut runs = Vec::new();
    for round in 0..3 {
        let a = samples(n, t);
        t += n as i64 / per_step * STEP + STEP;
        let b = samples(n, t);
        t += n as i64 / per_step * STEP + STEP;
        let q = with_queue(&set, &central, &a, sent);
        sent += n as u64;
        let f = without_queue(&central, &b);
        q.row(&format!("queue on (fsync 1 s), round {round}"), n);
        f.row(&format!("queue off (floor), round {round}"), n);
        runs.push((q, f));
    }
    let med = |f: &dyn Fn(&(Run, Run)) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[1]
    };
    let ratio_node = med(&|(q, f)| q.node_cpu.as_secs_f64() / f.node_cpu.as_secs_f64());
    let ratio_wall = med(&|(q, f)| q.wall.as_secs_f64() / f.wall.as_secs_f64());
    println!(
        "\nmedian ratio queue on / off: node CPU per sample {ratio_node:.2}, wall time {ratio_wall:.2}"
    );

    // Bytes per sample: on the wire (gzip line protocol) and in the queue's files.
    let cx = encode::Context {
        default_cluster: "local",
        hostname: "bench",
        meta_as_tags: &[],
    };
    let probe = samples(200_000, t);
    let (mut raw, mut wire) = (0usize, 0usize);
    for b in &probe {
        let lp = encode::line_protocol(b, &cx).bytes;
        raw += lp.len();
        wire += encode::gzip(&lp).len();
    }
    let _ = central.child.kill();
    let _ = central.child.wait();
    let fwd = set.get("central").unwrap();
    for b in &probe {
        fwd.accept(b);
    }
    let s = status(&set);
    println!(
        "\n## Bytes per sample\n\nline protocol {:.1} B, gzip on the wire {:.2} B, in the queue (record headers included) {:.2} B",
        raw as f64 / 200_000.0,
        wire as f64 / 200_000.0,
        s.queued_bytes as f64 / s.queued_samples.max(1) as f64
    );

    // Catch-up: a 1-hour outage at 2,000 samples/s (7.2 M samples queued), then the central
    // returns while collection goes on at the live rate.
    let live_rate = 2_000usize;
    let outage = samples(live_rate * 3600, t + 300 * STEP);
    t += (live_rate * 3600) as i64 / per_step * STEP + 400 * STEP;
    for b in &outage {
        fwd.accept(b);
    }
    let backlog = status(&set).queued_samples;
    let mut cfg = sink_config(port);
    cfg.catch_up_rate = wasmon::sink::config::DEFAULT_CATCH_UP_RATE;
    set.apply(set.prepare(&[cfg], tmp.path(), &no_guests).unwrap());
    central = Central::start(&bin, &tmp.path().join("central"), port);
    let live = samples(live_rate * 120, t);
    let (t0, sent0) = (Instant::now(), status(&set).sent_samples);
    let mut late = Duration::ZERO;
    let mut drained = None;
    // Live batches of 200 samples every 100 ms, as a poller would hand them over.
    for (k, b) in live.iter().flat_map(|b| b.chunks(200)).enumerate() {
        let due = t0 + Duration::from_millis(100 * k as u64);
        match due.checked_duration_since(Instant::now()) {
            Some(w) => std::thread::sleep(w),
            None => late = late.max(Instant::now() - due),
        }
        fwd.accept(b);
        if drained.is_none() && status(&set).queued_records <= 1 {
            drained = Some(t0.elapsed());
            break;
        }
    }
    let drained = drained.unwrap_or_else(|| {
        wait_sent(&set, sent0 + backlog);
        t0.elapsed()
    });
    let rate = backlog as f64 / drained.as_secs_f64();
    println!(
        "\n## Catch-up after a 1-hour outage\n\nbacklog {backlog} samples drained in {:.1} s: {rate:.0} samples/s = {:.0}x the live rate of {live_rate}/s (catch-up-rate {}); live collection at most {} ms late",
        drained.as_secs_f64(),
        rate / live_rate as f64,
        wasmon::sink::config::DEFAULT_CATCH_UP_RATE,
        late.as_millis()
    );
    drop(central);
    rt.block_on(set.stop());
}

/// The sinks here are native: no exporter guests to make.
fn no_guests(_: &SinkConfig) -> anyhow::Result<std::sync::Arc<dyn wasmon::sink::Exporter>> {
    anyhow::bail!("no guest sinks in this bench")
}
