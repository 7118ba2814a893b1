//! The namespace over HTTP, for `wasmon ns` / `wasmon fetch` and other clients. Every route
//! answers 200 with a result per item; an item that failed carries PCP's message and code:
//!
//! - `GET /api/ns/lookup?name=N[&name=N...]` → `[{name, pmid} | {name, error, code}]`
//! - `GET /api/ns/name?pmid=44.1.0[&pmid=...]` → `[{pmid, names} | {pmid, error, code}]`
//! - `GET /api/ns/children?name=N` (empty: the root) → `{name, children: [{name, leaf}]}`
//! - `GET /api/ns/traverse?prefix=P` → `{names: [...], failed: [{name, error, code}]}`
//! - `GET /api/fetch?name=N[&name=...]` → `[{name, pmid, semantics, units, values: [[inst, v]]}]`

use std::sync::Arc;

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::daemon::Daemon;
use crate::namespace::{NsError, Pmid};

pub fn routes() -> Router<Arc<Daemon>> {
    Router::new()
        .route("/api/ns/lookup", get(lookup))
        .route("/api/ns/name", get(name))
        .route("/api/ns/children", get(children))
        .route("/api/ns/traverse", get(traverse))
        .route("/api/fetch", get(fetch))
}

/// Values of `key` in a query string (repeatable).
fn params(query: &Option<String>, key: &str) -> Vec<String> {
    let q = query.as_deref().unwrap_or("");
    form_urlencoded::parse(q.as_bytes())
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
        .collect()
}

fn err(e: &NsError) -> Value {
    json!({"error": e.to_string(), "code": e.code()})
}

/// Agent calls are synchronous guest calls: run them off the async workers.
async fn blocking<F: FnOnce(&Daemon) -> Value + Send + 'static>(d: Arc<Daemon>, f: F) -> Response {
    match tokio::task::spawn_blocking(move || f(&d)).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => super::error::error(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// The JSON answers, shared by the routes and by `wasmon ns` in offline mode.
pub mod answers {
    use super::*;
    use crate::daemon::agents::AgentSet;

    fn with_item(e: &NsError, key: &str, item: &str) -> Value {
        let mut v = err(e);
        v[key] = item.into();
        v
    }

    pub fn lookup(set: &AgentSet, names: &[String]) -> Value {
        names
            .iter()
            .map(|n| match set.lookup(n) {
                Ok(id) => json!({"name": n, "pmid": id.to_string()}),
                Err(e) => with_item(&e, "name", n),
            })
            .collect()
    }

    pub fn name(set: &AgentSet, ids: &[String]) -> Value {
        ids.iter()
            .map(|s| {
                match s
                    .parse::<Pmid>()
                    .map_err(|_| NsError::UnknownPmid)
                    .and_then(|id| set.names_of(id))
                {
                    Ok(names) => json!({"pmid": s, "names": names}),
                    Err(e) => with_item(&e, "pmid", s),
                }
            })
            .collect()
    }

    pub fn children(set: &AgentSet, name: &str) -> Value {
        match set.children(name) {
            Ok(c) => json!({"name": name, "children": c}),
            Err(e) => with_item(&e, "name", name),
        }
    }

    pub fn traverse(set: &AgentSet, prefix: &str) -> Value {
        match set.traverse(prefix) {
            Ok(t) => json!({
                "names": t.names,
                "failed": t.failed.iter().map(|(n, e)| with_item(e, "name", n)).collect::<Vec<_>>(),
            }),
            Err(e) => with_item(&e, "name", prefix),
        }
    }

    pub fn fetch(set: &AgentSet, names: &[String]) -> Value {
        serde_json::to_value(set.fetch(names)).unwrap_or(Value::Null)
    }
}

async fn lookup(State(d): State<Arc<Daemon>>, RawQuery(q): RawQuery) -> Response {
    let names = params(&q, "name");
    blocking(d, move |d| answers::lookup(d.agents(), &names)).await
}

async fn name(State(d): State<Arc<Daemon>>, RawQuery(q): RawQuery) -> Response {
    let ids = params(&q, "pmid");
    blocking(d, move |d| answers::name(d.agents(), &ids)).await
}

async fn children(State(d): State<Arc<Daemon>>, RawQuery(q): RawQuery) -> Response {
    let name = params(&q, "name").pop().unwrap_or_default();
    blocking(d, move |d| answers::children(d.agents(), &name)).await
}

async fn traverse(State(d): State<Arc<Daemon>>, RawQuery(q): RawQuery) -> Response {
    let prefix = params(&q, "prefix").pop().unwrap_or_default();
    blocking(d, move |d| answers::traverse(d.agents(), &prefix)).await
}

async fn fetch(State(d): State<Arc<Daemon>>, RawQuery(q): RawQuery) -> Response {
    let names = params(&q, "name");
    blocking(d, move |d| answers::fetch(d.agents(), &names)).await
}
