//! The `mapped` host interface: read-only views of files in directories a guest's config
//! grants (`grants.mapped`). The guest names a granted directory and a plain file name; the
//! host opens the file (a regular file inside the directory, symlinks resolved and checked)
//! and copies out only the ranges the guest reads.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use wasmtime::component::Resource;

use super::bindings::agent::wasmon::collector::mapped;
use super::limits::MAX_MAPPED_FILES;
use super::state::{MappedDir, State};

/// Bytes one `read` may copy into the guest.
const MAX_READ: u64 = 16 << 20;

/// One open file: what the resource table holds for a WIT `mapped-file` handle (the
/// generated type is a marker; handles are converted by their table index).
///
/// Reads are `pread`s, not accesses to a memory map: a writer may truncate the file at any
/// time, and touching a mapping past the new end raises SIGBUS in the whole daemon. A read of
/// a truncated file returns fewer bytes instead. (MMV readers read each file once per fetch,
/// so the copy a read makes is all the cost there is.)
pub struct MappedFile {
    file: File,
    /// The size when the file was opened.
    size: u64,
}

impl MappedFile {
    /// Opens `name` in `dir` (canonical) for reading: refused unless it is a regular file whose
    /// real path lies inside `dir`. Opened without blocking, so a FIFO cannot hold the call.
    fn open(dir: &Path, name: &str) -> Result<MappedFile, String> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(dir.join(name))
            .map_err(|e| e.to_string())?;
        // What was opened, after every symlink: checked on the open descriptor, so a link
        // swapped in between a check and the open cannot lead outside.
        let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            .map_err(|e| format!("resolving the opened file: {e}"))?;
        if !real.starts_with(dir) {
            return Err(format!(
                "it leads outside the granted directory (to {})",
                real.display()
            ));
        }
        let meta = file.metadata().map_err(|e| e.to_string())?;
        if !meta.file_type().is_file() {
            return Err("not a regular file".into());
        }
        Ok(MappedFile {
            file,
            size: meta.len(),
        })
    }

    /// The size when opened, or less if the file was truncated since.
    fn size(&self) -> u64 {
        let now = self.file.metadata().map(|m| m.len()).unwrap_or(0);
        self.size.min(now)
    }

    /// Up to `len` bytes from `offset`: fewer at the end of the file, none past it.
    fn read(&self, offset: u64, len: u64) -> Vec<u8> {
        let want = len.min(MAX_READ).min(self.size.saturating_sub(offset));
        let mut buf = vec![0u8; want as usize];
        let mut got = 0;
        while got < buf.len() {
            match self.file.read_at(&mut buf[got..], offset + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        buf.truncate(got);
        buf
    }
}

fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

impl State {
    fn mapped_dir(&self, dir: &str) -> Result<&MappedDir, String> {
        self.grants
            .mapped
            .iter()
            .find(|d| d.name == dir)
            .ok_or_else(|| format!("directory {dir:?} is not granted to this guest"))
    }
}

impl mapped::Host for State {
    fn dirs(&mut self) -> Vec<String> {
        self.grants.mapped.iter().map(|d| d.name.clone()).collect()
    }

    fn list_files(&mut self, dir: String) -> Result<Vec<String>, String> {
        let d = self.mapped_dir(&dir)?;
        let entries = std::fs::read_dir(&d.host).map_err(|e| format!("listing {dir:?}: {e}"))?;
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        Ok(names)
    }

    fn open(&mut self, dir: String, name: String) -> Result<Resource<mapped::MappedFile>, String> {
        if !plain_name(&name) {
            return Err(format!("{name:?} is not a plain file name"));
        }
        if self.mapped_open >= MAX_MAPPED_FILES {
            return Err(format!(
                "{MAX_MAPPED_FILES} files are open already: drop one before opening {dir}/{name}"
            ));
        }
        let host = self.mapped_dir(&dir)?.host.clone();
        let canonical = std::fs::canonicalize(&host)
            .map_err(|e| format!("granted directory {dir:?} ({}): {e}", host.display()))?;
        let file = MappedFile::open(&canonical, &name)
            .map_err(|e| format!("opening {dir}/{name}: {e}"))?;
        let own = self.table.push(file).map_err(|e| e.to_string())?;
        self.mapped_open += 1;
        Ok(Resource::new_own(own.rep()))
    }
}

fn ours(handle: &Resource<mapped::MappedFile>) -> Resource<MappedFile> {
    Resource::new_borrow(handle.rep())
}

impl mapped::HostMappedFile for State {
    fn size(&mut self, file: Resource<mapped::MappedFile>) -> u64 {
        self.table.get(&ours(&file)).map_or(0, MappedFile::size)
    }

    fn read(&mut self, file: Resource<mapped::MappedFile>, offset: u64, len: u64) -> Vec<u8> {
        self.table
            .get(&ours(&file))
            .map_or_else(|_| Vec::new(), |f| f.read(offset, len))
    }

    fn drop(&mut self, file: Resource<mapped::MappedFile>) -> wasmtime::Result<()> {
        self.table
            .delete(Resource::<MappedFile>::new_own(file.rep()))?;
        self.mapped_open -= 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let canonical = std::fs::canonicalize(d.path()).unwrap();
        (d, canonical)
    }

    #[test]
    fn a_symlink_leading_out_of_the_directory_is_refused_one_inside_is_followed() {
        let (_d, dir) = dir();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::write(dir.join("inside"), "fine").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.join("out")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("passwd")).unwrap();
        std::os::unix::fs::symlink(dir.join("inside"), dir.join("alias")).unwrap();
        for name in ["out", "passwd"] {
            let err = MappedFile::open(&dir, name).err().expect("refused");
            assert!(
                err.contains("outside the granted directory"),
                "{name}: {err}"
            );
        }
        let f = MappedFile::open(&dir, "alias").unwrap();
        assert_eq!(f.read(0, 100), b"fine");
    }

    #[test]
    fn only_regular_files_open_and_a_fifo_never_blocks() {
        let (_d, dir) = dir();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Without O_NONBLOCK this open would wait forever for a writer.
        let err = MappedFile::open(&dir, "fifo").err().expect("refused");
        assert!(err.contains("not a regular file"), "{err}");
        std::fs::create_dir(dir.join("sub")).unwrap();
        assert!(MappedFile::open(&dir, "sub").is_err());
        std::os::unix::fs::symlink("/dev/zero", dir.join("zero")).unwrap();
        assert!(MappedFile::open(&dir, "zero").is_err());
    }

    #[test]
    fn a_file_truncated_by_its_writer_reads_short_and_never_faults() {
        let (_d, dir) = dir();
        let path = dir.join("mmv");
        let len = 4 << 20;
        std::fs::write(&path, vec![7u8; len]).unwrap();
        let f = MappedFile::open(&dir, "mmv").unwrap();
        assert_eq!(f.size(), len as u64);
        // Truncated between two reads.
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(100)
            .unwrap();
        assert_eq!(f.size(), 100);
        assert_eq!(f.read(0, len as u64).len(), 100);
        assert!(f.read(1000, 10).is_empty());
        // Truncated and regrown while reads run: with a memory map, touching a page past the
        // file's end during a copy raises SIGBUS and kills the test process.
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len as u64)
            .unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let w = std::fs::File::options().write(true).open(&path).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    w.set_len(0).unwrap();
                    w.set_len(len as u64).unwrap();
                }
            })
        };
        for _ in 0..200 {
            assert!(f.read(0, len as u64).len() <= len);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
    }
}
