//! An agent as built before the `metrics` export: it targets the `legacy-agent` world with
//! wit-bindgen directly (the SDK builds `agent`), so its `fetch` answers each value with its
//! instance name. It serves `legacy.up` (domain 77, 0.0: singular, 1) and `legacy.disk.reads`
//! (77, 0.1: instances `sda` and `sdb`, values 10 and 20 plus the fetches answered).

wit_bindgen::generate!({
    world: "legacy-agent",
    path: "../../wit",
});

use exports::wasmon::collector::{namespace, source};
use wasmon::collector::types::{
    Atom, Child, MetricDesc, NsError, Pmid, Semantics, Value, ValueSet, ValueType,
};

const DOMAIN: u32 = 77;
const LEAVES: [&str; 2] = ["legacy.up", "legacy.disk.reads"];

static FETCHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn item(id: Pmid) -> Result<usize, NsError> {
    let i = id.item as usize;
    if id.domain == DOMAIN && id.cluster == 0 && i < LEAVES.len() {
        Ok(i)
    } else {
        Err(NsError::UnknownPmid)
    }
}

struct Legacy;

impl namespace::Guest for Legacy {
    fn lookup_name(name: String) -> Result<Pmid, NsError> {
        match LEAVES.iter().position(|l| *l == name) {
            Some(i) => Ok(Pmid {
                domain: DOMAIN,
                cluster: 0,
                item: i as u32,
            }),
            None if name == "legacy" || name == "legacy.disk" => Err(NsError::NonLeaf),
            None => Err(NsError::UnknownName),
        }
    }
    fn names_of(id: Pmid) -> Result<Vec<String>, NsError> {
        Ok(vec![LEAVES[item(id)?].to_string()])
    }
    fn children(name: String) -> Result<Vec<Child>, NsError> {
        let kids = match name.as_str() {
            "legacy" => vec![("up", true), ("disk", false)],
            "legacy.disk" => vec![("reads", true)],
            _ => return Err(NsError::UnknownName),
        };
        Ok(kids
            .into_iter()
            .map(|(n, leaf)| Child {
                name: n.into(),
                leaf,
            })
            .collect())
    }
}

impl source::Guest for Legacy {
    fn configure(_params: String) -> Result<(), String> {
        Ok(())
    }
    fn describe(id: Pmid) -> Result<MetricDesc, NsError> {
        let i = item(id)?;
        Ok(MetricDesc {
            id,
            value_type: ValueType::Uint64,
            semantics: if i == 0 {
                Semantics::Instant
            } else {
                Semantics::Counter
            },
            units: if i == 0 {
                String::new()
            } else {
                "count".into()
            },
            indom: (i == 1).then_some(DOMAIN << 22),
            help: LEAVES[i].into(),
        })
    }
    fn fetch(ids: Vec<Pmid>) -> Vec<ValueSet> {
        let n = FETCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ids.into_iter()
            .map(|id| ValueSet {
                id,
                values: item(id).map(|i| match i {
                    0 => vec![Value {
                        instance: String::new(),
                        value: Atom::Uint(1),
                    }],
                    _ => vec![
                        Value {
                            instance: "sda".into(),
                            value: Atom::Uint(10 + n),
                        },
                        Value {
                            instance: "sdb".into(),
                            value: Atom::Uint(20 + n),
                        },
                    ],
                }),
            })
            .collect()
    }
}

export!(Legacy);
