//! Turns a `Snapshot` into `proc.*` samples: (metric name, instance, value) triples, where the
//! instance is `PID` for a process and `PID/TID` for a thread. Owns the metric names; emits only
//! the metrics whose field group the snapshot read.

use super::reader::push_decimal;
use super::{Fields, Snapshot};

/// Metric names (units in the comments). Process metrics have instance `PID`, thread metrics
/// `PID/TID`.
pub mod metrics {
    /// CPU time in user mode, seconds (counter). `Fields::CPU`.
    pub const CPU_USER: &str = "proc.cpu.user";
    /// CPU time in kernel mode, seconds (counter). `Fields::CPU`.
    pub const CPU_SYSTEM: &str = "proc.cpu.system";
    /// CPU use over the last poll window, percent of one CPU. Emitted by the detectors (it
    /// needs two passes), not by `for_each_sample`.
    pub const CPU_PERCENT: &str = "proc.cpu.percent";
    /// Resident set size, bytes. `Fields::MEM`.
    pub const MEM_RSS: &str = "proc.mem.rss";
    /// Virtual memory size, bytes. `Fields::MEM`.
    pub const MEM_VSIZE: &str = "proc.mem.vsize";
    /// Major page faults (counter). `Fields::MEM`.
    pub const MEM_MAJFLT: &str = "proc.mem.majflt";
    /// Number of threads. Always (from `stat`).
    pub const THREAD_COUNT: &str = "proc.thread.count";
    /// Open file descriptors. `Fields::FD`.
    pub const FD_COUNT: &str = "proc.fd.count";
    /// Time on CPU, seconds (counter). `Fields::SCHED`.
    pub const SCHED_RUN: &str = "proc.sched.run";
    /// Time runnable but waiting for a CPU, seconds (counter). `Fields::SCHED`.
    pub const SCHED_WAIT: &str = "proc.sched.wait";
    /// Per thread: user CPU time, seconds. `Fields::CPU` with threads.
    pub const THREAD_CPU_USER: &str = "proc.thread.cpu.user";
    /// Per thread: kernel CPU time, seconds. `Fields::CPU` with threads.
    pub const THREAD_CPU_SYSTEM: &str = "proc.thread.cpu.system";
    /// Per thread: time on CPU, seconds. `Fields::SCHED` with threads.
    pub const THREAD_SCHED_RUN: &str = "proc.thread.sched.run";
    /// Per thread: seconds it has been in a configured blocking state, 0 when not blocked.
    /// Emitted by the blocked-thread detector.
    pub const THREAD_BLOCKED: &str = "proc.thread.blocked";

    /// Every per-process metric (a vanished pid is forgotten under each of them).
    pub const PROCESS: &[&str] = &[
        CPU_USER,
        CPU_SYSTEM,
        CPU_PERCENT,
        MEM_RSS,
        MEM_VSIZE,
        MEM_MAJFLT,
        THREAD_COUNT,
        FD_COUNT,
        SCHED_RUN,
        SCHED_WAIT,
    ];
    /// Every per-thread metric.
    pub const THREAD: &[&str] = &[
        THREAD_CPU_USER,
        THREAD_CPU_SYSTEM,
        THREAD_SCHED_RUN,
        THREAD_BLOCKED,
    ];
}

/// What a `proc.*` metric is, for readers that need more than its name (the Prometheus
/// exposition): PCP's semantics (a counter or not) and its units as PCP writes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Description {
    pub name: &'static str,
    pub counter: bool,
    /// Units in PCP's `pmUnitsStr` form ("sec", "byte", "count", "" for none).
    pub units: &'static str,
    pub help: &'static str,
    /// Per thread (instance `PID/TID`) rather than per process (`PID`).
    pub thread: bool,
}

/// A per-process metric's row of [`DESCRIPTIONS`]; `.per_thread()` for a thread's.
const fn d(
    name: &'static str,
    counter: bool,
    units: &'static str,
    help: &'static str,
) -> Description {
    Description {
        name,
        counter,
        units,
        help,
        thread: false,
    }
}

impl Description {
    const fn per_thread(self) -> Self {
        Description {
            thread: true,
            ..self
        }
    }
}

/// Every metric the process reader and its detectors emit.
pub const DESCRIPTIONS: &[Description] = {
    use metrics::*;
    &[
        d(
            CPU_USER,
            true,
            "sec",
            "CPU time the process spent in user mode.",
        ),
        d(
            CPU_SYSTEM,
            true,
            "sec",
            "CPU time the process spent in the kernel.",
        ),
        d(
            CPU_PERCENT,
            false,
            "",
            "CPU use of the process over the last interval, percent of one CPU.",
        ),
        d(MEM_RSS, false, "byte", "Resident set size of the process."),
        d(
            MEM_VSIZE,
            false,
            "byte",
            "Virtual memory size of the process.",
        ),
        d(
            MEM_MAJFLT,
            true,
            "count",
            "Major page faults of the process.",
        ),
        d(THREAD_COUNT, false, "count", "Threads of the process."),
        d(
            FD_COUNT,
            false,
            "count",
            "Open file descriptors of the process.",
        ),
        d(
            SCHED_RUN,
            true,
            "sec",
            "Time the process's threads ran on a CPU (schedstat).",
        ),
        d(
            SCHED_WAIT,
            true,
            "sec",
            "Time the process's threads were runnable but waited for a CPU (schedstat).",
        ),
        d(
            THREAD_CPU_USER,
            true,
            "sec",
            "CPU time the thread spent in user mode.",
        )
        .per_thread(),
        d(
            THREAD_CPU_SYSTEM,
            true,
            "sec",
            "CPU time the thread spent in the kernel.",
        )
        .per_thread(),
        d(
            THREAD_SCHED_RUN,
            true,
            "sec",
            "Time the thread ran on a CPU (schedstat).",
        )
        .per_thread(),
        d(
            THREAD_BLOCKED,
            false,
            "sec",
            "How long the thread has been in a watched blocking state, 0 when it is not.",
        )
        .per_thread(),
    ]
};

/// The description of a `proc.*` metric this reader emits.
pub fn describe(name: &str) -> Option<&'static Description> {
    DESCRIPTIONS.iter().find(|d| d.name == name)
}

/// Format `pid` or `pid/tid` into `buf` and return it as text. No allocation after the first use.
pub(crate) fn instance_name(buf: &mut Vec<u8>, pid: u32, tid: Option<u32>) -> &str {
    buf.clear();
    push_decimal(buf, pid);
    if let Some(tid) = tid {
        buf.push(b'/');
        push_decimal(buf, tid);
    }
    // Only ASCII digits and '/' were written.
    std::str::from_utf8(buf).unwrap_or_default()
}

/// Call `f(metric, instance, value)` for every sample in the snapshot, without allocating per
/// sample (the instance string is reused between calls: copy it if you keep it).
pub fn for_each_sample(snap: &Snapshot, mut f: impl FnMut(&'static str, &str, f64)) {
    use metrics::*;
    let mut buf = Vec::with_capacity(24);
    let fl = snap.fields;
    for p in &snap.procs {
        let inst = instance_name(&mut buf, p.pid, None);
        let st = &p.stat;
        f(THREAD_COUNT, inst, f64::from(st.num_threads));
        if fl.contains(Fields::CPU) {
            f(CPU_USER, inst, snap.ticks_to_secs(st.utime));
            f(CPU_SYSTEM, inst, snap.ticks_to_secs(st.stime));
        }
        if fl.contains(Fields::MEM) {
            f(MEM_RSS, inst, snap.rss_bytes(st) as f64);
            f(MEM_VSIZE, inst, st.vsize as f64);
            f(MEM_MAJFLT, inst, st.majflt as f64);
        }
        if let Some(n) = p.fd_count {
            f(FD_COUNT, inst, f64::from(n));
        }
        if let Some(s) = p.sched {
            f(SCHED_RUN, inst, s.run_ns as f64 * 1e-9);
            f(SCHED_WAIT, inst, s.wait_ns as f64 * 1e-9);
        }
    }
    for t in &snap.threads {
        let inst = instance_name(&mut buf, t.pid, Some(t.tid));
        if fl.contains(Fields::CPU) {
            f(THREAD_CPU_USER, inst, snap.ticks_to_secs(t.stat.utime));
            f(THREAD_CPU_SYSTEM, inst, snap.ticks_to_secs(t.stat.stime));
        }
        if let Some(s) = t.sched {
            f(THREAD_SCHED_RUN, inst, s.run_ns as f64 * 1e-9);
        }
    }
}

/// `for_each_sample` collected into owned triples.
pub fn samples(snap: &Snapshot) -> Vec<(&'static str, String, f64)> {
    let mut out = Vec::with_capacity(snap.procs.len() * 4 + snap.threads.len() * 2);
    for_each_sample(snap, |m, i, v| out.push((m, i.to_owned(), v)));
    out
}

#[cfg(test)]
mod description_tests {
    use super::*;

    #[test]
    fn every_emitted_metric_is_described_once_with_its_scope() {
        for m in metrics::PROCESS {
            assert!(describe(m).is_some_and(|d| !d.thread), "{m}");
        }
        for m in metrics::THREAD {
            assert!(describe(m).is_some_and(|d| d.thread), "{m}");
        }
        assert_eq!(
            DESCRIPTIONS.len(),
            metrics::PROCESS.len() + metrics::THREAD.len()
        );
        assert!(describe("proc.nope").is_none());
    }
}
