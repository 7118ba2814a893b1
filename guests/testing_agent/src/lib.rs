//! A misbehaving agent for the runtime's tests. Params: `{"domain": N, "root": "bar.dyn"}`.
//! It owns `ROOT.good` (N:0:0, value 42) and `ROOT.trap` and `ROOT.loop`, whose look-ups trap
//! (a panic) and spin forever. Any name containing `trap` traps, in every callback; any
//! containing `sleep` sleeps 10 s first (a WASI sleep: only the wall-time deadline ends it).

use wasmon_guest::Params;
use wasmon_guest::agent::{
    Agent, Child, MetricDesc, NsError, Pmid, Semantics, Value, ValueSet, ValueType,
};

pub struct Testing {
    domain: u32,
    root: String,
}

fn misbehave(name: &str) {
    if name.contains("sleep") {
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
    if name.contains("trap") {
        panic!("trap requested by {name}");
    }
    if name.contains("loop") {
        let mut x: u64 = 0;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
}

impl Agent for Testing {
    fn configure(params: &Params) -> Result<Self, String> {
        let domain = params
            .get("domain")
            .and_then(|d| d.as_u64())
            .ok_or("`domain` (a number) is required")? as u32;
        let root = params
            .get("root")
            .and_then(|r| r.as_str())
            .ok_or("`root` (a name) is required")?
            .to_string();
        Ok(Testing { domain, root })
    }

    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        misbehave(name);
        match name
            .strip_prefix(&self.root)
            .and_then(|r| r.strip_prefix('.'))
        {
            Some("good") => Ok(Pmid {
                domain: self.domain,
                cluster: 0,
                item: 0,
            }),
            _ if name == self.root => Err(NsError::NonLeaf),
            _ => Err(NsError::UnknownName),
        }
    }

    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        if id
            == (Pmid {
                domain: self.domain,
                cluster: 0,
                item: 0,
            })
        {
            Ok(vec![format!("{}.good", self.root)])
        } else {
            Err(NsError::UnknownPmid)
        }
    }

    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        misbehave(name);
        if name != self.root {
            return Err(NsError::UnknownName);
        }
        Ok(["good", "trap", "loop"]
            .iter()
            .map(|n| Child {
                name: n.to_string(),
                leaf: true,
            })
            .collect())
    }

    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        Ok(MetricDesc {
            id,
            value_type: ValueType::Double,
            semantics: Semantics::Instant,
            units: String::new(),
            indom: None,
            help: "a test metric".into(),
        })
    }

    fn fetch(&mut self, ids: &[Pmid]) -> Vec<ValueSet> {
        ids.iter()
            .map(|&id| ValueSet {
                id,
                values: Ok(vec![Value::new("", 42.0)]),
            })
            .collect()
    }
}

wasmon_guest::export_agent!(Testing);
