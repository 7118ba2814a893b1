//! `wasmon run`: start the daemon, serve its API on its listen address (HTTPS when `[api]
//! tls-cert` is set) until SIGTERM/SIGINT or `shutdown`, then stop the daemon gracefully. The
//! API owns this wiring so that the arrows run one way: the API uses the daemon, the daemon
//! knows nothing of HTTP.

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use crate::daemon::{Daemon, RunOptions};

pub async fn run(opts: RunOptions, shutdown: CancellationToken) -> Result<()> {
    let source = opts.config.as_ref().map_or_else(
        || "the embedded default (wasmon config default)".to_string(),
        |p| p.display().to_string(),
    );
    let daemon = Daemon::start(opts).await?;
    let running = Running::of(&daemon.config());
    tracing::info!(
        config = %source,
        pipelines = %running.pipelines,
        agents = %running.agents,
        sinks = %running.sinks,
        "running"
    );
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

/// What a started daemon runs, said once in its log (issue 33: a user could not tell which
/// config, pipelines, agents and sinks were running).
pub struct Running {
    /// `NAME [guest > guest] -> sink, sink` per pipeline.
    pub pipelines: String,
    /// `NAME (native linux | guest G, domain D, every 10s -> PIPELINE)` per agent.
    pub agents: String,
    /// `NAME (type URL)` per forwarding sink, or `none`.
    pub sinks: String,
}

impl Running {
    pub fn of(c: &crate::config::Config) -> Running {
        let list = |items: Vec<String>| {
            if items.is_empty() {
                "none".to_string()
            } else {
                items.join("; ")
            }
        };
        let pipelines = c
            .pipelines
            .iter()
            .map(|p| {
                let stages: Vec<&str> = p.transformers.iter().map(|t| t.guest.as_str()).collect();
                let stages = if stages.is_empty() {
                    String::new()
                } else {
                    format!(" [{}]", stages.join(" > "))
                };
                format!("{}{stages} -> {}", p.name, p.sinks.join(", "))
            })
            .collect();
        let agents = c
            .agents
            .iter()
            .map(|a| {
                let kind = match (&a.native, &a.guest) {
                    (Some(n), _) => format!("native {n}"),
                    (None, Some(g)) => format!("guest {g}"),
                    (None, None) => "no agent".to_string(),
                };
                let domain = a.served_domain();
                let polled = match (a.poll_interval, &a.pipeline) {
                    (Some(i), Some(p)) => format!(", every {:?} -> {p}", i),
                    _ => String::new(),
                };
                let gated = match &a.when_present {
                    Some(path) => format!(", when {path} exists"),
                    None => String::new(),
                };
                format!("{} ({kind}, domain {domain}{polled}{gated})", a.name)
            })
            .collect();
        let sinks = c
            .sinks
            .iter()
            .map(|s| format!("{} ({:?} {})", s.name, s.kind, s.url).to_lowercase())
            .collect();
        Running {
            pipelines: list(pipelines),
            agents: list(agents),
            sinks: list(sinks),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_is_summarised_in_one_line_each() {
        let c = crate::config::Config::parse(crate::config::DEFAULT).unwrap();
        let r = Running::of(&c);
        assert_eq!(
            r.pipelines,
            "memory [arithmetic] -> store, notify; cpu [arithmetic > rate_of_change] -> store, \
             notify; host -> store, notify"
        );
        assert_eq!(
            r.agents,
            "linux (native linux, domain 60, every 10s -> host); proc (native proc, domain 3); \
             foo (guest foo, domain 44); mmv (guest mmv, domain 70); infiniband (guest \
             infiniband, domain 91, when /sys/class/infiniband exists); denki (guest denki, \
             domain 156, when /sys/class/powercap/intel-rapl:0 exists); hwmon (guest hwmon, \
             domain 180, when /sys/class/hwmon/hwmon0 exists); lustre (guest lustre, domain 134, \
             when /proc/fs/lustre exists); nfsclient (guest nfsclient, domain 62, when \
             /proc/fs/nfsfs exists); slurm (guest slurm, domain 490, when \
             /sys/fs/cgroup/system.slice/slurmstepd.scope exists)"
        );
        assert_eq!(r.sinks, "none");
    }
}
