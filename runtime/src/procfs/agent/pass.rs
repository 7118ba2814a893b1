//! One pass over ROOT/proc for a fetch: every pid listed once, and for each only the files the
//! fetch's metrics need, opened relative to its `ROOT/proc/PID` directory. The processes are
//! shared out among up to one thread per CPU (each with buffers kept from pass to pass), and
//! the results put back in pid order. Reads are capped per file. A process that is gone
//! before its `stat` is read is left out; one that goes later keeps what was read. Files this
//! daemon may not read (another user's `io`, `fd`, `environ`) leave their fields `None`.

use std::collections::HashMap;
use std::ffi::CStr;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::files::{
    self, CMDLINE_CAP, FullStat, IO_KEYS, SMAPS_KEYS, Status, parse_autogroup, parse_cgroup,
    parse_full_stat, parse_keyed, parse_numbers, parse_status,
};
use crate::procfs::reader::PidDir;
use crate::procfs::{ProcError, ProcReader};

/// Most bytes read of a small per-process file (stat, status, io, ...: a few KiB at most on
/// any kernel; a longer one is cut, not grown without bound).
const SMALL_CAP: usize = 64 << 10;
/// Most bytes of a process's environment served (the kernel allows far more; past this the
/// value is cut).
const ENVIRON_CAP: usize = 256 << 10;
/// Most bytes of a process's memory map listing served (a JVM's can run to megabytes).
const MAPS_CAP: usize = 1 << 20;

/// Which files a fetch needs (besides `stat`, always read: names, run queue).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Need(u32);

impl Need {
    pub const STATUS: Need = Need(1);
    pub const STATM: Need = Need(1 << 1);
    pub const IO: Need = Need(1 << 2);
    pub const SCHED: Need = Need(1 << 3);
    pub const SMAPS: Need = Need(1 << 4);
    pub const FD: Need = Need(1 << 5);
    pub const OOM: Need = Need(1 << 6);
    pub const CGROUP: Need = Need(1 << 7);
    pub const LABEL: Need = Need(1 << 8);
    pub const EXE: Need = Need(1 << 9);
    pub const CWD: Need = Need(1 << 10);
    pub const AUTOGROUP: Need = Need(1 << 11);
    pub const WCHAN: Need = Need(1 << 12);
    pub const ENVIRON: Need = Need(1 << 13);
    pub const MAPS: Need = Need(1 << 14);
    /// Terminal names (drivers table, /dev scan).
    pub const TTY: Need = Need(1 << 15);
    /// User and group names.
    pub const NAMES: Need = Need(1 << 16);

    pub fn has(self, n: Need) -> bool {
        self.0 & n.0 != 0
    }

    pub fn add(&mut self, n: Need) {
        self.0 |= n.0;
    }
}

/// A process's names as pmdaproc gives them when it first sees it.
#[derive(Debug, PartialEq)]
pub struct Names {
    /// `PID first-word` (the instance name).
    pub inst: String,
    /// The command line (`proc.psinfo.psargs`).
    pub psargs: String,
}

/// What one pass read of one process.
#[derive(Debug, Default)]
pub struct Proc {
    pub pid: u32,
    pub names: Option<Arc<Names>>,
    pub stat: Option<FullStat>,
    pub status: Option<Status>,
    pub statm: Option<[u64; 7]>,
    pub io: Option<[u64; 7]>,
    pub sched: Option<[u64; 3]>,
    pub smaps: Option<[u64; 20]>,
    pub fd: Option<u32>,
    pub oom: Option<u32>,
    pub cgroup: Option<(String, String)>,
    pub label: Option<String>,
    pub exe: Option<String>,
    pub cwd: Option<String>,
    pub autogroup: Option<(u32, i32)>,
    pub wchan: Option<String>,
    pub environ: Option<String>,
    pub maps: Option<String>,
}

fn gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH))
}

/// Most threads one pass reads with. The cost of a pass is the kernel's (above all the page
/// table walk behind each `smaps_rollup`), one process at a time, so threads divide its wall
/// time up to the host's CPU count; past a few, the biggest process bounds it anyway.
const MAX_WORKERS: usize = 4;
/// Fewer processes than this are read on the calling thread alone (a thread costs more than
/// it saves on a handful of processes).
const PARALLEL_MIN: usize = 32;

/// What a pass keeps of a process for the next: the start time its entry belongs to, its
/// names, and its resident size in pages at the last pass (which orders the next pass's work).
struct Known {
    start: u64,
    names: Arc<Names>,
    rss: u64,
}

type NameCache = HashMap<u32, Known>;

/// The reader and what outlives one pass: names by pid (read once per process, as pmdaproc
/// does: a command line that changes later keeps its first name), the workers' buffers.
pub struct Pass {
    pub reader: ProcReader,
    names: NameCache,
    pids: Vec<u32>,
    /// Indexes into `pids` in the order the workers take them.
    order: Vec<u32>,
    workers: Vec<Worker>,
    /// Whether this root's `PID/fd` directories give their descriptor count as their size.
    fd_by_size: bool,
    /// Processes left out of the last pass because they were gone (or torn).
    pub skipped: u32,
    /// Passes run so far (a fetch is one pass, whatever its metrics).
    pub passes: u64,
}

/// One reading thread's reader and buffers, kept from pass to pass.
struct Worker {
    reader: ProcReader,
    buf: Vec<u8>,
    link: Vec<u8>,
    dents: Vec<u8>,
    /// This pass's processes: index in the pass's pid list, what was read (`None`: gone).
    done: Vec<(usize, Option<Proc>)>,
}

impl Pass {
    /// A pass reading with at most `workers` threads (1: the calling thread only).
    pub fn with_workers(reader: ProcReader, workers: usize) -> Pass {
        let root = reader.root().to_path_buf();
        let mut probe = ProcReader::with_root(&root);
        let fd_by_size = fd_dir_size_counts(&mut probe);
        Pass {
            fd_by_size,
            reader,
            names: HashMap::new(),
            pids: Vec::new(),
            order: Vec::new(),
            workers: (0..workers.clamp(1, MAX_WORKERS))
                .map(|_| Worker {
                    reader: ProcReader::with_root(&root),
                    buf: Vec::with_capacity(8192),
                    link: Vec::new(),
                    dents: vec![0; 8192],
                    done: Vec::new(),
                })
                .collect(),
            skipped: 0,
            passes: 0,
        }
    }

    /// Read every process into `out` (sorted by pid), the files of `need` for each.
    pub fn run(&mut self, need: Need, out: &mut Vec<Proc>) -> Result<(), ProcError> {
        out.clear();
        self.skipped = 0;
        self.passes += 1;
        let mut pids = std::mem::take(&mut self.pids);
        let listed = self.reader.list_pids(&mut pids);
        if let Err(e) = listed {
            self.pids = pids;
            return Err(e);
        }
        pids.sort_unstable();
        // The biggest processes first (by their size at the last pass; new ones first of
        // all): the page-table walk of a large process's `smaps_rollup` would otherwise be
        // the last piece of work while the other threads idle.
        let weight = |pid: &u32| self.names.get(pid).map_or(u64::MAX, |k| k.rss);
        self.order.clear();
        self.order.extend(0..pids.len() as u32);
        self.order
            .sort_by_key(|&i| std::cmp::Reverse(weight(&pids[i as usize])));
        let next = AtomicUsize::new(0);
        let job = Job {
            pids: &pids,
            order: &self.order,
            next: &next,
            need,
            names: &self.names,
            fd_by_size: self.fd_by_size,
        };
        let threads = if pids.len() < PARALLEL_MIN {
            1
        } else {
            self.workers.len()
        };
        let (first, rest) = self.workers.split_first_mut().expect("one worker at least");
        std::thread::scope(|s| {
            // A thread that cannot be started leaves its share to the others.
            let helpers: Vec<_> = rest[..threads - 1]
                .iter_mut()
                .filter_map(|w| {
                    std::thread::Builder::new()
                        .name("proc-pass".into())
                        .spawn_scoped(s, || w.work(&job))
                        .ok()
                })
                .collect();
            first.work(&job);
            for h in helpers {
                // A helper that panicked read nothing more; its processes are skipped below.
                let _ = h.join();
            }
        });
        let mut slots: Vec<Option<Proc>> = (0..pids.len()).map(|_| None).collect();
        for w in &mut self.workers {
            for (i, p) in w.done.drain(..) {
                slots[i] = p;
            }
        }
        for p in slots {
            match p {
                Some(p) => {
                    let start = p.stat.as_ref().map_or(0, |s| s.get(22));
                    let rss = p.stat.as_ref().map_or(0, |s| s.get(24));
                    match self.names.get_mut(&p.pid) {
                        Some(k) if k.start == start => k.rss = rss,
                        _ => {
                            if let Some(names) = &p.names {
                                let names = names.clone();
                                self.names.insert(p.pid, Known { start, names, rss });
                            }
                        }
                    }
                    out.push(p);
                }
                None => self.skipped += 1,
            }
        }
        // Forget the names of processes no longer listed.
        if self.names.len() > out.len() {
            self.names.retain(|pid, _| pids.binary_search(pid).is_ok());
        }
        self.pids = pids;
        Ok(())
    }
}

/// What the threads of one pass share: the pids, the next one to take, what to read, the
/// names known before the pass.
struct Job<'a> {
    pids: &'a [u32],
    order: &'a [u32],
    next: &'a AtomicUsize,
    need: Need,
    names: &'a NameCache,
    fd_by_size: bool,
}

/// Whether `ROOT/PID/fd` directories give their descriptor count as their size (procfs on
/// Linux 6.2 and later): this process's own directory sized and listed agree. A root that is
/// not this host's procfs (a captured tree, another pid namespace's) has no directory of this
/// process, and is listed.
fn fd_dir_size_counts(reader: &mut ProcReader) -> bool {
    let Ok(dir) = reader.open_pid(std::process::id()) else {
        return false;
    };
    let mut dents = vec![0; 8192];
    // Another thread may open or close a descriptor between the two reads: a few tries.
    (0..3).any(|_| {
        let size = dir.dir_size(c"fd");
        let listed = dir.count(c"fd", &mut dents);
        matches!((size, listed), (Ok(s), Ok(n)) if s > 0 && s == u64::from(n))
    })
}

impl Worker {
    /// Take pids one at a time until none is left (one process's `smaps_rollup` can cost
    /// more than a hundred others' files: no fixed shares).
    fn work(&mut self, job: &Job) {
        self.done.clear();
        loop {
            let next = job.next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = job.order.get(next) else { break };
            let i = i as usize;
            let Some(&pid) = job.pids.get(i) else { break };
            let p = self.process(pid, job);
            self.done.push((i, p));
        }
    }

    /// A non-empty file's bytes, parsed.
    fn parsed<T>(&mut self, dir: &PidDir, leaf: &CStr, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let n = dir.read(leaf, &mut self.buf, SMALL_CAP).ok()?;
        (n > 0).then(|| f(&self.buf[..n]))
    }

    fn process(&mut self, pid: u32, job: &Job) -> Option<Proc> {
        let need = job.need;
        let dir = match self.reader.open_pid(pid) {
            Ok(dir) => dir,
            Err(_) => return None,
        };
        let stat = match dir.read(c"stat", &mut self.buf, SMALL_CAP) {
            Ok(0) => return None,
            Ok(n) => Some(parse_full_stat(&self.buf[..n])?),
            Err(e) if gone(&e) => return None,
            Err(_) => None,
        };
        let start = stat.as_ref().map_or(0, |s| s.get(22));
        let names = match job.names.get(&pid) {
            Some(k) if k.start == start => k.names.clone(),
            _ => Arc::new(self.names_of(&dir, pid)),
        };
        let mut p = Proc {
            pid,
            names: Some(names),
            stat,
            ..Proc::default()
        };
        if need.has(Need::STATUS) {
            p.status = self.parsed(&dir, c"status", parse_status);
        }
        if need.has(Need::STATM) {
            p.statm = self.parsed(&dir, c"statm", parse_numbers::<7>);
        }
        if need.has(Need::IO) {
            p.io = self.parsed(&dir, c"io", |b| parse_keyed(b, &IO_KEYS));
        }
        if need.has(Need::SCHED) {
            p.sched = self.parsed(&dir, c"schedstat", parse_numbers::<3>);
        }
        if need.has(Need::SMAPS) {
            p.smaps = self.parsed(&dir, c"smaps_rollup", |b| parse_keyed(b, &SMAPS_KEYS));
        }
        if need.has(Need::FD) {
            p.fd = if job.fd_by_size {
                dir.dir_size(c"fd").ok().map(|n| n as u32)
            } else {
                dir.count(c"fd", &mut self.dents).ok()
            };
        }
        if need.has(Need::OOM) {
            p.oom = self.parsed(&dir, c"oom_score", |b| crate::util::strtoul(b).0 as u32);
        }
        if need.has(Need::CGROUP) {
            p.cgroup = self.parsed(&dir, c"cgroup", parse_cgroup);
        }
        if need.has(Need::LABEL) {
            // The last byte (a newline or NUL) is dropped.
            p.label = self.parsed(&dir, c"attr/current", |b| {
                String::from_utf8_lossy(&b[..b.len() - 1]).into_owned()
            });
        }
        if need.has(Need::EXE) {
            p.exe = Some(self.link(&dir, c"exe"));
        }
        if need.has(Need::CWD) {
            p.cwd = Some(self.link(&dir, c"cwd"));
        }
        if need.has(Need::AUTOGROUP) {
            p.autogroup = dir
                .read(c"autogroup", &mut self.buf, SMALL_CAP)
                .ok()
                .map(|n| parse_autogroup(&self.buf[..n]));
        }
        if need.has(Need::WCHAN) {
            p.wchan = self.parsed(&dir, c"wchan", |b| String::from_utf8_lossy(b).into_owned());
        }
        if need.has(Need::ENVIRON) {
            // Always a value: empty when unreadable (as pmdaproc answers).
            let n = dir
                .read(c"environ", &mut self.buf, ENVIRON_CAP)
                .unwrap_or(0);
            p.environ = Some(nul_joined(&self.buf[..n]));
        }
        if need.has(Need::MAPS) {
            // Empty when unreadable (another user's, or the daemon lacks CAP_SYS_PTRACE), as
            // pmdaproc answers; the last newline is dropped.
            let n = dir.read(c"maps", &mut self.buf, MAPS_CAP).unwrap_or(0);
            p.maps = Some(String::from_utf8_lossy(&self.buf[..n.saturating_sub(1)]).into_owned());
        }
        Some(p)
    }

    /// A symlink's target; empty when it cannot be read (kernel threads, other users').
    fn link(&mut self, dir: &PidDir, leaf: &CStr) -> String {
        match dir.readlink(leaf, &mut self.link) {
            Ok(()) => String::from_utf8_lossy(&self.link).into_owned(),
            Err(_) => String::new(),
        }
    }

    /// Names from `cmdline`, or from `status` when the command line is empty (kernel threads,
    /// zombies), or `<exiting>`.
    fn names_of(&mut self, dir: &PidDir, pid: u32) -> Names {
        let prefix = format!("{pid:06} ");
        let room = CMDLINE_CAP - prefix.len();
        let full = match dir.read(c"cmdline", &mut self.buf, room) {
            Ok(n) if n > 0 => format!("{prefix}{}", files::psargs_of(&self.buf[..n], room)),
            Ok(_) | Err(_) => match dir.read(c"status", &mut self.buf, 4092) {
                Ok(n) if n > 0 => files::status_name(pid, &self.buf[..n]),
                _ => format!("{prefix}<exiting>"),
            },
        };
        Names {
            inst: files::instance_name(&full),
            psargs: full[prefix.len().min(full.len())..].to_string(),
        }
    }
}

/// An environment block: NULs become spaces and the last byte is dropped.
fn nul_joined(b: &[u8]) -> String {
    let Some((_, head)) = b.split_last() else {
        return String::new();
    };
    let v: Vec<u8> = head
        .iter()
        .map(|&c| if c == 0 { b' ' } else { c })
        .collect();
    String::from_utf8_lossy(&v).into_owned()
}
