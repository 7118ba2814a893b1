//! The agent's logic in plain Rust over a [`Files`]: keeping up with the directory, naming
//! (`<root>.<file>.<metric>`), PMIDs (domain 70, the file's cluster, the metric's item),
//! descriptions and fetches. The wasm glue in `lib.rs` only supplies the files.
//!
//! Every call first looks at the directory once ([`Mmv::refresh`]): a list and the first
//! 40 bytes of each file. A file whose size or generation changed is read and parsed again;
//! the others keep their names. A fetch then reads and parses the files it needs, since
//! writers update values in place without changing anything the quick look sees.

use std::collections::{BTreeMap, BTreeSet};

use wasmon_guest::agent::{
    Atom, Child, MetricDesc, NsError, Pmid, Semantics, Value, ValueSet, ValueType,
};
use wasmon_guest::log::{Level, log};

use crate::files::{FileEntry, Files, Health, Key, Meta, MetricInfo, choose_cluster};
use crate::format::{self, FLAG_SENTINEL, MetricType, MmvError, MmvFile, MmvValue};

/// pmdammv's domain.
pub const DOMAIN: u32 = 70;

/// The agent over a directory of MMV files.
pub struct Mmv<F: Files> {
    files: F,
    root: String,
    /// By file name; files that are listed and have a usable name.
    entries: BTreeMap<String, FileEntry>,
    /// Listed names that cannot be a namespace component (logged once while listed).
    refused: BTreeSet<String>,
    /// The last listing error logged.
    list_error: Option<String>,
    /// Every warning logged, for tests.
    #[cfg(test)]
    pub warnings: Vec<String>,
}

fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// pmdammv's instance domain number: the file's cluster above the file's serial, in the 22
/// bits of a pmInDom serial.
pub fn indom_id(cluster: u32, serial: u32) -> u32 {
    ((cluster << 11) | serial) & ((1 << 22) - 1)
}

/// With `MMV_FLAG_SENTINEL`, writers mark "no value now" with all ones (integers), NaN
/// (floating point) or an empty string. pmdammv compares floats with `==` against NaN, which
/// never matches; `is_nan` is what it means.
/// PCP's type of an MMV metric, as pmdammv declares it: elapsed time is a 64-bit signed
/// count of microseconds. A type the writer marked unsupported has no values (every fetch
/// says so); it is described as a double.
fn value_type(t: MetricType) -> ValueType {
    match t {
        MetricType::I32 => ValueType::Int32,
        MetricType::U32 => ValueType::Uint32,
        MetricType::I64 | MetricType::Elapsed => ValueType::Int64,
        MetricType::U64 => ValueType::Uint64,
        MetricType::Float => ValueType::Float,
        MetricType::Double | MetricType::NoSupport => ValueType::Double,
        MetricType::String => ValueType::Text,
    }
}

/// A value as it crosses to the host, in the case its type calls for (integers exact).
fn atom(v: &MmvValue, now_us: i64) -> Option<Atom> {
    Some(match v {
        MmvValue::I32(x) => Atom::Int((*x).into()),
        MmvValue::U32(x) => Atom::Uint((*x).into()),
        MmvValue::I64(x) => Atom::Int(*x),
        MmvValue::U64(x) => Atom::Uint(*x),
        MmvValue::Float(x) => Atom::Real((*x).into()),
        MmvValue::Double(x) => Atom::Real(*x),
        MmvValue::String(s) => Atom::Text(s.clone()),
        MmvValue::Elapsed { .. } => Atom::Int(v.elapsed_us(now_us)?),
        MmvValue::NoSupport => return None,
    })
}

fn is_sentinel(v: &MmvValue) -> bool {
    match v {
        MmvValue::I32(x) => *x == -1,
        MmvValue::U32(x) => *x == u32::MAX,
        MmvValue::I64(x) => *x == -1,
        MmvValue::U64(x) => *x == u64::MAX,
        MmvValue::Float(x) => x.is_nan(),
        MmvValue::Double(x) => x.is_nan(),
        MmvValue::Elapsed { total_us, .. } => *total_us == -1,
        MmvValue::String(s) => s.is_empty(),
        MmvValue::NoSupport => false,
    }
}

impl<F: Files> Mmv<F> {
    /// `root` must already be a valid (dotted) name.
    pub fn new(files: F, root: &str) -> Mmv<F> {
        Mmv {
            files,
            root: root.to_string(),
            entries: BTreeMap::new(),
            refused: BTreeSet::new(),
            list_error: None,
            #[cfg(test)]
            warnings: Vec::new(),
        }
    }

    fn warn(&mut self, message: String) {
        log(Level::Warn, &message);
        #[cfg(test)]
        self.warnings.push(message);
    }

    /// Brings the file table up to date with the directory: at most one list and one quick
    /// look per file, and a parse of the files that changed.
    pub fn refresh(&mut self) {
        let listed = match self.files.list() {
            Ok(names) => {
                self.list_error = None;
                names
            }
            Err(e) => {
                // The directory is gone or unreadable: so are its metrics, until it is back.
                if self.list_error.as_ref() != Some(&e) {
                    self.warn(format!("mmv: cannot list the directory: {e}"));
                    self.list_error = Some(e);
                }
                self.entries.clear();
                return;
            }
        };
        // Dot files are skipped as pmdammv does (editors' and writers' temporaries).
        let listed: BTreeSet<String> = listed.into_iter().filter(|n| !n.starts_with('.')).collect();
        self.entries.retain(|n, _| listed.contains(n));
        self.refused.retain(|n| listed.contains(n));
        for name in &listed {
            if !crate::files::valid_component(name) {
                // A `.` or `-` in a file name would not make one PMNS component (pmdammv
                // refuses every metric of such a file, one warning per metric).
                if self.refused.insert(name.clone()) {
                    self.warn(format!(
                        "mmv file {name}: a file name must be letters, digits and '_' to name metrics; ignored"
                    ));
                }
                continue;
            }
            let key = match self.files.read(name, format::HEADER_SIZE) {
                Ok((size, head)) => Key::of(size, &head),
                Err(e) => {
                    self.set_broken(name, None, e);
                    continue;
                }
            };
            if self.entries.get(name).and_then(|e| e.key) == Some(key) {
                continue;
            }
            self.load(name);
        }
    }

    /// Reads and parses a file, updating what is known about it; the parse if it worked.
    fn load(&mut self, name: &str) -> Option<MmvFile> {
        let bytes = match self.files.read(name, u64::MAX) {
            Ok((_, bytes)) => bytes,
            Err(e) => {
                self.set_broken(name, None, e);
                return None;
            }
        };
        let key = Key::of(bytes.len() as u64, &bytes);
        let entry = self.entries.entry(name.to_string()).or_default();
        entry.key = Some(key);
        if bytes.is_empty() {
            // A writer between creating the file and sizing it: not worth a warning.
            entry.health = Health::Updating;
            return None;
        }
        match format::parse(&bytes) {
            Ok(f) => {
                self.parsed(name, &f);
                Some(f)
            }
            Err(MmvError::Updating { .. }) => {
                entry.health = Health::Updating;
                None
            }
            Err(e) => {
                self.set_broken(name, key.generation.map(|g| g.0), e.to_string());
                None
            }
        }
    }

    /// Records a problem with a file and logs it if it is new. The names of the last good
    /// parse stay if the file still has that generation (it was damaged in place, and its
    /// metrics answer the error); otherwise they are stale and go.
    fn set_broken(&mut self, name: &str, generation: Option<u64>, error: String) {
        let entry = self.entries.entry(name.to_string()).or_default();
        if entry.meta.as_ref().map(|m| m.generation) != generation {
            entry.meta = None;
            entry.cluster = None;
        }
        entry.health = Health::Broken(error.clone());
        if entry.logged.as_ref() != Some(&error) {
            entry.logged = Some(error.clone());
            self.warn(format!("mmv file {name}: {error}"));
        }
    }

    /// A good parse: new names if the generation changed, and a cluster if it has none yet
    /// or its header now asks for another.
    fn parsed(&mut self, name: &str, f: &MmvFile) {
        let mut warnings = Vec::new();
        let Some(entry) = self.entries.get_mut(name) else {
            return; // load inserted it
        };
        entry.health = Health::Ok;
        entry.logged = None;
        if entry.meta.as_ref().map(|m| m.generation) != Some(f.generation) {
            let (meta, skipped) = Meta::build(name, f);
            warnings.extend(skipped);
            entry.meta = Some(meta);
        }
        if entry.cluster.is_none() || entry.requested != f.cluster {
            let entries = &self.entries;
            let taken = |c: u32| {
                entries
                    .iter()
                    .any(|(n, e)| n != name && e.cluster == Some(c))
            };
            let (cluster, why) = choose_cluster(name, f.cluster, &taken);
            warnings.extend(why);
            if let Some(entry) = self.entries.get_mut(name) {
                entry.cluster = cluster;
                entry.requested = f.cluster;
            }
        }
        for w in warnings {
            self.warn(w);
        }
    }

    /// The file a name below the root is in, and the rest of the name (empty for the file's
    /// own node); `None` if it is not below the root.
    fn split<'n>(&self, name: &'n str) -> Option<(&'n str, &'n str)> {
        let rest = name.strip_prefix(self.root.as_str())?.strip_prefix('.')?;
        Some(rest.split_once('.').unwrap_or((rest, "")))
    }

    fn file_of(&self, id: Pmid) -> Option<(&str, &FileEntry)> {
        if id.domain != DOMAIN {
            return None;
        }
        self.entries
            .iter()
            .find(|(_, e)| e.cluster == Some(id.cluster))
            .map(|(n, e)| (n.as_str(), e))
    }

    fn metric_of(&self, id: Pmid) -> Option<(&str, u32, &MetricInfo)> {
        let (name, entry) = self.file_of(id)?;
        let m = entry.names()?.by_item(id.item)?;
        Some((name, entry.cluster?, m))
    }

    pub fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        self.refresh();
        if name == self.root {
            return Err(NsError::NonLeaf);
        }
        let (file, rest) = self.split(name).ok_or(NsError::UnknownName)?;
        let entry = self.entries.get(file).ok_or(NsError::UnknownName)?;
        let (meta, cluster) = (entry.names().ok_or(NsError::UnknownName)?, entry.cluster);
        if rest.is_empty() || meta.is_interior(rest) {
            return Err(NsError::NonLeaf);
        }
        let m = meta.by_name(rest).ok_or(NsError::UnknownName)?;
        Ok(Pmid {
            domain: DOMAIN,
            cluster: cluster.ok_or(NsError::UnknownName)?,
            item: m.item,
        })
    }

    pub fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        self.refresh();
        let (file, _, m) = self.metric_of(id).ok_or(NsError::UnknownPmid)?;
        Ok(vec![format!("{}.{file}.{}", self.root, m.name)])
    }

    pub fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        self.refresh();
        if name == self.root {
            return Ok(self
                .entries
                .iter()
                .filter(|(_, e)| e.names().is_some())
                .map(|(n, _)| Child {
                    name: n.clone(),
                    leaf: false,
                })
                .collect());
        }
        let (file, rest) = self.split(name).ok_or(NsError::UnknownName)?;
        let meta = self
            .entries
            .get(file)
            .and_then(FileEntry::names)
            .ok_or(NsError::UnknownName)?;
        if rest.is_empty() || meta.is_interior(rest) {
            Ok(meta.children(rest))
        } else if meta.by_name(rest).is_some() {
            // A leaf has no children (what pmGetChildren answers for one).
            Ok(Vec::new())
        } else {
            Err(NsError::UnknownName)
        }
    }

    pub fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        self.refresh();
        let (_, cluster, m) = self.metric_of(id).ok_or(NsError::UnknownPmid)?;
        Ok(MetricDesc {
            id,
            value_type: value_type(m.mtype),
            semantics: match m.semantics {
                format::Semantics::Counter => Semantics::Counter,
                format::Semantics::Instant => Semantics::Instant,
                format::Semantics::Discrete => Semantics::Discrete,
            },
            units: m.units.clone(),
            indom: m.indom.map(|serial| indom_id(cluster, serial)),
            help: m.help.clone(),
        })
    }

    /// One value-set per id. Each file involved is read and parsed once for the call.
    pub fn fetch(&mut self, ids: &[Pmid]) -> Vec<ValueSet> {
        self.refresh();
        let mut wanted: Vec<String> = ids
            .iter()
            .filter_map(|&id| self.file_of(id).map(|(n, _)| n.to_string()))
            .collect();
        wanted.sort();
        wanted.dedup();
        // Loading may give a file new names (a new generation): ids are resolved after.
        let fresh: BTreeMap<String, Option<MmvFile>> = wanted
            .into_iter()
            .map(|n| (n.clone(), self.load(&n)))
            .collect();
        let now = now_us();
        ids.iter()
            .map(|&id| ValueSet {
                id,
                values: self.values(id, &fresh, now),
            })
            .collect()
    }

    fn values(
        &self,
        id: Pmid,
        fresh: &BTreeMap<String, Option<MmvFile>>,
        now: i64,
    ) -> Result<Vec<Value>, NsError> {
        let (file, entry) = self.file_of(id).ok_or(NsError::UnknownPmid)?;
        let m = entry
            .names()
            .and_then(|meta| meta.by_item(id.item))
            .ok_or(NsError::UnknownPmid)?;
        let full = || format!("{}.{file}.{}", self.root, m.name);
        match &entry.health {
            Health::Ok => {}
            Health::Updating => {
                return Err(NsError::Other(format!("mmv file {file} is being updated")));
            }
            Health::Broken(e) => return Err(NsError::Other(format!("mmv file {file}: {e}"))),
        }
        let f = match fresh.get(file) {
            Some(Some(f)) if Some(f.generation) == entry.meta.as_ref().map(|m| m.generation) => f,
            // Cannot happen (the file was loaded above and is healthy), but never index a
            // parse with another generation's metric numbers.
            _ => {
                return Err(NsError::Other(format!(
                    "mmv file {file} changed during the fetch"
                )));
            }
        };
        match m.mtype {
            MetricType::NoSupport => {
                return Err(NsError::Other(format!(
                    "{} is not supported by its writer",
                    full()
                )));
            }
            _ => {}
        }
        let sentinel = f.flags & FLAG_SENTINEL != 0;
        Ok(f.values_of(m.index)
            .filter(|v| !(sentinel && is_sentinel(&v.value)))
            .filter_map(|v| {
                Some(Value {
                    instance: v
                        .instance
                        .as_ref()
                        .map(|i| i.external.clone())
                        .unwrap_or_default(),
                    value: atom(&v.value, now)?,
                })
            })
            .collect())
    }
}
