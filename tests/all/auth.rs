//! With `[api] jwt-public-key` set, every route of the daemon needs a valid token and the
//! admin routes an admin role; `/api/healthcheck` alone stays open. One table, every route,
//! every kind of bad token, against the real binary.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::SigningKey;
use reqwest::blocking::Client;
use reqwest::{Method, StatusCode};
use serde_json::json;
use wasmon::api::auth::sign;

use crate::common::*;

/// (method, path, body, admin only)
const ROUTES: &[(&str, &str, &str, bool)] = &[
    ("POST", "/api/admin/reload", "", true),
    ("GET", "/api/config", "", true),
    ("GET", "/api/pipelines", "", false),
    (
        "POST",
        "/api/pipelines/p/samples",
        r#"{"name":"m","value":1}"#,
        false,
    ),
    ("POST", "/api/pipelines/p/flush", "", false),
    // The receivers (an empty body is a valid OTLP/JSON request, and no remote write one).
    ("POST", "/api/pipelines/p/otlp", "{}", false),
    ("POST", "/v1/metrics", "{}", false),
    ("POST", "/api/pipelines/p/prometheus", "", false),
    ("POST", "/api/v1/write", "", false),
    ("GET", "/api/sinks", "", false),
    // Without [fleet]: {"enabled": false}, to a valid token only.
    ("GET", "/api/fleet", "", false),
    // No such kept queue: an admin gets 409, a user 403, nobody without a token gets further.
    ("DELETE", "/api/sinks/nothing/queue", "", true),
    ("GET", "/metrics", "", false),
    ("GET", "/api/ns/lookup?name=kernel.all.load", "", false),
    ("GET", "/api/ns/name?pmid=60.2.0", "", false),
    ("GET", "/api/ns/children?name=kernel", "", false),
    ("GET", "/api/ns/traverse?prefix=kernel", "", false),
    ("GET", "/api/fetch?name=kernel.all.load", "", false),
    (
        "POST",
        "/api/write?cluster=c",
        "mem,hostname=h value=1 1700000000",
        false,
    ),
    (
        "POST",
        "/api/query",
        r#"{"cluster":"c","from":1700000000,"to":1700000060,"queries":[{"metric":"mem","host":"h"}]}"#,
        false,
    ),
    ("POST", "/api/free?to=1", r#"[["c"]]"#, true),
    ("GET", "/api/debug", "", true),
    ("GET", "/api/notify/thresholds?subscriber=u", "", false),
    (
        "POST",
        "/api/notify/thresholds",
        r#"{"subscriber":"u","metric":"m","value":1,"direction":"rising"}"#,
        false,
    ),
    ("GET", "/api/notify/value?metric=m&instance=i", "", false),
    ("GET", "/api/notify/subscribers/u", "", false),
    ("GET", "/api/notify/watch?subscriber=auth-test", "", false),
    ("GET", "/api/fabric/status", "", false),
    ("GET", "/api/ui/overview", "", false),
    ("GET", "/api/ui/ps", "", false),
];

fn call(
    c: &Client,
    d: &DaemonProcess,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> StatusCode {
    let mut r = c
        .request(Method::from_bytes(method.as_bytes()).unwrap(), d.url(path))
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    // A watch stream answers with its headers and stays open: the status is all we need.
    r.send().unwrap().status()
}

#[test]
fn every_route_needs_a_valid_token_and_admin_routes_an_admin_role() {
    let key = SigningKey::from_bytes(&[7; 32]);
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(
        dir.path(),
        &format!(
            r#"
[api]
jwt-public-key = "{}"
admin-roles = ["admin"]
prometheus-pipeline = "p"
otlp-pipeline = "p"

[[agent]]
name = "linux"
native = "linux"

[[pipeline]]
name = "p"
sinks = []
"#,
            STANDARD.encode(key.verifying_key().to_bytes())
        ),
    );
    let d = DaemonProcess::start(&config);
    let c = Client::new();
    let now = chrono::Utc::now().timestamp();
    let claims = |roles: &[&str], exp: i64| json!({"sub": "u", "roles": roles, "exp": exp});
    let user = sign(&key, &claims(&["api"], now + 600));
    let admin = sign(&key, &claims(&["admin"], now + 600));
    let other_key = sign(
        &SigningKey::from_bytes(&[8; 32]),
        &claims(&["admin"], now + 600),
    );
    let expired = sign(&key, &claims(&["admin"], now - 10));
    let alg_none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(claims(&["admin"], now + 600).to_string())
    );
    let bad: [(&str, Option<&str>); 5] = [
        ("no token", None),
        ("a token signed by another key", Some(&other_key)),
        ("an expired token", Some(&expired)),
        ("an alg=none token", Some(&alg_none)),
        ("garbage", Some("not.a.token")),
    ];

    for &(method, path, body, admin_only) in ROUTES {
        for (what, token) in &bad {
            assert_eq!(
                call(&c, &d, method, path, body, *token),
                StatusCode::UNAUTHORIZED,
                "{method} {path} with {what}"
            );
        }
        let as_user = call(&c, &d, method, path, body, Some(&user));
        if admin_only {
            assert_eq!(as_user, StatusCode::FORBIDDEN, "{method} {path} as a user");
        } else {
            assert!(
                as_user != StatusCode::UNAUTHORIZED && as_user != StatusCode::FORBIDDEN,
                "{method} {path} as a user: {as_user}"
            );
        }
        let as_admin = call(&c, &d, method, path, body, Some(&admin));
        assert!(
            ![StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN].contains(&as_admin)
                && !as_admin.is_server_error(),
            "{method} {path} as an admin: {as_admin}"
        );
    }

    // Thresholds: their owner or an admin may delete them, nobody else.
    let mallory = sign(
        &key,
        &json!({"sub": "mallory", "roles": ["api"], "exp": now + 600}),
    );
    let add = c
        .post(d.url("/api/notify/thresholds"))
        .bearer_auth(&user)
        .header("content-type", "application/json")
        .body(r#"{"subscriber":"u","metric":"m2","value":1,"direction":"rising"}"#)
        .send()
        .unwrap();
    assert_eq!(add.status(), StatusCode::CREATED);
    let handle = add.json::<serde_json::Value>().unwrap()["handle"]
        .as_u64()
        .unwrap();
    let path = format!("/api/notify/thresholds/{handle}");
    assert_eq!(
        call(&c, &d, "DELETE", &path, "", Some(&mallory)),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        call(
            &c,
            &d,
            "DELETE",
            &format!("{path}?subscriber=u"),
            "",
            Some(&mallory)
        ),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        call(
            &c,
            &d,
            "DELETE",
            "/api/notify/thresholds?subscriber=u",
            "",
            Some(&mallory)
        ),
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        call(&c, &d, "DELETE", &path, "", Some(&user)),
        StatusCode::OK
    );

    // The health check stays open, by design.
    assert_eq!(
        call(&c, &d, "GET", "/api/healthcheck", "", None),
        StatusCode::OK
    );
}
