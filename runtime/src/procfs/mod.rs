//! `runtime::procfs` — bulk reads of every process and thread from /proc in one pass, with a
//! field filter (after QNX's "/proc/pids+threads" bulk read), conversion of a snapshot into
//! `proc.*` samples, the `wasmon ps` command, and the CPU-hog, blocked-thread and resource-limit
//! detectors that feed `notify::Notifier`.
//!
//! Owns only /proc access and the detectors' state. It does not store samples or serve HTTP:
//! the lead's pipeline takes the triples from `for_each_sample`, alarms go through the notifier
//! like any other threshold, and `api::notify` streams them.

pub mod agent;
mod config;
mod detect;
mod parse;
mod ps;
mod reader;
mod samples;
mod sys;

use std::ops::{BitOr, BitOrAssign, Range};

pub use config::{BlockedConfig, CpuHogConfig, LimitConfig, LimitResource, ProcfsConfig};
pub use detect::{DetectError, Detectors, run_detectors, run_detectors_with};
pub use parse::{Comm, Name, ParseError, SchedStat, TaskStat, Wchan, parse_stat};
pub use ps::{PsArgs, ps_main, write_ps};
pub use reader::{ProcError, ProcReader, Scope, now_ns};
pub use samples::{Description as ProcDescription, describe as describe_metric};
pub use samples::{for_each_sample, metrics, samples};

/// Which groups of fields a pass reads. `stat` is always read (one file per task: pid, comm,
/// state, ppid, cpu times, memory sizes, thread count); the other groups cost extra files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Fields(u8);

impl Fields {
    /// No extra files: only what `stat` carries.
    pub const NONE: Fields = Fields(0);
    /// CPU times (utime, stime, start time, last CPU). From `stat`.
    pub const CPU: Fields = Fields(1);
    /// Memory (vsize, rss, page faults). From `stat`.
    pub const MEM: Fields = Fields(1 << 1);
    /// Scheduling state, process group, session, terminal. From `stat`.
    pub const STATE: Fields = Fields(1 << 2);
    /// Kernel function a task sleeps in: one extra file (`wchan`) per task.
    pub const WCHAN: Fields = Fields(1 << 3);
    /// Time on CPU and waiting to run (ns): one extra file (`schedstat`) per task. Tells a
    /// poller whether a blocked thread ran between two polls.
    pub const SCHED: Fields = Fields(1 << 4);
    /// Open file descriptor count: one directory listing per process.
    pub const FD: Fields = Fields(1 << 5);
    /// State, wchan and blocking information (the blocked-thread detector's set).
    pub const BLOCKING: Fields = Fields(Self::STATE.0 | Self::WCHAN.0 | Self::SCHED.0);
    pub const ALL: Fields = Fields(0x3f);

    pub fn contains(self, other: Fields) -> bool {
        self.0 & other.0 == other.0
    }

    /// Parse a group name as used by `wasmon ps --fields`.
    pub fn from_name(name: &str) -> Option<Fields> {
        Some(match name.trim() {
            "cpu" => Fields::CPU,
            "mem" | "memory" => Fields::MEM,
            "state" => Fields::STATE,
            "wchan" => Fields::WCHAN,
            "sched" => Fields::SCHED,
            "fd" | "fds" => Fields::FD,
            "blocking" => Fields::BLOCKING,
            "all" => Fields::ALL,
            _ => return None,
        })
    }
}

impl BitOr for Fields {
    type Output = Fields;
    fn bitor(self, rhs: Fields) -> Fields {
        Fields(self.0 | rhs.0)
    }
}

impl BitOrAssign for Fields {
    fn bitor_assign(&mut self, rhs: Fields) {
        self.0 |= rhs.0;
    }
}

/// One process. Fields outside the pass's filter are `None`/zero.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcInfo {
    pub pid: u32,
    pub stat: TaskStat,
    /// With `Fields::WCHAN` (empty name: running or not disclosed by the kernel).
    pub wchan: Option<Wchan>,
    /// With `Fields::SCHED`.
    pub sched: Option<SchedStat>,
    /// With `Fields::FD`; `None` also when the directory is not readable (another user's).
    pub fd_count: Option<u32>,
    /// This process's threads in `Snapshot::threads` (empty unless threads were read).
    pub threads: Range<u32>,
}

/// One thread (task) of a process; the main thread has `tid == pid`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ThreadInfo {
    pub pid: u32,
    pub tid: u32,
    pub stat: TaskStat,
    pub wchan: Option<Wchan>,
    pub sched: Option<SchedStat>,
}

/// The result of one pass.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// When the pass started, ns since the Unix epoch.
    pub ts_ns: i64,
    pub fields: Fields,
    pub with_threads: bool,
    pub clk_tck: u64,
    pub page_size: u64,
    pub procs: Vec<ProcInfo>,
    pub threads: Vec<ThreadInfo>,
    /// Processes that vanished (or became unreadable) during the pass.
    pub skipped: u32,
}

impl Snapshot {
    pub fn threads_of(&self, p: &ProcInfo) -> &[ThreadInfo] {
        &self.threads[p.threads.start as usize..p.threads.end as usize]
    }

    /// Clock ticks to seconds.
    pub fn ticks_to_secs(&self, ticks: u64) -> f64 {
        ticks as f64 / self.clk_tck.max(1) as f64
    }

    pub fn rss_bytes(&self, st: &TaskStat) -> u64 {
        st.rss_pages * self.page_size
    }

    pub fn find(&self, pid: u32) -> Option<&ProcInfo> {
        self.procs.iter().find(|p| p.pid == pid)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_reader;
