//! cc-metric-store's HTTP API over the buffer store, as an axum `Router`:
//! `POST /api/write` (line protocol), `GET|POST /api/query` (JSON), `POST /api/free`,
//! `GET /api/healthcheck`, `GET /api/debug` (behind [`super::auth`]). Bodies go into the
//! store through `ingest`, which the NATS consumers share.

pub mod query;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::auth::{Auth, AuthError, Caller, authenticate};
pub(crate) use super::error::error;
use crate::config::ApiConfig;
use crate::ingest::ingest;
use crate::store::Store;

/// Shared state of the API handlers.
pub struct CcmsState {
    pub store: Arc<Store>,
    pub config: ApiConfig,
    /// The authentication of `[api]`, shared with the daemon's other routes.
    pub auth: Arc<Auth>,
    /// Per sending queue (`NODE.SINK.QUEUE`), the highest record id stored: a wasmon sink sends
    /// one record at a time, oldest first, so an id at or below it is a re-send (a lost answer,
    /// a sender restarted within its commit interval) and is not stored again. A queue deleted
    /// and made anew has another QUEUE part, so its seqs starting at 1 again are not re-sends.
    batches: std::sync::Mutex<HashMap<String, u64>>,
    /// Batches recognised as re-sends and not stored again.
    pub duplicate_batches: Arc<crate::telemetry::Counter>,
}

/// Sending queues remembered; past this the map starts over (a re-send is then stored again,
/// which the store's slots absorb: the value is the same).
const MAX_SENDERS: usize = 100_000;

impl CcmsState {
    /// `true` when the batch `id` (`NODE.SINK.QUEUE.SEQ`) was stored already.
    fn seen(&self, id: Option<(&str, u64)>) -> bool {
        id.is_some_and(|(q, seq)| {
            crate::util::lock(&self.batches)
                .get(q)
                .is_some_and(|&hw| seq <= hw)
        })
    }

    fn stored(&self, id: Option<(&str, u64)>) {
        let Some((q, seq)) = id else { return };
        let mut b = crate::util::lock(&self.batches);
        if b.len() >= MAX_SENDERS && !b.contains_key(q) {
            b.clear();
        }
        let hw = b.entry(q.to_string()).or_insert(seq);
        *hw = (*hw).max(seq);
    }
}

/// The record id a wasmon sink sends (`NODE.SINK.QUEUE.SEQ`): the queue and the sequence number.
fn batch_id(headers: &axum::http::HeaderMap) -> Option<(&str, u64)> {
    let v = headers.get(crate::sink::BATCH_ID_HEADER)?.to_str().ok()?;
    let (queue, seq) = v.rsplit_once('.')?;
    Some((queue, seq.parse().ok()?))
}

/// A gzip body inflated, refused past `limit` bytes (a small body can inflate to gigabytes).
// The error is the reply itself (axum's Response), built once on a refused request.
#[allow(clippy::result_large_err)]
fn gunzip(body: &[u8], limit: usize) -> Result<Bytes, Response> {
    inflate(body, limit).map_err(|e| match e {
        crate::ingest::ReceiveError::TooLarge(m) => error(StatusCode::PAYLOAD_TOO_LARGE, m),
        e => error(StatusCode::BAD_REQUEST, e.to_string()),
    })
}

/// [`gunzip`] for the receivers: the same cap, the error typed.
pub(crate) fn inflate(body: &[u8], limit: usize) -> Result<Bytes, crate::ingest::ReceiveError> {
    use crate::ingest::ReceiveError;
    use std::io::Read;
    // Never more than the cap up front, whatever the ratio.
    let mut out = Vec::with_capacity((body.len() * 4).min(limit));
    let mut z = flate2::read::MultiGzDecoder::new(body).take(limit as u64 + 1);
    if let Err(e) = z.read_to_end(&mut out) {
        return Err(crate::ingest::pb::DecodeError::new(format!("gzip body: {e}")).into());
    }
    if out.len() > limit {
        return Err(ReceiveError::TooLarge(format!(
            "the gzip body inflates past [store] max-body-size ({limit} bytes)"
        )));
    }
    Ok(out.into())
}

impl CcmsState {
    pub fn new(store: Arc<Store>, config: ApiConfig) -> Result<CcmsState, AuthError> {
        let auth = Arc::new(Auth::new(&config)?);
        Ok(CcmsState {
            store,
            config,
            auth,
            batches: std::sync::Mutex::new(HashMap::new()),
            duplicate_batches: crate::telemetry::registry().counter(
                "wasmon_write_duplicate_batches_total",
                "Batches a wasmon sink sent again that /api/write had stored already.",
                &[],
            ),
        })
    }
}

/// The API routes alone (mount at the server root; paths start with `/api/`), with
/// authentication and the body limit: for a server of this API only. The daemon puts
/// [`routes`] and [`open_routes`] under its own authentication instead, with every other
/// route of its API. Trailing-slash variants are routed too, as cc-metric-store's clients use
/// both.
pub fn router(state: Arc<CcmsState>) -> Router {
    let limit = state.store.config().max_body_size;
    routes(state.clone())
        .layer(middleware::from_fn_with_state(
            state.auth.clone(),
            authenticate,
        ))
        .merge(open_routes(state))
        .layer(DefaultBodyLimit::max(limit))
}

/// Routes that need a token when a key is configured: write, query, free, debug.
pub fn routes(state: Arc<CcmsState>) -> Router {
    Router::new()
        .route("/api/write", post(write))
        .route("/api/write/", post(write))
        .route("/api/query", get(query::handle).post(query::handle))
        .route("/api/query/", get(query::handle).post(query::handle))
        .route("/api/free", post(free))
        .route("/api/free/", post(free))
        .route("/api/debug", get(debug).post(debug))
        .route("/api/debug/", get(debug).post(debug))
        .with_state(state)
}

/// Routes open to everyone: `/api/healthcheck`, which load balancers and service managers
/// probe without credentials. It says whether the daemon runs and whether a node's data is
/// fresh, nothing else.
pub fn open_routes(state: Arc<CcmsState>) -> Router {
    Router::new()
        .route("/api/healthcheck", get(healthcheck))
        .route("/api/healthcheck/", get(healthcheck))
        .with_state(state)
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Bodies above this size are parsed on the blocking pool so the runtime stays responsive.
const INLINE_BODY: usize = 256 << 10;

async fn write(
    State(st): State<Arc<CcmsState>>,
    Query(q): Query<HashMap<String, String>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let id = batch_id(&headers);
    if st.seen(id) {
        st.duplicate_batches.inc();
        return StatusCode::OK.into_response();
    }
    let body = match headers.get(header::CONTENT_ENCODING).map(|v| v.as_bytes()) {
        None | Some(b"identity") => body,
        Some(b"gzip") => match gunzip(&body, st.store.config().max_body_size) {
            Ok(b) => b,
            Err(r) => return r,
        },
        Some(other) => {
            return error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "Content-Encoding {:?}: only gzip is taken",
                    String::from_utf8_lossy(other)
                ),
            );
        }
    };
    let cluster = q.get("cluster").cloned();
    let now = now();
    let out = if body.len() <= INLINE_BODY {
        ingest(&st.store, &body, cluster.as_deref(), now)
    } else {
        let store = st.store.clone();
        match tokio::task::spawn_blocking(move || ingest(&store, &body, cluster.as_deref(), now))
            .await
        {
            Ok(o) => o,
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    };
    // Acknowledge only what is durable: wait for the group commit covering this body.
    if let Err(e) = st.store.wait_durable(out.wal_seq).await {
        return error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    }
    if out.errors.is_empty() {
        st.stored(id);
        return StatusCode::OK.into_response();
    }
    if let Some(e) = out.errors.iter().find(|e| e.line == 0) {
        return error(StatusCode::INTERNAL_SERVER_ERROR, e.reason.clone());
    }
    let shown: Vec<String> = out.errors.iter().take(20).map(|e| e.to_string()).collect();
    let more = out.errors.len().saturating_sub(shown.len());
    let mut msg = format!(
        "{} line(s) rejected, {} stored: {}",
        out.errors.len(),
        out.stored,
        shown.join("; ")
    );
    if more > 0 {
        msg.push_str(&format!("; and {more} more"));
    }
    tracing::debug!(%msg, "/api/write");
    error(StatusCode::BAD_REQUEST, msg)
}

async fn free(
    State(st): State<Arc<CcmsState>>,
    axum::Extension(caller): axum::Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
    body: Bytes,
) -> Response {
    if let Err(r) = caller.require_admin() {
        return r;
    }
    let Some(to) = q.get("to") else {
        return error(
            StatusCode::BAD_REQUEST,
            "'to' is a required query parameter",
        );
    };
    let Ok(to) = to.parse::<i64>() else {
        return error(StatusCode::BAD_REQUEST, "'to' must be an integer timestamp");
    };
    let selectors: Vec<Vec<String>> = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("body must be a list of selectors: {e}"),
            );
        }
    };
    let mut n = 0;
    for sel in &selectors {
        let path: Vec<&str> = sel.iter().map(String::as_str).collect();
        n += st.store.free(&path, to);
    }
    (StatusCode::OK, format!("buffers freed: {n}\n")).into_response()
}

async fn healthcheck(
    State(st): State<Arc<CcmsState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (cluster, node) = (q.get("cluster"), q.get("node"));
    let (Some(cluster), Some(node)) = (cluster, node) else {
        if cluster.is_some() || node.is_some() {
            return error(StatusCode::BAD_REQUEST, "'cluster' and 'node' go together");
        }
        // A task that cannot do its work (NATS ingest without a server, a fleet follower
        // restarting) makes the daemon degraded: a 503 naming it, not a silent 200.
        let failing = crate::supervise::failing();
        if !failing.is_empty() {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(serde_json::json!({"status": "degraded", "failing": failing})),
            )
                .into_response();
        }
        return axum::Json(serde_json::json!({"status": "ok"})).into_response();
    };
    match st.store.latest_timestamp(&[cluster, node]) {
        None => error(
            StatusCode::NOT_FOUND,
            format!("unknown node {cluster}/{node}"),
        ),
        Some(latest) => {
            let max_age = st.config.healthcheck_max_age.as_secs() as i64;
            let healthy = latest.is_some_and(|t| now() - t <= max_age);
            let code = if healthy {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            let status = if healthy { "healthy" } else { "unhealthy" };
            (
                code,
                axum::Json(serde_json::json!({"status": status, "latest": latest})),
            )
                .into_response()
        }
    }
}

async fn debug(
    State(st): State<Arc<CcmsState>>,
    axum::Extension(caller): axum::Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if let Err(r) = caller.require_admin() {
        return r;
    }
    let raw = q.get("selector").map(String::as_str).unwrap_or("");
    let path: Vec<&str> = if raw.is_empty() {
        Vec::new()
    } else {
        raw.split(':').collect()
    };
    match st.store.debug_dump(&path) {
        Ok(tree) => {
            let c = st.store.counters();
            let load =
                |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
            axum::Json(serde_json::json!({
                "usage": st.store.usage(),
                "counters": {
                    "samples-written": load(&c.samples_written),
                    "samples-rejected": load(&c.samples_rejected),
                    "buffers-freed": load(&c.buffers_freed),
                    "wal-records-replayed": load(&c.wal_records_replayed),
                    "wal-damage": load(&c.wal_damage),
                    "snapshot-damage": load(&c.snapshot_damage),
                    "snapshots-written": load(&c.snapshots_written),
                    "wal-fsyncs": st.store.wal_fsyncs(),
                },
                "tree": tree,
            }))
            .into_response()
        }
        Err(e) => error(StatusCode::BAD_REQUEST, e.to_string()),
    }
}

#[cfg(test)]
mod tests;
