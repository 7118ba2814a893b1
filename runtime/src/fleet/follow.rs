//! The daemon's fleet task: connects (retrying while NATS is away, the daemon running what it
//! has meanwhile), watches the releases bucket, converges each guest to the newest release of
//! a group it follows (verify the signature, fetch, check the hash, check the world, compile,
//! swap through the daemon), judges each new version during its rollback window, and writes
//! its health into the health bucket. A hostile release (malformed, unsigned, tampered,
//! oversized) is refused and reported; nothing here panics on what a peer wrote.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::buckets::{self, Buckets, FetchError};
use super::health::{DaemonInfo, GuestHealth, Refused, Rollback};
use super::manifest::{Manifest, Reason, Refusal};
use super::rollout::{self, Releases, Usage, Verdict};
use super::{Component, Fleet, GuestHost};

/// How often health is judged (rollback) and counters looked at.
const TICK: Duration = Duration::from_millis(500);
/// Counters alone (no event) are written at most this often: 1,000 daemons x a few guests
/// stay at a few hundred puts a second on the server.
const COUNTERS_EVERY: Duration = Duration::from_secs(10);
/// The releases are read again in full this often, in case a watch missed something.
const RESYNC_EVERY: Duration = Duration::from_secs(30);
/// Pauses between connection attempts: from the first to the longest.
const RETRY_FIRST: Duration = Duration::from_millis(500);
const RETRY_MAX: Duration = Duration::from_secs(3);
/// Pauses before a failed fetch (an object missing, NATS busy) is tried again: doubling up
/// to the last, so 1,000 daemons do not ask twice a second for an object that is not there.
const FETCH_RETRY_FIRST: Duration = Duration::from_secs(1);
const FETCH_RETRY_MAX: Duration = Duration::from_secs(60);

/// The task's memory (not persisted: rebuilt from the buckets on connect).
#[derive(Default)]
pub(super) struct Follow {
    releases: Releases,
    /// Release keys whose value is not a manifest -> why.
    malformed: BTreeMap<String, String>,
    /// Per guest inside its rollback window: counters at the swap, and when it was.
    swapped: HashMap<String, (Usage, Instant)>,
    /// Per guest: counters at the last swap or rollback (health reports calls, failures and
    /// quarantines since then; kept after the window closed).
    baseline: HashMap<String, Usage>,
    /// Per health key: what was written last, and when.
    reported: HashMap<String, (GuestHealth, Instant)>,
    /// Per hash whose fetch failed for now: not before this, and the pause after that.
    retry: HashMap<String, (Instant, Duration)>,
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

impl Fleet {
    fn follows(&self, group: &str) -> bool {
        self.cfg.follows(group)
    }

    fn save(&self) {
        let state = self.state.lock().unwrap().clone();
        if let Err(e) = self.local.save(&state) {
            tracing::error!(error = %e, "fleet: cannot save the rollout state");
        }
        self.local.prune(&state);
    }

    /// Records a refusal of `m` (the running version is untouched).
    fn refuse(&self, m: &Manifest, r: &Refusal) {
        tracing::warn!(guest = %m.guest, hash = %m.sha256, group = %m.group, reason = r.reason.as_str(), detail = %r.detail, "fleet: version refused");
        self.state
            .lock()
            .unwrap()
            .guests
            .entry(m.guest.clone())
            .or_default()
            .push_refusal(Refused {
                hash: m.sha256.clone(),
                sequence: m.sequence,
                reason: r.reason,
                detail: r.detail.clone(),
                at: now(),
            });
        self.save();
    }

    /// The overlay entry of a release kept on disk (`None`: the guest's local version).
    fn component_of(&self, m: Option<&Manifest>) -> Option<Component> {
        let m = m?;
        let bytes = self.local.component(m)?;
        Some(Component {
            hash: m.sha256.clone(),
            bytes: Arc::new(bytes),
        })
    }

    fn set_overlay(&self, guest: &str, c: Option<Component>) {
        let mut o = self.overlay.write().unwrap();
        match c {
            Some(c) => o.insert(guest.to_string(), c),
            None => o.remove(guest),
        };
    }

    /// At start, a fleet version a part refused (`guest` named by that part): back to the
    /// version before it, the refusal recorded. Returns whether anything was reverted (the
    /// daemon then applies its config again).
    pub fn revert_at_start(&self, guest: &str, error: &str) -> bool {
        let (current, previous) = {
            let state = self.state.lock().unwrap();
            match state.guests.get(guest) {
                Some(g) if g.current.is_some() => (g.current.clone(), g.previous.clone()),
                _ => return false,
            }
        };
        let Some(current) = current else { return false };
        if self.component(guest).is_none() {
            return false;
        }
        let reason = if error.contains("does not fit the") {
            Reason::WrongWorld
        } else if error.contains("compil") {
            Reason::Compile
        } else {
            Reason::Configure
        };
        self.refuse(&current, &Refusal::new(reason, error.to_string()));
        let back = self.component_of(previous.as_ref());
        self.set_overlay(guest, back.clone());
        {
            let mut state = self.state.lock().unwrap();
            let g = state.guests.entry(guest.to_string()).or_default();
            g.current = if back.is_some() { previous } else { None };
            g.previous = None;
            g.since = now();
        }
        self.save();
        true
    }

    /// Verifies and fetches `m` (from disk if kept): the bytes, or why not.
    async fn obtain(&self, b: &Buckets, m: &Manifest) -> Result<Vec<u8>, FetchError> {
        m.verify(&self.cfg.name, &self.keys)?;
        // Only a verified sequence counts: checked, then remembered, before any byte is read.
        {
            let mut state = self.state.lock().unwrap();
            let g = state.guests.entry(m.guest.clone()).or_default();
            if let Some(r) = m.replayed(g.taken.get(&m.group)) {
                return Err(r.into());
            }
            g.take(m);
        }
        if let Some(bytes) = self.local.component(m) {
            return Ok(bytes);
        }
        buckets::fetch(b, m, self.cfg.max_component_size).await
    }

    /// Makes `m` the running version of its guest, or refuses it.
    async fn adopt(&self, b: &Buckets, host: &Arc<dyn GuestHost>, m: &Manifest) {
        let guest = m.guest.clone();
        let started = Instant::now();
        let bytes = match self.obtain(b, m).await {
            Ok(b) => b,
            Err(FetchError::Refused(r)) => return self.refuse(m, &r),
            Err(FetchError::Transient(e)) => {
                let mut f = self.follow.lock().unwrap();
                let pause = f
                    .retry
                    .get(&m.sha256)
                    .map(|(_, p)| (*p * 2).min(FETCH_RETRY_MAX))
                    .unwrap_or(FETCH_RETRY_FIRST);
                f.retry
                    .insert(m.sha256.clone(), (Instant::now() + pause, pause));
                tracing::warn!(guest, hash = %m.sha256, error = %e, retry_in = ?pause, "fleet: fetch failed");
                return;
            }
        };
        self.follow.lock().unwrap().retry.remove(&m.sha256);
        let fetched = started.elapsed();
        let uses = host.uses(&guest);
        if !uses.is_empty() {
            match crate::host::check::inspect(&bytes) {
                Ok(report) if report.world.is_some_and(|w| uses.contains(&w)) => {}
                Ok(report) => {
                    let is = report.world.map(|w| w.name()).unwrap_or("no world");
                    let want: Vec<&str> = uses.iter().map(|w| w.name()).collect();
                    let mut detail = format!(
                        "the component is {is}; this daemon uses {guest} as {}",
                        want.join(" and ")
                    );
                    if let Some(p) = report.problems.first() {
                        detail.push_str(&format!(" ({p})"));
                    }
                    return self.refuse(m, &Refusal::new(Reason::WrongWorld, detail));
                }
                Err(e) => {
                    return self.refuse(m, &Refusal::new(Reason::Compile, format!("{e:#}")));
                }
            }
            let (h, what, bytes2) = (host.clone(), format!("fleet guest {guest}"), bytes.clone());
            let compiled = tokio::task::spawn_blocking(move || h.compile(&bytes2, &what)).await;
            match compiled {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return self.refuse(m, &Refusal::new(Reason::Compile, e)),
                Err(e) => return self.refuse(m, &Refusal::new(Reason::Compile, e.to_string())),
            }
        }
        let compiled = started.elapsed();
        if let Err(e) = self.local.keep(&m.sha256, &bytes) {
            tracing::error!(error = %e, "fleet: cannot keep the component on disk");
        }
        let before = self.component(&guest);
        let new = Component {
            hash: m.sha256.clone(),
            bytes: Arc::new(bytes),
        };
        // The state goes to disk before the swap: a daemon killed right after it restarts
        // on this version (verified and compiled; a refusal at start reverts it).
        let saved = self.state.lock().unwrap().guests.get(&guest).cloned();
        {
            let mut state = self.state.lock().unwrap();
            let g = state.guests.entry(guest.clone()).or_default();
            let old = g.current.take();
            g.previous = old;
            g.current = Some(m.clone());
            g.since = now();
        }
        self.save();
        // Counters are cumulative per stage across versions: what they were before the swap.
        let baseline = host.usage(&guest, None);
        self.set_overlay(&guest, Some(new));
        if !uses.is_empty() {
            let h = host.clone();
            let g = guest.clone();
            let applied = tokio::task::spawn_blocking(move || h.reapply(&g))
                .await
                .unwrap_or_else(|e| Err(e.to_string()));
            if let Err(e) = applied {
                self.set_overlay(&guest, before);
                {
                    let mut state = self.state.lock().unwrap();
                    match saved {
                        Some(g) => state.guests.insert(guest.clone(), g),
                        None => state.guests.remove(&guest),
                    };
                }
                let h = host.clone();
                let g = guest.clone();
                let _ = tokio::task::spawn_blocking(move || h.reapply(&g)).await;
                return self.refuse(m, &Refusal::new(Reason::Configure, e));
            }
        }
        {
            let mut f = self.follow.lock().unwrap();
            f.swapped.insert(guest.clone(), (baseline, Instant::now()));
            f.baseline.insert(guest.clone(), baseline);
        }
        tracing::info!(
            guest, hash = %m.sha256, group = %m.group, size = m.size,
            fetch_ms = fetched.as_millis() as u64,
            compile_ms = (compiled - fetched).as_millis() as u64,
            total_ms = started.elapsed().as_millis() as u64,
            "fleet: version running"
        );
    }

    /// Back from the running version of `guest` to the one before it; `usage`: what the
    /// failed version saw since its swap (reported with the rollback).
    async fn roll_back(&self, host: &Arc<dyn GuestHost>, guest: &str, why: Refusal, usage: Usage) {
        let (current, previous) = {
            let state = self.state.lock().unwrap();
            let Some(g) = state.guests.get(guest) else {
                return;
            };
            (g.current.clone(), g.previous.clone())
        };
        let Some(current) = current else { return };
        let back = self.component_of(previous.as_ref());
        let to = back.as_ref().map(|c| c.hash.clone());
        self.set_overlay(guest, back.clone());
        let baseline = host.usage(guest, None);
        let h = host.clone();
        let g = guest.to_string();
        let _ = tokio::task::spawn_blocking(move || h.reapply(&g)).await;
        tracing::warn!(guest, from = %current.sha256, to = ?to, detail = %why.detail, "fleet: rolled back");
        self.refuse(&current, &why);
        {
            let mut state = self.state.lock().unwrap();
            let g = state.guests.entry(guest.to_string()).or_default();
            g.current = if back.is_some() { previous } else { None };
            g.previous = None;
            g.since = now();
            g.rolled_back = Some(Rollback {
                from: current.sha256.clone(),
                to,
                reason: why.reason,
                at: now(),
                calls: usage.calls,
                failures: usage.failures,
                quarantines: usage.quarantines,
            });
        }
        self.save();
        let mut f = self.follow.lock().unwrap();
        f.swapped.remove(guest);
        f.baseline.insert(guest.to_string(), baseline);
    }

    /// Every guest to its desired release.
    async fn converge(&self, b: &Buckets, host: &Arc<dyn GuestHost>) {
        let wanted: Vec<Manifest> = {
            let f = self.follow.lock().unwrap();
            let mut guests: Vec<&str> =
                f.releases.values().map(|(_, m)| m.guest.as_str()).collect();
            guests.sort();
            guests.dedup();
            guests
                .into_iter()
                .filter_map(|g| rollout::desired(&f.releases, g, |x| self.follows(x)).cloned())
                .collect()
        };
        for m in wanted {
            let later = self
                .follow
                .lock()
                .unwrap()
                .retry
                .get(&m.sha256)
                .is_some_and(|(at, _)| Instant::now() < *at);
            let skip = later || {
                let state = self.state.lock().unwrap();
                state.guests.get(&m.guest).is_some_and(|g| {
                    g.refuses(&m) || g.current.as_ref().is_some_and(|c| c.sha256 == m.sha256)
                })
            };
            if !skip {
                self.adopt(b, host, &m).await;
            }
        }
    }

    /// Rolls back versions quarantined inside their window.
    async fn judge(&self, host: &Arc<dyn GuestHost>) {
        let watching: Vec<(String, Usage, Instant)> = self
            .follow
            .lock()
            .unwrap()
            .swapped
            .iter()
            .map(|(g, (u, t))| (g.clone(), *u, *t))
            .collect();
        for (guest, baseline, at) in watching {
            let Some(hash) = self.component(&guest).map(|c| c.hash) else {
                continue;
            };
            let usage = host.usage(&guest, Some(&hash)).since(&baseline);
            match rollout::judge(at.elapsed(), self.cfg.rollback_window, &usage) {
                Verdict::Watch => {}
                Verdict::Settled => {
                    self.follow.lock().unwrap().swapped.remove(&guest);
                }
                Verdict::RollBack => {
                    let why = Refusal::new(
                        Reason::Quarantined,
                        format!(
                            "quarantined {:.1}s after the swap ({} calls, {} failed); rolled back",
                            at.elapsed().as_secs_f64(),
                            usage.calls,
                            usage.failures
                        ),
                    );
                    self.roll_back(host, &guest, why, usage).await;
                }
            }
        }
    }

    /// This daemon's health entries, written when they changed (or, for counters only,
    /// every [`COUNTERS_EVERY`]).
    async fn report(&self, b: &Buckets, host: &Arc<dyn GuestHost>) -> Result<(), String> {
        let entries: Vec<(String, GuestHealth)> = {
            let state = self.state.lock().unwrap().clone();
            let f = self.follow.lock().unwrap();
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
                let f = self.follow.lock().unwrap();
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
            self.follow
                .lock()
                .unwrap()
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
        let mut f = self.follow.lock().unwrap();
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
            buckets::open(&js, &self.cfg.name)
                .await
                .map_err(|e| format!("{e:#}"))
        };
        tokio::time::timeout(buckets::OP_TIMEOUT, work)
            .await
            .map_err(|_| "connecting timed out".to_string())?
    }

    /// Reads every release entry (replacing what the task knew).
    async fn resync(&self, b: &Buckets) -> Result<(), String> {
        let work = async {
            let mut keys: Vec<String> = b
                .releases
                .keys()
                .await
                .map_err(|e| e.to_string())?
                .filter_map(|k| async move { k.ok() })
                .collect()
                .await;
            keys.sort();
            let mut entries = Vec::new();
            for k in keys {
                if let Ok(Some(e)) = b.releases.entry(&k).await {
                    entries.push(e);
                }
            }
            Ok::<_, String>(entries)
        };
        let entries = tokio::time::timeout(buckets::OP_TIMEOUT, work)
            .await
            .map_err(|_| "reading the releases timed out".to_string())??;
        {
            let mut f = self.follow.lock().unwrap();
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
    ) -> Result<(), String> {
        let b = self.connect().await?;
        *self.buckets.lock().await = Some(b.clone());
        self.connected.store(true, Ordering::Relaxed);
        self.follow.lock().unwrap().reported.clear();
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
        let wanted: Vec<Manifest> = {
            let f = fleet.follow.lock().unwrap();
            let mut guests: Vec<&str> =
                f.releases.values().map(|(_, m)| m.guest.as_str()).collect();
            guests.sort();
            guests.dedup();
            guests
                .into_iter()
                .filter_map(|g| rollout::desired(&f.releases, g, |x| fleet.follows(x)).cloned())
                .collect()
        };
        for m in wanted {
            let known = {
                let state = fleet.state.lock().unwrap();
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
                    let mut state = fleet.state.lock().unwrap();
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

/// Follows the fleet until `shutdown`: sessions, retried while NATS is away.
pub fn spawn(
    fleet: Arc<Fleet>,
    host: Arc<dyn GuestHost>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut pause = RETRY_FIRST;
        loop {
            let started = Instant::now();
            match fleet.session(&host, &shutdown).await {
                Ok(()) => return,
                Err(e) => {
                    tracing::warn!(fleet = %fleet.cfg.name, error = %e, "fleet: disconnected; retrying")
                }
            }
            fleet.connected.store(false, Ordering::Relaxed);
            *fleet.buckets.lock().await = None;
            if started.elapsed() > Duration::from_secs(30) {
                pause = RETRY_FIRST;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(RETRY_MAX);
        }
    })
}
