//! The procfs detectors: every poll reads /proc once (only the fields the enabled detectors
//! need), feeds all `proc.*` samples to the notifier, derives `proc.cpu.percent` (CPU hog) and
//! `proc.thread.blocked` (deadlock smoke alarm), and forgets pids that exited.
//!
//! Alarms are ordinary notifier thresholds registered at start under the configured
//! subscribers, so they are edge-triggered, listed, streamed and logged like any other:
//! - CPU hog: a global rising threshold at `percent` on `proc.cpu.percent`.
//! - Blocked thread: `proc.thread.blocked` (instance `PID/TID`) is the time a thread has been
//!   continuously blocked; a global rising threshold at `after` fires once per blocking episode.
//!   An episode ends when the thread is seen unblocked or is seen to have run between two polls
//!   (its schedstat run time moved), which re-arms the threshold.
//! - Limits: thresholds on `proc.fd.count`, `proc.mem.rss`, `proc.thread.count`.
//!
//! Owns only its own state; touches the notifier through its public API.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::config::{LimitResource, ProcfsConfig};
use super::reader::{ProcError, ProcReader, Scope};
use super::samples::{for_each_sample, instance_name, metrics};
use super::{Fields, Snapshot, ThreadInfo};
use crate::notify::{Handle, Notifier, NotifyError, Selector, ThresholdSpec};

#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    #[error("procfs config: {0}")]
    Config(String),
    #[error("registering a detector threshold: {0}")]
    Notify(#[from] NotifyError),
    #[error(transparent)]
    Proc(#[from] ProcError),
    #[error("detector poll panicked: {0}")]
    Panicked(String),
}

/// One blocking episode of a thread.
struct Episode {
    since: Instant,
    /// schedstat run time when the episode started; a change means the thread ran.
    run_ns: Option<u64>,
    /// Start time of the thread, so a reused tid starts a new episode.
    starttime: u64,
    /// Poll generation in which it was last seen blocked.
    seen: u64,
}

/// The detectors' state between polls. Deletes its thresholds when dropped.
pub struct Detectors {
    notifier: Arc<Notifier>,
    cfg: ProcfsConfig,
    fields: Fields,
    threads: bool,
    reader: ProcReader,
    snap: Snapshot,
    handles: Vec<Handle>,
    block_states: Vec<u8>,
    cpu_prev: HashMap<u32, (u64, u64)>,
    cpu_next: HashMap<u32, (u64, u64)>,
    prev_at: Option<Instant>,
    episodes: HashMap<(u32, u32), Episode>,
    generation: u64,
    alive: HashSet<u32>,
    alive_next: HashSet<u32>,
    alive_threads: HashSet<(u32, u32)>,
    alive_threads_next: HashSet<(u32, u32)>,
    inst: Vec<u8>,
}

impl Detectors {
    /// Validate the config and register the detectors' thresholds.
    pub fn new(notifier: Arc<Notifier>, cfg: ProcfsConfig) -> Result<Self, DetectError> {
        let mut block_states = Vec::new();
        for s in &cfg.blocked.states {
            match s.as_bytes() {
                [c] if c.is_ascii_alphabetic() => block_states.push(*c),
                _ => {
                    return Err(DetectError::Config(format!(
                        "blocked state {s:?} is not one letter"
                    )));
                }
            }
        }
        if cfg.interval.is_zero() {
            return Err(DetectError::Config("interval must be > 0".into()));
        }
        let mut fields = Fields::NONE;
        for name in &cfg.fields {
            fields |= Fields::from_name(name)
                .ok_or_else(|| DetectError::Config(format!("unknown field group {name:?}")))?;
        }
        let mut det = Detectors {
            notifier,
            fields,
            threads: cfg.threads || cfg.blocked.enabled,
            reader: ProcReader::new(),
            snap: Snapshot::default(),
            handles: Vec::new(),
            block_states,
            cpu_prev: HashMap::new(),
            cpu_next: HashMap::new(),
            prev_at: None,
            episodes: HashMap::new(),
            generation: 0,
            alive: HashSet::new(),
            alive_next: HashSet::new(),
            alive_threads: HashSet::new(),
            alive_threads_next: HashSet::new(),
            inst: Vec::with_capacity(24),
            cfg,
        };
        // On error, `det` drops and deletes what was registered so far.
        let cfg = det.cfg.clone();
        if cfg.cpu_hog.enabled {
            fields |= Fields::CPU;
            let spec =
                ThresholdSpec::rising(Selector::any(metrics::CPU_PERCENT), cfg.cpu_hog.percent)
                    .with_hysteresis(cfg.cpu_hog.hysteresis);
            det.handles.push(det.notifier.add(&cfg.subscriber, spec)?);
        }
        if cfg.blocked.enabled {
            fields |= Fields::STATE | Fields::SCHED;
            if !cfg.blocked.wchan.is_empty() {
                fields |= Fields::WCHAN;
            }
            let spec = ThresholdSpec::rising(
                Selector::any(metrics::THREAD_BLOCKED),
                cfg.blocked.after.as_secs_f64(),
            );
            det.handles
                .push(det.notifier.add(&cfg.blocked.subscriber, spec)?);
            let window = (!cfg.blocked.batch_window.is_zero()).then_some(cfg.blocked.batch_window);
            det.notifier
                .subscriber(&cfg.blocked.subscriber)
                .set_batch_window(window);
        }
        for l in &cfg.limits {
            fields |= match l.resource {
                LimitResource::FdCount => Fields::FD,
                LimitResource::Rss => Fields::MEM,
                LimitResource::Threads => Fields::NONE,
            };
            let selector = match l.pid {
                Some(pid) => Selector::instance(l.resource.metric(), pid.to_string()),
                None => Selector::any(l.resource.metric()),
            };
            let spec = ThresholdSpec {
                selector,
                value: l.value,
                direction: l.direction,
                hysteresis: l.hysteresis,
            };
            det.handles.push(det.notifier.add(&cfg.subscriber, spec)?);
        }
        det.fields = fields;
        // Pass after pass over the same tasks: their files stay open between passes.
        det.reader.keep_files();
        // Threads are read for the blocked-thread detector alone: it needs the run time of a
        // thread in a blocking state only (whether it ran between two passes), so the others'
        // schedstat is not read (half the files a pass opens).
        if cfg.blocked.enabled && cfg.blocked.wchan.is_empty() && !cfg.threads {
            det.reader
                .thread_sched_only_in(Some(det.block_states.clone()));
        }
        Ok(det)
    }

    /// The last snapshot read.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    /// Handles of the thresholds these detectors registered.
    pub fn handles(&self) -> &[Handle] {
        &self.handles
    }

    /// One round: read /proc, feed the notifier, run the detectors.
    pub fn poll(&mut self) -> Result<(), ProcError> {
        let now = Instant::now();
        self.reader
            .read_into(&mut self.snap, self.fields, self.threads, Scope::All)?;
        let ts = self.snap.ts_ns;
        let n = &*self.notifier;
        for_each_sample(&self.snap, |m, i, v| n.observe(m, i, v, ts));
        if self.cfg.cpu_hog.enabled {
            self.cpu_percent(now, ts);
        }
        if self.cfg.blocked.enabled {
            self.blocked_threads(now, ts);
        }
        self.forget_exited();
        self.prev_at = Some(now);
        Ok(())
    }

    fn cpu_percent(&mut self, now: Instant, ts: i64) {
        let dt = self
            .prev_at
            .map(|p| now.duration_since(p).as_secs_f64())
            .filter(|d| *d > 0.0);
        self.cpu_next.clear();
        for p in &self.snap.procs {
            let ticks = p.stat.utime + p.stat.stime;
            self.cpu_next.insert(p.pid, (p.stat.starttime, ticks));
            let (Some(dt), Some(&(start, before))) = (dt, self.cpu_prev.get(&p.pid)) else {
                continue;
            };
            if start != p.stat.starttime {
                continue; // pid reused: no baseline yet
            }
            let pct = self.snap.ticks_to_secs(ticks.saturating_sub(before)) / dt * 100.0;
            let inst = instance_name(&mut self.inst, p.pid, None);
            self.notifier.observe(metrics::CPU_PERCENT, inst, pct, ts);
        }
        std::mem::swap(&mut self.cpu_prev, &mut self.cpu_next);
    }

    fn is_blocked(&self, t: &ThreadInfo) -> bool {
        self.block_states.contains(&t.stat.state)
            || t.wchan.is_some_and(|w| {
                !w.is_empty()
                    && self
                        .cfg
                        .blocked
                        .wchan
                        .iter()
                        .any(|pat| w.as_str().contains(pat.as_str()))
            })
    }

    fn blocked_threads(&mut self, now: Instant, ts: i64) {
        self.generation += 1;
        let generation = self.generation;
        for t in &self.snap.threads {
            if !self.is_blocked(t) {
                continue;
            }
            let run_ns = t.sched.map(|s| s.run_ns);
            let inst = instance_name(&mut self.inst, t.pid, Some(t.tid));
            let ep = self.episodes.entry((t.pid, t.tid)).or_insert(Episode {
                since: now,
                run_ns,
                starttime: t.stat.starttime,
                seen: generation,
            });
            if ep.starttime != t.stat.starttime || ep.run_ns != run_ns {
                // It ran (or is a new thread with a reused tid): a new episode, re-armed.
                self.notifier
                    .observe(metrics::THREAD_BLOCKED, inst, 0.0, ts);
                *ep = Episode {
                    since: now,
                    run_ns,
                    starttime: t.stat.starttime,
                    seen: generation,
                };
            }
            ep.seen = generation;
            let secs = now.duration_since(ep.since).as_secs_f64();
            self.notifier
                .observe(metrics::THREAD_BLOCKED, inst, secs, ts);
        }
        // Threads no longer blocked (or gone): the episode is over and the threshold re-arms.
        let (n, buf) = (&self.notifier, &mut self.inst);
        self.episodes.retain(|&(pid, tid), ep| {
            if ep.seen == generation {
                return true;
            }
            n.forget_instance(metrics::THREAD_BLOCKED, instance_name(buf, pid, Some(tid)));
            false
        });
    }

    fn forget_exited(&mut self) {
        self.alive_next.clear();
        self.alive_next
            .extend(self.snap.procs.iter().map(|p| p.pid));
        for &pid in self.alive.difference(&self.alive_next) {
            let inst = instance_name(&mut self.inst, pid, None);
            for m in metrics::PROCESS {
                self.notifier.forget_instance(m, inst);
            }
        }
        std::mem::swap(&mut self.alive, &mut self.alive_next);
        if !self.threads {
            return;
        }
        self.alive_threads_next.clear();
        self.alive_threads_next
            .extend(self.snap.threads.iter().map(|t| (t.pid, t.tid)));
        for &(pid, tid) in self.alive_threads.difference(&self.alive_threads_next) {
            let inst = instance_name(&mut self.inst, pid, Some(tid));
            for m in metrics::THREAD {
                self.notifier.forget_instance(m, inst);
            }
        }
        std::mem::swap(&mut self.alive_threads, &mut self.alive_threads_next);
    }
}

impl Drop for Detectors {
    fn drop(&mut self) {
        for h in self.handles.drain(..) {
            // Already deleted through the API: nothing left to do.
            let _ = self.notifier.remove(h, None);
        }
    }
}

/// Poll /proc every `cfg.interval` and run the detectors until `shutdown` fires.
pub async fn run_detectors(
    notifier: Arc<Notifier>,
    cfg: ProcfsConfig,
    shutdown: CancellationToken,
) -> Result<(), DetectError> {
    run_detectors_with(notifier, cfg, shutdown, |_| {}).await
}

/// `run_detectors`, also handing each snapshot to `on_snapshot` (e.g. to turn it into samples
/// for the pipeline with `for_each_sample`). `on_snapshot` runs on a blocking thread.
pub async fn run_detectors_with<F>(
    notifier: Arc<Notifier>,
    cfg: ProcfsConfig,
    shutdown: CancellationToken,
    on_snapshot: F,
) -> Result<(), DetectError>
where
    F: FnMut(&Snapshot) + Send + 'static,
{
    if !cfg.enabled {
        shutdown.cancelled().await;
        return Ok(());
    }
    let interval = cfg.interval;
    let mut state = Some((Detectors::new(notifier, cfg)?, on_snapshot));
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let (mut det, mut cb) = state.take().expect("state is put back after every poll");
        // Reading /proc is blocking file I/O: keep it off the async workers.
        let started = Instant::now();
        let joined = tokio::task::spawn_blocking(move || {
            let r = det.poll();
            if r.is_ok() {
                cb(det.snapshot());
            }
            (det, cb, r)
        })
        .await;
        let (det, cb, r) = joined.map_err(|e| DetectError::Panicked(e.to_string()))?;
        if let Err(e) = r {
            tracing::warn!(error = %e, "procfs poll failed");
        }
        tracing::debug!(
            procs = det.snapshot().procs.len(),
            threads = det.snapshot().threads.len(),
            took = ?started.elapsed(),
            "procfs poll"
        );
        state = Some((det, cb));
    }
    Ok(())
}
