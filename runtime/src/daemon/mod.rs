//! `daemon` is what `wasmon run` runs: it wires configuration, guests, pipelines, sinks and
//! the native parts together, reloads on file changes, SIGHUP and the admin endpoint, and
//! shuts down gracefully (pipelines flush a last time). It owns no data itself and may not
//! reach into the parts' internals: it uses their public APIs only. It knows no HTTP: the API
//! (`api::serve`) starts it and serves over it.

pub mod agents;
mod exporters;
mod fleet;
mod kept;
mod levels;
mod outcome;
pub mod parts;
pub mod pcp;
mod polls;
mod reload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use tokio_util::sync::CancellationToken;

pub use outcome::{PipelineOutcome, ReloadOutcome};
pub use reload::{Daemon, Reload};

/// `wasmon run`'s options; each overrides the config file's value.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub config: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
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
