//! `wasmon pmda`: wasmon's agents as a daemon PMDA under a real pmcd. pmcd starts it from a
//! pmcd.conf line and talks to it on stdin/stdout; the agents are those `--pmns`/`--agent`/
//! `--mapped` describe (as for `wasmon ns` offline), each guest in its sandbox. Logs go to
//! stderr, which pmcd writes into its PMDA log.

use anyhow::{Context, Result, bail};

use super::ns::{Source, offline_agents};
use crate::daemon::pcp::PcpSource;

pub fn pmda(source: Source) -> Result<bool> {
    let mut out = std::io::stdout().lock();
    // First, before the guests compile: pmcd gives a PMDA 3 s to say who it is.
    crate::pcp::pmda::hello(&mut out).context("writing CREDS to pmcd")?;
    let Some(agents) = offline_agents(&source)? else {
        bail!("wasmon pmda needs --agent DOMAIN=GUEST (and its --pmns)");
    };
    let input = std::io::stdin().lock();
    crate::pcp::pmda::serve(
        input,
        out,
        Box::new(PcpSource(agents)),
        crate::daemon::parts::hostname(),
    )?;
    Ok(true)
}
