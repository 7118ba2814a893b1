//! A release: what `wasmon fleet publish` writes under `GUEST.GROUP` in the releases bucket
//! (the component's sha256 and size, who published it, when, for which group, and an Ed25519
//! signature), how it is signed, and why a daemon refuses one. Pure data and checks: no NATS,
//! no wasm.

use base64::Engine as _;
use ed25519_dalek::{Signer, Verifier};
use serde::{Deserialize, Serialize};
use sha2::Digest;

use super::config::name_ok;

/// A manifest larger than this is not a manifest (a hostile peer's value is not parsed).
pub const MAX_MANIFEST_BYTES: usize = 16 << 10;

/// One published version of a guest, for one group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Manifest {
    pub guest: String,
    /// `all`, or a rollout group.
    pub group: String,
    /// Hex SHA-256 of the component: also its object's name in the components bucket.
    pub sha256: String,
    pub size: u64,
    /// `user@host` of whoever published it (informative: the signature is what counts).
    pub publisher: String,
    /// Seconds since the Unix epoch.
    pub published_at: i64,
    /// Base64 Ed25519 public key of the signer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Base64 Ed25519 signature over [`Manifest::signed_bytes`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// Why a daemon does not run a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// Unsigned, signed by a key that is not trusted, or a signature that does not verify.
    Signature,
    /// The bytes' hash or size is not the manifest's.
    Tampered,
    /// Larger than `max-component-size`.
    TooLarge,
    /// The release entry is not a manifest.
    Malformed,
    /// A transformer published for an agent or the other way round, or no world at all.
    WrongWorld,
    Compile,
    /// Instantiating or `configure` failed.
    Configure,
    /// Quarantined within the rollback window after the swap (rolled back).
    Quarantined,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Signature => "signature",
            Reason::Tampered => "tampered",
            Reason::TooLarge => "too-large",
            Reason::Malformed => "malformed",
            Reason::WrongWorld => "wrong-world",
            Reason::Compile => "compile",
            Reason::Configure => "configure",
            Reason::Quarantined => "quarantined",
        }
    }
}

/// A refusal: the reason, and what exactly was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "kebab-case")]
#[error("{}: {detail}", reason.as_str())]
pub struct Refusal {
    pub reason: Reason,
    pub detail: String,
}

impl Refusal {
    pub fn new(reason: Reason, detail: impl Into<String>) -> Refusal {
        Refusal {
            reason,
            detail: detail.into(),
        }
    }
}

/// Hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

impl Manifest {
    /// What the signature covers: the fleet, the guest name, the group, the hash and the size.
    /// Binding the name and group means a signed build of guest A cannot be replayed as guest
    /// B, nor a canary-only release be moved to `all` by someone who can write the bucket
    /// but holds no key.
    pub fn signed_bytes(&self, fleet: &str) -> Vec<u8> {
        format!(
            "wasmon-fleet/v1\n{fleet}\n{}\n{}\n{}\n{}\n",
            self.guest, self.group, self.sha256, self.size
        )
        .into_bytes()
    }

    /// Signs the manifest with `key` (sets `key` and `signature`).
    pub fn sign(&mut self, fleet: &str, key: &ed25519_dalek::SigningKey) {
        let b64 = base64::engine::general_purpose::STANDARD;
        let sig = key.sign(&self.signed_bytes(fleet));
        self.key = Some(b64.encode(key.verifying_key().as_bytes()));
        self.signature = Some(b64.encode(sig.to_bytes()));
    }

    /// Parses a release entry: bounded, JSON, well-formed names and hash.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, Refusal> {
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(Refusal::new(
                Reason::Malformed,
                format!(
                    "release entry of {} bytes (at most {MAX_MANIFEST_BYTES})",
                    bytes.len()
                ),
            ));
        }
        let m: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| Refusal::new(Reason::Malformed, format!("not a manifest: {e}")))?;
        if !name_ok(&m.guest) || !name_ok(&m.group) {
            return Err(Refusal::new(
                Reason::Malformed,
                format!("bad guest {:?} or group {:?}", m.guest, m.group),
            ));
        }
        if m.sha256.len() != 64 || !m.sha256.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(Refusal::new(
                Reason::Malformed,
                format!("sha256 {:?} is not 64 hex digits", m.sha256),
            ));
        }
        Ok(m)
    }

    /// Checks the signature against `trusted` (empty: anything goes, unsigned included).
    pub fn verify(
        &self,
        fleet: &str,
        trusted: &[ed25519_dalek::VerifyingKey],
    ) -> Result<(), Refusal> {
        if trusted.is_empty() {
            return Ok(());
        }
        let refuse = |d: String| Err(Refusal::new(Reason::Signature, d));
        let Some(sig) = &self.signature else {
            return refuse("unsigned, and trusted-keys is set".into());
        };
        let b64 = base64::engine::general_purpose::STANDARD;
        let Some(sig) = b64
            .decode(sig)
            .ok()
            .and_then(|b| ed25519_dalek::Signature::from_slice(&b).ok())
        else {
            return refuse("the signature is not a base64 Ed25519 signature".into());
        };
        let signer = self
            .key
            .as_deref()
            .and_then(|k| super::config::parse_key(k).ok());
        if let Some(k) = &signer
            && !trusted.contains(k)
        {
            return refuse(format!(
                "signed by {}, which is not in trusted-keys",
                self.key.as_deref().unwrap_or("")
            ));
        }
        let msg = self.signed_bytes(fleet);
        if trusted.iter().any(|k| k.verify(&msg, &sig).is_ok()) {
            Ok(())
        } else {
            refuse("the signature does not verify against any trusted key".into())
        }
    }

    /// Checks fetched bytes against the manifest's size and hash.
    pub fn check_bytes(&self, bytes: &[u8]) -> Result<(), Refusal> {
        if bytes.len() as u64 != self.size {
            return Err(Refusal::new(
                Reason::Tampered,
                format!("{} bytes, the manifest says {}", bytes.len(), self.size),
            ));
        }
        let h = sha256_hex(bytes);
        if h != self.sha256 {
            return Err(Refusal::new(
                Reason::Tampered,
                format!("the bytes hash to {h}, the manifest says {}", self.sha256),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> ed25519_dalek::SigningKey {
        ed25519_dalek::SigningKey::from_bytes(&[seed; 32])
    }

    fn manifest(bytes: &[u8]) -> Manifest {
        Manifest {
            guest: "xform".into(),
            group: "all".into(),
            sha256: sha256_hex(bytes),
            size: bytes.len() as u64,
            publisher: "ops@here".into(),
            published_at: 1_700_000_000,
            key: None,
            signature: None,
        }
    }

    #[test]
    fn signed_manifest_verifies_and_roundtrips() {
        let mut m = manifest(b"component");
        m.sign("prod", &key(1));
        let parsed = Manifest::parse(&serde_json::to_vec(&m).unwrap()).unwrap();
        assert_eq!(parsed, m);
        parsed.verify("prod", &[key(1).verifying_key()]).unwrap();
        parsed.check_bytes(b"component").unwrap();
        // No trusted keys: everything is accepted, unsigned too.
        manifest(b"x").verify("prod", &[]).unwrap();
    }

    #[test]
    fn unsigned_unknown_key_and_moved_releases_are_refused() {
        let trusted = [key(1).verifying_key()];
        let e = manifest(b"c").verify("prod", &trusted).unwrap_err();
        assert_eq!(e.reason, Reason::Signature);
        assert!(e.detail.contains("unsigned"), "{e}");

        let mut m = manifest(b"c");
        m.sign("prod", &key(2));
        let e = m.verify("prod", &trusted).unwrap_err();
        assert!(e.detail.contains("not in trusted-keys"), "{e}");

        // Signed for canary, moved to all (or to another guest, or another fleet).
        let mut m = manifest(b"c");
        m.group = "canary".into();
        m.sign("prod", &key(1));
        for change in [
            |m: &mut Manifest| m.group = "all".into(),
            |m: &mut Manifest| m.guest = "other".into(),
            |m: &mut Manifest| m.sha256 = sha256_hex(b"evil"),
        ] {
            let mut moved = m.clone();
            change(&mut moved);
            let e = moved.verify("prod", &trusted).unwrap_err();
            assert!(e.detail.contains("does not verify"), "{e}");
        }
        assert!(m.verify("staging", &trusted).is_err());
        // A signer key stripped from the manifest: still checked against every trusted key.
        let mut anon = m.clone();
        anon.key = None;
        anon.verify("prod", &trusted).unwrap();
    }

    #[test]
    fn tampered_bytes_and_malformed_entries_are_refused() {
        let m = manifest(b"component");
        assert_eq!(
            m.check_bytes(b"compOnent").unwrap_err().reason,
            Reason::Tampered
        );
        assert_eq!(m.check_bytes(b"comp").unwrap_err().reason, Reason::Tampered);
        for bad in [
            &b"not json"[..],
            br#"{"guest":"x"}"#,
            &vec![b' '; MAX_MANIFEST_BYTES + 1],
        ] {
            assert_eq!(Manifest::parse(bad).unwrap_err().reason, Reason::Malformed);
        }
        let mut m = manifest(b"c");
        m.guest = "../etc".into();
        let e = Manifest::parse(&serde_json::to_vec(&m).unwrap()).unwrap_err();
        assert_eq!(e.reason, Reason::Malformed);
        let mut m = manifest(b"c");
        m.sha256 = "zz".into();
        assert!(Manifest::parse(&serde_json::to_vec(&m).unwrap()).is_err());
        let mut m = manifest(b"c");
        m.signature = Some("!!".into());
        assert!(m.verify("prod", &[key(1).verifying_key()]).is_err());
    }
}
