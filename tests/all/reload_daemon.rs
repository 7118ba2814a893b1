//! Reload through the daemon, as an operator does it: the config file changes, `POST
//! /api/admin/reload` applies it, and the daemon says what it did. Every field takes effect
//! or is named as not applied; the config the daemon reports is the one it runs.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// A pipeline `p` to stdout: a `testing` stage holding samples until flush (tagged `tag`), then
/// `second` (a TOML inline table of the second stage's fields).
fn config(dir: &Path, flush: &str, tag: &str, second: &str) -> std::path::PathBuf {
    config_file(
        dir,
        &format!(
            r#"guests-dir = "guests"
watch-interval = "1h"

# Generous: these tests are about reloads, and a starved CI machine must not turn a slow
# flush into lost samples (the deadline has tests of its own).
[guest-defaults]
deadline = "10s"

[[pipeline]]
name = "p"
flush-interval = "{flush}"
sinks = ["stdout"]

[[pipeline.transformer]]
guest = "probe"
params = {{ mode = "hold", tag = "{tag}" }}
quarantine-after = 1

[[pipeline.transformer]]
{second}
"#
        ),
    )
}

fn daemon_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("guests")).unwrap();
    std::fs::write(dir.path().join("guests/probe.wasm"), guest_bytes("testing")).unwrap();
    dir
}

fn reload(d: &DaemonProcess, query: &str) -> (u16, Value) {
    let r = d.post(&format!("/api/admin/reload{query}"), "");
    (r.status().as_u16(), r.json().unwrap())
}

#[test]
fn twenty_reloads_under_load_deliver_every_sample_exactly_once() {
    let dir = daemon_dir();
    let testing = guest_path("testing");
    let second = |i: usize| {
        if i.is_multiple_of(2) {
            "guest = \"template\"\nparams = { factor = 1.0 }".to_string()
        } else {
            format!(
                "guest = \"{}\"\nparams = {{ tag = \"s{i}\" }}",
                testing.display()
            )
        }
    };
    let cfg = config(dir.path(), "50ms", "v0", &second(0));
    let d = Arc::new(DaemonProcess::start(&cfg));

    // 500-sample bodies every 20 ms: 25k samples/s offered, on an absolute schedule.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    // Stops the producer however the test ends (a failed assertion included).
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _stop_producer = StopOnDrop(stop.clone());
    let producer = {
        let (d, stop, sent) = (d.clone(), stop.clone(), sent.clone());
        std::thread::spawn(move || {
            let client = reqwest::blocking::Client::new();
            let url = d.url("/api/pipelines/p/samples");
            let (start, mut next) = (Instant::now(), 0u64);
            for tick in 0u32.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let mut body = Vec::with_capacity(500 * 64);
                for i in 0..500 {
                    let seq = next + i;
                    writeln!(
                        body,
                        r#"{{"name":"seq","resource":"r{}","value":{seq}}}"#,
                        seq % 7
                    )
                    .unwrap();
                }
                let r = client.post(&url).body(body).send().unwrap();
                assert_eq!(r.status(), 200, "{}", r.text().unwrap());
                next += 500;
                sent.store(next, Ordering::Relaxed);
                let due = start + Duration::from_millis(20) * (tick + 1);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
        })
    };

    let start = Instant::now();
    let mut swapped = 0;
    for i in 1..=20 {
        std::thread::sleep(Duration::from_millis(150));
        // The second stage, and for a refused one what the error must name.
        let (stage, refusal) = match i {
            // A component of the wrong world: the `foo` agent as a transformer.
            7 => (
                "guest = \"foo\"".to_string(),
                Some(("transformer", "names the world")),
            ),
            13 => (
                format!(
                    "guest = \"{}\"\nparams = {{ fail = \"on purpose\" }}",
                    testing.display()
                ),
                Some(("on purpose", "names the reason")),
            ),
            _ => (second(i), None),
        };
        config(dir.path(), "50ms", &format!("v{i}"), &stage);
        let (status, outcome) = reload(&d, "");
        match refusal {
            Some((names, what)) => {
                let error = outcome["pipelines"]["p"]["error"]
                    .as_str()
                    .unwrap_or_default();
                assert!(error.contains(names), "{what}: {outcome}");
            }
            None => {
                assert_eq!(outcome["pipelines"]["p"]["result"], "swapped", "{outcome}");
                swapped += 1;
            }
        }
        let refused = refusal.is_some();
        assert_eq!(status, if refused { 422 } else { 200 }, "{outcome}");
        if refused {
            // The old version keeps running and is what the daemon reports.
            let running: Value = d.get("/api/config").unwrap().json().unwrap();
            let tag = &running["pipeline"][0]["transformer"][0]["params"]["tag"];
            assert_eq!(tag, &format!("v{}", i - 1), "{running}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    let elapsed = start.elapsed();
    let total = sent.load(Ordering::Relaxed);
    assert_eq!(swapped, 18);
    assert!(
        total as f64 / elapsed.as_secs_f64() >= 20_000.0,
        "offered {total} samples in {elapsed:?}: under 20k/s"
    );
    assert_eq!(d.post("/api/pipelines/p/flush", "").status(), 200);

    let stats: Value = d.get("/api/pipelines").unwrap().json().unwrap();
    assert_eq!(stats[0]["samples-lost"], 0, "{stats}");
    let mut seen = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while (seen.len() as u64) < total && Instant::now() < deadline {
        let Ok(line) = d.stdout.recv_timeout(Duration::from_secs(1)) else {
            continue;
        };
        let v: Value = serde_json::from_str(&line).unwrap();
        let seq = v["value"].as_f64().unwrap() as u64;
        assert!(seen.insert(seq), "sample {seq} delivered twice");
    }
    assert_eq!(seen.len() as u64, total, "every sample delivered: {stats}");
    assert!(
        d.stdout.recv_timeout(Duration::from_millis(200)).is_err(),
        "nothing more"
    );
}

#[test]
fn reload_applies_every_field_reports_what_runs_and_releases_quarantine_only_when_asked() {
    let dir = daemon_dir();
    let pass = "guest = \"template\"";
    let cfg = config(dir.path(), "1h", "v1", pass);
    let d = DaemonProcess::start(&cfg);

    // A held sample comes out once the new, shorter flush interval applies.
    d.post("/api/pipelines/p/samples", r#"{"name":"m","value":1}"#);
    assert!(d.stdout.recv_timeout(Duration::from_millis(300)).is_err());
    config(dir.path(), "200ms", "v1", pass);
    let (status, outcome) = reload(&d, "");
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(d.next_sample()["value"], 1.0, "flushed on the new interval");
    let running: Value = d.get("/api/config").unwrap().json().unwrap();
    assert_eq!(running["pipeline"][0]["flush-interval"], "200ms");

    // A setting read only at start is named, and the running value stays in the report.
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("[daemon]", "[daemon]\ncluster = \"elsewhere\""),
    )
    .unwrap();
    let (status, outcome) = reload(&d, "");
    assert_eq!(status, 200, "{outcome}");
    assert_eq!(
        outcome["restart_required"][0], "daemon.cluster",
        "{outcome}"
    );
    let running: Value = d.get("/api/config").unwrap().json().unwrap();
    assert_eq!(running["daemon"]["cluster"], "local");

    // A refused pipeline leaves the running version in the report.
    config(dir.path(), "200ms", "v2", "guest = \"no-such-guest\"");
    let (status, outcome) = reload(&d, "");
    assert_eq!(status, 422, "{outcome}");
    let running: Value = d.get("/api/config").unwrap().json().unwrap();
    assert_eq!(
        running["pipeline"][0]["transformer"][0]["params"]["tag"],
        "v1"
    );
    assert_eq!(
        running["pipeline"][0]["transformer"][1]["guest"],
        "template"
    );

    // Quarantine: a reload of the same config keeps it; only an explicit release ends it.
    config(dir.path(), "200ms", "v1", pass);
    d.post(
        "/api/pipelines/p/samples",
        r#"{"name":"test.trap","value":1}"#,
    );
    let quarantined = || {
        let v: Value = d.get("/api/pipelines").unwrap().json().unwrap();
        v[0]["stages"][0]["quarantined"].as_bool().unwrap()
    };
    d.wait_for("the quarantine", quarantined);
    let (status, _) = reload(&d, "");
    assert_eq!(status, 200);
    assert!(quarantined(), "an unchanged reload keeps the quarantine");
    let (status, outcome) = reload(&d, "?release-quarantine=true");
    assert_eq!(status, 200);
    assert_eq!(outcome["released"], true);
    d.wait_for("the release", || !quarantined());
}
