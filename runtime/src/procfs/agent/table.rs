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
    m("proc.psinfo.pid", 8, 0, U32, D, "", P, "Process ID, also the instance number (/proc/PID/stat field 1)"),
    m("proc.psinfo.cmd", 8, 1, STR, D, "", P, "Command name (comm), at most 15 bytes for user processes (/proc/PID/stat field 2)"),
    m("proc.psinfo.sname", 8, 2, STR, I, "", P, "Scheduling state letter: R running, S sleeping, D disk wait, Z zombie, T stopped, I idle (/proc/PID/stat field 3)"),
    m("proc.psinfo.ppid", 8, 3, U32, D, "", P, "Process ID of the parent (/proc/PID/stat field 4)"),
    m("proc.psinfo.pgrp", 8, 4, U32, D, "", P, "Process group ID (/proc/PID/stat field 5)"),
    m("proc.psinfo.session", 8, 5, U32, D, "", P, "Session ID (/proc/PID/stat field 6)"),
    m("proc.psinfo.tty", 8, 6, U32, D, "", P, "Device number of the controlling terminal, 0 when none (/proc/PID/stat field 7)"),
    m("proc.psinfo.tty_pgrp", 8, 7, U32, D, "", P, "Foreground process group of the controlling terminal (/proc/PID/stat field 8)"),
    m("proc.psinfo.flags", 8, 8, U32, D, "", P, "Kernel task flags, PF_* bits (/proc/PID/stat field 9)"),
    m("proc.psinfo.minflt", 8, 9, U32, C, "count", P, "Page faults the process took that needed no disk I/O (/proc/PID/stat minflt)"),
    m("proc.psinfo.cmin_flt", 8, 10, U32, C, "count", P, "Minor page faults of the process's waited-for children (/proc/PID/stat cminflt)"),
    m("proc.psinfo.maj_flt", 8, 11, U32, C, "count", P, "Page faults the process took that needed disk I/O (/proc/PID/stat majflt)"),
    m("proc.psinfo.cmaj_flt", 8, 12, U32, C, "count", P, "Major page faults of the process's waited-for children (/proc/PID/stat cmajflt)"),
    m("proc.psinfo.utime", 8, 13, U64, C, "millisec", P, "CPU time the process spent in user mode, in milliseconds (/proc/PID/stat utime)"),
    m("proc.psinfo.stime", 8, 14, U64, C, "millisec", P, "CPU time the process spent in kernel mode, in milliseconds (/proc/PID/stat stime)"),
    m("proc.psinfo.cutime", 8, 15, U64, C, "millisec", P, "User-mode CPU time of waited-for children, in milliseconds (/proc/PID/stat cutime)"),
    m("proc.psinfo.cstime", 8, 16, U64, C, "millisec", P, "Kernel-mode CPU time of waited-for children, in milliseconds (/proc/PID/stat cstime)"),
    m("proc.psinfo.priority", 8, 17, I32, I, "", P, "As PCP's proc agent reports it: the 40th stat field, the real-time priority (/proc/PID/stat)"),
    m("proc.psinfo.nice", 8, 18, I32, I, "", P, "Nice value, -20 (favoured) to 19 (/proc/PID/stat field 19)"),
    m("proc.psinfo.it_real_value", 8, 20, U32, D, "", P, "Obsolete interval timer field, always 0 since Linux 2.6.17 (/proc/PID/stat field 21)"),
    m("proc.psinfo.start_time", 8, 21, U64, D, "millisec", P, "When the process started, in milliseconds after boot (/proc/PID/stat starttime)"),
    m("proc.psinfo.vsize", 8, 22, U64, I, "Kbyte", P, "Virtual address space size in kilobytes (/proc/PID/stat vsize)"),
    m("proc.psinfo.rss", 8, 23, U64, I, "Kbyte", P, "Resident set size in kilobytes: resident pages times page size (/proc/PID/stat rss)"),
    m("proc.psinfo.rss_rlim", 8, 24, U64, I, "Kbyte", P, "Soft limit on resident set size in kilobytes (/proc/PID/stat rsslim)"),
    m("proc.psinfo.start_code", 8, 25, U32, D, "", P, "Lowest address of program text, low 32 bits (/proc/PID/stat startcode)"),
    m("proc.psinfo.end_code", 8, 26, U32, D, "", P, "Highest address of program text, low 32 bits (/proc/PID/stat endcode)"),
    m("proc.psinfo.start_stack", 8, 27, U32, D, "", P, "Bottom of the stack, low 32 bits (/proc/PID/stat startstack)"),
    m("proc.psinfo.esp", 8, 28, U32, D, "", P, "Saved stack pointer, 0 unless the process is being dumped (/proc/PID/stat kstkesp)"),
    m("proc.psinfo.eip", 8, 29, U32, D, "", P, "Saved instruction pointer, 0 unless the process is being dumped (/proc/PID/stat kstkeip)"),
    m("proc.psinfo.signal", 8, 30, U32, D, "", P, "Pending signals bitmap, low 32 bits (/proc/PID/stat signal)"),
    m("proc.psinfo.blocked", 8, 31, U32, D, "", P, "Blocked signals bitmap, low 32 bits (/proc/PID/stat blocked)"),
    m("proc.psinfo.sigignore", 8, 32, U32, D, "", P, "Ignored signals bitmap, low 32 bits (/proc/PID/stat sigignore)"),
    m("proc.psinfo.sigcatch", 8, 33, U32, D, "", P, "Caught signals bitmap, low 32 bits (/proc/PID/stat sigcatch)"),
    m("proc.psinfo.wchan", 8, 34, U64, D, "", P, "Wait channel address, 0 on current kernels (/proc/PID/stat wchan)"),
    m("proc.psinfo.nswap", 8, 35, U32, C, "count", P, "Pages swapped, not maintained by Linux (/proc/PID/stat nswap)"),
    m("proc.psinfo.cnswap", 8, 36, U32, C, "count", P, "Pages swapped by children, not maintained by Linux (/proc/PID/stat cnswap)"),
    m("proc.psinfo.exit_signal", 8, 37, U32, D, "", P, "Signal sent to the parent when the process ends, usually 17 SIGCHLD (/proc/PID/stat exit_signal)"),
    m("proc.psinfo.processor", 8, 38, U32, I, "", P, "CPU the process last ran on (/proc/PID/stat processor)"),
    m("proc.psinfo.ttyname", 8, 39, STR, D, "", P, "Name of the controlling terminal below /dev, ? when none (stat tty_nr named through /proc/tty/drivers)"),
    m("proc.psinfo.wchan_s", 8, 40, STR, I, "", P, "Kernel function the process sleeps in, empty when running (/proc/PID/wchan)"),
    m("proc.psinfo.psargs", 8, 41, STR, D, "", P, "Command line with arguments separated by spaces, read when the process is first seen (/proc/PID/cmdline)"),
    m("proc.psinfo.rt_priority", 8, 42, U32, I, "", P, "As PCP's proc agent reports it: the 41st stat field, the scheduling policy (/proc/PID/stat)"),
    m("proc.psinfo.policy", 8, 43, U32, I, "", P, "As PCP's proc agent reports it: the 42nd stat field, block I/O delay ticks (/proc/PID/stat)"),
    m("proc.psinfo.delayacct_blkio_time", 8, 44, U64, C, "millisec", P, "As PCP's proc agent reports it: the 43rd stat field, guest time, in milliseconds (/proc/PID/stat)"),
    m("proc.psinfo.guest_time", 8, 45, U64, C, "millisec", P, "As PCP's proc agent reports it: the 44th stat field, children's guest time, in milliseconds (/proc/PID/stat)"),
    m("proc.psinfo.cguest_time", 8, 46, U64, C, "millisec", P, "As PCP's proc agent reports it: the 45th stat field, in milliseconds (/proc/PID/stat)"),
    m("proc.psinfo.environ", 8, 47, STR, I, "", P, "Environment of the process, entries separated by spaces (/proc/PID/environ)"),
    m("proc.psinfo.policy_s", 8, 48, STR, I, "", P, "Name of proc.psinfo.policy's value read as a scheduling policy, e.g. SCHED_OTHER"),
    m("proc.nprocs", 8, 99, U32, I, "", S, "Processes listed in this fetch, i.e. the instances of the proc metrics (/proc)"),
    m("proc.memory.size", 9, 0, U32, I, "Kbyte", P, "Total program size in kilobytes (/proc/PID/statm size)"),
    m("proc.memory.rss", 9, 1, U32, I, "Kbyte", P, "Resident memory in kilobytes (/proc/PID/statm resident)"),
    m("proc.memory.share", 9, 2, U32, I, "Kbyte", P, "Resident file-backed and shared memory in kilobytes (/proc/PID/statm shared)"),
    m("proc.memory.textrss", 9, 3, U32, I, "Kbyte", P, "Program text in kilobytes (/proc/PID/statm text)"),
    m("proc.memory.librss", 9, 4, U32, I, "Kbyte", P, "Library memory in kilobytes, 0 since Linux 2.6 (/proc/PID/statm lib)"),
    m("proc.memory.datrss", 9, 5, U32, I, "Kbyte", P, "Data and stack in kilobytes (/proc/PID/statm data)"),
    m("proc.memory.dirty", 9, 6, U32, I, "Kbyte", P, "Dirty memory in kilobytes, 0 since Linux 2.6 (/proc/PID/statm dt)"),
    m("proc.memory.maps", 9, 7, STR, I, "", P, "The process's memory map listing, as the kernel prints it (/proc/PID/maps)"),
    m("proc.control.all.threads", 10, 1, U32, I, "", S, "Whether threads are listed as instances of their own: always 0 here"),
    m("proc.control.perclient.threads", 10, 2, U32, I, "", S, "Per-client switch for listing threads, as PCP's proc agent has: always 0 here"),
    m("proc.control.perclient.cgroups", 10, 3, STR, I, "", S, "Per-client control group filter, as PCP's proc agent has: always empty here"),
    m("proc.psinfo.cgroups", 11, 0, STR, I, "", P, "Control groups of the process as subsystem:path pairs joined by semicolons (/proc/PID/cgroup)"),
    m("proc.id.container", 11, 1, STR, D, "", P, "Container ID found in the process's cpuset control group path, empty when none (/proc/PID/cgroup)"),
    m("proc.psinfo.labels", 12, 0, STR, I, "", P, "Security label of the process, e.g. its SELinux or AppArmor context (/proc/PID/attr/current)"),
    m("proc.runq.runnable", 13, 0, I32, I, "count", S, "Processes running or ready to run, state R (each /proc/PID/stat)"),
    m("proc.runq.blocked", 13, 1, I32, I, "count", S, "Processes waiting in state D, uninterruptible, usually for disk I/O (each /proc/PID/stat)"),
    m("proc.runq.sleeping", 13, 2, I32, I, "count", S, "Processes in interruptible sleep, state S (each /proc/PID/stat)"),
    m("proc.runq.stopped", 13, 3, I32, I, "count", S, "Processes stopped or being traced, state T or t (each /proc/PID/stat)"),
    m("proc.runq.swapped", 13, 4, I32, I, "count", S, "Kernel threads, which have no user address space (each /proc/PID/stat)"),
    m("proc.runq.defunct", 13, 5, I32, I, "count", S, "Zombie processes, ended but not yet waited for, state Z (each /proc/PID/stat)"),
    m("proc.runq.unknown", 13, 6, I32, I, "count", S, "Processes in another state, or whose stat could not be read (each /proc/PID/stat)"),
    m("proc.runq.kernel", 13, 7, I32, I, "count", S, "Kept for PCP compatibility: always 0"),
    m("proc.id.uid", 24, 0, U32, D, "", P, "Real user ID of the process (/proc/PID/status Uid, first field)"),
    m("proc.id.euid", 24, 1, U32, D, "", P, "Effective user ID, the one permission checks use (/proc/PID/status Uid, second field)"),
    m("proc.id.suid", 24, 2, U32, D, "", P, "Saved set-user-ID (/proc/PID/status Uid, third field)"),
    m("proc.id.fsuid", 24, 3, U32, D, "", P, "User ID used for filesystem access checks (/proc/PID/status Uid, fourth field)"),
    m("proc.id.gid", 24, 4, U32, D, "", P, "As PCP's proc agent reports it: the real user ID, not the group (/proc/PID/status Uid)"),
    m("proc.id.egid", 24, 5, U32, D, "", P, "Effective group ID (/proc/PID/status Gid, second field)"),
    m("proc.id.sgid", 24, 6, U32, D, "", P, "Saved set-group-ID (/proc/PID/status Gid, third field)"),
    m("proc.id.fsgid", 24, 7, U32, D, "", P, "Group ID used for filesystem access checks (/proc/PID/status Gid, fourth field)"),
    m("proc.id.uid_nm", 24, 8, STR, D, "", P, "User name of the real user ID (/proc/PID/status Uid and the passwd database)"),
    m("proc.id.euid_nm", 24, 9, STR, D, "", P, "User name of the effective user ID (/proc/PID/status Uid and the passwd database)"),
    m("proc.id.suid_nm", 24, 10, STR, D, "", P, "User name of the saved set-user-ID (/proc/PID/status Uid and the passwd database)"),
    m("proc.id.fsuid_nm", 24, 11, STR, D, "", P, "User name of the filesystem user ID (/proc/PID/status Uid and the passwd database)"),
    m("proc.id.gid_nm", 24, 12, STR, D, "", P, "Group name of the real group ID (/proc/PID/status Gid and the group database)"),
    m("proc.id.egid_nm", 24, 13, STR, D, "", P, "Group name of the effective group ID (/proc/PID/status Gid and the group database)"),
    m("proc.id.sgid_nm", 24, 14, STR, D, "", P, "Group name of the saved set-group-ID (/proc/PID/status Gid and the group database)"),
    m("proc.id.fsgid_nm", 24, 15, STR, D, "", P, "Group name of the filesystem group ID (/proc/PID/status Gid and the group database)"),
    m("proc.psinfo.signal_s", 24, 16, STR, I, "", P, "Pending signals as a hexadecimal mask (/proc/PID/status SigPnd)"),
    m("proc.psinfo.blocked_s", 24, 17, STR, I, "", P, "Blocked signals as a hexadecimal mask (/proc/PID/status SigBlk)"),
    m("proc.psinfo.sigignore_s", 24, 18, STR, I, "", P, "Ignored signals as a hexadecimal mask (/proc/PID/status SigIgn)"),
    m("proc.psinfo.sigcatch_s", 24, 19, STR, I, "", P, "Caught signals as a hexadecimal mask (/proc/PID/status SigCgt)"),
    m("proc.memory.vmsize", 24, 20, U32, I, "Kbyte", P, "Virtual memory size in kilobytes (/proc/PID/status VmSize)"),
    m("proc.memory.vmlock", 24, 21, U32, I, "Kbyte", P, "Memory locked with mlock, in kilobytes (/proc/PID/status VmLck)"),
    m("proc.memory.vmrss", 24, 22, U32, I, "Kbyte", P, "Resident memory in kilobytes (/proc/PID/status VmRSS)"),
    m("proc.memory.vmdata", 24, 23, U32, I, "Kbyte", P, "Data segment size in kilobytes (/proc/PID/status VmData)"),
    m("proc.memory.vmstack", 24, 24, U32, I, "Kbyte", P, "Stack size in kilobytes (/proc/PID/status VmStk)"),
    m("proc.memory.vmexe", 24, 25, U32, I, "Kbyte", P, "Program text size in kilobytes (/proc/PID/status VmExe)"),
    m("proc.memory.vmlib", 24, 26, U32, I, "Kbyte", P, "Shared library code size in kilobytes (/proc/PID/status VmLib)"),
    m("proc.memory.vmswap", 24, 27, U32, I, "Kbyte", P, "Anonymous memory swapped out, in kilobytes (/proc/PID/status VmSwap)"),
    m("proc.psinfo.threads", 24, 28, U32, I, "", P, "Threads in the process (/proc/PID/status Threads)"),
    m("proc.psinfo.vctxsw", 24, 29, U32, I, "", P, "Context switches where the process gave up the CPU itself, e.g. to wait (/proc/PID/status voluntary_ctxt_switches)"),
    m("proc.psinfo.nvctxsw", 24, 30, U32, I, "", P, "Context switches where the scheduler took the CPU away (/proc/PID/status nonvoluntary_ctxt_switches)"),
    m("proc.psinfo.cpusallowed", 24, 31, STR, I, "", P, "CPUs the process may run on, as a list such as 0-3,8 (/proc/PID/status Cpus_allowed_list)"),
    m("proc.psinfo.ngid", 24, 32, U32, D, "", P, "NUMA group ID, 0 without NUMA balancing (/proc/PID/status Ngid)"),
    m("proc.memory.vmpeak", 24, 33, U32, I, "Kbyte", P, "Largest virtual memory size so far, in kilobytes (/proc/PID/status VmPeak)"),
    m("proc.memory.vmpin", 24, 34, U32, I, "Kbyte", P, "Memory pinned so it cannot move, in kilobytes (/proc/PID/status VmPin)"),
    m("proc.memory.vmhwm", 24, 35, U32, I, "Kbyte", P, "Largest resident memory so far, in kilobytes (/proc/PID/status VmHWM)"),
    m("proc.memory.vmpte", 24, 36, U32, I, "Kbyte", P, "Page table size in kilobytes (/proc/PID/status VmPTE)"),
    m("proc.namespaces.tgid", 24, 37, STR, D, "", P, "Thread group ID in each nested pid namespace, comma separated (/proc/PID/status NStgid)"),
    m("proc.namespaces.pid", 24, 38, STR, D, "", P, "Process ID in each nested pid namespace, comma separated (/proc/PID/status NSpid)"),
    m("proc.namespaces.pgid", 24, 39, STR, D, "", P, "Process group ID in each nested pid namespace, comma separated (/proc/PID/status NSpgid)"),
    m("proc.namespaces.sid", 24, 40, STR, D, "", P, "Session ID in each nested pid namespace, comma separated (/proc/PID/status NSsid)"),
    m("proc.psinfo.tgid", 24, 41, U32, D, "", P, "Thread group ID, the PID of the thread group leader (/proc/PID/status Tgid)"),
    m("proc.namespaces.envid", 24, 42, U32, D, "", P, "OpenVZ container ID where the kernel has one (/proc/PID/status envID)"),
    m("proc.memory.vmreal", 24, 43, U64, I, "Kbyte", P, "Resident plus swapped memory in kilobytes: VmRSS + VmSwap (/proc/PID/status)"),
    m("proc.memory.vmnonlib", 24, 44, U64, I, "Kbyte", P, "Resident plus swapped memory less shared library code, in kilobytes (/proc/PID/status)"),
    m("proc.schedstat.cpu_time", 31, 0, U64, C, "nanosec", P, "Time the process ran on a CPU, in nanoseconds (/proc/PID/schedstat, first field)"),
    m("proc.schedstat.run_delay", 31, 1, U64, C, "nanosec", P, "Time the process waited on a run queue to get a CPU, in nanoseconds (/proc/PID/schedstat, second field)"),
    m("proc.schedstat.pcount", 31, 2, U64, C, "count", P, "Times the process was given a CPU (/proc/PID/schedstat, third field)"),
    m("proc.io.rchar", 32, 0, U64, C, "byte", P, "Bytes the process read through read-like system calls, page cache hits included (/proc/PID/io rchar)"),
    m("proc.io.wchar", 32, 1, U64, C, "byte", P, "Bytes the process wrote through write-like system calls (/proc/PID/io wchar)"),
    m("proc.io.syscr", 32, 2, U64, C, "count", P, "Read-like system calls the process made (/proc/PID/io syscr)"),
    m("proc.io.syscw", 32, 3, U64, C, "count", P, "Write-like system calls the process made (/proc/PID/io syscw)"),
    m("proc.io.read_bytes", 32, 4, U64, C, "byte", P, "Bytes the process caused to be fetched from storage (/proc/PID/io read_bytes)"),
    m("proc.io.write_bytes", 32, 5, U64, C, "byte", P, "Bytes the process caused to be sent towards storage (/proc/PID/io write_bytes)"),
    m("proc.io.cancelled_write_bytes", 32, 6, U64, C, "byte", P, "Bytes whose write to storage was cancelled, e.g. dirty pages of a truncated file (/proc/PID/io)"),
    m("proc.smaps.rss", 33, 0, U64, I, "Kbyte", P, "Resident memory summed over all mappings, in kilobytes (/proc/PID/smaps_rollup Rss)"),
    m("proc.smaps.pss", 33, 1, U64, I, "Kbyte", P, "Proportional share of resident memory, shared pages split among sharers, in kilobytes (/proc/PID/smaps_rollup Pss)"),
    m("proc.smaps.pss_anon", 33, 2, U64, I, "Kbyte", P, "Proportional share of anonymous memory, in kilobytes (/proc/PID/smaps_rollup Pss_Anon)"),
    m("proc.smaps.pss_file", 33, 3, U64, I, "Kbyte", P, "Proportional share of file-backed memory, in kilobytes (/proc/PID/smaps_rollup Pss_File)"),
    m("proc.smaps.pss_shmem", 33, 4, U64, I, "Kbyte", P, "Proportional share of shared memory (shmem), in kilobytes (/proc/PID/smaps_rollup Pss_Shmem)"),
    m("proc.smaps.shared_clean", 33, 5, U64, I, "Kbyte", P, "Clean pages shared with other processes, in kilobytes (/proc/PID/smaps_rollup Shared_Clean)"),
    m("proc.smaps.shared_dirty", 33, 6, U64, I, "Kbyte", P, "Dirty pages shared with other processes, in kilobytes (/proc/PID/smaps_rollup Shared_Dirty)"),
    m("proc.smaps.private_clean", 33, 7, U64, I, "Kbyte", P, "Clean pages only this process maps, in kilobytes (/proc/PID/smaps_rollup Private_Clean)"),
    m("proc.smaps.private_dirty", 33, 8, U64, I, "Kbyte", P, "Dirty pages only this process maps, in kilobytes (/proc/PID/smaps_rollup Private_Dirty)"),
    m("proc.smaps.referenced", 33, 9, U64, I, "Kbyte", P, "Memory marked referenced or accessed, in kilobytes (/proc/PID/smaps_rollup Referenced)"),
    m("proc.smaps.anonymous", 33, 10, U64, I, "Kbyte", P, "Memory not backed by a file, in kilobytes (/proc/PID/smaps_rollup Anonymous)"),
    m("proc.smaps.lazyfree", 33, 11, U64, I, "Kbyte", P, "Memory freed with MADV_FREE and not yet reclaimed, in kilobytes (/proc/PID/smaps_rollup LazyFree)"),
    m("proc.smaps.anonhugepages", 33, 12, U64, I, "Kbyte", P, "Anonymous memory in transparent huge pages, in kilobytes (/proc/PID/smaps_rollup AnonHugePages)"),
    m("proc.smaps.shmempmdmapped", 33, 13, U64, I, "Kbyte", P, "Shared memory mapped with huge pages, in kilobytes (/proc/PID/smaps_rollup ShmemPmdMapped)"),
    m("proc.smaps.filepmdmapped", 33, 14, U64, I, "Kbyte", P, "File memory mapped with huge pages, in kilobytes (/proc/PID/smaps_rollup FilePmdMapped)"),
    m("proc.smaps.shared_hugetlb", 33, 15, U64, I, "Kbyte", P, "Shared hugetlbfs memory, in kilobytes (/proc/PID/smaps_rollup Shared_Hugetlb)"),
    m("proc.smaps.private_hugetlb", 33, 16, U64, I, "Kbyte", P, "Private hugetlbfs memory, in kilobytes (/proc/PID/smaps_rollup Private_Hugetlb)"),
    m("proc.smaps.swap", 33, 17, U64, I, "Kbyte", P, "Anonymous memory swapped out, in kilobytes (/proc/PID/smaps_rollup Swap)"),
    m("proc.smaps.swappss", 33, 18, U64, I, "Kbyte", P, "Proportional share of swapped-out memory, in kilobytes (/proc/PID/smaps_rollup SwapPss)"),
    m("proc.smaps.locked", 33, 19, U64, I, "Kbyte", P, "Memory locked in RAM, in kilobytes (/proc/PID/smaps_rollup Locked)"),
    m("proc.fd.count", 51, 0, U32, I, "count", P, "Open file descriptors of the process (entries of /proc/PID/fd)"),
    m("proc.psinfo.oom_score", 62, 0, U32, I, "", P, "Badness score the out-of-memory killer gives the process, higher dies first (/proc/PID/oom_score)"),
    m("proc.psinfo.exe", 69, 0, STR, D, "", P, "Path of the executable, empty when unreadable (/proc/PID/exe link)"),
    m("proc.psinfo.cwd", 72, 0, STR, D, "", P, "Current working directory, empty when unreadable (/proc/PID/cwd link)"),
    m("proc.autogroup.enabled", 74, 0, U32, I, "", S, "1 when the kernel groups tasks by session for scheduling (/proc/sys/kernel/sched_autogroup_enabled)"),
    m("proc.autogroup.id", 74, 1, U32, D, "", P, "Scheduling autogroup the process belongs to (/proc/PID/autogroup)"),
    m("proc.autogroup.nice", 74, 2, I32, I, "", P, "Nice value of the process's autogroup (/proc/PID/autogroup)"),
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
