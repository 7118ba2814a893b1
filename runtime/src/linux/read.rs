//! Reading /proc and /sys under a root prefix, bounded.
//!
//! Everything the linux agent reads goes through [`Root`], so a captured tree (`root =
//! "DIR"`, PCP's `LINUX_STATSPATH`) stands in for the live host in tests. Reads are bounded
//! in size ([`MAX_FILE`]) and in directory entries ([`MAX_ENTRIES`]), never block on a FIFO or
//! a device node a hostile tree may hold, and report why a file gave nothing (absent, not
//! permitted, too large) so the caller answers "no value" for that file's metrics only.
//!
//! Owns only file access; knows no file's format.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Largest file read whole: a 1,152-CPU `/proc/interrupts` is ~1 MB, `/proc/slabinfo` and
/// `/proc/zoneinfo` on large NUMA hosts a few hundred KB. Past this the file is refused rather
/// than half-parsed.
pub const MAX_FILE: usize = 8 << 20;

/// Most entries taken from one directory listing (`/sys/block`, `/sys/class/net`, a node's
/// CPUs): far above any real host (a 4,096-CPU host has 4,096 `cpuN`), low enough that a
/// hostile tree cannot make a fetch allocate without bound.
pub const MAX_ENTRIES: usize = 65_536;

/// Why a file gave no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Absent on this kernel or host: the file's metrics have no value.
    #[error("{0}: not present")]
    Missing(PathBuf),
    /// Present but not readable by the daemon (root-only files).
    #[error("{0}: permission denied")]
    Denied(PathBuf),
    #[error("{0}: larger than {MAX_FILE} bytes")]
    TooLarge(PathBuf),
    /// A FIFO, socket or device node where a regular file was expected.
    #[error("{0}: not a regular file")]
    NotRegular(PathBuf),
    #[error("{0}: {1}")]
    Io(PathBuf, String),
}

/// The root everything is read under (`/` on a live host).
#[derive(Clone, Debug)]
pub struct Root {
    dir: PathBuf,
}

impl Default for Root {
    fn default() -> Self {
        Root::new("/")
    }
}

impl Root {
    pub fn new(dir: impl AsRef<Path>) -> Root {
        Root {
            dir: dir.as_ref().to_path_buf(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `rel` (`"proc/stat"`, no leading slash) under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel.trim_start_matches('/'))
    }

    /// Reads `rel` whole into `buf` (cleared first) and returns it. Procfs files report size
    /// 0, so the size is found by reading, up to [`MAX_FILE`].
    pub fn read<'b>(&self, rel: &str, buf: &'b mut String) -> Result<&'b str, ReadError> {
        buf.clear();
        let bytes = self.read_bytes(rel, std::mem::take(buf).into_bytes())?;
        // Kernel files are ASCII; a stray byte in a device name must not cost the file.
        match String::from_utf8(bytes) {
            Ok(s) => *buf = s,
            Err(e) => buf.push_str(&String::from_utf8_lossy(e.as_bytes())),
        }
        Ok(buf.as_str())
    }

    /// Reads `rel` whole as bytes (binary files: utmp records), into `bytes` (cleared
    /// first, its allocation reused), bounded as [`Root::read`].
    pub fn read_bytes(&self, rel: &str, mut bytes: Vec<u8>) -> Result<Vec<u8>, ReadError> {
        bytes.clear();
        let path = self.path(rel);
        let io = |e: std::io::Error, path: PathBuf| match e.kind() {
            std::io::ErrorKind::NotFound => ReadError::Missing(path),
            std::io::ErrorKind::PermissionDenied => ReadError::Denied(path),
            _ if e.raw_os_error() == Some(libc::ENOTDIR) => ReadError::Missing(path),
            _ => ReadError::Io(path, e.to_string()),
        };
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&path)
            .map_err(|e| io(e, path.clone()))?;
        let meta = file.metadata().map_err(|e| io(e, path.clone()))?;
        if !meta.is_file() {
            return Err(ReadError::NotRegular(path));
        }
        file.take(MAX_FILE as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| io(e, path.clone()))?;
        if bytes.len() > MAX_FILE {
            return Err(ReadError::TooLarge(path));
        }
        Ok(bytes)
    }

    /// True when the root is the live host's `/` (values only system calls give, such as
    /// uname(2) and SysV IPC limits, are read only then).
    pub fn is_live(&self) -> bool {
        self.dir == Path::new("/")
    }

    /// Reads `rel` as a small string, trimmed (a sysfs attribute).
    pub fn attr(&self, rel: &str) -> Result<String, ReadError> {
        let mut buf = String::new();
        self.read(rel, &mut buf)?;
        Ok(buf.trim().to_string())
    }

    /// A row of counters, one file each: `files[i]` in `dir` (a sysfs `statistics`
    /// directory) read through `parse`, the conversion the reference applies to that class;
    /// a file that cannot be read counts 0.
    pub fn counters<const N: usize>(
        &self,
        dir: &str,
        files: [&str; N],
        parse: impl Fn(&str) -> u64,
    ) -> [u64; N] {
        files.map(|f| self.attr(&format!("{dir}/{f}")).map_or(0, |t| parse(&t)))
    }

    /// Reads `rel` as one unsigned number (a sysfs counter); `None` when absent or not a
    /// number.
    pub fn number(&self, rel: &str) -> Option<u64> {
        self.attr(rel).ok()?.parse().ok()
    }

    /// Names in directory `rel`, sorted, at most [`MAX_ENTRIES`]; empty when absent.
    pub fn list(&self, rel: &str) -> Vec<String> {
        let mut names = self.list_unsorted(rel);
        names.sort();
        names
    }

    /// Names in directory `rel` in the order the directory gives them (C's `readdir`,
    /// where pmdalinux numbers instances in that order), at most [`MAX_ENTRIES`].
    pub fn list_unsorted(&self, rel: &str) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(self.path(rel)) else {
            return Vec::new();
        };
        dir.take(MAX_ENTRIES)
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect()
    }

    /// True when `rel` exists (a file, a directory or a link that resolves).
    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }
}

/// The first whitespace-separated field of `line` after `key` parsed as u64: the shape of
/// most `Key value` lines of /proc.
pub fn u64_after(line: &str, key: &str) -> Option<u64> {
    line.strip_prefix(key)?
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Every field of `text` parsed as u64 (unparseable ones as 0, as PCP's `strtoull`).
pub fn numbers(text: &str) -> impl Iterator<Item = u64> + '_ {
    text.split_ascii_whitespace()
        .map(|x| x.parse::<u64>().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_whole_files_under_the_root_and_says_why_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/stat"), "cpu 1 2 3\n").unwrap();
        let root = Root::new(dir.path());
        let mut buf = String::new();
        assert_eq!(root.read("proc/stat", &mut buf).unwrap(), "cpu 1 2 3\n");
        assert!(matches!(
            root.read("proc/nosuch", &mut buf),
            Err(ReadError::Missing(_))
        ));
        // A path through a file is absent, not an error.
        assert!(matches!(
            root.read("proc/stat/x", &mut buf),
            Err(ReadError::Missing(_))
        ));
        assert!(matches!(
            root.read("proc", &mut buf),
            Err(ReadError::NotRegular(_))
        ));
    }

    #[test]
    fn a_fifo_is_refused_without_blocking_and_a_huge_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let root = Root::new(dir.path());
        let mut buf = String::new();
        assert!(matches!(
            root.read("fifo", &mut buf),
            Err(ReadError::NotRegular(_))
        ));
        let big = std::fs::File::create(dir.path().join("big")).unwrap();
        big.set_len(MAX_FILE as u64 + 10).unwrap();
        assert!(matches!(
            root.read("big", &mut buf),
            Err(ReadError::TooLarge(_))
        ));
    }

    #[test]
    fn procfs_files_of_size_zero_read_in_full() {
        let root = Root::default();
        let mut buf = String::new();
        let text = root.read("proc/self/status", &mut buf).unwrap();
        assert!(text.contains("Name:") && text.contains("VmPeak") || text.contains("Pid:"));
    }
}
