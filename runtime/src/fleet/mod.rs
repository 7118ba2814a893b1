//! `runtime::fleet` — guests published once into JetStream and run by every daemon of a
//! fleet: signed, sequenced releases in a key-value bucket (an older one put back is refused
//! as a replay; a deleted one is withdrawn), components in an object store, rollout groups,
//! per-daemon health in a second bucket, rollback of a version that fails.
//!
//! Owns the fleet's buckets ([`buckets`]), the release manifest and its signature
//! ([`manifest`]), the rollout rules ([`rollout`]), what a daemon keeps on disk ([`local`]),
//! health and status ([`health`]), taking, refusing, rolling back and withdrawing versions
//! (`converge`) and the task that follows the fleet (`follow`). It does not
//! compile, instantiate or swap guests itself and does not know the daemon: it asks a
//! [`GuestHost`] (implemented by `daemon`) to do that through the daemon's own reload path,
//! and hands the daemon verified component bytes through [`Fleet::component`].

pub mod buckets;
pub mod config;
mod converge;
mod follow;
pub mod health;
pub mod local;
pub mod manifest;
pub mod rollout;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use anyhow::Result;

pub use config::FleetConfig;
pub use health::Status;
pub use manifest::{Manifest, Reason, Refusal};
pub use rollout::Usage;

use crate::host::check::WorldKind;

/// What the fleet needs from the daemon that runs it.
pub trait GuestHost: Send + Sync + 'static {
    /// The worlds the running config uses `guest` as (empty: no stage or agent names it).
    fn uses(&self, guest: &str) -> Vec<WorldKind>;
    /// Compiles the component (into the daemon's cache): a refusal is the compiler's error.
    fn compile(&self, bytes: &[u8], what: &str) -> Result<(), String>;
    /// Applies the running config again with the fleet's components (the daemon's reload
    /// path: compile, validate, instantiate, configure, swap between batches). `Err`: a part
    /// that uses `guest` refused its new version (and keeps running its old one).
    fn reapply(&self, guest: &str) -> Result<(), String>;
    /// Counters of the parts that run `guest` (at `hash`, when given).
    fn usage(&self, guest: &str, hash: Option<&str>) -> Usage;
}

/// A verified component the daemon runs in place of the guest's local one.
#[derive(Clone)]
pub struct Component {
    pub hash: String,
    pub bytes: Arc<Vec<u8>>,
}

/// A daemon's membership in a fleet.
pub struct Fleet {
    cfg: FleetConfig,
    /// Where the config file is (relative TLS and credential paths start there).
    base: PathBuf,
    node: String,
    keys: Vec<ed25519_dalek::VerifyingKey>,
    local: local::Local,
    state: Mutex<local::LocalState>,
    /// Guest name -> the fleet's verified version: what [`Fleet::component`] answers.
    overlay: RwLock<HashMap<String, Component>>,
    connected: AtomicBool,
    buckets: tokio::sync::Mutex<Option<buckets::Buckets>>,
    follow: Mutex<follow::Follow>,
}

impl Fleet {
    /// Opens the daemon's fleet state: the last verified versions from disk go into the
    /// overlay (checked again against their hash and today's trusted keys), so the daemon
    /// starts on them with or without NATS.
    pub fn open(cfg: &FleetConfig, data_dir: &Path, base: &Path) -> Result<Arc<Fleet>> {
        let local = local::Local::open(data_dir)?;
        let state = local.load();
        let keys = cfg.keys();
        if keys.is_empty() {
            tracing::warn!(
                fleet = %cfg.name,
                "fleet: trusted-keys is empty: unsigned components published to this fleet will run as code on this daemon"
            );
        }
        let mut overlay = HashMap::new();
        for (guest, g) in &state.guests {
            let Some(m) = &g.current else { continue };
            match (m.verify(&cfg.name, &keys), local.component(m)) {
                (Ok(()), Some(bytes)) => {
                    overlay.insert(
                        guest.clone(),
                        Component {
                            hash: m.sha256.clone(),
                            bytes: Arc::new(bytes),
                        },
                    );
                }
                (Err(e), _) => {
                    tracing::warn!(guest, error = %e, "fleet: kept version no longer verifies")
                }
                (_, None) => {
                    tracing::warn!(guest, hash = %m.sha256, "fleet: kept component missing or damaged")
                }
            }
        }
        Ok(Arc::new(Fleet {
            cfg: cfg.clone(),
            base: base.to_path_buf(),
            node: cfg.node_id(),
            keys,
            local,
            state: Mutex::new(state),
            overlay: RwLock::new(overlay),
            connected: AtomicBool::new(false),
            buckets: tokio::sync::Mutex::new(None),
            follow: Mutex::new(follow::Follow::default()),
        }))
    }

    /// The fleet's verified version of `guest`, if it runs one here (it takes precedence
    /// over guests-dir and the bundled guests).
    pub fn component(&self, guest: &str) -> Option<Component> {
        crate::util::read(&self.overlay).get(guest).cloned()
    }

    pub fn config(&self) -> &FleetConfig {
        &self.cfg
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    /// Whether the fleet task is connected to NATS now.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// The follower task's state: restarts, panics, what fails now.
    pub fn task(&self) -> Option<crate::supervise::TaskState> {
        crate::supervise::state(&follow::task_name(&self.cfg.name))
    }

    /// Reads the fleet's status from the buckets (through this daemon's connection).
    pub async fn status(&self) -> Result<Status> {
        let b = self.buckets.lock().await.clone();
        let Some(b) = b else {
            anyhow::bail!(
                "not connected to the fleet's NATS server ({})",
                self.cfg.nats
            );
        };
        status_of(&b, &self.cfg.name).await
    }
}

/// The fleet's status, read from its buckets.
pub async fn status_of(b: &buckets::Buckets, fleet: &str) -> Result<Status> {
    let work = async {
        let releases = buckets::all_entries(&b.releases).await?;
        let health = buckets::all_entries(&b.health).await?;
        Ok::<_, anyhow::Error>(Status::build(fleet, &releases, &health))
    };
    tokio::time::timeout(buckets::OP_TIMEOUT, work)
        .await
        .map_err(|_| anyhow::anyhow!("reading the fleet's buckets timed out"))?
}

pub use follow::{prefetch, spawn};
