//! Converging one daemon to the fleet: which release each guest should run, taking a release
//! (verify the signature and the sequence, fetch, check the hash and the world, compile,
//! swap through the daemon), refusing one, judging a new version in its rollback window and
//! rolling it back, and going back to the local version when a release is withdrawn. The
//! connection, the watch and the health reports are `follow`'s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::buckets::{self, Buckets, FetchError};
use super::follow::now;
use super::health::{Refused, Rollback};
use super::manifest::{Manifest, Reason, Refusal};
use super::rollout::{self, Usage, Verdict};
use super::{Component, Fleet, GuestHost};

/// Pauses before a failed fetch (an object missing, NATS busy) is tried again: doubling up
/// to the last, so 1,000 daemons do not ask twice a second for an object that is not there.
const FETCH_RETRY_FIRST: Duration = Duration::from_secs(1);
const FETCH_RETRY_MAX: Duration = Duration::from_secs(60);

impl Fleet {
    pub(super) fn save(&self) {
        let state = crate::util::lock(&self.state).clone();
        if let Err(e) = self.local.save(&state) {
            tracing::error!(error = %e, "fleet: cannot save the rollout state");
        }
        self.local.prune(&state);
    }

    /// Records a refusal of `m` (the running version is untouched).
    pub(super) fn refuse(&self, m: &Manifest, r: &Refusal) {
        tracing::warn!(guest = %m.guest, hash = %m.sha256, group = %m.group, reason = r.reason.as_str(), detail = %r.detail, "fleet: version refused");
        crate::util::lock(&self.state)
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

    pub(super) fn set_overlay(&self, guest: &str, c: Option<Component>) {
        let mut o = crate::util::write(&self.overlay);
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
            let state = crate::util::lock(&self.state);
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
            let mut state = crate::util::lock(&self.state);
            let g = state.guests.entry(guest.to_string()).or_default();
            g.current = if back.is_some() { previous } else { None };
            g.previous = None;
            g.since = now();
        }
        self.save();
        true
    }

    /// Verifies and fetches `m` (from disk if kept): the bytes, or why not.
    pub(super) async fn obtain(&self, b: &Buckets, m: &Manifest) -> Result<Vec<u8>, FetchError> {
        m.verify(&self.cfg.name, &self.keys)?;
        // Only a verified sequence counts: checked, then remembered, before any byte is read.
        {
            let mut state = crate::util::lock(&self.state);
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
                let mut f = crate::util::lock(&self.follow);
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
        crate::util::lock(&self.follow).retry.remove(&m.sha256);
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
        let saved = crate::util::lock(&self.state).guests.get(&guest).cloned();
        {
            let mut state = crate::util::lock(&self.state);
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
            let applied = reapply(host, &guest).await;
            if let Err(e) = applied {
                self.set_overlay(&guest, before);
                {
                    let mut state = crate::util::lock(&self.state);
                    match saved {
                        Some(g) => state.guests.insert(guest.clone(), g),
                        None => state.guests.remove(&guest),
                    };
                }
                let _ = reapply(host, &guest).await;
                return self.refuse(m, &Refusal::new(Reason::Configure, e));
            }
        }
        {
            let mut f = crate::util::lock(&self.follow);
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
            let state = crate::util::lock(&self.state);
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
        let _ = reapply(host, guest).await;
        tracing::warn!(guest, from = %current.sha256, to = ?to, detail = %why.detail, "fleet: rolled back");
        self.refuse(&current, &why);
        {
            let mut state = crate::util::lock(&self.state);
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
        let mut f = crate::util::lock(&self.follow);
        f.swapped.remove(guest);
        f.baseline.insert(guest.to_string(), baseline);
    }

    /// The release each published guest should run on this daemon, by its groups.
    pub(super) fn wanted(&self) -> Vec<Manifest> {
        let f = crate::util::lock(&self.follow);
        let mut guests: Vec<&str> = f.releases.values().map(|(_, m)| m.guest.as_str()).collect();
        guests.sort();
        guests.dedup();
        guests
            .into_iter()
            .filter_map(|g| rollout::desired(&f.releases, g, |x| self.follows(x)).cloned())
            .collect()
    }

    /// Every guest to its desired release.
    pub(super) async fn converge(&self, b: &Buckets, host: &Arc<dyn GuestHost>) {
        for guest in self.forget_withdrawn() {
            self.back_to_local(host, &guest).await;
        }
        for m in self.wanted() {
            let later = crate::util::lock(&self.follow)
                .retry
                .get(&m.sha256)
                .is_some_and(|(at, _)| Instant::now() < *at);
            let (skip, renamed) = if later {
                (true, false)
            } else {
                let mut state = crate::util::lock(&self.state);
                match state.guests.get_mut(&m.guest) {
                    Some(g) if g.refuses(&m) => (true, false),
                    Some(g) if g.current.as_ref().is_some_and(|c| c.sha256 == m.sha256) => {
                        // The bytes it runs, under another release (published to `all`
                        // after the canary, or the canary release withdrawn): that release
                        // is the one it runs now, once it verifies.
                        let other = g.current.as_ref() != Some(&m)
                            && m.verify(&self.cfg.name, &self.keys).is_ok()
                            && m.replayed(g.taken.get(&m.group)).is_none();
                        if other {
                            g.take(&m);
                            g.current = Some(m.clone());
                        }
                        (true, other)
                    }
                    _ => (false, false),
                }
            };
            if renamed {
                self.save();
            }
            if !skip {
                self.adopt(b, host, &m).await;
            }
        }
    }

    /// Releases withdrawn (their key gone from the releases bucket): the same release put
    /// back later is a replay (its group's sequence is closed), a withdrawn previous version
    /// is no rollback target, and a guest whose running release is withdrawn with no other
    /// release for it here (or only refused ones) is returned, to go back to its local
    /// version.
    pub(super) fn forget_withdrawn(&self) -> Vec<String> {
        let f = crate::util::lock(&self.follow);
        let present = |m: &Manifest| {
            f.releases
                .contains_key(&buckets::release_key(&m.guest, &m.group))
                || f.malformed
                    .contains_key(&buckets::release_key(&m.guest, &m.group))
        };
        let mut back = Vec::new();
        let mut changed = false;
        let mut state = crate::util::lock(&self.state);
        for (guest, g) in state.guests.iter_mut() {
            if g.previous.as_ref().is_some_and(|p| !present(p)) {
                g.previous = None;
                changed = true;
            }
            let Some(c) = g.current.clone().filter(|c| !present(c)) else {
                continue;
            };
            if let (Some(seq), Some(t)) = (c.sequence, g.taken.get_mut(&c.group))
                && t.0 == seq
                && !t.1.is_empty()
            {
                t.1 = String::new();
                changed = true;
            }
            // Nothing else to run: no release left for this daemon's groups, or only one
            // it refused (a stale release put back under `all`, say).
            let stuck = f.stuck.get(guest) == Some(&c.sha256);
            let other = rollout::desired(&f.releases, guest, |x| self.follows(x));
            if !stuck && other.is_none_or(|m| g.refuses(m)) {
                back.push(guest.clone());
            }
        }
        drop(state);
        drop(f);
        if changed {
            self.save();
        }
        back
    }

    /// A withdrawn release: back to what the guest name resolves to without the fleet
    /// (guests-dir or bundled). Where that fails (no local version, or one that does not
    /// apply) the withdrawn version keeps running, logged, until the releases change.
    async fn back_to_local(&self, host: &Arc<dyn GuestHost>, guest: &str) {
        let Some(current) = self.component(guest) else {
            // Kept and verified but never run (its bytes were not kept): just forget it.
            self.forget_current(guest);
            return;
        };
        self.set_overlay(guest, None);
        let baseline = host.usage(guest, None);
        if !host.uses(guest).is_empty() {
            let applied = reapply(host, guest).await;
            if let Err(e) = applied {
                self.set_overlay(guest, Some(current.clone()));
                tracing::warn!(guest, hash = %current.hash, error = %e, "fleet: release withdrawn, but the guest's local version does not apply: the withdrawn version keeps running");
                crate::util::lock(&self.follow)
                    .stuck
                    .insert(guest.to_string(), current.hash);
                return;
            }
        }
        self.forget_current(guest);
        let mut f = crate::util::lock(&self.follow);
        f.swapped.remove(guest);
        f.baseline.insert(guest.to_string(), baseline);
        tracing::info!(guest, hash = %current.hash, "fleet: release withdrawn; back to the local version");
    }

    pub(super) fn forget_current(&self, guest: &str) {
        {
            let mut state = crate::util::lock(&self.state);
            let g = state.guests.entry(guest.to_string()).or_default();
            g.current = None;
            g.previous = None;
            g.since = now();
        }
        self.save();
    }

    /// Rolls back versions quarantined inside their window.
    pub(super) async fn judge(&self, host: &Arc<dyn GuestHost>) {
        let watching: Vec<(String, Usage, Instant)> = crate::util::lock(&self.follow)
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
                    crate::util::lock(&self.follow).swapped.remove(&guest);
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
}

/// `host.reapply(guest)` on the blocking pool (it builds guests): its error, or the task's.
async fn reapply(host: &Arc<dyn GuestHost>, guest: &str) -> Result<(), String> {
    let (h, g) = (host.clone(), guest.to_string());
    tokio::task::spawn_blocking(move || h.reapply(&g))
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
}
