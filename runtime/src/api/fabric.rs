//! HTTP API of the fabric agent (`[fabric]`). Owns the routes under `/api/fabric/`; all
//! semantics are `fabric`'s. Without `[fabric] enabled` every route answers 404.
//!
//! | method + path | what |
//! |---|---|
//! | `GET /api/fabric/status` | `{"agent": this agent, "agents": [...]}`: every agent with a lease: parent, epoch, epoch time and lag (ms), owned nodes and ports, missing ports and nodes, lease age |
//! | `GET /api/fabric/owner/{node}` | who monitors a node: `{"node","agent","hops","revision","alive"}`; 404 if nobody |
//! | `GET /api/fabric/histogram/{counter}[?epoch=N]` | the rate histogram of a counter over this agent's subtree (the master: the fabric), merged from every agent: `{"agents","missing","epoch","histogram"}`; with `&text=1` a text histogram |
//! | `POST /api/fabric/clear` | clear every counter in the subtree and start rates afresh |
//! | `POST /api/fabric/thresholds` | body `{"traps":{COUNTER:N},"change":{COUNTER:N}}`: new trap and change thresholds in the subtree |
//! | `GET /api/fabric/traps` | the latest traps this agent saw (the master: the fabric's) |

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::fabric::FabricHandle;
use crate::fabric::histogram::Histogram;
use crate::fabric::tree::{self, DEFAULT_COMMAND_TIMEOUT};
use crate::fabric::wire::Command;

type St = Option<Arc<FabricHandle>>;

/// The longest a status or owner query waits for the buckets (NATS may be restarting).
const BUCKET_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The fabric routes, merged into the daemon's router.
pub fn router(fabric: St) -> Router {
    Router::new()
        .route("/api/fabric/status", get(status))
        .route("/api/fabric/owner/{node}", get(owner))
        .route("/api/fabric/histogram/{counter}", get(histogram))
        .route("/api/fabric/clear", post(clear))
        .route("/api/fabric/thresholds", post(thresholds))
        .route("/api/fabric/traps", get(traps))
        .with_state(fabric)
}

use super::error::error as err;

// The error is the reply itself (axum's Response), built once on a refused request.
#[allow(clippy::result_large_err)]
fn handle(s: &St) -> Result<&Arc<FabricHandle>, Response> {
    s.as_ref().ok_or_else(|| {
        err(
            StatusCode::NOT_FOUND,
            "the fabric agent is not enabled ([fabric])",
        )
    })
}

// The error is the reply itself (axum's Response), built once on a refused request.
#[allow(clippy::result_large_err)]
fn buckets(h: &FabricHandle) -> Result<&crate::fabric::ownership::Buckets, Response> {
    h.buckets()
        .ok_or_else(|| err(StatusCode::SERVICE_UNAVAILABLE, "not connected to NATS yet"))
}

/// The agent and its buckets, or the reply saying which is missing.
#[allow(clippy::result_large_err)]
fn connected(s: &St) -> Result<(&Arc<FabricHandle>, &crate::fabric::ownership::Buckets), Response> {
    let h = handle(s)?;
    Ok((h, buckets(h)?))
}

async fn status(State(s): State<St>) -> Response {
    let (h, b) = match connected(&s) {
        Ok(hb) => hb,
        Err(r) => return r,
    };
    match tokio::time::timeout(BUCKET_WAIT, tree::status(b))
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the lease bucket did not answer in time")))
    {
        Ok(agents) => Json(json!({
            "agent": h.me,
            "fabric": h.cfg.name,
            "bytes-up": h.bytes_up.load(std::sync::atomic::Ordering::Relaxed),
            "messages-up": h.msgs_up.load(std::sync::atomic::Ordering::Relaxed),
            "agents": agents,
        }))
        .into_response(),
        Err(e) => err(StatusCode::BAD_GATEWAY, format!("{e:#}")),
    }
}

async fn owner(State(s): State<St>, Path(node): Path<String>) -> Response {
    let (_, b) = match connected(&s) {
        Ok(hb) => hb,
        Err(r) => return r,
    };
    match tokio::time::timeout(BUCKET_WAIT, tree::owner(b, &node))
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the owner bucket did not answer in time")))
    {
        Ok(Some((o, revision))) => {
            let alive = matches!(b.leases.get(&o.agent).await, Ok(Some(_)));
            Json(json!({"node": node, "agent": o.agent, "hops": o.hops, "revision": revision, "alive": alive}))
                .into_response()
        }
        Ok(None) => err(StatusCode::NOT_FOUND, format!("nobody owns node {node:?}")),
        Err(e) => err(StatusCode::BAD_GATEWAY, format!("{e:#}")),
    }
}

#[derive(Deserialize)]
struct HistQuery {
    epoch: Option<u64>,
    #[serde(default)]
    text: Option<String>,
}

async fn run(h: &FabricHandle, cmd: Command) -> Result<crate::fabric::wire::Reply, Response> {
    let client = h
        .client()
        .ok_or_else(|| err(StatusCode::SERVICE_UNAVAILABLE, "not connected to NATS yet"))?;
    tree::command(client, &h.cfg.name, &h.me, cmd, DEFAULT_COMMAND_TIMEOUT)
        .await
        .map_err(|e| err(StatusCode::BAD_GATEWAY, format!("{e:#}")))
}

async fn histogram(
    State(s): State<St>,
    Path(counter): Path<String>,
    Query(q): Query<HistQuery>,
) -> Response {
    let h = match handle(&s) {
        Ok(h) => h,
        Err(r) => return r,
    };
    if let Some(schema) = h.schema()
        && crate::fabric::counters::find(schema, &counter).is_none()
    {
        let known: Vec<&str> = schema.iter().map(|c| c.name).collect();
        return err(
            StatusCode::NOT_FOUND,
            format!("no counter {counter:?} (known: {})", known.join(", ")),
        );
    }
    let reply = match run(
        h,
        Command::Histogram {
            counter: counter.clone(),
            epoch: q.epoch,
        },
    )
    .await
    {
        Ok(r) => r,
        Err(r) => return r,
    };
    if q.text.is_some() {
        let unit = h
            .schema()
            .and_then(|s| crate::fabric::counters::find(s, &counter).map(|i| s[i].unit()))
            .unwrap_or("");
        let body = match reply.histogram.as_ref().map(Histogram::from_wire) {
            Some(Ok(hist)) => format!(
                "{counter}, epoch {}, {} agents{}\n{}",
                reply.epoch.unwrap_or(0),
                reply.agents.len(),
                reply.missing_note(),
                hist.render(unit)
            ),
            Some(Err(e)) => e,
            None => "no histogram yet\n".into(),
        };
        return body.into_response();
    }
    Json(reply).into_response()
}

async fn clear(State(s): State<St>) -> Response {
    let h = match handle(&s) {
        Ok(h) => h,
        Err(r) => return r,
    };
    match run(h, Command::Clear).await {
        Ok(r) => Json(r).into_response(),
        Err(r) => r,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ThresholdBody {
    #[serde(default)]
    traps: BTreeMap<String, u64>,
    #[serde(default)]
    change: BTreeMap<String, u64>,
}

async fn thresholds(State(s): State<St>, body: axum::body::Bytes) -> Response {
    let h = match handle(&s) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let b: ThresholdBody = match serde_json::from_slice(&body) {
        Ok(b) => b,
        Err(e) => return err(StatusCode::UNPROCESSABLE_ENTITY, format!("bad body: {e}")),
    };
    match run(
        h,
        Command::SetThresholds {
            traps: b.traps,
            change: b.change,
        },
    )
    .await
    {
        Ok(r) if !r.errors.is_empty() => (StatusCode::BAD_REQUEST, Json(r)).into_response(),
        Ok(r) => Json(r).into_response(),
        Err(r) => r,
    }
}

async fn traps(State(s): State<St>) -> Response {
    match handle(&s) {
        Ok(h) => Json(h.recent_traps()).into_response(),
        Err(r) => r,
    }
}
