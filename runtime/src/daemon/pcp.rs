//! The daemon's agents as the PCP port's [`pcp::Source`]: the port sees the namespace and the
//! running agents as they are at each request (a reload swaps both under it).

use std::sync::Arc;

use super::Daemon;
use crate::namespace::{Agent, Child, MetricDesc, NsError, Pmid, Traversal, ValueType, Values};
use crate::pcp;

/// The PCP port's view of a running daemon.
pub struct PcpSource(pub Arc<Daemon>);

impl pcp::Source for PcpSource {
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
    fn value_type(&self, id: Pmid) -> Option<ValueType> {
        self.0.agents().agent(id.domain)?.value_type(id)
    }
    fn instance_id(&self, domain: u32, indom: u32, name: &str) -> Option<u32> {
        self.0.agents().agent(domain)?.instance_id(indom, name)
    }
    fn fetch(&self, ids: &[Pmid]) -> Vec<Result<Values, NsError>> {
        self.0.agents().fetch_ids(ids)
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
    pcp::start(addr, source, super::parts::hostname(), shutdown.clone())
        .await
        .map_err(|e| anyhow::anyhow!("binding the PCP port to {addr}: {e}"))?;
    Ok(())
}
