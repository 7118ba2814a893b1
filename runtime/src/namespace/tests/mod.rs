//! The seed's table, row by row, in local and delegated mode, with a small agent for domain
//! 44 (the seed's foo PMDA); loading rules and misbehaving agents are in `tests_loading.rs`.
//! Test-only.

use super::*;
use std::collections::HashMap;

const SEED: &str =
    "root {\n    foo\n}\n\nfoo {\n\tversion\t44:0:1\n\tcount\t\t44:*:*\n\tmemory\t44:0:2\n}\n";

fn pmid(s: &str) -> Pmid {
    s.parse().unwrap()
}

/// An agent answering from a fixed list of (full name, PMID), like a PMDA_INTERFACE_4 PMDA
/// using the standard pmdaTree helpers.
struct ListAgent {
    names: Vec<(String, Pmid)>,
    calls: usize,
}

impl ListAgent {
    fn new(names: &[(&str, &str)]) -> Self {
        ListAgent {
            names: names
                .iter()
                .map(|(n, p)| (n.to_string(), pmid(p)))
                .collect(),
            calls: 0,
        }
    }

    /// The seed's foo PMDA.
    fn foo() -> Self {
        Self::new(&[
            ("foo.count.ops", "44:1:0"),
            ("foo.count.errs", "44:1:1"),
            ("foo.count.numcount", "44:0:27"),
        ])
    }
}

impl Agent for ListAgent {
    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        self.calls += 1;
        if let Some((_, p)) = self.names.iter().find(|(n, _)| n == name) {
            return Ok(*p);
        }
        let below = format!("{name}.");
        if self.names.iter().any(|(n, _)| n.starts_with(&below)) {
            Err(NsError::NonLeaf)
        } else {
            Err(NsError::UnknownName)
        }
    }
    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        self.calls += 1;
        let v: Vec<String> = self
            .names
            .iter()
            .filter(|(_, p)| *p == id)
            .map(|(n, _)| n.clone())
            .collect();
        if v.is_empty() {
            Err(NsError::UnknownPmid)
        } else {
            Ok(v)
        }
    }
    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        self.calls += 1;
        let below = format!("{name}.");
        let mut out: Vec<Child> = Vec::new();
        for (n, _) in &self.names {
            if let Some(rest) = n.strip_prefix(&below) {
                let (first, leaf) = match rest.split_once('.') {
                    Some((f, _)) => (f, false),
                    None => (rest, true),
                };
                if !out.iter().any(|c| c.name == first) {
                    out.push(Child {
                        name: first.to_string(),
                        leaf,
                    });
                }
            }
        }
        if out.is_empty() && !self.names.iter().any(|(n, _)| n == name) {
            return Err(NsError::UnknownName);
        }
        Ok(out)
    }
    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        Err(if self.names.iter().any(|(_, p)| *p == id) {
            NsError::Other("no desc".into())
        } else {
            NsError::UnknownPmid
        })
    }
    fn fetch(&mut self, ids: &[Pmid]) -> Vec<(Pmid, Result<Values, NsError>)> {
        ids.iter()
            .map(|id| (*id, Ok(vec![(String::new(), 1.0.into())])))
            .collect()
    }
}

/// An agent that answers `error` to everything but `children`, which it lists under every
/// name when given: a guest that trapped ([`Failing::trapped`]), or an endless subtree.
struct Failing {
    error: NsError,
    children: Option<&'static [(&'static str, bool)]>,
}

impl Failing {
    /// The host answers NoAgent to everything for a guest that trapped.
    fn trapped() -> Self {
        Failing {
            error: NsError::NoAgent,
            children: None,
        }
    }
}

impl Agent for Failing {
    fn lookup_name(&mut self, _: &str) -> Result<Pmid, NsError> {
        Err(self.error.clone())
    }
    fn names_of(&mut self, _: Pmid) -> Result<Vec<String>, NsError> {
        Err(self.error.clone())
    }
    fn children(&mut self, _: &str) -> Result<Vec<Child>, NsError> {
        self.children.map(kids).ok_or_else(|| self.error.clone())
    }
    fn describe(&mut self, _: Pmid) -> Result<MetricDesc, NsError> {
        Err(self.error.clone())
    }
    fn fetch(&mut self, ids: &[Pmid]) -> Vec<(Pmid, Result<Values, NsError>)> {
        ids.iter()
            .map(|id| (*id, Err(self.error.clone())))
            .collect()
    }
}

fn seed() -> Namespace {
    Namespace::from_pmns(&[("seed", SEED)]).unwrap()
}

fn agents(list: Vec<(u32, Box<dyn Agent>)>) -> HashMap<u32, Box<dyn Agent>> {
    list.into_iter().collect()
}

fn foo_agents() -> HashMap<u32, Box<dyn Agent>> {
    agents(vec![(44, Box::new(ListAgent::foo()))])
}

fn kids(list: &[(&str, bool)]) -> Vec<Child> {
    list.iter()
        .map(|(n, l)| Child {
            name: n.to_string(),
            leaf: *l,
        })
        .collect()
}

// ---- pmLookupName ----

#[test]
fn lookup_local() {
    let ns = seed();
    assert_eq!(ns.lookup("foo.version", None), Ok(pmid("44.0.1")));
    assert_eq!(ns.lookup("foo.memory", None), Ok(pmid("44.0.2")));
    assert_eq!(ns.lookup("foo.count", None), Err(NsError::NonLeaf));
    assert_eq!(ns.lookup("foo", None), Err(NsError::NonLeaf));
    assert_eq!(ns.lookup("foo.count.ops", None), Ok(Pmid::dynamic_root(44)));
    assert_eq!(
        ns.lookup("foo.count.anything.else", None),
        Ok(Pmid::dynamic_root(44))
    );
    assert_eq!(
        ns.lookup("foo.count.ops", None).unwrap().to_string(),
        "44.*.*"
    );
    assert_eq!(
        ns.lookup("foo.version.below", None),
        Err(NsError::UnknownName)
    );
    assert_eq!(ns.lookup("bar", None), Err(NsError::UnknownName));
    assert_eq!(ns.lookup("foo.count..x", None), Err(NsError::UnknownName));
}

#[test]
fn lookup_delegated() {
    let ns = seed();
    let mut a = foo_agents();
    assert_eq!(ns.lookup("foo.count", Some(&mut a)), Err(NsError::NonLeaf));
    assert_eq!(ns.lookup("foo.count.ops", Some(&mut a)), Ok(pmid("44.1.0")));
    assert_eq!(
        ns.lookup("foo.count.errs", Some(&mut a)),
        Ok(pmid("44.1.1"))
    );
    assert_eq!(
        ns.lookup("foo.count.numcount", Some(&mut a)),
        Ok(pmid("44.0.27"))
    );
    assert_eq!(
        ns.lookup("foo.count.anything.else", Some(&mut a)),
        Err(NsError::UnknownName)
    );
    assert_eq!(ns.lookup("foo.version", Some(&mut a)), Ok(pmid("44.0.1")));
    assert_eq!(ns.lookup("nope", Some(&mut a)), Err(NsError::UnknownName));
}

// ---- pmNameID / pmNameAll ----

#[test]
fn names_of_local() {
    let ns = seed();
    assert_eq!(
        ns.names_of(pmid("44.0.1"), None),
        Ok(vec!["foo.version".to_string()])
    );
    assert_eq!(ns.names_of(pmid("44.1.0"), None), Err(NsError::UnknownPmid));
    assert_eq!(
        ns.names_of(Pmid::dynamic_root(44), None),
        Err(NsError::UnknownPmid)
    );
}

#[test]
fn names_of_delegated() {
    let ns = seed();
    let mut a = foo_agents();
    assert_eq!(
        ns.names_of(pmid("44.1.0"), Some(&mut a)),
        Ok(vec!["foo.count.ops".to_string()])
    );
    assert_eq!(
        ns.names_of(pmid("44.0.27"), Some(&mut a)),
        Ok(vec!["foo.count.numcount".to_string()])
    );
    assert_eq!(
        ns.names_of(Pmid::dynamic_root(44), Some(&mut a)),
        Err(NsError::UnknownPmid)
    );
    assert_eq!(
        ns.names_of(pmid("44.7.7"), Some(&mut a)),
        Err(NsError::UnknownPmid)
    );
    // No dynamic root for domain 45: the agent is not even asked.
    assert_eq!(
        ns.names_of(pmid("45.0.0"), Some(&mut a)),
        Err(NsError::UnknownPmid)
    );
    // Static names are answered without the agent.
    let mut trapped = agents(vec![(44, Box::new(Failing::trapped()))]);
    assert_eq!(
        ns.names_of(pmid("44.0.1"), Some(&mut trapped)),
        Ok(vec!["foo.version".to_string()])
    );
}

// ---- pmGetChildren / pmGetChildrenStatus ----

#[test]
fn children_local() {
    let ns = seed();
    assert_eq!(
        ns.children("foo", None),
        Ok(kids(&[
            ("version", true),
            ("count", false),
            ("memory", true)
        ]))
    );
    assert_eq!(ns.children("", None), Ok(kids(&[("foo", false)])));
    assert_eq!(ns.children("foo.count", None), Ok(vec![]));
    assert_eq!(ns.children("foo.version", None), Ok(vec![]));
}

#[test]
fn children_delegated() {
    let ns = seed();
    let mut a = foo_agents();
    assert_eq!(
        ns.children("foo", Some(&mut a)),
        Ok(kids(&[
            ("version", true),
            ("count", false),
            ("memory", true)
        ]))
    );
    assert_eq!(
        ns.children("foo.count", Some(&mut a)),
        Ok(kids(&[("ops", true), ("errs", true), ("numcount", true)]))
    );
    assert_eq!(ns.children("foo.count.ops", Some(&mut a)), Ok(vec![]));
}

/// Names neither the PMNS nor an agent knows (without agents, nothing below a dynamic root
/// is known either).
#[test]
fn children_and_traverse_of_unknown_names_are_errors() {
    let ns = seed();
    let mut a = foo_agents();
    for name in ["foo.count.ops", "zzz", "x"] {
        assert_eq!(ns.children(name, None), Err(NsError::UnknownName), "{name}");
        assert_eq!(ns.traverse(name, None), Err(NsError::UnknownName), "{name}");
    }
    for name in ["foo.count.nope", "zzz"] {
        let got = ns.children(name, Some(&mut a));
        assert_eq!(got, Err(NsError::UnknownName), "{name}");
        let got = ns.traverse(name, Some(&mut a));
        assert_eq!(got, Err(NsError::UnknownName), "{name}");
    }
}

// ---- pmTraversePMNS ----

#[test]
fn traverse_local_skips_dynamic_roots() {
    let ns = seed();
    let t = ns.traverse("", None).unwrap();
    assert_eq!(t.names, vec!["foo.version", "foo.memory"]);
    assert!(t.failed.is_empty());
    assert_eq!(
        ns.traverse("foo.count", None).unwrap().names,
        Vec::<String>::new()
    );
    assert_eq!(
        ns.traverse("foo.version", None).unwrap().names,
        vec!["foo.version"]
    );
}

#[test]
fn traverse_delegated_descends_into_agents() {
    let ns = seed();
    let mut a = foo_agents();
    let t = ns.traverse("", Some(&mut a)).unwrap();
    assert_eq!(
        t.names,
        vec![
            "foo.version",
            "foo.count.ops",
            "foo.count.errs",
            "foo.count.numcount",
            "foo.memory"
        ]
    );
    assert_eq!(
        ns.traverse("foo.count", Some(&mut a)).unwrap().names.len(),
        3
    );
    assert_eq!(
        ns.traverse("foo.count.ops", Some(&mut a)).unwrap().names,
        vec!["foo.count.ops"]
    );
}

#[test]
fn agent_subtrees_may_nest() {
    let ns = seed();
    let deep = ListAgent::new(&[
        ("foo.count.a.b.c", "44:2:0"),
        ("foo.count.a.d", "44:2:1"),
        ("foo.count.e", "44:2:2"),
    ]);
    let mut a = agents(vec![(44, Box::new(deep))]);
    assert_eq!(
        ns.children("foo.count.a", Some(&mut a)),
        Ok(kids(&[("b", false), ("d", true)]))
    );
    assert_eq!(
        ns.lookup("foo.count.a.b", Some(&mut a)),
        Err(NsError::NonLeaf)
    );
    assert_eq!(
        ns.lookup("foo.count.a.b.c", Some(&mut a)),
        Ok(pmid("44.2.0"))
    );
    let t = ns.traverse("foo", Some(&mut a)).unwrap();
    assert_eq!(
        t.names,
        vec![
            "foo.version",
            "foo.count.a.b.c",
            "foo.count.a.d",
            "foo.count.e",
            "foo.memory"
        ]
    );
    assert_eq!(
        ns.traverse("foo.count.a", Some(&mut a)).unwrap().names,
        vec!["foo.count.a.b.c", "foo.count.a.d"]
    );
}

mod loading;
