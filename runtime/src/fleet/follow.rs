//! The daemon's fleet task: connects (retrying while NATS is away, the daemon running what it
//! has meanwhile), watches the releases bucket, has each guest converge to the newest release
//! of a group it follows and each new version judged during its rollback window (both
//! `converge`'s), and writes its health into the health bucket. A hostile release (malformed, unsigned, tampered,
//! oversized) is refused and reported; nothing here panics on what a peer wrote.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::buckets::{self, Buckets, FetchError};
use super::health::{DaemonInfo, GuestHealth, Refused};
use super::manifest::{Manifest, Reason};
use super::rollout::{Releases, Usage};
use super::{Component, Fleet, GuestHost};

/// How often health is judged (rollback) and counters looked at.
const TICK: Duration = Duration::from_millis(500);
/// Counters alone (no event) are written at most this often: 1,000 daemons x a few guests
/// stay at a few hundred puts a second on the server.
const COUNTERS_EVERY: Duration = Duration::from_secs(10);
/// The releases are read again in full this often, in case a watch missed something.
const RESYNC_EVERY: Duration = Duration::from_secs(30);

/// The task's memory (not persisted: rebuilt from the buckets on connect).
#[derive(Default)]
pub(super) struct Follow {
    pub(super) releases: Releases,
    /// Release keys whose value is not a manifest -> why.
    pub(super) malformed: BTreeMap<String, String>,
    /// Per guest inside its rollback window: counters at the swap, and when it was.
    pub(super) swapped: HashMap<String, (Usage, Instant)>,
    /// Per guest: counters at the last swap or rollback (health reports calls, failures and
    /// quarantines since then; kept after the window closed).
    pub(super) baseline: HashMap<String, Usage>,
    /// Per health key: what was written last, and when.
    pub(super) reported: HashMap<String, (GuestHealth, Instant)>,
    /// Per guest whose release was withdrawn but whose local version does not apply: the
    /// withdrawn hash it keeps running (not tried again until the releases change).
    pub(super) stuck: HashMap<String, String>,
    /// Per hash whose fetch failed for now: not before this, and the pause after that.
    pub(super) retry: HashMap<String, (Instant, Duration)>,
}

pub(super) fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Fleet {
    pub(super) fn follows(&self, group: &str) -> bool {
        self.cfg.follows(group)
    }

    /// This daemon's health entries, written when they changed (or, for counters only,
    /// every [`COUNTERS_EVERY`]).
    async fn report(&self, b: &Buckets, host: &Arc<dyn GuestHost>) -> Result<(), String> {
        let entries: Vec<(String, GuestHealth)> = {
            let state = crate::util::lock(&self.state).clone();
            let f = crate::util::lock(&self.follow);
            let mut guests: Vec<String> = state.guests.keys().cloned().collect();
            guests.extend(f.releases.values().map(|(_, m)| m.guest.clone()));
            guests.sort();
            guests.dedup();
            guests
                .into_iter()
                .map(|guest| {
                    let g = state.guests.get(&guest).cloned().unwrap_or_default();
                    let running = g.current.as_ref().map(|m| m.sha256.clone());
                    let usage = running
                        .as_deref()
                        .map(|h| {
                            let base = f.baseline.get(&guest).copied().unwrap_or_default();
                            host.usage(&guest, Some(h)).since(&base)
                        })
                        .unwrap_or_default();
                    let mut refused = g.refused.clone();
                    for (key, why) in &f.malformed {
                        if key.split('.').next() == Some(guest.as_str()) {
                            refused.push(Refused {
                                hash: format!("release {key}"),
                                sequence: None,
                                reason: Reason::Malformed,
                                detail: why.clone(),
                                at: 0,
                            });
                        }
                    }
                    let h = GuestHealth {
                        node: self.node.clone(),
                        guest: guest.clone(),
                        running,
                        since: g.since,
                        used: !host.uses(&guest).is_empty(),
                        calls: usage.calls,
                        failures: usage.failures,
                        quarantines: usage.quarantines,
                        refused,
                        rolled_back: g.rolled_back.clone(),
                        updated: 0,
                    };
                    (format!("{}.{guest}", self.node), h)
                })
                .collect()
        };
        for (key, mut h) in entries {
            let due = {
                let f = crate::util::lock(&self.follow);
                match f.reported.get(&key) {
                    None => true,
                    Some((last, at)) => {
                        let same_event = GuestHealth {
                            calls: h.calls,
                            failures: h.failures,
                            quarantines: h.quarantines,
                            ..last.clone()
                        } == h;
                        !same_event || (last != &h && at.elapsed() >= COUNTERS_EVERY)
                    }
                }
            };
            if !due {
                continue;
            }
            let unstamped = h.clone();
            h.updated = now();
            let body = serde_json::to_vec(&h).map_err(|e| e.to_string())?;
            tokio::time::timeout(buckets::OP_TIMEOUT, b.health.put(&key, body.into()))
                .await
                .map_err(|_| format!("writing {key}: timed out"))?
                .map_err(|e| format!("writing {key}: {e}"))?;
            crate::util::lock(&self.follow)
                .reported
                .insert(key, (unstamped, Instant::now()));
        }
        Ok(())
    }

    async fn put_info(&self, b: &Buckets) -> Result<(), String> {
        let info = DaemonInfo {
            node: self.node.clone(),
            groups: self.cfg.groups.clone(),
            signed_only: !self.keys.is_empty(),
            version: env!("CARGO_PKG_VERSION").into(),
            updated: now(),
        };
        let body = serde_json::to_vec(&info).map_err(|e| e.to_string())?;
        tokio::time::timeout(buckets::OP_TIMEOUT, b.health.put(&self.node, body.into()))
            .await
            .map_err(|_| "writing the daemon's entry: timed out".to_string())?
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// A release entry as the watch or a full read delivered it.
    fn note(&self, key: &str, revision: u64, op: kv::Operation, value: &[u8]) {
        let mut f = crate::util::lock(&self.follow);
        f.stuck.clear();
        if op != kv::Operation::Put {
            f.releases.remove(key);
            f.malformed.remove(key);
            return;
        }
        match Manifest::parse(value) {
            Ok(m) if key == super::buckets::release_key(&m.guest, &m.group) => {
                f.malformed.remove(key);
                f.releases.insert(key.to_string(), (revision, m));
            }
            Ok(m) => {
                f.releases.remove(key);
                f.malformed.insert(
                    key.to_string(),
                    format!(
                        "the manifest is for {} but stored under {key}",
                        super::buckets::release_key(&m.guest, &m.group)
                    ),
                );
            }
            Err(e) => {
                tracing::warn!(key, error = %e, "fleet: release entry refused");
                f.releases.remove(key);
                f.malformed.insert(key.to_string(), e.to_string());
            }
        }
    }

    async fn connect(&self) -> Result<Buckets, String> {
        let work = async {
            let client = buckets::connect(&self.cfg, &self.base)
                .await
                .map_err(|e| format!("{e:#}"))?;
            let js = async_nats::jetstream::new(client);
            buckets::open(&js, &self.cfg.name, self.cfg.replicas)
                .await
                .map_err(|e| format!("{e:#}"))
        };
        tokio::time::timeout(buckets::OP_TIMEOUT, work)
            .await
            .map_err(|_| "connecting timed out".to_string())?
    }

    /// Reads every release entry (replacing what the task knew).
    async fn resync(&self, b: &Buckets) -> Result<(), String> {
        // Strict: a key that cannot be listed or read fails the resync (the session starts
        // again), since a release missing from the list reads as withdrawn.
        let work = async {
            buckets::latest(&b.releases)
                .await
                .map_err(|e| format!("reading the releases: {e:#}"))
        };
        let entries = tokio::time::timeout(buckets::OP_TIMEOUT, work)
            .await
            .map_err(|_| "reading the releases timed out".to_string())??;
        {
            let mut f = crate::util::lock(&self.follow);
            f.releases.clear();
            f.malformed.clear();
        }
        for e in entries {
            self.note(&e.key, e.revision, e.operation, &e.value);
        }
        Ok(())
    }

    /// One connection's life: watch, converge, judge, report, until NATS goes away.
    async fn session(
        self: &Arc<Self>,
        host: &Arc<dyn GuestHost>,
        shutdown: &CancellationToken,
        health: &crate::supervise::Health,
    ) -> Result<(), String> {
        let b = self.connect().await?;
        *self.buckets.lock().await = Some(b.clone());
        self.connected.store(true, Ordering::Relaxed);
        health.working();
        crate::util::lock(&self.follow).reported.clear();
        self.put_info(&b).await?;
        self.resync(&b).await?;
        self.converge(&b, host).await;
        self.report(&b, host).await?;
        let mut watch = b
            .releases
            .watch_all()
            .await
            .map_err(|e| format!("watching the releases: {e}"))?;
        let mut tick = tokio::time::interval(TICK);
        let mut resynced = Instant::now();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                e = watch.next() => match e {
                    Some(Ok(e)) => {
                        self.note(&e.key, e.revision, e.operation, &e.value);
                        if e.delta == 0 {
                            self.converge(&b, host).await;
                            self.report(&b, host).await?;
                        }
                    }
                    Some(Err(e)) => return Err(format!("watching the releases: {e}")),
                    None => return Err("the releases watch ended".into()),
                },
                _ = tick.tick() => {
                    self.judge(host).await;
                    if resynced.elapsed() >= RESYNC_EVERY {
                        resynced = Instant::now();
                        self.resync(&b).await?;
                        self.put_info(&b).await?;
                    }
                    // Transient fetch failures are retried here.
                    self.converge(&b, host).await;
                    self.report(&b, host).await?;
                }
            }
        }
    }
}

/// At start, before the pipelines take samples: the fleet's current versions for this
/// daemon's groups, verified and kept on disk, put in the overlay (at most `start-wait`;
/// without NATS the daemon starts on what it kept). The daemon's first apply then runs
/// them; what it refuses goes back through [`Fleet::revert_at_start`].
pub async fn prefetch(fleet: &Arc<Fleet>) {
    let work = async {
        let b = fleet.connect().await?;
        fleet.resync(&b).await?;
        // Withdrawn while this daemon was down: its local version from the first apply on.
        for guest in fleet.forget_withdrawn() {
            fleet.set_overlay(&guest, None);
            fleet.forget_current(&guest);
        }
        for m in fleet.wanted() {
            let known = {
                let state = crate::util::lock(&fleet.state);
                state.guests.get(&m.guest).is_some_and(|g| {
                    g.refuses(&m) || g.current.as_ref().is_some_and(|c| c.sha256 == m.sha256)
                })
            };
            if known {
                continue;
            }
            match fleet.obtain(&b, &m).await {
                Ok(bytes) => {
                    let _ = fleet.local.keep(&m.sha256, &bytes);
                    fleet.set_overlay(
                        &m.guest,
                        Some(Component {
                            hash: m.sha256.clone(),
                            bytes: Arc::new(bytes),
                        }),
                    );
                    let mut state = crate::util::lock(&fleet.state);
                    let g = state.guests.entry(m.guest.clone()).or_default();
                    g.previous = g.current.take();
                    g.current = Some(m.clone());
                    g.since = now();
                }
                Err(FetchError::Refused(r)) => fleet.refuse(&m, &r),
                Err(FetchError::Transient(e)) => {
                    tracing::warn!(guest = %m.guest, error = %e, "fleet: fetch at start failed")
                }
            }
        }
        fleet.save();
        Ok::<_, String>(())
    };
    match tokio::time::timeout(fleet.cfg.start_wait, work).await {
        Ok(Ok(())) => {
            tracing::info!(fleet = %fleet.cfg.name, "fleet: current versions fetched before start")
        }
        Ok(Err(e)) => {
            tracing::warn!(fleet = %fleet.cfg.name, error = %e, "fleet: NATS unavailable at start; running the last verified versions")
        }
        Err(_) => {
            tracing::warn!(fleet = %fleet.cfg.name, "fleet: NATS did not answer within start-wait; running the last verified versions")
        }
    }
}

/// Follows the fleet until `shutdown`: sessions, retried while NATS is away. Each session
/// runs as a supervised task (`fleet`), so a panic in it (async-nats' object store has
/// unwrapped a timeout while a release was fetched) ends that session only: it is counted,
/// shown in `/api/fleet` and `/api/healthcheck`, and a new session starts.
pub fn spawn(
    fleet: Arc<Fleet>,
    host: Arc<dyn GuestHost>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let name = task_name(&fleet.cfg.name);
    crate::supervise::spawn(&name, shutdown.clone(), move |health| {
        let (fleet, host, shutdown) = (fleet.clone(), host.clone(), shutdown.clone());
        async move {
            // Not connected once this session ends, however it ends (a panic included).
            let _down = Disconnected(fleet.clone());
            *fleet.buckets.lock().await = None;
            fleet.session(&host, &shutdown, &health).await
        }
    })
}

/// The follower's name among the supervised tasks.
pub(super) fn task_name(fleet: &str) -> String {
    format!("fleet {fleet}")
}

/// Marks the fleet disconnected when dropped.
struct Disconnected(Arc<Fleet>);

impl Drop for Disconnected {
    fn drop(&mut self) {
        self.0.connected.store(false, Ordering::Relaxed);
        if let Ok(mut b) = self.0.buckets.try_lock() {
            *b = None;
        }
    }
}
