//! The forwarding tests' rig: a node's and a central daemon's configs, a client that posts
//! samples and remembers which were acknowledged, and a reader of the central store.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

/// Series the client spreads its samples over (one metric, one host each).
pub const HOSTS: u64 = 50;

/// Sample `i`: host `h{i % HOSTS}`, one second after that host's previous sample, value `i`.
pub fn sample_line(i: u64, base: i64) -> String {
    let ts = base + (i / HOSTS) as i64;
    format!(
        "{{\"name\":\"fwd\",\"value\":{i},\"timestamp\":{ts},\"metadata\":{{\"hostname\":\"h{}\"}}}}\n",
        i % HOSTS
    )
}

/// A central daemon on `DIR/central.toml` ([`central_config`] without NATS, state in `DIR/c`),
/// on `port` if given (a node already sends there).
pub fn start_central(dir: &std::path::Path, port: Option<u16>) -> DaemonProcess {
    let config = dir.join("central.toml");
    std::fs::write(&config, central_config(&dir.join("c"), None)).unwrap();
    DaemonProcess::start_at(&config, port.unwrap_or_else(free_port), |_| {})
}

/// Posts samples `range` ([`sample_line`]) to the node's pipeline `host`, which must take them.
pub fn post_hosts(node: &DaemonProcess, range: std::ops::Range<u64>, base: i64) {
    let body: String = range.map(|i| sample_line(i, base)).collect();
    let r = node.post("/api/pipelines/host/samples", &body);
    assert!(r.status().is_success(), "{}", r.status());
}

/// Posts batches of samples to a node's pipeline at `rate` samples/s, re-posting a batch until
/// the node acknowledges it (200): the node may be down meanwhile.
pub struct Client {
    pub acked: Arc<Mutex<Vec<(u64, u64)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Client {
    pub fn start(node_port: u16, pipeline: &str, rate: u64, base: i64) -> Client {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s) = (acked.clone(), stop.clone());
        let url = format!("http://127.0.0.1:{node_port}/api/pipelines/{pipeline}/samples");
        let thread = std::thread::spawn(move || {
            let http = reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap();
            let batch = rate / 10;
            let mut next = 0u64;
            let t0 = Instant::now();
            while !s.load(Ordering::Relaxed) {
                let body: String = (next..next + batch).map(|i| sample_line(i, base)).collect();
                loop {
                    match http.post(&url).body(body.clone()).send() {
                        Ok(r) if r.status().is_success() => break,
                        Ok(r) => panic!("node refused a batch: {}", r.text().unwrap_or_default()),
                        Err(_) if !s.load(Ordering::Relaxed) => {
                            std::thread::sleep(Duration::from_millis(50))
                        }
                        Err(_) => return,
                    }
                }
                a.lock().unwrap().push((next, next + batch));
                next += batch;
                // Pace to `rate`: the batch k is due at k/10 s.
                let due = t0 + Duration::from_millis(next * 1000 / rate);
                if let Some(w) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(w);
                }
            }
        });
        Client {
            acked,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops posting; returns the acknowledged sample ranges.
    pub fn stop(mut self) -> Vec<(u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.acked.lock().unwrap().clone()
    }
}

/// Every value the central store holds for metric `fwd`, by host and timestamp.
pub fn central_values(d: &DaemonProcess, from: i64, to: i64) -> BTreeMap<(u64, i64), f64> {
    central_values_at(&reqwest::blocking::Client::new(), &d.url(""), from, to)
}

/// [`central_values`] of the daemon at `base` (`http://` or `https://`) through `http`.
pub fn central_values_at(
    http: &reqwest::blocking::Client,
    base: &str,
    from: i64,
    to: i64,
) -> BTreeMap<(u64, i64), f64> {
    let queries: Vec<Value> = (0..HOSTS)
        .map(|h| json!({"metric": "fwd", "host": format!("h{h}")}))
        .collect();
    // Without padding each answer's data starts at its `from` (cc-metric-store pads the front
    // with nulls but keeps `from` where the data starts).
    let body = json!({"cluster": "local", "from": from, "to": to, "queries": queries,
        "with-stats": false, "with-padding": false});
    let resp: Value = http
        .post(format!("{base}/api/query"))
        .json(&body)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let mut out = BTreeMap::new();
    for (h, r) in resp["results"].as_array().unwrap().iter().enumerate() {
        let r = &r[0];
        let Some(data) = r["data"].as_array() else {
            continue;
        };
        let start = r["from"].as_i64().unwrap();
        for (k, v) in data.iter().enumerate() {
            if let Some(v) = v.as_f64() {
                out.insert((h as u64, start + k as i64), v);
            }
        }
    }
    out
}

/// Checks that every acknowledged sample is in `values` with its value, and nothing else is.
pub fn assert_all_there(
    what: &str,
    acked: &[(u64, u64)],
    values: &BTreeMap<(u64, i64), f64>,
    base: i64,
) {
    let mut missing = Vec::new();
    let mut expected = 0usize;
    for &(a, b) in acked {
        for i in a..b {
            expected += 1;
            let key = (i % HOSTS, base + (i / HOSTS) as i64);
            match values.get(&key) {
                Some(v) if *v == i as f64 => {}
                other => missing.push((i, other.copied())),
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{what}: {} of {expected} acknowledged samples missing or wrong, first: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert_eq!(
        values.len(),
        expected,
        "{what}: the central store holds samples nobody acknowledged"
    );
}

/// The node's sink status by name.
pub fn sink(d: &DaemonProcess, name: &str) -> Value {
    let v: Value = d.get("/api/sinks").unwrap().json().unwrap();
    v["sinks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no sink {name} in {v}"))
}

/// Waits until `pred` holds, for up to `limit`.
pub fn wait_until(what: &str, limit: Duration, mut pred: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !pred() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A central daemon's config: samples at one-second resolution, NATS ingest from `stream`
/// when given.
pub fn central_config(dir: &std::path::Path, nats: Option<(&str, &str, &str)>) -> String {
    let mut c = format!(
        "[daemon]\ndata-dir = \"{}\"\n\n[store]\ndefault-frequency = 1\n",
        dir.display()
    );
    if let Some((url, stream, durable)) = nats {
        c.push_str(&format!(
            "\n[nats]\naddress = \"{url}\"\n[[nats.subscriptions]]\nsubscribe-to = \"fwd.lp\"\nstream = \"{stream}\"\ndurable = \"{durable}\"\n"
        ));
    }
    c
}
