//! Fleet rollout (issue 19): time from a publish (in this process, as `wasmon fleet publish`
//! does it) to the new version running on N = 1, 3 and 10 daemons (the release binary, child
//! processes on this machine, one nats-server with JetStream), for a ~73 KB C transformer, a
//! ~0.2 MB Rust one and an ~18 MB Python one; the share of that time spent compiling (each daemon logs its
//! fetch and compile times); and the NATS bytes each daemon received for one publish (from
//! nats-server's `/connz`: the component crosses once per daemon, never per pipeline).
//!
//! `cargo bench -p wasmon-benches --bench fleet` (builds `target/release/wasmon` first);
//! `WASMON_BIN` picks another binary; `FLEET_SMALL_WASM` and `FLEET_BIG_WASM` the smallest
//! and the large component (default: the C and the Python template the polyglot tests build,
//! `target/polyglot/built/{c,python}/template.wasm`).

#[path = "release.rs"]
mod release;
use release::binary;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmon::fleet::{Manifest, buckets};

const FLEET: &str = "bench";
const ROUNDS: usize = 3;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The component with a custom section appended: same code, another hash.
fn variant(bytes: &[u8], tag: &str) -> Vec<u8> {
    let name = b"wasmon-bench-version";
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name);
    payload.extend_from_slice(tag.as_bytes());
    let mut out = bytes.to_vec();
    out.push(0);
    out.push(payload.len() as u8);
    out.extend_from_slice(&payload);
    out
}

struct Daemon {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
}

impl Daemon {
    fn start(bin: &Path, dir: &Path, nats: &str, node: &str, key: &str, local: &[u8]) -> Daemon {
        let d = dir.join(node);
        std::fs::create_dir_all(d.join("guests")).unwrap();
        std::fs::write(d.join("guests/xform.wasm"), local).unwrap();
        let cfg = d.join("wasmon.toml");
        std::fs::write(
            &cfg,
            format!(
                r#"[daemon]
data-dir = "data"
guests-dir = "guests"
[procfs]
enabled = false
[[pipeline]]
name = "p"
sinks = ["store"]
[[pipeline.transformer]]
guest = "xform"
memory = "256MiB"
deadline = "2s"
params = {{ tag = "x", mode = "passthrough" }}
[fleet]
nats = "{nats}"
name = "{FLEET}"
node = "{node}"
trusted-keys = ["{key}"]
"#
            ),
        )
        .unwrap();
        let port = free_port();
        let mut child = Command::new(bin)
            .args(["run", "--config"])
            .arg(&cfg)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (err, sink) = (child.stderr.take().unwrap(), log.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let mut l = wasmon::util::lock(&sink);
                l.push_str(&line);
                l.push('\n');
            }
        });
        let d = Daemon { child, port, log };
        let t = Instant::now();
        while d.hash().is_none() {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "daemon {node} did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    fn hash(&self) -> Option<String> {
        let v: serde_json::Value =
            reqwest::blocking::get(format!("http://127.0.0.1:{}/api/pipelines", self.port))
                .ok()?
                .json()
                .ok()?;
        Some(v[0]["stages"][0]["hash"].as_str()?.to_string())
    }

    /// Fetch and compile milliseconds of the last "version running" log line.
    fn last_swap(&self) -> (f64, f64) {
        let log = wasmon::util::lock(&self.log);
        let line = log
            .lines()
            .rev()
            .find(|l| l.contains("fleet: version running"))
            .unwrap_or("");
        let field = |k: &str| -> f64 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{k}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        (field("fetch_ms"), field("compile_ms"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bytes nats-server sent to and received from each connection named `wasmon/...`.
fn daemon_bytes(monitor: u16) -> (u64, u64) {
    let v: serde_json::Value =
        reqwest::blocking::get(format!("http://127.0.0.1:{monitor}/connz?limit=1000"))
            .unwrap()
            .json()
            .unwrap();
    let mut out = (0, 0);
    for c in v["connections"].as_array().unwrap() {
        if c["name"].as_str().is_some_and(|n| n.starts_with("wasmon/")) {
            out.0 += c["out_bytes"].as_u64().unwrap_or(0);
            out.1 += c["in_bytes"].as_u64().unwrap_or(0);
        }
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn big_component() -> Option<PathBuf> {
    built_component("FLEET_BIG_WASM", "python/template.wasm")
}

/// The smallest transformer we build: the C template (~73 KB, of which ~20 KB is the WASI
/// preview-1 adapter), nearest to the issue's 50 KB.
fn small_component() -> Option<PathBuf> {
    built_component("FLEET_SMALL_WASM", "c/template.wasm")
}

/// `$VAR`, or what the polyglot tests built under `target/polyglot/built/`.
fn built_component(var: &str, path: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Some(p.into());
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let p = root.join("target/polyglot/built").join(path);
    p.exists().then_some(p)
}

/// `73 KB` below a megabyte (the issue's small size is 50 KB), `18.5 MB` above.
fn size(bytes: usize) -> String {
    if bytes < 1_000_000 {
        format!("{:.0} KB", bytes as f64 / 1e3)
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

fn main() {
    let bin = binary();
    let tmp = tempfile::tempdir().unwrap();
    let (port, monitor) = (free_port(), free_port());
    let mut nats = Command::new("/usr/sbin/nats-server")
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string()])
        .args(["-m", &monitor.to_string(), "-sd"])
        .arg(tmp.path().join("nats"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nats-server (apt-get install nats-server)");
    let url = format!("nats://127.0.0.1:{port}");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    let b = rt.block_on(async {
        let client = async_nats::ConnectOptions::new()
            .name("bench-publisher")
            .connect(&url)
            .await
            .unwrap();
        buckets::open(&async_nats::jetstream::new(client), FLEET, Some(1))
            .await
            .unwrap()
    });
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
    let public = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        key.verifying_key().as_bytes(),
    );
    let small = std::fs::read(Path::new(wasmon::BUILT_GUESTS_DIR).join("testing.wasm")).unwrap();
    let mut sizes = Vec::new();
    match small_component() {
        Some(p) => sizes.push(("C transformer (template)", std::fs::read(p).unwrap())),
        None => eprintln!("no C component: run the polyglot tests once, or set FLEET_SMALL_WASM"),
    }
    sizes.push(("Rust transformer (testing)", small.clone()));
    match big_component() {
        Some(p) => sizes.push(("Python transformer (template)", std::fs::read(p).unwrap())),
        None => eprintln!("no large component: run the polyglot tests once, or set FLEET_BIG_WASM"),
    }
    let local = variant(&small, "local");

    println!("## Publish to running, {ROUNDS} publishes each, medians\n");
    println!(
        "| component | size | daemons | publish (ms) | publish to running on all (ms) | fetch, per daemon (ms) | compile, per daemon (ms) | compile share | NATS bytes to each daemon | from each daemon |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut round = 0;
    for n in [1usize, 3, 10] {
        let daemons: Vec<Daemon> = (0..n)
            .map(|i| {
                Daemon::start(
                    &bin,
                    tmp.path(),
                    &url,
                    &format!("n{n}-{i}"),
                    &public,
                    &local,
                )
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        for (label, bytes) in &sizes {
            let (mut publish, mut total, mut fetch, mut compile, mut share, mut sent, mut recv) =
                (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
            for _ in 0..ROUNDS {
                round += 1;
                let v = variant(bytes, &format!("r{round}"));
                let mut m = Manifest::new("xform", "all", &v, "bench", round as u64);
                m.sign(FLEET, &key);
                let before = daemon_bytes(monitor);
                let t = Instant::now();
                rt.block_on(buckets::publish(&b, &m, &v)).unwrap();
                publish.push(t.elapsed().as_secs_f64() * 1e3);
                while !daemons
                    .iter()
                    .all(|d| d.hash().as_deref() == Some(&m.sha256))
                {
                    assert!(t.elapsed() < Duration::from_secs(600), "rollout stuck");
                    std::thread::sleep(Duration::from_millis(10));
                }
                let all = t.elapsed().as_secs_f64() * 1e3;
                total.push(all);
                // Health reports and acks settle; then count the bytes of this publish.
                std::thread::sleep(Duration::from_millis(1500));
                let after = daemon_bytes(monitor);
                sent.push((after.0 - before.0) as f64 / n as f64);
                recv.push((after.1 - before.1) as f64 / n as f64);
                let swaps: Vec<(f64, f64)> = daemons.iter().map(Daemon::last_swap).collect();
                let f = median(swaps.iter().map(|s| s.0).collect());
                let c = median(swaps.iter().map(|s| s.1).collect());
                fetch.push(f);
                compile.push(c);
                // Compiling runs on every daemon at once (2 cores): the share is of the
                // per-daemon swap (fetch + compile + swap), as each daemon saw it.
                share.push(c / (all.max(1.0)));
            }
            println!(
                "| {label} | {} | {n} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} % | {:.0} | {:.0} |",
                size(bytes.len()),
                median(publish),
                median(total),
                median(fetch),
                median(compile),
                median(share) * 100.0,
                median(sent),
                median(recv),
            );
        }
    }
    let _ = nats.kill();
    let _ = nats.wait();
}
