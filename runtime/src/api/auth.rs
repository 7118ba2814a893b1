//! The API's authentication, for every route family: JWT as cc-metric-store does it
//! (`Authorization: Bearer <token>`, EdDSA (Ed25519) signature checked against `[api]
//! jwt-public-key`, base64 of the 32 raw key bytes as cc-backend's `JWT_PUBLIC_KEY`;
//! `exp`/`nbf` enforced; the `roles` claim, cc-backend's name, read for admin-only routes).
//! Verified tokens are cached until they expire. The [`authenticate`] layer records who calls
//! as a [`Caller`] request extension; handlers ask it, they never read tokens.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signature, VerifyingKey};

use super::error::ApiError;
use crate::config::ApiConfig;

/// What the [`authenticate`] layer checks requests against: the key, if any, and the roles
/// that make a caller an admin.
pub struct Auth {
    verifier: Option<Verifier>,
    admin_roles: Vec<String>,
}

impl Auth {
    /// From `[api]`: without `jwt-public-key` every caller is let in (as an admin, as
    /// cc-metric-store does).
    pub fn new(config: &ApiConfig) -> Result<Auth, AuthError> {
        let verifier = config
            .jwt_public_key
            .as_deref()
            .map(Verifier::new)
            .transpose()?;
        if verifier.is_none() {
            tracing::warn!("no jwt-public-key configured: the metric store API is unauthenticated");
        }
        Ok(Auth {
            verifier,
            admin_roles: config.admin_roles.clone(),
        })
    }
}

/// Who is calling, as the authentication layer established it (a request extension every
/// handler behind [`authenticate`] can take).
#[derive(Debug, Clone)]
pub struct Caller {
    /// The token's `sub` (none without auth).
    pub subject: Option<String>,
    /// Holds a role of `admin-roles` (everyone, without auth: cc-metric-store's habit).
    pub admin: bool,
}

impl Caller {
    /// `Err(403)` unless the caller is an admin.
    // The error is the reply itself (axum's Response), built once on a refused request.
    #[allow(clippy::result_large_err)]
    pub fn require_admin(&self) -> Result<(), Response> {
        if self.admin {
            Ok(())
        } else {
            Err(ApiError::new(StatusCode::FORBIDDEN, "admin role required").into_response())
        }
    }
}

/// Checks the Bearer token of every request (when a key is configured) and records the
/// [`Caller`]; 401 naming what is wrong with the token otherwise.
pub async fn authenticate(State(auth): State<Arc<Auth>>, mut req: Request, next: Next) -> Response {
    let Some(v) = &auth.verifier else {
        req.extensions_mut().insert(Caller {
            subject: None,
            admin: true,
        });
        return next.run(req).await;
    };
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok());
    match v.check_header(header, chrono::Utc::now().timestamp()) {
        Ok(claims) => {
            let admin = claims.roles.iter().any(|r| auth.admin_roles.contains(r));
            req.extensions_mut().insert(Caller {
                subject: claims.subject,
                admin,
            });
            next.run(req).await
        }
        Err(e) => ApiError::new(StatusCode::UNAUTHORIZED, e.to_string()).into_response(),
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("use JWT authentication (Authorization: Bearer <token>)")]
    MissingToken,
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    #[error("only Ed25519/EdDSA tokens are supported")]
    WrongAlgorithm,
    #[error("invalid signature")]
    BadSignature,
    #[error("token expired")]
    Expired,
    #[error("token not valid yet")]
    NotYetValid,
    #[error("invalid public key: {0}")]
    BadKey(String),
}

/// Claims the API uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claims {
    pub subject: Option<String>,
    pub roles: Vec<String>,
    pub expires: Option<i64>,
}

/// Verifies tokens against one public key.
pub struct Verifier {
    key: VerifyingKey,
    cache: Mutex<HashMap<String, Claims>>,
}

const CACHE_MAX: usize = 4096;

impl Verifier {
    /// `key`: base64 (standard or URL-safe) of the 32-byte Ed25519 public key.
    pub fn new(key: &str) -> Result<Verifier, AuthError> {
        let raw = STANDARD
            .decode(key.trim())
            .or_else(|_| URL_SAFE_NO_PAD.decode(key.trim().trim_end_matches('=')))
            .map_err(|e| AuthError::BadKey(e.to_string()))?;
        let bytes: [u8; 32] = raw
            .try_into()
            .map_err(|_| AuthError::BadKey("expected 32 bytes".into()))?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|e| AuthError::BadKey(e.to_string()))?;
        Ok(Verifier {
            key,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Checks an `Authorization` header value; returns the token's claims.
    pub fn check_header(&self, header: Option<&str>, now: i64) -> Result<Claims, AuthError> {
        let token = header
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthError::MissingToken)?;
        self.verify(token, now)
    }

    /// Verifies signature and time claims of a compact JWS.
    pub fn verify(&self, token: &str, now: i64) -> Result<Claims, AuthError> {
        let cached = crate::util::lock(&self.cache).get(token).cloned();
        if let Some(c) = cached {
            check_time(c.expires, None, now)?;
            return Ok(c);
        }
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::Malformed("expected three dot-separated parts"));
        };
        let b64 = |x: &str| URL_SAFE_NO_PAD.decode(x.trim_end_matches('='));
        let header: serde_json::Value =
            serde_json::from_slice(&b64(h).map_err(|_| AuthError::Malformed("header encoding"))?)
                .map_err(|_| AuthError::Malformed("header JSON"))?;
        if header.get("alg").and_then(|a| a.as_str()) != Some("EdDSA") {
            return Err(AuthError::WrongAlgorithm);
        }
        let sig = b64(s).map_err(|_| AuthError::Malformed("signature encoding"))?;
        let sig =
            Signature::from_slice(&sig).map_err(|_| AuthError::Malformed("signature length"))?;
        let signed = &token[..h.len() + 1 + p.len()];
        self.key
            .verify_strict(signed.as_bytes(), &sig)
            .map_err(|_| AuthError::BadSignature)?;
        let payload: serde_json::Value =
            serde_json::from_slice(&b64(p).map_err(|_| AuthError::Malformed("payload encoding"))?)
                .map_err(|_| AuthError::Malformed("payload JSON"))?;
        let num = |k: &str| payload.get(k).and_then(|v| v.as_f64()).map(|f| f as i64);
        let claims = Claims {
            subject: payload
                .get("sub")
                .and_then(|v| v.as_str())
                .map(String::from),
            roles: payload
                .get("roles")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|r| r.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            expires: num("exp"),
        };
        check_time(claims.expires, num("nbf"), now)?;
        let mut cache = crate::util::lock(&self.cache);
        if cache.len() >= CACHE_MAX {
            cache.clear(); // crude but bounded; a re-verify costs ~50 us
        }
        cache.insert(token.to_string(), claims.clone());
        Ok(claims)
    }
}

fn check_time(exp: Option<i64>, nbf: Option<i64>, now: i64) -> Result<(), AuthError> {
    if exp.is_some_and(|e| now >= e) {
        return Err(AuthError::Expired);
    }
    if nbf.is_some_and(|n| now < n) {
        return Err(AuthError::NotYetValid);
    }
    Ok(())
}

/// Signs `claims` (JSON) with `key`, producing a compact EdDSA JWT (for tests and tooling:
/// the daemon itself only verifies).
pub fn sign(key: &ed25519_dalek::SigningKey, claims: &serde_json::Value) -> String {
    use ed25519_dalek::Signer;
    let h = URL_SAFE_NO_PAD.encode(br#"{"alg":"EdDSA","typ":"JWT"}"#);
    let p = URL_SAFE_NO_PAD.encode(claims.to_string());
    let msg = format!("{h}.{p}");
    let sig = key.sign(msg.as_bytes());
    format!("{msg}.{}", URL_SAFE_NO_PAD.encode(sig.to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn setup() -> (ed25519_dalek::SigningKey, Verifier) {
        let sk = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let v = Verifier::new(&STANDARD.encode(sk.verifying_key().to_bytes())).unwrap();
        (sk, v)
    }

    #[test]
    fn valid_expired_forged() {
        let (sk, v) = setup();
        let t = sign(&sk, &json!({"sub": "u", "roles": ["admin"], "exp": 2000}));
        let c = v.check_header(Some(&format!("Bearer {t}")), 1000).unwrap();
        assert_eq!(c.roles, vec!["admin"]);
        assert_eq!(c.subject.as_deref(), Some("u"));
        // Cached tokens still expire.
        assert_eq!(v.verify(&t, 2000), Err(AuthError::Expired));
        let other = ed25519_dalek::SigningKey::from_bytes(&[8; 32]);
        assert_eq!(
            v.verify(&sign(&other, &json!({})), 0),
            Err(AuthError::BadSignature)
        );
        assert_eq!(
            v.verify(&sign(&sk, &json!({"nbf": 50})), 10),
            Err(AuthError::NotYetValid)
        );
        // Tampered payload.
        let mut parts: Vec<&str> = t.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(json!({"roles": ["admin"], "exp": 99999}).to_string());
        parts[1] = &forged;
        assert_eq!(v.verify(&parts.join("."), 0), Err(AuthError::BadSignature));
        assert_eq!(v.check_header(None, 0), Err(AuthError::MissingToken));
        assert_eq!(
            v.check_header(Some("Basic x"), 0),
            Err(AuthError::MissingToken)
        );
        assert!(matches!(v.verify("a.b", 0), Err(AuthError::Malformed(_))));
        let hs = format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256"}"#),
            "e30",
            "AA"
        );
        assert_eq!(v.verify(&hs, 0), Err(AuthError::WrongAlgorithm));
        assert!(Verifier::new("not base64!").is_err());
        assert!(Verifier::new(&STANDARD.encode([1u8; 16])).is_err());
    }
}
