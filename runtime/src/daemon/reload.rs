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
use crate::config::{Config, PipelineConfig, StageConfig};
use crate::guests;
use crate::host::{Compiled, GuestConfig, Image, Runtime, TransformerInstance, TransformerWorld};
use crate::pipeline::{LogSink, Pipeline, Sink, StdoutSink, SwapOutcome};

/// What a reload did to one pipeline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case", tag = "result")]
pub enum PipelineOutcome {
    Started,
    Swapped(SwapOutcome),
    Stopped,
    /// The new version was refused; the old one (if any) keeps running.
    Rejected { error: String },
}

/// What a reload did.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ReloadOutcome {
    /// The config itself was refused (nothing changed).
    pub config_error: Option<String>,
    pub pipelines: BTreeMap<String, PipelineOutcome>,
}

impl ReloadOutcome {
    /// Whether everything asked for was applied.
    pub fn ok(&self) -> bool {
        self.config_error.is_none() && !self.pipelines.values().any(|p| matches!(p, PipelineOutcome::Rejected { .. }))
    }

    pub fn log(&self) {
        if let Some(e) = &self.config_error {
            tracing::error!(error = %e, "reload refused: the config is invalid; the running version is kept");
        }
        for (name, p) in &self.pipelines {
            match p {
                PipelineOutcome::Rejected { error } => {
                    tracing::error!(pipeline = %name, %error, "reload of pipeline refused; the running version is kept")
                }
                PipelineOutcome::Swapped(s) if s.replaced.is_empty() => {}
                other => tracing::info!(pipeline = %name, outcome = ?other, "reloaded"),
            }
        }
    }
}

/// The running daemon's state.
pub struct Daemon {
    runtime: Arc<Runtime>,
    opts: RunOptions,
    config: RwLock<Config>,
    pipelines: RwLock<HashMap<String, Arc<Pipeline>>>,
    /// Compiled components by content hash: a reload that changes nothing compiles nothing.
    compiled: Mutex<HashMap<String, Compiled>>,
    /// Serialises reloads (file watcher, SIGHUP and the admin endpoint may coincide).
    reloading: tokio::sync::Mutex<()>,
    log_sink: Arc<dyn Sink>,
}

impl Daemon {
    /// Loads the config and starts every pipeline; any error refuses the start.
    pub async fn start(opts: RunOptions) -> Result<Arc<Daemon>> {
        let config = Config::load(opts.config.as_deref())?;
        // A relative data-dir in a config file is relative to that file, like guests-dir; on
        // the command line or in the embedded default, to the working directory.
        let data_dir = match &opts.data_dir {
            Some(d) => d.clone(),
            None => opts.config.as_deref().and_then(Path::parent).unwrap_or(Path::new("")).join(&config.daemon.data_dir),
        };
        std::fs::create_dir_all(&data_dir).with_context(|| format!("creating the data directory {}", data_dir.display()))?;
        let runtime = Runtime::new(Some(data_dir.join("components")))?;
        let daemon = Arc::new(Daemon {
            runtime,
            opts,
            config: RwLock::new(config.clone()),
            pipelines: RwLock::new(HashMap::new()),
            compiled: Mutex::new(HashMap::new()),
            reloading: tokio::sync::Mutex::new(()),
            log_sink: Arc::new(LogSink),
        });
        let d = daemon.clone();
        let outcome = tokio::task::spawn_blocking(move || d.apply(config)).await?;
        if !outcome.ok() {
            anyhow::bail!("{}", serde_json::to_string_pretty(&outcome)?);
        }
        Ok(daemon)
    }

    pub fn listen(&self) -> SocketAddr {
        self.opts.listen.unwrap_or(self.config.read().unwrap().daemon.listen)
    }

    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    pub fn pipeline(&self, name: &str) -> Option<Arc<Pipeline>> {
        self.pipelines.read().unwrap().get(name).cloned()
    }

    pub fn pipelines(&self) -> Vec<Arc<Pipeline>> {
        let mut v: Vec<_> = self.pipelines.read().unwrap().values().cloned().collect();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }

    /// Re-reads the config and the guests; applies what is valid.
    pub async fn reload(self: &Arc<Daemon>) -> ReloadOutcome {
        let _one_at_a_time = self.reloading.lock().await;
        let d = self.clone();
        let result = tokio::task::spawn_blocking(move || match Config::load(d.opts.config.as_deref()) {
            Ok(config) => d.apply(config),
            Err(e) => ReloadOutcome { config_error: Some(format!("{e:#}")), ..Default::default() },
        })
        .await;
        result.unwrap_or_else(|e| ReloadOutcome { config_error: Some(format!("reload panicked: {e}")), ..Default::default() })
    }

    /// Stops every pipeline after a final flush.
    pub fn stop_pipelines(&self) {
        let pipelines: Vec<_> = self.pipelines.write().unwrap().drain().collect();
        for (_, p) in pipelines {
            p.stop();
        }
    }

    fn base_dir(&self) -> PathBuf {
        self.opts.config.as_deref().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default()
    }

    fn apply(&self, config: Config) -> ReloadOutcome {
        let mut outcome = ReloadOutcome::default();
        for p in &config.pipelines {
            let result = self.build_chain(&config, p).map(|chain| self.install(p, chain));
            let result = result.unwrap_or_else(|e| PipelineOutcome::Rejected { error: format!("{e:#}") });
            outcome.pipelines.insert(p.name.clone(), result);
        }
        let gone: Vec<String> = {
            let pipelines = self.pipelines.read().unwrap();
            pipelines.keys().filter(|n| !config.pipelines.iter().any(|p| &&p.name == n)).cloned().collect()
        };
        for name in gone {
            if let Some(p) = self.pipelines.write().unwrap().remove(&name) {
                p.stop();
            }
            outcome.pipelines.insert(name, PipelineOutcome::Stopped);
        }
        *self.config.write().unwrap() = config;
        outcome
    }

    fn install(&self, p: &PipelineConfig, chain: Vec<TransformerInstance>) -> PipelineOutcome {
        let sinks = self.sinks(p);
        if let Some(running) = self.pipeline(&p.name) {
            match running.swap(chain, Some(sinks)) {
                Ok(s) => return PipelineOutcome::Swapped(s),
                Err(e) => return PipelineOutcome::Rejected { error: e.to_string() },
            }
        }
        let pipeline = Arc::new(Pipeline::start(&p.name, chain, p.flush_interval, sinks));
        self.pipelines.write().unwrap().insert(p.name.clone(), pipeline);
        PipelineOutcome::Started
    }

    fn sinks(&self, p: &PipelineConfig) -> Vec<Arc<dyn Sink>> {
        p.sinks
            .iter()
            .filter_map(|s| match s.as_str() {
                "log" => Some(self.log_sink.clone()),
                "stdout" => Some(Arc::new(StdoutSink) as Arc<dyn Sink>),
                _ => None,
            })
            .collect()
    }

    fn build_chain(&self, config: &Config, p: &PipelineConfig) -> Result<Vec<TransformerInstance>> {
        p.transformers
            .iter()
            .enumerate()
            .map(|(i, t)| self.load_stage(config, p, i, t).with_context(|| format!("pipeline {:?}, transformer[{i}] ({})", p.name, t.guest)))
            .collect()
    }

    fn load_stage(&self, config: &Config, p: &PipelineConfig, i: usize, t: &StageConfig) -> Result<TransformerInstance> {
        let source = guests::resolve(&t.guest, Some(&config.daemon.guests_dir), &self.base_dir())?;
        let compiled = self.compile(&source)?;
        let d = &config.guest_defaults;
        let guest = GuestConfig {
            name: format!("{}[{i}]:{}", p.name, t.guest).into(),
            deadline: t.deadline.unwrap_or(d.deadline),
            memory: t.memory.unwrap_or(d.memory),
            grants: t.grants.clone(),
            params: serde_json::to_string(&t.params)?,
            quarantine_after: t.quarantine_after.unwrap_or(d.quarantine_after),
            max_output_samples: crate::host::limits::MAX_OUTPUT_SAMPLES,
        };
        Image::<TransformerWorld>::load(&self.runtime, &compiled, guest)
    }

    fn compile(&self, source: &guests::Source) -> Result<Compiled> {
        use sha2::Digest;
        let hash = hex::encode(sha2::Sha256::digest(&source.bytes));
        if let Some(c) = self.compiled.lock().unwrap().get(&hash) {
            return Ok(c.clone());
        }
        let compiled = self.runtime.compile(&source.bytes, &source.origin.to_string())?;
        self.compiled.lock().unwrap().insert(hash, compiled.clone());
        Ok(compiled)
    }

    /// What the watcher compares: the config file and the guests directory's components.
    fn fingerprint(&self) -> Vec<(PathBuf, Option<(SystemTime, u64)>)> {
        let stat = |p: &Path| std::fs::metadata(p).ok().and_then(|m| Some((m.modified().ok()?, m.len())));
        let mut v = Vec::new();
        if let Some(c) = &self.opts.config {
            v.push((c.clone(), stat(c)));
        }
        let dir = self.base_dir().join(&self.config.read().unwrap().daemon.guests_dir);
        if dir != self.base_dir()
            && let Ok(entries) = std::fs::read_dir(&dir)
        {
            let mut files: Vec<PathBuf> =
                entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "wasm")).collect();
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
            daemon.reload().await.log();
        }
    }
}
