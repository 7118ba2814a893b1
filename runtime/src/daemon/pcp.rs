//! The daemon's agents as PCP's [`pcp::Source`]: the PCP port (and `wasmon pmda`) see the
//! namespace and the running agents as they are at each request (a reload swaps both under
//! them).

use std::sync::Arc;

use super::Daemon;
use super::agents::AgentSet;
use crate::namespace::{Agent, Child, LabelsOf, MetricDesc, NsError, Pmid, Traversal, Values};
use crate::pcp;

/// Whatever holds the agents: a running daemon, or the agents `wasmon pmda` loaded.
pub trait HasAgents: Send + Sync + 'static {
    fn agents(&self) -> &AgentSet;
}

impl HasAgents for Arc<Daemon> {
    fn agents(&self) -> &AgentSet {
        Daemon::agents(self)
    }
}

impl HasAgents for AgentSet {
    fn agents(&self) -> &AgentSet {
        self
    }
}

impl HasAgents for Arc<AgentSet> {
    fn agents(&self) -> &AgentSet {
        self
    }
}

/// PCP's view of a set of agents.
pub struct PcpSource<A>(pub A);

impl<A: HasAgents> pcp::Source for PcpSource<A> {
    fn lookup(&self, name: &str) -> Result<Pmid, NsError> {
        self.0.agents().lookup(name)
    }
    fn names_of(&self, id: Pmid) -> Result<Vec<String>, NsError> {
        self.0.agents().names_of(id)
    }
    fn children(&self, name: &str) -> Result<Vec<Child>, NsError> {
        self.0.agents().children(name)
    }
    fn traverse(&self, prefix: &str) -> Result<Traversal, NsError> {
        self.0.agents().traverse(prefix)
    }
    fn describe(&self, id: Pmid) -> Result<MetricDesc, NsError> {
        let mut a = self
            .0
            .agents()
            .agent(id.domain)
            .ok_or(NsError::UnknownPmid)?;
        a.describe(id)
    }
    fn instance_id(&self, domain: u32, indom: u32, name: &str) -> Option<u32> {
        self.0.agents().agent(domain)?.instance_id(indom, name)
    }
    fn instances(&self, domain: u32, indom: u32) -> Option<Vec<String>> {
        self.0.agents().agent(domain)?.instances(indom)
    }
    fn fetch(&self, ids: &[Pmid]) -> Vec<Result<Values, NsError>> {
        self.0.agents().fetch_ids(ids)
    }
    fn agent_name(&self, domain: u32) -> Option<String> {
        let a = self.0.agents().agent(domain)?;
        Some(a.label_name().unwrap_or_else(|| format!("domain{domain}")))
    }
    fn labels(&self, domain: u32, of: LabelsOf) -> Vec<(String, serde_json::Value)> {
        self.0
            .agents()
            .agent(domain)
            .map_or_else(Vec::new, |mut a| a.labels(of))
    }
    fn agent_count(&self) -> u32 {
        self.0.agents().agent_count() as u32
    }
}

/// Starts the PCP port when `[pcp] listen` is set; a port held by a real pmcd is logged (by
/// `pcp::start`) and skipped.
pub async fn start(
    daemon: &Arc<Daemon>,
    shutdown: &tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let Some(addr) = daemon.config().pcp.listen else {
        return Ok(());
    };
    let source = Box::new(PcpSource(daemon.clone()));
    pcp::start(addr, source, crate::util::hostname(), shutdown.clone())
        .await
        .map_err(|e| anyhow::anyhow!("binding the PCP port to {addr}: {e}"))?;
    Ok(())
}
