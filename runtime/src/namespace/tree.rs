//! The loaded PMNS: a tree of names built from one or more pmns texts (or programmatically).
//!
//! Speed: every node's full dotted name is one key of a single hash map, so a static lookup
//! is one hash and one compare whatever the depth; names not in the map are resolved by
//! probing their prefixes, deepest first, to find a dynamic root (see `query.rs`).
//!
//! Owns the tree, its building and its checks; the queries are `query.rs`'s; the agents are
//! the daemon's (see `delegate.rs`).

use super::pmns::{self, PmnsError, Subtree};
use super::types::Pmid;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Interior,
    Leaf(Pmid),
    /// Root of a subtree the agent for this domain resolves.
    Dynamic(u32),
}

#[derive(Debug)]
pub(super) struct Node {
    /// Full dotted name ("" for the root).
    pub(super) name: Arc<str>,
    pub(super) kind: Kind,
    pub(super) children: Vec<u32>,
}

impl Node {
    pub(super) fn last(&self) -> &str {
        self.name.rsplit('.').next().unwrap_or("")
    }
}

/// A loaded PMNS. Immutable once built, so it can be shared between threads.
#[derive(Debug)]
pub struct Namespace {
    pub(super) nodes: Vec<Node>,
    /// Full name → (node, kind): the kind is kept beside the index so a hit needs no second
    /// cache miss into `nodes` (a 1M-leaf lookup is bound by cache misses, not hashing).
    pub(super) by_name: HashMap<Arc<str>, (u32, Kind)>,
    /// First name of each leaf PMID; further names (aliases) in `aliases`.
    pub(super) by_pmid: HashMap<Pmid, u32>,
    pub(super) aliases: HashMap<Pmid, Vec<u32>>,
    /// Domain → its dynamic roots (several subtrees may belong to one agent).
    pub(super) dynamic: BTreeMap<u32, Vec<u32>>,
    pub(super) leaves: usize,
}

/// Builds a [`Namespace`] from pmns texts and/or individual names.
#[derive(Default)]
pub struct NamespaceBuilder {
    subtrees: Vec<Subtree>,
    extra: Vec<(String, Pmid)>,
    allow_duplicate_pmids: bool,
}

impl NamespaceBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// PCP's `dupok`: let one PMID have several names (aliases). Off by default: duplicate
    /// PMIDs are then an error, except for dynamic roots.
    pub fn allow_duplicate_pmids(mut self, yes: bool) -> Self {
        self.allow_duplicate_pmids = yes;
        self
    }

    /// Adds one pmns text; `file` labels errors. Texts are merged: `root` (or any path) may be
    /// defined in several of them, and their entries are united.
    pub fn pmns(mut self, file: &str, text: &str) -> Result<Self, PmnsError> {
        self.subtrees.extend(pmns::parse(file, text)?);
        Ok(self)
    }

    /// Adds one name (leaf or, with a [`Pmid::dynamic_root`], a dynamic root), creating the
    /// non-terminals above it.
    pub fn name(mut self, name: &str, pmid: Pmid) -> Self {
        self.extra.push((name.to_string(), pmid));
        self
    }

    /// Adds many names at once (cheaper than chaining [`Self::name`]).
    pub fn names<I: IntoIterator<Item = (String, Pmid)>>(mut self, names: I) -> Self {
        self.extra.extend(names);
        self
    }

    pub fn build(self) -> Result<Namespace, PmnsError> {
        let mut ns = Namespace::empty();
        let ordered = order_subtrees(&self.subtrees)?;
        for (name, pmid, file, line) in ordered {
            let at = |reason: String| PmnsError {
                file: file.clone(),
                line,
                reason,
            };
            ns.insert(&name, pmid).map_err(at)?;
        }
        for (name, pmid) in &self.extra {
            if !valid_name(name) {
                return Err(PmnsError {
                    file: String::new(),
                    line: 0,
                    reason: format!("illegal metric name {name:?}"),
                });
            }
            let pmid = Some(*pmid);
            ns.insert(name, pmid).map_err(|reason| PmnsError {
                file: String::new(),
                line: 0,
                reason,
            })?;
        }
        ns.index_pmids(self.allow_duplicate_pmids)?;
        Ok(ns)
    }
}

/// Joins subtree definitions into (full name, pmid-or-interior) in tree order, checking that
/// every non-terminal is defined, nothing is disconnected, and merged definitions agree.
type Ordered = Vec<(String, Option<Pmid>, String, usize)>;

fn order_subtrees(subtrees: &[Subtree]) -> Result<Ordered, PmnsError> {
    let mut out = Vec::new();
    if subtrees.is_empty() {
        return Ok(out);
    }
    let mut by_path: HashMap<&str, Vec<&Subtree>> = HashMap::new();
    for s in subtrees {
        by_path.entry(s.path.as_str()).or_default().push(s);
    }
    if !by_path.contains_key("root") {
        let file = subtrees[0].file.clone();
        return Err(PmnsError {
            file,
            line: 0,
            reason: "No name space entry for \"root\"".into(),
        });
    }
    let mut used: HashMap<&str, bool> = by_path.keys().map(|k| (*k, false)).collect();
    // Depth-first with an explicit stack (paths only grow, so no cycles are possible).
    let mut stack = vec!["root".to_string()];
    while let Some(path) = stack.pop() {
        let defs = &by_path[path.as_str()];
        *used.get_mut(path.as_str()).expect("known path") = true;
        let mut seen: HashMap<&str, (Option<Pmid>, &str, usize)> = HashMap::new();
        let mut nonterminals = Vec::new();
        for def in defs {
            for e in &def.entries {
                let full = if path == "root" {
                    e.name.clone()
                } else {
                    format!("{path}.{}", e.name)
                };
                if let Some((pmid, file, line)) = seen.get(e.name.as_str()) {
                    if *pmid != e.pmid {
                        let show = |p: &Option<Pmid>| {
                            p.map_or("non-terminal".to_string(), |p| p.to_string())
                        };
                        let reason = format!(
                            "conflicting definitions of \"{full}\": {} ({file}:{line}) and {}",
                            show(pmid),
                            show(&e.pmid)
                        );
                        return Err(PmnsError {
                            file: def.file.clone(),
                            line: e.line,
                            reason,
                        });
                    }
                    continue;
                }
                seen.insert(e.name.as_str(), (e.pmid, def.file.as_str(), e.line));
                match e.pmid {
                    Some(_) if by_path.contains_key(full.as_str()) => {
                        let reason = format!("\"{full}\" has a PMID and also a subtree definition");
                        return Err(PmnsError {
                            file: def.file.clone(),
                            line: e.line,
                            reason,
                        });
                    }
                    None if !by_path.contains_key(full.as_str()) => {
                        let reason = format!(
                            "Cannot find definition for non-terminal node \"{full}\" in name space"
                        );
                        return Err(PmnsError {
                            file: def.file.clone(),
                            line: e.line,
                            reason,
                        });
                    }
                    None => nonterminals.push(full.clone()),
                    Some(_) => {}
                }
                out.push((full, e.pmid, def.file.clone(), e.line));
            }
        }
        // Reverse so the stack pops them in definition order.
        stack.extend(nonterminals.into_iter().rev());
    }
    if let Some((path, _)) = used.iter().filter(|(_, u)| !**u).min_by_key(|(p, _)| **p) {
        let def = by_path[path][0];
        let reason = format!("Disconnected subtree (\"{path}\") in name space");
        return Err(PmnsError {
            file: def.file.clone(),
            line: def.line,
            reason,
        });
    }
    Ok(out)
}

pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.split('.').all(|c| {
            let b = c.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphabetic()
                && b.iter().all(|x| x.is_ascii_alphanumeric() || *x == b'_')
        })
}

impl Namespace {
    pub fn builder() -> NamespaceBuilder {
        NamespaceBuilder::new()
    }

    /// A namespace from pmns texts, `(file label, text)` each, duplicate PMIDs refused.
    pub fn from_pmns(texts: &[(&str, &str)]) -> Result<Namespace, PmnsError> {
        let mut b = NamespaceBuilder::new();
        for (file, text) in texts {
            b = b.pmns(file, text)?;
        }
        b.build()
    }

    fn empty() -> Namespace {
        let root: Arc<str> = Arc::from("");
        Namespace {
            nodes: vec![Node {
                name: root,
                kind: Kind::Interior,
                children: Vec::new(),
            }],
            by_name: HashMap::new(),
            by_pmid: HashMap::new(),
            aliases: HashMap::new(),
            dynamic: BTreeMap::new(),
            leaves: 0,
        }
    }

    /// Inserts `name` (interior when `pmid` is None), creating missing ancestors.
    fn insert(&mut self, name: &str, pmid: Option<Pmid>) -> Result<u32, String> {
        let kind = match pmid {
            None => Kind::Interior,
            Some(p) if p.is_dynamic_root() => Kind::Dynamic(p.cluster),
            Some(p) if p.is_valid() && p.domain <= super::types::MAX_DOMAIN => Kind::Leaf(p),
            Some(p) => return Err(format!("illegal PMID {p:?} for \"{name}\"")),
        };
        if let Some(&(n, have)) = self.by_name.get(name) {
            if have == kind {
                return Ok(n);
            }
            return Err(format!(
                "\"{name}\" defined twice: as {} and as {}",
                show(have),
                show(kind)
            ));
        }
        let parent = match name.rsplit_once('.') {
            Some((up, _)) => self.insert(up, None)?,
            None => 0,
        };
        let pk = self.nodes[parent as usize].kind;
        if pk != Kind::Interior {
            return Err(format!(
                "\"{name}\" is below \"{}\", which is {}",
                self.nodes[parent as usize].name,
                show(pk)
            ));
        }
        let id = self.nodes.len() as u32;
        let full: Arc<str> = Arc::from(name);
        self.nodes.push(Node {
            name: full.clone(),
            kind,
            children: Vec::new(),
        });
        self.nodes[parent as usize].children.push(id);
        self.by_name.insert(full, (id, kind));
        Ok(id)
    }

    fn index_pmids(&mut self, dupok: bool) -> Result<(), PmnsError> {
        self.by_pmid.reserve(self.nodes.len());
        for (i, node) in self.nodes.iter().enumerate() {
            match node.kind {
                Kind::Leaf(p) => {
                    self.leaves += 1;
                    if let Some(&first) = self.by_pmid.get(&p) {
                        if !dupok {
                            let reason = format!(
                                "Duplicate metric id ({p}) in name space for metrics \"{}\" and \"{}\"",
                                node.name, self.nodes[first as usize].name
                            );
                            return Err(PmnsError {
                                file: String::new(),
                                line: 0,
                                reason,
                            });
                        }
                        self.aliases.entry(p).or_default().push(i as u32);
                    } else {
                        self.by_pmid.insert(p, i as u32);
                    }
                }
                Kind::Dynamic(d) => self.dynamic.entry(d).or_default().push(i as u32),
                Kind::Interior => {}
            }
        }
        Ok(())
    }

    /// Number of (static) leaves.
    pub fn len(&self) -> usize {
        self.leaves
    }

    pub fn is_empty(&self) -> bool {
        self.leaves == 0 && self.dynamic.is_empty()
    }

    /// Every dynamic root: (full name, agent domain), in tree order.
    pub fn dynamic_roots(&self) -> Vec<(&str, u32)> {
        let mut v: Vec<(u32, &str, u32)> = self
            .dynamic
            .iter()
            .flat_map(|(d, ns)| {
                ns.iter()
                    .map(move |n| (*n, &*self.nodes[*n as usize].name, *d))
            })
            .collect();
        v.sort_unstable();
        v.into_iter().map(|(_, n, d)| (n, d)).collect()
    }
}

fn show(k: Kind) -> String {
    match k {
        Kind::Interior => "a non-terminal".into(),
        Kind::Leaf(p) => format!("leaf {p}"),
        Kind::Dynamic(d) => format!("dynamic root {d}.*.*"),
    }
}
