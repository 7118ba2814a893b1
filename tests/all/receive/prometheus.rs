//! Debian's Prometheus 2.42 scrapes itself and remote-writes into wasmon's conventional
//! `/api/v1/write`: `up` arrives with its labels, the resource its `instance`.

use std::path::Path;
use std::process::{Child, Stdio};

use super::{daemon, samples_until};
use crate::common::*;

struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_prometheus(dir: &Path, write_url: &str) -> (Prometheus, u16) {
    ensure_debian_package_without_systemd("prometheus", || {
        Path::new("/usr/bin/prometheus").exists()
    });
    let port = free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: self\n    \
             static_configs:\n      - targets: ['127.0.0.1:{port}']\n        labels:\n          \
             rack: r7\nremote_write:\n  - url: {write_url}\n    queue_config:\n      \
             batch_send_deadline: 500ms\n      min_backoff: 50ms\n"
        ),
    )
    .unwrap();
    let mut cmd = prometheus_command(&config, &dir.join("tsdb"), port);
    cmd.stderr(Stdio::null());
    (Prometheus(cmd.spawn().unwrap()), port)
}

#[test]
fn receive_prometheus_remote_write_of_up_with_its_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(tmp.path(), "");
    let (_prom, port) = start_prometheus(tmp.path(), &d.url("/api/v1/write"));
    let target = format!("127.0.0.1:{port}");
    let got = samples_until(&d, |s| s.iter().any(|s| s["name"] == "up"));
    let up = got.iter().find(|s| s["name"] == "up").unwrap();
    assert_eq!(up["value"], 1.0, "{up}");
    assert_eq!(up["resource"], target.as_str(), "{up}");
    assert_eq!(up["type"], "gauge");
    assert_eq!(
        up["metadata"],
        serde_json::json!({"job": "self", "rack": "r7"}),
        "__name__ and instance are the name and resource, every other label metadata"
    );
    let ts = chrono::DateTime::parse_from_rfc3339(up["timestamp"].as_str().unwrap()).unwrap();
    let age = chrono::Utc::now().signed_duration_since(ts);
    assert!(age < chrono::Duration::seconds(60), "{up}");
    // Its own series came along (scraped metrics of every kind), with their labels.
    assert!(
        got.iter()
            .any(|s| s["metadata"]["job"] == "self" && s["name"] != "up"),
        "only up arrived"
    );
    // Counted once the pipeline acknowledged, which is after the stdout sink wrote.
    d.wait_for("the receive counter", || {
        let m = d
            .get("/metrics")
            .and_then(|r| r.text())
            .unwrap_or_else(|e| panic!("/metrics: {e}; stderr:\n{}", d.stderr.lock().unwrap()));
        m.lines().any(|l| {
            l.starts_with("wasmon_receive_samples_total{protocol=\"prometheus\"}")
                && !l.ends_with(" 0")
        })
    });
}
