//! `wasmon guest new --world agent`: an agent that builds as is, in each language. It serves
//! `NAME.up` (1 while it runs) and `NAME.calls` (fetches answered) under PMID domain `domain`.

use super::Lang;

/// What the scaffold is, for its doc comment.
const DOC: &str = "serves `{NAME}.up` (1 while the agent runs) and `{NAME}.calls` (fetches \
answered) under PMID domain `domain` (cluster 0, items 0 and 1). Parameters: {\"domain\": 200}";

/// The agent's source, serving the subtree `name`.
pub(super) fn source(lang: Lang, name: &str) -> String {
    lang.pick([RUST, PYTHON, JS, C])
        .replace("{DOC}", DOC)
        .replace("{NAME}", name)
}

const RUST: &str = r#"//! A wasmon agent: {DOC}

use wasmon_guest::Params;
use wasmon_guest::agent::{
    Agent, Child, MetricDesc, NsError, Pmid, Semantics, Value, ValueSet, ValueType,
};

/// The subtree this agent owns, and its leaves (item = index): name, PCP type, semantics,
/// units, help.
const ROOT: &str = "{NAME}";
const LEAVES: [(&str, ValueType, Semantics, &str, &str); 2] = [
    ("up", ValueType::Uint32, Semantics::Instant, "", "1 while the agent runs"),
    ("calls", ValueType::Uint64, Semantics::Counter, "count", "fetches answered"),
];

pub struct Scaffold {
    domain: u32,
    calls: u64,
}

impl Scaffold {
    fn item(&self, id: Pmid) -> Option<usize> {
        let i = id.item as usize;
        (id.domain == self.domain && id.cluster == 0 && i < LEAVES.len()).then_some(i)
    }
}

impl Agent for Scaffold {
    fn configure(p: &Params) -> Result<Self, String> {
        let domain = match p.get("domain").filter(|v| !v.is_null()) {
            None => 200,
            Some(v) => v
                .as_u64()
                .filter(|d| (1..=510).contains(d))
                .ok_or(format!("`domain` must be an integer in 1..=510, got {v}"))?
                as u32,
        };
        Ok(Scaffold { domain, calls: 0 })
    }

    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        if name == ROOT {
            return Err(NsError::NonLeaf);
        }
        let leaf = name.strip_prefix(ROOT).and_then(|r| r.strip_prefix('.'));
        match leaf.and_then(|l| LEAVES.iter().position(|x| x.0 == l)) {
            Some(i) => Ok(Pmid { domain: self.domain, cluster: 0, item: i as u32 }),
            None => Err(NsError::UnknownName),
        }
    }

    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        let i = self.item(id).ok_or(NsError::UnknownPmid)?;
        Ok(vec![format!("{ROOT}.{}", LEAVES[i].0)])
    }

    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        if name == ROOT {
            return Ok(LEAVES.iter().map(|x| Child { name: x.0.into(), leaf: true }).collect());
        }
        // A leaf has no children; anything else is unknown.
        self.lookup_name(name).map(|_| Vec::new())
    }

    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        let (_, value_type, semantics, units, help) =
            LEAVES[self.item(id).ok_or(NsError::UnknownPmid)?];
        Ok(MetricDesc { id, value_type, semantics, units: units.into(), indom: None, help: help.into() })
    }

    fn fetch(&mut self, ids: &[Pmid]) -> Vec<ValueSet> {
        let sets = ids
            .iter()
            .map(|&id| {
                let value = match self.item(id) {
                    Some(0) => Ok(1u64),
                    Some(_) => Ok(self.calls),
                    None => Err(NsError::UnknownPmid),
                };
                let values = value.map(|value| vec![Value::new("", value)]);
                ValueSet { id, values }
            })
            .collect();
        self.calls += 1;
        sets
    }
}

wasmon_guest::export_agent!(Scaffold);
"#;

const PYTHON: &str = r#""""A wasmon agent: {DOC}

Runs on the CPython 3.14 that componentize-py embeds. `wasmon guest build` builds it; name it
in an `[[agent]]` of the daemon's config to serve its subtree.
"""

from wasmon_guest import Metric, Tree, UnknownPmid, export_agent


class Scaffold(Tree):
    def __init__(self, params):
        self.domain = params.integer("domain", 200, min=1, max=510)
        self.calls = 0
        Tree.__init__(self, "{NAME}", {
            "{NAME}.up": Metric((self.domain, 0, 0), "instant", "", "1 while the agent runs",
                                type="uint32"),
            "{NAME}.calls": Metric((self.domain, 0, 1), "counter", "count", "fetches answered",
                                   type="uint64"),
        })

    def fetch(self, pmid):
        if pmid == (self.domain, 0, 0):
            return 1
        if pmid == (self.domain, 0, 1):
            return self.calls
        raise UnknownPmid()

    def fetched(self):
        self.calls += 1


Namespace, Metrics = export_agent(Scaffold)
"#;

const JS: &str = r#"// A wasmon agent: {DOC}
//
// `wasmon guest build` builds it (componentize-js); name it in an `[[agent]]` of the daemon's
// config to serve its subtree.
import { Metric, Tree, UnknownPmid, exportAgent } from "./wasmon_guest.js";

class Scaffold extends Tree {
  constructor(params) {
    const domain = params.integer("domain", 200, { min: 1, max: 510 });
    super("{NAME}", {
      "{NAME}.up": new Metric([domain, 0, 0], "instant", "", "1 while the agent runs", undefined, "uint32"),
      "{NAME}.calls": new Metric([domain, 0, 1], "counter", "count", "fetches answered", undefined, "uint64"),
    });
    this.domain = domain;
    this.calls = 0;
  }

  fetch(pmid) {
    if (pmid.equals([this.domain, 0, 0])) return 1;
    if (pmid.equals([this.domain, 0, 1])) return this.calls;
    throw new UnknownPmid();
  }

  fetched() {
    this.calls += 1;
  }
}

export const { namespace, metrics } = exportAgent(Scaffold);
"#;

const C: &str = r#"/* A wasmon agent: {DOC}
 *
 * `wasmon guest build` builds it (clang-19, wasm32-wasip1, componentized with the preview1
 * adapter); name it in an `[[agent]]` of the daemon's config to serve its subtree. */
#include "wasmon_guest.h"

static int64_t domain;
static uint64_t calls;

const char *wg_agent_configure(const wg_params *p, wg_tree *tree) {
    const char *err;
    if ((err = wg_param_integer(p, "domain", 200, 1, 510, &domain))) return err;
    if ((err = wg_tree_root(tree, "{NAME}"))) return err;
    wg_pmid up = {(uint32_t)domain, 0, 0}, calls_id = {(uint32_t)domain, 0, 1};
    if ((err = wg_tree_add(tree, "{NAME}.up", up, WG_INSTANT, "", "1 while the agent runs",
                           WG_INDOM_NULL)))
        return err;
    if ((err = wg_tree_add(tree, "{NAME}.calls", calls_id, WG_COUNTER, "count",
                           "fetches answered", WG_INDOM_NULL)))
        return err;
    /* PCP's types (the default is WG_DOUBLE): integers stay exact. */
    if ((err = wg_tree_set_type(tree, up, WG_UINT32))) return err;
    return wg_tree_set_type(tree, calls_id, WG_UINT64);
}

int wg_agent_fetch(wg_tree *tree, wg_pmid id, wg_values *out) {
    (void)tree;
    if (id.domain != (uint32_t)domain || id.cluster != 0 || id.item > 1) return WG_UNKNOWN_PMID;
    wg_value_uint(out, "", id.item == 0 ? 1 : calls);
    return WG_OK;
}

void wg_agent_fetched(wg_tree *tree) {
    (void)tree;
    calls++;
}
"#;
