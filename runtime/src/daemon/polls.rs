//! The daemon's configured agents: built at each reload (WASM agents from their guests,
//! native ones, the namespace in front of them, and what stays running unchanged), polled
//! into their pipelines on their own intervals, and counted for the fleet.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use super::Daemon;
use super::agents::GuestAgent;
use crate::config::{AgentConfig, Config};
use crate::host::{AgentWorld, GuestStats, Image, check};
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
                        .map_err(|e| match check::why_refused(&source.bytes) {
                            Some(why) => e.context(why),
                            None => e,
                        })
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

    /// Polls every agent that is due; returns when the next one will be. The polls of one
    /// agent that are due together (its pipeline's and its feeds') are one fetch of all their
    /// names: each file is read once per poll, not once per pipeline.
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
        let mut agents: Vec<&str> = due.iter().map(|p| p.agent.as_str()).collect();
        agents.sort_unstable();
        agents.dedup();
        for agent in agents {
            let polls: Vec<&Poll> = due.iter().filter(|p| p.agent == agent).collect();
            let names = union_of_names(polls.iter().flat_map(|p| p.names.iter()));
            let ts = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
            let fetched = self.agents.fetch(&names);
            for f in fetched.iter().filter(|f| f.error.is_some()) {
                tracing::debug!(agent, metric = %f.name, error = ?f.error, "poll: no value");
            }
            let mut makers = crate::util::lock(&self.sample_makers);
            let maker = makers.entry(agent.to_string()).or_default();
            for p in polls {
                let mine = fetched
                    .iter()
                    .filter(|f| p.names.iter().any(|n| covers(n, &f.name)));
                let samples = maker.samples(mine, ts);
                if let Some(pipeline) = self.pipeline(&p.pipeline)
                    && !samples.is_empty()
                {
                    let _ = pipeline.send(samples);
                }
            }
            maker.next_poll();
        }
        self.next_poll_due(now)
    }

    /// When the next poll is due (a second from `now` without polls).
    fn next_poll_due(&self, now: std::time::Instant) -> std::time::Instant {
        let polls = crate::util::lock(&self.polls);
        polls
            .iter()
            .map(|p| p.due)
            .min()
            .unwrap_or(now + std::time::Duration::from_secs(1))
    }
}

/// Whether the name `asked` is `leaf` or one of its ancestors in the namespace.
fn covers(asked: &str, leaf: &str) -> bool {
    leaf.strip_prefix(asked)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The names to fetch for several polls: each once, and none below another asked name (whose
/// leaves it already brings), so that every leaf is fetched once.
fn union_of_names<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut all: Vec<&String> = names.collect();
    all.sort_unstable();
    all.dedup();
    all.iter()
        .filter(|n| !all.iter().any(|a| a != *n && covers(a, n)))
        .map(|n| n.to_string())
        .collect()
}

pub(super) fn agent_domain(a: &AgentConfig) -> u32 {
    a.served_domain()
}

/// Polls agents into their pipelines, each on its own interval. Between polls it sleeps until
/// the next is due, looking again at least every second (a reload may add polls); only a due
/// poll goes to a blocking thread.
pub async fn poll_agents(daemon: Arc<Daemon>, shutdown: CancellationToken) {
    loop {
        let now = std::time::Instant::now();
        let mut next = daemon.next_poll_due(now);
        if next <= now {
            let d = daemon.clone();
            next = tokio::task::spawn_blocking(move || d.poll_due())
                .await
                .unwrap_or_else(|_| std::time::Instant::now());
        }
        let wait = next
            .saturating_duration_since(std::time::Instant::now())
            .min(std::time::Duration::from_secs(1));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(wait.max(std::time::Duration::from_millis(5))) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::agents::{Fetched, SampleMaker};
    use super::*;

    #[test]
    fn a_name_covers_itself_and_its_descendants_only() {
        assert!(covers("mem.util", "mem.util"));
        assert!(covers("mem.util", "mem.util.available"));
        assert!(!covers("mem.util", "mem.utilx"));
        assert!(!covers("mem.util.available", "mem.util"));
        assert!(!covers("kernel.all.cpu", "kernel.percpu.cpu.user"));
    }

    /// The default config's host poll and its feeds: the feeds' names are within the host's,
    /// but `hinv.ncpu`, which only the `cpu` feed asks for.
    #[test]
    fn the_union_fetches_each_leaf_once() {
        let s = |v: &[&str]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let host = s(&[
            "kernel.all.cpu",
            "mem.physmem",
            "mem.util",
            "kernel.percpu.cpu",
        ]);
        let memory = s(&["mem.physmem", "mem.util.available"]);
        let cpu = s(&["kernel.all.cpu.user", "kernel.all.cpu.sys", "hinv.ncpu"]);
        let union = union_of_names(host.iter().chain(&memory).chain(&cpu));
        assert_eq!(
            union,
            s(&[
                "hinv.ncpu",
                "kernel.all.cpu",
                "kernel.percpu.cpu",
                "mem.physmem",
                "mem.util"
            ])
        );
    }

    fn fetched(name: &str, pmid: &str, values: &[(&str, u64)]) -> Fetched {
        Fetched {
            name: name.into(),
            pmid: pmid.into(),
            semantics: Some(crate::namespace::Semantics::Counter),
            units: "millisec".into(),
            values: values
                .iter()
                .map(|(i, v)| (i.to_string(), crate::namespace::Value::Uint(*v)))
                .collect(),
            error: None,
        }
    }

    /// A poll's samples carry the same metadata set and resource allocations as the last
    /// poll's (what the store sink finds levels by), with this poll's values; a changed
    /// descriptor gets new metadata; an errored or text value gives no sample.
    #[test]
    fn samples_keep_their_sets_and_resources_from_poll_to_poll() {
        let mut maker = SampleMaker::default();
        let user = |v| {
            fetched(
                "kernel.percpu.cpu.user",
                "60.0.0",
                &[("cpu0", v), ("cpu1", v + 1)],
            )
        };
        let first = maker.samples([&user(10)], 1);
        maker.next_poll();
        let second = maker.samples([&user(20)], 2);
        maker.next_poll();
        assert_eq!(second.len(), 2);
        for (a, b) in first.iter().zip(&second) {
            assert!(a.metadata.same(&b.metadata));
            assert!(Arc::ptr_eq(&a.resource, &b.resource));
            assert_eq!(a.name, b.name);
            assert_eq!(a.kind, crate::sample::Kind::Cumulative);
        }
        assert_eq!(
            (
                second[0].value,
                &*second[1].resource,
                second[1].value,
                second[1].timestamp_ns
            ),
            (20.0, "cpu1", 21.0, 2)
        );
        assert_eq!(second[0].metadata.get("pmid"), Some("60.0.0"));
        let moved = maker.samples(
            [&fetched("kernel.percpu.cpu.user", "60.0.1", &[("cpu0", 1)])],
            3,
        );
        assert!(!moved[0].metadata.same(&first[0].metadata));
        assert_eq!(moved[0].metadata.get("pmid"), Some("60.0.1"));
        let mut failed = user(1);
        failed.error = Some("no".into());
        let mut text = user(1);
        text.values = vec![("x".into(), crate::namespace::Value::Text("t".into()))];
        assert!(maker.samples([&failed, &text], 4).is_empty());
    }
}
