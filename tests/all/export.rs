//! Exporter guests behind `[[sink]] type = "guest"` (issue 21): a sending daemon's pipeline
//! forwards through an exporter to a receiving daemon, and what arrives is compared with what
//! was sent, field by field. The bundled `otlp` exporter into the receiver's OTLP route and
//! `jsonl` into its samples route; `trap_third` (the otlp encoding, trapping on every third
//! call of an instance) across a SIGKILL of the sender and with a receiver that is down; a
//! batch the exporter keeps failing on, dead-lettered; a guest of another world, refused; and
//! `jsonl` publishing to JetStream on its suffixed subject.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::*;

/// A daemon config: pipeline `p` into `sinks`, procfs off, and `extra` appended.
pub(crate) fn config(dir: &Path, sinks: &str, extra: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    config_file(
        dir,
        &format!("{NO_PROCFS}[[pipeline]]\nname = \"p\"\nsinks = [{sinks}]\n{extra}"),
    )
}

/// A sending daemon whose pipeline `p` goes through the guest sink `x` to `url`.
pub(crate) fn sender(dir: &Path, guest: &str, url: &str, extra: &str) -> std::path::PathBuf {
    config(
        dir,
        "\"x\"",
        &format!(
            "[[sink]]\nname = \"x\"\ntype = \"guest\"\nguest = \"{guest}\"\nurl = \"{url}\"\n\
             max-backoff = \"500ms\"\n{extra}"
        ),
    )
}

/// Samples of every kind, with units, resources, metadata, nanosecond timestamps and values
/// that a lossy encoding would bend; `tag` keeps the samples of two calls apart.
pub(crate) fn samples(tag: &str, n: usize) -> Vec<Value> {
    let kinds = ["gauge", "cumulative", "delta"];
    let values = [0.0, -1.5, 1e300, 9007199254740993.0, 1e-300, 42.25];
    (0..n)
        .map(|i| {
            let mut meta = json!({ "hostname": "n1", "rack": format!("r{}", i % 3) });
            if i % 4 == 0 {
                meta = json!({});
            }
            let resource = ["", "eth0", "cpu3", "pid/77"][i % 4];
            let unit = ["B", "ms", "", "By/s"][i % 4];
            json!({
                "name": format!("{tag}.m{}", i % 5),
                "resource": resource,
                "value": values[i % values.len()],
                "unit": unit,
                "type": kinds[i % 3],
                "timestamp": chrono::DateTime::from_timestamp_nanos(1_700_000_000_123_456_789 + i as i64 * 1_000_000_007)
                    .to_rfc3339_opts(chrono::SecondsFormat::Nanos, true),
                "metadata": meta,
            })
        })
        .collect()
}

pub(crate) fn body(samples: &[Value]) -> String {
    samples.iter().map(|s| format!("{s}\n")).collect()
}

/// A sample as the stdout sink prints it, for comparison: timestamps as instants (the
/// printer drops trailing zero digits).
fn key(s: &Value) -> String {
    let mut s = s.clone();
    let ts = chrono::DateTime::parse_from_rfc3339(s["timestamp"].as_str().unwrap()).unwrap();
    s["timestamp"] = json!(ts.timestamp_nanos_opt().unwrap());
    s.to_string()
}

/// Reads `n` samples from `d`'s stdout (60 s at most), then checks that nothing more comes
/// within half a second (a batch delivered twice would).
pub(crate) fn receive(d: &DaemonProcess, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match d.stdout.recv_timeout(left) {
            Ok(line) => got.push(serde_json::from_str(&line).unwrap()),
            Err(_) => panic!(
                "{} of {n} samples arrived; stderr:\n{}",
                got.len(),
                d.stderr.lock().unwrap()
            ),
        }
    }
    if let Ok(extra) = d.stdout.recv_timeout(Duration::from_millis(500)) {
        panic!("more than the {n} samples sent arrived: {extra}");
    }
    got
}

/// Asserts that `got` holds exactly the samples of `sent`, each once.
pub(crate) fn assert_same(sent: &[Value], got: &[Value]) {
    let count = |v: &[Value]| {
        let mut m = BTreeMap::new();
        for s in v {
            *m.entry(key(s)).or_insert(0) += 1;
        }
        m
    };
    let (want, have) = (count(sent), count(got));
    for (k, n) in &have {
        assert_eq!(
            want.get(k),
            Some(n),
            "arrived {n} times, sent {:?} times: {k}",
            want.get(k)
        );
    }
    assert_eq!(want.len(), have.len(), "not every sample arrived");
}

/// The sink `x`'s status on `d`.
pub(crate) fn sink(d: &DaemonProcess) -> Value {
    let v: Value = d.get("/api/sinks").unwrap().json().unwrap();
    v["sinks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "x")
        .cloned()
        .unwrap()
}

/// Sends samples through the exporter `guest` (a bundled name or a `.wasm` path) to a
/// receiving wasmon's `route` and checks that every field arrives as it was sent.
pub fn round_trip(guest: &str, route: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let receiver = DaemonProcess::start(&config(&tmp.path().join("r"), "\"stdout\"", ""));
    let url = receiver.url(route);
    let node = DaemonProcess::start(&sender(&tmp.path().join("s"), guest, &url, ""));
    let sent = samples("rt", 60);
    let r = node.post("/api/pipelines/p/samples", &body(&sent));
    assert!(r.status().is_success(), "{}", r.text().unwrap());
    let got = receive(&receiver, sent.len());
    assert_same(&sent, &got);
    node.wait_for("the batch acknowledged", || {
        sink(&node)["sent-samples"] == 60
    });
    let s = sink(&node);
    assert_eq!(
        (s["queued-records"].as_u64(), s["encode-failures"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
}

#[test]
fn the_otlp_exporter_round_trips_exactly_through_a_receiving_wasmon_s_otlp_route() {
    round_trip("otlp", "/api/pipelines/p/otlp");
}

#[test]
fn the_jsonl_exporter_round_trips_exactly_through_the_samples_route() {
    round_trip("jsonl", "/api/pipelines/p/samples");
}

#[test]
fn an_exporter_trapping_on_every_third_batch_loses_and_doubles_nothing_across_a_sigkill() {
    let tmp = tempfile::tempdir().unwrap();
    let rport = free_port();
    let url = format!("http://127.0.0.1:{rport}/api/pipelines/p/otlp");
    let guest = guest_path("trap_third");
    let node_cfg = sender(&tmp.path().join("s"), guest.to_str().unwrap(), &url, "");
    // The receiver is down: every batch is acknowledged by the sender's queue only.
    let mut node = DaemonProcess::start(&node_cfg);
    let mut sent = Vec::new();
    for b in 0..9 {
        let batch = samples(&format!("b{b}"), 5);
        let r = node.post("/api/pipelines/p/samples", &body(&batch));
        assert!(r.status().is_success(), "{}", r.text().unwrap());
        sent.extend(batch);
    }
    node.wait_for("nine queued records", || sink(&node)["queued-records"] == 9);
    node.signal("-KILL");
    let _ = node.child.wait();
    node = DaemonProcess::start(&node_cfg);
    let receiver = DaemonProcess::start_at(
        &config(&tmp.path().join("r"), "\"stdout\"", ""),
        rport,
        |_| {},
    );
    let got = receive(&receiver, sent.len());
    assert_same(&sent, &got);
    node.wait_for("the queue drained", || sink(&node)["queued-records"] == 0);
    let s = sink(&node);
    // Nine records on instances that trap at their third call: four traps since the restart.
    assert!(s["encode-failures"].as_u64().unwrap() >= 3, "{s}");
    assert_eq!(s["dead-lettered-samples"], 0, "{s}");
    assert_eq!(s["sent-samples"], 45, "{s}");
    let metrics = node.get("/metrics").unwrap().text().unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("wasmon_sink_encode_failures_total{sink=\"x\"}"))
        .unwrap_or_else(|| panic!("no encode failures in /metrics:\n{metrics}"));
    assert_eq!(
        line.rsplit(' ').next(),
        Some(s["encode-failures"].to_string().as_str())
    );
}

#[test]
fn a_batch_the_exporter_keeps_failing_on_is_dead_lettered_whole_and_the_rest_flows() {
    let tmp = tempfile::tempdir().unwrap();
    let receiver = DaemonProcess::start(&config(&tmp.path().join("r"), "\"stdout\"", ""));
    let url = receiver.url("/api/pipelines/p/otlp");
    let guest = guest_path("trap_third");
    let dir = tmp.path().join("s");
    let node = DaemonProcess::start(&sender(
        &dir,
        guest.to_str().unwrap(),
        &url,
        "max-encode-failures = 1\n",
    ));
    let mut delivered = Vec::new();
    for b in 0..4 {
        let batch = samples(&format!("d{b}"), 5);
        let r = node.post("/api/pipelines/p/samples", &body(&batch));
        assert!(r.status().is_success(), "{}", r.text().unwrap());
        node.wait_for("the batch sent or dead-lettered", || {
            let s = sink(&node);
            s["queued-records"] == 0
                && s["sent-samples"].as_u64().unwrap()
                    + s["dead-lettered-samples"].as_u64().unwrap()
                    == 5 * (b + 1)
        });
        // The third call of the instance traps: that batch, and only it, is dead-lettered.
        if b != 2 {
            delivered.extend(batch);
        }
    }
    assert_same(&delivered, &receive(&receiver, delivered.len()));
    let s = sink(&node);
    assert_eq!(
        (
            s["dead-lettered-samples"].as_u64(),
            s["encode-failures"].as_u64()
        ),
        (Some(5), Some(1)),
        "{s}"
    );
    let why = s["last-error"][1].as_str().unwrap();
    assert!(
        why.contains("max-encode-failures") && why.contains("trap"),
        "{why}"
    );
}

#[test]
fn a_guest_sink_whose_guest_is_not_an_exporter_is_refused_naming_the_sink_and_world() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = sender(tmp.path(), "arithmetic", "http://127.0.0.1:1/x", "");
    let err = output_err(
        std::process::Command::new(crate::common::wasmon_bin())
            .args(["run", "--config"])
            .arg(&cfg)
            .args(["--listen", &format!("127.0.0.1:{}", free_port())]),
    );
    // The daemon prints its outcome as JSON: the sink's name is in escaped quotes.
    assert!(
        err.contains(r#"sink \"x\": guest"#) && err.contains("does not fit the `exporter` world"),
        "{err}"
    );
    // `wasmon config check` says so too, from the component's WIT.
    let err = output_err(
        std::process::Command::new(crate::common::wasmon_bin())
            .args(["config", "check"])
            .arg(&cfg),
    );
    assert!(
        err.contains(r#"sink "x": guest "arithmetic": bundled guest `arithmetic` is not an exporter: transformer"#),
        "{err}"
    );
}

#[test]
fn a_guest_sink_publishes_its_exporter_s_requests_to_jetstream_on_the_suffixed_subject() {
    use futures_util::StreamExt;
    let tmp = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(free_port(), &tmp.path().join("nats"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in_rt = rt.enter();
    let (_client, mut sub) = nats_subscribe(&rt, &nats.url(), "exp.>");
    let extra = "subject = \"exp\"\nstream = \"EXP\"\n[sink.params]\nsuffix = \".lines\"\n";
    let node = DaemonProcess::start(&sender(tmp.path(), "jsonl", &nats.url(), extra));
    let sent = samples("js", 30);
    let r = node.post("/api/pipelines/p/samples", &body(&sent));
    assert!(r.status().is_success(), "{}", r.text().unwrap());
    let msg = rt
        .block_on(tokio::time::timeout(Duration::from_secs(30), sub.next()))
        .expect("no message for 30 s")
        .unwrap();
    assert_eq!(msg.subject.as_str(), "exp.lines");
    let headers = msg.headers.clone().expect("headers");
    assert_eq!(
        headers.get("Content-Type").map(|v| v.as_str()),
        Some("application/x-ndjson")
    );
    assert!(
        headers.get(async_nats::header::NATS_MESSAGE_ID).is_some(),
        "{headers:?}"
    );
    let got: Vec<Value> = std::str::from_utf8(&msg.payload)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_same(&sent, &got);
    // JetStream acknowledged it: the record left the queue, and the stream holds it.
    node.wait_for("the PubAck", || sink(&node)["sent-samples"] == 30);
    let stored = rt.block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
        js.get_stream("EXP")
            .await
            .unwrap()
            .info()
            .await
            .unwrap()
            .state
            .messages
    });
    assert_eq!(stored, 1);
}

#[test]
fn a_new_exporter_component_in_guests_dir_is_swapped_in_by_a_reload_and_the_queue_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let rport = free_port();
    let url = format!("http://127.0.0.1:{rport}/api/pipelines/p/samples");
    let dir = tmp.path().join("s");
    std::fs::create_dir_all(dir.join("guests")).unwrap();
    let exp = dir.join("guests/exp.wasm");
    // `trap_third` encodes OTLP, which the samples route would refuse.
    replace_file(&exp, &guest_bytes("trap_third"));
    let cfg = sender(&dir, "exp", &url, "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("[daemon]\n", "[daemon]\nguests-dir = \"guests\"\n"),
    )
    .unwrap();
    let node = DaemonProcess::start(&cfg);
    assert!(
        node.reload()["sinks"].get("reconfigured").is_none(),
        "nothing changed: the exporter is kept"
    );
    // The receiver is down: the batch is encoded (as OTLP) and retried.
    let sent = samples("sw", 10);
    assert!(
        node.post("/api/pipelines/p/samples", &body(&sent))
            .status()
            .is_success()
    );
    node.wait_for("a failed attempt", || {
        sink(&node)["retries"].as_u64() > Some(0)
    });
    // jsonl in its place: the queued batch is encoded again by it, and arrives.
    replace_file(&exp, &guest_bytes("jsonl"));
    let outcome = node.reload();
    assert_eq!(outcome["sinks"]["reconfigured"], json!(["x"]), "{outcome}");
    let receiver = DaemonProcess::start_at(
        &config(&tmp.path().join("r"), "\"stdout\"", ""),
        rport,
        |_| {},
    );
    assert_same(&sent, &receive(&receiver, sent.len()));
    let s = sink(&node);
    assert_eq!(
        (
            s["sent-samples"].as_u64(),
            s["dead-lettered-samples"].as_u64()
        ),
        (Some(10), Some(0)),
        "{s}"
    );
}

/// A hostile exporter's call (a loop the deadline ends; 100,000 requests) costs that call:
/// the batch is retried on a fresh instance, dead-lettered after `max-encode-failures`, and
/// meanwhile the pipeline acknowledges new samples at once and the daemon answers.
#[test]
fn a_spinning_or_flooding_exporter_costs_its_calls_and_nothing_else() {
    for (mode, why) in [("spin", "deadline"), ("flood", "the cap is 1024")] {
        let tmp = tempfile::tempdir().unwrap();
        let guest = guest_path("trap_export");
        let extra = format!(
            "deadline = \"200ms\"\nmax-encode-failures = 2\n[sink.params]\nmode = \"{mode}\"\n"
        );
        let node = DaemonProcess::start(&sender(
            tmp.path(),
            guest.to_str().unwrap(),
            "http://127.0.0.1:1/x",
            &extra,
        ));
        let batch = samples(mode, 10);
        let t0 = Instant::now();
        assert!(
            node.post("/api/pipelines/p/samples", &body(&batch))
                .status()
                .is_success()
        );
        node.wait_for("the batch dead-lettered", || {
            sink(&node)["dead-lettered-samples"] == 10
        });
        // While the exporter failed, the pipeline took more at once (the exporter runs on
        // the sink's sender, never on the pipeline's thread) and the daemon answered.
        let t1 = Instant::now();
        let more = samples(&format!("{mode}2"), 10);
        assert!(
            node.post("/api/pipelines/p/samples", &body(&more))
                .status()
                .is_success()
        );
        assert!(
            t1.elapsed() < Duration::from_secs(1),
            "{mode}: {:?}",
            t1.elapsed()
        );
        let s = sink(&node);
        assert_eq!(s["encode-failures"].as_u64(), Some(2), "{mode}: {s}");
        let last = s["last-error"][1].as_str().unwrap();
        assert!(
            last.contains("max-encode-failures") && last.contains(why),
            "{mode}: {last}"
        );
        if mode == "spin" {
            // Two calls of 200 ms each, not more: the deadline ended each.
            assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        }
    }
}
