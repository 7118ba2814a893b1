//! The process reader's system-call layer: descriptors closed on drop, reads bounded by a cap
//! (grown into one reused buffer), `getdents64` listings without an allocation per entry, each
//! call retried when a signal interrupts it, a process's files opened relative to its open
//! `/proc/PID` directory (`PidDir`). Knows nothing of /proc's file formats (`parse`)
//! or of what a pass reads (`reader`).

use std::ffi::CStr;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use super::parse::parse_pid;

/// A file descriptor closed on drop.
pub(super) struct Fd(pub(super) libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor and close it once.
        unsafe { libc::close(self.0) };
    }
}

/// Most procfs files all readers of this process together keep open between passes (the
/// detectors' reader and the proc agent share it): each holds a `seq_file` with its page-sized
/// buffer (~4.5 KiB of kernel memory with the `file`), so at most ~18 MiB; past it, files are
/// opened per read as before. Also never more than a quarter of the soft descriptor limit,
/// which the rest of the daemon needs.
pub const KEPT_FILES: usize = 4096;

/// Descriptors kept now, by every reader together.
static KEPT_NOW: AtomicUsize = AtomicUsize::new(0);

/// The bound on kept descriptors: [`KEPT_FILES`], or a quarter of the soft descriptor limit
/// when that is lower (read once).
pub(crate) fn kept_budget() -> usize {
    static BUDGET: OnceLock<usize> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid destination for getrlimit.
        let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
            usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
        } else {
            0
        };
        KEPT_FILES.min(soft / 4)
    })
}

/// Descriptors kept now by every reader of this process.
#[cfg(test)]
pub(crate) fn kept_now() -> usize {
    KEPT_NOW.load(Ordering::Relaxed)
}

/// Takes `n` from a count bounded by `max`: false (and nothing taken) when it would pass it.
fn take(now: &AtomicUsize, max: usize, n: usize) -> bool {
    now.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        (v + n <= max).then_some(v + n)
    })
    .is_ok()
}

/// One reader's own part of the shared budget (its kept descriptors, at most `max`), so that
/// it leaves room to the others.
#[derive(Debug)]
pub(crate) struct Share {
    now: AtomicUsize,
    max: usize,
}

impl Share {
    pub(crate) fn new(max: usize) -> Arc<Share> {
        Arc::new(Share {
            now: AtomicUsize::new(0),
            max,
        })
    }

    /// Descriptors kept in this share now.
    pub(crate) fn now(&self) -> usize {
        self.now.load(Ordering::Relaxed)
    }
}

/// Room for descriptors kept between passes, taken from the shared budget (and from a
/// reader's share, when it has one) and given back when dropped with the descriptors it
/// covers.
#[derive(Debug, Default)]
pub(crate) struct Room {
    n: usize,
    share: Option<Arc<Share>>,
}

impl Room {
    /// No room yet, drawn from `share` as well as from the shared budget when it grows.
    pub(crate) fn in_share(share: &Arc<Share>) -> Room {
        Room {
            n: 0,
            share: Some(share.clone()),
        }
    }

    /// Room for `n` more descriptors: false (and nothing taken) when the budget or the
    /// share is full.
    pub(crate) fn grow(&mut self, n: usize) -> bool {
        if let Some(s) = &self.share
            && !take(&s.now, s.max, n)
        {
            return false;
        }
        if !take(&KEPT_NOW, kept_budget(), n) {
            if let Some(s) = &self.share {
                s.now.fetch_sub(n, Ordering::Relaxed);
            }
            return false;
        }
        self.n += n;
        true
    }

    /// Give back room for `n` descriptors (closed by the caller).
    pub(crate) fn shrink(&mut self, n: usize) {
        let n = n.min(self.n);
        self.n -= n;
        KEPT_NOW.fetch_sub(n, Ordering::Relaxed);
        if let Some(s) = &self.share {
            s.now.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// Descriptors this room covers.
    pub(crate) fn len(&self) -> usize {
        self.n
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        self.shrink(self.n);
    }
}

pub(super) fn open(path: &[u8], flags: libc::c_int) -> io::Result<Fd> {
    let c = CStr::from_bytes_with_nul(path)
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(Fd(fd))
    }
}

/// Read at most `cap` bytes of the file at `rel` (NUL-terminated) under the directory `dir`
/// into `buf` (grown up to `cap`): a hostile or huge file costs a bounded read.
pub(super) fn read_at(dir: &Fd, rel: &[u8], buf: &mut Vec<u8>, cap: usize) -> io::Result<usize> {
    read_fd(&open_at(dir, rel)?, buf, cap)
}

/// The file at `rel` (NUL-terminated) under the directory `dir`, opened for reading.
pub(super) fn open_at(dir: &Fd, rel: &[u8]) -> io::Result<Fd> {
    let c =
        CStr::from_bytes_with_nul(rel).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is NUL-terminated and the directory descriptor is open.
    let fd = unsafe { libc::openat(dir.0, c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(Fd(fd))
    }
}

/// Read at most `cap` bytes of an open file from its start into `buf` (grown up to `cap`):
/// a procfs file read again from offset 0 is generated afresh.
pub(super) fn pread_fd(fd: &Fd, buf: &mut Vec<u8>, cap: usize) -> io::Result<usize> {
    read_upto(fd, buf, cap, true)
}

/// Read at most `cap` bytes of an open file into `buf` (grown up to `cap`).
pub(super) fn read_fd(fd: &Fd, buf: &mut Vec<u8>, cap: usize) -> io::Result<usize> {
    read_upto(fd, buf, cap, false)
}

/// `read_fd`, or `pread_fd` (from offset 0) when `from_start`.
pub(super) fn read_upto(
    fd: &Fd,
    buf: &mut Vec<u8>,
    cap: usize,
    from_start: bool,
) -> io::Result<usize> {
    let mut len = 0;
    while len < cap {
        if len == buf.len() {
            buf.resize((buf.len() * 2).max(4096).min(cap), 0);
        }
        let room = &mut buf[len..];
        let (to, n) = (room.as_mut_ptr().cast(), room.len());
        // SAFETY: the destination range lies within `buf`.
        let n = retry(|| unsafe {
            if from_start {
                libc::pread(fd.0, to, n, len as libc::off_t)
            } else {
                libc::read(fd.0, to, n)
            }
        })?;
        if n == 0 {
            break;
        }
        len += n;
    }
    Ok(len)
}

/// A read-like system call's byte count, the call made again when a signal interrupted it.
fn retry(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let n = call();
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Call `f` with the name of every entry of a directory (including `.` and `..`).
fn for_each_entry(path: &[u8], dents: &mut [u8], f: impl FnMut(&[u8])) -> io::Result<()> {
    for_each_entry_fd(&open(path, libc::O_RDONLY | libc::O_DIRECTORY)?, dents, f)
}

pub(super) fn for_each_entry_fd(
    fd: &Fd,
    dents: &mut [u8],
    mut f: impl FnMut(&[u8]),
) -> io::Result<()> {
    loop {
        // SAFETY: getdents64 writes at most `dents.len()` bytes into `dents`.
        let n = retry(|| unsafe {
            libc::syscall(libc::SYS_getdents64, fd.0, dents.as_mut_ptr(), dents.len()) as isize
        })?;
        if n == 0 {
            return Ok(());
        }
        // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        let mut off = 0usize;
        while off + 19 <= n {
            let reclen = u16::from_ne_bytes([dents[off + 16], dents[off + 17]]) as usize;
            if reclen == 0 || off + reclen > n {
                break;
            }
            let name = &dents[off + 19..off + reclen];
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            f(&name[..end]);
            off += reclen;
        }
    }
}

pub(super) fn list_numeric(path: &[u8], dents: &mut [u8], out: &mut Vec<u32>) -> io::Result<()> {
    for_each_entry(path, dents, |name| {
        if let Some(n) = parse_pid(name) {
            out.push(n);
        }
    })
}

pub(super) fn count_entries_fd(fd: &Fd, dents: &mut [u8]) -> io::Result<u32> {
    let mut n = 0u32;
    for_each_entry_fd(fd, dents, |name| {
        if name != b"." && name != b".." {
            n += 1;
        }
    })?;
    Ok(n)
}

/// A read or open failed because the process or task is gone (ENOENT from a path, ESRCH from
/// a kept descriptor of a reaped task, even when its pid was reused).
pub(crate) fn gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH))
}

/// An open `root/PID` directory. Its files are opened relative to it: one path component
/// looked up per open instead of the whole path, and every file of the same process even if
/// the pid is reused meanwhile (a gone process's files answer ESRCH/ENOENT).
pub(crate) struct PidDir(pub(super) Fd);

impl PidDir {
    pub(super) fn open(&self, leaf: &CStr, flags: libc::c_int) -> io::Result<Fd> {
        // SAFETY: `leaf` is NUL-terminated and the directory descriptor is open.
        let fd = unsafe { libc::openat(self.0.0, leaf.as_ptr(), flags | libc::O_CLOEXEC) };
        if fd < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(Fd(fd))
        }
    }

    /// The file `leaf` into `buf`, at most `cap` bytes (the rest of a longer file is not
    /// read). Ok(0): the file is empty.
    pub(crate) fn read(&self, leaf: &CStr, buf: &mut Vec<u8>, cap: usize) -> io::Result<usize> {
        read_fd(&self.open(leaf, libc::O_RDONLY)?, buf, cap)
    }

    /// Entries of the directory `leaf`, without `.` and `..`.
    pub(crate) fn count(&self, leaf: &CStr, dents: &mut [u8]) -> io::Result<u32> {
        count_entries_fd(&self.open(leaf, libc::O_RDONLY | libc::O_DIRECTORY)?, dents)
    }

    /// The size `fstat` gives the directory `leaf` once opened (the open is what checks
    /// that this process may list it). On procfs since Linux 6.2, a `fd` directory's size is
    /// the number of open descriptors: no listing needed.
    pub(crate) fn dir_size(&self, leaf: &CStr) -> io::Result<u64> {
        let fd = self.open(leaf, libc::O_RDONLY | libc::O_DIRECTORY)?;
        // SAFETY: an all-zero `stat` is a valid value to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor is open and `st` is a valid destination.
        if unsafe { libc::fstat(fd.0, &mut st) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st.st_size as u64)
    }

    /// The target of the symlink `leaf` into `out` (at most `PATH_MAX` bytes).
    pub(crate) fn readlink(&self, leaf: &CStr, out: &mut Vec<u8>) -> io::Result<()> {
        out.clear();
        out.resize(libc::PATH_MAX as usize, 0);
        // SAFETY: `leaf` is NUL-terminated and `out` has `out.len()` writable bytes.
        let n = unsafe {
            libc::readlinkat(self.0.0, leaf.as_ptr(), out.as_mut_ptr().cast(), out.len())
        };
        if n < 0 {
            out.clear();
            return Err(io::Error::last_os_error());
        }
        out.truncate(n as usize);
        Ok(())
    }
}
