//! `foo`: the example agent of PCP's dynamic-namespace proposal, domain 44. The daemon's PMNS
//! holds
//!
//! ```text
//! foo {
//!     version 44:0:1
//!     count   44:*:*
//!     memory  44:0:2
//! }
//! ```
//!
//! and this agent answers for the dynamic subtree `foo.count`: `foo.count.ops` (44:1:0),
//! `foo.count.errs` (44:1:1) and `foo.count.numcount` (44:0:27). It also fetches the static
//! `foo.version` and `foo.memory`. Values change at every fetch: ops counts fetches, errs every
//! third one, memory is the guest's linear memory in bytes.

use wasmon_guest::Params;
use wasmon_guest::agent::{
    Agent, Child, MetricDesc, NsError, Pmid, Semantics, Value, ValueSet, ValueType,
};

const DOMAIN: u32 = 44;

/// (name under foo.count, cluster, item, semantics, units, help)
const DYNAMIC: &[(&str, u32, u32, Semantics, &str, &str)] = &[
    (
        "ops",
        1,
        0,
        Semantics::Counter,
        "count",
        "operations performed",
    ),
    (
        "errs",
        1,
        1,
        Semantics::Counter,
        "count",
        "operations that failed",
    ),
    (
        "numcount",
        0,
        27,
        Semantics::Discrete,
        "",
        "number of foo.count metrics",
    ),
];
const VERSION: Pmid = Pmid {
    domain: DOMAIN,
    cluster: 0,
    item: 1,
};
const MEMORY: Pmid = Pmid {
    domain: DOMAIN,
    cluster: 0,
    item: 2,
};
const ROOT: &str = "foo.count";

pub struct Foo {
    fetches: u64,
}

fn pmid(cluster: u32, item: u32) -> Pmid {
    Pmid {
        domain: DOMAIN,
        cluster,
        item,
    }
}

impl Agent for Foo {
    fn configure(_params: &Params) -> Result<Self, String> {
        Ok(Foo { fetches: 0 })
    }

    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        if name == ROOT {
            return Err(NsError::NonLeaf);
        }
        let leaf = name
            .strip_prefix(ROOT)
            .and_then(|r| r.strip_prefix('.'))
            .ok_or(NsError::UnknownName)?;
        DYNAMIC
            .iter()
            .find(|m| m.0 == leaf)
            .map(|m| pmid(m.1, m.2))
            .ok_or(NsError::UnknownName)
    }

    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        DYNAMIC
            .iter()
            .find(|m| pmid(m.1, m.2) == id)
            .map(|m| vec![format!("{ROOT}.{}", m.0)])
            .ok_or(NsError::UnknownPmid)
    }

    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        if name != ROOT {
            return if self.lookup_name(name).is_ok() {
                Ok(Vec::new())
            } else {
                Err(NsError::UnknownName)
            };
        }
        Ok(DYNAMIC
            .iter()
            .map(|m| Child {
                name: m.0.to_string(),
                leaf: true,
            })
            .collect())
    }

    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        let (semantics, units, help) = if id == VERSION {
            (Semantics::Discrete, "", "version of the foo agent")
        } else if id == MEMORY {
            (Semantics::Instant, "byte", "linear memory of the foo agent")
        } else {
            let m = DYNAMIC
                .iter()
                .find(|m| pmid(m.1, m.2) == id)
                .ok_or(NsError::UnknownPmid)?;
            (m.3, m.4, m.5)
        };
        // PCP's foo example: the version a 32-bit number, the rest 64-bit counts.
        let value_type = if id == VERSION {
            ValueType::Uint32
        } else {
            ValueType::Uint64
        };
        Ok(MetricDesc {
            id,
            value_type,
            semantics,
            units: units.into(),
            indom: None,
            help: help.into(),
        })
    }

    fn fetch(&mut self, ids: &[Pmid]) -> Vec<ValueSet> {
        self.fetches += 1;
        let n = self.fetches;
        ids.iter()
            .map(|&id| {
                let value = match (id.cluster, id.item) {
                    _ if id.domain != DOMAIN => None,
                    (0, 1) => Some(1),
                    (0, 2) => Some(core::arch::wasm32::memory_size(0) as u64 * 65536),
                    (1, 0) => Some(n),
                    (1, 1) => Some(n / 3),
                    (0, 27) => Some(DYNAMIC.len() as u64),
                    _ => None,
                };
                let values = match value {
                    Some(v) => Ok(vec![Value::new("", v)]),
                    None => Err(NsError::UnknownPmid),
                };
                ValueSet { id, values }
            })
            .collect()
    }
}

wasmon_guest::export_agent!(Foo);
