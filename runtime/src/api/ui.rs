//! The live view: `GET /` serves a page embedded in the binary (HTML, CSS and plain JS in
//! `ui/`, no build step, nothing fetched from the network), and `/api/ui/...` the JSON the
//! page needs beyond the rest of the API. Owns those routes and their shapes only; it reads
//! the daemon's parts through their public APIs and changes nothing (thresholds are added
//! through `/api/notify`).
//!
//! | route | what |
//! |---|---|
//! | `GET /`, `/ui/app.js`, `/ui/chart.js`, `/ui/style.css` | the page (static, no data: served without a token) |
//! | `GET /api/ui/overview` | pipelines with their guests' counters, forwarding sinks, agents, the last reloads, store and notifier sizes |
//! | `GET /api/ui/store?path=C:H&filter=F&limit=N` | a level of the store: its children (filtered, at most N) and the metrics here and one level below |
//! | `GET /api/ui/ps?sort=cpu\|mem&limit=N&filter=F` | the process table, CPU % since the previous call |
//! | `GET /api/ui/thresholds?filter=F&limit=N` | thresholds of every subscriber |
//! | `GET /api/ui/notifications` | the last notifications (every subscriber's), oldest first |
//! | `GET /api/ui/notifications/stream` | server-sent events ([`super::live_sse`]): `notification` (JSON), `dropped` (`{"count":n}`) |
//!
//! Every list is bounded (`limit`, at most [`MAX_LIMIT`]) and says how many there were, so
//! the page stays responsive with 100k series, thresholds or processes behind it.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::sse::Event as SseEvent;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::daemon::Daemon;
use crate::notify::{Notification, NotificationSink};
use crate::procfs::{Fields, ProcReader, Scope, Snapshot};

const INDEX_HTML: &str = include_str!("ui/index.html");
const APP_JS: &str = include_str!("ui/app.js");
const CHART_JS: &str = include_str!("ui/chart.js");
const STYLE_CSS: &str = include_str!("ui/style.css");

/// Longest list any route returns: what a person can scan, and small enough to render at once.
pub const MAX_LIMIT: usize = 1000;
/// Items a route returns when the page does not say.
const DEFAULT_LIMIT: usize = 200;
/// Notifications kept for a page that opens (or reconnects) after they fired.
const RECENT_NOTIFICATIONS: usize = 200;
/// Notifications buffered per open stream; a page that falls further behind is told how many
/// it missed (a `dropped` event) instead of slowing the notifier.
const STREAM_BUFFER: usize = 1024;
/// A CPU % needs two passes over /proc: without a previous one this recent, the route takes
/// two this far apart.
const CPU_BASELINE_MAX_AGE: Duration = Duration::from_secs(60);
const CPU_SAMPLE: Duration = Duration::from_millis(250);

/// Every notification of every subscriber, for the page: a ring of recent ones and a broadcast
/// to open streams. `deliver` runs on the notifier's caller: it only serialises and pushes.
pub struct Tap {
    tx: broadcast::Sender<Arc<str>>,
    recent: Mutex<VecDeque<Arc<str>>>,
}

impl Tap {
    fn new() -> Arc<Tap> {
        Arc::new(Tap {
            tx: broadcast::channel(STREAM_BUFFER).0,
            recent: Mutex::new(VecDeque::with_capacity(RECENT_NOTIFICATIONS)),
        })
    }
}

impl NotificationSink for Tap {
    fn deliver(&self, n: &Notification) {
        let Ok(text) = serde_json::to_string(n) else {
            return;
        };
        let text: Arc<str> = text.into();
        {
            let mut recent = crate::util::lock(&self.recent);
            if recent.len() == RECENT_NOTIFICATIONS {
                recent.pop_front();
            }
            recent.push_back(text.clone());
        }
        // No receiver (no page open) is not an error.
        let _ = self.tx.send(text);
    }
}

struct Ui {
    daemon: Arc<Daemon>,
    tap: Arc<Tap>,
    started: Instant,
    /// The previous pass over /proc and when it was taken: the baseline of the next CPU %.
    procs: Mutex<Option<(Snapshot, Instant)>>,
}

/// The page and its routes. The `/api/ui` routes sit behind the same JWT check as
/// cc-metric-store's API (`[api] jwt-public-key`); the page itself holds no data.
pub fn router(daemon: Arc<Daemon>, auth: Arc<super::auth::Auth>) -> Router {
    let tap = Tap::new();
    daemon.parts().notifier.add_sink(tap.clone());
    let ui = Arc::new(Ui {
        daemon,
        tap,
        started: Instant::now(),
        procs: Mutex::new(None),
    });
    let api = Router::new()
        .route("/api/ui/overview", get(overview))
        .route("/api/ui/store", get(store))
        .route("/api/ui/ps", get(ps))
        .route("/api/ui/thresholds", get(thresholds))
        .route("/api/ui/notifications", get(recent))
        .route("/api/ui/notifications/stream", get(stream))
        .with_state(ui)
        .layer(axum::middleware::from_fn_with_state(
            auth,
            super::auth::authenticate,
        ));
    Router::new()
        .route("/", get(|| page("text/html; charset=utf-8", INDEX_HTML)))
        .route(
            "/ui/app.js",
            get(|| page("text/javascript; charset=utf-8", APP_JS)),
        )
        .route(
            "/ui/chart.js",
            get(|| page("text/javascript; charset=utf-8", CHART_JS)),
        )
        .route(
            "/ui/style.css",
            get(|| page("text/css; charset=utf-8", STYLE_CSS)),
        )
        .merge(api)
}

async fn page(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            // The page is part of the binary: a new binary is a new page.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `filter` and `limit` of the list routes.
#[derive(Debug, Deserialize, Default)]
struct ListParams {
    #[serde(default)]
    filter: String,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    path: String,
    #[serde(default)]
    sort: String,
    /// `/api/ui/store`: only children holding this metric.
    #[serde(default)]
    metric: String,
}

impl ListParams {
    fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT)
    }
    fn matches(&self, text: &str) -> bool {
        self.filter.is_empty() || text.contains(self.filter.as_str())
    }
}

/// A guest's counters by short name (`calls`, `traps`, ...).
fn guest_counters(guest: &str) -> BTreeMap<&'static str, u64> {
    crate::telemetry::registry()
        .labelled("guest", guest)
        .into_iter()
        .map(|(name, v)| {
            let short = name
                .trim_start_matches("wasmon_guest_")
                .trim_end_matches("_total");
            (short, v)
        })
        .collect()
}

/// `ok`, `quarantined`, or `failing` (a trap, deadline or refusal among its calls).
fn health(quarantined: bool, c: &BTreeMap<&'static str, u64>) -> &'static str {
    let failures: u64 = [
        "traps",
        "deadline_hits",
        "memory_refusals",
        "output_refusals",
    ]
    .iter()
    .filter_map(|k| c.get(k))
    .sum();
    if quarantined {
        "quarantined"
    } else if failures > 0 {
        "failing"
    } else {
        "ok"
    }
}

async fn overview(State(ui): State<Arc<Ui>>) -> Response {
    let d = &ui.daemon;
    let pipelines: Vec<Value> = d
        .pipelines()
        .iter()
        .map(|p| {
            let s = p.stats();
            let stages: Vec<Value> = p
                .stages()
                .into_iter()
                .map(|st| {
                    let c = guest_counters(&st.guest);
                    json!({
                        "guest": st.guest,
                        "hash": st.hash,
                        "quarantined": st.quarantined,
                        "health": health(st.quarantined, &c),
                        "counters": c,
                    })
                })
                .collect();
            json!({
                "name": p.name(),
                "stages": stages,
                "samples-in": s.samples_in.get(),
                "samples-out": s.samples_out.get(),
                "samples-lost": s.samples_lost.get(),
                "guest-swaps": s.swaps.get(),
            })
        })
        .collect();
    let config = d.config();
    let agents: Vec<Value> = config
        .agents
        .iter()
        .map(|a| {
            let c = a.guest.as_ref().map(|_| guest_counters(&a.name));
            json!({
                "name": a.name,
                "domain": a.served_domain(),
                "kind": if a.native.is_some() { "native" } else { "guest" },
                "guest": a.guest.as_ref().or(a.native.as_ref()),
                "poll-interval": a.poll_interval.map(|i| i.as_secs_f64()),
                "pipeline": a.pipeline,
                "health": c.as_ref().map_or("ok", |c| health(false, c)),
                "counters": c,
            })
        })
        .collect();
    let notifier = &d.parts().notifier;
    let body = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "uptime": ui.started.elapsed().as_secs(),
        "rss": rss_bytes(),
        "cluster": config.daemon.cluster,
        "hostname": crate::util::hostname(),
        "pipelines": pipelines,
        "agents": agents,
        "reloads": d.reloads(),
        "sinks": d.sinks().statuses(),
        "kept-queues": d.sinks().kept_queues(),
        "store": d.parts().store.usage(),
        "notify": {
            "thresholds": notifier.threshold_count(),
            "tracked-instances": notifier.tracked_instances(),
            "subscribers": notifier.subscriber_names(),
        },
    });
    axum::Json(body).into_response()
}

/// This process's resident set, bytes (`/proc/self/statm`'s second field).
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(4096) as u64)
}

/// Children of a level looked into for the metrics they hold (`below`): a host's components
/// (CPUs, devices, processes) rarely exceed this, and a cluster's hosts need not all be read
/// to list a cluster's metrics.
const BELOW_SCAN: usize = 256;

/// A level of the store: its children (those containing `filter`, and holding `metric` when
/// given; at most `limit`, sorted), how many there are, and the metrics held here (`here`) or
/// at children (`below`: how many of the first [`BELOW_SCAN`] hold it).
async fn store(State(ui): State<Arc<Ui>>, Query(q): Query<ListParams>) -> Response {
    let store = ui.daemon.parts().store.clone();
    let result = tokio::task::spawn_blocking(move || {
        let path: Vec<&str> = q.path.split(':').filter(|s| !s.is_empty()).collect();
        let mut children = store.list_children(&path);
        let total = children.len();
        children.retain(|c| q.matches(c));
        children.sort_unstable();
        if !q.metric.is_empty() {
            children.retain(|c| {
                let mut p = path.clone();
                p.push(c);
                store.list_metrics(&p).contains(&q.metric)
            });
        }
        let matching = children.len();
        let mut metrics: BTreeMap<String, (bool, usize)> = BTreeMap::new();
        for m in store.list_metrics(&path) {
            metrics.entry(m).or_default().0 = true;
        }
        for c in children.iter().take(BELOW_SCAN) {
            let mut p = path.clone();
            p.push(c);
            for m in store.list_metrics(&p) {
                metrics.entry(m).or_default().1 += 1;
            }
        }
        children.truncate(q.limit());
        let metrics: Vec<Value> = metrics
            .into_iter()
            .map(|(name, (here, below))| json!({"name": name, "here": here, "below": below}))
            .collect();
        json!({
            "path": path,
            "children": children,
            "total": total,
            "matching": matching,
            "metrics": metrics,
        })
    })
    .await;
    match result {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// The process table: one pass over /proc (stat: CPU, memory, state), CPU % since the
/// previous pass, sorted by `cpu` (default) or `mem`, at most `limit` rows.
async fn ps(State(ui): State<Arc<Ui>>, Query(q): Query<ListParams>) -> Response {
    let u = ui.clone();
    let result = tokio::task::spawn_blocking(move || -> anyhow::Result<Value> {
        let fields = Fields::CPU | Fields::MEM | Fields::STATE;
        let mut reader = ProcReader::new();
        let read = |reader: &mut ProcReader| -> anyhow::Result<(Snapshot, Instant)> {
            let mut snap = Snapshot::default();
            reader.read_into(&mut snap, fields, false, Scope::All)?;
            Ok((snap, Instant::now()))
        };
        let mut last = crate::util::lock(&u.procs);
        let (prev, prev_at) = match last.take() {
            Some((s, at)) if at.elapsed() <= CPU_BASELINE_MAX_AGE => (s, at),
            _ => {
                let first = read(&mut reader)?;
                std::thread::sleep(CPU_SAMPLE);
                first
            }
        };
        let (snap, at) = read(&mut reader)?;
        let secs = at.duration_since(prev_at).as_secs_f64().max(1e-3);
        let before: std::collections::HashMap<(u32, u64), u64> = prev
            .procs
            .iter()
            .map(|p| ((p.pid, p.stat.starttime), p.stat.utime + p.stat.stime))
            .collect();
        let mut rows: Vec<(f64, u64, Value)> = snap
            .procs
            .iter()
            .filter(|p| q.matches(p.stat.comm.as_str()) || q.matches(&p.pid.to_string()))
            .map(|p| {
                let ticks = p.stat.utime + p.stat.stime;
                let cpu = before
                    .get(&(p.pid, p.stat.starttime))
                    .map(|b| snap.ticks_to_secs(ticks.saturating_sub(*b)) / secs * 100.0)
                    .unwrap_or(0.0);
                let rss = snap.rss_bytes(&p.stat);
                let row = json!({
                    "pid": p.pid,
                    "ppid": p.stat.ppid,
                    "comm": p.stat.comm.as_str(),
                    "state": (p.stat.state as char).to_string(),
                    "threads": p.stat.num_threads,
                    "cpu": (cpu * 10.0).round() / 10.0,
                    "cpu-time": snap.ticks_to_secs(ticks),
                    "rss": rss,
                    "vsize": p.stat.vsize,
                });
                (cpu, rss, row)
            })
            .collect();
        let total = snap.procs.len();
        let matching = rows.len();
        if q.sort == "mem" {
            rows.sort_by_key(|r| std::cmp::Reverse(r.1));
        } else {
            rows.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        }
        rows.truncate(q.limit());
        *last = Some((snap, at));
        Ok(json!({
            "interval": secs,
            "total": total,
            "matching": matching,
            "sort": if q.sort == "mem" { "mem" } else { "cpu" },
            "procs": rows.into_iter().map(|r| r.2).collect::<Vec<_>>(),
        }))
    })
    .await;
    match result {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// Thresholds of every subscriber whose metric, instance or owner contains `filter`.
async fn thresholds(State(ui): State<Arc<Ui>>, Query(q): Query<ListParams>) -> Response {
    let notifier = &ui.daemon.parts().notifier;
    let mut all = Vec::new();
    for owner in notifier.subscriber_names() {
        all.extend(notifier.list_owner(&owner).into_iter().filter(|t| {
            q.matches(&t.metric)
                || q.matches(&t.owner)
                || t.instance.as_deref().is_some_and(|i| q.matches(i))
        }));
    }
    let matching = all.len();
    all.sort_by(|a, b| (&a.metric, a.handle.0).cmp(&(&b.metric, b.handle.0)));
    all.truncate(q.limit());
    axum::Json(json!({
        "total": notifier.threshold_count(),
        "matching": matching,
        "thresholds": all,
    }))
    .into_response()
}

async fn recent(State(ui): State<Arc<Ui>>) -> Response {
    let recent = crate::util::lock(&ui.tap.recent);
    let items: Vec<Value> = recent
        .iter()
        .filter_map(|t| serde_json::from_str(t).ok())
        .collect();
    axum::Json(json!({ "notifications": items })).into_response()
}

/// Every notification as it fires. A page too slow to read them gets `dropped` with the
/// exact count it missed.
async fn stream(State(ui): State<Arc<Ui>>) -> Response {
    let rx = ui.tap.tx.subscribe();
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        let ev = match rx.recv().await {
            Ok(text) => SseEvent::default().event("notification").data(&*text),
            Err(broadcast::error::RecvError::Lagged(n)) => SseEvent::default()
                .event("dropped")
                .data(json!({ "count": n }).to_string()),
            Err(broadcast::error::RecvError::Closed) => return None,
        };
        Some((Ok::<_, Infallible>(ev), rx))
    });
    super::live_sse(events)
}
