//! The daemon's configured agents: built at each reload (WASM agents from their guests,
//! native ones, the namespace in front of them, and what stays running unchanged), polled
//! into their pipelines on their own intervals, and counted for the fleet.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use super::Daemon;
use super::agents::{GuestAgent, to_samples};
use crate::config::{AgentConfig, Config};
use crate::host::{AgentWorld, GuestStats, Image};
use crate::namespace::{Agent, Namespace};

/// What [`Daemon::build_agents`] made of the config's agents.
pub(super) struct BuiltAgents {
    pub ns: Namespace,
    /// Per domain: a new agent, or `None` to keep the running one.
    pub agents: BTreeMap<u32, Option<Box<dyn Agent>>>,
    pub prints: BTreeMap<u32, String>,
    pub stats: BTreeMap<u32, Arc<GuestStats>>,
    pub polls: Vec<Poll>,
}

/// An agent polled into a pipeline.
#[derive(Debug, Clone)]
pub(crate) struct Poll {
    pub agent: String,
    pub names: Vec<String>,
    pub pipeline: String,
    pub interval: std::time::Duration,
    pub due: std::time::Instant,
}

impl Daemon {
    /// The namespace (config PMNS files plus every agent's PMNS) and the agents; agents whose
    /// component and configuration did not change are `None` (kept running).
    pub(super) fn build_agents(&self, config: &Config) -> Result<BuiltAgents> {
        let base = self.base_dir();
        let mut texts: Vec<(String, String)> = Vec::new();
        for p in &config.namespace.pmns {
            let path = base.join(p);
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading PMNS {}", path.display()))?;
            texts.push((path.display().to_string(), text));
        }
        let old_prints = crate::util::lock(&self.agent_prints).clone();
        let old_stats = crate::util::lock(&self.agent_stats).clone();
        let mut agents = BTreeMap::new();
        let mut prints = BTreeMap::new();
        let mut stats = BTreeMap::new();
        let mut polls = Vec::new();
        let now = std::time::Instant::now();
        for a in &config.agents {
            let domain = agent_domain(a);
            let what = format!("agent {:?}", a.name);
            if let Some(path) = a.when_present_on_host(&base)
                && !path.exists()
            {
                tracing::info!(
                    "{what} not run: {} (its when-present) does not exist",
                    path.display()
                );
                continue;
            }
            let native = match &a.native {
                Some(n) => {
                    let root = base.join(a.root.as_deref().unwrap_or(Path::new("/")));
                    anyhow::ensure!(
                        root.is_dir(),
                        "{what}: root {}: not a directory",
                        root.display()
                    );
                    let made = super::agents::native_agent(n, &root, &a.devices)
                        .with_context(|| format!("{what}: no native agent {n:?}"))?;
                    Some(made)
                }
                None => None,
            };
            let pmns = match (&native, &a.pmns) {
                (_, Some(text)) => text.clone(),
                (Some((text, _)), None) => text.clone(),
                (None, None) => anyhow::bail!("{what}: no pmns"),
            };
            let names = if a.poll_names.is_empty() {
                let own = Namespace::from_pmns(&[(&what, &pmns)])
                    .with_context(|| format!("{what}: pmns"))?;
                own.children("", None)
                    .with_context(|| format!("{what}: pmns"))?
                    .into_iter()
                    .map(|c| c.name)
                    .collect()
            } else {
                a.poll_names.clone()
            };
            texts.push((format!("{what}: pmns"), pmns));
            let (print, agent): (String, Box<dyn Agent>) = match (native, &a.guest) {
                (Some((_, agent)), _) => (
                    format!(
                        "native:{}:{:?}:{:?}",
                        a.native.as_deref().unwrap_or(""),
                        a.root,
                        a.devices
                    ),
                    agent,
                ),
                (None, Some(guest)) => {
                    let source = match self.resolve(config, guest) {
                        Ok(source) => source,
                        // An optional collector (`when-present`: the default config's) that
                        // this machine cannot build yet (a Python agent before `wasmon guest
                        // prepare`, a C one without clang) costs itself, not the daemon: the
                        // log names the fix, and a reload after it runs the agent.
                        Err(e) if a.when_present.is_some() => {
                            tracing::error!("{what} not run: {e:#}");
                            texts.pop();
                            continue;
                        }
                        Err(e) => return Err(e.context(what.clone())),
                    };
                    let compiled = self.compile(&source)?;
                    let gc = self.guest_config(config, &a.name, &a.params, &a.limits)?;
                    let print = format!("{}:{gc:?}", compiled.hash);
                    if old_prints.get(&domain) == Some(&print) {
                        prints.insert(domain, print);
                        if let Some(s) = old_stats.get(&domain) {
                            stats.insert(domain, s.clone());
                        }
                        agents.insert(domain, None);
                        self.push_poll(&mut polls, a, names, now);
                        continue;
                    }
                    let instance = Image::<AgentWorld>::load(&self.runtime, &compiled, gc)
                        .with_context(|| what.clone())?;
                    stats.insert(domain, instance.image().stats().clone());
                    (print, Box::new(GuestAgent(instance)))
                }
                (None, None) => unreachable!("checked by Config::parse"),
            };
            let keep = old_prints.get(&domain) == Some(&print) && print.starts_with("native:");
            prints.insert(domain, print);
            agents.insert(domain, if keep { None } else { Some(agent) });
            self.push_poll(&mut polls, a, names, now);
        }
        let refs: Vec<(&str, &str)> = texts
            .iter()
            .map(|(f, t)| (f.as_str(), t.as_str()))
            .collect();
        let ns = Namespace::from_pmns(&refs).context("building the namespace")?;
        Ok(BuiltAgents {
            ns,
            agents,
            prints,
            stats,
            polls,
        })
    }

    /// The running guest agents: (domain, component hash, counters).
    pub(super) fn agent_usage(&self) -> Vec<(u32, String, Arc<GuestStats>)> {
        let prints = crate::util::lock(&self.agent_prints);
        let stats = crate::util::lock(&self.agent_stats);
        stats
            .iter()
            .filter_map(|(d, s)| {
                let hash = prints.get(d)?.split_once(':')?.0.to_string();
                Some((*d, hash, s.clone()))
            })
            .collect()
    }

    fn push_poll(
        &self,
        polls: &mut Vec<Poll>,
        a: &AgentConfig,
        names: Vec<String>,
        now: std::time::Instant,
    ) {
        if let (Some(interval), Some(pipeline)) = (a.poll_interval, &a.pipeline) {
            polls.push(Poll {
                agent: a.name.clone(),
                names,
                pipeline: pipeline.clone(),
                interval,
                due: now,
            });
        }
        // `[[agent.feed]]`: the same agent, other names, another pipeline.
        for f in &a.feeds {
            if let Some(interval) = a.poll_interval {
                polls.push(Poll {
                    agent: a.name.clone(),
                    names: f.names.clone(),
                    pipeline: f.pipeline.clone(),
                    interval,
                    due: now,
                });
            }
        }
    }

    /// Polls every agent that is due; returns when the next one will be.
    pub(crate) fn poll_due(&self) -> std::time::Instant {
        let now = std::time::Instant::now();
        let due: Vec<Poll> = {
            let mut polls = crate::util::lock(&self.polls);
            let due = polls.iter().filter(|p| p.due <= now).cloned().collect();
            for p in polls.iter_mut().filter(|p| p.due <= now) {
                p.due = now + p.interval;
            }
            due
        };
        for p in due {
            let ts = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
            let fetched = self.agents.fetch(&p.names);
            for f in fetched.iter().filter(|f| f.error.is_some()) {
                tracing::debug!(agent = %p.agent, metric = %f.name, error = ?f.error, "poll: no value");
            }
            let samples = to_samples(&fetched, ts);
            if let Some(pipeline) = self.pipeline(&p.pipeline)
                && !samples.is_empty()
            {
                let _ = pipeline.send(samples);
            }
        }
        let polls = crate::util::lock(&self.polls);
        polls
            .iter()
            .map(|p| p.due)
            .min()
            .unwrap_or(now + std::time::Duration::from_secs(1))
    }
}

pub(super) fn agent_domain(a: &AgentConfig) -> u32 {
    a.served_domain()
}

/// Polls agents into their pipelines, each on its own interval.
pub async fn poll_agents(daemon: Arc<Daemon>, shutdown: CancellationToken) {
    loop {
        let d = daemon.clone();
        let next = tokio::task::spawn_blocking(move || d.poll_due())
            .await
            .unwrap_or_else(|_| std::time::Instant::now());
        let wait = next
            .saturating_duration_since(std::time::Instant::now())
            .min(std::time::Duration::from_secs(1));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait.max(std::time::Duration::from_millis(5))) => {}
        }
    }
}
