//! Every limit wasmon puts on a guest, as named constants with the reason beside them. Config
//! may override the per-guest ones (`deadline`, `memory`, ...); the rest are policy. Beside
//! them, the wasmtime [`Limiter`] that enforces the memory and table ones.

use std::time::Duration;

use wasmtime::ResourceLimiter;

/// How often the epoch ticker advances the engine's epoch. A deadline is enforced to within one
/// tick, so this is the slack on every deadline; 10 ms keeps the ticker's cost negligible.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Deadline of one guest call unless the guest's config says otherwise: the *wall time* from
/// the call's start to its return, whether the guest computes, sleeps, or waits on a socket or
/// a file. A transformer handles a batch of hundreds of samples in well under a millisecond;
/// 100 ms means a guest is stuck, not slow. A call still running at its deadline is abandoned
/// within one [`EPOCH_TICK`] and its instance thrown away.
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(100);

/// Linear memory one guest instance may grow to unless config says otherwise.
pub const DEFAULT_MEMORY: u64 = 64 << 20;

/// Samples one call may return. A transformer may legitimately emit more than it was given
/// (an aggregator flush), but a guest that floods the pipeline is failing.
pub const MAX_OUTPUT_SAMPLES: usize = 1 << 20;

/// Bytes of strings one call may return (names, resources, units, metadata).
pub const MAX_OUTPUT_STRING_BYTES: usize = 64 << 20;

/// Entries in the string table a host shares with one guest instance before the host clears
/// it. Names and resources repeat from batch to batch, so a table this size is only reached
/// when resources churn (pids, short-lived containers); clearing then costs one batch that
/// resends its strings.
pub const MAX_STRING_TABLE: usize = 1 << 16;

/// Log lines one call may emit through the host's `log` import; the rest are counted and
/// dropped so a chatty guest cannot flood the daemon's log.
pub const MAX_LOG_LINES_PER_CALL: u32 = 100;

/// Longest log line kept; longer ones are cut.
pub const MAX_LOG_LINE_BYTES: usize = 4096;

/// Tables, instances and memories per store: a guest component needs a handful.
pub const MAX_TABLES: usize = 64;
/// Elements of one table. Every element also counts against the memory cap, at
/// [`TABLE_ELEMENT_BYTES`] each, so 64 tables cannot hold more than the cap allows either.
pub const MAX_TABLE_ELEMENTS: usize = 1 << 20;
/// What a table element costs the host: a function reference is a pointer-sized slot.
pub const TABLE_ELEMENT_BYTES: usize = 8;
pub const MAX_INSTANCES: usize = 64;
pub const MAX_MEMORIES: usize = 64;

/// Stack wasm code may use before it traps with "call stack exhausted". Explicit so that
/// infinite recursion in a guest is a trap of that call, never a crash of the daemon; 512 KiB
/// is wasmtime's default and ample for guests that keep their data on the heap.
pub const MAX_WASM_STACK: usize = 512 << 10;

/// Stack of the fiber a call runs on: wasm's stack plus room for the host functions it calls
/// (WASI's included). Must exceed [`MAX_WASM_STACK`].
pub const ASYNC_STACK: usize = 2 << 20;

/// Handles in one instance's resource table: WASI descriptors, streams and pollables, and
/// mapped files. A guest that leaks handles fails its own calls ("table full") long before the
/// daemon runs out of file descriptors.
pub const MAX_HANDLES: usize = 1024;

/// Files one agent instance may hold open through the `mapped` interface at once; each is an
/// open file descriptor of the daemon.
pub const MAX_MAPPED_FILES: usize = 64;

/// Consecutive failed calls after which a guest is quarantined.
pub const QUARANTINE_AFTER: u32 = 5;

/// First quarantine period; each further one doubles, up to [`QUARANTINE_MAX`].
pub const QUARANTINE_BASE: Duration = Duration::from_secs(1);
pub const QUARANTINE_MAX: Duration = Duration::from_secs(300);

/// Requests one exporter call may return: an encoding splits a batch into a few requests
/// (one per tenant, per metric family); thousands mean a bug, and each costs a round trip.
pub const MAX_EXPORT_REQUESTS: usize = 1024;

/// Bytes of request bodies one exporter call may return. A batch is at most a sink's
/// `batch-size` samples; even a verbose encoding of 10,000 samples is a few MiB.
pub const MAX_EXPORT_BYTES: usize = 64 << 20;

/// Enforces the memory cap across every memory *and table* of an instance (a table element
/// costs [`TABLE_ELEMENT_BYTES`]) and remembers a refusal, so a failed call can be told apart
/// from other traps.
pub(crate) struct Limiter {
    cap: usize,
    used: usize,
    pub(crate) refused: bool,
}

impl Limiter {
    /// A limiter for an instance that may hold `cap` bytes of memories and tables.
    pub(crate) fn new(cap: u64) -> Limiter {
        Limiter {
            cap: usize::try_from(cap).unwrap_or(usize::MAX),
            used: 0,
            refused: false,
        }
    }

    /// One memory or table going from `current` to `desired` bytes: allowed while the total
    /// stays within the cap.
    fn grow(&mut self, current: usize, desired: usize) -> bool {
        let after = (self.used - current.min(self.used)).saturating_add(desired);
        if after > self.cap {
            self.refused = true;
            return false;
        }
        self.used = after;
        true
    }
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(current, desired))
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS {
            self.refused = true;
            return Ok(false);
        }
        let bytes = |n: usize| n.saturating_mul(TABLE_ELEMENT_BYTES);
        Ok(self.grow(bytes(current), bytes(desired)))
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
