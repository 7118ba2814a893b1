//! The process reader's system-call layer: descriptors closed on drop, reads bounded by a cap
//! (grown into one reused buffer), `getdents64` listings without an allocation per entry, each
//! call retried when a signal interrupts it. Knows nothing of /proc's file formats (`parse`)
//! or of what a pass reads (`reader`).

use std::ffi::CStr;
use std::io;

use super::parse::parse_pid;

/// A file descriptor closed on drop.
pub(super) struct Fd(pub(super) libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor and close it once.
        unsafe { libc::close(self.0) };
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
