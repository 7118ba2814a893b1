//! The `[procfs]` section of the daemon's config: poll interval and the detectors (CPU hog,
//! blocked threads, fd/RSS/thread-count limits). Plain serde structs with defaults; the
//! detectors in `detect` read them, nothing here touches /proc or the notifier.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::notify::Direction;

/// `[procfs]`: reading /proc periodically and the detectors fed by it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct ProcfsConfig {
    /// Read /proc and run the detectors at all.
    pub enabled: bool,
    /// How often /proc is read ("5s", "200ms", "1m" or seconds as a number). Also the window
    /// over which CPU use is averaged for the CPU-hog detector.
    #[serde(with = "crate::duration::serde")]
    pub interval: Duration,
    /// Subscriber that owns the CPU-hog and limit thresholds and receives their notifications
    /// (watch it with `GET /api/notify/watch?subscriber=...`).
    pub subscriber: String,
    /// Field groups read on every poll for the samples handed to the pipeline, on top of what
    /// the detectors need: `cpu`, `mem`, `state`, `wchan`, `sched`, `fd`, `all`.
    pub fields: Vec<String>,
    /// Also read every thread for the pipeline's samples (`proc.thread.*`, instance `PID/TID`).
    /// The blocked-thread detector reads threads anyway.
    pub threads: bool,
    /// CPU-hog detector.
    pub cpu_hog: CpuHogConfig,
    /// Blocked-thread (deadlock smoke alarm) detector.
    pub blocked: BlockedConfig,
    /// fd count, RSS and thread count thresholds, per process or for every process.
    pub limits: Vec<LimitConfig>,
    /// The pipeline that `proc.*` samples (instances: pid, or pid/tid) enter; none: the
    /// snapshots only feed the detectors and the notifier.
    pub pipeline: Option<String>,
}

impl Default for ProcfsConfig {
    fn default() -> Self {
        ProcfsConfig {
            enabled: true,
            interval: Duration::from_secs(5),
            subscriber: "wasmon.procfs".into(),
            fields: vec!["cpu".into(), "mem".into()],
            threads: false,
            cpu_hog: CpuHogConfig::default(),
            blocked: BlockedConfig::default(),
            limits: Vec::new(),
            pipeline: None,
        }
    }
}

/// `[procfs.cpu-hog]`: a process above `percent` CPU over one poll interval fires once, and
/// again only after it has dropped below `percent - hysteresis`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct CpuHogConfig {
    /// Run this detector.
    pub enabled: bool,
    /// CPU use, in percent of one CPU (a process with 4 busy threads can reach 400).
    pub percent: f64,
    /// How far below `percent` a hog must drop before it can fire again.
    pub hysteresis: f64,
}

impl Default for CpuHogConfig {
    fn default() -> Self {
        CpuHogConfig {
            enabled: true,
            percent: 90.0,
            hysteresis: 10.0,
        }
    }
}

/// `[procfs.blocked]`: a thread that stays in a blocking state longer than `after` fires once,
/// and again only after it has run and blocked again. Alarms of a burst are delivered together.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct BlockedConfig {
    /// Run this detector (reads every thread's stat, schedstat and, if `wchan` is set, wchan).
    pub enabled: bool,
    /// Scheduler states that count as blocked: `D` (uninterruptible), `T` (stopped), `t`
    /// (traced), `S` (sleeping: usually too broad on its own), ...
    pub states: Vec<String>,
    /// Kernel wait functions that count as blocked when seen in `wchan` (substring match, e.g.
    /// `futex` for a futex wait). Empty: wchan is not read.
    pub wchan: Vec<String>,
    /// How long a thread must stay blocked before it fires.
    #[serde(with = "crate::duration::serde")]
    pub after: Duration,
    /// Alarms within this window of the first are delivered as one batch ("0s": no batching).
    #[serde(with = "crate::duration::serde")]
    pub batch_window: Duration,
    /// Subscriber that owns the threshold and receives the alarms.
    pub subscriber: String,
}

impl Default for BlockedConfig {
    fn default() -> Self {
        BlockedConfig {
            enabled: true,
            states: vec!["D".into()],
            wchan: Vec::new(),
            after: Duration::from_secs(60),
            batch_window: Duration::from_secs(30),
            subscriber: "wasmon.blocked".into(),
        }
    }
}

/// Which resource a `[[procfs.limits]]` entry watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitResource {
    /// Open file descriptors (`proc.fd.count`).
    FdCount,
    /// Resident set size in bytes (`proc.mem.rss`).
    Rss,
    /// Number of threads (`proc.thread.count`).
    Threads,
}

impl LimitResource {
    pub fn metric(self) -> &'static str {
        use super::metrics;
        match self {
            LimitResource::FdCount => metrics::FD_COUNT,
            LimitResource::Rss => metrics::MEM_RSS,
            LimitResource::Threads => metrics::THREAD_COUNT,
        }
    }
}

/// `[[procfs.limits]]`: one threshold on a process resource, e.g.
/// `{ resource = "fd-count", value = 1000 }` for every process, or with `pid = 4768`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LimitConfig {
    /// `fd-count`, `rss` (bytes) or `threads`.
    pub resource: LimitResource,
    /// The threshold value.
    pub value: f64,
    /// `rising` (going above, the default) or `falling` (dropping below).
    #[serde(default = "rising")]
    pub direction: Direction,
    /// Only this process; absent: every process (one global threshold).
    #[serde(default)]
    pub pid: Option<u32>,
    /// Re-arm distance, see `notify::ThresholdSpec::hysteresis`.
    #[serde(default)]
    pub hysteresis: f64,
}

fn rising() -> Direction {
    Direction::Rising
}
