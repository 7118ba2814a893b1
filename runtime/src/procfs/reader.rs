//! One pass over /proc for every process (and optionally every thread), reading only the files
//! the field filter needs, into a reusable `Snapshot`. Owns the raw I/O (open/read/close and
//! getdents64 through libc, so no per-file or per-entry allocation: one read buffer, one path
//! buffer, one directory buffer, reused). Parsing lives in `parse`; detectors and ps only
//! consume the snapshot.

use std::ffi::CStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::parse::{parse_pid, parse_schedstat, parse_stat, parse_wchan};
use super::sys::{
    Fd, PidDir, Room, for_each_entry_fd, gone, kept_budget, list_numeric, open, open_at, pread_fd,
    read_at, read_fd,
};
use super::{Fields, ProcInfo, Snapshot, ThreadInfo};

/// Most bytes read of one task's `stat`, `wchan` or `schedstat` (well under 1 KiB on any
/// kernel; a longer file is cut, never read without bound).
const TASK_FILE_CAP: usize = 64 << 10;

/// Errors that stop a whole pass (a single process failing is not one: it is skipped).
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("cannot list {path}: {source}")]
    List { path: PathBuf, source: io::Error },
}

/// Which processes one pass covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    All,
    Pid(u32),
}

/// A reusable /proc reader. Not `Sync` (it owns its buffers); keep one per polling task.
pub struct ProcReader {
    root: PathBuf,
    /// `root` as bytes, the prefix of every path built.
    root_bytes: Vec<u8>,
    path: Vec<u8>,
    buf: Vec<u8>,
    /// A kept `schedstat`'s text, read beside `buf`'s `stat`.
    sched_buf: Vec<u8>,
    dents: Vec<u8>,
    pids: Vec<u32>,
    tids: Vec<u32>,
    clk_tck: u64,
    page_size: u64,
    /// When set, a thread's `schedstat` is read only when its state is one of these (the
    /// blocked-thread detector needs it only to tell whether a blocked thread ran).
    thread_sched_states: Option<Vec<u8>>,
    /// Files kept open from one pass to the next ([`ProcReader::keep_files`]).
    kept: Kept,
}

/// A task's `stat` and `schedstat` kept open between passes: the next pass reads them again
/// from offset 0 (procfs regenerates the text) instead of opening and closing them, which
/// was ~45 % of a pass's kernel time. Exact: an open task file stays bound to its task, so
/// once the task is reaped it answers ESRCH (even if its pid is reused) and is dropped and
/// opened afresh through the new task's directory.
#[derive(Default)]
struct Kept {
    /// Most descriptors kept (0: none, every file opened per read).
    max: usize,
    /// By (pid, 0) for a process's own files, (pid, tid) for a thread's.
    tasks: std::collections::HashMap<(u32, u32), KeptTask, foldhash::fast::FixedState>,
    /// Descriptors held by `tasks`.
    fds: usize,
    /// The pass under way; a task not read in it is let go at its end.
    pass: u64,
    /// By pid: a multi-threaded process's threads as its last listing found them, when every
    /// one of them is kept, and the pass that read them ([`ProcReader::read_threads`]).
    listed: std::collections::HashMap<u32, (Vec<u32>, u64), foldhash::fast::FixedState>,
}

struct KeptTask {
    stat: Fd,
    sched: Option<Fd>,
    pass: u64,
    /// The shared budget's room for these descriptors.
    _room: Room,
}

impl Default for ProcReader {
    fn default() -> Self {
        ProcReader::new()
    }
}

/// The outcome of reading one file of a task.
enum Read {
    /// ENOENT/ESRCH: the task is gone.
    Gone,
    /// Anything else (EACCES on another user's fd directory, ...): leave the field out.
    Unavailable,
}

fn classify(e: &io::Error) -> Read {
    if gone(e) {
        Read::Gone
    } else {
        Read::Unavailable
    }
}

impl ProcReader {
    pub fn new() -> Self {
        ProcReader::with_root("/proc")
    }

    /// A reader of another procfs mount (or a fake tree in tests).
    pub fn with_root(root: impl AsRef<Path>) -> Self {
        let root = root.as_ref().to_path_buf();
        // SAFETY: sysconf has no preconditions.
        let (tck, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        ProcReader {
            root_bytes: root.as_os_str().as_bytes().to_vec(),
            root,
            path: Vec::with_capacity(128),
            buf: vec![0; 4096],
            sched_buf: vec![0; 256],
            dents: vec![0; 32 * 1024],
            pids: Vec::new(),
            tids: Vec::new(),
            clk_tck: if tck > 0 { tck as u64 } else { 100 },
            page_size: if page > 0 { page as u64 } else { 4096 },
            thread_sched_states: None,
            kept: Kept::default(),
        }
    }

    /// Keep task files (`stat`, `schedstat`) open from one pass to the next, within the
    /// budget every reader of this process shares ([`super::sys::KEPT_FILES`], a quarter of
    /// the soft descriptor limit): for a reader that makes pass after pass (the detectors'),
    /// not for a one-off listing.
    pub fn keep_files(&mut self) {
        self.kept.max = if self.on_procfs() { kept_budget() } else { 0 };
    }

    /// Whether the root is a procfs mount. Files are kept open only there: a regular file
    /// replaced under a test tree would be read stale through a kept descriptor; a procfs
    /// task file cannot be replaced.
    pub(crate) fn on_procfs(&self) -> bool {
        CStr::from_bytes_with_nul(&[self.root_bytes.as_slice(), b"\0"].concat())
            .ok()
            .is_some_and(|root| {
                // SAFETY: an all-zero statfs is a valid destination; `root` is NUL-terminated.
                let mut st: libc::statfs = unsafe { std::mem::zeroed() };
                (unsafe { libc::statfs(root.as_ptr(), &mut st) }) == 0
                    && st.f_type == libc::PROC_SUPER_MAGIC
            })
    }

    /// Whether the files of the task (pid, 0 for the process's own, or tid) are kept open.
    #[cfg(test)]
    pub(crate) fn keeps(&self, pid: u32, tid: u32) -> bool {
        self.kept.tasks.contains_key(&(pid, tid))
    }

    /// Whether the threads of the multi-threaded process `pid` are read without listing it.
    #[cfg(test)]
    pub(crate) fn remembers_threads_of(&self, pid: u32) -> bool {
        self.kept.listed.contains_key(&pid)
    }

    /// Task files held open now.
    pub fn kept_files(&self) -> usize {
        self.kept.fds
    }

    /// Read a thread's `schedstat` (with `Fields::SCHED`) only when its state is one of
    /// `states` (`None`: for every thread). Halves the files a pass over threads opens when
    /// only blocked threads' run times matter.
    pub fn thread_sched_only_in(&mut self, states: Option<Vec<u8>>) {
        self.thread_sched_states = states;
    }

    /// The procfs root read.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn clk_tck(&self) -> u64 {
        self.clk_tck
    }

    /// Read all processes into a new snapshot.
    pub fn read_all(&mut self, fields: Fields, threads: bool) -> Result<Snapshot, ProcError> {
        let mut snap = Snapshot::default();
        self.read_into(&mut snap, fields, threads, Scope::All)?;
        Ok(snap)
    }

    /// Refill `snap` (its vectors are reused). Processes or threads that vanish meanwhile are
    /// left out and counted in `snap.skipped`.
    pub fn read_into(
        &mut self,
        snap: &mut Snapshot,
        fields: Fields,
        threads: bool,
        scope: Scope,
    ) -> Result<(), ProcError> {
        snap.procs.clear();
        snap.threads.clear();
        snap.skipped = 0;
        snap.fields = fields;
        snap.with_threads = threads;
        snap.clk_tck = self.clk_tck;
        snap.page_size = self.page_size;
        snap.ts_ns = now_ns();
        let mut pids = std::mem::take(&mut self.pids);
        pids.clear();
        match scope {
            Scope::All => {
                self.path.clear();
                self.path.extend_from_slice(&self.root_bytes);
                self.path.push(0);
                let r = list_numeric(&self.path, &mut self.dents, &mut pids);
                if let Err(source) = r {
                    self.pids = pids;
                    return Err(ProcError::List {
                        path: self.root.clone(),
                        source,
                    });
                }
            }
            Scope::Pid(p) => pids.push(p),
        }
        self.kept.pass += 1;
        for &pid in &pids {
            let t0 = snap.threads.len();
            if self.read_process(snap, pid, fields, threads).is_none() {
                snap.threads.truncate(t0);
                snap.skipped += 1;
            }
        }
        self.pids = pids;
        if scope == Scope::All {
            let (pass, kept) = (self.kept.pass, &mut self.kept);
            let mut fds = kept.fds;
            kept.tasks.retain(|_, t| {
                let keep = t.pass == pass;
                if !keep {
                    fds -= 1 + usize::from(t.sched.is_some());
                }
                keep
            });
            kept.fds = fds;
            kept.listed.retain(|_, (_, p)| *p == pass);
        }
        Ok(())
    }

    /// The kept `stat` (and `schedstat` when `sched`) of the task `key`, read into `buf`
    /// (and `sched_buf`): their lengths; `None` when they are not kept or the task is gone
    /// (then no longer kept either).
    fn read_kept(&mut self, key: (u32, u32), sched: bool) -> Option<(usize, usize)> {
        let t = self.kept.tasks.get_mut(&key)?;
        let mut read = || -> Option<(usize, usize)> {
            let n = pread_fd(&t.stat, &mut self.buf, TASK_FILE_CAP).ok()?;
            let s = match (&t.sched, sched) {
                (Some(fd), true) => pread_fd(fd, &mut self.sched_buf, TASK_FILE_CAP).ok()?,
                (None, true) => return None,
                (_, false) => 0,
            };
            (n > 0).then_some((n, s))
        };
        match read() {
            Some(r) => {
                t.pass = self.kept.pass;
                Some(r)
            }
            None => {
                self.forget_kept(key);
                None
            }
        }
    }

    fn forget_kept(&mut self, key: (u32, u32)) {
        if let Some(t) = self.kept.tasks.remove(&key) {
            self.kept.fds -= 1 + usize::from(t.sched.is_some());
        }
    }

    /// Keeps the freshly opened files of the task `key`, within the shared budget (else they
    /// close and this is `false`).
    fn keep(&mut self, key: (u32, u32), stat: Fd, sched: Option<Fd>) -> bool {
        let n = 1 + usize::from(sched.is_some());
        self.forget_kept(key);
        let mut room = Room::default();
        if self.kept.fds + n > self.kept.max || !room.grow(n) {
            return false;
        }
        self.kept.fds += n;
        let pass = self.kept.pass;
        let t = KeptTask {
            stat,
            sched,
            pass,
            _room: room,
        };
        self.kept.tasks.insert(key, t);
        true
    }

    /// Read one process (and its threads). `None`: it vanished. Its files are opened relative
    /// to its directory (one component looked up per file instead of the whole path), or read
    /// through the descriptors kept from the last pass.
    fn read_process(
        &mut self,
        snap: &mut Snapshot,
        pid: u32,
        fields: Fields,
        threads: bool,
    ) -> Option<()> {
        let sched = fields.contains(Fields::SCHED);
        let keeping = self.kept.max > 0 && !fields.contains(Fields::WCHAN);
        let mut dir = None;
        let mut p = ProcInfo {
            pid,
            ..ProcInfo::default()
        };
        if let Some((n, sn)) = keeping.then(|| self.read_kept((pid, 0), sched)).flatten() {
            p.stat = parse_stat(&self.buf[..n]).ok()?.1;
            if sched {
                p.sched = parse_schedstat(&self.sched_buf[..sn]);
            }
        } else {
            // Gone (or unreadable): either way there is no record.
            let d = self.open_pid(pid).ok()?;
            let stat = d.open(c"stat", libc::O_RDONLY).ok()?;
            let n = match read_fd(&stat, &mut self.buf, TASK_FILE_CAP) {
                Ok(0) => return None, // the kernel returns nothing for a task being reaped
                Ok(n) => n,
                Err(_) => return None,
            };
            p.stat = parse_stat(&self.buf[..n]).ok()?.1;
            if fields.contains(Fields::WCHAN) {
                p.wchan = self.read_aux(&d.0, c"wchan", |b| Some(parse_wchan(b)))?;
            }
            let mut sched_fd = None;
            if sched && keeping {
                match d.open(c"schedstat", libc::O_RDONLY) {
                    Ok(fd) => {
                        let n = read_fd(&fd, &mut self.sched_buf, TASK_FILE_CAP).ok()?;
                        p.sched = parse_schedstat(&self.sched_buf[..n]);
                        sched_fd = Some(fd);
                    }
                    Err(e) if matches!(classify(&e), Read::Gone) => return None,
                    Err(_) => {}
                }
            } else if sched {
                p.sched = self.read_aux(&d.0, c"schedstat", parse_schedstat)?;
            }
            if keeping && (!sched || sched_fd.is_some()) {
                self.keep((pid, 0), stat, sched_fd);
            }
            dir = Some(d);
        }
        if fields.contains(Fields::FD) {
            let d = self.pid_dir(&mut dir, pid)?;
            p.fd_count = match d.count(c"fd", &mut self.dents) {
                Ok(c) => Some(c),
                Err(e) => match classify(&e) {
                    Read::Gone => return None,
                    _ => None,
                },
            };
        }
        let first = snap.threads.len();
        if threads {
            self.read_threads(snap, &mut dir, pid, p.stat.num_threads, fields)?;
        }
        p.threads = first as u32..snap.threads.len() as u32;
        snap.procs.push(p);
        Some(())
    }

    /// The process's directory, opened now unless it already is (`slot`). `None`: gone.
    fn pid_dir<'a>(&mut self, slot: &'a mut Option<PidDir>, pid: u32) -> Option<&'a PidDir> {
        if slot.is_none() {
            *slot = Some(self.open_pid(pid).ok()?);
        }
        slot.as_ref()
    }

    /// The threads of the process `pid` (its directory in `dir` if opened already). A process
    /// whose `stat` counted one thread has only its main thread (tid = pid): its task
    /// directory is not listed (most processes are single-threaded, and a listing costs the
    /// kernel a lookup per thread), and that thread's own files are read (a process's CPU
    /// times also count threads that exited). A thread's `stat` is read through the
    /// descriptor kept from the last pass when there is one.
    ///
    /// Nor is a multi-threaded process's task directory listed again while its threads are
    /// the ones its last listing found: when every one of them was kept, each still answers
    /// through its kept descriptor (a thread that exited answers ESRCH) and `stat` counts
    /// exactly as many, no other thread can be in the process (a thread never changes
    /// process). Otherwise the pass lists the directory as before. As with a listing, a
    /// thread started after `stat` was read is found by the next pass.
    fn read_threads(
        &mut self,
        snap: &mut Snapshot,
        dir: &mut Option<PidDir>,
        pid: u32,
        num_threads: u32,
        fields: Fields,
    ) -> Option<()> {
        let mut tids = std::mem::take(&mut self.tids);
        tids.clear();
        let keeping = self.kept.max > 0 && !fields.contains(Fields::WCHAN);
        let first = snap.threads.len();
        if num_threads == 1 {
            self.kept.listed.remove(&pid);
            tids.push(pid);
            self.read_tids(snap, dir, None, pid, &tids, fields, false);
            self.tids = tids;
            return Some(());
        }
        if keeping
            && let Some((last, pass)) = self.kept.listed.get_mut(&pid)
            && last.len() == num_threads as usize
        {
            *pass = self.kept.pass;
            tids.extend_from_slice(last);
            if self.read_tids(snap, dir, None, pid, &tids, fields, true) {
                self.tids = tids;
                return Some(());
            }
            // A thread went: list the directory after all.
            snap.threads.truncate(first);
            tids.clear();
        }
        self.kept.listed.remove(&pid);
        // The task directory, once listed; thread files are opened in it.
        let listed = self.pid_dir(dir, pid).map(|d| {
            let fd = d.open(c"task", libc::O_RDONLY | libc::O_DIRECTORY)?;
            for_each_entry_fd(&fd, &mut self.dents, |name| {
                if let Some(n) = parse_pid(name) {
                    tids.push(n);
                }
            })
            .map(|()| fd)
        });
        let task = match listed {
            Some(Ok(fd)) => fd,
            None => {
                self.tids = tids;
                return None;
            }
            Some(Err(e)) => {
                self.tids = tids;
                return match classify(&e) {
                    Read::Gone => None,
                    _ => Some(()),
                };
            }
        };
        let all_kept = self.read_tids(snap, dir, Some(&task), pid, &tids, fields, false);
        if keeping && all_kept && tids.len() == num_threads as usize {
            let pass = self.kept.pass;
            self.kept.listed.insert(pid, (tids.clone(), pass));
        }
        self.tids = tids;
        Some(())
    }

    /// Reads the threads `tids` of `pid` into `snap`; their files are opened in the task
    /// directory `task` when it is open, else through `task/TID/` in the process's directory.
    /// `true` when every one was read through, or is now kept as, a kept descriptor.
    /// `kept_only`: stop at the first thread without a kept descriptor (`false`).
    #[allow(clippy::too_many_arguments)] // the pass's state, split out of one loop
    fn read_tids(
        &mut self,
        snap: &mut Snapshot,
        dir: &mut Option<PidDir>,
        task: Option<&Fd>,
        pid: u32,
        tids: &[u32],
        fields: Fields,
        kept_only: bool,
    ) -> bool {
        let keeping = self.kept.max > 0 && !fields.contains(Fields::WCHAN);
        let via_task = task.is_none();
        let mut all_kept = keeping;
        for &tid in tids {
            let kept = keeping.then(|| self.read_kept((pid, tid), false)).flatten();
            let n = match kept {
                Some((n, _)) => n,
                None if kept_only => return false,
                None => {
                    self.thread_path(via_task, tid, b"stat");
                    let base = match task {
                        Some(t) => t,
                        None => match self.pid_dir(dir, pid) {
                            Some(d) => &d.0,
                            None => return false,
                        },
                    };
                    let Ok(fd) = open_at(base, &self.path) else {
                        all_kept = false;
                        continue; // this thread exited; the process goes on
                    };
                    let n = match read_fd(&fd, &mut self.buf, TASK_FILE_CAP) {
                        Ok(n) if n > 0 => n,
                        _ => {
                            all_kept = false;
                            continue;
                        }
                    };
                    all_kept &= keeping && self.keep((pid, tid), fd, None);
                    n
                }
            };
            let Ok((_, stat)) = parse_stat(&self.buf[..n]) else {
                all_kept = false;
                continue;
            };
            let mut t = ThreadInfo {
                pid,
                tid,
                stat,
                ..ThreadInfo::default()
            };
            let sched_wanted = self
                .thread_sched_states
                .as_ref()
                .is_none_or(|s| s.contains(&t.stat.state));
            let wchan = fields.contains(Fields::WCHAN);
            if wchan || (fields.contains(Fields::SCHED) && sched_wanted) {
                let base = match task {
                    Some(t) => t,
                    None => match self.pid_dir(dir, pid) {
                        Some(d) => &d.0,
                        None => return false,
                    },
                };
                if wchan {
                    self.thread_path(via_task, tid, b"wchan");
                    match self.read_aux_path(base, |b| Some(parse_wchan(b))) {
                        Some(w) => t.wchan = w,
                        None => {
                            all_kept = false;
                            continue;
                        }
                    }
                }
                if fields.contains(Fields::SCHED) && sched_wanted {
                    self.thread_path(via_task, tid, b"schedstat");
                    match self.read_aux_path(base, parse_schedstat) {
                        Some(s) => t.sched = s,
                        None if kept_only => return false,
                        None => {
                            all_kept = false;
                            continue;
                        }
                    }
                }
            }
            snap.threads.push(t);
        }
        all_kept
    }

    /// `[task/]TID/leaf\0` into the reused path buffer: a thread's file relative to its
    /// process's directory (`via_task`) or to its task directory.
    fn thread_path(&mut self, via_task: bool, tid: u32, leaf: &[u8]) {
        self.path.clear();
        if via_task {
            self.path.extend_from_slice(b"task/");
        }
        push_decimal(&mut self.path, tid);
        self.path.push(b'/');
        self.path.extend_from_slice(leaf);
        self.path.push(0);
    }

    /// Read and parse the file `leaf` of the directory `dir`. Outer `None`: the task is gone;
    /// inner `None`: the field is unavailable.
    fn read_aux<T>(
        &mut self,
        dir: &Fd,
        leaf: &CStr,
        parse: impl FnOnce(&[u8]) -> Option<T>,
    ) -> Option<Option<T>> {
        self.path.clear();
        self.path.extend_from_slice(leaf.to_bytes_with_nul());
        self.read_aux_path(dir, parse)
    }

    /// `read_aux` of the relative path already in the path buffer.
    fn read_aux_path<T>(
        &mut self,
        dir: &Fd,
        parse: impl FnOnce(&[u8]) -> Option<T>,
    ) -> Option<Option<T>> {
        match read_at(dir, &self.path, &mut self.buf, TASK_FILE_CAP) {
            Ok(n) => Some(parse(&self.buf[..n])),
            Err(e) => match classify(&e) {
                Read::Gone => None,
                _ => Some(None),
            },
        }
    }

    /// The pids now in the root (unsorted), into `out`: the listing the agent's pass walks.
    pub(crate) fn list_pids(&mut self, out: &mut Vec<u32>) -> Result<(), ProcError> {
        out.clear();
        self.path.clear();
        self.path.extend_from_slice(&self.root_bytes);
        self.path.push(0);
        list_numeric(&self.path, &mut self.dents, out).map_err(|source| ProcError::List {
            path: self.root.clone(),
            source,
        })
    }

    /// The directory `root/PID`, whose files are then opened relative to it.
    pub(crate) fn open_pid(&mut self, pid: u32) -> io::Result<PidDir> {
        self.path.clear();
        self.path.extend_from_slice(&self.root_bytes);
        self.path.push(b'/');
        push_decimal(&mut self.path, pid);
        self.path.push(0);
        Ok(PidDir(open(&self.path, libc::O_PATH | libc::O_DIRECTORY)?))
    }

    pub fn page_size(&self) -> u64 {
        self.page_size
    }
}

/// Wall-clock time in ns since the Unix epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

pub(crate) fn push_decimal(out: &mut Vec<u8>, mut v: u32) {
    let mut tmp = [0u8; 10];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}
