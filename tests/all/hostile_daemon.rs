//! The daemon under a hostile guest or a careless client: a guest asleep in WASI, an agent
//! stuck in a call, requests that would make it grow without bound. The real binary, real
//! guests; each misbehaviour costs the daemon that call or that request and nothing else.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let r = f();
    (r, start.elapsed())
}

#[test]
fn a_guest_asleep_in_wasi_holds_up_nothing_but_its_own_call() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(
        dir.path(),
        &format!(
            r#"
[[pipeline]]
name = "slow"
sinks = ["stdout"]
[[pipeline.transformer]]
guest = "{testing}"

[[pipeline]]
name = "fast"
sinks = ["stdout"]
[[pipeline.transformer]]
guest = "template"
params = {{ factor = 2.0 }}
"#,
            testing = guest_path("testing").display()
        ),
    );
    let mut d = DaemonProcess::start(&config);
    let sleep = r#"{"name":"test.sleep","resource":"r","value":4}"#;

    assert_eq!(d.post("/api/pipelines/slow/samples", sleep).status(), 200);
    let (out, took) = timed(|| {
        let r = d.post(
            "/api/pipelines/fast/samples",
            r#"{"name":"m","resource":"r","value":21}"#,
        );
        assert_eq!(r.status(), 200);
        d.next_sample()
    });
    assert_eq!(out["value"], 42.0);
    assert!(
        took < Duration::from_secs(1),
        "another pipeline took {took:?}"
    );

    assert_eq!(d.post("/api/pipelines/slow/samples", sleep).status(), 200);
    let (r, took) = timed(|| d.get("/api/pipelines").unwrap());
    assert_eq!(r.status(), 200);
    assert!(
        took < Duration::from_secs(1),
        "/api/pipelines took {took:?}"
    );

    assert_eq!(d.post("/api/pipelines/slow/samples", sleep).status(), 200);
    let (r, took) = timed(|| d.post("/api/admin/reload", ""));
    assert_eq!(r.status(), 200);
    assert!(took < Duration::from_secs(1), "a reload took {took:?}");

    // Each sleeping batch costs one deadline (100 ms) on its own pipeline; the last may still
    // be asleep when the reload answers, so wait for the count rather than race it.
    let lost = || -> Value {
        let v: Value = d.get("/api/pipelines").unwrap().json().unwrap();
        let slow = v.as_array().unwrap().iter().find(|p| p["name"] == "slow");
        slow.unwrap()["samples-lost"].clone()
    };
    d.wait_for("three sleeping batches lost and counted", || lost() == 3);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lost(), 3, "each sleeping batch is lost and counted once");

    assert_eq!(d.post("/api/pipelines/slow/samples", sleep).status(), 200);
    std::thread::sleep(Duration::from_millis(20));
    d.signal("-TERM");
    let (status, took) = timed(|| d.child.wait().unwrap());
    assert!(status.success(), "{status}");
    assert!(
        took < Duration::from_secs(3),
        "SIGTERM took {took:?} to stop the daemon"
    );
}

#[test]
fn an_agent_stuck_in_a_call_does_not_hold_up_other_domains() {
    let dir = tempfile::tempdir().unwrap();
    let agent = guest_path("testing_agent");
    let config = config_file(
        dir.path(),
        &format!(
            r#"
[[agent]]
name = "sleepy"
guest = "{agent}"
domain = 200
pmns = "root {{ a 200:*:* }}"
params = {{ domain = 200, root = "a" }}
deadline = "3s"

[[agent]]
name = "brisk"
guest = "{agent}"
domain = 201
pmns = "root {{ b 201:*:* }}"
params = {{ domain = 201, root = "b" }}
"#,
            agent = agent.display()
        ),
    );
    let d = DaemonProcess::start(&config);
    let stuck_url = d.url("/api/ns/lookup?name=a.sleep");
    let stuck = std::thread::spawn(move || {
        let (r, took) = timed(|| reqwest::blocking::get(stuck_url).unwrap());
        (r.json::<Value>().unwrap(), took)
    });
    std::thread::sleep(Duration::from_millis(200));
    let (r, took) = timed(|| d.get("/api/ns/lookup?name=b.good").unwrap());
    let v: Value = r.json().unwrap();
    assert_eq!(v[0]["pmid"], "201.0.0", "{v}");
    assert!(
        took < Duration::from_secs(1),
        "another domain waited {took:?}"
    );
    let (v, took) = stuck.join().unwrap();
    assert!(
        v[0]["error"].as_str().is_some(),
        "the stuck call failed: {v}"
    );
    assert!(
        took < Duration::from_millis(3500),
        "the stuck call ended at its deadline: {took:?}"
    );
    assert_eq!(
        d.get("/api/ns/lookup?name=a.good")
            .unwrap()
            .json::<Value>()
            .unwrap()[0]["pmid"],
        "200.0.0"
    );
}

/// Resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb << 10
}

/// The daemon's RSS may grow by at most this much while it refuses hostile requests (its
/// idle footprint is tens of MB; the refused query alone used to cost 3.7 GB).
const RSS_GROWTH_BOUND: u64 = 200 << 20;

#[test]
fn hostile_requests_are_refused_naming_the_limit_and_the_daemon_stays_small() {
    let dir = tempfile::tempdir().unwrap();
    let d = DaemonProcess::with_config(dir.path(), "[[pipeline]]\nname = \"p\"\nsinks = []\n");
    let client = reqwest::blocking::Client::new();
    assert_eq!(
        d.post("/api/write?cluster=c", "mem,hostname=h value=1 1700000000")
            .status(),
        200
    );
    let before = rss(d.child.id());

    // 3,000 x 3,000 ids against one series: refused before any is read.
    let ids: Vec<String> = (0..3000).map(|i| i.to_string()).collect();
    let q = json!({"cluster": "c", "from": 0, "to": 1700000000, "queries": [{
        "metric": "mem", "host": "h", "type": "socket", "type-ids": ids,
        "subtype": "core", "subtype-ids": ids}]});
    let (r, took) = timed(|| {
        client
            .post(d.url("/api/query"))
            .body(q.to_string())
            .send()
            .unwrap()
    });
    assert_eq!(r.status(), 413);
    let text = r.text().unwrap();
    assert!(text.contains("max-query-series"), "names the limit: {text}");
    assert!(took < Duration::from_secs(2), "refused in {took:?}");

    // Padding from the epoch: 1 M nulls per result, 20,000 results.
    let q = json!({"cluster": "c", "from": 0, "to": 1700000000, "queries":
        (0..20000).map(|_| json!({"metric": "mem", "host": "h"})).collect::<Vec<_>>()});
    let r = client
        .post(d.url("/api/query"))
        .body(q.to_string())
        .send()
        .unwrap();
    assert_eq!(r.status(), 413, "{}", r.text().unwrap());

    // JSON samples minting a new metric name on every line.
    let mut body = Vec::new();
    for i in 0..20_000 {
        writeln!(
            body,
            r#"{{"name":"minted.{i}.{}","value":1}}"#,
            std::process::id()
        )
        .unwrap();
    }
    let r = client
        .post(d.url("/api/pipelines/p/samples"))
        .body(body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().unwrap();
    assert_eq!(v["accepted"], 10_000, "lines within the budget are kept");
    let errors = v["errors"].as_array().unwrap();
    assert!(
        errors[0].as_str().unwrap().contains("at most 10000"),
        "names the limit: {}",
        errors[0]
    );

    // A body past the cap, on a route of the daemon (not only the store's).
    let huge = vec![b'x'; 65 << 20];
    let r = client
        .post(d.url("/api/pipelines/p/samples"))
        .body(huge)
        .send()
        .unwrap();
    assert_eq!(r.status(), 413);

    let grown = rss(d.child.id()).saturating_sub(before);
    assert!(
        grown < RSS_GROWTH_BOUND,
        "the daemon grew by {} MB",
        grown >> 20
    );
    assert_eq!(d.get("/api/healthcheck").unwrap().status(), 200);
}
