//! The namespace of an agent whose names are a table: every leaf with its PMID, and the
//! non-leaf names between them, answered as PCP's dynamic-namespace callbacks want
//! (`lookup-name`, `names-of`, `children`). An agent whose names never change builds one at
//! `configure`; the bundled `/sys` agents do.

use std::collections::BTreeMap;

use crate::agent::{Child, MetricDesc, NsError, Pmid, Semantics, Value, ValueSet, ValueType};

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

/// One metric of an agent whose metrics are a fixed table.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Full dotted name.
    pub name: &'static str,
    pub cluster: u32,
    pub item: u32,
    pub value_type: ValueType,
    pub semantics: Semantics,
    /// Units as PCP writes them (`byte`, `count`, `millidegC`...; empty when none).
    pub units: &'static str,
    /// Instance domain serial, `None` for a singular metric.
    pub indom: Option<u32>,
    pub help: &'static str,
}

impl Metric {
    /// One row of an agent's metric table, every field in the struct's order, so a table of
    /// `static` rows reads as PCP's `pmdaMetric` tables do (one line a metric).
    ///
    /// ```
    /// use wasmon_guest::agent::{Pmid, Semantics, ValueType};
    /// use wasmon_guest::names::{Catalog, Metric};
    ///
    /// const ZONE: Option<u32> = Some(0);
    /// static METRICS: &[Metric] = &[
    ///     Metric::new("demo.zone.temp", 0, 0, ValueType::Double, Semantics::Instant, "", ZONE, "Temperature of a zone, in degrees Celsius"),
    ///     Metric::new("demo.resets", 1, 0, ValueType::Uint64, Semantics::Counter, "count", None, "Times the sensors were reset"),
    /// ];
    /// let catalog = Catalog::new(250, METRICS);
    /// let id = Pmid { domain: 250, cluster: 1, item: 0 };
    /// assert_eq!(catalog.metric(id).map(|m| m.name), Some("demo.resets"));
    /// ```
    #[allow(clippy::too_many_arguments)] // one field each: a row of the table
    pub const fn new(
        name: &'static str,
        cluster: u32,
        item: u32,
        value_type: ValueType,
        semantics: Semantics,
        units: &'static str,
        indom: Option<u32>,
        help: &'static str,
    ) -> Metric {
        Metric {
            name,
            cluster,
            item,
            value_type,
            semantics,
            units,
            indom,
            help,
        }
    }
}

/// An agent's metrics: names, PMIDs and descriptors from one table.
#[derive(Debug, Clone)]
pub struct Catalog {
    domain: u32,
    names: Names,
    metrics: &'static [Metric],
}

impl Catalog {
    pub fn new(domain: u32, metrics: &'static [Metric]) -> Catalog {
        let names = Names::new(metrics.iter().map(|m| {
            (
                m.name.to_string(),
                Pmid {
                    domain,
                    cluster: m.cluster,
                    item: m.item,
                },
            )
        }));
        Catalog {
            domain,
            names,
            metrics,
        }
    }

    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The metric of a PMID of this domain.
    pub fn metric(&self, id: Pmid) -> Option<&'static Metric> {
        if id.domain != self.domain {
            return None;
        }
        self.metrics
            .iter()
            .find(|m| m.cluster == id.cluster && m.item == id.item)
    }

    /// One value set per id, in order: `values` of each metric of this catalog (called once
    /// per id), `UnknownPmid` for any other id. The body of an agent's `fetch`.
    pub fn value_sets(
        &self,
        ids: &[Pmid],
        mut values: impl FnMut(&'static Metric) -> Vec<Value>,
    ) -> Vec<ValueSet> {
        ids.iter()
            .map(|&id| ValueSet {
                id,
                values: self.metric(id).map(&mut values).ok_or(NsError::UnknownPmid),
            })
            .collect()
    }

    pub fn describe(&self, id: Pmid) -> Result<MetricDesc, NsError> {
        let m = self.metric(id).ok_or(NsError::UnknownPmid)?;
        Ok(MetricDesc {
            id,
            value_type: m.value_type,
            semantics: m.semantics,
            units: m.units.into(),
            indom: m.indom,
            help: m.help.into(),
        })
    }
}

/// Implements [`crate::agent::Agent`]'s namespace callbacks and `describe` for a type with a
/// `catalog: Catalog` field; the type implements `configure` and `fetch` itself in
/// `impl ... { fn configure ... fn fetch ... }` passed as the second argument.
#[macro_export]
macro_rules! catalog_agent {
    ($ty:ty, { $($rest:tt)* }) => {
        impl $crate::agent::Agent for $ty {
            fn lookup_name(&mut self, name: &str) -> Result<$crate::agent::Pmid, $crate::agent::NsError> {
                self.catalog.names().lookup(name)
            }
            fn names_of(&mut self, id: $crate::agent::Pmid) -> Result<Vec<String>, $crate::agent::NsError> {
                self.catalog.names().names_of(id)
            }
            fn children(&mut self, name: &str) -> Result<Vec<$crate::agent::Child>, $crate::agent::NsError> {
                self.catalog.names().children(name)
            }
            fn describe(&mut self, id: $crate::agent::Pmid) -> Result<$crate::agent::MetricDesc, $crate::agent::NsError> {
                self.catalog.describe(id)
            }
            $($rest)*
        }
    };
}

/// The whole agent, exported, for a type that reads a tree as the sandbox shows it (its grants
/// map `/sys`, `/proc`): it has a `catalog: Catalog` field (the namespace and `describe`, as
/// [`catalog_agent!`]), an inherent `at(root: &Path) -> Self` (`configure` takes no
/// parameters and reads `/`; natively, tests and benches read a captured tree) and an
/// inherent `fetch_ids(&mut self or &self, ids: &[Pmid]) -> Vec<ValueSet>`.
#[macro_export]
macro_rules! tree_agent {
    ($ty:ty) => {
        $crate::catalog_agent!($ty, {
            fn configure(_params: &$crate::Params) -> Result<Self, String> {
                Ok(<$ty>::at(std::path::Path::new("/")))
            }

            fn fetch(&mut self, ids: &[$crate::agent::Pmid]) -> Vec<$crate::agent::ValueSet> {
                self.fetch_ids(ids)
            }
        });
        $crate::export_agent!($ty);
    };
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
