//! A sink whose queue was deleted (`DELETE /api/sinks/NAME/queue`, or lost with its directory)
//! and that is configured again under the same name starts a new queue. Its records must not
//! be taken for re-sends of the old queue's: a wasmon central remembers, per sending queue, the
//! highest record id it stored and drops what is at or below it.

use std::time::Duration;

use serde_json::json;

use super::rig::*;
use crate::common::*;

#[test]
fn a_sink_configured_again_after_its_queue_was_deleted_is_not_deduplicated_away() {
    let tmp = tempfile::tempdir().unwrap();
    let central = start_central(tmp.path(), None);
    let config = |with_sink: bool| {
        let mut c = format!(
            "[daemon]\ndata-dir = \"{}\"\n\n[[pipeline]]\nname = \"host\"\nsinks = [{}]\n",
            tmp.path().join("node").display(),
            if with_sink { "\"up\"" } else { "\"store\"" }
        );
        if with_sink {
            c.push_str(&format!(
                "\n[[sink]]\nname = \"up\"\ntype = \"http\"\nurl = \"{}\"\nmax-backoff = \"200ms\"\nbatch-size = {HOSTS}\n",
                central.url("/api/write")
            ));
        }
        c
    };
    let node_toml = tmp.path().join("node.toml");
    std::fs::write(&node_toml, config(true)).unwrap();
    let node = DaemonProcess::start(&node_toml);
    let base = chrono::Utc::now().timestamp() - 3600;
    let post = |from: u64, to: u64| {
        post_hosts(&node, from..to, base);
    };
    // Ten records, one post each (ids 1..10 or so at the central).
    let first = 10 * HOSTS;
    for from in (0..first).step_by(HOSTS as usize) {
        post(from, from + HOSTS);
    }
    wait_until("the first samples arrived", Duration::from_secs(30), || {
        sink(&node, "up")["sent-samples"] == first
    });

    replace_file(&node_toml, config(false).as_bytes());
    assert_eq!(node.reload()["sinks"]["stopped"], json!(["up"]));
    let r = reqwest::blocking::Client::new()
        .delete(node.url("/api/sinks/up/queue"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    replace_file(&node_toml, config(true).as_bytes());
    assert_eq!(node.reload()["sinks"]["started"], json!(["up"]));

    let total = first + 5 * HOSTS;
    for from in (first..total).step_by(HOSTS as usize) {
        post(from, from + HOSTS);
    }
    wait_until("the new queue was sent", Duration::from_secs(30), || {
        sink(&node, "up")["queued-records"] == 0
    });
    let values = central_values(&central, base, base + (total / HOSTS) as i64);
    assert_all_there("central", &[(0, total)], &values, base);
}
