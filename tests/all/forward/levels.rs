//! A forwarded sample lands at the same level (cluster/host/type+id/stype+id) and under the same
//! metric name at the central as in the node's own store: the node's pipeline writes to both,
//! and the two stores' trees (`/api/debug`) are compared whole. The samples cover each way a
//! level is named (tags, a resource with and without an id, `type=node`, a cluster of its own)
//! and names line protocol must escape.

use std::time::Duration;

use serde_json::{Value, json};

use super::rig::*;
use crate::common::*;

/// (name, resource, metadata) of each series.
const SERIES: &[(&str, &str, &str)] = &[
    ("plain", "", r#"{"hostname":"h1"}"#),
    ("cpu_load", "cpu3", r#"{"hostname":"h1"}"#),
    ("rx", "lo", r#"{"hostname":"h1"}"#),
    ("path", "nvme0/ns1", r#"{"hostname":"h1"}"#),
    ("node_level", "cpu3", r#"{"hostname":"h1","type":"node"}"#),
    (
        "core_temp",
        "",
        r#"{"hostname":"h1","type":"socket","type-id":"1","stype":"core","stype-id":"7"}"#,
    ),
    ("elsewhere", "", r#"{"hostname":"h2","cluster":"other"}"#),
    ("with space, comma", "", r#"{"hostname":"rack 1,slot=2"}"#),
    ("eq=sign", "gpu0", r#"{"hostname":"höst\\back"}"#),
    // Backslashes stand for themselves (two in a row stay two).
    ("two", "", r#"{"hostname":"a\\\\b"}"#),
];

/// Names line protocol cannot carry (a backslash would escape the separator after it; a
/// control character is refused by the decoder): counted as unencodable at the node, never
/// sent, so the batch they came in is not refused.
const UNENCODABLE: &[&str] = &[
    r#"{"name":"trail\\","value":1}"#,
    r#"{"name":"m","value":1,"metadata":{"hostname":"tail\\"}}"#,
    r#"{"name":"tab\tname","value":1}"#,
];

fn dump(d: &DaemonProcess) -> Value {
    let v: Value = d.get("/api/debug").unwrap().json().unwrap();
    v["tree"].clone()
}

#[test]
fn a_forwarded_sample_lands_where_the_nodes_own_store_puts_it() {
    let tmp = tempfile::tempdir().unwrap();
    let central = start_central(tmp.path(), None);
    let node_toml = tmp.path().join("node.toml");
    std::fs::write(
        &node_toml,
        format!(
            "[daemon]\ndata-dir = \"{}\"\n\n[store]\ndefault-frequency = 1\n\n\
             [[pipeline]]\nname = \"host\"\nsinks = [\"store\", \"up\"]\n\n\
             [[pipeline]]\nname = \"out\"\nsinks = [\"up\"]\n\n\
             [[sink]]\nname = \"up\"\ntype = \"http\"\nurl = \"{}\"\nmax-backoff = \"200ms\"\n",
            tmp.path().join("node").display(),
            central.url("/api/write")
        ),
    )
    .unwrap();
    let node = DaemonProcess::start(&node_toml);
    let t0 = chrono::Utc::now().timestamp() - 600;
    let mut body = String::new();
    for (k, (name, resource, meta)) in SERIES.iter().enumerate() {
        for t in 0..3 {
            let s = json!({"name": name, "resource": resource, "value": k * 10 + t,
                "timestamp": t0 + t as i64, "metadata": serde_json::from_str::<Value>(meta).unwrap()});
            body.push_str(&format!("{s}\n"));
        }
    }
    let r = node.post("/api/pipelines/host/samples", &body);
    assert!(r.status().is_success(), "{}", r.text().unwrap());
    let r = node.post("/api/pipelines/out/samples", &UNENCODABLE.join("\n"));
    assert!(r.status().is_success(), "{}", r.text().unwrap());
    let total = 3 * SERIES.len() as u64;
    // Sent or refused (a refusal is decided at once): then nothing may have been refused.
    wait_until(
        "the node decided everything",
        Duration::from_secs(30),
        || sink(&node, "up")["queued-records"] == 0,
    );
    let s = sink(&node, "up");
    assert_eq!(
        (&s["sent-samples"], &s["dead-lettered-samples"]),
        (&json!(total), &json!(0)),
        "{s}"
    );
    assert_eq!(s["dropped"]["unencodable"], UNENCODABLE.len(), "{s}");

    let (mine, theirs) = (dump(&node), dump(&central));
    assert!(
        mine["children"].as_object().is_some_and(|c| !c.is_empty()),
        "{mine}"
    );
    assert_eq!(mine, theirs, "the node's store vs the central's");
}
