//! HTTP API of the notifier and the `wasmon notify` CLI client. Owns the routes under
//! `/api/notify/` and their JSON shapes; all semantics are `notify::Notifier`'s. Touches nothing
//! else in the API (the lead merges `router` into the daemon's router).
//!
//! Routes (`S` is a subscriber name chosen by the client; it owns what it adds):
//!
//! | method + path | what |
//! |---|---|
//! | `POST /api/notify/thresholds` | add: body `{"subscriber":S,"metric":M,"instance":I,"value":N,"direction":"rising"\|"falling","hysteresis":H}`; `instance` absent or `"*"` = every instance; → 201 + the threshold with its `handle` |
//! | `GET /api/notify/thresholds?metric=M[&instance=I]` | thresholds on a resource, everyone's (with `instance`: its own plus the metric's global ones) |
//! | `GET /api/notify/thresholds?subscriber=S` | thresholds owned by S |
//! | `GET /api/notify/thresholds/{handle}` | one threshold |
//! | `DELETE /api/notify/thresholds/{handle}[?subscriber=S]` | delete; with `subscriber`, 403 unless S owns it |
//! | `DELETE /api/notify/thresholds?subscriber=S` | delete all of S's → `{"deleted":[...]}` |
//! | `GET /api/notify/value?metric=M&instance=I` | current value `{"metric","instance","value","ts_ns"}`; 404 if not tracked (only resources covered by a threshold are) |
//! | `GET /api/notify/subscribers/{S}` | S's counters `{"sent","delivered","dropped","queued"}` |
//! | `GET /api/notify/watch?subscriber=S` | server-sent events: `notification` (data: a notification JSON), `dropped` (data `{"count":n}`: exactly n notifications were lost here because the queue was full), or, for subscribers with a batch window, `batch` (data: an array of `{"event":"notification",...}` / `{"event":"dropped","count":n}`); 409 while another stream watches S |
//!
//! Errors are `{"error": "..."}` with 400/403/404/409 (422 for a body that is not valid JSON of
//! the right shape).
//!
//! Delivery is at most once: a subscriber's queue is bounded (`[notify] queue-capacity`); what
//! does not fit is dropped and reported by count in the stream; events already taken by a
//! stream whose client disconnects are lost.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::notify::{
    CurrentValue, Direction, Event, Handle, Notifier, NotifyError, Selector, SubscriberStats,
    ThresholdInfo, ThresholdSpec,
};

/// The notifier's routes, to be merged into the daemon's router.
pub fn router(notifier: Arc<Notifier>) -> Router {
    Router::new()
        .route(
            "/api/notify/thresholds",
            get(list).post(add).delete(delete_all),
        )
        .route(
            "/api/notify/thresholds/{handle}",
            get(get_one).delete(delete_one),
        )
        .route("/api/notify/value", get(value))
        .route("/api/notify/subscribers/{name}", get(stats))
        .route("/api/notify/watch", get(watch))
        .with_state(notifier)
}

/// Body of `POST /api/notify/thresholds`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddRequest {
    pub subscriber: String,
    pub metric: String,
    /// Absent or `"*"`: every instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    pub value: f64,
    pub direction: Direction,
    #[serde(default)]
    pub hysteresis: f64,
}

/// Answer of `GET /api/notify/value`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValueResponse {
    pub metric: String,
    pub instance: String,
    pub value: f64,
    pub ts_ns: i64,
}

#[derive(Debug, Default, Deserialize)]
struct ResourceQuery {
    metric: Option<String>,
    instance: Option<String>,
    subscriber: Option<String>,
}

/// An error answer: status and message, as `{"error": ...}`.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

impl From<NotifyError> for ApiError {
    fn from(e: NotifyError) -> Self {
        let status = match e {
            NotifyError::UnknownHandle(_) => StatusCode::NOT_FOUND,
            NotifyError::NotOwner { .. } => StatusCode::FORBIDDEN,
            NotifyError::Invalid(_) => StatusCode::BAD_REQUEST,
            NotifyError::HandlesExhausted => StatusCode::SERVICE_UNAVAILABLE,
            NotifyError::AlreadyWatched(_) => StatusCode::CONFLICT,
        };
        ApiError(status, e.to_string())
    }
}

fn bad(msg: &str) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, msg.to_string())
}

async fn add(
    State(n): State<Arc<Notifier>>,
    Json(req): Json<AddRequest>,
) -> Result<(StatusCode, Json<ThresholdInfo>), ApiError> {
    let selector = match req.instance {
        Some(i) => Selector::instance(req.metric, i),
        None => Selector::any(req.metric),
    };
    let spec = ThresholdSpec {
        selector,
        value: req.value,
        direction: req.direction,
        hysteresis: req.hysteresis,
    };
    let h = n.add(&req.subscriber, spec)?;
    let info = n.get(h).ok_or(NotifyError::UnknownHandle(h))?;
    Ok((StatusCode::CREATED, Json(info)))
}

async fn list(
    State(n): State<Arc<Notifier>>,
    Query(q): Query<ResourceQuery>,
) -> Result<Json<Vec<ThresholdInfo>>, ApiError> {
    match (q.metric, q.subscriber) {
        (Some(m), _) => Ok(Json(n.list(&m, q.instance.as_deref()))),
        (None, Some(s)) => Ok(Json(n.list_owner(&s))),
        (None, None) => Err(bad("give metric=M[&instance=I] or subscriber=S")),
    }
}

async fn get_one(
    State(n): State<Arc<Notifier>>,
    Path(h): Path<u32>,
) -> Result<Json<ThresholdInfo>, ApiError> {
    Ok(Json(
        n.get(Handle(h))
            .ok_or(NotifyError::UnknownHandle(Handle(h)))?,
    ))
}

async fn delete_one(
    State(n): State<Arc<Notifier>>,
    Path(h): Path<u32>,
    Query(q): Query<ResourceQuery>,
) -> Result<Json<ThresholdInfo>, ApiError> {
    Ok(Json(n.remove(Handle(h), q.subscriber.as_deref())?))
}

#[derive(Debug, Serialize, Deserialize)]
struct Deleted {
    deleted: Vec<ThresholdInfo>,
}

async fn delete_all(
    State(n): State<Arc<Notifier>>,
    Query(q): Query<ResourceQuery>,
) -> Result<Json<Deleted>, ApiError> {
    let s = q.subscriber.ok_or_else(|| bad("give subscriber=S"))?;
    Ok(Json(Deleted {
        deleted: n.remove_all(&s),
    }))
}

async fn value(
    State(n): State<Arc<Notifier>>,
    Query(q): Query<ResourceQuery>,
) -> Result<Json<ValueResponse>, ApiError> {
    let (Some(metric), Some(instance)) = (q.metric, q.instance) else {
        return Err(bad("give metric=M&instance=I"));
    };
    let CurrentValue { value, ts_ns } = n.value(&metric, &instance).ok_or_else(|| {
        ApiError(
            StatusCode::NOT_FOUND,
            format!("no value tracked for {metric}/{instance} (no threshold covers it)"),
        )
    })?;
    Ok(Json(ValueResponse {
        metric,
        instance,
        value,
        ts_ns,
    }))
}

async fn stats(
    State(n): State<Arc<Notifier>>,
    Path(name): Path<String>,
) -> Result<Json<SubscriberStats>, ApiError> {
    let s = n
        .find_subscriber(&name)
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, format!("no subscriber {name:?}")))?;
    Ok(Json(s.stats()))
}

fn sse_event(ev: &Event) -> SseEvent {
    let (name, data) = match ev {
        Event::Notification(x) => ("notification", serde_json::to_string(x)),
        Event::Dropped { count } => ("dropped", Ok(format!("{{\"count\":{count}}}"))),
    };
    // Notifications are plain data; serialisation cannot fail, but never panic in a stream.
    SseEvent::default()
        .event(name)
        .data(data.unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")))
}

async fn watch(
    State(n): State<Arc<Notifier>>,
    Query(q): Query<ResourceQuery>,
) -> Result<Response, ApiError> {
    let name = q.subscriber.ok_or_else(|| bad("give subscriber=S"))?;
    let guard = n.subscriber(&name).attach()?;
    // The guard lives in the stream: when the client disconnects, the stream (and the claim on
    // the subscriber) is dropped.
    let stream = futures_util::stream::unfold(guard, |guard| async move {
        let sub = guard.subscriber();
        let events = sub.recv_batch(256).await;
        let out: Vec<Result<SseEvent, Infallible>> = if sub.batch_window().is_some() {
            let data = serde_json::to_string(&events).unwrap_or_default();
            vec![Ok(SseEvent::default().event("batch").data(data))]
        } else {
            events.iter().map(|e| Ok(sse_event(e))).collect()
        };
        Some((futures_util::stream::iter(out), guard))
    })
    .flatten();
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

// ---------------------------------------------------------------------------------------------
// CLI client: `wasmon notify add|ls|rm|value|watch`

/// Default daemon address (the daemon's default `listen`); `--url` or `WASMON_URL` override it.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8082";

/// `wasmon notify [--url URL] <command>`
#[derive(clap::Args, Debug, Clone)]
pub struct NotifyArgs {
    /// Daemon base URL [default: $WASMON_URL or http://127.0.0.1:8082].
    #[arg(long)]
    pub url: Option<String>,
    #[command(subcommand)]
    pub cmd: NotifyCmd,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum NotifyCmd {
    /// Add a threshold: `add --subscriber me proc.fd.count --instance 4768 --above 40`.
    Add {
        /// Owner of the threshold (a name you choose; watch it to get the notifications).
        #[arg(long)]
        subscriber: String,
        /// Metric name, e.g. `proc.fd.count`.
        metric: String,
        /// One instance (e.g. a pid); absent or `*`: every instance.
        #[arg(long)]
        instance: Option<String>,
        /// Rising threshold: fire when the value goes from below N to at least N.
        #[arg(long, conflicts_with = "below", required_unless_present = "below")]
        above: Option<f64>,
        /// Falling threshold: fire when the value drops below N.
        #[arg(long)]
        below: Option<f64>,
        /// Re-arm only after moving this far back past the threshold.
        #[arg(long, default_value_t = 0.0)]
        hysteresis: f64,
    },
    /// List thresholds on a resource (`--metric`, `--instance`) or a subscriber's.
    Ls {
        /// Thresholds on this metric (everyone's).
        #[arg(long)]
        metric: Option<String>,
        /// With `--metric`: only those that apply to this instance.
        #[arg(long)]
        instance: Option<String>,
        /// Without `--metric`: the thresholds this subscriber owns.
        #[arg(long)]
        subscriber: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Delete a threshold by handle, or with `--all` every threshold of `--subscriber`.
    Rm {
        /// The handle `add` printed.
        #[arg(required_unless_present = "all")]
        handle: Option<u32>,
        /// Act as this subscriber: the daemon refuses to delete others' thresholds.
        #[arg(long)]
        subscriber: Option<String>,
        /// Delete every threshold of `--subscriber`.
        #[arg(long, requires = "subscriber")]
        all: bool,
    },
    /// Print the current value of a resource.
    Value { metric: String, instance: String },
    /// Stream a subscriber's notifications (one JSON object per line with `--json`).
    Watch {
        /// Whose notifications to stream.
        #[arg(long)]
        subscriber: String,
        /// One JSON object per event instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Run `wasmon notify ...` against a daemon.
pub async fn notify_cli(args: NotifyArgs) -> anyhow::Result<()> {
    let base = args
        .url
        .or_else(|| std::env::var("WASMON_URL").ok())
        .unwrap_or_else(|| DEFAULT_URL.into());
    let base = base.trim_end_matches('/').to_string();
    let client = reqwest::Client::new();
    let mut out = std::io::stdout().lock();
    run_cli(&client, &base, args.cmd, &mut out).await
}

async fn check(resp: reqwest::Response) -> anyhow::Result<reqwest::Response> {
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status();
    let body = resp.text().await.unwrap_or_default();
    let msg = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or(body);
    anyhow::bail!("{status}: {msg}")
}

fn print_table(out: &mut impl std::io::Write, ts: &[ThresholdInfo]) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>10} {:<16} {:<24} {:<10} {:<8} {:>12} {:>6}",
        "HANDLE", "OWNER", "METRIC", "INSTANCE", "DIR", "VALUE", "HYST"
    )?;
    for t in ts {
        let inst = t.instance.as_deref().unwrap_or("*");
        writeln!(
            out,
            "{:>10} {:<16} {:<24} {:<10} {:<8} {:>12} {:>6}",
            t.handle, t.owner, t.metric, inst, t.direction, t.value, t.hysteresis
        )?;
    }
    Ok(())
}

/// The CLI against `base` with output to `out` (separate from `notify_cli` for tests).
pub async fn run_cli(
    client: &reqwest::Client,
    base: &str,
    cmd: NotifyCmd,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    let url = |p: &str| format!("{base}/api/notify/{p}");
    match cmd {
        NotifyCmd::Add {
            subscriber,
            metric,
            instance,
            above,
            below,
            hysteresis,
        } => {
            let (value, direction) = match (above, below) {
                (Some(v), _) => (v, Direction::Rising),
                (None, Some(v)) => (v, Direction::Falling),
                (None, None) => anyhow::bail!("give --above N or --below N"),
            };
            let req = AddRequest {
                subscriber,
                metric,
                instance,
                value,
                direction,
                hysteresis,
            };
            let r = check(client.post(url("thresholds")).json(&req).send().await?).await?;
            let info: ThresholdInfo = r.json().await?;
            writeln!(out, "{}", info.handle)?;
        }
        NotifyCmd::Ls {
            metric,
            instance,
            subscriber,
            json,
        } => {
            let mut q: Vec<(&str, String)> = Vec::new();
            q.extend(metric.map(|m| ("metric", m)));
            q.extend(instance.map(|i| ("instance", i)));
            q.extend(subscriber.map(|s| ("subscriber", s)));
            let r = check(client.get(url("thresholds")).query(&q).send().await?).await?;
            let ts: Vec<ThresholdInfo> = r.json().await?;
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&ts)?)?;
            } else {
                print_table(out, &ts)?;
            }
        }
        NotifyCmd::Rm {
            handle,
            subscriber,
            all,
        } => {
            let q: Vec<(&str, String)> =
                subscriber.map(|s| ("subscriber", s)).into_iter().collect();
            if all {
                let r = check(client.delete(url("thresholds")).query(&q).send().await?).await?;
                let d: Deleted = r.json().await?;
                writeln!(out, "deleted {}", d.deleted.len())?;
            } else {
                let h = handle.context("give a handle or --all")?;
                check(
                    client
                        .delete(url(&format!("thresholds/{h}")))
                        .query(&q)
                        .send()
                        .await?,
                )
                .await?;
                writeln!(out, "deleted {h}")?;
            }
        }
        NotifyCmd::Value { metric, instance } => {
            let q = [("metric", metric), ("instance", instance)];
            let r = check(client.get(url("value")).query(&q).send().await?).await?;
            let v: ValueResponse = r.json().await?;
            writeln!(out, "{}", v.value)?;
        }
        NotifyCmd::Watch { subscriber, json } => {
            let r = check(
                client
                    .get(url("watch"))
                    .query(&[("subscriber", subscriber)])
                    .send()
                    .await?,
            )
            .await?;
            watch_stream(r, json, out).await?;
        }
    }
    Ok(())
}

/// Print a server-sent-event stream until it ends.
async fn watch_stream(
    r: reqwest::Response,
    json: bool,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    let mut body = r.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let (mut event, mut data) = (String::new(), String::new());
    while let Some(chunk) = body.next().await {
        buf.extend_from_slice(&chunk?);
        while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\r', '\n']);
            if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            } else if line.is_empty() && !data.is_empty() {
                print_event(out, &event, &data, json)?;
                out.flush()?;
                event.clear();
                data.clear();
            }
        }
    }
    Ok(())
}

fn print_event(
    out: &mut impl std::io::Write,
    event: &str,
    data: &str,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        writeln!(
            out,
            "{{\"event\":{},\"data\":{data}}}",
            serde_json::to_string(event)?
        )?;
        return Ok(());
    }
    match event {
        "notification" => {
            let n: crate::notify::Notification = serde_json::from_str(data)?;
            writeln!(
                out,
                "{} handle={} {}/{} value={} {} {}",
                n.ts_ns, n.handle, n.metric, n.instance, n.value, n.direction, n.threshold
            )?;
        }
        "dropped" => writeln!(out, "dropped {data}")?,
        other => writeln!(out, "{other} {data}")?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::NotifierConfig;

    async fn serve(n: Arc<Notifier>) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, router(n)).await.unwrap() });
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
        let n = Arc::new(Notifier::new(NotifierConfig {
            queue_capacity: 64,
            log: false,
            ..Default::default()
        }));
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
            NotifyCmd::Ls {
                metric: Some("proc.fd.count".into()),
                instance: Some("4768".into()),
                subscriber: None,
                json: true,
            },
        )
        .await
        .unwrap();
        let ls: Vec<ThresholdInfo> = serde_json::from_str(&ls).unwrap();
        assert_eq!(
            ls.iter().map(|t| t.handle.0).collect::<Vec<_>>(),
            vec![h1, h2],
            "own and others'"
        );
        let table = cli(
            &c,
            &base,
            NotifyCmd::Ls {
                metric: None,
                instance: None,
                subscriber: Some("bob".into()),
                json: false,
            },
        )
        .await
        .unwrap();
        assert_eq!(table.lines().count(), 2, "{table}");
        assert!(table.contains("bob") && !table.contains("alice"));
        let e = cli(
            &c,
            &base,
            NotifyCmd::Value {
                metric: "proc.fd.count".into(),
                instance: "4768".into(),
            },
        )
        .await
        .unwrap_err();
        assert!(e.to_string().starts_with("404"), "{e}");
        n.observe("proc.fd.count", "4768", 17.0, 1);
        let v = cli(
            &c,
            &base,
            NotifyCmd::Value {
                metric: "proc.fd.count".into(),
                instance: "4768".into(),
            },
        )
        .await
        .unwrap();
        assert_eq!(v.trim(), "17");
        // Only the owner may delete with ?subscriber=.
        let e = cli(
            &c,
            &base,
            NotifyCmd::Rm {
                handle: Some(h1),
                subscriber: Some("bob".into()),
                all: false,
            },
        )
        .await
        .unwrap_err();
        assert!(e.to_string().starts_with("403"), "{e}");
        cli(
            &c,
            &base,
            NotifyCmd::Rm {
                handle: Some(h1),
                subscriber: Some("alice".into()),
                all: false,
            },
        )
        .await
        .unwrap();
        let e = cli(
            &c,
            &base,
            NotifyCmd::Rm {
                handle: Some(h1),
                subscriber: None,
                all: false,
            },
        )
        .await
        .unwrap_err();
        assert!(e.to_string().starts_with("404"), "{e}");
        let out = cli(
            &c,
            &base,
            NotifyCmd::Rm {
                handle: None,
                subscriber: Some("bob".into()),
                all: true,
            },
        )
        .await
        .unwrap();
        assert_eq!(out.trim(), "deleted 1");
        assert_eq!(n.threshold_count(), 0);
        // Bad input is a 400, not a crash.
        let r = c
            .post(format!("{base}/api/notify/thresholds"))
            .json(&serde_json::json!({"subscriber":"x","metric":"m","value":1,"direction":"up"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422);
        let r = c
            .post(format!("{base}/api/notify/thresholds"))
            .json(&serde_json::json!({"subscriber":"x","metric":"","value":1,"direction":"rising"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
        let r = c
            .get(format!("{base}/api/notify/thresholds"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400);
    }

    #[tokio::test]
    async fn watch_streams_notifications_and_exact_drop_reports() {
        let n = Arc::new(Notifier::new(NotifierConfig {
            queue_capacity: 4,
            log: false,
            ..Default::default()
        }));
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
        let n = Arc::new(Notifier::new(NotifierConfig {
            queue_capacity: 64,
            log: false,
            ..Default::default()
        }));
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
}
