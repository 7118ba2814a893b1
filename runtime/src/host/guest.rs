//! One guest: a validated *image* (compiled, linked against its world, pre-instantiated, its
//! configuration accepted) and the *instance* that runs calls. The instance lives in a `Store`
//! of its own; a call that traps, overruns its deadline, is refused memory or returns too much
//! fails alone: the store is thrown away and the next call instantiates afresh from the cached
//! `InstancePre` (~20-30 us). Consecutive failures quarantine the guest with exponential backoff.
//!
//! Calls into wasm are asynchronous and driven to completion on the caller's thread, so that
//! [`in_guest`] can abandon one at its deadline even while the guest waits in a host call:
//! dropping the call's future drops the fiber it runs on, and the store goes with it.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use wasmtime::component::Component;
use wasmtime::{Store, Trap};

use super::clock::Clock;
use super::engine::{Compiled, Runtime};
use super::limits::*;
use super::state::{Grants, State};
use super::stats::GuestStats;

/// A guest's configuration as the host enforces it.
#[derive(Clone, Debug, PartialEq)]
pub struct GuestConfig {
    /// The name logs and counters use (e.g. `memory[0]:arithmetic`).
    pub name: Arc<str>,
    /// CPU deadline per call.
    pub deadline: Duration,
    /// Linear memory cap of an instance, in bytes.
    pub memory: u64,
    /// Capabilities beyond computing.
    pub grants: Grants,
    /// Parameters handed to `configure`, a JSON object.
    pub params: String,
    /// Consecutive failures before quarantine.
    pub quarantine_after: u32,
    /// Samples one call may return.
    pub max_output_samples: usize,
}

impl GuestConfig {
    pub fn new(name: &str, params: &str) -> GuestConfig {
        GuestConfig {
            name: name.into(),
            deadline: DEFAULT_DEADLINE,
            memory: DEFAULT_MEMORY,
            grants: Grants::default(),
            params: params.to_string(),
            quarantine_after: QUARANTINE_AFTER,
            max_output_samples: MAX_OUTPUT_SAMPLES,
        }
    }
}

/// How a world is instantiated and configured: implemented for the transformer and agent
/// worlds so both share one sandbox.
#[allow(async_fn_in_trait)] // called only by `Instance`, never spawned: no `Send` bound needed
pub trait World: 'static {
    /// `TransformerPre<State>` or `AgentPre<State>`.
    type Pre: Clone + Send + Sync;
    /// The instantiated bindings.
    type Bindings: Send;
    /// The world's name, for error messages.
    const NAME: &'static str;
    fn pre(rt: &Runtime, component: &Component) -> wasmtime::Result<Self::Pre>;
    async fn instantiate(
        pre: &Self::Pre,
        store: &mut Store<State>,
    ) -> wasmtime::Result<Self::Bindings>;
    async fn configure(
        b: &Self::Bindings,
        store: &mut Store<State>,
        params: &str,
    ) -> wasmtime::Result<Result<(), String>>;
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("quarantined for another {0:?} after repeated failures")]
    Quarantined(Duration),
    #[error("instantiation failed: {0}")]
    Instantiate(String),
    #[error("configure refused the parameters: {0}")]
    Configure(String),
    #[error("deadline of {0:?} (wall time in one call) exceeded")]
    Deadline(Duration),
    #[error("memory cap of {0} bytes refused a growth")]
    Memory(u64),
    #[error("trapped: {0}")]
    Trap(String),
    #[error("output refused: {0}")]
    Output(String),
}

/// A validated version of a guest, shared by its instances.
pub struct Image<W: World> {
    pub config: GuestConfig,
    /// SHA-256 of the component's bytes.
    pub hash: String,
    pre: W::Pre,
    engine: wasmtime::Engine,
    /// The clock of deadlines (see [`in_guest`]).
    clock: Arc<Clock>,
    stats: Arc<GuestStats>,
}

impl<W: World> Image<W> {
    /// Links `compiled` against world `W` (wrong world, missing exports or another package
    /// version fail here) and validates `config.params` by configuring a first instance,
    /// which is returned ready for use.
    pub fn load(
        rt: &Arc<Runtime>,
        compiled: &Compiled,
        config: GuestConfig,
    ) -> Result<Instance<W>> {
        let pre = W::pre(rt, &compiled.component)
            .map_err(anyhow::Error::from)
            .with_context(|| {
                format!(
                    "guest `{}` does not fit the `{}` world of wasmon:collector@0.1.0",
                    config.name,
                    W::NAME
                )
            })?;
        let stats = GuestStats::new(&config.name);
        let image = Arc::new(Image {
            config,
            hash: compiled.hash.clone(),
            pre,
            engine: rt.engine().clone(),
            clock: rt.clock().clone(),
            stats,
        });
        let mut instance = Instance::new(image);
        instance
            .ensure_live()
            .map_err(|e| anyhow!("guest `{}`: {e}", instance.image.config.name))?;
        Ok(instance)
    }

    /// The linked, pre-instantiated component.
    pub fn pre(&self) -> &W::Pre {
        &self.pre
    }

    pub fn stats(&self) -> &Arc<GuestStats> {
        &self.stats
    }
}

/// A live instance: its store and the bindings of its exports. Calls borrow it mutably for
/// as long as they run; a call abandoned at its deadline drops it.
pub struct Live<W: World> {
    pub(super) store: Store<State>,
    pub(super) bindings: W::Bindings,
}

/// A guest failure for logs and callers: the error and its causes without the wasm backtrace
/// (thousands of frames after a runaway recursion would flood the log), cut at 2,000 bytes.
fn describe(e: &wasmtime::Error) -> String {
    let mut text = e
        .chain()
        .map(|c| c.to_string())
        .filter(|c| !c.starts_with("error while executing at wasm backtrace"))
        .collect::<Vec<_>>()
        .join(": ");
    if text.len() > 2000 {
        let mut cut = 2000;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    text
}

/// What a guarded call runs on: something that owns a store.
trait Carrier {
    fn store(&mut self) -> &mut Store<State>;
}

impl Carrier for Store<State> {
    fn store(&mut self) -> &mut Store<State> {
        self
    }
}

impl<W: World> Carrier for Live<W> {
    fn store(&mut self) -> &mut Store<State> {
        &mut self.store
    }
}

/// Drives `call` to completion on this thread. WASI's host functions need a tokio runtime:
/// `in_tokio` uses the caller's when it is on one (a blocking-pool thread), else
/// wasmtime-wasi's own.
fn run<F: Future>(call: F) -> F::Output {
    wasmtime_wasi::runtime::in_tokio(call)
}

/// A call into the guest outlived its deadline while waiting in a host call.
#[derive(Debug, thiserror::Error)]
#[error("the call was abandoned at its deadline")]
struct DeadlineElapsed;

/// Runs one call into the guest's code under its deadline: wall time from here to its
/// return. A guest spinning in wasm traps at the epoch deadline; one waiting in a host call
/// (a WASI sleep, a socket, a file) has its call future dropped by the timeout; either way
/// within one [`EPOCH_TICK`]. The host's work around a call (encoding a batch, decoding the
/// answer) is the daemon's, not the guest's, and does not count.
pub(super) async fn in_guest<R>(
    store: &mut Store<State>,
    call: impl AsyncFnOnce(&mut Store<State>) -> wasmtime::Result<R>,
) -> wasmtime::Result<R> {
    let deadline = store.data().deadline;
    // The first tick may come at once after the deadline is set: one tick more makes the
    // guest run at least `deadline`, and at most `deadline` plus one tick.
    let ticks = deadline.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64 + 1;
    let clock = store.data().clock.clone();
    let _ticking = clock.running();
    store.set_epoch_deadline(ticks);
    let until = clock.now() + ticks;
    // The call is polled first: one that returns at once never touches the timer.
    tokio::select! {
        biased;
        r = call(store) => r,
        () = ticks_reach(&clock, until) => Err(DeadlineElapsed.into()),
    }
}

/// Resolves once the ticker's count reaches `until`, looking once a tick.
async fn ticks_reach(clock: &Clock, until: u64) {
    while clock.now() < until {
        tokio::time::sleep(EPOCH_TICK).await;
    }
}

/// The running side of a guest: at most one live instance, replaced after a failure.
pub struct Instance<W: World> {
    image: Arc<Image<W>>,
    live: Option<Live<W>>,
    consecutive_failures: u32,
    quarantines: u32,
    quarantined_until: Option<Instant>,
    /// Samples the live instance took in since its last flush and has not passed on (a
    /// transformer's cache); lost if the instance is thrown away.
    held: u64,
    /// What `held` was when the last instance was thrown away, until taken.
    discarded: u64,
}

impl<W: World> Instance<W> {
    pub fn new(image: Arc<Image<W>>) -> Instance<W> {
        Instance {
            image,
            live: None,
            consecutive_failures: 0,
            quarantines: 0,
            quarantined_until: None,
            held: 0,
            discarded: 0,
        }
    }

    pub fn image(&self) -> &Arc<Image<W>> {
        &self.image
    }

    pub fn name(&self) -> &str {
        &self.image.config.name
    }

    /// Samples lost with instances thrown away since the last call of this (what they had
    /// taken in and not passed on); the caller adds them to its lost count.
    pub fn take_discarded(&mut self) -> u64 {
        std::mem::take(&mut self.discarded)
    }

    /// Accounts for a call that took `taken` samples and passed on `given`.
    pub(super) fn account(&mut self, taken: usize, given: usize) {
        self.held = (self.held + taken as u64).saturating_sub(given as u64);
    }

    /// A flush passed on everything the instance held.
    pub(super) fn flushed(&mut self) {
        self.held = 0;
    }

    fn ensure_live(&mut self) -> Result<(), CallError> {
        if self.live.is_some() {
            return Ok(());
        }
        let cfg = &self.image.config;
        let limiter = Limiter::new(cfg.memory);
        let state = State::new(
            cfg.name.clone(),
            &cfg.grants,
            limiter,
            (cfg.deadline, self.image.clock.clone()),
            self.image.stats.clone(),
        )
        .map_err(|e| CallError::Instantiate(format!("{e:#}")))?;
        let mut store = Store::new(&self.image.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        self.image.stats.instances.inc();
        let pre = &self.image.pre;
        let (store, bindings) = self
            .guarded(store, async |store| W::instantiate(pre, store).await)
            .map_err(|e| match e {
                CallError::Trap(m) => CallError::Instantiate(m),
                other => other,
            })?;
        let params = &cfg.params;
        let (live, configured) = self.guarded(Live { store, bindings }, async |live| {
            W::configure(&live.bindings, &mut live.store, params).await
        })?;
        configured.map_err(CallError::Configure)?;
        self.live = Some(live);
        Ok(())
    }

    /// Runs `f` on `carrier` (a store, or a live instance) under the caps, and classifies a
    /// failure; `f`'s calls into the guest go through [`in_guest`], under the deadline. The
    /// carrier comes back only from a call that returned: after any failure it is gone.
    fn guarded<T: Carrier, R>(
        &self,
        mut carrier: T,
        f: impl AsyncFnOnce(&mut T) -> wasmtime::Result<R>,
    ) -> Result<(T, R), CallError> {
        let deadline = self.image.config.deadline;
        carrier.store().data_mut().begin_call();
        self.image.stats.calls.inc();
        let r = run(f(&mut carrier));
        match r {
            Ok(r) => Ok((carrier, r)),
            Err(e) if carrier.store().data().limiter.refused => {
                tracing::debug!(guest = %self.name(), error = %e, "memory cap refused a growth");
                Err(CallError::Memory(self.image.config.memory))
            }
            Err(e)
                if e.is::<DeadlineElapsed>()
                    || matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) =>
            {
                Err(CallError::Deadline(deadline))
            }
            Err(e) => Err(CallError::Trap(describe(&e))),
        }
    }

    /// Calls into the guest: instantiates first if needed, enforces quarantine, the deadline
    /// and the memory cap, and `check`s the output. On failure the instance is discarded.
    pub fn call<R>(
        &mut self,
        f: impl AsyncFnOnce(&mut Live<W>) -> wasmtime::Result<R>,
        check: impl FnOnce(&R) -> Result<(), String>,
    ) -> Result<R, CallError> {
        if let Some(until) = self.quarantined_until {
            let now = Instant::now();
            if now < until {
                self.image.stats.skipped_quarantined.inc();
                return Err(CallError::Quarantined(until - now));
            }
            self.quarantined_until = None;
        }
        let result = self.ensure_live().and_then(|()| {
            let live = self.live.take().expect("ensure_live left an instance");
            let (live, r) = self.guarded(live, f)?;
            check(&r).map_err(CallError::Output)?;
            self.live = Some(live);
            Ok(r)
        });
        match &result {
            Ok(_) => self.consecutive_failures = 0,
            Err(e) => self.failed(e),
        }
        result
    }

    fn failed(&mut self, e: &CallError) {
        let stats = &self.image.stats;
        match e {
            CallError::Deadline(_) => stats.deadline_hits.inc(),
            CallError::Memory(_) => stats.memory_refusals.inc(),
            CallError::Output(_) => stats.output_refusals.inc(),
            _ => stats.traps.inc(),
        }
        self.live = None;
        self.discarded += std::mem::take(&mut self.held);
        self.consecutive_failures += 1;
        tracing::warn!(guest = %self.name(), error = %e, failures = self.consecutive_failures, "guest call failed; its instance is discarded");
        if self.consecutive_failures >= self.image.config.quarantine_after {
            let backoff = QUARANTINE_BASE
                .saturating_mul(1 << self.quarantines.min(16))
                .min(QUARANTINE_MAX);
            self.quarantines += 1;
            self.consecutive_failures = 0;
            self.quarantined_until = Some(Instant::now() + backoff);
            stats.quarantines.inc();
            tracing::error!(guest = %self.name(), ?backoff, "guest quarantined after repeated failures");
        }
    }

    /// Whether the guest is in quarantine now.
    pub fn quarantined(&self) -> bool {
        self.quarantined_until().is_some()
    }

    /// When the quarantine the guest is in ends.
    pub fn quarantined_until(&self) -> Option<Instant> {
        self.quarantined_until.filter(|&t| Instant::now() < t)
    }

    /// Ends a quarantine now (the operator asked, on reload).
    pub fn release(&mut self) {
        self.quarantined_until = None;
        self.consecutive_failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Instantiates a core module declaring `tables` tables of `elements` funcrefs under a
    /// 64 MiB cap; whether the limiter refused.
    fn refused(tables: usize, elements: usize) -> bool {
        let engine = wasmtime::Engine::default();
        let wat = format!(
            "(module {})",
            format!("(table {elements} funcref)").repeat(tables)
        );
        let module = wasmtime::Module::new(&engine, wat).unwrap();
        let limiter = Limiter::new(64 << 20);
        let mut store = Store::new(&engine, limiter);
        store.limiter(|l| l);
        let ok = wasmtime::Instance::new(&mut store, &module, &[]).is_ok();
        assert_eq!(ok, !store.data().refused);
        store.data().refused
    }

    #[test]
    fn table_elements_count_against_the_memory_cap() {
        assert!(!refused(4, 1 << 20), "32 MiB of tables fit a 64 MiB cap");
        assert!(refused(9, 1 << 20), "72 MiB of tables do not");
        assert!(
            refused(64, 1 << 20),
            "64 tables x 1M elements (512 MiB) escape no longer"
        );
        assert!(refused(1, (1 << 20) + 1), "one table past the element cap");
    }
}
