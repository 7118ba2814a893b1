//! `api` owns the HTTP surface of the daemon. Routes (JSON unless said otherwise):
//!
//! - `POST /api/admin/reload`: reload config and guests now; returns the outcome per pipeline
//!   (200 when everything applied, 422 when something was refused and the old version kept).
//! - `GET  /api/pipelines`: each pipeline's stages (guest, component hash, quarantine) and
//!   counters.
//! - `POST /api/pipelines/{name}/samples`: JSON lines, one sample per line (the shape of
//!   `wasmon transform`); valid lines are accepted even when others are not, and each
//!   rejected line is named by number (400).
//! - `POST /api/pipelines/{name}/flush`: flush the pipeline now.
//! - `GET  /metrics`: Prometheus text exposition of wasmon's own counters.
//! - `/api/ns/...`, `/api/fetch`: the metric namespace and its agents ([`ns`]).
//! - `/api/write`, `/api/query`, `/api/free`, `/api/healthcheck`, `/api/debug`:
//!   cc-metric-store's API over the buffer store ([`ccms`]).
//! - `/api/notify/...`: thresholds, current values and notification streams ([`notify`]).
//! - `GET /`: the live view, and `/api/ui/...`, the JSON it reads ([`ui`]).
//!
//! Handlers translate HTTP to calls on the daemon's parts; they hold no state of their own.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::daemon::Daemon;

pub mod ccms;
pub mod lineproto;
pub mod notify;
pub mod ns;
pub mod ui;
use crate::pipeline::{Line, parse_line};

pub fn router(daemon: Arc<Daemon>) -> Router {
    Router::new()
        .route("/api/admin/reload", post(reload))
        .route("/api/pipelines", get(pipelines))
        .route("/api/pipelines/{name}/samples", post(post_samples))
        .route("/api/pipelines/{name}/flush", post(flush))
        .route("/metrics", get(metrics))
        .merge(ns::routes())
        .with_state(daemon.clone())
        .merge(ccms::router(daemon.parts().ccms.clone()))
        .merge(notify::router(daemon.parts().notifier.clone()))
        .merge(ui::router(daemon.clone()))
}

async fn reload(State(d): State<Arc<Daemon>>) -> Response {
    let outcome = d.reload().await;
    outcome.log();
    let status = if outcome.ok() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    (status, axum::Json(outcome)).into_response()
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

fn no_pipeline(name: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"error": format!("no pipeline named {name:?}")})),
    )
        .into_response()
}

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
    for (i, line) in body.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line, now) {
            Ok(Line::Sample(s)) => batch.push(s),
            Ok(Line::Flush) => errors.push(format!(
                "line {}: flush is not a sample (use /flush)",
                i + 1
            )),
            Err(e) => errors.push(format!("line {}: {e}", i + 1)),
        }
    }
    let accepted = batch.len();
    // `send` blocks while the pipeline's queue is full: that is the backpressure we want, but
    // not on an async worker thread.
    let sent = tokio::task::spawn_blocking(move || pipeline.send(batch)).await;
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

async fn metrics(State(d): State<Arc<Daemon>>) -> Response {
    let mut out = String::new();
    crate::telemetry::registry().render(&mut out);
    out.push_str(&ccms::render_prometheus(&d.parts().store, "wasmon_"));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}
