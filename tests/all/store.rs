//! The buffer store behind cc-metric-store's HTTP API, through the real daemon: writes in
//! line protocol, queries, a clean restart, and `kill -9` during continuous ingest.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::common::*;

fn config(dir: &Path) -> std::path::PathBuf {
    config_file(
        dir,
        &format!(
            r#"{NO_PROCFS}[store]
default-frequency = 1
checkpoint-interval = "1h"
[store.metrics.load]
frequency = 1
aggregation = "avg"
"#
        ),
    )
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn query(d: &DaemonProcess, metric: &str, host: &str, from: i64, to: i64) -> Value {
    query_with(d, json!({"metric": metric, "host": host}), from, to)
}

fn query_with(d: &DaemonProcess, q: Value, from: i64, to: i64) -> Value {
    let body = json!({"cluster": "c1", "from": from, "to": to, "queries": [q], "with-stats": true});
    let r = reqwest::blocking::Client::new()
        .post(d.url("/api/query"))
        .json(&body)
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().unwrap();
    v["results"][0][0].clone()
}

#[test]
fn writes_survive_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let t0 = now() - 100;
    let mut d = DaemonProcess::start(&config);
    let mut body = String::new();
    for i in 0..60 {
        body.push_str(&format!(
            "load,cluster=c1,hostname=n1 value={} {}\n",
            i as f64 * 0.5,
            t0 + i
        ));
        body.push_str(&format!(
            "load,cluster=c1,host=n1,type=cpu,type-id=0 value={i}i {}\n",
            t0 + i
        ));
    }
    body.push_str("bad line here\n");
    let r = d.post("/api/write?cluster=c1", &body);
    assert_eq!(r.status(), 400, "the malformed line is reported");
    assert!(
        r.text().unwrap().contains("line 121"),
        "named by its number"
    );
    // `to` is exclusive, as in cc-metric-store.
    let before = query(&d, "load", "n1", t0, t0 + 60);
    assert_eq!(before["data"].as_array().unwrap().len(), 60, "{before}");
    assert_eq!(before["data"][10], 5.0);

    d.signal("-TERM");
    assert!(d.child.wait().unwrap().success());
    let d = DaemonProcess::start(&config);
    let after = query(&d, "load", "n1", t0, t0 + 60);
    assert_eq!(after, before, "identical after restart");
    let cpu = query_with(
        &d,
        json!({"metric": "load", "host": "n1", "type": "cpu", "type-ids": ["0"]}),
        t0,
        t0 + 60,
    );
    assert_eq!(cpu["data"][59], 59.0, "{cpu}");
    assert_eq!(cpu["avg"], 29.5);
}

#[test]
fn every_acknowledged_write_survives_kill_9_during_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let t0 = now() - 3000;
    let mut next = 0i64;
    let mut acked: Vec<i64> = Vec::new();
    for round in 0..3 {
        let mut d = DaemonProcess::start(&config);
        let url = d.url("/api/write?cluster=c1");
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let stop = stop.clone();
            let start = next;
            std::thread::spawn(move || {
                let client = reqwest::blocking::Client::new();
                let mut ok = Vec::new();
                let mut i = start;
                while !stop.load(Ordering::Relaxed) {
                    let line = format!("load,cluster=c1,hostname=k9 value={i} {}\n", t0 + i);
                    match client.post(&url).body(line).send() {
                        Ok(r) if r.status() == 200 => ok.push(i),
                        _ => break, // the daemon is gone
                    }
                    i += 1;
                }
                (ok, i)
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(300 + 150 * round));
        d.signal("-KILL");
        let _ = d.child.wait();
        stop.store(true, Ordering::Relaxed);
        let (ok, reached) = writer.join().unwrap();
        assert!(
            ok.len() > 10,
            "round {round}: only {} writes acknowledged",
            ok.len()
        );
        acked.extend(ok);
        next = reached + 1;
    }
    let d = DaemonProcess::start(&config);
    let r = query(&d, "load", "k9", t0, t0 + next);
    let data = r["data"].as_array().unwrap();
    let from = r["from"].as_i64().unwrap();
    for i in &acked {
        let slot = (t0 + i - from) as usize;
        assert_eq!(
            data.get(slot).and_then(Value::as_f64),
            Some(*i as f64),
            "acknowledged write {i} lost after kill -9"
        );
    }
}

#[test]
fn line_protocol_from_a_nats_subject_lands_in_the_store() {
    let store = tempfile::tempdir().unwrap();
    let server = NatsServer::start(free_port(), store.path());
    let address = server.url();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = rt.block_on(async_nats::connect(address.as_str())).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("[nats]\naddress = \"{address}\"\nsubscriptions = [{{ subscribe-to = \"metrics.>\", cluster-tag = \"c1\" }}]\n"));
    std::fs::write(&config, text).unwrap();
    let d = DaemonProcess::start(&config);

    let t0 = now() - 50;
    let body: String = (0..10)
        .map(|i| format!("load,hostname=nats1 value={} {}\n", i * 2, t0 + i))
        .collect();
    d.wait_for("the samples from NATS", || {
        rt.block_on(async {
            client
                .publish("metrics.node", body.clone().into())
                .await
                .unwrap();
            client.flush().await.unwrap();
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        let r = query(&d, "load", "nats1", t0, t0 + 10);
        r["data"]
            .as_array()
            .is_some_and(|a| a.len() == 10 && a[9] == 18.0)
    });
    drop(server);
}

#[test]
fn the_store_sink_derives_levels_from_tags_and_resources() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[[pipeline]]\nname = \"in\"\nsinks = [\"store\"]\n");
    std::fs::write(&config, text).unwrap();
    let d = DaemonProcess::start(&config);
    let t = now() - 10;
    let lines = [
        // Tags name cluster, host and a type level.
        format!(
            r#"{{"name":"load","value":3,"timestamp":{t},"metadata":{{"cluster":"c1","hostname":"h9","type":"cpu","type-id":"2"}}}}"#
        ),
        // No tags: this machine's name is not known to the test, so name the host; the resource
        // becomes the level below it, with `/` replaced.
        format!(
            r#"{{"name":"load","resource":"12/34","value":5,"timestamp":{t},"metadata":{{"cluster":"c1","host":"h9"}}}}"#
        ),
        format!(
            r#"{{"name":"load","value":7,"timestamp":{t},"metadata":{{"cluster":"c1","host":"h9","type":"node"}}}}"#
        ),
    ];
    assert_eq!(
        d.post("/api/pipelines/in/samples", &lines.join("\n"))
            .status(),
        200
    );
    let q = |extra: Value| -> Value {
        let mut q = json!({"metric": "load", "host": "h9"});
        q.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        query_with(&d, q, t, t + 1)
    };
    d.wait_for("the samples in the store", || {
        q(json!({"type": "cpu", "type-ids": ["2"]}))["data"] == json!([3.0])
    });
    assert_eq!(
        q(json!({"type": "12-", "type-ids": ["34"]}))["data"],
        json!([5.0])
    );
    assert_eq!(
        q(json!({}))["data"],
        json!([7.0]),
        "type=node is the host level"
    );
}

#[test]
fn debug_usage_counts_the_bytes_series_hold() {
    // 200 short series (3 samples each: bytes, not a 4 KiB page each) and two long idle ones
    // (closed buffers of one constant): `usage.bytes` over `samples-written`, as a check of
    // the store's memory divides them, stays far below a page per series.
    let dir = tempfile::tempdir().unwrap();
    let d = DaemonProcess::start(&config(dir.path()));
    let t0 = now() - 3000;
    let mut body = String::new();
    for h in 0..200 {
        for i in 0..3 {
            body.push_str(&format!(
                "load,cluster=c1,hostname=s{h} value={h}.5 {}\n",
                t0 + i
            ));
        }
    }
    for i in 0..2000 {
        body.push_str(&format!("idle,cluster=c1,hostname=n1 value=0 {}\n", t0 + i));
        body.push_str(&format!("up,cluster=c1,hostname=n1 value=1i {}\n", t0 + i));
    }
    assert_eq!(d.post("/api/write?cluster=c1", &body).status(), 200);
    let v: Value = d.get("/api/debug").unwrap().json().unwrap();
    let bytes = v["usage"]["bytes"].as_f64().expect("usage.bytes");
    let samples = v["counters"]["samples-written"].as_f64().unwrap();
    assert_eq!(samples, 4600.0, "{v}");
    assert!(bytes > 0.0);
    // A page per series would be 202 × 4,096 bytes: 180 bytes a sample.
    assert!(
        bytes / samples < 40.0,
        "{} bytes/sample: {}",
        bytes / samples,
        v["usage"]
    );
    let idle = query(&d, "idle", "n1", t0, t0 + 2000);
    assert_eq!(idle["data"].as_array().unwrap().len(), 2000);
    assert!(idle["data"].as_array().unwrap().iter().all(|x| x == 0.0));
}
