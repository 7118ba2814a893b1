//! What the agent knows about one MMV file: the names and PMID items its metrics get (built
//! from a parse, with pmdammv's checks), the cluster it was given, and whether it can be read
//! right now. Also the [`Files`] trait, the agent's only access to the files, so that all of
//! this runs natively in tests with a map of byte vectors standing in for the directory.

use std::collections::{BTreeMap, HashMap};

use wasmon_guest::agent::Child;

use crate::format::{self, MetricType, MmvFile};

/// The two file operations the agent needs. The wasm build implements them with the host's
/// `mapped` interface; tests with a `HashMap` or a real directory.
pub trait Files {
    /// The regular files of the directory (any order).
    fn list(&mut self) -> Result<Vec<String>, String>;
    /// The file's current size and its first `len` bytes (all of them when `len >= size`).
    fn read(&mut self, name: &str, len: u64) -> Result<(u64, Vec<u8>), String>;
}

/// PMID fields are 12 bits of cluster and 10 of item; cluster 0 is pmdammv's own
/// (`mmv.control.*`), so files get 1 to 4095.
pub const MAX_CLUSTER: u32 = (1 << 12) - 1;
pub const MAX_ITEM: u32 = (1 << 10) - 1;
/// Hashed clusters stay below 2048: pmdammv numbers instance domains `cluster << 11 | serial`
/// in the 22 bits of a pmInDom serial, so larger clusters would share indom numbers.
pub const HASHED_CLUSTERS: u32 = (1 << 11) - 1;

/// What a quick look at a file shows: enough to tell whether it changed since the last parse.
/// Values change in place without changing any of this; the generation changes whenever the
/// writer (re)creates the file, and the size when it is truncated or replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub size: u64,
    pub generation: Option<(u64, u64)>,
}

impl Key {
    pub fn of(size: u64, head: &[u8]) -> Key {
        Key {
            size,
            generation: format::generation(head),
        }
    }
}

/// One metric of a file, under the name the agent gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricInfo {
    /// The metric's own (possibly dotted) name, below `<root>.<file>`.
    pub name: String,
    pub item: u32,
    /// Index into [`MmvFile::metrics`] of the generation the names were built from.
    pub index: usize,
    pub mtype: MetricType,
    pub semantics: format::Semantics,
    /// PCP-style, e.g. `Kbyte`, `count / sec`; empty when dimensionless.
    pub units: String,
    /// The file's instance domain serial; `None` when singular.
    pub indom: Option<u32>,
    pub help: String,
}

/// The names of one generation of a file.
#[derive(Debug, Default)]
pub struct Meta {
    pub generation: u64,
    pub metrics: Vec<MetricInfo>,
    by_name: BTreeMap<String, usize>,
    by_item: HashMap<u32, usize>,
}

/// A PMNS name component as pmdammv accepts them in names: letters, digits and `_`.
pub fn valid_component(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// A (dotted) metric name as pmdammv's `verify_metric_name` accepts it below the
/// `<root>.<file>.` prefix (letters, digits, `_` and `.`; the prefix supplies the leading
/// letter), and without empty components, which would make a name no tree can hold.
pub fn valid_name(s: &str) -> bool {
    s.split('.').all(valid_component)
}

/// A name that starts a metric name (the root): a valid name beginning with a letter.
pub fn valid_root(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic()) && valid_name(s)
}

impl Meta {
    /// The names of a parsed file. Metrics pmdammv would refuse (bad name or item) or that
    /// clash with an earlier one (same name or item, or a name that is also another's
    /// prefix) are left out; the second result says why, one line each, for the log.
    pub fn build(file: &str, f: &MmvFile) -> (Meta, Vec<String>) {
        let mut meta = Meta {
            generation: f.generation,
            ..Meta::default()
        };
        let mut skipped = Vec::new();
        for (index, m) in f.metrics.iter().enumerate() {
            let why = if !valid_name(&m.name) {
                Some("is not a valid metric name".to_string())
            } else if m.item > MAX_ITEM {
                Some(format!("has item {} (more than {MAX_ITEM})", m.item))
            } else if let Some(&other) = meta.by_item.get(&m.item) {
                let other = &meta.metrics[other].name;
                Some(format!("has item {} like {other:?}", m.item))
            } else if meta.by_name.contains_key(&m.name) {
                Some("is defined twice".to_string())
            } else if meta.is_interior(&m.name) || meta.leaf_above(&m.name) {
                Some("is both a metric and a prefix of another metric".to_string())
            } else {
                None
            };
            if let Some(why) = why {
                skipped.push(format!(
                    "mmv file {file}: metric {:?} {why}; left out",
                    m.name
                ));
                continue;
            }
            let help = m
                .shorttext
                .clone()
                .filter(|s| !s.is_empty())
                .or_else(|| {
                    m.helptext
                        .as_deref()
                        .and_then(|h| h.lines().next())
                        .map(str::to_string)
                })
                .unwrap_or_default();
            meta.by_name.insert(m.name.clone(), meta.metrics.len());
            meta.by_item.insert(m.item, meta.metrics.len());
            meta.metrics.push(MetricInfo {
                name: m.name.clone(),
                item: m.item,
                index,
                mtype: m.mtype,
                semantics: m.semantics,
                units: m.units.to_string(),
                indom: m.indom,
                help,
            });
        }
        (meta, skipped)
    }

    pub fn by_name(&self, name: &str) -> Option<&MetricInfo> {
        self.by_name.get(name).map(|&i| &self.metrics[i])
    }

    pub fn by_item(&self, item: u32) -> Option<&MetricInfo> {
        self.by_item.get(&item).map(|&i| &self.metrics[i])
    }

    /// Whether some metric's name continues `name` with a `.`.
    pub fn is_interior(&self, name: &str) -> bool {
        let dotted = format!("{name}.");
        self.by_name
            .range(dotted.clone()..)
            .next()
            .is_some_and(|(n, _)| n.starts_with(&dotted))
    }

    /// Whether a proper prefix of `name` (up to a `.`) is a metric.
    fn leaf_above(&self, name: &str) -> bool {
        name.match_indices('.')
            .any(|(at, _)| self.by_name.contains_key(&name[..at]))
    }

    /// The next name components below `prefix` (the empty string for the file's own node).
    pub fn children(&self, prefix: &str) -> Vec<Child> {
        let start = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}.")
        };
        let mut next: BTreeMap<&str, bool> = BTreeMap::new();
        for name in self.by_name.range(start.clone()..).map(|(n, _)| n) {
            let Some(rest) = name.strip_prefix(&start) else {
                break;
            };
            match rest.split_once('.') {
                Some((first, _)) => next.insert(first, false),
                None => next.insert(rest, true),
            };
        }
        next.into_iter()
            .map(|(name, leaf)| Child {
                name: name.to_string(),
                leaf,
            })
            .collect()
    }
}

/// Whether a file can be fetched from now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    Ok,
    /// Its writer is (re)initialising it (generations unequal or zero, or still empty).
    Updating,
    /// Unreadable, truncated or corrupt: the message says what is wrong.
    Broken(String),
}

/// One file of the directory.
#[derive(Debug)]
pub struct FileEntry {
    /// What the last look saw; `None` before the first.
    pub key: Option<Key>,
    /// Its PMID cluster, once it has names.
    pub cluster: Option<u32>,
    /// The header's cluster field the assignment was made for.
    pub requested: u32,
    /// The names of the last generation that parsed (kept while the file is being updated,
    /// so that its metrics answer "being updated" rather than vanishing for a moment).
    pub meta: Option<Meta>,
    pub health: Health,
    /// The last problem logged, so that a broken file is logged once per change of what is
    /// wrong with it and not at every fetch.
    pub logged: Option<String>,
}

impl Default for FileEntry {
    fn default() -> FileEntry {
        FileEntry {
            key: None,
            cluster: None,
            requested: 0,
            meta: None,
            health: Health::Updating,
            logged: None,
        }
    }
}

impl FileEntry {
    /// The metrics' names, if the file has any: a file with none is not a namespace node.
    pub fn names(&self) -> Option<&Meta> {
        self.meta
            .as_ref()
            .filter(|m| !m.metrics.is_empty() && self.cluster.is_some())
    }
}

/// FNV-1a: a fixed hash (std's is seeded per process), so that a file without a cluster in
/// its header gets the same cluster every time the agent starts.
pub fn name_hash(name: &str) -> u32 {
    name.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// The cluster for file `name` whose header asks for `requested`, given the clusters other
/// files hold. pmdammv honours a request of 1 to 4095 (and shares it if another file already
/// has it, which makes their PMIDs collide); here a request that is out of range or taken
/// falls back, like a request of 0, to a cluster hashed from the file name into 1 to 2047,
/// probing onwards past taken ones (then 2048 to 4095). The second result explains a refused
/// request, for the log.
pub fn choose_cluster(
    name: &str,
    requested: u32,
    taken: &dyn Fn(u32) -> bool,
) -> (Option<u32>, Option<String>) {
    let why = match requested {
        0 => None,
        c if c > MAX_CLUSTER => Some(format!("cluster {c} is out of range (1 to {MAX_CLUSTER})")),
        c if taken(c) => Some(format!("cluster {c} is already another file's")),
        c => return (Some(c), None),
    };
    let start = name_hash(name) % HASHED_CLUSTERS;
    let found = (0..HASHED_CLUSTERS)
        .map(|k| 1 + (start + k) % HASHED_CLUSTERS)
        .chain(HASHED_CLUSTERS + 1..=MAX_CLUSTER)
        .find(|&c| !taken(c));
    let why = why.map(|w| match found {
        Some(c) => format!("mmv file {name}: {w}; using cluster {c}"),
        None => format!("mmv file {name}: {w}; no cluster left"),
    });
    match (found, why) {
        (None, None) => (None, Some(format!("mmv file {name}: no cluster left"))),
        (found, why) => (found, why),
    }
}
