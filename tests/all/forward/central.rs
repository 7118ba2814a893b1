//! The README's plain-HTTP central, as written: a central daemon on its `central.toml` block,
//! a node on the default config with the README's `[[sink]]` block and `"central"` added to
//! its pipelines' sinks. The node's own series (polled from this host, nothing posted) are
//! queryable at the central under the URL's `?cluster=hpc`, not under the node's `local`; a
//! sample with a cluster tag of its own keeps it.

use std::time::Duration;

use serde_json::{Value, json};

use super::rig::*;
use crate::common::*;

/// The README's fenced `toml` blocks.
fn toml_blocks(readme: &str) -> Vec<&str> {
    readme
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split_once("```").map(|(body, _)| body))
        .collect()
}

fn query(central: &DaemonProcess, cluster: &str, metric: &str, host: &str) -> Value {
    let now = chrono::Utc::now().timestamp();
    let q = json!({"cluster": cluster, "from": now - 300, "to": now + 1, "with-padding": false,
        "queries": [{"metric": metric, "host": host}]});
    central.post("/api/query", &q.to_string()).json().unwrap()
}

fn values(answer: &Value) -> Vec<f64> {
    answer["results"][0][0]["data"]
        .as_array()
        .map(|d| d.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

#[test]
fn the_readmes_plain_http_central_takes_a_default_nodes_series_under_the_urls_cluster() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let blocks = toml_blocks(&readme);
    let central_toml = blocks
        .iter()
        .find(|b| b.starts_with("# central.toml"))
        .expect("the README's central.toml block");
    let sink_toml = blocks
        .iter()
        .find(|b| b.contains("url = \"http://central.example:8082/api/write?cluster=hpc\""))
        .expect("the README's plain-HTTP sink block");

    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("central-data");
    let central_cfg = tmp.path().join("central.toml");
    let text = central_toml.replace(
        "data-dir = \"/var/lib/wasmon\"",
        &format!("data-dir = \"{}\"", data.display()),
    );
    assert_ne!(&text, central_toml, "the block names its data-dir");
    std::fs::write(&central_cfg, text).unwrap();
    // `--listen` puts it on a free loopback port instead of 0.0.0.0:8082.
    let central = DaemonProcess::start(&central_cfg);

    let node_dir = tempfile::tempdir().unwrap();
    let default = wasmon::config::DEFAULT;
    let own = "sinks = [\"store\", \"notify\"]";
    assert_eq!(
        default.matches(own).count(),
        3,
        "the default config's pipelines"
    );
    let node_cfg = node_dir.path().join("wasmon.toml");
    std::fs::write(
        &node_cfg,
        format!(
            "{}\n{}",
            default.replace(own, "sinks = [\"store\", \"notify\", \"central\"]"),
            sink_toml.replace(
                "central.example:8082",
                &format!("127.0.0.1:{}", central.port)
            )
        ),
    )
    .unwrap();
    let node = DaemonProcess::start(&node_cfg);
    let host = wasmon::util::hostname();

    // The linux agent polls every 10 s; cpu_util starts with the second poll.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while values(&query(&central, "hpc", "cpu_util", &host)).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no cpu_util of {host} under hpc within 60 s: {}\nthe node's sink: {}\n\
             the node's log:\n{}\nthe central's log:\n{}",
            query(&central, "hpc", "cpu_util", &host),
            sink(&node, "central"),
            node.stderr.lock().unwrap(),
            central.stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for metric in ["memory_util", "mem.physmem", "mem.util.available"] {
        let got = query(&central, "hpc", metric, &host);
        assert!(!values(&got).is_empty(), "{metric}: {got}");
    }
    let util = values(&query(&central, "hpc", "cpu_util", &host));
    assert!(util.iter().all(|v| (0.0..=100.0).contains(v)), "{util:?}");
    // Not under the node's own cluster: the URL's replaced it.
    let local = query(&central, "local", "cpu_util", &host);
    assert!(values(&local).is_empty(), "{local}");
    assert!(local.to_string().contains("error"), "{local}");

    // A sample tagged with a cluster of its own keeps it.
    let t = chrono::Utc::now().timestamp() - 5;
    let r = node.post(
        "/api/pipelines/host/samples",
        &format!(r#"{{"name":"tagged","value":7,"timestamp":{t},"metadata":{{"cluster":"lab"}}}}"#),
    );
    assert!(r.status().is_success());
    wait_until(
        "the tagged sample under lab",
        Duration::from_secs(30),
        || values(&query(&central, "lab", "tagged", &host)) == [7.0],
    );
    let s = sink(&node, "central");
    assert_eq!(s["dead-lettered-samples"], 0, "{s}");
}

/// A central daemon whose config has no `[store]` keeps every value of a node that forwards at
/// the default config's 10 s (the store's default frequency is the embedded config's poll
/// interval; at 60 s it kept one value in six).
#[test]
fn a_central_without_a_store_section_keeps_every_value_of_a_10_s_node() {
    let tmp = tempfile::tempdir().unwrap();
    let central = DaemonProcess::with_config(tmp.path(), NO_PROCFS);
    let now = chrono::Utc::now().timestamp();
    let start = now - now % 10 - 60;
    let sent: Vec<f64> = (0..6).map(|i| 1.5 + i as f64).collect();
    let mut body = String::new();
    for (i, v) in sent.iter().enumerate() {
        let ts = start + 10 * i as i64;
        body += &format!("cpu_util,hostname=n1,type=node value={v} {ts}\n");
    }
    let r = central.post("/api/write?cluster=hpc", &body);
    assert_eq!(r.status(), 200, "{}", r.text().unwrap_or_default());
    let answer = query(&central, "hpc", "cpu_util", "n1");
    assert_eq!(values(&answer), sent, "{answer}");
    assert_eq!(answer["results"][0][0]["resolution"], 10, "{answer}");
}
