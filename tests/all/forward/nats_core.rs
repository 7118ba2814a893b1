//! A `nats` (core NATS) sink: best effort, but with a subscriber listening on loopback every
//! sample arrives on the subject as line protocol, tagged at the level the node's own store
//! would use (cluster, hostname), with its value and timestamp.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;

use super::rig::*;
use super::write_node;
use crate::common::*;

/// (hostname tag, timestamp) -> value of line protocol lines `fwd,cluster=C,hostname=H value=V T`.
fn parse(lines: &str, cluster: &mut Vec<String>) -> Vec<((String, i64), f64)> {
    lines
        .lines()
        .map(|l| {
            let mut parts = l.split(' ');
            let (key, value, ts) = (parts.next(), parts.next(), parts.next());
            let tags: BTreeMap<&str, &str> = key
                .unwrap()
                .split(',')
                .skip(1)
                .map(|t| t.split_once('=').unwrap())
                .collect();
            assert!(l.starts_with("fwd,"), "{l}");
            cluster.push(tags["cluster"].to_string());
            let v: f64 = value
                .unwrap()
                .strip_prefix("value=")
                .unwrap()
                .parse()
                .unwrap();
            (
                (tags["hostname"].to_string(), ts.unwrap().parse().unwrap()),
                v,
            )
        })
        .collect()
}

#[test]
fn a_nats_sink_publishes_line_protocol_a_subscriber_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let nats = NatsServer::start(free_port(), &tmp.path().join("nats"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    // The subscriber and the client drop within the runtime (they spawn an unsubscribe).
    let _in_rt = rt.enter();
    let (_client, mut sub) = nats_subscribe(&rt, &nats.url(), "fwd.core");
    let config = write_node(
        tmp.path(),
        "\"bus\"",
        &format!(
            "[[sink]]\nname = \"bus\"\ntype = \"nats\"\nurl = \"{}\"\nsubject = \"fwd.core\"\nbatch-size = 100\nmax-backoff = \"200ms\"\n",
            nats.url()
        ),
    );
    let node = DaemonProcess::start(&config);
    let base = chrono::Utc::now().timestamp() - 600;
    let total = 10 * HOSTS;
    post_hosts(&node, 0..total, base);

    let mut got = BTreeMap::new();
    let mut clusters = Vec::new();
    let mut messages = 0;
    rt.block_on(async {
        while (got.len() as u64) < total {
            let msg = tokio::time::timeout(Duration::from_secs(30), sub.next())
                .await
                .expect("no message for 30 s")
                .unwrap();
            messages += 1;
            for (k, v) in parse(std::str::from_utf8(&msg.payload).unwrap(), &mut clusters) {
                assert!(got.insert(k.clone(), v).is_none(), "{k:?} twice");
            }
        }
    });
    assert!(
        messages >= total / 100,
        "one message per record of 100 at most"
    );
    clusters.dedup();
    assert_eq!(clusters, ["local"]);
    for i in 0..total {
        let key = (format!("h{}", i % HOSTS), base + (i / HOSTS) as i64);
        assert_eq!(got.get(&key), Some(&(i as f64)), "sample {i}");
    }
    let s = sink(&node, "bus");
    assert_eq!(s["sent-samples"], total, "{s}");
    assert_eq!(s["queued-records"], 0, "{s}");
}
