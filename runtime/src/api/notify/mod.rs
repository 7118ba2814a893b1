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
//! Errors are the API's error body ([`super::error`]: `{"status": "...", "error": "..."}`) with 400/403/404/409 (422 for a body that is not valid JSON of
//! the right shape).
//!
//! Delivery is at most once: a subscriber's queue is bounded (`[notify] queue-capacity`); what
//! does not fit is dropped and reported by count in the stream; events already taken by a
//! stream whose client disconnects are lost.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::response::sse::Event as SseEvent;
use axum::routing::get;
use axum::{Extension, Json, Router};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use super::auth::Caller;
use super::error::ApiError;
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

impl From<NotifyError> for ApiError {
    fn from(e: NotifyError) -> Self {
        let status = match e {
            NotifyError::UnknownHandle(_) => StatusCode::NOT_FOUND,
            NotifyError::NotOwner { .. } => StatusCode::FORBIDDEN,
            NotifyError::Invalid(_) => StatusCode::BAD_REQUEST,
            NotifyError::HandlesExhausted => StatusCode::SERVICE_UNAVAILABLE,
            NotifyError::AlreadyWatched(_) => StatusCode::CONFLICT,
        };
        ApiError::new(status, e.to_string())
    }
}

fn bad(msg: &str) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, msg)
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
        (None, None) => Ok(Json(n.list_all())),
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

/// The subscriber a caller may delete as: anyone's for an admin (the one named, or any with
/// none named), otherwise only the token's own subject.
fn deleting_as(caller: &Caller, named: Option<String>) -> Result<Option<String>, ApiError> {
    if caller.admin {
        return Ok(named);
    }
    match (&caller.subject, named) {
        (Some(me), None) => Ok(Some(me.clone())),
        (Some(me), Some(s)) if *me == s => Ok(Some(s)),
        _ => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "deleting another subscriber's thresholds needs an admin role",
        )),
    }
}

async fn delete_one(
    State(n): State<Arc<Notifier>>,
    Extension(caller): Extension<Caller>,
    Path(h): Path<u32>,
    Query(q): Query<ResourceQuery>,
) -> Result<Json<ThresholdInfo>, ApiError> {
    let owner = deleting_as(&caller, q.subscriber)?;
    Ok(Json(n.remove(Handle(h), owner.as_deref())?))
}

#[derive(Debug, Serialize, Deserialize)]
/// Answer of deleting every threshold of a subscriber.
pub struct Deleted {
    pub deleted: Vec<ThresholdInfo>,
}

async fn delete_all(
    State(n): State<Arc<Notifier>>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<ResourceQuery>,
) -> Result<Json<Deleted>, ApiError> {
    let s = q.subscriber.ok_or_else(|| bad("give subscriber=S"))?;
    let s = deleting_as(&caller, Some(s))?.expect("named");
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
        let why = if n.list(&metric, Some(&instance)).is_empty() {
            "no threshold covers it: values are tracked for the instances thresholds cover \
             (add one, on this instance or on every instance of the metric)"
                .to_string()
        } else {
            format!(
                "a threshold covers it but no sample of it has reached the notifier since: \
                 is {metric} collected (for instance {instance}) and sent to a pipeline with \
                 the \"notify\" sink?"
            )
        };
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no value tracked for {metric}/{instance}: {why}"),
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
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, format!("no subscriber {name:?}")))?;
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
    Ok(super::live_sse(stream))
}

#[cfg(test)]
mod tests;
