//! What a daemon keeps on disk under `DATA-DIR/fleet/`: the components it verified
//! (`components/SHA256.wasm`) and its rollout state (`state.json`: per guest the release it
//! runs, the one before, what it refused, its last rollback, the newest sequence it took per
//! group), so that it starts without NATS on the last verified versions, does not retry a
//! version it refused, and refuses a replayed release after a restart too. Files are replaced
//! atomically (write, fsync, rename). Knows nothing of NATS or wasm.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::health::{REFUSALS_KEPT, Refused, Rollback};
use super::manifest::Manifest;

/// One guest's rollout state on this daemon.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct GuestState {
    /// The release it runs (`None`: its local version, guests-dir or bundled).
    pub current: Option<Manifest>,
    /// When `current` was swapped in (seconds since the epoch).
    pub since: i64,
    /// The release it ran before `current` (`None`: the local version): the rollback target.
    pub previous: Option<Manifest>,
    pub refused: Vec<Refused>,
    pub rolled_back: Option<Rollback>,
    /// Per group: the (sequence, sha256) of the newest signed release taken for it (its
    /// signature verified): an older one put back into the bucket is refused as replayed.
    /// The hash is emptied when that release is withdrawn: put back, it is a replay too.
    #[serde(default)]
    pub taken: BTreeMap<String, (u64, String)>,
}

impl GuestState {
    /// Whether `m` was refused already: the same bytes for a reason about the bytes, the
    /// same release (hash and sequence) for a reason about the release.
    pub fn refuses(&self, m: &Manifest) -> bool {
        self.refused
            .iter()
            .any(|r| r.hash == m.sha256 && (r.reason.about_bytes() || r.sequence == m.sequence))
    }

    /// Remembers `m` as taken for its group when it is newer than what was.
    pub fn take(&mut self, m: &Manifest) {
        let Some(seq) = m.sequence else { return };
        let newer = self.taken.get(&m.group).is_none_or(|(s, _)| seq > *s);
        if newer {
            self.taken.insert(m.group.clone(), (seq, m.sha256.clone()));
        }
    }

    pub fn push_refusal(&mut self, r: Refused) {
        self.refused.retain(|x| x.hash != r.hash);
        self.refused.push(r);
        if self.refused.len() > REFUSALS_KEPT {
            self.refused.remove(0);
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LocalState {
    pub guests: BTreeMap<String, GuestState>,
}

/// The directory and its files.
pub struct Local {
    dir: PathBuf,
}

impl Local {
    pub fn open(data_dir: &Path) -> Result<Local> {
        let dir = data_dir.join("fleet");
        std::fs::create_dir_all(dir.join("components"))
            .with_context(|| format!("creating {}", dir.display()))?;
        Ok(Local { dir })
    }

    fn component_path(&self, hash: &str) -> PathBuf {
        self.dir.join("components").join(format!("{hash}.wasm"))
    }

    /// The state; a missing or unreadable file is an empty state (logged): the fleet's
    /// buckets are the truth, this is the cache that lets a daemon start without them.
    pub fn load(&self) -> LocalState {
        let path = self.dir.join("state.json");
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "fleet: state file unreadable, starting afresh");
                LocalState::default()
            }),
            Err(_) => LocalState::default(),
        }
    }

    pub fn save(&self, state: &LocalState) -> Result<()> {
        write_atomic(
            &self.dir.join("state.json"),
            &serde_json::to_vec_pretty(state)?,
        )
    }

    /// A kept component whose bytes still match the manifest (a damaged file is ignored).
    pub fn component(&self, m: &Manifest) -> Option<Vec<u8>> {
        let bytes = std::fs::read(self.component_path(&m.sha256)).ok()?;
        m.check_bytes(&bytes).ok()?;
        Some(bytes)
    }

    pub fn keep(&self, hash: &str, bytes: &[u8]) -> Result<()> {
        let path = self.component_path(hash);
        if path.exists() {
            return Ok(());
        }
        write_atomic(&path, bytes)
    }

    /// Deletes kept components no state entry names (current or previous).
    pub fn prune(&self, state: &LocalState) {
        let keep: Vec<&str> = state
            .guests
            .values()
            .flat_map(|g| [&g.current, &g.previous])
            .filter_map(|m| m.as_ref().map(|m| m.sha256.as_str()))
            .collect();
        let Ok(entries) = std::fs::read_dir(self.dir.join("components")) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let stem = name.trim_end_matches(".wasm");
            if !keep.contains(&stem) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f =
        std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::manifest::Reason;

    fn refusal(m: &Manifest, reason: Reason) -> Refused {
        Refused {
            hash: m.sha256.clone(),
            sequence: m.sequence,
            reason,
            detail: String::new(),
            at: 0,
        }
    }

    #[test]
    fn refusals_and_taken_sequences_survive_a_restart() {
        let v1 = Manifest::new("x", "all", b"v1", "p", 10);
        let again = Manifest::new("x", "all", b"v1", "p", 11);
        let mut g = GuestState::default();
        // About the release (a signature): the same bytes published again are judged again.
        g.push_refusal(refusal(&v1, Reason::Signature));
        assert!(g.refuses(&v1) && !g.refuses(&again));
        // About the bytes (a failed configure): refused whoever publishes them.
        g.push_refusal(refusal(&v1, Reason::Configure));
        assert!(g.refuses(&again));

        // Only a newer sequence moves what was taken.
        g.take(&v1);
        g.take(&Manifest::new("x", "all", b"v0", "p", 9));
        assert_eq!(g.taken["all"], (10, v1.sha256.clone()));
        g.take(&again);
        assert_eq!(g.taken["all"].0, 11);
        assert!(v1.replayed(g.taken.get("all")).is_some());

        // Kept in state.json, read back on the next start.
        let dir = tempfile::tempdir().unwrap();
        let local = Local::open(dir.path()).unwrap();
        let mut state = LocalState::default();
        state.guests.insert("x".into(), g.clone());
        local.save(&state).unwrap();
        assert_eq!(local.load(), state);
    }
}
