//! The namespace of an agent whose names are a table: every leaf with its PMID, and the
//! non-leaf names between them, answered as PCP's dynamic-namespace callbacks want
//! (`lookup-name`, `names-of`, `children`). An agent whose names never change builds one at
//! `configure`; the bundled `/sys` agents do.

use std::collections::BTreeMap;

use crate::agent::{Child, NsError, Pmid};

/// Leaves by full dotted name.
#[derive(Debug, Default, Clone)]
pub struct Names {
    leaves: BTreeMap<String, Pmid>,
}

impl Names {
    /// A table of `(full name, PMID)` leaves.
    pub fn new(leaves: impl IntoIterator<Item = (String, Pmid)>) -> Names {
        Names {
            leaves: leaves.into_iter().collect(),
        }
    }

    /// Every leaf, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Pmid)> {
        self.leaves.iter().map(|(n, p)| (n.as_str(), *p))
    }

    /// Leaves under `prefix` (itself, if a leaf), in name order.
    fn under<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, Pmid)> + 'a {
        self.leaves
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(move |(n, _)| n.starts_with(prefix))
            .filter(move |(n, _)| n.len() == prefix.len() || n.as_bytes()[prefix.len()] == b'.')
            .map(|(n, p)| (n.as_str(), *p))
    }

    /// The PMID of a leaf; `NonLeaf` for a name that only prefixes others.
    pub fn lookup(&self, name: &str) -> Result<Pmid, NsError> {
        if let Some(id) = self.leaves.get(name) {
            return Ok(*id);
        }
        match self.under(name).next() {
            Some(_) => Err(NsError::NonLeaf),
            None => Err(NsError::UnknownName),
        }
    }

    /// Every name of `id`.
    pub fn names_of(&self, id: Pmid) -> Result<Vec<String>, NsError> {
        let names: Vec<String> = self
            .leaves
            .iter()
            .filter(|(_, p)| **p == id)
            .map(|(n, _)| n.clone())
            .collect();
        if names.is_empty() {
            Err(NsError::UnknownPmid)
        } else {
            Ok(names)
        }
    }

    /// The children of a non-leaf name (empty for a leaf).
    pub fn children(&self, name: &str) -> Result<Vec<Child>, NsError> {
        let mut out: Vec<Child> = Vec::new();
        let mut found = false;
        for (leaf, _) in self.under(name) {
            found = true;
            let Some(rest) = leaf.get(name.len() + 1..) else {
                continue;
            };
            let (child, is_leaf) = match rest.split_once('.') {
                Some((c, _)) => (c, false),
                None => (rest, true),
            };
            match out.last_mut() {
                Some(last) if last.name == child => last.leaf &= is_leaf,
                _ => out.push(Child {
                    name: child.to_string(),
                    leaf: is_leaf,
                }),
            }
        }
        if found {
            Ok(out)
        } else {
            Err(NsError::UnknownName)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pmid(item: u32) -> Pmid {
        Pmid {
            domain: 91,
            cluster: 1,
            item,
        }
    }

    #[test]
    fn leaves_non_leaves_and_children() {
        let names = Names::new([
            ("ib.port.in.bytes".to_string(), pmid(0)),
            ("ib.port.in.errors.drop".to_string(), pmid(4)),
            ("ib.port.out.bytes".to_string(), pmid(2)),
            ("ib.portx".to_string(), pmid(9)),
        ]);
        assert_eq!(names.lookup("ib.port.in.bytes"), Ok(pmid(0)));
        assert_eq!(names.lookup("ib.port"), Err(NsError::NonLeaf));
        assert_eq!(names.lookup("ib.po"), Err(NsError::UnknownName));
        assert_eq!(
            names.names_of(pmid(2)),
            Ok(vec!["ib.port.out.bytes".into()])
        );
        let kids = |n: &str| {
            names
                .children(n)
                .unwrap()
                .into_iter()
                .map(|c| (c.name, c.leaf))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kids("ib.port.in"),
            [("bytes".to_string(), true), ("errors".to_string(), false)]
        );
        assert_eq!(
            kids("ib"),
            [("port".to_string(), false), ("portx".to_string(), true)]
        );
        assert_eq!(kids("ib.portx"), []);
        assert_eq!(names.children("nope"), Err(NsError::UnknownName));
    }
}
