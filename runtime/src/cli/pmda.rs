//! `wasmon pmda`: wasmon's agents as a daemon PMDA under a real pmcd. pmcd starts it from a
//! pmcd.conf line and talks to it on stdin/stdout; the agents are those `--pmns`/`--agent`/
//! `--mapped`/`--params` describe (as for `wasmon ns` offline), each guest in its sandbox. A
//! guest given as a `.wasm` path is reloaded when the file changes (checked before each
//! request: one `stat` per path). Logs go to stderr, which pmcd writes into its PMDA log.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};

use super::ns::{Source, offline_parts};
use crate::daemon::agents::AgentSet;
use crate::daemon::pcp::PcpSource;

pub fn pmda(source: Source) -> Result<bool> {
    let mut out = std::io::stdout().lock();
    // First, before the guests compile: pmcd gives a PMDA 3 s to say who it is.
    crate::pcp::pmda::hello(&mut out).context("writing CREDS to pmcd")?;
    let Some((ns, agents)) = offline_parts(&source)? else {
        bail!("wasmon pmda needs --agent DOMAIN=GUEST (and its --pmns)");
    };
    if agents.is_empty() {
        bail!("wasmon pmda needs --agent DOMAIN=GUEST");
    }
    let set = Arc::new(AgentSet::new(ns, agents));
    let paths: Vec<PathBuf> = source
        .agent
        .iter()
        .filter_map(|a| a.split_once('=').map(|(_, p)| PathBuf::from(p)))
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    let stamp = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let mut seen: Vec<Option<SystemTime>> = paths.iter().map(stamp).collect();
    let reload_set = set.clone();
    let mut reload = move || {
        let now: Vec<Option<SystemTime>> = paths.iter().map(stamp).collect();
        if now == seen {
            return false;
        }
        seen = now;
        match offline_parts(&source) {
            Ok(Some((ns, agents))) => {
                tracing::info!("PMDA: a guest changed: reloaded");
                reload_set.replace(ns, agents.into_iter().map(|(d, a)| (d, Some(a))).collect());
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "PMDA: a changed guest did not load: keeping the running one");
                false
            }
        }
    };
    let input = std::io::stdin().lock();
    crate::pcp::pmda::serve(
        input,
        out,
        Box::new(PcpSource(set)),
        crate::util::hostname(),
        &mut reload,
    )?;
    Ok(true)
}
