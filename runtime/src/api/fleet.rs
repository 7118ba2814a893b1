//! `GET /api/fleet`: the fleet this daemon follows, at a glance — the same view as
//! `wasmon fleet status --json`, read from the fleet's buckets through the daemon's own
//! connection, plus whether that connection is up and its task's restarts and failure. Owns the route; the view is `fleet`'s.
//! Without `[fleet]` it answers `{"enabled": false}` (a 200: the live view asks on every
//! page, and a 404 there is an error in every browser's console).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::daemon::Daemon;

pub async fn status(State(d): State<Arc<Daemon>>) -> Response {
    let Some(fleet) = d.fleet().cloned() else {
        return Json(json!({"enabled": false, "error": "this daemon follows no fleet ([fleet])"}))
            .into_response();
    };
    let (status, error) = match fleet.status().await {
        Ok(s) => (Some(s), None),
        Err(e) => (None, Some(format!("{e:#}"))),
    };
    Json(json!({
        "enabled": true,
        "fleet": fleet.config().name,
        "node": fleet.node(),
        "groups": fleet.config().groups,
        "connected": fleet.connected(),
        "task": fleet.task(),
        "status": status,
        "error": error,
    }))
    .into_response()
}
