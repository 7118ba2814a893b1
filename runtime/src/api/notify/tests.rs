//! Tests of the notifier's HTTP API and of the `wasmon notify` client against it.

use super::*;
use crate::cli::notify::*;
use crate::notify::NotifierConfig;
use std::time::Duration;

/// What the daemon's authentication layer records for a caller without auth configured.
fn unauthenticated() -> Caller {
    Caller {
        subject: None,
        admin: true,
    }
}

async fn serve(n: Arc<Notifier>) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(l, router(n).layer(axum::Extension(unauthenticated())))
            .await
            .unwrap()
    });
    format!("http://{addr}")
}

async fn cli(c: &reqwest::Client, base: &str, cmd: NotifyCmd) -> anyhow::Result<String> {
    let mut out = Vec::new();
    run_cli(c, base, cmd, &mut out).await?;
    Ok(String::from_utf8(out)?)
}

fn add_cmd(sub: &str, inst: Option<&str>, above: f64) -> NotifyCmd {
    NotifyCmd::Add {
        subscriber: sub.into(),
        metric: "proc.fd.count".into(),
        instance: inst.map(str::to_string),
        above: Some(above),
        below: None,
        hysteresis: 0.0,
    }
}

/// `value METRIC INSTANCE`.
fn value_cmd(metric: &str, instance: &str) -> NotifyCmd {
    NotifyCmd::Value {
        metric: metric.into(),
        instance: instance.into(),
    }
}

/// `rm [HANDLE] [--subscriber S] [--all]`.
fn rm_cmd(handle: Option<u32>, subscriber: Option<&str>, all: bool) -> NotifyCmd {
    NotifyCmd::Rm {
        handle,
        subscriber: subscriber.map(str::to_string),
        all,
    }
}

/// `ls` in columns (`--json`: as JSON) of the thresholds the filters select.
fn ls_cmd(
    metric: Option<&str>,
    instance: Option<&str>,
    subscriber: Option<&str>,
    json: bool,
) -> NotifyCmd {
    NotifyCmd::Ls {
        metric: metric.map(str::to_string),
        instance: instance.map(str::to_string),
        subscriber: subscriber.map(str::to_string),
        json,
    }
}

/// Read SSE from `watch` until `want` events arrived (or 5 s passed); `None` on 409.
async fn watch_events(base: &str, sub: &str, want: usize) -> Option<Vec<serde_json::Value>> {
    let r = reqwest::get(format!("{base}/api/notify/watch?subscriber={sub}"))
        .await
        .unwrap();
    if r.status() == StatusCode::CONFLICT {
        return None;
    }
    assert_eq!(r.status(), 200);
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut body = r.bytes_stream();
    let mut text = String::new();
    while tokio::time::Instant::now() < deadline {
        let Ok(Some(chunk)) = tokio::time::timeout_at(deadline, body.next()).await else {
            break;
        };
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        out.clear();
        let mut sink = Vec::new();
        let lines = text.clone();
        let (mut ev, mut data) = (String::new(), String::new());
        for line in lines.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                ev = v.trim().into();
            } else if let Some(v) = line.strip_prefix("data:") {
                data = v.trim().into();
            } else if line.is_empty() && !data.is_empty() {
                print_event(&mut sink, &ev, &data, true).unwrap();
                data.clear();
            }
        }
        for l in String::from_utf8(sink).unwrap().lines() {
            out.push(serde_json::from_str(l).unwrap());
        }
        if out.len() >= want {
            break;
        }
    }
    Some(out)
}

#[derive(clap::Parser, Debug)]
struct Cli {
    #[command(flatten)]
    notify: NotifyArgs,
}

#[test]
fn cli_arguments_parse_and_conflict() {
    use clap::{CommandFactory, Parser};
    Cli::command().debug_assert();
    let c = Cli::try_parse_from([
        "t",
        "add",
        "--subscriber",
        "me",
        "proc.fd.count",
        "--above",
        "40",
    ])
    .unwrap();
    assert!(matches!(
        c.notify.cmd,
        NotifyCmd::Add {
            above: Some(40.0),
            below: None,
            ..
        }
    ));
    let both = [
        "t",
        "add",
        "--subscriber",
        "me",
        "m",
        "--above",
        "1",
        "--below",
        "2",
    ];
    assert!(Cli::try_parse_from(both).is_err());
    assert!(Cli::try_parse_from(["t", "add", "--subscriber", "me", "m"]).is_err());
    assert!(Cli::try_parse_from(["t", "rm"]).is_err());
    assert!(
        Cli::try_parse_from(["t", "rm", "--all"]).is_err(),
        "--all needs --subscriber"
    );
    let c = Cli::try_parse_from(["t", "--url", "http://h:1", "rm", "7"]).unwrap();
    assert_eq!(c.notify.url.as_deref(), Some("http://h:1"));
}

#[tokio::test]
async fn cli_add_ls_value_rm_against_the_router() {
    let n = Arc::new(Notifier::quiet(64));
    let base = serve(Arc::clone(&n)).await;
    let c = reqwest::Client::new();
    let h1: u32 = cli(&c, &base, add_cmd("alice", Some("4768"), 15.0))
        .await
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let h2: u32 = cli(&c, &base, add_cmd("bob", None, 40.0))
        .await
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(h1, h2);
    let ls = cli(
        &c,
        &base,
        ls_cmd(Some("proc.fd.count"), Some("4768"), None, true),
    )
    .await
    .unwrap();
    let ls: Vec<ThresholdInfo> = serde_json::from_str(&ls).unwrap();
    assert_eq!(
        ls.iter().map(|t| t.handle.0).collect::<Vec<_>>(),
        vec![h1, h2],
        "own and others'"
    );
    let table = cli(&c, &base, ls_cmd(None, None, Some("bob"), false))
        .await
        .unwrap();
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(table.contains("bob") && !table.contains("alice"));
    let e = cli(&c, &base, value_cmd("proc.fd.count", "4768"))
        .await
        .unwrap_err();
    // Covered but not yet seen, and not covered: each says which.
    assert!(e.to_string().starts_with("404"), "{e}");
    assert!(e.to_string().contains("a threshold covers it"), "{e}");
    let e = cli(&c, &base, value_cmd("proc.thread.count", "4768"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no threshold covers it"), "{e}");
    // `ls` naming nothing lists every threshold, in columns as wide as their widest cell.
    let n_long = cli(
        &c,
        &base,
        NotifyCmd::Add {
            subscriber: "a-subscriber-with-a-long-name".into(),
            metric: "proc.thread.cpu.system.and.more".into(),
            instance: Some("123456789012345".into()),
            above: Some(1.5),
            below: None,
            hysteresis: 0.25,
        },
    )
    .await
    .unwrap();
    let all = cli(&c, &base, ls_cmd(None, None, None, false))
        .await
        .unwrap();
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 4, "{all}");
    let metric_at = lines[0].find("METRIC").unwrap();
    for l in &lines[1..] {
        assert!(
            l[metric_at..].starts_with("proc."),
            "METRIC column misaligned:\n{all}"
        );
        assert_eq!(&l[metric_at - 2..metric_at], "  ", "{all}");
    }
    assert!(all.contains(n_long.trim()), "{all}");
    cli(
        &c,
        &base,
        rm_cmd(Some(n_long.trim().parse().unwrap()), None, false),
    )
    .await
    .unwrap();
    n.observe("proc.fd.count", "4768", 17.0, 1);
    let v = cli(&c, &base, value_cmd("proc.fd.count", "4768"))
        .await
        .unwrap();
    assert_eq!(v.trim(), "17");
    // Only the owner may delete with ?subscriber=.
    let e = cli(&c, &base, rm_cmd(Some(h1), Some("bob"), false))
        .await
        .unwrap_err();
    assert!(e.to_string().starts_with("403"), "{e}");
    cli(&c, &base, rm_cmd(Some(h1), Some("alice"), false))
        .await
        .unwrap();
    let e = cli(&c, &base, rm_cmd(Some(h1), None, false))
        .await
        .unwrap_err();
    assert!(e.to_string().starts_with("404"), "{e}");
    let out = cli(&c, &base, rm_cmd(None, Some("bob"), true))
        .await
        .unwrap();
    assert_eq!(out.trim(), "deleted 1");
    assert_eq!(n.threshold_count(), 0);
    // Bad input is refused (an unknown direction by the JSON extractor), not a crash.
    for (direction, metric, status) in [("up", "m", 422), ("rising", "", 400)] {
        let r = c
            .post(format!("{base}/api/notify/thresholds"))
            .json(&serde_json::json!({
                "subscriber": "x", "metric": metric, "value": 1, "direction": direction
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            status,
            "direction {direction:?}, metric {metric:?}"
        );
    }
    let r = c
        .get(format!("{base}/api/notify/thresholds"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[test]
fn watch_prints_times_in_rfc_3339() {
    let n = crate::notify::Notification {
        ts_ns: 1_700_000_000_123_000_000,
        ..serde_json::from_value(serde_json::json!({
            "handle": 7, "owner": "me", "metric": "m", "instance": "i", "value": 2.0,
            "direction": "rising", "threshold": 1.0, "ts_ns": 0
        }))
        .unwrap()
    };
    let mut out = Vec::new();
    print_event(
        &mut out,
        "notification",
        &serde_json::to_string(&n).unwrap(),
        false,
    )
    .unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.starts_with("2023-11-14T22:13:20.123Z handle=7 m/i value=2 rising 1"),
        "{out}"
    );
}

#[tokio::test]
async fn watch_streams_notifications_and_exact_drop_reports() {
    let n = Arc::new(Notifier::quiet(4));
    let base = serve(Arc::clone(&n)).await;
    let h = n
        .add("w", ThresholdSpec::rising(Selector::any("m"), 10.0))
        .unwrap();
    // 10 crossings before anyone watches: 4 queued, 6 dropped.
    for i in 0..10 {
        n.observe("m", &i.to_string(), 11.0, i);
    }
    let evs = watch_events(&base, "w", 5).await.unwrap();
    assert_eq!(evs.len(), 5, "{evs:?}");
    for (i, e) in evs[..4].iter().enumerate() {
        assert_eq!(e["event"], "notification");
        assert_eq!(e["data"]["handle"], h.0);
        assert_eq!(e["data"]["instance"], i.to_string());
    }
    assert_eq!(
        evs[4],
        serde_json::json!({"event":"dropped","data":{"count":6}})
    );
    let st: SubscriberStats = reqwest::get(format!("{base}/api/notify/subscribers/w"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!((st.sent, st.delivered, st.dropped), (10, 4, 6));
}

#[tokio::test]
async fn second_watch_is_refused_and_batches_are_one_event() {
    let n = Arc::new(Notifier::quiet(64));
    let base = serve(Arc::clone(&n)).await;
    n.add("b", ThresholdSpec::rising(Selector::any("m"), 1.0))
        .unwrap();
    n.subscriber("b")
        .set_batch_window(Some(Duration::from_millis(200)));
    let first = reqwest::get(format!("{base}/api/notify/watch?subscriber=b"))
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let second = reqwest::get(format!("{base}/api/notify/watch?subscriber=b"))
        .await
        .unwrap();
    assert_eq!(second.status(), 409);
    drop(first);
    // The server drops the stream, and its claim, when it sees the disconnect.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while n.subscriber("b").attach().is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "claim never released"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for i in 0..4 {
        n.observe("m", &i.to_string(), 2.0, i);
    }
    // The claim is released once the server notices the disconnect.
    let mut evs = None;
    for _ in 0..50 {
        evs = watch_events(&base, "b", 1).await;
        if evs.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let evs = evs.expect("watch claim released after disconnect");
    assert_eq!(evs[0]["event"], "batch");
    let batch = evs[0]["data"].as_array().unwrap();
    assert_eq!(batch.len(), 4, "the burst is one SSE event: {batch:?}");
    assert!(batch.iter().all(|e| e["event"] == "notification"));
}

/// A watch stream's first bytes come at once (a comment), not with the first notification or
/// keep-alive: clients that wait for a body byte (Firefox's fetch) see the stream open.
#[tokio::test]
async fn watch_opens_with_a_comment_at_once() {
    let n = Arc::new(Notifier::new(NotifierConfig {
        log: false,
        ..Default::default()
    }));
    let base = serve(Arc::clone(&n)).await;
    n.add("quiet", ThresholdSpec::rising(Selector::any("m"), 10.0))
        .unwrap();
    let r = reqwest::get(format!("{base}/api/notify/watch?subscriber=quiet"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut body = r.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(2), body.next())
        .await
        .expect("a first chunk within 2 s")
        .unwrap()
        .unwrap();
    assert!(first.starts_with(b":"), "{first:?}");
}
