//! One pass over ROOT/proc for a fetch: every pid listed once, and for each only the files the
//! fetch's metrics need, through the shared [`ProcReader`] (its reused path and directory
//! buffers, and one read buffer here). Reads are capped per file. A process that is gone
//! before its `stat` is read is left out; one that goes later keeps what was read. Files this
//! daemon may not read (another user's `io`, `fd`, `environ`) leave their fields `None`.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use super::files::{
    self, CMDLINE_CAP, FullStat, IO_KEYS, SMAPS_KEYS, Status, parse_autogroup, parse_cgroup,
    parse_full_stat, parse_keyed, parse_numbers, parse_status,
};
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

/// The reader and what outlives one pass: names by pid (read once per process, as pmdaproc
/// does: a command line that changes later keeps its first name), buffers.
pub struct Pass {
    pub reader: ProcReader,
    names: HashMap<u32, (u64, Arc<Names>)>,
    pids: Vec<u32>,
    buf: Vec<u8>,
    link: Vec<u8>,
    /// Processes left out of the last pass because they were gone (or torn).
    pub skipped: u32,
    /// Passes run so far (a fetch is one pass, whatever its metrics).
    pub passes: u64,
}

impl Pass {
    pub fn new(reader: ProcReader) -> Pass {
        Pass {
            reader,
            names: HashMap::new(),
            pids: Vec::new(),
            buf: Vec::with_capacity(8192),
            link: Vec::new(),
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
        for &pid in &pids {
            match self.process(pid, need) {
                Some(p) => out.push(p),
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

    /// A file into the read buffer, its length; `None` when it is missing, unreadable or the
    /// process is gone.
    fn file(&mut self, pid: u32, leaf: &[u8], cap: usize) -> Option<usize> {
        self.reader.read_leaf(pid, leaf, &mut self.buf, cap).ok()
    }

    /// A non-empty file's bytes, parsed.
    fn parsed<T>(&mut self, pid: u32, leaf: &[u8], f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        let n = self.file(pid, leaf, SMALL_CAP)?;
        (n > 0).then(|| f(&self.buf[..n]))
    }

    fn process(&mut self, pid: u32, need: Need) -> Option<Proc> {
        let stat = match self
            .reader
            .read_leaf(pid, b"stat", &mut self.buf, SMALL_CAP)
        {
            Ok(0) => return None,
            Ok(n) => Some(parse_full_stat(&self.buf[..n])?),
            Err(e) if gone(&e) => return None,
            Err(_) => None,
        };
        let start = stat.as_ref().map_or(0, |s| s.get(22));
        let names = match self.names.get(&pid) {
            Some((s, n)) if *s == start => n.clone(),
            _ => {
                let n = Arc::new(self.names_of(pid));
                self.names.insert(pid, (start, n.clone()));
                n
            }
        };
        let mut p = Proc {
            pid,
            names: Some(names),
            stat,
            ..Proc::default()
        };
        if need.has(Need::STATUS) {
            p.status = self.parsed(pid, b"status", parse_status);
        }
        if need.has(Need::STATM) {
            p.statm = self.parsed(pid, b"statm", parse_numbers::<7>);
        }
        if need.has(Need::IO) {
            p.io = self.parsed(pid, b"io", |b| parse_keyed(b, &IO_KEYS));
        }
        if need.has(Need::SCHED) {
            p.sched = self.parsed(pid, b"schedstat", parse_numbers::<3>);
        }
        if need.has(Need::SMAPS) {
            p.smaps = self.parsed(pid, b"smaps_rollup", |b| parse_keyed(b, &SMAPS_KEYS));
        }
        if need.has(Need::FD) {
            p.fd = self.reader.count_leaf(pid, b"fd").ok();
        }
        if need.has(Need::OOM) {
            p.oom = self.parsed(pid, b"oom_score", |b| files::num(b).0 as u32);
        }
        if need.has(Need::CGROUP) {
            p.cgroup = self.parsed(pid, b"cgroup", parse_cgroup);
        }
        if need.has(Need::LABEL) {
            // The last byte (a newline or NUL) is dropped.
            p.label = self.parsed(pid, b"attr/current", |b| {
                String::from_utf8_lossy(&b[..b.len() - 1]).into_owned()
            });
        }
        if need.has(Need::EXE) {
            p.exe = Some(self.link(pid, b"exe"));
        }
        if need.has(Need::CWD) {
            p.cwd = Some(self.link(pid, b"cwd"));
        }
        if need.has(Need::AUTOGROUP) {
            p.autogroup = self
                .file(pid, b"autogroup", SMALL_CAP)
                .map(|n| parse_autogroup(&self.buf[..n]));
        }
        if need.has(Need::WCHAN) {
            p.wchan = self.parsed(pid, b"wchan", |b| String::from_utf8_lossy(b).into_owned());
        }
        if need.has(Need::ENVIRON) {
            // Always a value: empty when unreadable (as pmdaproc answers).
            let n = self.file(pid, b"environ", ENVIRON_CAP).unwrap_or(0);
            p.environ = Some(nul_joined(&self.buf[..n]));
        }
        if need.has(Need::MAPS) {
            // Empty when unreadable (another user's, or the daemon lacks CAP_SYS_PTRACE), as
            // pmdaproc answers; the last newline is dropped.
            let n = self.file(pid, b"maps", MAPS_CAP).unwrap_or(0);
            p.maps = Some(String::from_utf8_lossy(&self.buf[..n.saturating_sub(1)]).into_owned());
        }
        Some(p)
    }

    /// A symlink's target; empty when it cannot be read (kernel threads, other users').
    fn link(&mut self, pid: u32, leaf: &[u8]) -> String {
        match self.reader.readlink_leaf(pid, leaf, &mut self.link) {
            Ok(()) => String::from_utf8_lossy(&self.link).into_owned(),
            Err(_) => String::new(),
        }
    }

    /// Names from `cmdline`, or from `status` when the command line is empty (kernel threads,
    /// zombies), or `<exiting>`.
    fn names_of(&mut self, pid: u32) -> Names {
        let prefix = format!("{pid:06} ");
        let room = CMDLINE_CAP - prefix.len();
        let full = match self.reader.read_leaf(pid, b"cmdline", &mut self.buf, room) {
            Ok(n) if n > 0 => format!("{prefix}{}", files::psargs_of(&self.buf[..n], room)),
            Ok(_) | Err(_) => match self.reader.read_leaf(pid, b"status", &mut self.buf, 4092) {
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
