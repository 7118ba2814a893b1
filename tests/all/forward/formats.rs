//! A sink's queue holds records encoded for its type (line protocol, gzip'd or not; or
//! remote-write requests). A change of type that would send them in a format the destination
//! cannot read is refused naming `type`, at a reload and at a start; a change within the format
//! (http with gzip to core nats) delivers them as the new destination reads them.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;

use super::bad_input::run_refused;
use super::rig::*;
use crate::common::*;

#[test]
fn a_type_change_is_refused_where_the_queue_would_be_misread() {
    let tmp = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(free_port(), &tmp.path().join("nats"));
    let dead = free_port();
    let config = |sink: &str| {
        format!(
            "[daemon]\ndata-dir = \"{}\"\n\n[[pipeline]]\nname = \"host\"\nsinks = [\"up\"]\n\n\
             [[sink]]\nname = \"up\"\nmax-backoff = \"200ms\"\nbatch-size = 100\n{sink}\n",
            tmp.path().join("node").display()
        )
    };
    let http = config(&format!(
        "type = \"http\"\nurl = \"http://127.0.0.1:{dead}/api/write\"\ngzip = true"
    ));
    let remote_write = config(&format!(
        "type = \"remote-write\"\nurl = \"http://127.0.0.1:{dead}/api/v1/write\""
    ));
    let core = config(&format!(
        "type = \"nats\"\nurl = \"{}\"\nsubject = \"fwd.core\"",
        nats.url()
    ));
    let node_toml = tmp.path().join("node.toml");
    std::fs::write(&node_toml, &http).unwrap();
    let mut node = DaemonProcess::start(&node_toml);
    let base = chrono::Utc::now().timestamp() - 3600;
    let total = 4 * HOSTS;
    post_hosts(&node, 0..total, base);

    // At a reload: refused, the sink runs on as it was.
    replace_file(&node_toml, remote_write.as_bytes());
    let r = node.post("/api/admin/reload", "");
    assert_eq!(r.status(), 422);
    let text = r.text().unwrap();
    assert!(
        text.contains("type") && text.contains("line-protocol"),
        "{text}"
    );
    let s = sink(&node, "up");
    assert_eq!(
        (&s["type"], &s["queued-samples"]),
        (&json!("http"), &json!(total)),
        "{s}"
    );

    // At a start after the type was changed while the daemon was down: refused too.
    node.child.kill().unwrap();
    node.child.wait().unwrap();
    let text = run_refused(&node_toml);
    assert!(
        text.contains("type") && text.contains("line-protocol"),
        "{text}"
    );

    // To core NATS: the same format; the records queued gzip'd arrive as plain line protocol.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _in_rt = rt.enter();
    let (_client, mut sub) = nats_subscribe(&rt, &nats.url(), "fwd.core");
    replace_file(&node_toml, core.as_bytes());
    node = DaemonProcess::start(&node_toml);
    let mut lines = Vec::new();
    rt.block_on(async {
        while (lines.len() as u64) < total {
            let msg = tokio::time::timeout(Duration::from_secs(30), sub.next())
                .await
                .expect("no message for 30 s")
                .unwrap();
            let text = String::from_utf8(msg.payload.to_vec()).expect("plain line protocol");
            lines.extend(text.lines().map(str::to_string));
        }
    });
    let mut values: Vec<u64> = lines
        .iter()
        .map(|l| {
            let v = l.split(' ').nth(1).unwrap().strip_prefix("value=").unwrap();
            v.parse::<f64>().unwrap() as u64
        })
        .collect();
    values.sort_unstable();
    assert_eq!(values, (0..total).collect::<Vec<_>>());
    wait_until(
        "the node counted them sent",
        Duration::from_secs(10),
        || sink(&node, "up")["sent-samples"] == total,
    );
}
