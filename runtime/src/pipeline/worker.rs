//! A pipeline's thread: takes batches, flushes on its interval, swaps guests between batches.

use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::sinks::Sink;
use crate::host::TransformerInstance;
use crate::sample::Sample;
use crate::telemetry::{Counter, registry};

/// Counters of one pipeline.
pub struct PipelineStats {
    pub samples_in: Arc<Counter>,
    pub samples_out: Arc<Counter>,
    /// Samples lost because a guest call failed (trap, deadline, memory, quarantine): the
    /// batch of the failed call, and what the thrown-away instance had cached.
    pub samples_lost: Arc<Counter>,
    pub swaps: Arc<Counter>,
}

impl PipelineStats {
    fn new(pipeline: &str) -> Arc<PipelineStats> {
        let r = registry();
        let l = [("pipeline", pipeline)];
        Arc::new(PipelineStats {
            samples_in: r.counter(
                "wasmon_pipeline_samples_in_total",
                "Samples that entered the pipeline.",
                &l,
            ),
            samples_out: r.counter(
                "wasmon_pipeline_samples_out_total",
                "Samples the pipeline passed to its sinks.",
                &l,
            ),
            samples_lost: r.counter(
                "wasmon_pipeline_samples_lost_total",
                "Samples lost to a failed guest call (its batch and what the instance had cached).",
                &l,
            ),
            swaps: r.counter(
                "wasmon_pipeline_guest_swaps_total",
                "Guests replaced by a reload.",
                &l,
            ),
        })
    }
}

/// What a swap did, stage by stage.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct SwapOutcome {
    /// Stages whose guest (bytes or configuration) changed: flushed, then replaced.
    pub replaced: Vec<String>,
    /// Stages left running as they were.
    pub kept: Vec<String>,
}

enum Command {
    /// A batch, and whom to tell once its output reached the sinks.
    Batch(Vec<Sample>, Option<Sender<()>>),
    Flush(Sender<()>),
    Swap(Swap, Sender<SwapOutcome>),
    Stop(Sender<()>),
    Release,
    /// Wakes an idle worker to look at its control channel.
    Wake,
}

/// What a reload hands a running pipeline: its new chain, and the other settings that change.
pub struct Swap {
    pub chain: Vec<TransformerInstance>,
    /// New sinks; `None` keeps the running ones.
    pub sinks: Option<Vec<Arc<dyn Sink>>>,
    /// When the chain is flushed from now on.
    pub flush: Flush,
    /// Keep each replaced stage's old instance this long: a batch the new one fails goes
    /// through the old one instead of being lost (a fleet rollout's window before rollback).
    pub fallback: Option<Duration>,
}

/// When a pipeline's chain is flushed, besides on demand, at a swap and at stop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flush {
    /// Every interval (Ceilometer's pipeline interval), whether samples came or not.
    pub interval: Option<Duration>,
    /// Right after each batch has gone through the chain: what a batch completes leaves with
    /// it, and an idle pipeline is never woken (for chains whose flush emits only what their
    /// batches brought, such as `arithmetic` and `rate_of_change`; not for an `aggregator`
    /// whose window ends by time).
    pub after_batch: bool,
}

impl From<Option<Duration>> for Flush {
    fn from(interval: Option<Duration>) -> Flush {
        Flush {
            interval,
            after_batch: false,
        }
    }
}

/// The sinks of a pipeline that runs no stage, which [`Pipeline::send_acked`] hands a batch
/// to on the sender's own thread: without stages there is no state and no order to keep,
/// handing a receiver's batch to the pipeline's thread and back cost as much as storing it,
/// and senders in parallel store in parallel. `None` while stages run, and once the pipeline
/// stops; the worker changes it only between batches.
type Inline = Arc<RwLock<Option<Vec<Arc<dyn Sink>>>>>;

/// A running pipeline. Dropping it stops the thread after a final flush.
pub struct Pipeline {
    name: Arc<str>,
    tx: Sender<Command>,
    /// Swaps and releases: taken before the next queued batch, so a reload does not wait
    /// behind a backlog (samples queued before a swap go through the new version).
    ctl: Sender<Command>,
    stats: Arc<PipelineStats>,
    stages: Arc<Mutex<Vec<StageInfo>>>,
    inline: Inline,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// What runs at one stage (for status pages).
#[derive(Debug, Clone, serde::Serialize)]
pub struct StageInfo {
    pub guest: String,
    pub hash: String,
    /// Whether the guest is quarantined now (computed when asked, so it turns false by
    /// itself when the quarantine ends).
    pub quarantined: bool,
    #[serde(skip)]
    quarantined_until: Option<Instant>,
    /// Calls into the guest, failed calls and quarantines (cumulative per stage name, across
    /// swaps: a caller that wants "since the swap" keeps the values it saw then).
    pub calls: u64,
    pub failures: u64,
    pub quarantines: u64,
    #[serde(skip)]
    stats: StatsRef,
}

/// The guest's counters, read when the stages are asked for.
#[derive(Clone)]
struct StatsRef(Arc<crate::host::GuestStats>);

impl std::fmt::Debug for StatsRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GuestStats")
    }
}

/// Batches waiting for a pipeline's thread; producers block beyond it (backpressure).
const QUEUE: usize = 1024;

impl Pipeline {
    /// Starts a pipeline's thread. `flush`: an interval (`None`: flush only on demand and at
    /// stop), or a [`Flush`].
    pub fn start(
        name: &str,
        chain: Vec<TransformerInstance>,
        flush: impl Into<Flush>,
        sinks: Vec<Arc<dyn Sink>>,
    ) -> Pipeline {
        let (tx, rx) = crossbeam_channel::bounded(QUEUE);
        let (ctl, ctl_rx) = crossbeam_channel::unbounded();
        let stats = PipelineStats::new(name);
        let stages = Arc::new(Mutex::new(Vec::new()));
        let inline = Inline::default();
        let mut worker = Worker {
            name: name.into(),
            chain,
            sinks,
            stats: stats.clone(),
            stages: stages.clone(),
            inline: inline.clone(),
            flush: flush.into(),
            fallbacks: Vec::new(),
        };
        worker.publish_stages();
        worker.publish_inline();
        let thread = std::thread::Builder::new()
            .name(format!("pipeline-{name}"))
            .spawn(move || worker.run(rx, ctl_rx))
            .expect("spawning a pipeline thread");
        Pipeline {
            name: name.into(),
            tx,
            ctl,
            stats,
            stages,
            inline,
            thread: Mutex::new(Some(thread)),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn stats(&self) -> &Arc<PipelineStats> {
        &self.stats
    }

    pub fn stages(&self) -> Vec<StageInfo> {
        let now = Instant::now();
        let mut stages = crate::util::lock(&self.stages).clone();
        for s in &mut stages {
            s.quarantined = s.quarantined_until.is_some_and(|t| now < t);
            let g = &s.stats.0;
            s.calls = g.calls.get();
            s.failures = g.traps.get()
                + g.deadline_hits.get()
                + g.memory_refusals.get()
                + g.output_refusals.get();
            s.quarantines = g.quarantines.get();
        }
        stages
    }

    /// Queues a batch; blocks while the queue is full. Fails only after `stop`.
    pub fn send(&self, batch: Vec<Sample>) -> Result<(), Stopped> {
        self.tx
            .send(Command::Batch(batch, None))
            .map_err(|_| Stopped)
    }

    /// Queues a batch and waits until the chain has handled it and its output reached every
    /// sink (a forwarding sink's queue file among them): what an ingest acknowledges. Samples
    /// a caching stage holds back are the stage's until its next flush. Without stages the
    /// batch goes to the sinks on this thread ([`Inline`]).
    pub fn send_acked(&self, batch: Vec<Sample>) -> Result<(), Stopped> {
        {
            let inline = crate::util::read(&self.inline);
            if let Some(sinks) = inline.as_ref() {
                self.stats.samples_in.add(batch.len() as u64);
                emit(&self.name, &self.stats, sinks, batch);
                return Ok(());
            }
        }
        let (ack, done) = crossbeam_channel::bounded(1);
        self.tx
            .send(Command::Batch(batch, Some(ack)))
            .map_err(|_| Stopped)?;
        done.recv().map_err(|_| Stopped)
    }

    /// Flushes the chain and waits until the output reached the sinks.
    pub fn flush(&self) -> Result<(), Stopped> {
        let (ack, done) = crossbeam_channel::bounded(1);
        self.tx.send(Command::Flush(ack)).map_err(|_| Stopped)?;
        done.recv().map_err(|_| Stopped)
    }

    /// Replaces the chain between two batches: every stage whose guest changed is flushed (its
    /// output continues down the chain) and replaced; the others keep running with their state.
    /// A chain of another length replaces every stage. The sinks and the flush interval are
    /// the swap's from the next batch on.
    pub fn swap(&self, swap: Swap) -> Result<SwapOutcome, Stopped> {
        let (ack, done) = crossbeam_channel::bounded(1);
        self.control(Command::Swap(swap, ack))?;
        done.recv().map_err(|_| Stopped)
    }

    /// Ends the quarantine of every stage (the operator asked, on reload).
    pub fn release(&self) -> Result<(), Stopped> {
        self.control(Command::Release)
    }

    /// Sends a command that goes before queued batches, and wakes the worker if it is idle
    /// (a full queue means it is busy and looks at the control channel before its next batch).
    fn control(&self, cmd: Command) -> Result<(), Stopped> {
        self.ctl.send(cmd).map_err(|_| Stopped)?;
        match self.tx.try_send(Command::Wake) {
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => Err(Stopped),
            _ => Ok(()),
        }
    }

    /// Flushes a last time and stops the thread.
    pub fn stop(&self) {
        *crate::util::write(&self.inline) = None;
        let (ack, done) = crossbeam_channel::bounded(1);
        if self.tx.send(Command::Stop(ack)).is_ok() {
            let _ = done.recv();
        }
        if let Some(t) = crate::util::lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The pipeline was stopped.
#[derive(Debug, thiserror::Error)]
#[error("the pipeline is stopped")]
pub struct Stopped;

/// A chain's output to every sink.
fn emit(pipeline: &str, stats: &PipelineStats, sinks: &[Arc<dyn Sink>], out: Vec<Sample>) {
    if out.is_empty() {
        return;
    }
    stats.samples_out.add(out.len() as u64);
    for sink in sinks {
        sink.accept(pipeline, &out);
    }
}

struct Worker {
    name: Arc<str>,
    chain: Vec<TransformerInstance>,
    sinks: Vec<Arc<dyn Sink>>,
    stats: Arc<PipelineStats>,
    stages: Arc<Mutex<Vec<StageInfo>>>,
    inline: Inline,
    flush: Flush,
    /// Per stage: the instance a swap replaced and until when it stands in for a failing new
    /// one (see [`Swap::fallback`]).
    fallbacks: Vec<Option<(TransformerInstance, Instant)>>,
}

impl Worker {
    fn run(&mut self, rx: Receiver<Command>, ctl: Receiver<Command>) {
        let mut next_flush = self.flush.interval.map(|d| Instant::now() + d);
        loop {
            // A flush that is due goes first: under a steady backlog the queue is never empty,
            // and waiting for a quiet moment would let a caching stage grow without bound.
            let due = next_flush.filter(|&at| Instant::now() >= at);
            let control = ctl.try_recv().ok();
            let cmd = match next_flush {
                _ if control.is_some() => control,
                _ if due.is_some() => None,
                Some(at) => match rx.recv_deadline(at) {
                    Ok(cmd) => Some(cmd),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => return self.flush_from(0, Vec::new()),
                },
                None => match rx.recv() {
                    Ok(cmd) => Some(cmd),
                    Err(_) => return self.flush_from(0, Vec::new()),
                },
            };
            match cmd {
                None => {
                    self.flush_from(0, Vec::new());
                    // Keep the cadence: the next flush is one interval after the one due.
                    next_flush = next_flush
                        .zip(self.flush.interval)
                        .map(|(at, d)| (at + d).max(Instant::now()));
                }
                Some(Command::Batch(batch, ack)) => {
                    self.stats.samples_in.add(batch.len() as u64);
                    let out = self.run_stages(0, batch);
                    self.emit(out);
                    if self.flush.after_batch {
                        self.flush_from(0, Vec::new());
                    }
                    if let Some(ack) = ack {
                        let _ = ack.send(());
                    }
                }
                Some(Command::Flush(ack)) => {
                    self.flush_from(0, Vec::new());
                    let _ = ack.send(());
                }
                Some(Command::Swap(swap, ack)) => {
                    let outcome = self.swap(swap.chain, swap.fallback);
                    if let Some(sinks) = swap.sinks {
                        self.sinks = sinks;
                    }
                    if swap.flush.interval != self.flush.interval {
                        next_flush = swap.flush.interval.map(|d| Instant::now() + d);
                    }
                    self.flush = swap.flush;
                    self.publish_inline();
                    let _ = ack.send(outcome);
                }
                Some(Command::Wake) => {}
                Some(Command::Release) => {
                    self.chain.iter_mut().for_each(TransformerInstance::release);
                    self.publish_stages();
                }
                Some(Command::Stop(ack)) => {
                    *crate::util::write(&self.inline) = None;
                    self.flush_from(0, Vec::new());
                    let _ = ack.send(());
                    return;
                }
            }
        }
    }

    /// Passes `batch` through stages `from..`, returning what comes out of the last one.
    fn run_stages(&mut self, from: usize, mut batch: Vec<Sample>) -> Vec<Sample> {
        for i in from..self.chain.len() {
            if batch.is_empty() {
                break;
            }
            batch = self.handle_at(i, batch);
        }
        batch
    }

    fn handle_at(&mut self, i: usize, batch: Vec<Sample>) -> Vec<Sample> {
        match self.chain[i].handle(&batch) {
            Ok(out) => out,
            Err(_) if self.fallback_alive(i) => {
                // The version before the swap still stands in: the batch goes through it.
                self.stats.samples_lost.add(self.chain[i].take_discarded());
                self.publish_stages();
                let (old, _) = self.fallbacks[i].as_mut().expect("checked");
                match old.handle(&batch) {
                    Ok(out) => out,
                    Err(_) => {
                        self.stats.samples_lost.add(batch.len() as u64);
                        self.fallbacks[i] = None;
                        Vec::new()
                    }
                }
            }
            Err(_) => {
                // The instance logged and counted the failure; the batch is lost at this stage.
                self.stats.samples_lost.add(batch.len() as u64);
                self.lost_with(i);
                Vec::new()
            }
        }
    }

    /// Stage `i`'s call failed: what its thrown-away instance had cached is lost too.
    fn lost_with(&mut self, i: usize) {
        self.stats.samples_lost.add(self.chain[i].take_discarded());
        self.publish_stages();
    }

    /// Ceilometer's flush: stage by stage, what a stage flushes goes through the stages after
    /// it, which then flush too. `carry` enters at stage `from`.
    fn flush_from(&mut self, from: usize, mut carry: Vec<Sample>) {
        for i in from..self.chain.len() {
            carry = self.flush_stage(i, carry);
        }
        self.emit(carry);
    }

    /// Hands `carry` to stage `i`, then flushes it (and the instance standing in for it, if
    /// any: nothing waits there); returns both outputs.
    fn flush_stage(&mut self, i: usize, carry: Vec<Sample>) -> Vec<Sample> {
        let mut out = if carry.is_empty() {
            Vec::new()
        } else {
            self.handle_at(i, carry)
        };
        match self.chain[i].flush() {
            Ok(mut flushed) => out.append(&mut flushed),
            Err(_) => self.lost_with(i),
        }
        let expired = !self.fallback_alive(i);
        out.append(&mut self.flush_fallback(i, expired));
        out
    }

    /// Whether stage `i` has an old instance standing in for it now.
    fn fallback_alive(&self, i: usize) -> bool {
        matches!(self.fallbacks.get(i), Some(Some((_, until))) if Instant::now() < *until)
    }

    /// Flushes stage `i`'s stand-in (if any); `drop` also lets it go.
    fn flush_fallback(&mut self, i: usize, drop: bool) -> Vec<Sample> {
        let Some(Some((old, _))) = self.fallbacks.get_mut(i) else {
            return Vec::new();
        };
        let out = match old.flush() {
            Ok(out) => out,
            Err(_) => {
                self.stats.samples_lost.add(old.take_discarded());
                Vec::new()
            }
        };
        if drop {
            self.fallbacks[i] = None;
        }
        out
    }

    fn swap(
        &mut self,
        new_chain: Vec<TransformerInstance>,
        fallback: Option<Duration>,
    ) -> SwapOutcome {
        let mut outcome = SwapOutcome::default();
        if new_chain.len() != self.chain.len() {
            self.flush_from(0, Vec::new());
            for i in 0..self.fallbacks.len() {
                let out = self.flush_fallback(i, true);
                let out = self.run_stages(i + 1, out);
                self.emit(out);
            }
            outcome.replaced = new_chain.iter().map(|g| g.name().to_string()).collect();
            self.stats.swaps.add(new_chain.len() as u64);
            self.chain = new_chain;
            self.fallbacks = (0..self.chain.len()).map(|_| None).collect();
        } else {
            self.fallbacks.resize_with(self.chain.len(), || None);
            let mut carry = Vec::new();
            for (i, new) in new_chain.into_iter().enumerate() {
                let old = self.chain[i].image();
                let same = old.hash == new.image().hash && old.config == new.image().config;
                if same {
                    outcome.kept.push(new.name().to_string());
                    if !carry.is_empty() {
                        carry = self.handle_at(i, carry);
                    }
                } else {
                    carry = self.flush_stage(i, carry);
                    carry.append(&mut self.flush_fallback(i, true));
                    outcome.replaced.push(new.name().to_string());
                    self.stats.swaps.inc();
                    let old = std::mem::replace(&mut self.chain[i], new);
                    // A version that was failing is no stand-in for its successor.
                    if let Some(d) = fallback
                        && !old.quarantined()
                    {
                        self.fallbacks[i] = Some((old, Instant::now() + d));
                    }
                }
            }
            self.emit(carry);
        }
        self.publish_stages();
        tracing::info!(pipeline = %self.name, replaced = ?outcome.replaced, "pipeline guests swapped");
        outcome
    }

    fn emit(&self, out: Vec<Sample>) {
        emit(&self.name, &self.stats, &self.sinks, out);
    }

    /// Lets acknowledged batches skip the thread when no stage runs (see [`Inline`]; a
    /// swap's fallbacks are per stage, so there are none either).
    fn publish_inline(&self) {
        *crate::util::write(&self.inline) = self.chain.is_empty().then(|| self.sinks.clone());
    }

    fn publish_stages(&mut self) {
        *crate::util::lock(&self.stages) = self
            .chain
            .iter()
            .map(|g| StageInfo {
                guest: g.name().to_string(),
                hash: g.image().hash.clone(),
                quarantined: false,
                quarantined_until: g.quarantined_until(),
                calls: 0,
                failures: 0,
                quarantines: 0,
                stats: StatsRef(g.image().stats().clone()),
            })
            .collect();
    }
}
