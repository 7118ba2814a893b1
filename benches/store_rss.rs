//! Steady-state memory of the default config (issue #28): the daemon's RSS once its store
//! holds a full retention period. Waiting 48 h is not a bench, so the store is filled at
//! synthetic time from what the default config recorded on this host:
//!
//! 1. CAPTURE is the data directory of a daemon that ran the default config here for a while
//!    (its newest snapshot: the series set, with each series' recorded values and lifetime).
//! 2. The captured window is repeated back to back until it covers `retention-in-memory`,
//!    ending now: a series that lived through the whole window (the host's figures, long-lived
//!    processes) goes on as the same series; one that came and went (a short process) becomes
//!    a new series in each repetition (its last path element, the PID, gets the repetition's
//!    number), as new processes would. Values are the recorded ones, cycled.
//! 3. The filled store is written as a snapshot into a fresh data directory, the daemon binary
//!    is started on the default config there (only the two listen ports moved), and after it
//!    The store's background pass runs at the end of each repetition, as the daemon's does
//!    every minute, so series of exited processes go after `idle-retention` (default 1 h).
//!    restored the snapshot and settled (`STORE_RSS_SETTLE` seconds, default 90: past the
//!    page-outs at 15 and 60 s) its RSS and the store's `usage` are read.
//!
//! `cargo bench -p wasmon-benches --bench store_rss -- CAPTURE` (`WASMON_BIN`: the daemon,
//! default `target/release/wasmon`, built when missing). `STORE_RSS_CHURN=0` repeats only the
//! series that lived through the window: a host whose processes do not come and go.

#[path = "release.rs"]
mod release;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmon::store::{Store, StoreConfig, WalBatch, selector};

/// The goal for the default config's steady state on a 2-CPU host.
const GOAL_RSS_MB: f64 = 128.0;
const API_PORT: u16 = 18_382;
const PCP_PORT: u16 = 18_383;
const DEFAULT_CONFIG: &str = include_str!("../runtime/src/default-config.toml");

/// One recorded series: where, its step, its values from `first` (NaN: no sample).
struct Series {
    path: Vec<String>,
    metric: String,
    step: i64,
    first: i64,
    values: Vec<f64>,
}

fn store_config() -> StoreConfig {
    let all: toml::Value = toml::from_str(DEFAULT_CONFIG).expect("the default config parses");
    let section = all.get("store").cloned().expect("a [store] section");
    section.try_into().expect("the default [store] section")
}

/// Every series of the capture's newest snapshot.
fn capture(dir: &Path) -> Vec<Series> {
    let snaps = dir.join("store");
    let newest = wasmon::store::snapshot::list(&snaps)
        .last()
        .copied()
        .expect("the capture holds a snapshot (data-dir/store/snap-*.bin)");
    let tmp = tempfile::tempdir().unwrap();
    let name = format!("snap-{newest:020}.bin");
    std::fs::copy(snaps.join(&name), tmp.path().join(&name)).expect("copy the snapshot");
    let mut cfg = store_config();
    cfg.retention_in_memory = Duration::ZERO;
    cfg.wal = false;
    let store = Store::open(cfg, tmp.path()).expect("restore the capture");
    let u = store.usage();
    println!(
        "capture restored by this build: usage {} ({:.3} bytes/sample)",
        serde_json::to_string(&u).unwrap(),
        u.bytes as f64 / u.samples.max(1) as f64
    );
    let mut out = Vec::new();
    walk(
        &store,
        &store.debug_dump(&[]).unwrap(),
        &mut Vec::new(),
        &mut out,
    );
    out
}

fn walk(store: &Store, node: &Value, path: &mut Vec<String>, out: &mut Vec<Series>) {
    if let Some(metrics) = node["metrics"].as_object() {
        for (metric, m) in metrics {
            let (first, last, step) = (
                m["first"].as_i64().unwrap(),
                m["last"].as_i64().unwrap(),
                m["frequency"].as_i64().unwrap(),
            );
            let p: Vec<&str> = path.iter().map(String::as_str).collect();
            let r = store
                .read(&selector(&p), metric, first, last + step, 0)
                .unwrap();
            out.push(Series {
                path: path.clone(),
                metric: metric.clone(),
                step: r.step,
                first: r.from,
                values: r.data,
            });
        }
    }
    if let Some(children) = node["children"].as_object() {
        for (name, child) in children {
            path.push(name.clone());
            walk(store, child, path, out);
            path.pop();
        }
    }
}

fn status(pid: u32) -> BTreeMap<String, f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let kb: f64 = v.trim().strip_suffix(" kB")?.parse().ok()?;
            Some((k.to_string(), kb / 1024.0))
        })
        .collect()
}

fn get(path: &str) -> Option<Value> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", API_PORT)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let body = out.split_once("\r\n\r\n")?.1;
    serde_json::from_str(body).ok()
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let capture_dir = PathBuf::from(
        args.first()
            .cloned()
            .or_else(|| std::env::var("STORE_RSS_CAPTURE").ok())
            .expect("usage: store_rss CAPTURE_DATA_DIR"),
    );
    let settle = Duration::from_secs(
        std::env::var("STORE_RSS_SETTLE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(90),
    );
    let churn = std::env::var("STORE_RSS_CHURN").map_or(true, |v| v != "0");
    let bin = release::binary();
    let cfg = store_config();
    let retention = cfg.retention_in_memory.as_secs() as i64;

    let series = capture(&capture_dir);
    let t0 = series.iter().map(|s| s.first).min().expect("series");
    let t1 = series
        .iter()
        .map(|s| s.first + s.values.len() as i64 * s.step)
        .max()
        .unwrap();
    let window = t1 - t0;
    // Lived through the window: from its first step to its last (within two steps and the
    // daemon's first minute, when the agents start one after the other).
    let whole = |s: &Series| {
        s.first - t0 <= 60 + 2 * s.step
            && t1 - (s.first + s.values.len() as i64 * s.step) <= 2 * s.step
    };
    let long = series.iter().filter(|s| whole(s)).count();
    let captured: usize = series
        .iter()
        .map(|s| s.values.iter().filter(|v| !v.is_nan()).count())
        .sum();
    let copies = (retention / window).max(1);
    println!(
        "capture: {} series ({long} through the whole window), {captured} samples over {window} s; {copies} repetitions fill {} h",
        series.len(),
        copies * window / 3600
    );

    let out_dir = tempfile::tempdir().unwrap();
    let data = out_dir.path().join("data");
    let now = chrono::Utc::now().timestamp();
    let start = now - copies * window;
    let fill = Instant::now();
    let mut written = 0u64;
    {
        let mut fcfg = cfg.clone();
        fcfg.wal = false;
        let store = std::sync::Arc::new(Store::open(fcfg, data.join("store")).unwrap());
        let mut batch = WalBatch::default();
        for c in 0..copies {
            let shift = start + c * window - t0;
            for s in &series {
                if c > 0 && !whole(s) && !churn {
                    continue;
                }
                let mut path: Vec<String> = s.path.clone();
                if c > 0
                    && !whole(s)
                    && let Some(last) = path.last_mut()
                {
                    *last = format!("{last}~{c}");
                }
                let p: Vec<&str> = path.iter().map(String::as_str).collect();
                let level = store.level(&p).unwrap();
                let m = store.metric(&s.metric).unwrap();
                for (i, v) in s.values.iter().enumerate() {
                    if v.is_nan() {
                        continue;
                    }
                    let ts = s.first + i as i64 * s.step + shift;
                    if store
                        .write_to(&mut batch, &level, &s.metric, m, ts, *v)
                        .is_ok()
                    {
                        written += 1;
                    }
                }
            }
            // The daemon's background pass (each minute there; here once a repetition, at its
            // end): idle series frozen, those of `idle-metrics` past `idle-retention` dropped
            // with their levels.
            store.compact(start + (c + 1) * window);
        }
        store.compact(now);
        let u = store.usage();
        println!(
            "filled: {written} samples in {:.1} s; store usage {} ({:.3} bytes/sample)",
            fill.elapsed().as_secs_f64(),
            serde_json::to_string(&u).unwrap(),
            u.bytes as f64 / u.samples.max(1) as f64
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(store.checkpoint()).expect("snapshot");
    }

    let config = DEFAULT_CONFIG
        .replace(
            "listen = \"127.0.0.1:8082\"",
            &format!("listen = \"127.0.0.1:{API_PORT}\""),
        )
        .replace(
            "listen = \"127.0.0.1:44321\"",
            &format!("listen = \"127.0.0.1:{PCP_PORT}\""),
        )
        .replace(
            "data-dir = \"wasmon-data\"",
            &format!("data-dir = \"{}\"", data.display()),
        );
    let config_path = out_dir.path().join("wasmon.toml");
    std::fs::write(&config_path, config).unwrap();
    let started = Instant::now();
    let mut child = Command::new(&bin)
        .args(["run", "--config"])
        .arg(&config_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the daemon");
    let pid = child.id();
    while get("/api/healthcheck").is_none() && started.elapsed() < Duration::from_secs(600) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let up = started.elapsed();
    std::thread::sleep(settle);
    let st = status(pid);
    let debug = get("/api/debug").unwrap_or(Value::Null);
    let usage = &debug["usage"];
    let rss = st.get("VmRSS").copied().unwrap_or(0.0);
    println!(
        "daemon {}: up in {:.1} s (restore), after {} s more: RSS {:.1} MB (anonymous {:.1}, file {:.1}); store usage {usage} ({:.3} bytes/sample); goal ≤ {GOAL_RSS_MB} MB: {}",
        bin.display(),
        up.as_secs_f64(),
        settle.as_secs(),
        rss,
        st.get("RssAnon").copied().unwrap_or(0.0),
        st.get("RssFile").copied().unwrap_or(0.0),
        usage["bytes"].as_f64().unwrap_or(0.0) / usage["samples"].as_f64().unwrap_or(1.0),
        if rss <= GOAL_RSS_MB { "met" } else { "missed" }
    );
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let _ = child.wait();
}
