//! Loading and reloading: the config file and every guest it names are read, compiled (off
//! the pipelines' threads) and validated; only then are pipelines started or their guests
//! swapped. Anything that fails leaves what is running untouched (Vector's controller habit):
//! a reload returns an outcome per pipeline instead of aborting.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use super::kept::effective_config;
use super::outcome::{PipelineOutcome, ReloadOutcome};
use super::polls::agent_domain;
use super::{Daemon, RELOADS_KEPT, Reload};
use crate::config::{Config, PipelineConfig, StageConfig};
use crate::guests;
use crate::host::{Compiled, GuestConfig, Image, TransformerInstance, TransformerWorld};
use crate::pipeline::{Pipeline, Sink, StdoutSink, Swap};

impl Daemon {
    /// Re-reads the config and the guests; applies what is valid. `release`: quarantined
    /// guests are let out too (otherwise a reload keeps an unchanged guest's quarantine: a
    /// guest that failed is not retried early because the config was saved again).
    pub async fn reload(self: &Arc<Daemon>, release: bool) -> ReloadOutcome {
        let _one_at_a_time = self.reloading.lock().await;
        let d = self.clone();
        let result =
            tokio::task::spawn_blocking(move || match Config::load(d.opts.config.as_deref()) {
                Ok(config) => d.apply(config, release),
                Err(e) => ReloadOutcome {
                    config_error: Some(format!("{e:#}")),
                    ..Default::default()
                },
            })
            .await;
        let outcome = result.unwrap_or_else(|e| ReloadOutcome {
            config_error: Some(format!("reload panicked: {e}")),
            ..Default::default()
        });
        super::release_freed_memory();
        self.remember(&outcome);
        outcome
    }

    /// Keeps `outcome` among the last reloads.
    pub(super) fn remember(&self, outcome: &ReloadOutcome) {
        let mut history = crate::util::lock(&self.history);
        if history.len() == RELOADS_KEPT {
            history.pop_front();
        }
        history.push_back(Reload {
            at: chrono::Utc::now().timestamp(),
            outcome: outcome.clone(),
        });
    }

    /// Serialises a reload made from a blocking thread (the fleet's) with the others.
    pub(super) fn reload_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.reloading.blocking_lock()
    }

    /// Applies `config` again (the fleet's reload: the running config, new components).
    pub(super) fn apply_again(&self, config: Config) -> ReloadOutcome {
        let outcome = self.apply(config, false);
        super::release_freed_memory();
        self.remember(&outcome);
        outcome
    }

    /// The last reloads, oldest first.
    pub fn reloads(&self) -> Vec<Reload> {
        crate::util::lock(&self.history).iter().cloned().collect()
    }

    /// Stops every pipeline after a final flush.
    pub fn stop_pipelines(&self) {
        let pipelines: Vec<_> = crate::util::write(&self.pipelines).drain().collect();
        for (_, p) in pipelines {
            p.stop();
        }
    }

    /// The directory relative paths of the config file start from.
    pub fn base_dir(&self) -> PathBuf {
        self.opts
            .config
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    pub(super) fn apply(&self, config: Config, release: bool) -> ReloadOutcome {
        let mut outcome = ReloadOutcome {
            released: release,
            ..Default::default()
        };
        // Sinks first: a sink that cannot be built (a missing token file, a bad CA) refuses
        // the whole reload, before anything else is replaced.
        let make_exporter = |s: &crate::sink::SinkConfig| self.make_exporter(&config, s);
        match self
            .sinks
            .prepare(&config.sinks, &self.base_dir(), &make_exporter)
        {
            Ok(prepared) => {
                outcome.sinks = self.sinks.apply(prepared);
                self.exporters
                    .keep_only(|s| self.sinks.get(s).and_then(|f| f.exporter_identity()));
            }
            Err(e) => {
                outcome.config_error = Some(format!("{e:#}"));
                return outcome;
            }
        }
        match self.build_agents(&config) {
            Ok(built) => {
                outcome.agents_started = config
                    .agents
                    .iter()
                    .filter(|a| {
                        let domain = agent_domain(a);
                        built.agents.get(&domain).is_some_and(Option::is_some)
                    })
                    .map(|a| a.name.clone())
                    .collect();
                self.agents.replace(built.ns, built.agents);
                *crate::util::lock(&self.agent_prints) = built.prints;
                *crate::util::lock(&self.agent_stats) = built.stats;
                *crate::util::lock(&self.polls) = built.polls;
            }
            Err(e) => outcome.agents_error = Some(format!("{e:#}")),
        }
        for p in &config.pipelines {
            let result = self
                .build_chain(&config, p)
                .map(|chain| self.install(p, chain));
            let result = result.unwrap_or_else(|e| PipelineOutcome::Rejected {
                error: format!("{e:#}"),
            });
            outcome.pipelines.insert(p.name.clone(), result);
        }
        let gone: Vec<String> = {
            let pipelines = crate::util::read(&self.pipelines);
            pipelines
                .keys()
                .filter(|n| !config.pipelines.iter().any(|p| &&p.name == n))
                .cloned()
                .collect()
        };
        for name in gone {
            if let Some(p) = crate::util::write(&self.pipelines).remove(&name) {
                p.stop();
            }
            outcome.pipelines.insert(name, PipelineOutcome::Stopped);
        }
        if release {
            self.agents.release();
            for p in self.pipelines() {
                let _ = p.release();
            }
        }
        let running = crate::util::read(&self.config).clone();
        let effective = effective_config(&running, config, &mut outcome);
        {
            let mut compiled = crate::util::lock(&self.compiled);
            compiled.retain_used(&self.hashes_in_use());
            self.runtime
                .prune_cache(&compiled.kept().collect::<Vec<_>>());
        }
        *crate::util::write(&self.config) = effective;
        outcome
    }

    /// The component hashes the running pipelines and agents use.
    fn hashes_in_use(&self) -> Vec<String> {
        let mut used: Vec<String> = self
            .pipelines()
            .iter()
            .flat_map(|p| p.stages().into_iter().map(|s| s.hash))
            .collect();
        used.extend(
            crate::util::lock(&self.agent_prints)
                .values()
                .filter_map(|p| Some(p.split_once(':')?.0.to_string())),
        );
        used
    }

    fn install(&self, p: &PipelineConfig, chain: Vec<TransformerInstance>) -> PipelineOutcome {
        let sinks = self.sinks_of(p);
        if let Some(running) = self.pipeline(&p.name) {
            let swap = Swap {
                chain,
                sinks: Some(sinks),
                flush: p.flush(),
                // Under a fleet, a replaced version stands in for its successor during the
                // rollback window: a batch the new one fails is not lost.
                fallback: self.fleet.as_ref().map(|f| f.config().rollback_window),
            };
            match running.swap(swap) {
                Ok(s) => return PipelineOutcome::Swapped(s),
                Err(e) => {
                    return PipelineOutcome::Rejected {
                        error: e.to_string(),
                    };
                }
            }
        }
        let pipeline = Arc::new(Pipeline::start(&p.name, chain, p.flush(), sinks));
        crate::util::write(&self.pipelines).insert(p.name.clone(), pipeline);
        PipelineOutcome::Started
    }

    fn sinks_of(&self, p: &PipelineConfig) -> Vec<Arc<dyn Sink>> {
        p.sinks
            .iter()
            .filter_map(|s| match s.as_str() {
                "log" => Some(self.log_sink.clone()),
                "stdout" => Some(Arc::new(StdoutSink) as Arc<dyn Sink>),
                "store" => Some(self.store_sink.clone()),
                "notify" => Some(self.notify_sink.clone()),
                name => self
                    .sinks
                    .get(name)
                    .map(|f| Arc::new(super::parts::ForwardSink(f)) as Arc<dyn Sink>),
            })
            .collect()
    }

    fn build_chain(&self, config: &Config, p: &PipelineConfig) -> Result<Vec<TransformerInstance>> {
        p.transformers
            .iter()
            .enumerate()
            .map(|(i, t)| {
                self.load_stage(config, p, i, t).with_context(|| {
                    format!("pipeline {:?}, transformer[{i}] ({})", p.name, t.guest)
                })
            })
            .collect()
    }

    fn load_stage(
        &self,
        config: &Config,
        p: &PipelineConfig,
        i: usize,
        t: &StageConfig,
    ) -> Result<TransformerInstance> {
        let source = self.resolve(config, &t.guest)?;
        let compiled = self.compile(&source)?;
        let name = format!("{}[{i}]:{}", p.name, t.guest);
        let guest = self.guest_config(config, &name, &t.params, &t.limits)?;
        Image::<TransformerWorld>::load(&self.runtime, &compiled, guest)
    }

    pub(super) fn guest_config(
        &self,
        config: &Config,
        name: &str,
        params: &toml::Table,
        limits: &crate::config::GuestLimits,
    ) -> Result<GuestConfig> {
        let d = &config.guest_defaults;
        let mut grants = limits.grants.clone();
        // Granted paths in a config file are relative to it, like every other path there.
        let base = self.base_dir();
        for dir in &mut grants.dirs {
            dir.host = base.join(&dir.host);
        }
        for dir in &mut grants.mapped {
            dir.host = base.join(&dir.host);
        }
        Ok(GuestConfig {
            name: name.into(),
            deadline: limits.deadline.unwrap_or(d.deadline),
            memory: limits.memory.unwrap_or(d.memory),
            grants,
            params: serde_json::to_string(params)?,
            quarantine_after: limits.quarantine_after.unwrap_or(d.quarantine_after),
            max_output_samples: crate::host::limits::MAX_OUTPUT_SAMPLES,
        })
    }

    /// A guest reference's bytes: the fleet's version of a guest name first, then a path,
    /// guests-dir or the bundled guest.
    pub(super) fn resolve(&self, config: &Config, reference: &str) -> Result<guests::Source> {
        if let Some(c) = self.fleet.as_ref().and_then(|f| f.component(reference)) {
            return Ok(guests::Source {
                bytes: c.bytes.to_vec(),
                origin: guests::Origin::Fleet(reference.to_string(), c.hash),
            });
        }
        guests::resolve(reference, Some(&config.daemon.guests_dir), &self.base_dir())
    }

    pub(super) fn compile(&self, source: &guests::Source) -> Result<Compiled> {
        use sha2::Digest;
        let hash = hex::encode(sha2::Sha256::digest(&source.bytes));
        if let Some(c) = crate::util::lock(&self.compiled).get(&hash) {
            return Ok(c);
        }
        let compiled = self
            .runtime
            .compile(&source.bytes, &source.origin.to_string())?;
        crate::util::lock(&self.compiled).insert(hash, compiled.clone());
        Ok(compiled)
    }

    /// What the watcher compares: the config file and the guests directory's components.
    fn fingerprint(&self) -> Vec<(PathBuf, Option<(SystemTime, u64)>)> {
        let stat = |p: &Path| {
            std::fs::metadata(p)
                .ok()
                .and_then(|m| Some((m.modified().ok()?, m.len())))
        };
        let mut v = Vec::new();
        if let Some(c) = &self.opts.config {
            v.push((c.clone(), stat(c)));
        }
        let dir = self
            .base_dir()
            .join(&crate::util::read(&self.config).daemon.guests_dir);
        if dir != self.base_dir()
            && let Ok(entries) = std::fs::read_dir(&dir)
        {
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
                .collect();
            files.sort();
            v.extend(files.into_iter().map(|p| {
                let s = stat(&p);
                (p, s)
            }));
        }
        v
    }
}

/// Polls the config file and the guests directory; reloads when either changed.
pub async fn watch(daemon: Arc<Daemon>, shutdown: CancellationToken) {
    let mut last = daemon.fingerprint();
    loop {
        let interval = crate::util::read(&daemon.config).daemon.watch_interval;
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let now = daemon.fingerprint();
        if now != last {
            last = now;
            tracing::info!("config or guests changed: reloading");
            daemon.reload(false).await.log();
        }
    }
}
