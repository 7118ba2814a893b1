//! The agent world on the host side: namespace callbacks and fetches through the sandbox. A
//! failed call (trap, deadline, memory) is reported as [`CallError`]; the namespace turns it
//! into PCP's "No agent for domain of request" for that call only.

use super::bindings::agent::{Agent, AgentPre};
use super::bindings::types as wit;
use super::guest::{CallError, Instance, Live, in_guest};

pub use wit::{Atom, Child, MetricDesc, NsError, Pmid, Semantics, Value, ValueSet, ValueType};

/// Marker for the `agent` world.
pub struct AgentWorld;

world!(
    AgentWorld,
    AgentPre,
    Agent,
    "agent",
    agent_linker,
    wasmon_collector_source
);

/// A running agent guest.
pub type AgentInstance = Instance<AgentWorld>;

/// Names and lists an agent returns per call: beyond these it is misbehaving.
const MAX_NAMES: usize = 1 << 20;

fn cap(what: &str, n: usize) -> Result<(), String> {
    if n > MAX_NAMES {
        Err(format!("{n} {what} returned, the cap is {MAX_NAMES}"))
    } else {
        Ok(())
    }
}

impl Instance<AgentWorld> {
    pub fn lookup_name(&mut self, name: &str) -> Result<Result<Pmid, NsError>, CallError> {
        self.call(
            async |l: &mut Live<AgentWorld>| {
                let ns = l.bindings.wasmon_collector_namespace();
                in_guest(&mut l.store, async |s| ns.call_lookup_name(s, name).await).await
            },
            |_| Ok(()),
        )
    }

    pub fn names_of(&mut self, id: Pmid) -> Result<Result<Vec<String>, NsError>, CallError> {
        self.call(
            async |l: &mut Live<AgentWorld>| {
                let ns = l.bindings.wasmon_collector_namespace();
                in_guest(&mut l.store, async |s| ns.call_names_of(s, id).await).await
            },
            |r| r.as_ref().map_or(Ok(()), |v| cap("names", v.len())),
        )
    }

    pub fn children(&mut self, name: &str) -> Result<Result<Vec<Child>, NsError>, CallError> {
        self.call(
            async |l: &mut Live<AgentWorld>| {
                let ns = l.bindings.wasmon_collector_namespace();
                in_guest(&mut l.store, async |s| ns.call_children(s, name).await).await
            },
            |r| r.as_ref().map_or(Ok(()), |v| cap("children", v.len())),
        )
    }

    pub fn describe(&mut self, id: Pmid) -> Result<Result<MetricDesc, NsError>, CallError> {
        self.call(
            async |l: &mut Live<AgentWorld>| {
                let src = l.bindings.wasmon_collector_source();
                in_guest(&mut l.store, async |s| src.call_describe(s, id).await).await
            },
            |_| Ok(()),
        )
    }

    /// One value set per id, in order; an agent that answers with another count is refused.
    pub fn fetch(&mut self, ids: &[Pmid]) -> Result<Vec<ValueSet>, CallError> {
        self.call(
            async |l: &mut Live<AgentWorld>| {
                let src = l.bindings.wasmon_collector_source();
                in_guest(&mut l.store, async |s| src.call_fetch(s, ids).await).await
            },
            |r| {
                if r.len() != ids.len() {
                    return Err(format!(
                        "{} value sets returned for {} ids",
                        r.len(),
                        ids.len()
                    ));
                }
                let values: usize = r
                    .iter()
                    .map(|v| v.values.as_ref().map_or(0, |v| v.len()))
                    .sum();
                cap("values", values)
            },
        )
    }
}
