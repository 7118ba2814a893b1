//! The namespace queries, with the semantics of PCP's dynamic namespace proposal: lookup
//! (`pmLookupName`), names-of (`pmNameAll`), children (`pmGetChildrenStatus`) and traverse
//! (`pmTraversePMNS`), in local mode (no delegates: dynamic subtrees are not expanded) and
//! delegated mode (a dynamic subtree is asked of the agent for its domain). Agents are
//! checked: a PMID outside the agent's domain, a name outside its subtrees, an illegal child
//! name or an endless subtree is an error for that call only.
//!
//! Owns only the queries over `tree.rs`'s structure.

use super::delegate::Delegates;
use super::tree::{Kind, Namespace, valid_name};
use super::types::{Agent, Child, NsError, Pmid};

/// Deepest an agent's subtree may go below its dynamic root during a traversal.
pub const MAX_DYNAMIC_DEPTH: usize = 32;
/// Most names one dynamic subtree may contribute to a traversal: a misbehaving agent cannot
/// make the daemon build an unbounded list.
pub const MAX_DYNAMIC_NAMES: usize = 1 << 20;

/// Where a name falls in the tree.
enum Place {
    Node(u32, Kind),
    UnderDynamic(u32),
    Nowhere,
}

/// Result of [`Namespace::traverse`]: the leaf names found, and the dynamic subtrees whose
/// agent could not be asked (absent, trapped, or misbehaving); the rest of the traversal is
/// unaffected by them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Traversal {
    pub names: Vec<String>,
    pub failed: Vec<(String, NsError)>,
}

impl Namespace {
    /// The domain whose agent answers for `name`, if `name` is at or below a dynamic root.
    pub fn dynamic_domain_of(&self, name: &str) -> Option<u32> {
        match self.place(name) {
            Place::Node(_, kind) => match kind {
                Kind::Dynamic(d) => Some(d),
                _ => None,
            },
            Place::UnderDynamic(d) => Some(d),
            Place::Nowhere => None,
        }
    }

    fn place(&self, name: &str) -> Place {
        if name.is_empty() {
            return Place::Node(0, Kind::Interior);
        }
        if let Some(&(n, kind)) = self.by_name.get(name) {
            return Place::Node(n, kind);
        }
        // Deepest existing prefix decides: a dynamic root delegates, anything else means
        // the name does not exist.
        let mut end = name.len();
        while let Some(i) = name[..end].rfind('.') {
            end = i;
            if let Some(&(_, kind)) = self.by_name.get(&name[..end]) {
                return match kind {
                    Kind::Dynamic(d) if valid_name(name) => Place::UnderDynamic(d),
                    _ => Place::Nowhere,
                };
            }
        }
        Place::Nowhere
    }

    /// `pmLookupName` for one name.
    pub fn lookup(
        &self,
        name: &str,
        delegates: Option<&mut dyn Delegates>,
    ) -> Result<Pmid, NsError> {
        match self.place(name) {
            Place::Node(_, kind) => match kind {
                Kind::Leaf(p) => Ok(p),
                Kind::Interior | Kind::Dynamic(_) => Err(NsError::NonLeaf),
            },
            Place::UnderDynamic(d) => match delegates {
                None => Ok(Pmid::dynamic_root(d)),
                Some(del) => {
                    let p = agent(del, d)?.lookup_name(name)?;
                    if p.domain != d || !p.is_valid() || p.is_dynamic_root() {
                        return Err(NsError::Other(format!(
                            "agent for domain {d} answered PMID {p} for \"{name}\", outside its domain"
                        )));
                    }
                    Ok(p)
                }
            },
            Place::Nowhere => Err(NsError::UnknownName),
        }
    }

    /// `pmNameAll`: every name of `id`. Static names win; the agent is asked only when the
    /// tree does not know the PMID and its domain owns a dynamic subtree.
    pub fn names_of(
        &self,
        id: Pmid,
        delegates: Option<&mut dyn Delegates>,
    ) -> Result<Vec<String>, NsError> {
        if id.is_dynamic_root() || !id.is_valid() {
            return Err(NsError::UnknownPmid);
        }
        if let Some(&first) = self.by_pmid.get(&id) {
            let mut names = vec![self.nodes[first as usize].name.to_string()];
            for n in self.aliases.get(&id).into_iter().flatten() {
                names.push(self.nodes[*n as usize].name.to_string());
            }
            return Ok(names);
        }
        let Some(del) = delegates else {
            return Err(NsError::UnknownPmid);
        };
        if !self.dynamic.contains_key(&id.domain) {
            return Err(NsError::UnknownPmid);
        }
        let names = agent(del, id.domain)?.names_of(id)?;
        // An agent may only name metrics inside its own subtrees.
        let names: Vec<String> = names
            .into_iter()
            .filter(|n| matches!(self.place(n), Place::UnderDynamic(d) if d == id.domain))
            .collect();
        if names.is_empty() {
            Err(NsError::UnknownPmid)
        } else {
            Ok(names)
        }
    }

    /// `pmGetChildrenStatus`: the children of `name` (root: ""), with leaf status.
    pub fn children(
        &self,
        name: &str,
        delegates: Option<&mut dyn Delegates>,
    ) -> Result<Vec<Child>, NsError> {
        match self.place(name) {
            Place::Node(n, _) => {
                let node = &self.nodes[n as usize];
                match node.kind {
                    Kind::Interior => Ok(node
                        .children
                        .iter()
                        .map(|c| {
                            let c = &self.nodes[*c as usize];
                            Child {
                                name: c.last().to_string(),
                                leaf: matches!(c.kind, Kind::Leaf(_)),
                            }
                        })
                        .collect()),
                    Kind::Leaf(_) => Ok(Vec::new()),
                    Kind::Dynamic(d) => match delegates {
                        None => Ok(Vec::new()),
                        Some(del) => agent_children(agent(del, d)?, name),
                    },
                }
            }
            Place::UnderDynamic(d) => match delegates {
                None => Err(NsError::UnknownName),
                Some(del) => agent_children(agent(del, d)?, name),
            },
            Place::Nowhere => Err(NsError::UnknownName),
        }
    }

    /// `pmTraversePMNS`: every leaf name at or below `prefix` (root: ""), in tree order.
    /// Local mode skips dynamic subtrees; delegated mode expands them through their agents,
    /// recording (not propagating) an agent's failure.
    pub fn traverse(
        &self,
        prefix: &str,
        mut delegates: Option<&mut dyn Delegates>,
    ) -> Result<Traversal, NsError> {
        let mut out = Traversal::default();
        match self.place(prefix) {
            Place::Node(start, _) => {
                let mut stack = vec![start];
                while let Some(n) = stack.pop() {
                    let node = &self.nodes[n as usize];
                    match node.kind {
                        Kind::Leaf(_) => out.names.push(node.name.to_string()),
                        Kind::Interior => stack.extend(node.children.iter().rev()),
                        Kind::Dynamic(d) => {
                            if let Some(del) = delegates.as_deref_mut() {
                                let before = out.names.len();
                                let res = agent(del, d)
                                    .and_then(|a| expand(a, &node.name, 0, before, &mut out.names));
                                if let Err(e) = res {
                                    out.names.truncate(before);
                                    out.failed.push((node.name.to_string(), e));
                                }
                            }
                        }
                    }
                }
            }
            Place::UnderDynamic(d) => {
                let Some(del) = delegates else {
                    return Err(NsError::UnknownName);
                };
                let a = agent(del, d)?;
                let kids = match agent_children(a, prefix) {
                    Ok(k) => k,
                    // Some agents refuse to list a leaf's children: a leaf is still itself.
                    Err(e) => match a.lookup_name(prefix) {
                        Ok(_) => Vec::new(),
                        Err(_) => return Err(e),
                    },
                };
                if kids.is_empty() {
                    // A leaf (or nothing): PCP reports the prefix itself when it is a leaf.
                    a.lookup_name(prefix)?;
                    out.names.push(prefix.to_string());
                } else {
                    expand(a, prefix, 0, 0, &mut out.names)?;
                }
            }
            Place::Nowhere => return Err(NsError::UnknownName),
        }
        Ok(out)
    }
}

/// A child name an agent may report: one component.
fn valid_component(c: &str) -> bool {
    !c.is_empty() && !c.contains('.') && valid_name(c)
}

fn agent(del: &mut dyn Delegates, domain: u32) -> Result<&mut dyn Agent, NsError> {
    del.agent(domain).ok_or(NsError::NoAgent)
}

fn agent_children(a: &mut dyn Agent, name: &str) -> Result<Vec<Child>, NsError> {
    let kids = a.children(name)?;
    if let Some(bad) = kids.iter().find(|c| !valid_component(&c.name)) {
        return Err(NsError::Other(format!(
            "agent reported an illegal child name {:?} of \"{name}\"",
            bad.name
        )));
    }
    Ok(kids)
}

/// Appends every leaf below `name` as the agent describes it.
fn expand(
    a: &mut dyn Agent,
    name: &str,
    depth: usize,
    base: usize,
    out: &mut Vec<String>,
) -> Result<(), NsError> {
    if depth >= MAX_DYNAMIC_DEPTH {
        return Err(NsError::Other(format!(
            "agent subtree deeper than {MAX_DYNAMIC_DEPTH} levels at \"{name}\""
        )));
    }
    for c in agent_children(a, name)? {
        let full = format!("{name}.{}", c.name);
        if c.leaf {
            if out.len() - base >= MAX_DYNAMIC_NAMES {
                return Err(NsError::Other(format!(
                    "agent subtree larger than {MAX_DYNAMIC_NAMES} names"
                )));
            }
            out.push(full);
        } else {
            expand(a, &full, depth + 1, base, out)?;
        }
    }
    Ok(())
}
