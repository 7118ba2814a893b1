//! Every limit wasmon puts on a guest, as named constants with the reason beside them. Config
//! may override the per-guest ones (`deadline`, `memory`, ...); the rest are policy.

use std::time::Duration;

/// How often the epoch ticker advances the engine's epoch. A deadline is enforced to within one
/// tick, so this is the slack on every deadline; 10 ms keeps the ticker's cost negligible.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// CPU deadline of one guest call unless the guest's config says otherwise. A transformer
/// handles a batch of hundreds of samples in well under a millisecond; 100 ms means a guest
/// is stuck, not slow.
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
pub const MAX_TABLE_ELEMENTS: usize = 1 << 20;
pub const MAX_INSTANCES: usize = 64;
pub const MAX_MEMORIES: usize = 64;

/// Consecutive failed calls after which a guest is quarantined.
pub const QUARANTINE_AFTER: u32 = 5;

/// First quarantine period; each further one doubles, up to [`QUARANTINE_MAX`].
pub const QUARANTINE_BASE: Duration = Duration::from_secs(1);
pub const QUARANTINE_MAX: Duration = Duration::from_secs(300);
