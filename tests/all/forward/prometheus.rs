//! Debian's Prometheus 2.42 as a `remote-write` sink's receiver: the forwarded series are in
//! its TSDB with their labels and values, and a batch it refuses (400) is dead-lettered once,
//! not retried forever, without holding up the records behind it.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::rig::*;
use super::write_node;
use crate::common::*;

/// `prometheus` with the remote-write receiver on, no scraping, killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Prometheus {
    fn start(dir: &Path) -> Prometheus {
        ensure_debian_package_without_systemd("prometheus", || {
            Path::new("/usr/bin/prometheus").exists()
        });
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            "global:\n  scrape_interval: 1h\nscrape_configs: []\n",
        )
        .unwrap();
        let port = free_port();
        let mut cmd = prometheus_command(&config, &dir.join("tsdb"), port);
        cmd.arg("--web.enable-remote-write-receiver")
            .stderr(Stdio::null());
        let p = Prometheus {
            child: cmd.spawn().unwrap(),
            port,
        };
        wait_until("prometheus is ready", Duration::from_secs(60), || {
            reqwest::blocking::get(p.url("/-/ready")).is_ok_and(|r| r.status().is_success())
        });
        p
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// An instant query's `result` array.
    fn query(&self, query: &str, at: i64) -> Vec<Value> {
        let v: Value = reqwest::blocking::Client::new()
            .get(self.url("/api/v1/query"))
            .query(&[("query", query), ("time", &at.to_string())])
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(v["status"], "success", "{query}: {v}");
        v["data"]["result"].as_array().unwrap().clone()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sample(name: &str, resource: &str, value: f64, ts: i64, meta: &str) -> String {
    format!(
        "{{\"name\":\"{name}\",\"resource\":\"{resource}\",\"value\":{value},\"timestamp\":{ts},\"metadata\":{meta}}}\n"
    )
}

/// (timestamp in seconds, value) of a range vector's points.
fn points(series: &Value) -> Vec<(i64, f64)> {
    series["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_f64().unwrap() as i64,
                p[1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn prometheus_holds_the_forwarded_series_with_their_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let prom = Prometheus::start(tmp.path());
    let config = write_node(
        tmp.path(),
        "\"prom\"",
        &format!(
            "[[sink]]\nname = \"prom\"\ntype = \"remote-write\"\nurl = \"{}\"\nmax-backoff = \"200ms\"\n",
            prom.url("/api/v1/write")
        ),
    );
    let node = DaemonProcess::start(&config);
    // Recent timestamps: Prometheus refuses samples older than its head block's range.
    let t0 = chrono::Utc::now().timestamp() - 300;
    // Keys that are not label names as they are: a dash, a colon (valid in metric names,
    // not in label names), a leading digit.
    let meta = r#"{"hostname":"n1","job-kind":"batch","rack:slot":"3","1st":"yes"}"#;
    let body: String = (0..10)
        .map(|i| sample("node.cpu-user", "cpu3", i as f64 * 1.5, t0 + i * 10, meta))
        .chain(
            (0..10).map(|i| sample("node.cpu-user", "cpu4", 100.0 + i as f64, t0 + i * 10, meta)),
        )
        .collect();
    assert!(
        node.post("/api/pipelines/host/samples", &body)
            .status()
            .is_success()
    );
    wait_until("the node sent 20 samples", Duration::from_secs(60), || {
        sink(&node, "prom")["sent-samples"] == 20
    });

    let at = t0 + 200;
    let mut result = prom.query("node_cpu_user[10m]", at);
    result.sort_by_key(|s| s["metric"]["instance"].as_str().unwrap().to_string());
    assert_eq!(result.len(), 2, "{result:?}");
    for (series, (instance, value)) in result.iter().zip([
        ("cpu3", (|i: i64| i as f64 * 1.5) as fn(i64) -> f64),
        ("cpu4", |i| 100.0 + i as f64),
    ]) {
        // The name made valid, the resource as `instance`, every metadata pair a label (its
        // key made valid), and nothing else.
        let labels = &series["metric"];
        assert_eq!(
            labels,
            &serde_json::json!({"__name__": "node_cpu_user", "instance": instance,
                "hostname": "n1", "job_kind": "batch", "rack_slot": "3", "_1st": "yes"}),
        );
        let want: Vec<(i64, f64)> = (0..10).map(|i| (t0 + i * 10, value(i))).collect();
        assert_eq!(points(series), want, "{instance}");
    }

    // A sample behind its series' newest one: Prometheus answers 400 (out of order). The
    // batch goes to the dead-letter file once; the batch behind it is still delivered.
    let late = sample("node.cpu-user", "cpu3", 7.0, t0 + 5, meta);
    assert!(
        node.post("/api/pipelines/host/samples", &late)
            .status()
            .is_success()
    );
    wait_until(
        "the late sample is dead-lettered",
        Duration::from_secs(30),
        || sink(&node, "prom")["dead-lettered-samples"] == 1,
    );
    let next = sample("node.cpu-user", "cpu3", 42.0, t0 + 100, meta);
    assert!(
        node.post("/api/pipelines/host/samples", &next)
            .status()
            .is_success()
    );
    wait_until("the next sample is sent", Duration::from_secs(30), || {
        sink(&node, "prom")["sent-samples"] == 21
    });
    let s = sink(&node, "prom");
    assert_eq!(s["queued-records"], 0, "{s}");
    assert_eq!(s["dead-lettered-records"], 1, "{s}");
    assert_eq!(s["retries"], 0, "a refusal is not retried: {s}");
    let error = s["last-error"][1].as_str().unwrap_or_default();
    assert!(error.contains("400"), "{s}");
    let dead = std::fs::read(tmp.path().join("node/sinks/prom/dead-letter.log")).unwrap();
    assert!(String::from_utf8_lossy(&dead).contains("samples=1"));
    let result = prom.query("node_cpu_user{instance=\"cpu3\"}[10m]", t0 + 200);
    let got = points(&result[0]);
    assert!(!got.contains(&(t0 + 5, 7.0)), "{got:?}");
    assert_eq!(got.last(), Some(&(t0 + 100, 42.0)));
}
