//! Loading and reloading: the config file and every guest it names are read, compiled (off
//! the pipelines' threads) and validated; only then are pipelines started or their guests
//! swapped. Anything that fails leaves what is running untouched (Vector's controller habit):
//! a reload returns an outcome per pipeline instead of aborting.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::RunOptions;
use super::agents::AgentSet;
use super::kept::{CompiledCache, effective_config};
use super::outcome::{PipelineOutcome, ReloadOutcome};
use super::polls::{BuiltAgents, Poll, agent_domain};
use crate::config::{Config, PipelineConfig, StageConfig};
use crate::guests;
use crate::host::{
    Compiled, GuestConfig, GuestStats, Image, Runtime, TransformerInstance, TransformerWorld,
};
use crate::namespace::Namespace;
use crate::pipeline::{LogSink, Pipeline, Sink, StdoutSink, Swap};

/// The running daemon's state.
pub struct Daemon {
    pub(super) runtime: Arc<Runtime>,
    pub(super) opts: RunOptions,
    config: RwLock<Config>,
    pipelines: RwLock<HashMap<String, Arc<Pipeline>>>,
    /// Compiled components by content hash: a reload that changes nothing compiles nothing.
    compiled: Mutex<CompiledCache>,
    /// Serialises reloads (file watcher, SIGHUP and the admin endpoint may coincide).
    reloading: tokio::sync::Mutex<()>,
    log_sink: Arc<dyn Sink>,
    pub(super) agents: AgentSet,
    /// Per domain: what the running agent was built from (unchanged agents keep running).
    pub(super) agent_prints: Mutex<BTreeMap<u32, String>>,
    /// Per domain: the counters of the running guest agent (the fleet judges a new agent
    /// version by them, as it judges a pipeline stage by the stage's).
    pub(super) agent_stats: Mutex<BTreeMap<u32, Arc<GuestStats>>>,
    /// The guest sinks' exporters: their versions and counters, for the fleet.
    pub(super) exporters: super::exporters::ExporterBook,
    pub(super) polls: Mutex<Vec<Poll>>,
    parts: super::parts::Parts,
    store_sink: Arc<dyn Sink>,
    notify_sink: Arc<dyn Sink>,
    /// The forwarding sinks (`[[sink]]`).
    sinks: crate::sink::SinkSet,
    /// The last [`RELOADS_KEPT`] reloads (for the live view), oldest first.
    history: Mutex<std::collections::VecDeque<Reload>>,
    /// `[fleet]`: published guests, which take precedence over guests-dir and bundled ones.
    fleet: Option<Arc<crate::fleet::Fleet>>,
}

/// One reload and when it finished.
#[derive(Debug, Clone, Serialize)]
pub struct Reload {
    /// Seconds since the Unix epoch.
    pub at: i64,
    pub outcome: ReloadOutcome,
}

/// Reloads remembered for status pages: enough to see the last swaps, bounded for a daemon
/// that reloads every second for months.
pub const RELOADS_KEPT: usize = 32;

impl Daemon {
    /// Loads the config and starts every pipeline; any error refuses the start.
    pub async fn start(opts: RunOptions) -> Result<Arc<Daemon>> {
        super::tune_malloc();
        let config = Config::load(opts.config.as_deref())?;
        // A relative data-dir in a config file is relative to that file, like guests-dir; on
        // the command line or in the embedded default, to the working directory.
        let data_dir = match &opts.data_dir {
            Some(d) => d.clone(),
            None => opts
                .config
                .as_deref()
                .and_then(Path::parent)
                .unwrap_or(Path::new(""))
                .join(&config.daemon.data_dir),
        };
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("creating the data directory {}", data_dir.display()))?;
        let runtime = Runtime::new(Some(data_dir.join("components")))?;
        // The fleet's versions (kept on disk, and fetched now if NATS answers) are in place
        // before the first apply, so pipelines take their first samples through them.
        let fleet = match &config.fleet {
            Some(f) => {
                let base = opts
                    .config
                    .as_deref()
                    .and_then(Path::parent)
                    .unwrap_or(Path::new(""));
                let fleet = crate::fleet::Fleet::open(f, &data_dir, base)?;
                crate::fleet::prefetch(&fleet).await;
                Some(fleet)
            }
            None => None,
        };
        let parts = super::parts::Parts::open(&config, &data_dir)?;
        let store_sink: Arc<dyn Sink> = Arc::new(super::parts::StoreSink {
            store: parts.store.clone(),
            default_cluster: config.daemon.cluster.clone(),
            hostname: crate::util::hostname(),
            levels: Default::default(),
        });
        let notify_sink: Arc<dyn Sink> = Arc::new(super::parts::NotifySink(parts.notifier.clone()));
        let sinks =
            crate::sink::SinkSet::new(&data_dir, &config.daemon.cluster, &crate::util::hostname())
                .with_context(|| format!("opening {}", data_dir.join("sinks").display()))?;
        let daemon = Arc::new(Daemon {
            runtime,
            opts,
            config: RwLock::new(config.clone()),
            pipelines: RwLock::new(HashMap::new()),
            compiled: Mutex::new(CompiledCache::default()),
            reloading: tokio::sync::Mutex::new(()),
            log_sink: Arc::new(LogSink),
            agents: AgentSet::new(Namespace::builder().build()?, BTreeMap::new()),
            agent_prints: Mutex::new(BTreeMap::new()),
            agent_stats: Mutex::new(BTreeMap::new()),
            exporters: Default::default(),
            polls: Mutex::new(Vec::new()),
            parts,
            store_sink,
            notify_sink,
            sinks,
            history: Mutex::new(std::collections::VecDeque::new()),
            fleet,
        });
        let d = daemon.clone();
        let outcome = tokio::task::spawn_blocking(move || {
            let mut outcome = d.apply(config.clone(), false);
            // A fleet version a part refuses at start goes back to the version before it
            // (reported), instead of refusing the start: at most once per fleet guest.
            for _ in 0..config.pipelines.len() + config.agents.len() + config.sinks.len() {
                if outcome.ok() || !d.revert_refused_fleet_guests(&config, &outcome) {
                    break;
                }
                outcome = d.apply(config.clone(), false);
            }
            outcome
        })
        .await?;
        if !outcome.ok() {
            anyhow::bail!("{}", serde_json::to_string_pretty(&outcome)?);
        }
        super::release_freed_memory();
        Ok(daemon)
    }

    pub fn listen(&self) -> SocketAddr {
        self.opts
            .listen
            .unwrap_or(self.config.read().unwrap().daemon.listen)
    }

    /// The store, the notifier and the cc-metric-store API state.
    pub fn parts(&self) -> &super::parts::Parts {
        &self.parts
    }

    /// The config the daemon runs now.
    pub fn config(&self) -> Config {
        self.config.read().unwrap().clone()
    }

    /// The fleet this daemon follows (`[fleet]`).
    pub fn fleet(&self) -> Option<&Arc<crate::fleet::Fleet>> {
        self.fleet.as_ref()
    }

    /// The forwarding sinks.
    pub fn sinks(&self) -> &crate::sink::SinkSet {
        &self.sinks
    }

    /// The namespace and its agents.
    pub fn agents(&self) -> &AgentSet {
        &self.agents
    }

    pub fn pipeline(&self, name: &str) -> Option<Arc<Pipeline>> {
        self.pipelines.read().unwrap().get(name).cloned()
    }

    pub fn pipelines(&self) -> Vec<Arc<Pipeline>> {
        let mut v: Vec<_> = self.pipelines.read().unwrap().values().cloned().collect();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }

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
        let mut history = self.history.lock().unwrap();
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
        self.history.lock().unwrap().iter().cloned().collect()
    }

    /// Stops every pipeline after a final flush.
    pub fn stop_pipelines(&self) {
        let pipelines: Vec<_> = self.pipelines.write().unwrap().drain().collect();
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

    fn apply(&self, config: Config, release: bool) -> ReloadOutcome {
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
            Ok(BuiltAgents {
                ns,
                agents,
                prints,
                stats,
                polls,
            }) => {
                outcome.agents_started = config
                    .agents
                    .iter()
                    .filter(|a| agents.get(&agent_domain(a)).is_some_and(Option::is_some))
                    .map(|a| a.name.clone())
                    .collect();
                self.agents.replace(ns, agents);
                *self.agent_prints.lock().unwrap() = prints;
                *self.agent_stats.lock().unwrap() = stats;
                *self.polls.lock().unwrap() = polls;
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
            let pipelines = self.pipelines.read().unwrap();
            pipelines
                .keys()
                .filter(|n| !config.pipelines.iter().any(|p| &&p.name == n))
                .cloned()
                .collect()
        };
        for name in gone {
            if let Some(p) = self.pipelines.write().unwrap().remove(&name) {
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
        let running = self.config.read().unwrap().clone();
        let effective = effective_config(&running, config, &mut outcome);
        {
            let mut compiled = self.compiled.lock().unwrap();
            compiled.retain_used(&self.hashes_in_use());
            self.runtime
                .prune_cache(&compiled.kept().collect::<Vec<_>>());
        }
        *self.config.write().unwrap() = effective;
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
            self.agent_prints
                .lock()
                .unwrap()
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
                flush_interval: p.flush_interval,
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
        let pipeline = Arc::new(Pipeline::start(&p.name, chain, p.flush_interval, sinks));
        self.pipelines
            .write()
            .unwrap()
            .insert(p.name.clone(), pipeline);
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
        let guest = self.guest_config(
            config,
            &name,
            &t.params,
            t.deadline,
            t.memory,
            t.quarantine_after,
            &t.grants,
        )?;
        Image::<TransformerWorld>::load(&self.runtime, &compiled, guest)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn guest_config(
        &self,
        config: &Config,
        name: &str,
        params: &toml::Table,
        deadline: Option<std::time::Duration>,
        memory: Option<u64>,
        quarantine_after: Option<u32>,
        grants: &crate::host::Grants,
    ) -> Result<GuestConfig> {
        let d = &config.guest_defaults;
        let mut grants = grants.clone();
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
            deadline: deadline.unwrap_or(d.deadline),
            memory: memory.unwrap_or(d.memory),
            grants,
            params: serde_json::to_string(params)?,
            quarantine_after: quarantine_after.unwrap_or(d.quarantine_after),
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
        if let Some(c) = self.compiled.lock().unwrap().get(&hash) {
            return Ok(c);
        }
        let compiled = self
            .runtime
            .compile(&source.bytes, &source.origin.to_string())?;
        self.compiled.lock().unwrap().insert(hash, compiled.clone());
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
            .join(&self.config.read().unwrap().daemon.guests_dir);
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
        let interval = daemon.config.read().unwrap().daemon.watch_interval;
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
