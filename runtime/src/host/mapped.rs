//! The `mapped` host interface: read-only memory maps of files in directories a guest's config
//! grants (`grants.mapped`). The guest names a granted directory and a plain file name; the
//! host maps the file and copies out only the ranges the guest reads.

use std::fs::File;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use wasmtime::component::Resource;

use super::bindings::agent::wasmon::collector::mapped;
use super::state::State;

/// Bytes one `read` may copy into the guest.
const MAX_READ: u64 = 16 << 20;

/// A directory whose files a guest may map read-only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MappedDir {
    /// The name the guest uses for it.
    pub name: String,
    /// The directory on the host.
    pub host: PathBuf,
}

/// One mapped file: what the resource table holds for a WIT `mapped-file` handle (the
/// generated type is a marker; handles are converted by their table index).
pub struct MappedFile {
    file: File,
    map: Option<memmap2::Mmap>,
}

impl MappedFile {
    /// Bytes that are safe to touch now: a file truncated since it was mapped would fault
    /// (SIGBUS) past its new end, so reads are clamped to the current size as well.
    fn readable(&self) -> &[u8] {
        let Some(map) = &self.map else { return &[] };
        let now = self.file.metadata().map(|m| m.len()).unwrap_or(0);
        &map[..map.len().min(usize::try_from(now).unwrap_or(usize::MAX))]
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
        let path = self.mapped_dir(&dir)?.host.join(&name);
        let file = File::open(&path).map_err(|e| format!("opening {dir}/{name}: {e}"))?;
        let len = file
            .metadata()
            .map_err(|e| format!("{dir}/{name}: {e}"))?
            .len();
        // An empty file cannot be mapped; it reads as empty.
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the map is only read, through `readable`, which clamps every access to
            // the file's current size; the writer may change bytes under us (MMV's generation
            // numbers exist for that), which is data, not undefined behaviour of ours.
            Some(
                unsafe { memmap2::Mmap::map(&file) }
                    .map_err(|e| format!("mapping {dir}/{name}: {e}"))?,
            )
        };
        let own = self
            .table
            .push(MappedFile { file, map })
            .map_err(|e| e.to_string())?;
        Ok(Resource::new_own(own.rep()))
    }
}

fn ours(handle: &Resource<mapped::MappedFile>) -> Resource<MappedFile> {
    Resource::new_borrow(handle.rep())
}

impl mapped::HostMappedFile for State {
    fn size(&mut self, file: Resource<mapped::MappedFile>) -> u64 {
        self.table
            .get(&ours(&file))
            .map(|f| f.readable().len() as u64)
            .unwrap_or(0)
    }

    fn read(&mut self, file: Resource<mapped::MappedFile>, offset: u64, len: u64) -> Vec<u8> {
        let Ok(f) = self.table.get(&ours(&file)) else {
            return Vec::new();
        };
        let bytes = f.readable();
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let end = start
            .saturating_add(usize::try_from(len.min(MAX_READ)).unwrap_or(usize::MAX))
            .min(bytes.len());
        bytes[start..end].to_vec()
    }

    fn drop(&mut self, file: Resource<mapped::MappedFile>) -> wasmtime::Result<()> {
        self.table
            .delete(Resource::<MappedFile>::new_own(file.rep()))?;
        Ok(())
    }
}
