//! HTTP tests of the cc-metric-store API through `tower::ServiceExt::oneshot`.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use crate::api::auth;
use crate::api::error::ErrorBody;
use crate::ingest::NatsConfig;
use crate::store::{Aggregation, MetricConfig, StoreConfig};

fn store_cfg() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.metrics.insert(
        "flops".into(),
        MetricConfig {
            frequency: 60,
            aggregation: Aggregation::Sum,
            precision: None,
        },
    );
    c.metrics.insert(
        "clock".into(),
        MetricConfig {
            frequency: 60,
            aggregation: Aggregation::Avg,
            precision: None,
        },
    );
    c.metrics.insert(
        "mem".into(),
        MetricConfig {
            frequency: 60,
            aggregation: Aggregation::None,
            precision: None,
        },
    );
    c.max_body_size = 4096;
    c
}

fn app(key: Option<&ed25519_dalek::SigningKey>) -> (Router, Arc<Store>) {
    let store = Arc::new(Store::new(store_cfg()));
    let cfg = ApiConfig {
        jwt_public_key: key.map(|k| {
            base64::engine::general_purpose::STANDARD.encode(k.verifying_key().to_bytes())
        }),
        ..ApiConfig::default()
    };
    (
        router(Arc::new(CcmsState::new(store.clone(), cfg).unwrap())),
        store,
    )
}

async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: impl Into<Body>,
) -> (StatusCode, String) {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    let resp = app
        .clone()
        .oneshot(b.body(body.into()).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).to_string())
}

/// The status [`call`] answers.
async fn status(app: &Router, m: &str, uri: &str, token: Option<&str>, body: &str) -> StatusCode {
    call(app, m, uri, token, body.to_string()).await.0
}

const BODY: &str = "flops,cluster=alex,hostname=a1,type=hwthread,type-id=0 value=1 600\n\
flops,cluster=alex,hostname=a1,type=hwthread,type-id=1 value=2i 600\n\
flops,cluster=alex,hostname=a1,type=hwthread,type-id=0 value=3u 660\n\
flops,cluster=alex,hostname=a1,type=hwthread,type-id=1 value=4 660\n\
mem,hostname=a1 value=10 600\n\
mem,host=a2,cluster=alex value=20 600\n";

#[tokio::test]
async fn write_then_query() {
    let (app, _) = app(None);
    let (s, b) = call(&app, "POST", "/api/write?cluster=alex", None, BODY).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let q = json!({
        "cluster": "alex", "from": 600, "to": 661,
        "queries": [
            {"metric": "flops", "host": "a1", "type": "hwthread", "type-ids": ["0", "1"], "aggreg": true},
            {"metric": "flops", "host": "a1", "type": "hwthread", "type-ids": [0, 1]},
            {"metric": "flops", "host": "a1"},
            {"metric": "mem", "host": "a2", "scale-by": 2.0},
            {"metric": "mem", "host": "nope"},
            {"metric": "nope", "host": "a2"},
            {"metric": "mem", "host": "a2", "type": "node1"},
            {"metric": "mem", "host": "a1", "type": "hwthread", "type-ids": [7]},
        ]
    });
    let (s, b) = call(&app, "POST", "/api/query", None, q.to_string()).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let v: Value = serde_json::from_str(&b).unwrap();
    let r = &v["results"];
    assert_eq!(r[0][0]["data"], json!([3.0, 7.0]));
    assert_eq!(r[0][0]["from"], 600);
    assert_eq!(r[0][0]["to"], 720);
    assert_eq!(r[0][0]["resolution"], 60);
    assert_eq!(r[0][0]["avg"], 5.0);
    assert_eq!(
        (r[0][0]["min"].clone(), r[0][0]["max"].clone()),
        (json!(3.0), json!(7.0))
    );
    assert!(r[0][0].get("error").is_none());
    assert_eq!(r[1].as_array().unwrap().len(), 2);
    assert_eq!(r[1][1]["data"], json!([2.0, 4.0]));
    // No type: the host has no flops of its own, so its hwthreads are summed.
    assert_eq!(r[2][0]["data"], json!([3.0, 7.0]));
    assert_eq!(r[3][0]["data"], json!([40.0]));
    // What does not exist is named (cc-metric-store says the first words only, or, for a
    // type without ids, answers an empty list).
    assert_eq!(
        r[4][0]["error"],
        "metric or host not found: no level alex/nope (the levels below alex: a1, a2)"
    );
    assert!(r[4][0].get("data").is_none());
    assert_eq!(r[5][0]["error"], "unknown metric: nope");
    assert_eq!(r[6].as_array().unwrap().len(), 1, "{}", r[6]);
    let e = r[6][0]["error"].as_str().unwrap();
    assert!(
        e.starts_with("\"type\": \"node1\" without \"type-ids\" selects no level"),
        "{e}"
    );
    let e = r[7][0]["error"].as_str().unwrap();
    assert!(e.starts_with("metric or host not found: no level alex/a1/hwthread7 (the levels below alex/a1: hwthread0, hwthread1"), "{e}");
}

#[tokio::test]
async fn query_gaps_padding_and_flags() {
    let (app, _) = app(None);
    let body = "mem,cluster=c,host=h value=1 600\nmem,cluster=c,host=h value=3 720\n";
    assert_eq!(
        status(&app, "POST", "/api/write", None, body).await,
        StatusCode::OK
    );
    let q = json!({"cluster": "c", "from": 480, "to": 721, "queries": [{"metric": "mem", "host": "h"}]});
    let (_, b) = call(&app, "GET", "/api/query", None, q.to_string()).await;
    let v: Value = serde_json::from_str(&b).unwrap();
    // Padded in front to `from`, NaN gap as null; `from` stays the data's own, as
    // cc-metric-store's PadDataWithNull leaves it.
    assert_eq!(
        v["results"][0][0]["data"],
        json!([null, null, 1.0, null, 3.0])
    );
    assert_eq!(v["results"][0][0]["from"], 600);
    assert_eq!(v["results"][0][0]["avg"], 2.0);
    let q = json!({"cluster": "c", "from": 480, "to": 721, "with-data": false, "with-stats": false,
                   "with-padding": false, "queries": [{"metric": "mem", "host": "h"}]});
    let (_, b) = call(&app, "POST", "/api/query", None, q.to_string()).await;
    let v: Value = serde_json::from_str(&b).unwrap();
    assert!(v["results"][0][0].get("data").is_none());
    assert_eq!(v["results"][0][0]["from"], 600);
    assert_eq!(v["results"][0][0]["avg"], Value::Null);
    // for-all-nodes echoes the generated queries.
    let q = json!({"cluster": "c", "from": 600, "to": 721, "for-all-nodes": ["mem"]});
    let (_, b) = call(&app, "POST", "/api/query", None, q.to_string()).await;
    let v: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(v["queries"][0]["host"], "h");
    assert_eq!(v["results"][0][0]["data"], json!([1.0, null, 3.0]));
    // Malformed request.
    let (s, b) = call(&app, "POST", "/api/query", None, "{").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(b.contains("invalid query"));
}

#[tokio::test]
async fn bad_lines_get_400_with_line_numbers_and_good_lines_are_stored() {
    let (app, store) = app(None);
    let body = "mem,cluster=c,host=h value=1 600\n\
mem,cluster=c,host=h value=oops 660\n\
mem,cluster=c,host=../etc value=1 600\n\
mem,cluster=c,host=h value=3 720\n";
    let (s, b) = call(&app, "POST", "/api/write", None, body).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let e: ErrorBody = serde_json::from_str(&b).unwrap();
    assert!(
        e.error.contains("line 2: column 28: invalid field value"),
        "{}",
        e.error
    );
    assert!(e.error.contains("line 3: invalid name"), "{}", e.error);
    assert!(
        e.error.contains("2 line(s) rejected, 2 stored"),
        "{}",
        e.error
    );
    let r = store
        .read(&crate::store::selector(&["c", "h"]), "mem", 600, 721, 0)
        .unwrap();
    assert_eq!(r.data.len(), 3);
    assert_eq!((r.data[0], r.data[2]), (1.0, 3.0));
}

#[tokio::test]
async fn oversized_body_gets_413() {
    let (app, _) = app(None);
    let line = "mem,cluster=c,host=h value=1 600\n";
    let (s, _) = call(&app, "POST", "/api/write", None, line.repeat(200)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        status(&app, "POST", "/api/write", None, &line.repeat(10)).await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn auth_and_roles() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let (app, _) = app(Some(&key));
    let now = chrono::Utc::now().timestamp();
    let user = auth::sign(
        &key,
        &json!({"sub": "u", "roles": ["api"], "exp": now + 600}),
    );
    let admin = auth::sign(
        &key,
        &json!({"sub": "a", "roles": ["admin"], "exp": now + 600}),
    );
    let expired = auth::sign(
        &key,
        &json!({"sub": "u", "roles": ["admin"], "exp": now - 1}),
    );
    let line = "mem,cluster=c,host=h value=1 600";
    assert_eq!(
        status(&app, "POST", "/api/write", None, line).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(&app, "POST", "/api/write", Some("x.y.z"), line).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(&app, "POST", "/api/write", Some(&expired), line).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(&app, "POST", "/api/write", Some(&user), line).await,
        StatusCode::OK
    );
    let q = json!({"cluster": "c", "from": 600, "to": 600, "queries": [{"metric": "mem", "host": "h"}]});
    assert_eq!(
        status(&app, "POST", "/api/query", None, &q.to_string()).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        status(&app, "POST", "/api/query", Some(&user), &q.to_string()).await,
        StatusCode::OK
    );
    // Admin-only endpoints.
    let sel = r#"[["c"]]"#;
    assert_eq!(
        status(&app, "POST", "/api/free?to=1000", Some(&user), sel).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        status(&app, "GET", "/api/debug", Some(&user), "").await,
        StatusCode::FORBIDDEN
    );
    let (s, b) = call(&app, "GET", "/api/debug?selector=c", Some(&admin), "").await;
    assert_eq!(s, StatusCode::OK);
    assert!(b.contains("\"h\""), "{b}");
    let (s, b) = call(&app, "POST", "/api/free?to=100000", Some(&admin), sel).await;
    assert_eq!((s, b.as_str()), (StatusCode::OK, "buffers freed: 1\n"));
}

#[tokio::test]
async fn free_and_healthcheck() {
    let (app, store) = app(None);
    let now = chrono::Utc::now().timestamp();
    let body = format!(
        "mem,cluster=c,host=h value=1 {}\nmem,cluster=c,host=old value=1 600\n",
        now
    );
    assert_eq!(
        status(&app, "POST", "/api/write", None, &body).await,
        StatusCode::OK
    );
    let (s, b) = call(&app, "GET", "/api/healthcheck", None, "").await;
    assert_eq!((s, b.contains("ok")), (StatusCode::OK, true));
    let (s, b) = call(&app, "GET", "/api/healthcheck?cluster=c&node=h", None, "").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // Unknown or stale nodes, and bad requests to free.
    for (method, uri, body, want) in [
        (
            "GET",
            "/api/healthcheck?cluster=c&node=old",
            "",
            StatusCode::SERVICE_UNAVAILABLE,
        ),
        (
            "GET",
            "/api/healthcheck?cluster=c&node=zz",
            "",
            StatusCode::NOT_FOUND,
        ),
        ("POST", "/api/free", "[]", StatusCode::BAD_REQUEST),
        ("POST", "/api/free?to=x", "[]", StatusCode::BAD_REQUEST),
        ("POST", "/api/free?to=5", "nope", StatusCode::BAD_REQUEST),
    ] {
        let got = status(&app, method, uri, None, body).await;
        assert_eq!(got, want, "{method} {uri}");
    }
    let (s, b) = call(
        &app,
        "POST",
        "/api/free/?to=1000",
        None,
        r#"[["c","old"],["c","h"]]"#,
    )
    .await;
    assert_eq!((s, b.as_str()), (StatusCode::OK, "buffers freed: 1\n"));
    assert!(
        store
            .read(&crate::store::selector(&["c", "old"]), "mem", 0, 1000, 0)
            .is_err()
    );
}

#[tokio::test]
async fn write_is_durable_when_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(store_cfg(), dir.path()).unwrap());
    let app = router(Arc::new(
        CcmsState::new(store.clone(), ApiConfig::default()).unwrap(),
    ));
    assert_eq!(
        status(&app, "POST", "/api/write?cluster=alex", None, BODY).await,
        StatusCode::OK
    );
    // Acknowledged: on disk without any shutdown (the store is leaked, as after kill -9).
    std::mem::forget(store);
    let reopened = Store::open(store_cfg(), dir.path()).unwrap();
    let r = reopened
        .read(&crate::store::selector(&["alex", "a2"]), "mem", 600, 601, 0)
        .unwrap();
    assert_eq!(r.data, vec![20.0]);
}

#[test]
fn config_section_parses() {
    let c: ApiConfig = toml::from_str("jwt-public-key = \"abc\"\nadmin-roles = [\"admin\", \"support\"]\nhealthcheck-max-age = \"10m\"").unwrap();
    assert_eq!(c.admin_roles.len(), 2);
    assert_eq!(c.healthcheck_max_age.as_secs(), 600);
    assert!(toml::from_str::<ApiConfig>("typo = 1").is_err());
    let n: NatsConfig = toml::from_str("address = \"nats://x:4222\"\n[[subscriptions]]\nsubscribe-to = \"updates\"\ncluster-tag = \"alex\"").unwrap();
    assert_eq!(n.subscriptions[0].cluster_tag.as_deref(), Some("alex"));
}

async fn write_with(
    app: &Router,
    headers: &[(&str, &[u8])],
    body: Vec<u8>,
) -> (StatusCode, String) {
    let mut b = Request::builder().method("POST").uri("/api/write");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let resp = app
        .clone()
        .oneshot(b.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).to_string())
}

/// A wasmon sink's batch id: a re-sent batch (same queue, same or lower sequence) is not
/// stored again; a later one and another queue's are; a malformed id is ignored.
#[tokio::test]
async fn a_resent_batch_is_dropped_by_its_id() {
    let (app, store) = app(None);
    let line = |v: i32| format!("mem,cluster=c,hostname=h value={v} 600\n").into_bytes();
    let read = || {
        store
            .read(&crate::store::selector(&["c", "h"]), "mem", 600, 601, 0)
            .unwrap()
            .data
    };
    let id = crate::sink::BATCH_ID_HEADER;
    assert_eq!(
        write_with(&app, &[(id, b"n1.up.7")], line(1)).await.0,
        StatusCode::OK
    );
    // The same id again with another value (a sender would not, but it shows the drop).
    assert_eq!(
        write_with(&app, &[(id, b"n1.up.7")], line(2)).await.0,
        StatusCode::OK
    );
    assert_eq!(read(), vec![1.0]);
    assert_eq!(
        write_with(&app, &[(id, b"n1.up.5")], line(3)).await.0,
        StatusCode::OK
    );
    assert_eq!(read(), vec![1.0]);
    for (hdr, v) in [(&b"n1.up.8"[..], 4), (b"n2.up.1", 5), (b"not-an-id", 6)] {
        assert_eq!(
            write_with(&app, &[(id, hdr)], line(v)).await.0,
            StatusCode::OK
        );
        assert_eq!(read(), vec![f64::from(v)]);
    }
}

/// gzip bodies are inflated; one that inflates past max-body-size is refused with 413, and
/// an encoding other than gzip with 415; nothing of either is stored.
#[tokio::test]
async fn gzip_bodies_and_their_bounds() {
    let (app, store) = app(None);
    let gz = |b: &[u8]| crate::sink::encode::gzip(b);
    let ok = gz(b"mem,cluster=c,hostname=h value=7 600\n");
    let (s, _) = write_with(&app, &[("content-encoding", b"gzip")], ok).await;
    assert_eq!(s, StatusCode::OK);
    // 4096 is the test store's max-body-size: a few hundred bytes that inflate past it.
    let bomb = gz(&vec![b'#'; 256 << 10]);
    assert!(bomb.len() < 4096);
    let (s, msg) = write_with(&app, &[("content-encoding", b"gzip")], bomb).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{msg}");
    let (s, msg) = write_with(&app, &[("content-encoding", b"br")], b"x".to_vec()).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{msg}");
    let (s, _) = write_with(&app, &[("content-encoding", b"gzip")], b"not gzip".to_vec()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let read = store
        .read(&crate::store::selector(&["c", "h"]), "mem", 600, 601, 0)
        .unwrap()
        .data;
    assert_eq!(read, vec![7.0]);
}
