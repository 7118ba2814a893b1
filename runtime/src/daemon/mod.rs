//! `daemon` is `wasmon run`: it wires configuration, guests, pipelines and the HTTP API
//! together, reloads on file changes, SIGHUP and the admin endpoint, and shuts down gracefully
//! (pipelines flush a last time). It owns no data itself and may not reach into the parts'
//! internals: it uses their public APIs only.

pub mod agents;
pub mod parts;
mod reload;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

pub use reload::{Daemon, PipelineOutcome, Reload, ReloadOutcome};

/// `wasmon run`'s options; each overrides the config file's value.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub config: Option<PathBuf>,
    pub listen: Option<SocketAddr>,
    pub data_dir: Option<PathBuf>,
}

/// Runs the daemon until SIGINT/SIGTERM or until `shutdown` is cancelled.
pub async fn run(opts: RunOptions, shutdown: CancellationToken) -> Result<()> {
    let daemon = Daemon::start(opts).await?;
    let listen = daemon.listen();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding the HTTP API to {listen}"))?;
    tracing::info!(addr = %listener.local_addr()?, "HTTP API listening");

    let signals = tokio::spawn(watch_signals(daemon.clone(), shutdown.clone()));
    {
        let d = daemon.clone();
        let config = daemon.config();
        let procfs_pipeline = config.procfs.pipeline.clone();
        daemon.parts().spawn(&config, &shutdown, move |samples| {
            if let Some(p) = procfs_pipeline.as_deref().and_then(|p| d.pipeline(p)) {
                let _ = p.send(samples);
            }
        });
    }
    let watcher = tokio::spawn(reload::watch(daemon.clone(), shutdown.clone()));
    let poller = tokio::spawn(reload::poll_agents(daemon.clone(), shutdown.clone()));
    let app = crate::api::router(daemon.clone());
    let token = shutdown.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { token.cancelled().await })
        .await?;

    shutdown.cancel();
    let _ = signals.await;
    let _ = watcher.await;
    let _ = poller.await;
    let d = daemon.clone();
    tokio::task::spawn_blocking(move || d.stop_pipelines()).await?;
    // The pipelines' last output is in the store: now its final snapshot.
    daemon.parts().close().await;
    tracing::info!("stopped");
    Ok(())
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
                let outcome = daemon.reload().await;
                outcome.log();
            }
        }
    }
}
