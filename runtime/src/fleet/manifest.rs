//! A release: what `wasmon fleet publish` writes under `GUEST.GROUP` in the releases bucket
//! (the component's sha256 and size, who published it, when, for which group, its sequence,
//! and an Ed25519 signature), how it is signed, and why a daemon refuses one. Pure data and
//! checks: no NATS, no wasm.
//!
//! Two formats: 1 (the first releases: the signature covers fleet, guest, group, hash and
//! size) and 2 (adds the publisher's sequence and the publish time to the signed bytes, so a
//! daemon can refuse an older signed release put back by someone without the key: see
//! [`Manifest::replayed`]). Both verify; `publish` writes format 2.

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
    /// 1 or 2 (see the module's doc); a manifest without it is format 1.
    #[serde(default = "format_1")]
    pub format: u32,
    /// Format 2: larger than the sequence of every earlier release of this guest (the
    /// publisher takes the larger of the time in milliseconds and the highest in the bucket
    /// plus one). Signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
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
    /// Not newer than a release of the same guest and group this daemon already took: an
    /// older signed release put back into the bucket.
    Replayed,
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
            Reason::Replayed => "replayed",
        }
    }

    /// Whether the refusal is about the component's bytes (the same hash fails the same way
    /// whoever publishes it again) rather than about one release of it (a signature, a
    /// sequence, a size claim: the same bytes published again are judged again).
    pub fn about_bytes(self) -> bool {
        matches!(
            self,
            Reason::WrongWorld | Reason::Compile | Reason::Configure | Reason::Quarantined
        )
    }
}

/// The manifest format `publish` writes.
pub const FORMAT: u32 = 2;

fn format_1() -> u32 {
    1
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
    /// A format-2 release of `bytes` as guest `guest` to `group`, unsigned.
    pub fn new(guest: &str, group: &str, bytes: &[u8], publisher: &str, sequence: u64) -> Self {
        Manifest {
            guest: guest.to_string(),
            group: group.to_string(),
            sha256: sha256_hex(bytes),
            size: bytes.len() as u64,
            publisher: publisher.to_string(),
            published_at: chrono::Utc::now().timestamp(),
            format: FORMAT,
            sequence: Some(sequence),
            key: None,
            signature: None,
        }
    }

    /// What the signature covers: the fleet, the guest name, the group, the hash and the size
    /// (and, from format 2, the sequence and the publish time). Binding the name and group
    /// means a signed build of guest A cannot be replayed as guest B, nor a canary-only
    /// release be moved to `all` by someone who can write the bucket but holds no key; the
    /// sequence, that an older release cannot pass for a newer one.
    pub fn signed_bytes(&self, fleet: &str) -> Vec<u8> {
        let mut text = format!(
            "wasmon-fleet/v{}\n{fleet}\n{}\n{}\n{}\n{}\n",
            self.format, self.guest, self.group, self.sha256, self.size
        );
        if self.format >= 2 {
            text.push_str(&format!(
                "{}\n{}\n",
                self.sequence.unwrap_or(0),
                self.published_at
            ));
        }
        text.into_bytes()
    }

    /// Whether this release is not newer than `seen`, the (sequence, hash) of the newest
    /// release of the same guest and group this daemon took: an older sequence, the same
    /// one with other bytes, or a format-1 release (no sequence) after a format-2 one. The
    /// newest release itself seen again is not a replay.
    pub fn replayed(&self, seen: Option<&(u64, String)>) -> Option<Refusal> {
        let (seq, hash) = seen?;
        let why = match self.sequence {
            None => format!(
                "a format-{} release (no sequence) after sequence {seq}",
                self.format
            ),
            Some(s) if s < *seq => format!("sequence {s} is older than {seq}, taken before"),
            Some(s) if s == *seq && hash.is_empty() => {
                format!("sequence {s} was withdrawn")
            }
            Some(s) if s == *seq && &self.sha256 != hash => {
                format!("sequence {s} was taken before for {hash}")
            }
            Some(_) => return None,
        };
        Some(Refusal::new(Reason::Replayed, why))
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
        match (m.format, m.sequence) {
            (1, None) | (2, Some(_)) => {}
            (1 | 2, _) => {
                return Err(Refusal::new(
                    Reason::Malformed,
                    format!(
                        "a format-{} manifest {} a sequence",
                        m.format,
                        if m.format == 1 { "with" } else { "without" }
                    ),
                ));
            }
            (f, _) => {
                return Err(Refusal::new(
                    Reason::Malformed,
                    format!("manifest format {f} is not known to this daemon (1 and 2 are)"),
                ));
            }
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
        Manifest::new("xform", "all", bytes, "ops@here", 7)
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

    #[test]
    fn replayed_releases_are_refused_and_format_1_still_verifies() {
        let trusted = [key(1).verifying_key()];
        let mut v7 = manifest(b"v7");
        v7.sign("prod", &key(1));
        let seen = (7, v7.sha256.clone());
        // The release taken, seen again: not a replay.
        assert!(v7.replayed(Some(&seen)).is_none());
        assert!(v7.replayed(None).is_none());
        // An older signed release put back: refused, naming both sequences.
        let mut v5 = Manifest::new("xform", "all", b"v5", "ops@here", 5);
        v5.sign("prod", &key(1));
        v5.verify("prod", &trusted).unwrap();
        let e = v5.replayed(Some(&seen)).unwrap();
        assert_eq!(e.reason, Reason::Replayed);
        assert!(e.detail.contains("sequence 5 is older than 7"), "{e}");
        // The same sequence with other bytes.
        let other = Manifest::new("xform", "all", b"v7bis", "ops@here", 7);
        assert!(other.replayed(Some(&seen)).is_some());
        // The newest release withdrawn (its hash forgotten): the same release put back.
        let e = v7.replayed(Some(&(7, String::new()))).unwrap();
        assert!(e.detail.contains("withdrawn"), "{e}");
        // A newer one passes.
        let v9 = Manifest::new("xform", "all", b"v9", "ops@here", 9);
        assert!(v9.replayed(Some(&seen)).is_none());
        // The sequence is signed: raising it breaks the signature.
        let mut forged = v5.clone();
        forged.sequence = Some(8);
        assert!(forged.verify("prod", &trusted).is_err());
        let mut forged = v5.clone();
        forged.published_at += 1;
        assert!(forged.verify("prod", &trusted).is_err());

        // Format 1 (written before sequences): verifies over its own bytes, parses, and
        // counts as older than any format-2 release.
        let mut old = manifest(b"v1");
        old.format = 1;
        old.sequence = None;
        old.sign("prod", &key(1));
        let text = serde_json::to_string(&old).unwrap();
        let text = text.replace(",\"format\":1", "");
        assert!(!text.contains("format"), "{text}");
        let parsed = Manifest::parse(text.as_bytes()).unwrap();
        assert_eq!(parsed.format, 1);
        parsed.verify("prod", &trusted).unwrap();
        assert!(parsed.replayed(Some(&seen)).is_some());
        // Formats that do not fit their fields, or unknown ones, are malformed.
        for (format, sequence) in [(1, Some(3)), (2, None), (3, Some(3))] {
            let mut m = manifest(b"x");
            m.format = format;
            m.sequence = sequence;
            let e = Manifest::parse(&serde_json::to_vec(&m).unwrap()).unwrap_err();
            assert_eq!(e.reason, Reason::Malformed, "{format}");
        }
    }
}
