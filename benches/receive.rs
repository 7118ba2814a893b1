//! The receivers (issue 21) against line protocol, side by side in one run: a release
//! `wasmon run` (a child process) takes the same samples as line protocol on `/api/write`
//! (straight into the store, as cc-metric-store's API), as Prometheus remote write 1.0 on
//! `/api/pipelines/p/prometheus` and as OTLP/HTTP protobuf on `/api/pipelines/p/otlp`, the
//! pipeline `p` with a `store` sink. Prints samples/s per core of the daemon (its CPU time
//! from /proc/PID/stat over the requests; bodies are encoded before the clock starts, one
//! request at a time) and the ratio per sample against line protocol.
//!
//! Workload: 1,000 hosts x 10 metrics, one sample per series and step, 5,000 samples a
//! request, the same series every step as scrapes and exports send them (remote write: one
//! series per sample with `__name__`, `cluster` and `hostname` labels; OTLP: one resource per
//! host with `host.name` and `cluster`, a gauge point per metric, and a second time with two
//! attributes of its own on each point).
//!
//! `cargo bench -p wasmon-benches --bench receive` (builds `target/release/wasmon` first);
//! `WASMON_BIN` picks another binary, `RECEIVE_SAMPLES` the samples per round (3,000,000: the
//! CPU clock ticks every 10 ms), `RECEIVE_ONLY=N` runs only the Nth protocol (0 LP, 1 remote
//! write, 2 OTLP, 3 OTLP with point attributes: to profile one).

#[path = "release.rs"]
mod release;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
const STEP: i64 = 10;
const ROUNDS: usize = 5;

struct Daemon {
    child: Child,
    port: u16,
}

impl Daemon {
    fn start(bin: &Path, dir: &Path) -> Daemon {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cfg = dir.join("wasmon.toml");
        std::fs::write(
            &cfg,
            format!(
                "[daemon]\ndata-dir = \"{}\"\n[procfs]\nenabled = false\n[store]\n\
                 default-frequency = {STEP}\n[[pipeline]]\nname = \"p\"\nsinks = [\"store\"]\n",
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
        let d = Daemon { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while reqwest::blocking::get(d.url("/api/healthcheck")).is_err() {
            assert!(Instant::now() < deadline, "wasmon did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        // SAFETY: sysconf reads a constant.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Duration::from_secs_f64(ticks as f64 / hz)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (host, metric, unix seconds, value) of sample `i` of a round starting at `t0`.
fn sample(i: usize, t0: i64) -> (usize, &'static str, i64, f64) {
    let per_step = HOSTS * METRICS.len();
    let (step, k) = (i / per_step, i % per_step);
    let (host, metric) = (k / METRICS.len(), k % METRICS.len());
    let v = (host * 7 + metric * 13 + step) as f64 * 0.25;
    (host, METRICS[metric], t0 + step as i64 * STEP, v)
}

fn line_protocol(range: std::ops::Range<usize>, t0: i64) -> Vec<u8> {
    let mut out = String::new();
    for i in range {
        let (h, m, t, v) = sample(i, t0);
        out.push_str(&format!(
            "{m},cluster=bench,hostname=node{h:04} value={v} {t}\n"
        ));
    }
    out.into_bytes()
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(out: &mut Vec<u8>, n: u32, b: &[u8]) {
    varint(out, u64::from(n) << 3 | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn remote_write(range: std::ops::Range<usize>, t0: i64) -> Vec<u8> {
    let mut req = Vec::new();
    for i in range {
        let (h, m, t, v) = sample(i, t0);
        let mut ts = Vec::new();
        for (k, val) in [
            ("__name__", m.to_string()),
            ("cluster", "bench".into()),
            ("hostname", format!("node{h:04}")),
        ] {
            let mut l = Vec::new();
            field(&mut l, 1, k.as_bytes());
            field(&mut l, 2, val.as_bytes());
            field(&mut ts, 1, &l);
        }
        let mut s = vec![0x09];
        s.extend_from_slice(&v.to_bits().to_le_bytes());
        varint(&mut s, 2 << 3);
        varint(&mut s, (t * 1000) as u64);
        field(&mut ts, 2, &s);
        field(&mut req, 1, &ts);
    }
    snap::raw::Encoder::new().compress_vec(&req).unwrap()
}

fn kv(out: &mut Vec<u8>, n: u32, k: &str, v: &str) {
    let mut any = Vec::new();
    field(&mut any, 1, v.as_bytes());
    let mut kv = Vec::new();
    field(&mut kv, 1, k.as_bytes());
    field(&mut kv, 2, &any);
    field(out, n, &kv);
}

/// OTLP: samples grouped by host (a resource each), a gauge metric per sample.
fn otlp(range: std::ops::Range<usize>, t0: i64) -> Vec<u8> {
    otlp_points(range, t0, false)
}

/// The same, each point with attributes of its own (`socket` and `cpu`, as a host-metrics
/// receiver's points have them).
fn otlp_attributes(range: std::ops::Range<usize>, t0: i64) -> Vec<u8> {
    otlp_points(range, t0, true)
}

fn otlp_points(range: std::ops::Range<usize>, t0: i64, attributes: bool) -> Vec<u8> {
    let mut req = Vec::new();
    let mut i = range.start;
    while i < range.end {
        let (h, _, _, _) = sample(i, t0);
        let mut res = Vec::new();
        kv(&mut res, 1, "host.name", &format!("node{h:04}"));
        kv(&mut res, 1, "cluster", "bench");
        let mut sm = Vec::new();
        while i < range.end && sample(i, t0).0 == h {
            let (_, m, t, v) = sample(i, t0);
            let mut p = Vec::new();
            if attributes {
                kv(&mut p, 7, "socket", "0");
                kv(&mut p, 7, "cpu", &(i % 4).to_string());
            }
            varint(&mut p, 3 << 3 | 1);
            p.extend_from_slice(&((t as u64) * 1_000_000_000).to_le_bytes());
            varint(&mut p, 4 << 3 | 1);
            p.extend_from_slice(&v.to_bits().to_le_bytes());
            let mut g = Vec::new();
            field(&mut g, 1, &p);
            let mut metric = Vec::new();
            field(&mut metric, 1, m.as_bytes());
            field(&mut metric, 5, &g);
            field(&mut sm, 2, &metric);
            i += 1;
        }
        let mut rm = Vec::new();
        field(&mut rm, 1, &res);
        field(&mut rm, 2, &sm);
        field(&mut req, 1, &rm);
    }
    req
}

struct Protocol {
    name: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    encode: fn(std::ops::Range<usize>, i64) -> Vec<u8>,
}

const PROTOCOLS: [Protocol; 4] = [
    Protocol {
        name: "line protocol, /api/write",
        path: "/api/write",
        headers: &[],
        encode: line_protocol,
    },
    Protocol {
        name: "remote write 1.0, /prometheus",
        path: "/api/pipelines/p/prometheus",
        headers: &[
            ("content-type", "application/x-protobuf"),
            ("content-encoding", "snappy"),
        ],
        encode: remote_write,
    },
    Protocol {
        name: "OTLP protobuf, /otlp",
        path: "/api/pipelines/p/otlp",
        headers: &[("content-type", "application/x-protobuf")],
        encode: otlp,
    },
    Protocol {
        name: "OTLP, point attributes, /otlp",
        path: "/api/pipelines/p/otlp",
        headers: &[("content-type", "application/x-protobuf")],
        encode: otlp_attributes,
    },
];

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: usize = std::env::var("RECEIVE_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3_000_000);
    let only: Option<usize> = std::env::var("RECEIVE_ONLY")
        .ok()
        .and_then(|s| s.parse().ok());
    let bin = release::binary();
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(&bin, dir.path());
    let client = reqwest::blocking::Client::new();
    // Recent enough for the store's buffers: each round rewrites the same slots.
    let t0 = chrono::Utc::now().timestamp() - (n / (HOSTS * METRICS.len())) as i64 * STEP;
    let bodies: Vec<Vec<Vec<u8>>> = PROTOCOLS
        .iter()
        .map(|p| {
            (0..n)
                .step_by(BATCH)
                .map(|s| (p.encode)(s..(s + BATCH).min(n), t0))
                .collect()
        })
        .collect();
    for (p, b) in PROTOCOLS.iter().zip(&bodies) {
        let bytes: usize = b.iter().map(Vec::len).sum();
        println!(
            "{:32} {:6.1} bytes/sample on the wire",
            p.name,
            bytes as f64 / n as f64
        );
    }
    // Per round, each protocol in turn: samples per daemon CPU second.
    let mut rates = vec![Vec::new(); PROTOCOLS.len()];
    for _ in 0..ROUNDS {
        for (k, p) in PROTOCOLS.iter().enumerate() {
            if only.is_some_and(|o| o != k) {
                rates[k].push((f64::NAN, f64::NAN));
                continue;
            }
            let cpu0 = d.cpu();
            let wall = Instant::now();
            for body in &bodies[k] {
                let mut r = client.post(d.url(p.path)).body(body.clone());
                for (h, v) in p.headers {
                    r = r.header(*h, *v);
                }
                let resp = r.send().unwrap();
                assert!(
                    resp.status().is_success(),
                    "{}: {}",
                    p.name,
                    resp.text().unwrap()
                );
            }
            let cpu = (d.cpu() - cpu0).as_secs_f64();
            let wall = wall.elapsed().as_secs_f64();
            rates[k].push((n as f64 / cpu, n as f64 / wall));
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = median(&mut rates[0].iter().map(|r| r.0).collect());
    println!(
        "\n{:32} {:>14} {:>14} {:>10}",
        "", "samples/s/core", "samples/s wall", "CPU/sample vs LP"
    );
    for (k, p) in PROTOCOLS.iter().enumerate() {
        let per_core = median(&mut rates[k].iter().map(|r| r.0).collect());
        let wall = median(&mut rates[k].iter().map(|r| r.1).collect());
        println!(
            "{:32} {:>14.0} {:>14.0} {:>9.2}x",
            p.name,
            per_core,
            wall,
            base / per_core
        );
    }
    let v: serde_json::Value = client
        .get(d.url("/api/pipelines"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    println!("\npipeline p: {}", v[0]);
}
