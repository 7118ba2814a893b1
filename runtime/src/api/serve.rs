//! `wasmon run`: start the daemon, serve its API on its listen address (HTTPS when `[api]
//! tls-cert` is set) until SIGTERM/SIGINT or `shutdown`, then stop the daemon gracefully. The
//! API owns this wiring so that the arrows run one way: the API uses the daemon, the daemon
//! knows nothing of HTTP.

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use crate::daemon::{Daemon, RunOptions};

pub async fn run(opts: RunOptions, shutdown: CancellationToken) -> Result<()> {
    let daemon = Daemon::start(opts).await?;
    let listen = daemon.listen();
    let api = daemon.config().api;
    // TLS files are read before anything listens: a bad one refuses the start, naming it.
    let tls = match (&api.tls_cert, &api.tls_key) {
        (Some(cert), Some(key)) => {
            let base = daemon.base_dir();
            Some(super::tls::server_config(
                &base.join(cert),
                &base.join(key),
                api.tls_client_ca.as_ref().map(|p| base.join(p)).as_deref(),
            )?)
        }
        _ => None,
    };
    let app = super::router(daemon.clone()).context("[api]")?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding the HTTP API to {listen}"))?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(addr = %listener.local_addr()?, scheme, "HTTP API listening");
    let tasks = daemon.spawn_tasks(&shutdown).await?;
    let token = shutdown.clone();
    let stopped = async move { token.cancelled().await };
    match tls {
        Some(tls) => {
            let listener = super::tls::TlsListener::new(listener, tls)?;
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await?
        }
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await?
        }
    }
    shutdown.cancel();
    daemon.stop(tasks).await
}
