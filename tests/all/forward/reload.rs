//! Reloading a node's sinks: a changed sink (URL, token, batch size) takes effect at the reload
//! and keeps its queue, so what was queued while the first URL was dead arrives at the new
//! one; a removed sink's queue stays on disk, reported in `GET /api/sinks` as kept, until it is
//! deleted on purpose. The new central requires a JWT (`[api] jwt-public-key`): the sink's
//! `token-file` is what lets it in.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::SigningKey;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde_json::{Value, json};
use wasmon::api::auth::sign;

use super::rig::*;
use crate::common::*;

fn kept_queues(node: &DaemonProcess) -> Vec<Value> {
    let v: Value = node.get("/api/sinks").unwrap().json().unwrap();
    v["kept-queues"].as_array().unwrap().clone()
}

#[test]
fn reload_changes_a_sink_and_keeps_its_queue_and_a_removed_sinks_queue() {
    let tmp = tempfile::tempdir().unwrap();
    let key = SigningKey::from_bytes(&[7; 32]);
    let now = chrono::Utc::now().timestamp();
    let token = sign(
        &key,
        &json!({"sub": "node", "roles": ["api"], "exp": now + 3600}),
    );
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();

    let central_toml = tmp.path().join("central.toml");
    std::fs::write(
        &central_toml,
        format!(
            "{}\n[api]\njwt-public-key = \"{}\"\n",
            central_config(&tmp.path().join("c"), None),
            STANDARD.encode(key.verifying_key().to_bytes())
        ),
    )
    .unwrap();
    let central = DaemonProcess::start(&central_toml);
    let mut auth = HeaderMap::new();
    auth.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    let reader = reqwest::blocking::Client::builder()
        .default_headers(auth)
        .build()
        .unwrap();

    let dead = free_port();
    let sink_def = |name: &str, port: u16, extra: &str| {
        format!(
            "[[sink]]\nname = \"{name}\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/api/write\"\nmax-backoff = \"200ms\"\n{extra}\n"
        )
    };
    let node_config = |sinks: &str, defs: &[String]| {
        format!(
            "[daemon]\ndata-dir = \"{}\"\n\n[[pipeline]]\nname = \"host\"\nsinks = [{sinks}]\n\n{}",
            tmp.path().join("node").display(),
            defs.concat()
        )
    };
    let node_toml = tmp.path().join("node.toml");
    std::fs::write(
        &node_toml,
        node_config(
            "\"up\", \"gone\"",
            &[
                sink_def("up", dead, "batch-size = 1000"),
                sink_def("gone", dead, ""),
            ],
        ),
    )
    .unwrap();
    let node = DaemonProcess::start(&node_toml);
    let base = now - 3600;
    let first = 4 * HOSTS;
    post_hosts(&node, 0..first, base);
    for name in ["up", "gone"] {
        assert_eq!(sink(&node, name)["queued-samples"], first);
    }

    // `up` moves to the central, without a token yet; `gone` is removed.
    // The node's sinks reconfigured: `up` and `defs`.
    let reconfigure = |defs: &[String]| {
        replace_file(&node_toml, node_config("\"up\"", defs).as_bytes());
    };
    reconfigure(&[sink_def("up", central.port, "batch-size = 10")]);
    let out = node.reload();
    assert_eq!(out["sinks"]["reconfigured"], json!(["up"]), "{out}");
    assert_eq!(out["sinks"]["stopped"], json!(["gone"]), "{out}");
    wait_until(
        "the central refused the sink",
        Duration::from_secs(30),
        || {
            sink(&node, "up")["last-error"][1]
                .as_str()
                .is_some_and(|e| e.contains("401"))
        },
    );
    let s = sink(&node, "up");
    assert_eq!(
        (&s["sent-samples"], &s["queued-samples"]),
        (&json!(0), &json!(first)),
        "{s}"
    );
    assert!(
        s["url"]
            .as_str()
            .unwrap()
            .contains(&central.port.to_string())
    );
    let kept = kept_queues(&node);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0]["name"], "gone");
    assert!(kept[0]["bytes"].as_u64().unwrap() > 0, "{kept:?}");

    // Now with its token: the queue drains into the new central.
    let with_token = format!("token-file = \"{}\"", token_file.display());
    let up = sink_def(
        "up",
        central.port,
        &format!("batch-size = 10\n{with_token}"),
    );
    reconfigure(std::slice::from_ref(&up));
    let out = node.reload();
    assert_eq!(out["sinks"]["reconfigured"], json!(["up"]), "{out}");
    wait_until(
        "the queued samples arrived",
        Duration::from_secs(30),
        || sink(&node, "up")["sent-samples"] == first,
    );
    // The new batch size applies to what is queued from now on: 10 samples a record.
    let records = sink(&node, "up")["sent-records"].as_u64().unwrap();
    let second = 10 * 10;
    post_hosts(&node, first..first + second, base);
    wait_until("the new samples arrived", Duration::from_secs(30), || {
        sink(&node, "up")["sent-samples"] == first + second
    });
    assert_eq!(sink(&node, "up")["sent-records"], records + 10);
    let total = first + second;
    // The central holds every value, checked again after each change below.
    let all_there = || {
        let last = base + (total / HOSTS) as i64;
        let values = central_values_at(&reader, &central.url(""), base, last);
        assert_all_there("central", &[(0, total)], &values, base);
    };
    all_there();

    // The removed sink's queue is still on disk: configured again, it sends what it held
    // (to the same series and slots: the central's values do not change).
    let gone_dir = tmp.path().join("node/sinks/gone");
    assert!(gone_dir.is_dir());
    reconfigure(&[up.clone(), sink_def("gone", central.port, &with_token)]);
    let out = node.reload();
    assert_eq!(out["sinks"]["started"], json!(["gone"]), "{out}");
    assert!(kept_queues(&node).is_empty());
    wait_until("the kept queue was sent", Duration::from_secs(30), || {
        sink(&node, "gone")["sent-samples"] == first
    });
    assert_eq!(sink(&node, "gone")["queued-records"], 0);
    all_there();

    // Removed again, it stays kept until it is deleted on purpose.
    reconfigure(std::slice::from_ref(&up));
    let out = node.reload();
    assert_eq!(out["sinks"]["stopped"], json!(["gone"]), "{out}");
    assert_eq!(kept_queues(&node)[0]["name"], "gone");
    let client = reqwest::blocking::Client::new();
    let r = client
        .delete(node.url("/api/sinks/up/queue"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 409, "a running sink's queue is not deleted");
    let r = client
        .delete(node.url("/api/sinks/gone/queue"))
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(kept_queues(&node).is_empty());
    assert!(!gone_dir.exists());
}

/// A sink removed and configured again at once (an operator's undo): the second reload
/// opens the queue the first one stopped, and what it held arrives.
#[test]
fn a_sink_removed_and_added_back_at_once_resumes_its_queue() {
    let tmp = tempfile::tempdir().unwrap();
    let central = start_central(tmp.path(), None);
    let dead = free_port();
    let config = |sinks: &str, port: Option<u16>| {
        let mut c = format!(
            "[daemon]\ndata-dir = \"{}\"\n\n[[pipeline]]\nname = \"host\"\nsinks = [{sinks}]\n",
            tmp.path().join("node").display()
        );
        if let Some(port) = port {
            c.push_str(&format!(
                "\n[[sink]]\nname = \"a\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/api/write\"\nmax-backoff = \"200ms\"\n"
            ));
        }
        c
    };
    let node_toml = tmp.path().join("node.toml");
    std::fs::write(&node_toml, config("\"a\"", Some(dead))).unwrap();
    let node = DaemonProcess::start(&node_toml);
    let base = chrono::Utc::now().timestamp() - 3600;
    let total = 4 * HOSTS;
    post_hosts(&node, 0..total, base);
    assert_eq!(sink(&node, "a")["queued-samples"], total);

    replace_file(&node_toml, config("\"store\"", None).as_bytes());
    let out = node.reload();
    assert_eq!(out["sinks"]["stopped"], json!(["a"]), "{out}");
    replace_file(&node_toml, config("\"a\"", Some(central.port)).as_bytes());
    let out = node.reload();
    assert_eq!(out["sinks"]["started"], json!(["a"]), "{out}");
    wait_until("the queue arrived", Duration::from_secs(30), || {
        sink(&node, "a")["sent-samples"] == total
    });
    let values = central_values(&central, base, base + (total / HOSTS) as i64);
    assert_all_there("central", &[(0, total)], &values, base);
}

/// A smaller `queue-max-size` applies at the reload to what is queued already: the oldest
/// records beyond it are dropped and counted, and what arrives once the central is back is the
/// newest, exactly sent + dropped = accepted.
#[test]
fn a_smaller_queue_budget_applies_at_reload() {
    let tmp = tempfile::tempdir().unwrap();
    let central_port = free_port();
    let config = |size: &str| {
        format!(
            "[daemon]\ndata-dir = \"{}\"\n\n[[pipeline]]\nname = \"host\"\nsinks = [\"up\"]\n\n\
             [[sink]]\nname = \"up\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{central_port}/api/write\"\n\
             gzip = false\nmax-backoff = \"200ms\"\nbatch-size = 1000\nqueue-max-size = \"{size}\"\n",
            tmp.path().join("node").display()
        )
    };
    let node_toml = tmp.path().join("node.toml");
    std::fs::write(&node_toml, config("64MiB")).unwrap();
    let node = DaemonProcess::start(&node_toml);
    let base = chrono::Utc::now().timestamp() - 3600;
    // ~56 bytes of line protocol a sample: ~8 MB, within 64 MiB, twice 4 MiB.
    let total = 150_000u64;
    for from in (0..total).step_by(10_000) {
        post_hosts(&node, from..from + 10_000, base);
    }
    let s = sink(&node, "up");
    assert_eq!(
        (&s["queued-samples"], &s["dropped"]["queue-size"]),
        (&json!(total), &json!(0))
    );

    replace_file(&node_toml, config("4MiB").as_bytes());
    let out = node.reload();
    assert_eq!(out["sinks"]["reconfigured"], json!(["up"]), "{out}");
    let s = sink(&node, "up");
    assert!(s["queued-bytes"].as_u64().unwrap() <= 4 << 20, "{s}");
    let n = |k: &str| s[k].as_u64().unwrap();
    let dropped = s["dropped"]["queue-size"].as_u64().unwrap();
    assert!(dropped >= total / 3, "{s}");
    assert_eq!(
        n("queued-samples") + n("evicted-in-flight-samples") + dropped,
        total,
        "queued + dropped = accepted: {s}"
    );

    let central = start_central(tmp.path(), Some(central_port));
    wait_until("the node drained", Duration::from_secs(60), || {
        sink(&node, "up")["queued-records"] == 0
    });
    let s = sink(&node, "up");
    let dropped = s["dropped"]["queue-size"].as_u64().unwrap();
    let sent = s["sent-samples"].as_u64().unwrap();
    assert_eq!(sent + dropped, total, "sent + dropped = accepted: {s}");
    let values = central_values(&central, base, base + (total / HOSTS) as i64 + 1);
    assert_all_there("central", &[(total - sent, total)], &values, base);
}

/// `gzip` switched off at a reload (the receiver turned out not to take it, as cc-metric-store
/// does not): the records queued compressed before are still delivered, as the receiver now
/// wants them, and none is refused.
#[test]
fn records_queued_before_gzip_was_switched_off_still_arrive() {
    let tmp = tempfile::tempdir().unwrap();
    let central = start_central(tmp.path(), None);
    let dead = free_port();
    let config = |port: u16, gzip: bool| {
        format!(
            "[daemon]\ndata-dir = \"{}\"\n\n[[pipeline]]\nname = \"host\"\nsinks = [\"up\"]\n\n\
             [[sink]]\nname = \"up\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/api/write\"\n\
             gzip = {gzip}\nmax-backoff = \"200ms\"\nbatch-size = 100\n",
            tmp.path().join("node").display()
        )
    };
    let node_toml = tmp.path().join("node.toml");
    std::fs::write(&node_toml, config(dead, true)).unwrap();
    let node = DaemonProcess::start(&node_toml);
    let base = chrono::Utc::now().timestamp() - 3600;
    let first = 4 * HOSTS;
    post_hosts(&node, 0..first, base);

    replace_file(&node_toml, config(central.port, false).as_bytes());
    let out = node.reload();
    assert_eq!(out["sinks"]["reconfigured"], json!(["up"]), "{out}");
    // Records queued after the reload go plain too.
    let total = first + 2 * HOSTS;
    post_hosts(&node, first..total, base);
    wait_until("everything decided", Duration::from_secs(30), || {
        sink(&node, "up")["queued-records"] == 0
    });
    let s = sink(&node, "up");
    assert_eq!(
        (&s["sent-samples"], &s["dead-lettered-samples"]),
        (&json!(total), &json!(0)),
        "{s}"
    );
    let values = central_values(&central, base, base + (total / HOSTS) as i64);
    assert_all_there("central", &[(0, total)], &values, base);
}
