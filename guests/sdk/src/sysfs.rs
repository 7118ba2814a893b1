//! Reading the small text files of `/proc` and `/sys` as collectors do: bounded (a file larger
//! than [`MAX_FILE`] is an error, never a reason to grow without end), and numbers parsed
//! strictly (a counter that is not a number is an error for that counter only).
//!
//! In an agent, [`read_text`] and [`list`] go through the host's `files` interface (a whole
//! file or a directory's names in one host call) and fall back to WASI's filesystem for a
//! path it does not serve (`elsewhere`: not under a read-only grant, or on a network
//! filesystem); natively (tests, benches) they are `std::fs`.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Largest attribute file read. sysfs attributes are one page at most (4 KiB) and the procfs
/// files collectors read (mountstats aside) stay under a few KiB; 64 KiB is generous, and
/// anything larger is a hostile or broken tree.
pub const MAX_FILE: u64 = 64 << 10;

/// Entries of one directory read; more is a hostile tree.
pub const MAX_ENTRIES: usize = 4096;

/// Why a file gave no value.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    TooLarge,
    NotANumber(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::TooLarge => write!(f, "larger than {MAX_FILE} bytes"),
            ReadError::NotANumber(t) => write!(f, "not a number: {t:?}"),
        }
    }
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

impl ReadError {
    /// The file exists but may not be read (root-only attributes such as `energy_uj`).
    pub fn is_denied(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.kind() == std::io::ErrorKind::PermissionDenied)
    }
}

/// The whole file as text (invalid UTF-8 replaced), at most [`MAX_FILE`] bytes.
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    read_bytes(path, MAX_FILE).map(text)
}

/// Bytes as text, invalid UTF-8 replaced.
fn text(buf: Vec<u8>) -> String {
    match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// The whole file, at most `max` bytes: through the host's `files` interface in an agent,
/// WASI's filesystem where that does not serve the path.
pub fn read_bytes(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    #[cfg(target_arch = "wasm32")]
    if let Some(path) = path.to_str() {
        use crate::agent::files;
        match files::read_file(path, max) {
            Ok(buf) => return Ok(buf),
            Err(files::FileError::TooLarge) => return Err(ReadError::TooLarge),
            Err(files::FileError::Elsewhere) => {}
            Err(e) => return Err(ReadError::Io(io_error(e))),
        }
    }
    let mut buf = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(ReadError::TooLarge);
    }
    Ok(buf)
}

/// The `std::io::Error` a `files` error stands for (callers match on its kind, as
/// [`ReadError::is_denied`] does): the one WASI's filesystem gives for the same file, so that
/// an agent sees no difference between the two ways (a FIFO or device node is "permission
/// denied" there, refused at its open).
#[cfg(target_arch = "wasm32")]
fn io_error(e: crate::agent::files::FileError) -> std::io::Error {
    use crate::agent::files::FileError;
    use std::io::ErrorKind;
    let kind = match e {
        FileError::NoEntry => ErrorKind::NotFound,
        FileError::Access => ErrorKind::PermissionDenied,
        FileError::WrongKind => ErrorKind::PermissionDenied,
        FileError::TooLarge => ErrorKind::FileTooLarge,
        FileError::Elsewhere => ErrorKind::Unsupported,
        FileError::Io => ErrorKind::Other,
    };
    std::io::Error::new(kind, format!("{e:?}"))
}

/// The file's first line, trimmed.
pub fn read_line(path: &Path) -> Result<String, ReadError> {
    let text = read_text(path)?;
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

/// A file holding one unsigned number (decimal, or hex with `0x`).
pub fn read_u64(path: &Path) -> Result<u64, ReadError> {
    let line = read_line(path)?;
    parse_u64(&line).ok_or(ReadError::NotANumber(line))
}

/// A file holding one signed decimal number.
pub fn read_i64(path: &Path) -> Result<i64, ReadError> {
    let line = read_line(path)?;
    line.parse().map_err(|_| ReadError::NotANumber(line))
}

/// An unsigned number, decimal or `0x` hex.
pub fn parse_u64(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// Whether `dir` is a directory the agent can list. In an agent it is asked through the
/// host's `files` interface, one call on the polling thread: WASI's stat of a path goes
/// through the host's thread pool, and two such handoffs were most of a small `lustre` poll
/// (issue 30). Natively (and where `files` does not serve the path), its metadata says.
pub fn is_dir(dir: &Path) -> bool {
    #[cfg(target_arch = "wasm32")]
    if let Some(path) = dir.to_str() {
        use crate::agent::files;
        match files::list_dir(path, 0) {
            Ok(_) => return true,
            Err(files::FileError::Elsewhere) => {}
            Err(_) => return false,
        }
    }
    dir.is_dir()
}

/// The names in a directory, sorted, at most [`MAX_ENTRIES`]; none when it cannot be read
/// (absent hardware is no error).
pub fn list(dir: &Path) -> Vec<String> {
    let mut names = names(dir);
    names.sort();
    names
}

/// Up to [`MAX_ENTRIES`] names of `dir` (UTF-8 ones), in no order.
fn names(dir: &Path) -> Vec<String> {
    #[cfg(target_arch = "wasm32")]
    if let Some(path) = dir.to_str() {
        use crate::agent::files;
        match files::list_dir(path, MAX_ENTRIES as u32) {
            Ok(names) => return names,
            Err(files::FileError::Elsewhere) => {}
            Err(_) => return Vec::new(),
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .take(MAX_ENTRIES)
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}

/// `root` joined with an absolute path such as `/sys/class/hwmon`: the agents read `/` in
/// the sandbox (their grants map it) and a captured tree natively (tests, benches).
pub fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_strict_and_files_bounded() {
        let dir = std::env::temp_dir().join(format!("wasmon-sysfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("n"), "42\n").unwrap();
        std::fs::write(dir.join("hex"), "0x1f\n").unwrap();
        std::fs::write(dir.join("bad"), "N/A\n").unwrap();
        std::fs::write(dir.join("big"), vec![b'1'; MAX_FILE as usize + 1]).unwrap();
        assert_eq!(read_u64(&dir.join("n")).unwrap(), 42);
        assert_eq!(read_u64(&dir.join("hex")).unwrap(), 31);
        assert!(matches!(
            read_u64(&dir.join("bad")),
            Err(ReadError::NotANumber(_))
        ));
        assert!(matches!(
            read_u64(&dir.join("big")),
            Err(ReadError::TooLarge)
        ));
        assert_eq!(list(&dir), ["bad", "big", "hex", "n"]);
        assert!(list(&dir.join("absent")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
