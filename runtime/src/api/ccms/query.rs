//! `/api/query`: cc-metric-store's request/response JSON (field names as in its `api.go`),
//! selector construction from host/type/type-ids/subtype/subtype-ids, aggregation, stats,
//! scaling and front padding. NaN is serialised as `null`.

pub use crate::config::{MAX_QUERY_SERIES, MAX_QUERY_VALUES};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Deserializer, Serialize};

use super::{CcmsState, error};
use crate::store::{SelectorElement, Stats, Store};

fn yes() -> bool {
    true
}

/// The query request body.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ApiQueryRequest {
    pub cluster: String,
    #[serde(default)]
    pub queries: Vec<ApiQuery>,
    /// Metrics to query for every node of the cluster (the queries are echoed back).
    #[serde(default)]
    pub for_all_nodes: Option<Vec<String>>,
    pub from: i64,
    pub to: i64,
    #[serde(default = "yes")]
    pub with_stats: bool,
    #[serde(default = "yes")]
    pub with_data: bool,
    #[serde(default = "yes")]
    pub with_padding: bool,
}

/// One query of a request.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ApiQuery {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub typ: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
    pub metric: String,
    #[serde(alias = "hostname")]
    pub host: String,
    #[serde(default)]
    pub resolution: i64,
    #[serde(default, skip_serializing_if = "Ids::is_empty")]
    pub type_ids: Ids,
    #[serde(default, skip_serializing_if = "Ids::is_empty")]
    pub subtype_ids: Ids,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_by: Option<f64>,
    #[serde(rename = "aggreg", default)]
    pub aggregate: bool,
}

/// A query's type or subtype ids: strings or numbers (cc-backend sends strings, hand-written
/// queries often numbers), `null` for none.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(transparent)]
pub struct Ids(pub Vec<String>);

impl Ids {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::ops::Deref for Ids {
    type Target = [String];

    fn deref(&self) -> &[String] {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Ids {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ids, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Id {
            S(String),
            N(i64),
        }
        let v: Option<Vec<Id>> = Option::deserialize(d)?;
        Ok(Ids(v
            .unwrap_or_default()
            .into_iter()
            .map(|i| match i {
                Id::S(s) => s,
                Id::N(n) => n.to_string(),
            })
            .collect()))
    }
}

/// One result: data (NaN → null), actual range, step, stats, or an error.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiMetricData {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub data: Option<Vec<Option<f64>>>,
    pub from: i64,
    pub to: i64,
    pub resolution: i64,
    pub avg: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// The response: one list of results per query.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiQueryResponse {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub queries: Option<Vec<ApiQuery>>,
    pub results: Vec<Vec<ApiMetricData>>,
}

fn num(x: f64) -> Option<f64> {
    if x.is_finite() { Some(x) } else { None }
}

/// Selectors of one query, as cc-metric-store builds them: with `aggreg` (or no type) one
/// selector whose last elements are groups of ids; otherwise one selector per id pair.
fn selectors(cluster: &str, q: &ApiQuery) -> Vec<Vec<SelectorElement>> {
    let base = vec![
        SelectorElement::from(cluster),
        SelectorElement::from(q.host.as_str()),
    ];
    let group = |t: &str, ids: &[String]| -> SelectorElement {
        if ids.len() == 1 {
            SelectorElement::Name(format!("{t}{}", ids[0]))
        } else {
            SelectorElement::Group(ids.iter().map(|id| format!("{t}{id}")).collect())
        }
    };
    let Some(t) = q.typ.as_deref().filter(|t| *t != "node") else {
        return vec![base];
    };
    if q.aggregate {
        let mut s = base;
        s.push(group(t, &q.type_ids));
        if let Some(st) = &q.subtype {
            s.push(group(st, &q.subtype_ids));
        }
        return vec![s];
    }
    let mut out = Vec::new();
    for id in q.type_ids.iter() {
        let mut s = base.clone();
        s.push(SelectorElement::Name(format!("{t}{id}")));
        match &q.subtype {
            Some(st) => {
                for sid in q.subtype_ids.iter() {
                    let mut s2 = s.clone();
                    s2.push(SelectorElement::Name(format!("{st}{sid}")));
                    out.push(s2);
                }
            }
            None => out.push(s),
        }
    }
    out
}

/// Most nulls added in front of one result by `with-padding`.
const MAX_PAD: i64 = 1 << 20;

/// Why a request was refused before or while it ran.
#[derive(Debug, thiserror::Error)]
pub enum QueryRefused {
    #[error(
        "the query reads {0} series, more than the limit of {1} ([api] max-query-series); \
         split it, or aggregate with \"aggreg\": true"
    )]
    TooManySeries(usize, usize),
    #[error(
        "the query returns more than the limit of {0} values ([api] max-query-values); \
         ask for a shorter range, a coarser resolution, fewer series, or no padding"
    )]
    TooManyValues(usize),
}

impl ApiMetricData {
    fn error(e: String) -> ApiMetricData {
        ApiMetricData {
            error: Some(e),
            data: None,
            from: 0,
            to: 0,
            resolution: 0,
            avg: None,
            min: None,
            max: None,
        }
    }
}

/// Why a query builds no selector at all, which cc-metric-store answers with an empty list
/// (issue 33: `"type": "node1"` looked like a level that had no data).
fn selects_nothing(q: &ApiQuery) -> Option<String> {
    let t = q.typ.as_deref().filter(|t| *t != "node")?;
    if q.type_ids.is_empty() {
        return Some(format!(
            "\"type\": {t:?} without \"type-ids\" selects no level: a level below the host is \
             asked as a type and its ids (level cpu0 is {{\"type\": \"cpu\", \"type-ids\": \
             [\"0\"]}}); \"type\": \"node\" is the host itself"
        ));
    }
    match &q.subtype {
        Some(st) if q.subtype_ids.is_empty() => Some(format!(
            "\"subtype\": {st:?} without \"subtype-ids\" selects no level"
        )),
        _ => None,
    }
}

/// Levels of a missing child named in an error.
const MAX_CHILDREN_NAMED: usize = 10;

/// What of `sel` does not exist: the first missing level (and what its parent holds), or the
/// metric at an existing level.
fn missing(store: &Store, sel: &[SelectorElement], metric: &str) -> String {
    let mut path: Vec<&str> = Vec::new();
    for el in sel {
        let SelectorElement::Name(name) = el else {
            break;
        };
        let parent = path.clone();
        path.push(name);
        if store.latest_timestamp(&path).is_none() {
            let mut children = store.list_children(&parent);
            children.sort();
            let more = children.len().saturating_sub(MAX_CHILDREN_NAMED);
            children.truncate(MAX_CHILDREN_NAMED);
            let listed = if children.is_empty() {
                "none".to_string()
            } else if more > 0 {
                format!("{}, and {more} more", children.join(", "))
            } else {
                children.join(", ")
            };
            return format!(
                "no level {} (the levels below {}: {listed})",
                path.join("/"),
                if parent.is_empty() {
                    "the root".to_string()
                } else {
                    parent.join("/")
                }
            );
        }
    }
    format!("no {metric} at {}", path.join("/"))
}

/// Series a request reads, counted without building their selectors.
fn series_count(store: &Store, req: &ApiQueryRequest) -> usize {
    let per_query = |q: &ApiQuery| -> usize {
        match q.typ.as_deref().filter(|t| *t != "node") {
            Some(_) if !q.aggregate => q.type_ids.len().saturating_mul(if q.subtype.is_some() {
                q.subtype_ids.len()
            } else {
                1
            }),
            _ => 1,
        }
    };
    let listed: usize = req
        .queries
        .iter()
        .map(per_query)
        .fold(0, usize::saturating_add);
    let all_nodes = req.for_all_nodes.as_ref().map_or(0, |m| {
        store
            .list_children(&[&req.cluster])
            .len()
            .saturating_mul(m.len())
    });
    listed.saturating_add(all_nodes)
}

/// Runs a request against the store, reading at most `max_series` series and returning at
/// most `max_values` values.
pub fn run(
    store: &Store,
    mut req: ApiQueryRequest,
    max_series: usize,
    max_values: usize,
) -> Result<ApiQueryResponse, QueryRefused> {
    let series = series_count(store, &req);
    if series > max_series {
        return Err(QueryRefused::TooManySeries(series, max_series));
    }
    let mut budget = max_values;
    let mut echoed = None;
    if let Some(metrics) = &req.for_all_nodes {
        let mut nodes = store.list_children(&[&req.cluster]);
        nodes.sort();
        let mut qs = Vec::new();
        for node in nodes {
            for m in metrics {
                qs.push(ApiQuery {
                    metric: m.clone(),
                    host: node.clone(),
                    ..ApiQuery::default()
                });
            }
        }
        req.queries.extend(qs.iter().cloned());
        echoed = Some(qs);
    }
    let mut results = Vec::with_capacity(req.queries.len());
    for q in &req.queries {
        let mut row = Vec::new();
        if let Some(e) = selects_nothing(q) {
            row.push(ApiMetricData::error(e));
        }
        for sel in selectors(&req.cluster, q) {
            row.push(
                match store.read(&sel, &q.metric, req.from, req.to, q.resolution) {
                    Err(e @ crate::store::StoreError::NotFound) => {
                        ApiMetricData::error(format!("{e}: {}", missing(store, &sel, &q.metric)))
                    }
                    Err(e) => ApiMetricData::error(e.to_string()),
                    Ok(mut r) => {
                        budget = budget
                            .checked_sub(r.data.len())
                            .ok_or(QueryRefused::TooManyValues(max_values))?;
                        let scale = q.scale_by.filter(|s| *s != 0.0 && *s != 1.0);
                        if let Some(s) = scale {
                            r.data.iter_mut().for_each(|x| *x *= s);
                        }
                        let st = if req.with_stats {
                            r.stats()
                        } else {
                            Stats::of(&[])
                        };
                        if req.with_padding && r.step > 0 {
                            // cc-metric-store's `PadDataWithNull`: nulls for the native steps
                            // between the asked and the answered `from` (whatever the
                            // resolution), `from` left as answered. Bounded: a query from 0
                            // must not allocate billions of nulls.
                            let pad = (r.from / r.step - req.from / r.step).clamp(0, MAX_PAD);
                            if pad > 0 {
                                budget = budget
                                    .checked_sub(pad as usize)
                                    .ok_or(QueryRefused::TooManyValues(max_values))?;
                                let mut padded = vec![f64::NAN; pad as usize];
                                padded.extend_from_slice(&r.data);
                                r.data = padded;
                            }
                        }
                        let data = (req.with_data && !r.data.is_empty())
                            .then(|| r.data.iter().map(|x| num(*x)).collect());
                        ApiMetricData {
                            error: None,
                            data,
                            from: r.from,
                            to: r.to,
                            resolution: r.resolution,
                            avg: num(st.avg),
                            min: num(st.min),
                            max: num(st.max),
                        }
                    }
                },
            );
        }
        results.push(row);
    }
    Ok(ApiQueryResponse {
        queries: echoed,
        results,
    })
}

/// `GET|POST /api/query` with a JSON body (`?version=v1` ignores resolutions, as cc does).
pub(crate) async fn handle(
    State(st): State<Arc<CcmsState>>,
    Query(params): Query<std::collections::HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let mut req: ApiQueryRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid query: {e}")),
    };
    if params.get("version").is_some_and(|v| v == "v1") {
        req.queries.iter_mut().for_each(|q| q.resolution = 0);
    }
    let store = st.store.clone();
    let (series, values) = (st.config.max_query_series, st.config.max_query_values);
    match tokio::task::spawn_blocking(move || run(&store, req, series, values)).await {
        Ok(Ok(resp)) => axum::Json(resp).into_response(),
        Ok(Err(refused)) => error(StatusCode::PAYLOAD_TOO_LARGE, refused.to_string()),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}
