//! `api` owns the HTTP surface of the daemon. Routes (JSON unless said otherwise):
//!
//! - `POST /api/admin/reload[?release-quarantine=true]`: reload config and guests now (admin);
//!   returns the outcome per pipeline (200 when everything applied, 422 when something was
//!   refused and the old version kept).
//! - `GET  /api/config`: the config the daemon runs (admin).
//! - `GET  /api/pipelines`: each pipeline's stages (guest, component hash, quarantine) and
//!   counters.
//! - `POST /api/pipelines/{name}/samples`: JSON lines, one sample per line (the shape of
//!   `wasmon transform`); valid lines are accepted even when others are not, and each
//!   rejected line is named by number (400).
//! - `POST /api/pipelines/{name}/flush`: flush the pipeline now.
//! - `GET  /api/sinks`: forwarding sinks: queue, delivery counters, kept queues ([`sinks`]);
//!   `DELETE /api/sinks/{name}/queue` deletes a kept queue (admin).
//! - `POST /api/pipelines/{name}/prometheus`, `/api/pipelines/{name}/otlp`, and
//!   `/api/v1/write`, `/v1/metrics` into the pipelines `[api]` names: Prometheus remote write
//!   and OTLP/HTTP metrics ([`receive`]).
//! - `GET  /metrics`: Prometheus text exposition of wasmon's own counters and the store's
//!   live series ([`exposition`]).
//! - `/api/ns/...`, `/api/fetch`: the metric namespace and its agents ([`ns`]).
//! - `/api/write`, `/api/query`, `/api/free`, `/api/healthcheck`, `/api/debug`:
//!   cc-metric-store's API over the buffer store ([`ccms`]).
//! - `/api/notify/...`: thresholds, current values and notification streams ([`notify`]).
//! - `/api/fabric/...`: the fabric agent: status, owners, merged histograms, commands ([`fabric`]).
//! - `GET /`: the live view, and `/api/ui/...`, the JSON it reads ([`ui`]).
//!
//! Every route but `/api/healthcheck` and the live view's page sits behind [`auth`]; every
//! error reply is an [`error::ApiError`]. Handlers translate HTTP to calls on the daemon's
//! parts; they hold no state of their own.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde_json::json;

use crate::daemon::Daemon;

pub mod auth;
pub mod ccms;
pub mod error;
pub mod exposition;
pub mod fabric;
pub mod fleet;
pub mod notify;
pub mod ns;
pub mod receive;
pub mod serve;
pub mod sinks;
pub mod tls;
pub mod ui;
use crate::sample::{Line, NameBudget, parse_line_within};

/// Every route of the daemon. With `[api] jwt-public-key` set, every one but
/// `/api/healthcheck` needs a valid Bearer token (reload, free, debug and deleting another
/// subscriber's thresholds also an admin role); bodies are capped by `[store]
/// max-body-size` on every route (413 beyond).
pub fn router(daemon: Arc<Daemon>) -> Result<Router, auth::AuthError> {
    let ccms = Arc::new(ccms::CcmsState::new(
        daemon.parts().store.clone(),
        daemon.config().api,
    )?);
    let limit = ccms.store.config().max_body_size;
    Ok(Router::new()
        .route("/api/admin/reload", post(reload))
        .route("/api/config", get(config))
        .route("/api/pipelines", get(pipelines))
        .route("/api/pipelines/{name}/samples", post(post_samples))
        .route("/api/pipelines/{name}/flush", post(flush))
        .route("/api/sinks", get(sinks::list))
        .route("/api/fleet", get(fleet::status))
        .route(
            "/api/sinks/{name}/queue",
            axum::routing::delete(sinks::delete_queue),
        )
        .merge(ns::routes())
        .with_state(daemon.clone())
        .merge(receive::routes(daemon.clone()))
        .merge(exposition::routes(daemon.clone()))
        .merge(ccms::routes(ccms.clone()))
        .merge(notify::router(daemon.parts().notifier.clone()))
        .merge(fabric::router(daemon.parts().fabric.clone()))
        .layer(middleware::from_fn_with_state(
            ccms.auth.clone(),
            auth::authenticate,
        ))
        .merge(ccms::open_routes(ccms.clone()))
        // The live view: its page and scripts are open (a browser cannot send a token with a
        // navigation), the data it reads (`/api/ui/...`) is behind the same check.
        .merge(ui::router(daemon.clone(), ccms.auth.clone()))
        .layer(DefaultBodyLimit::max(limit)))
}

/// `?release-quarantine=true`: quarantined guests are let out as well.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ReloadParams {
    #[serde(default)]
    release_quarantine: bool,
}

async fn reload(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<auth::Caller>,
    Query(q): Query<ReloadParams>,
) -> Response {
    if let Err(r) = caller.require_admin() {
        return r;
    }
    let outcome = d.reload(q.release_quarantine).await;
    outcome.log();
    let status = if outcome.ok() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    (status, axum::Json(outcome)).into_response()
}

/// The config the daemon runs now: after a reload, what was applied (a refused pipeline or
/// agent shows its running version, a setting read at start its running value). Admin only:
/// grants may carry environment values.
async fn config(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<auth::Caller>,
) -> Response {
    if let Err(r) = caller.require_admin() {
        return r;
    }
    axum::Json(d.config()).into_response()
}

async fn pipelines(State(d): State<Arc<Daemon>>) -> Response {
    let list: Vec<_> = d
        .pipelines()
        .iter()
        .map(|p| {
            let s = p.stats();
            json!({
                "name": p.name(),
                "stages": p.stages(),
                "samples-in": s.samples_in.get(),
                "samples-out": s.samples_out.get(),
                "samples-lost": s.samples_lost.get(),
                "guest-swaps": s.swaps.get(),
            })
        })
        .collect();
    axum::Json(list).into_response()
}

/// A server-sent event stream as every stream of this API is served: a `: live` comment at
/// once, then `events`, with a keep-alive comment every 15 s. Without the first comment a
/// client that waits for a body byte (Firefox's `fetch()` resolves only then, not at the
/// headers) saw the stream open only at the first event or keep-alive.
pub(crate) fn live_sse<S>(events: S) -> Response
where
    S: futures_util::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>
        + Send
        + 'static,
{
    use axum::response::sse::{Event, KeepAlive, Sse};
    use futures_util::StreamExt;
    let opened = futures_util::stream::once(async { Ok(Event::default().comment("live")) });
    Sse::new(opened.chain(events))
        .keep_alive(KeepAlive::new().interval(std::time::Duration::from_secs(15)))
        .into_response()
}

fn no_pipeline(name: &str) -> Response {
    error::error(StatusCode::NOT_FOUND, format!("no pipeline named {name:?}"))
}

/// Bad lines of one request named in its answer.
const MAX_ERRORS_SHOWN: usize = 100;

async fn post_samples(
    State(d): State<Arc<Daemon>>,
    Path(name): Path<String>,
    body: String,
) -> Response {
    let Some(pipeline) = d.pipeline(&name) else {
        return no_pipeline(&name);
    };
    let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
    let mut batch = Vec::new();
    let mut errors = Vec::new();
    let mut budget = NameBudget::per_request();
    for (i, line) in body.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line_within(line, now, &mut budget) {
            Ok(Line::Sample(s)) => batch.push(s),
            Ok(Line::Flush) => errors.push(format!(
                "line {}: flush is not a sample (use /flush)",
                i + 1
            )),
            Err(e) => errors.push(format!("line {}: {e}", i + 1)),
        }
    }
    // Every bad line is counted, the first ones named: the answer stays small.
    if errors.len() > MAX_ERRORS_SHOWN {
        let more = errors.len() - MAX_ERRORS_SHOWN;
        errors.truncate(MAX_ERRORS_SHOWN);
        errors.push(format!("and {more} more bad lines"));
    }
    let accepted = batch.len();
    // Answered once the batch went through the chain and its output reached the sinks (a
    // forwarding sink's queue file among them), so a 200 means the samples survive a SIGKILL.
    // `send_acked` blocks while the pipeline's queue is full: that is the backpressure we
    // want, but not on an async worker thread.
    let sent = tokio::task::spawn_blocking(move || pipeline.send_acked(batch)).await;
    if !matches!(sent, Ok(Ok(()))) {
        return no_pipeline(&name);
    }
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    (
        status,
        axum::Json(json!({"accepted": accepted, "errors": errors})),
    )
        .into_response()
}

async fn flush(State(d): State<Arc<Daemon>>, Path(name): Path<String>) -> Response {
    let Some(pipeline) = d.pipeline(&name) else {
        return no_pipeline(&name);
    };
    match tokio::task::spawn_blocking(move || pipeline.flush()).await {
        Ok(Ok(())) => axum::Json(json!({"flushed": name})).into_response(),
        _ => no_pipeline(&name),
    }
}
