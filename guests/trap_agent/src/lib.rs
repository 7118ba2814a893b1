//! An agent that configures fine and traps on every call after that (test-only): the fleet's
//! agent rollback test publishes it as the broken next version of a working agent. Every
//! callback traps, not only `fetch`: a describe that succeeded after a failed fetch would
//! reset the host's count of consecutive failures, and the agent would never be quarantined.

use wasmon_guest::Params;
use wasmon_guest::agent::{Agent, Child, MetricDesc, NsError, Pmid, ValueSet};

pub struct TrapAgent;

fn trap(what: &str) -> ! {
    panic!("trap_agent: every {what} traps");
}

impl Agent for TrapAgent {
    fn configure(_params: &Params) -> Result<Self, String> {
        Ok(TrapAgent)
    }

    fn lookup_name(&mut self, _name: &str) -> Result<Pmid, NsError> {
        trap("lookup")
    }

    fn names_of(&mut self, _id: Pmid) -> Result<Vec<String>, NsError> {
        trap("names-of")
    }

    fn children(&mut self, _name: &str) -> Result<Vec<Child>, NsError> {
        trap("children")
    }

    fn describe(&mut self, _id: Pmid) -> Result<MetricDesc, NsError> {
        trap("describe")
    }

    fn fetch(&mut self, _ids: &[Pmid]) -> Vec<ValueSet> {
        trap("fetch")
    }
}

wasmon_guest::export_agent!(TrapAgent);
