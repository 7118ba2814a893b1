//! The proc agent's metric table: every `proc.*` name pmdaproc answers with its PMID, type,
//! semantics, units, instance domain and help, the pmns text built from it, and which
//! per-process files each metric needs. Facts only: no /proc access, no values.

use std::sync::LazyLock;

use crate::namespace::{Pmid, Semantics, ValueType};

use super::pass::Need;

/// PCP's domain for the proc PMDA.
pub const PROC_DOMAIN: u32 = 3;
/// The per-process instance domain's serial (`PROC_INDOM` in pmdaproc's indom.h).
pub const PROC_INDOM: u32 = 9;

/// One metric: name, PMID cluster and item, type, semantics, units, per process or not, help.
pub(super) struct Def {
    pub name: &'static str,
    pub cluster: u32,
    pub item: u32,
    pub ty: ValueType,
    pub sem: Semantics,
    pub units: &'static str,
    pub per_proc: bool,
    pub help: &'static str,
}

// A table row: eight columns read better positionally than as a struct literal.
#[allow(clippy::too_many_arguments)]
const fn m(
    name: &'static str,
    cluster: u32,
    item: u32,
    ty: ValueType,
    sem: Semantics,
    units: &'static str,
    per_proc: bool,
    help: &'static str,
) -> Def {
    Def {
        name,
        cluster,
        item,
        ty,
        sem,
        units,
        per_proc,
        help,
    }
}

const U32: ValueType = ValueType::U32;
const U64: ValueType = ValueType::U64;
const I32: ValueType = ValueType::I32;
const STR: ValueType = ValueType::String;
const P: bool = true;
const S: bool = false;
use Semantics::{Counter as C, Discrete as D, Instant as I};

/// Every metric pmdaproc 6.0.3 answers on a host without hotproc or cgroup filesystems
/// configured, by (cluster, item).
#[rustfmt::skip]
pub(super) static DEFS: &[Def] = &[
    m("proc.psinfo.pid", 8, 0, U32, D, "", P, "process identifier"),
    m("proc.psinfo.cmd", 8, 1, STR, D, "", P, "command name from stat (comm), at most 15 bytes for user processes"),
    m("proc.psinfo.sname", 8, 2, STR, I, "", P, "scheduling state letter (R running, S sleeping, D disk wait, Z zombie, T stopped, I idle)"),
    m("proc.psinfo.ppid", 8, 3, U32, D, "", P, "parent's process identifier"),
    m("proc.psinfo.pgrp", 8, 4, U32, D, "", P, "process group identifier"),
    m("proc.psinfo.session", 8, 5, U32, D, "", P, "session identifier"),
    m("proc.psinfo.tty", 8, 6, U32, D, "", P, "controlling terminal's device number (0: none)"),
    m("proc.psinfo.tty_pgrp", 8, 7, U32, D, "", P, "foreground process group of the controlling terminal"),
    m("proc.psinfo.flags", 8, 8, U32, D, "", P, "kernel task flags (PF_* bits)"),
    m("proc.psinfo.minflt", 8, 9, U32, C, "count", P, "page faults served without disk I/O"),
    m("proc.psinfo.cmin_flt", 8, 10, U32, C, "count", P, "minor page faults of waited-for children"),
    m("proc.psinfo.maj_flt", 8, 11, U32, C, "count", P, "page faults that needed disk I/O"),
    m("proc.psinfo.cmaj_flt", 8, 12, U32, C, "count", P, "major page faults of waited-for children"),
    m("proc.psinfo.utime", 8, 13, U64, C, "millisec", P, "CPU time in user mode"),
    m("proc.psinfo.stime", 8, 14, U64, C, "millisec", P, "CPU time in kernel mode"),
    m("proc.psinfo.cutime", 8, 15, U64, C, "millisec", P, "user-mode CPU time of waited-for children"),
    m("proc.psinfo.cstime", 8, 16, U64, C, "millisec", P, "kernel-mode CPU time of waited-for children"),
    m("proc.psinfo.priority", 8, 17, I32, I, "", P, "as PCP's proc agent reports it: the 40th stat field (real-time priority)"),
    m("proc.psinfo.nice", 8, 18, I32, I, "", P, "nice value (-20 to 19)"),
    m("proc.psinfo.it_real_value", 8, 20, U32, D, "", P, "obsolete interval timer field of stat (always 0 since Linux 2.6.17)"),
    m("proc.psinfo.start_time", 8, 21, U64, D, "millisec", P, "start time after boot"),
    m("proc.psinfo.vsize", 8, 22, U64, I, "Kbyte", P, "virtual address space size"),
    m("proc.psinfo.rss", 8, 23, U64, I, "Kbyte", P, "resident set size from stat"),
    m("proc.psinfo.rss_rlim", 8, 24, U64, I, "Kbyte", P, "soft limit on resident set size"),
    m("proc.psinfo.start_code", 8, 25, U32, D, "", P, "lowest address of program text (low 32 bits)"),
    m("proc.psinfo.end_code", 8, 26, U32, D, "", P, "highest address of program text (low 32 bits)"),
    m("proc.psinfo.start_stack", 8, 27, U32, D, "", P, "bottom of the stack (low 32 bits)"),
    m("proc.psinfo.esp", 8, 28, U32, D, "", P, "saved stack pointer (0 unless the process is being dumped)"),
    m("proc.psinfo.eip", 8, 29, U32, D, "", P, "saved instruction pointer (0 unless the process is being dumped)"),
    m("proc.psinfo.signal", 8, 30, U32, D, "", P, "pending signals bitmap from stat (low 32 bits)"),
    m("proc.psinfo.blocked", 8, 31, U32, D, "", P, "blocked signals bitmap from stat (low 32 bits)"),
    m("proc.psinfo.sigignore", 8, 32, U32, D, "", P, "ignored signals bitmap from stat (low 32 bits)"),
    m("proc.psinfo.sigcatch", 8, 33, U32, D, "", P, "caught signals bitmap from stat (low 32 bits)"),
    m("proc.psinfo.wchan", 8, 34, U64, D, "", P, "wait channel field of stat (0 on current kernels)"),
    m("proc.psinfo.nswap", 8, 35, U32, C, "count", P, "pages swapped (not maintained by Linux)"),
    m("proc.psinfo.cnswap", 8, 36, U32, C, "count", P, "pages swapped by children (not maintained by Linux)"),
    m("proc.psinfo.exit_signal", 8, 37, U32, D, "", P, "signal sent to the parent when this process ends"),
    m("proc.psinfo.processor", 8, 38, U32, I, "", P, "CPU this process last ran on"),
    m("proc.psinfo.ttyname", 8, 39, STR, D, "", P, "name of the controlling terminal below /dev, ? when none"),
    m("proc.psinfo.wchan_s", 8, 40, STR, I, "", P, "kernel function the process sleeps in, from /proc/PID/wchan"),
    m("proc.psinfo.psargs", 8, 41, STR, D, "", P, "command line, arguments separated by spaces (read when first seen)"),
    m("proc.psinfo.rt_priority", 8, 42, U32, I, "", P, "as PCP's proc agent reports it: the 41st stat field (scheduling policy)"),
    m("proc.psinfo.policy", 8, 43, U32, I, "", P, "as PCP's proc agent reports it: the 42nd stat field (block I/O delay ticks)"),
    m("proc.psinfo.delayacct_blkio_time", 8, 44, U64, C, "millisec", P, "as PCP's proc agent reports it: the 43rd stat field (guest time) in ms"),
    m("proc.psinfo.guest_time", 8, 45, U64, C, "millisec", P, "as PCP's proc agent reports it: the 44th stat field (children's guest time) in ms"),
    m("proc.psinfo.cguest_time", 8, 46, U64, C, "millisec", P, "as PCP's proc agent reports it: the 45th stat field in ms"),
    m("proc.psinfo.environ", 8, 47, STR, I, "", P, "environment, entries separated by spaces"),
    m("proc.psinfo.policy_s", 8, 48, STR, I, "", P, "name of the value of proc.psinfo.policy as a scheduling policy"),
    m("proc.nprocs", 8, 99, U32, I, "", S, "processes listed in this fetch"),
    m("proc.memory.size", 9, 0, U32, I, "Kbyte", P, "total program size from statm"),
    m("proc.memory.rss", 9, 1, U32, I, "Kbyte", P, "resident pages from statm"),
    m("proc.memory.share", 9, 2, U32, I, "Kbyte", P, "resident file-backed and shared pages from statm"),
    m("proc.memory.textrss", 9, 3, U32, I, "Kbyte", P, "program text pages from statm"),
    m("proc.memory.librss", 9, 4, U32, I, "Kbyte", P, "library pages from statm (0 since Linux 2.6)"),
    m("proc.memory.datrss", 9, 5, U32, I, "Kbyte", P, "data and stack pages from statm"),
    m("proc.memory.dirty", 9, 6, U32, I, "Kbyte", P, "dirty pages from statm (0 since Linux 2.6)"),
    m("proc.memory.maps", 9, 7, STR, I, "", P, "memory map listing from /proc/PID/maps"),
    m("proc.control.all.threads", 10, 1, U32, I, "", S, "whether threads are listed as instances (always 0 here)"),
    m("proc.control.perclient.threads", 10, 2, U32, I, "", S, "per-client thread listing switch (always 0 here)"),
    m("proc.control.perclient.cgroups", 10, 3, STR, I, "", S, "per-client cgroup filter (always empty here)"),
    m("proc.psinfo.cgroups", 11, 0, STR, I, "", P, "control groups as subsystem:path pairs joined by semicolons"),
    m("proc.id.container", 11, 1, STR, D, "", P, "container id found in the cpuset control group path, empty when none"),
    m("proc.psinfo.labels", 12, 0, STR, I, "", P, "security label from /proc/PID/attr/current"),
    m("proc.runq.runnable", 13, 0, I32, I, "count", S, "processes running or ready to run"),
    m("proc.runq.blocked", 13, 1, I32, I, "count", S, "processes in uninterruptible sleep"),
    m("proc.runq.sleeping", 13, 2, I32, I, "count", S, "processes in interruptible sleep"),
    m("proc.runq.stopped", 13, 3, I32, I, "count", S, "processes stopped or traced"),
    m("proc.runq.swapped", 13, 4, I32, I, "count", S, "kernel threads (no user address space)"),
    m("proc.runq.defunct", 13, 5, I32, I, "count", S, "zombie processes"),
    m("proc.runq.unknown", 13, 6, I32, I, "count", S, "processes in another state or whose stat was unreadable"),
    m("proc.runq.kernel", 13, 7, I32, I, "count", S, "kept for PCP compatibility, always 0"),
    m("proc.id.uid", 24, 0, U32, D, "", P, "real user id"),
    m("proc.id.euid", 24, 1, U32, D, "", P, "effective user id"),
    m("proc.id.suid", 24, 2, U32, D, "", P, "saved user id"),
    m("proc.id.fsuid", 24, 3, U32, D, "", P, "filesystem user id"),
    m("proc.id.gid", 24, 4, U32, D, "", P, "as PCP's proc agent reports it: the real user id"),
    m("proc.id.egid", 24, 5, U32, D, "", P, "effective group id"),
    m("proc.id.sgid", 24, 6, U32, D, "", P, "saved group id"),
    m("proc.id.fsgid", 24, 7, U32, D, "", P, "filesystem group id"),
    m("proc.id.uid_nm", 24, 8, STR, D, "", P, "user name of the real user id"),
    m("proc.id.euid_nm", 24, 9, STR, D, "", P, "user name of the effective user id"),
    m("proc.id.suid_nm", 24, 10, STR, D, "", P, "user name of the saved user id"),
    m("proc.id.fsuid_nm", 24, 11, STR, D, "", P, "user name of the filesystem user id"),
    m("proc.id.gid_nm", 24, 12, STR, D, "", P, "group name of the real group id"),
    m("proc.id.egid_nm", 24, 13, STR, D, "", P, "group name of the effective group id"),
    m("proc.id.sgid_nm", 24, 14, STR, D, "", P, "group name of the saved group id"),
    m("proc.id.fsgid_nm", 24, 15, STR, D, "", P, "group name of the filesystem group id"),
    m("proc.psinfo.signal_s", 24, 16, STR, I, "", P, "pending signals, hexadecimal mask from status"),
    m("proc.psinfo.blocked_s", 24, 17, STR, I, "", P, "blocked signals, hexadecimal mask from status"),
    m("proc.psinfo.sigignore_s", 24, 18, STR, I, "", P, "ignored signals, hexadecimal mask from status"),
    m("proc.psinfo.sigcatch_s", 24, 19, STR, I, "", P, "caught signals, hexadecimal mask from status"),
    m("proc.memory.vmsize", 24, 20, U32, I, "Kbyte", P, "virtual memory size (VmSize)"),
    m("proc.memory.vmlock", 24, 21, U32, I, "Kbyte", P, "locked memory (VmLck)"),
    m("proc.memory.vmrss", 24, 22, U32, I, "Kbyte", P, "resident memory (VmRSS)"),
    m("proc.memory.vmdata", 24, 23, U32, I, "Kbyte", P, "data segment size (VmData)"),
    m("proc.memory.vmstack", 24, 24, U32, I, "Kbyte", P, "stack size (VmStk)"),
    m("proc.memory.vmexe", 24, 25, U32, I, "Kbyte", P, "program text size (VmExe)"),
    m("proc.memory.vmlib", 24, 26, U32, I, "Kbyte", P, "shared library code size (VmLib)"),
    m("proc.memory.vmswap", 24, 27, U32, I, "Kbyte", P, "swapped-out anonymous memory (VmSwap)"),
    m("proc.psinfo.threads", 24, 28, U32, I, "", P, "threads in the process"),
    m("proc.psinfo.vctxsw", 24, 29, U32, I, "", P, "voluntary context switches"),
    m("proc.psinfo.nvctxsw", 24, 30, U32, I, "", P, "involuntary context switches"),
    m("proc.psinfo.cpusallowed", 24, 31, STR, I, "", P, "CPUs the process may run on, as a list"),
    m("proc.psinfo.ngid", 24, 32, U32, D, "", P, "NUMA group id (0 without NUMA balancing)"),
    m("proc.memory.vmpeak", 24, 33, U32, I, "Kbyte", P, "largest virtual memory size (VmPeak)"),
    m("proc.memory.vmpin", 24, 34, U32, I, "Kbyte", P, "pinned memory (VmPin)"),
    m("proc.memory.vmhwm", 24, 35, U32, I, "Kbyte", P, "largest resident memory (VmHWM)"),
    m("proc.memory.vmpte", 24, 36, U32, I, "Kbyte", P, "page table size (VmPTE)"),
    m("proc.namespaces.tgid", 24, 37, STR, D, "", P, "thread group id in each nested pid namespace, comma separated"),
    m("proc.namespaces.pid", 24, 38, STR, D, "", P, "process id in each nested pid namespace, comma separated"),
    m("proc.namespaces.pgid", 24, 39, STR, D, "", P, "process group id in each nested pid namespace, comma separated"),
    m("proc.namespaces.sid", 24, 40, STR, D, "", P, "session id in each nested pid namespace, comma separated"),
    m("proc.psinfo.tgid", 24, 41, U32, D, "", P, "thread group id"),
    m("proc.namespaces.envid", 24, 42, U32, D, "", P, "OpenVZ container id (envID), where the kernel has one"),
    m("proc.memory.vmreal", 24, 43, U64, I, "Kbyte", P, "resident plus swapped memory (VmRSS + VmSwap)"),
    m("proc.memory.vmnonlib", 24, 44, U64, I, "Kbyte", P, "resident plus swapped memory less shared library code"),
    m("proc.schedstat.cpu_time", 31, 0, U64, C, "nanosec", P, "time on a CPU"),
    m("proc.schedstat.run_delay", 31, 1, U64, C, "nanosec", P, "time waiting on a run queue"),
    m("proc.schedstat.pcount", 31, 2, U64, C, "count", P, "times run on a CPU"),
    m("proc.io.rchar", 32, 0, U64, C, "byte", P, "bytes read through read-like system calls"),
    m("proc.io.wchar", 32, 1, U64, C, "byte", P, "bytes written through write-like system calls"),
    m("proc.io.syscr", 32, 2, U64, C, "count", P, "read-like system calls"),
    m("proc.io.syscw", 32, 3, U64, C, "count", P, "write-like system calls"),
    m("proc.io.read_bytes", 32, 4, U64, C, "byte", P, "bytes fetched from storage"),
    m("proc.io.write_bytes", 32, 5, U64, C, "byte", P, "bytes sent towards storage"),
    m("proc.io.cancelled_write_bytes", 32, 6, U64, C, "byte", P, "bytes whose write to storage was cancelled (truncated dirty pages)"),
    m("proc.smaps.rss", 33, 0, U64, I, "Kbyte", P, "resident memory, summed over mappings"),
    m("proc.smaps.pss", 33, 1, U64, I, "Kbyte", P, "proportional share of resident memory"),
    m("proc.smaps.pss_anon", 33, 2, U64, I, "Kbyte", P, "proportional share of anonymous memory"),
    m("proc.smaps.pss_file", 33, 3, U64, I, "Kbyte", P, "proportional share of file-backed memory"),
    m("proc.smaps.pss_shmem", 33, 4, U64, I, "Kbyte", P, "proportional share of shared memory"),
    m("proc.smaps.shared_clean", 33, 5, U64, I, "Kbyte", P, "clean pages shared with other processes"),
    m("proc.smaps.shared_dirty", 33, 6, U64, I, "Kbyte", P, "dirty pages shared with other processes"),
    m("proc.smaps.private_clean", 33, 7, U64, I, "Kbyte", P, "clean pages only this process maps"),
    m("proc.smaps.private_dirty", 33, 8, U64, I, "Kbyte", P, "dirty pages only this process maps"),
    m("proc.smaps.referenced", 33, 9, U64, I, "Kbyte", P, "memory marked referenced or accessed"),
    m("proc.smaps.anonymous", 33, 10, U64, I, "Kbyte", P, "memory not backed by a file"),
    m("proc.smaps.lazyfree", 33, 11, U64, I, "Kbyte", P, "memory freed with MADV_FREE, not yet reclaimed"),
    m("proc.smaps.anonhugepages", 33, 12, U64, I, "Kbyte", P, "anonymous memory in transparent huge pages"),
    m("proc.smaps.shmempmdmapped", 33, 13, U64, I, "Kbyte", P, "shared memory mapped with huge pages"),
    m("proc.smaps.filepmdmapped", 33, 14, U64, I, "Kbyte", P, "file memory mapped with huge pages"),
    m("proc.smaps.shared_hugetlb", 33, 15, U64, I, "Kbyte", P, "shared hugetlbfs memory"),
    m("proc.smaps.private_hugetlb", 33, 16, U64, I, "Kbyte", P, "private hugetlbfs memory"),
    m("proc.smaps.swap", 33, 17, U64, I, "Kbyte", P, "anonymous memory swapped out"),
    m("proc.smaps.swappss", 33, 18, U64, I, "Kbyte", P, "proportional share of swapped-out memory"),
    m("proc.smaps.locked", 33, 19, U64, I, "Kbyte", P, "memory locked in RAM"),
    m("proc.fd.count", 51, 0, U32, I, "count", P, "open file descriptors"),
    m("proc.psinfo.oom_score", 62, 0, U32, I, "", P, "out-of-memory killer's badness score"),
    m("proc.psinfo.exe", 69, 0, STR, D, "", P, "path of the executable, empty when unreadable"),
    m("proc.psinfo.cwd", 72, 0, STR, D, "", P, "current working directory, empty when unreadable"),
    m("proc.autogroup.enabled", 74, 0, U32, I, "", S, "1 when the kernel groups tasks by session for scheduling"),
    m("proc.autogroup.id", 74, 1, U32, D, "", P, "scheduling autogroup of the process"),
    m("proc.autogroup.nice", 74, 2, I32, I, "", P, "nice value of the process's autogroup"),
];

// pmdaproc's clusters (its clusters.h).
pub(super) const CL_STAT: u32 = 8;
pub(super) const CL_STATM: u32 = 9;
pub(super) const CL_CONTROL: u32 = 10;
pub(super) const CL_CGROUP: u32 = 11;
pub(super) const CL_LABEL: u32 = 12;
pub(super) const CL_RUNQ: u32 = 13;
pub(super) const CL_STATUS: u32 = 24;
pub(super) const CL_SCHEDSTAT: u32 = 31;
pub(super) const CL_IO: u32 = 32;
pub(super) const CL_SMAPS: u32 = 33;
pub(super) const CL_FD: u32 = 51;
pub(super) const CL_OOM: u32 = 62;
pub(super) const CL_EXE: u32 = 69;
pub(super) const CL_CWD: u32 = 72;
pub(super) const CL_AUTOGROUP: u32 = 74;

pub(super) fn pmid_of(def: &Def) -> Pmid {
    Pmid {
        domain: PROC_DOMAIN,
        cluster: def.cluster,
        item: def.item,
    }
}

pub(super) fn def_of(id: Pmid) -> Option<&'static Def> {
    if id.domain != PROC_DOMAIN {
        return None;
    }
    DEFS.iter()
        .find(|d| d.cluster == id.cluster && d.item == id.item)
}

/// The pmns text of the agent's names (built from the table; load it into the namespace).
pub static PROC_PMNS: LazyLock<String> = LazyLock::new(|| {
    // Children of each inner node, in the table's order.
    let mut nodes: Vec<(String, Vec<String>)> = vec![("root".into(), Vec::new())];
    for def in DEFS {
        let parts: Vec<&str> = def.name.split('.').collect();
        for depth in 0..parts.len() {
            let parent = if depth == 0 {
                "root".to_string()
            } else {
                parts[..depth].join(".")
            };
            let entry = if depth + 1 == parts.len() {
                format!(
                    "{} {}:{}:{}",
                    parts[depth], PROC_DOMAIN, def.cluster, def.item
                )
            } else {
                parts[depth].to_string()
            };
            let at = match nodes.iter().position(|(n, _)| *n == parent) {
                Some(at) => at,
                None => {
                    nodes.push((parent, Vec::new()));
                    nodes.len() - 1
                }
            };
            if !nodes[at].1.contains(&entry) {
                nodes[at].1.push(entry);
            }
        }
    }
    let mut text =
        String::from("/* proc agent (domain 3): names and PMIDs as PCP's proc PMDA */\n");
    for (node, kids) in nodes {
        text.push_str(&format!("{node} {{ {} }}\n", kids.join(" ")));
    }
    text
});

/// The files a metric needs.
pub(super) fn need_of(def: &Def, need: &mut Need) {
    let n = match (def.cluster, def.item) {
        (CL_STAT, 39) => Need::TTY,
        (CL_STAT, 40) => Need::WCHAN,
        (CL_STAT, 47) => Need::ENVIRON,
        (CL_STATM, 7) => Need::MAPS,
        (CL_STATM, _) => Need::STATM,
        (CL_STATUS, 8..=15) => {
            need.add(Need::NAMES);
            Need::STATUS
        }
        (CL_STATUS, _) => Need::STATUS,
        (CL_CGROUP, _) => Need::CGROUP,
        (CL_LABEL, _) => Need::LABEL,
        (CL_SCHEDSTAT, _) => Need::SCHED,
        (CL_IO, _) => Need::IO,
        (CL_SMAPS, _) => Need::SMAPS,
        (CL_FD, _) => Need::FD,
        (CL_OOM, _) => Need::OOM,
        (CL_EXE, _) => Need::EXE,
        (CL_CWD, _) => Need::CWD,
        (CL_AUTOGROUP, _) => Need::AUTOGROUP,
        _ => return,
    };
    need.add(n);
}
