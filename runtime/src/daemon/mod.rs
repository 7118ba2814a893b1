//! `daemon` is what `wasmon run` runs: it wires configuration, guests, pipelines, sinks and
//! the native parts together, reloads on file changes, SIGHUP and the admin endpoint, and
//! shuts down gracefully (pipelines flush a last time). It owns no data itself and may not
//! reach into the parts' internals: it uses their public APIs only. It knows no HTTP: the API
//! (`api::serve`) starts it and serves over it.

pub mod agents;
mod exporters;
mod fleet;
mod kept;
mod outcome;
pub mod parts;
pub mod pcp;
mod polls;
mod reload;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use anyhow::{Context, Result};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

pub use outcome::{PipelineOutcome, ReloadOutcome};

use crate::config::Config;
use crate::host::{GuestStats, Runtime};
use crate::namespace::Namespace;
use crate::pipeline::{LogSink, Pipeline, Sink};
use agents::AgentSet;
use kept::CompiledCache;
use polls::Poll;

/// `wasmon run`'s options; each overrides the config file's value.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub config: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
}

/// The running daemon's state.
pub struct Daemon {
    runtime: Arc<Runtime>,
    opts: RunOptions,
    config: RwLock<Config>,
    pipelines: RwLock<HashMap<String, Arc<Pipeline>>>,
    /// Compiled components by content hash: a reload that changes nothing compiles nothing.
    compiled: Mutex<CompiledCache>,
    /// Serialises reloads (file watcher, SIGHUP and the admin endpoint may coincide).
    reloading: tokio::sync::Mutex<()>,
    log_sink: Arc<dyn Sink>,
    agents: AgentSet,
    /// Per domain: what the running agent was built from (unchanged agents keep running).
    agent_prints: Mutex<BTreeMap<u32, String>>,
    /// Per domain: the counters of the running guest agent (the fleet judges a new agent
    /// version by them, as it judges a pipeline stage by the stage's).
    agent_stats: Mutex<BTreeMap<u32, Arc<GuestStats>>>,
    /// The guest sinks' exporters: their versions and counters, for the fleet.
    exporters: exporters::ExporterBook,
    polls: Mutex<Vec<Poll>>,
    /// Per polled agent: its samples' sets and resources, kept from one poll to the next.
    sample_makers: Mutex<std::collections::HashMap<String, agents::SampleMaker>>,
    parts: parts::Parts,
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
        tune_malloc();
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
        let parts = parts::Parts::open(&config, &data_dir)?;
        let store_sink: Arc<dyn Sink> = Arc::new(crate::pipeline::StoreSink {
            store: parts.store.clone(),
            default_cluster: config.daemon.cluster.clone(),
            hostname: crate::util::hostname(),
            levels: Default::default(),
        });
        let notify_sink: Arc<dyn Sink> = Arc::new(parts::NotifySink(parts.notifier.clone()));
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
            sample_makers: Mutex::default(),
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
        release_freed_memory();
        Ok(daemon)
    }

    pub fn listen(&self) -> SocketAddr {
        self.opts
            .listen
            .unwrap_or(crate::util::read(&self.config).daemon.listen)
    }

    /// The store, the notifier and the cc-metric-store API state.
    pub fn parts(&self) -> &parts::Parts {
        &self.parts
    }

    /// The config the daemon runs now.
    pub fn config(&self) -> Config {
        crate::util::read(&self.config).clone()
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
        crate::util::read(&self.pipelines).get(name).cloned()
    }

    pub fn pipelines(&self) -> Vec<Arc<Pipeline>> {
        let mut v: Vec<_> = crate::util::read(&self.pipelines)
            .values()
            .cloned()
            .collect();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }
}

/// Background work of a started daemon, owned until [`Daemon::stop`].
pub struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Daemon {
    /// Starts the daemon's background work: the parts' tasks (store workers, NATS ingest and
    /// sink, the process reader), the fabric agent, the PCP port, the config watcher, the
    /// agents' polls and the signal handler (SIGTERM/SIGINT cancel `shutdown`, SIGHUP reloads).
    pub async fn spawn_tasks(self: &Arc<Self>, shutdown: &CancellationToken) -> Result<Tasks> {
        let daemon = self;
        {
            let d = daemon.clone();
            let config = daemon.config();
            let procfs_pipeline = config.procfs.pipeline.clone();
            daemon.parts().spawn(&config, shutdown, move |samples| {
                if let Some(p) = procfs_pipeline.as_deref().and_then(|p| d.pipeline(p)) {
                    let _ = p.send(samples);
                }
            });
        }
        {
            let d = daemon.clone();
            let fabric_pipeline = daemon.config().fabric.pipeline.clone();
            daemon.parts().spawn_fabric(shutdown, move |samples| {
                if let Some(p) = fabric_pipeline.as_deref().and_then(|p| d.pipeline(p)) {
                    let _ = p.send(samples);
                }
            });
        }
        pcp::start(daemon, shutdown).await?;
        let mut tasks = vec![
            tokio::spawn(watch_signals(daemon.clone(), shutdown.clone())),
            tokio::spawn(reload::watch(daemon.clone(), shutdown.clone())),
            tokio::spawn(polls::poll_agents(daemon.clone(), shutdown.clone())),
        ];
        tasks.extend(daemon.spawn_fleet(shutdown));
        Ok(Tasks(tasks))
    }

    /// After `shutdown` was cancelled and the API stopped: the pipelines' final flush, the
    /// sinks' queues synced, then the store's final snapshot.
    pub async fn stop(self: &Arc<Self>, tasks: Tasks) -> Result<()> {
        for t in tasks.0 {
            let _ = t.await;
        }
        let d = self.clone();
        tokio::task::spawn_blocking(move || d.stop_pipelines()).await?;
        // The pipelines' last output is queued: stop the senders, fsync the queues.
        self.sinks().stop().await;
        // The pipelines' last output is in the store: now its final snapshot.
        self.parts().close().await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// Allocations from this size on get their own mapping, returned to the OS when freed.
const MALLOC_MMAP_THRESHOLD: i32 = 1 << 20;
/// A malloc arena gives the free memory at its end back to the OS past this size.
const MALLOC_TRIM_THRESHOLD: i32 = 1 << 20;
/// malloc arenas: glibc makes up to 8 per core, one per thread that meets contention, and each
/// keeps what it once held. The daemon's hot paths allocate little (batches are reused, the
/// store has its own pages), and two arenas on this two-core class of machine measured ~1 MB
/// less resident at idle (41.4 -> 39.6 MB with one) at no cost in the benches.
const MALLOC_ARENA_MAX: i32 = 2;

/// Fixes glibc malloc's thresholds. By default they adapt: freeing a large block (cranelift
/// frees 25-33 MB tables after compiling a guest) raises the trim threshold to twice its size,
/// after which the per-thread arenas keep up to 64 MB each free but resident for good, and
/// `malloc_trim` cannot release an arena's top. Measured on the default config (debug build):
/// idle RSS after a first start 144 -> 98.5 MB.
pub(crate) fn tune_malloc() {
    // SAFETY: mallopt only sets malloc's parameters; called before the daemon's threads start.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, MALLOC_ARENA_MAX);
    }
}

/// Hands memory malloc holds free back to the OS. Loading guests (compiling them on several
/// threads) leaves tens of MB free in malloc's per-thread arenas, which an idle daemon would
/// otherwise keep resident for good: called after the start and after every reload.
pub(crate) fn release_freed_memory() {
    // SAFETY: malloc_trim only walks malloc's own arenas; it is thread-safe.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
}

async fn watch_signals(daemon: Arc<Daemon>, shutdown: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); shutdown.cancel(); return; }
            _ = int.recv() => { tracing::info!("SIGINT: shutting down"); shutdown.cancel(); return; }
            _ = hup.recv() => {
                tracing::info!("SIGHUP: reloading");
                let outcome = daemon.reload(false).await;
                outcome.log();
            }
        }
    }
}
