//! One pass over ROOT/proc for a fetch: every pid listed once, and for each only the files the
//! fetch's metrics need, opened relative to its `ROOT/proc/PID` directory. The processes are
//! shared out among up to one thread per CPU (each with buffers kept from pass to pass), and
//! the results put back in pid order. Reads are capped per file. A process that is gone
//! before its `stat` is read is left out; one that goes later keeps what was read. Files this
//! daemon may not read (another user's `io`, `fd`, `environ`) leave their fields `None`.

use std::collections::HashMap;
use std::ffi::CStr;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::files::{
    self, CMDLINE_CAP, FullStat, IO_KEYS, SMAPS_KEYS, Status, parse_autogroup, parse_cgroup,
    parse_full_stat, parse_keyed, parse_numbers, parse_status,
};
use crate::procfs::sys::PidDir;
use crate::procfs::sys::{Fd, Room, Share, gone, kept_budget, pread_fd, read_fd};
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

/// The files of a process kept open from one pass to the next (when there is room in the
/// budget every reader shares, `sys::KEPT_FILES`) and read again from offset 0: procfs
/// generates their text afresh on each read, from the task their directory names, so a kept
/// one reads what a fresh open would. After an `exec` they still name the same task; once it
/// is reaped they answer ESRCH (even when its pid is reused), and every kept file of the pid
/// is let go and opened again through the new process's directory. Left out: the files bound
/// at open to the address space (`smaps_rollup`, `maps`, `environ`: after an `exec` a kept
/// one would read the old one) and the `fd` directory (its open is the permission check).
/// A read through a kept file that fails is made again through a fresh open.
const KEEP: [&CStr; K::Label as usize + 1] = [
    c"stat",
    c"status",
    c"statm",
    c"io",
    c"schedstat",
    c"oom_score",
    c"cgroup",
    c"wchan",
    c"autogroup",
    c"attr/current",
];
/// The files of [`KEEP`], by their place there.
#[derive(Clone, Copy)]
enum K {
    Stat,
    Status,
    Statm,
    Io,
    Sched,
    Oom,
    Cgroup,
    Wchan,
    Autogroup,
    Label,
}

/// A process's directory, and its files of [`KEEP`] opened so far, kept between passes.
struct Held {
    dir: PidDir,
    files: [Option<Fd>; KEEP.len()],
    /// The budget's room for the directory and the files (none: nothing is kept, all is
    /// closed after this pass).
    room: Room,
}

impl Held {
    /// The kept file `k`'s text into `buf`, or, when it is not kept or its read fails, a
    /// fresh open's (kept when there is room).
    fn read(&mut self, k: K, buf: &mut Vec<u8>, cap: usize) -> io::Result<usize> {
        let k = k as usize;
        if let Some(fd) = &self.files[k] {
            if let Ok(n) = pread_fd(fd, buf, cap) {
                return Ok(n);
            }
            self.files[k] = None;
            self.room.shrink(1);
        }
        let fd = self.dir.open(KEEP[k], libc::O_RDONLY)?;
        let n = read_fd(&fd, buf, cap)?;
        if self.room.len() > 0 && self.room.grow(1) {
            self.files[k] = Some(fd);
        }
        Ok(n)
    }
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

/// Most of the shared budget of kept files this agent takes: the rest stays for the
/// detectors' reader, which may start after a first fetch.
const KEEP_SHARE: usize = 2;

/// The reader and what outlives one pass: names by pid (read once per process, as pmdaproc
/// does: a command line that changes later keeps its first name), the files kept open by pid,
/// the workers' buffers.
pub struct Pass {
    pub reader: ProcReader,
    names: NameCache,
    held: HashMap<u32, Held>,
    /// This agent's part of the budget of kept files (`None`: nothing kept, not procfs).
    share: Option<Arc<Share>>,
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
    /// This pass's processes: index in the pass's pid list, what was read (`None`: gone),
    /// the files kept for the next pass.
    done: Vec<(usize, Option<Proc>, Option<Held>)>,
}

impl Pass {
    /// A pass reading with at most `workers` threads (1: the calling thread only).
    pub fn with_workers(reader: ProcReader, workers: usize) -> Pass {
        let root = reader.root().to_path_buf();
        let mut probe = ProcReader::with_root(&root);
        let fd_by_size = fd_dir_size_counts(&mut probe);
        let share = reader
            .on_procfs()
            .then(|| Share::new(kept_budget() / KEEP_SHARE));
        Pass {
            fd_by_size,
            held: HashMap::new(),
            share,
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

    /// Keep at most `max` files open between passes (0: none).
    #[cfg(test)]
    pub fn keep_at_most(&mut self, max: usize) {
        self.held.clear();
        self.share = self.share.as_ref().map(|_| Share::new(max));
    }

    /// Files kept open now between passes.
    pub fn kept_files(&self) -> usize {
        self.share.as_ref().map_or(0, |s| s.now())
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
        // Each pid's kept files, taken by the worker that reads it; those of pids no longer
        // listed close here.
        let held: Vec<Mutex<Option<Held>>> = pids
            .iter()
            .map(|pid| Mutex::new(self.held.remove(pid)))
            .collect();
        self.held.clear();
        let next = AtomicUsize::new(0);
        let job = Job {
            held: &held,
            share: self.share.as_ref(),
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
            for (i, p, h) in w.done.drain(..) {
                slots[i] = p;
                if let Some(h) = h {
                    self.held.insert(pids[i], h);
                }
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
    held: &'a [Mutex<Option<Held>>],
    share: Option<&'a Arc<Share>>,
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
            let held = job.held.get(i).and_then(|h| crate::util::lock(h).take());
            let (p, held) = match self.held(pid, held, job) {
                Some((mut h, stat)) => (self.process(pid, &mut h, stat, job), Some(h)),
                None => (None, None),
            };
            // Kept: a directory whose `stat` is kept too (the next pass starts there).
            let held = held.filter(|h| p.is_some() && h.files[K::Stat as usize].is_some());
            self.done.push((i, p, held));
        }
    }

    /// The process's kept directory and files when its kept `stat` still reads (the same
    /// process), else its directory opened now (kept when there is room); `None`: gone.
    /// With the length of its `stat` in the buffer when read through the kept file.
    fn held(&mut self, pid: u32, held: Option<Held>, job: &Job) -> Option<(Held, Option<usize>)> {
        if let Some(h) = held
            && let Some(fd) = &h.files[K::Stat as usize]
            && let Ok(n) = pread_fd(fd, &mut self.buf, SMALL_CAP)
            && n > 0
        {
            return Some((h, Some(n)));
        }
        // Not kept, or its process is gone: what was kept closes here.
        let dir = self.reader.open_pid(pid).ok()?;
        // Kept only in this agent's share (none: not procfs), and there only with room.
        let mut room = Room::default();
        if let Some(share) = job.share {
            room = Room::in_share(share);
            if !room.grow(1) {
                room = Room::default();
            }
        }
        let files = Default::default();
        Some((Held { dir, files, room }, None))
    }

    /// A non-empty kept file's bytes, parsed.
    fn parsed<T>(&mut self, h: &mut Held, k: K, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let n = h.read(k, &mut self.buf, SMALL_CAP).ok()?;
        (n > 0).then(|| f(&self.buf[..n]))
    }

    fn process(&mut self, pid: u32, h: &mut Held, stat: Option<usize>, job: &Job) -> Option<Proc> {
        let need = job.need;
        let stat = match stat {
            Some(n) => Ok(n),
            None => h.read(K::Stat, &mut self.buf, SMALL_CAP),
        };
        let stat = match stat {
            Ok(0) => return None,
            Ok(n) => Some(parse_full_stat(&self.buf[..n])?),
            Err(e) if gone(&e) => return None,
            Err(_) => None,
        };

        let start = stat.as_ref().map_or(0, |s| s.get(22));
        let names = match job.names.get(&pid) {
            Some(k) if k.start == start => k.names.clone(),
            _ => Arc::new(self.names_of(&h.dir, pid)),
        };
        let mut p = Proc {
            pid,
            names: Some(names),
            stat,
            ..Proc::default()
        };
        if need.has(Need::STATUS) {
            p.status = self.parsed(h, K::Status, parse_status);
        }
        if need.has(Need::STATM) {
            p.statm = self.parsed(h, K::Statm, parse_numbers::<7>);
        }
        if need.has(Need::IO) {
            p.io = self.parsed(h, K::Io, |b| parse_keyed(b, &IO_KEYS));
        }
        if need.has(Need::SCHED) {
            p.sched = self.parsed(h, K::Sched, parse_numbers::<3>);
        }
        if need.has(Need::SMAPS) {
            p.smaps = h
                .dir
                .read(c"smaps_rollup", &mut self.buf, SMALL_CAP)
                .ok()
                .filter(|&n| n > 0)
                .map(|n| parse_keyed(&self.buf[..n], &SMAPS_KEYS));
        }
        if need.has(Need::FD) {
            p.fd = if job.fd_by_size {
                h.dir.dir_size(c"fd").ok().map(|n| n as u32)
            } else {
                h.dir.count(c"fd", &mut self.dents).ok()
            };
        }
        if need.has(Need::OOM) {
            p.oom = self.parsed(h, K::Oom, |b| crate::util::strtoul(b).0 as u32);
        }
        if need.has(Need::CGROUP) {
            p.cgroup = self.parsed(h, K::Cgroup, parse_cgroup);
        }
        if need.has(Need::LABEL) {
            // The last byte (a newline or NUL) is dropped.
            p.label = self.parsed(h, K::Label, |b| {
                String::from_utf8_lossy(&b[..b.len() - 1]).into_owned()
            });
        }
        if need.has(Need::EXE) {
            p.exe = Some(self.link(&h.dir, c"exe"));
        }
        if need.has(Need::CWD) {
            p.cwd = Some(self.link(&h.dir, c"cwd"));
        }
        if need.has(Need::AUTOGROUP) {
            p.autogroup = h
                .read(K::Autogroup, &mut self.buf, SMALL_CAP)
                .ok()
                .map(|n| parse_autogroup(&self.buf[..n]));
        }
        if need.has(Need::WCHAN) {
            p.wchan = self.parsed(h, K::Wchan, |b| String::from_utf8_lossy(b).into_owned());
        }
        if need.has(Need::ENVIRON) {
            // Always a value: empty when unreadable (as pmdaproc answers).
            let n = h
                .dir
                .read(c"environ", &mut self.buf, ENVIRON_CAP)
                .unwrap_or(0);
            p.environ = Some(nul_joined(&self.buf[..n]));
        }
        if need.has(Need::MAPS) {
            // Empty when unreadable (another user's, or the daemon lacks CAP_SYS_PTRACE), as
            // pmdaproc answers; the last newline is dropped.
            let n = h.dir.read(c"maps", &mut self.buf, MAPS_CAP).unwrap_or(0);
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
