//! One guest: a validated *image* (compiled, linked against its world, pre-instantiated, its
//! configuration accepted) and the *instance* that runs calls. The instance lives in a `Store`
//! of its own; a call that traps, overruns its deadline, is refused memory or returns too much
//! fails alone: the store is thrown away and the next call instantiates afresh from the cached
//! `InstancePre` (~20-30 us). Consecutive failures quarantine the guest with exponential backoff.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use wasmtime::component::Component;
use wasmtime::{ResourceLimiter, Store, Trap};

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
pub trait World: 'static {
    /// `TransformerPre<State>` or `AgentPre<State>`.
    type Pre: Clone + Send + Sync;
    /// The instantiated bindings.
    type Bindings: Send;
    /// The world's name, for error messages.
    const NAME: &'static str;
    fn pre(rt: &Runtime, component: &Component) -> wasmtime::Result<Self::Pre>;
    fn instantiate(pre: &Self::Pre, store: &mut Store<State>) -> wasmtime::Result<Self::Bindings>;
    fn configure(
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
    #[error("CPU deadline of {0:?} exceeded")]
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
            stats,
        });
        let mut instance = Instance::new(image);
        instance
            .ensure_live()
            .map_err(|e| anyhow!("guest `{}`: {e}", instance.image.config.name))?;
        Ok(instance)
    }

    pub fn stats(&self) -> &Arc<GuestStats> {
        &self.stats
    }
}

/// Enforces the memory cap across every memory of an instance and remembers a refusal, so a
/// failed call can be told apart from other traps.
pub(crate) struct Limiter {
    cap: usize,
    used: usize,
    pub(crate) refused: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let after = self.used - current.min(self.used) + desired;
        if after > self.cap {
            self.refused = true;
            return Ok(false);
        }
        self.used = after;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }
    fn tables(&self) -> usize {
        MAX_TABLES
    }
    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

struct Live<W: World> {
    store: Store<State>,
    bindings: W::Bindings,
}

/// The running side of a guest: at most one live instance, replaced after a failure.
pub struct Instance<W: World> {
    image: Arc<Image<W>>,
    live: Option<Live<W>>,
    consecutive_failures: u32,
    quarantines: u32,
    quarantined_until: Option<Instant>,
}

impl<W: World> Instance<W> {
    pub fn new(image: Arc<Image<W>>) -> Instance<W> {
        Instance {
            image,
            live: None,
            consecutive_failures: 0,
            quarantines: 0,
            quarantined_until: None,
        }
    }

    pub fn image(&self) -> &Arc<Image<W>> {
        &self.image
    }

    pub fn name(&self) -> &str {
        &self.image.config.name
    }

    fn ensure_live(&mut self) -> Result<(), CallError> {
        if self.live.is_some() {
            return Ok(());
        }
        let cfg = &self.image.config;
        let limiter = Limiter {
            cap: usize::try_from(cfg.memory).unwrap_or(usize::MAX),
            used: 0,
            refused: false,
        };
        let state = State::new(
            cfg.name.clone(),
            &cfg.grants,
            limiter,
            self.image.stats.clone(),
        )
        .map_err(|e| CallError::Instantiate(format!("{e:#}")))?;
        let mut store = Store::new(&self.image.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_trap();
        self.image.stats.instances.inc();
        let bindings = self
            .guarded(&mut store, |store| W::instantiate(&self.image.pre, store))
            .map_err(|e| match e {
                CallError::Trap(m) => CallError::Instantiate(m),
                other => other,
            })?;
        match self.guarded(&mut store, |store| {
            W::configure(&bindings, store, &cfg.params)
        })? {
            Ok(()) => {}
            Err(why) => return Err(CallError::Configure(why)),
        }
        self.live = Some(Live { store, bindings });
        Ok(())
    }

    /// Runs `f` under the deadline and classifies a failure.
    fn guarded<R>(
        &self,
        store: &mut Store<State>,
        f: impl FnOnce(&mut Store<State>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let deadline = self.image.config.deadline;
        // The first tick may come at once after the deadline is set: one tick more makes the
        // guest run at least `deadline`, and at most `deadline` plus one tick.
        let ticks = deadline.as_nanos().div_ceil(EPOCH_TICK.as_nanos()) as u64 + 1;
        store.set_epoch_deadline(ticks);
        store.data_mut().log_lines = 0;
        store.data_mut().limiter.refused = false;
        self.image.stats.calls.inc();
        f(store).map_err(|e| {
            if store.data().limiter.refused {
                CallError::Memory(self.image.config.memory)
            } else if matches!(e.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
                CallError::Deadline(deadline)
            } else {
                CallError::Trap(format!("{e:#}"))
            }
        })
    }

    /// Calls into the guest: instantiates first if needed, enforces quarantine, the deadline
    /// and the memory cap, and `check`s the output. On failure the instance is discarded.
    pub fn call<R>(
        &mut self,
        f: impl FnOnce(&W::Bindings, &mut Store<State>) -> wasmtime::Result<R>,
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
            let mut live = self.live.take().expect("ensure_live left an instance");
            let r = self.guarded(&mut live.store, |store| f(&live.bindings, store));
            let r = r.and_then(|r| check(&r).map(|()| r).map_err(CallError::Output));
            if r.is_ok() {
                self.live = Some(live);
            }
            r
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
        self.quarantined_until.is_some_and(|t| Instant::now() < t)
    }
}
