//! The `files` host interface: a whole small file, or a directory's names, under a read-only
//! directory grant (`grants.dirs`), in one call. It owns the walk from a guest path to the
//! grant that serves it (the grants' root descriptors are the instance's `State`'s); opening
//! under a root is
//! [`super::dirs`]'s (the same `openat2` as WASI's `open-at` of a read-only grant, so the
//! same rules hold: nothing outside the root, no magic links, nothing that blocks, only a
//! regular file read and only a directory listed). It may not touch WASI's own descriptors.
//!
//! Why: a sysfs agent reads hundreds of one-line attributes a poll, and each took WASI's open,
//! stat, stream creation, reads and drops (~8 host calls, two of them through the blocking
//! pool) where a native reader makes ~4 system calls (issue 30). Here it is one host call.
//!
//! Everything runs on the calling thread, so it serves only files of [`local`] filesystems
//! (procfs, sysfs, tmpfs, local disks), whose reads never wait on a server; on any other the
//! answer is `elsewhere` and the guest reads through WASI, whose calls its deadline can
//! abandon.
//!
//! [`local`]: super::dirs::is_local

use std::ffi::CStr;
use std::io::Read;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};

use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

use super::bindings::agent::wasmon::collector::files::{self, FileError};
use super::dirs::{Kind, Opened, open_beneath};
use super::state::{Root, State, components};

/// Bytes one `read-file` may return whatever `max` the guest asks: what the host holds for one
/// call before the copy into the guest. The files this interface is for are pages
/// (sysfs attributes, 4 KiB) to a few MiB (mountstats of hundreds of NFS mounts).
pub const MAX_READ: u64 = 16 << 20;

/// Names one `list-dir` may return whatever `max` the guest asks (sysfs's largest class
/// directories hold a few thousand entries).
pub const MAX_LIST: u32 = 1 << 16;

/// The root that serves `path` (absolute), the one with the longest matching prefix as
/// WASI's preopens are matched, and the rest of the path below it (`.` for the root itself).
fn resolve<'r>(roots: &'r [Root], path: &str) -> Result<(&'r Root, String), FileError> {
    if !path.starts_with('/') {
        return Err(FileError::Elsewhere);
    }
    let parts: Vec<&str> = components(path).collect();
    let root = roots
        .iter()
        .filter(|r| r.guest.len() <= parts.len() && r.guest.iter().zip(&parts).all(|(a, b)| a == b))
        .max_by_key(|r| r.guest.len())
        .ok_or(FileError::Elsewhere)?;
    let rest = &parts[root.guest.len()..];
    let rest = if rest.is_empty() {
        ".".to_string()
    } else {
        rest.join("/")
    };
    Ok((root, rest))
}

/// This interface's error for WASI's error of an open beneath a root.
fn error_of(code: ErrorCode) -> FileError {
    match code {
        ErrorCode::NoEntry => FileError::NoEntry,
        // Permissions; a path leading outside the root or through a magic link; a loop.
        ErrorCode::Access | ErrorCode::NotPermitted | ErrorCode::Loop => FileError::Access,
        ErrorCode::NotDirectory | ErrorCode::IsDirectory | ErrorCode::NoSuchDevice => {
            FileError::WrongKind
        }
        // A kernel without openat2: WASI's open refuses too, with its own error.
        ErrorCode::Unsupported => FileError::Elsewhere,
        _ => FileError::Io,
    }
}

/// Opens `path` under the root serving it: a file of `want`'s kind on a local filesystem.
fn open(roots: &[Root], path: &str, want: Kind) -> Result<OwnedFd, FileError> {
    let (root, rest) = resolve(roots, path)?;
    let directory = matches!(want, Kind::Dir);
    let Opened { file, kind, local } =
        open_beneath(root.dir.as_raw_fd(), &rest, directory, true).map_err(error_of)?;
    let right = matches!(
        (&kind, &want),
        (Kind::Dir, Kind::Dir) | (Kind::File, Kind::File)
    );
    if !right {
        return Err(FileError::WrongKind);
    }
    if !local {
        return Err(FileError::Elsewhere);
    }
    Ok(file.into())
}

/// Reads `file` to its end, failing past `max` bytes (one byte more is read to know).
fn read_bounded(file: OwnedFd, max: u64) -> Result<Vec<u8>, FileError> {
    let file = std::fs::File::from(file);
    let mut buf = Vec::new();
    match file.take(max + 1).read_to_end(&mut buf) {
        Ok(_) if buf.len() as u64 > max => Err(FileError::TooLarge),
        Ok(_) => Ok(buf),
        Err(_) => Err(FileError::Io),
    }
}

/// Up to `max` names of the directory `dir`, `.` and `..` left out, and names that are not
/// UTF-8 (WIT strings are) too.
fn names(dir: OwnedFd, max: u32) -> Result<Vec<String>, FileError> {
    // SAFETY: fdopendir takes ownership of the descriptor (closed by closedir below).
    let stream = unsafe { libc::fdopendir(dir.into_raw_fd()) };
    if stream.is_null() {
        return Err(FileError::Io);
    }
    let mut out = Vec::new();
    while out.len() < max as usize {
        // SAFETY: a stream fdopendir returned and nobody else uses; the entry it returns
        // stays valid until the next readdir on it.
        let entry = unsafe { libc::readdir(stream) };
        if entry.is_null() {
            break;
        }
        // SAFETY: d_name is NUL-terminated within the entry.
        let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) };
        match name.to_str() {
            Ok("." | "..") | Err(_) => {}
            Ok(n) => out.push(n.to_string()),
        }
    }
    // SAFETY: the stream is ours and used no more.
    unsafe { libc::closedir(stream) };
    Ok(out)
}

impl files::Host for State {
    fn read_file(&mut self, path: String, max: u64) -> Result<Vec<u8>, FileError> {
        let file = open(&self.read_roots, &path, Kind::File)?;
        read_bounded(file, max.min(MAX_READ))
    }

    fn list_dir(&mut self, path: String, max: u32) -> Result<Vec<String>, FileError> {
        let dir = open(&self.read_roots, &path, Kind::Dir)?;
        names(dir, max.min(MAX_LIST))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::host::state::{DirGrant, roots};

    fn roots_of(grants: &[(&std::path::Path, &str)]) -> Vec<Root> {
        let grants: Vec<DirGrant> = grants
            .iter()
            .map(|(host, guest)| DirGrant {
                host: host.to_path_buf(),
                guest: guest.to_string(),
                read_only: true,
            })
            .collect();
        roots(&grants).unwrap()
    }

    #[test]
    fn a_path_goes_to_the_longest_matching_grant_by_whole_components() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let roots = roots_of(&[(a.path(), "/sys"), (b.path(), "/sys/class")]);
        let which = |p: &str| resolve(&roots, p).map(|(r, rest)| (r.guest.join("/"), rest));
        assert_eq!(
            which("/sys/class/net").unwrap(),
            ("sys/class".into(), "net".into())
        );
        assert_eq!(
            which("/sys//./block").unwrap(),
            ("sys".into(), "block".into())
        );
        assert_eq!(which("/sys").unwrap(), ("sys".into(), ".".into()));
        assert_eq!(which("/sysfoo/x"), Err(FileError::Elsewhere));
        assert_eq!(which("sys/class"), Err(FileError::Elsewhere), "relative");
        assert_eq!(which("/proc/stat"), Err(FileError::Elsewhere));
        // `..` is passed on, and openat2 refuses it beneath the root.
        assert_eq!(
            which("/sys/../etc").unwrap(),
            ("sys".into(), "../etc".into())
        );
    }
}
