//! JWT authentication as cc-metric-store does it: `Authorization: Bearer <token>`, EdDSA
//! (Ed25519) signature checked against the configured public key (base64 of the 32 raw key
//! bytes, as cc-backend's `JWT_PUBLIC_KEY`), `exp`/`nbf` enforced, `roles` claim (cc-backend's
//! claim name) read for admin-only endpoints. Verified tokens are cached until they expire.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ed25519_dalek::{Signature, VerifyingKey};

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
        let cached = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned();
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
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
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
