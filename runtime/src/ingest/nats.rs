//! NATS ingest as cc-metric-store does it: subscribe to the configured subjects, each message
//! a line-protocol body, the cluster for lines without a `cluster` tag taken from the
//! subscription. Core NATS is at-most-once, so messages are not held back for WAL durability;
//! the WAL is still appended (durable at the next group commit).
//!
//! A subscription that names a `stream` is a durable JetStream pull consumer instead (what a
//! node's `jetstream` sink publishes into): messages are acknowledged only after their samples
//! are in the WAL, so nothing acknowledged is lost when the daemon dies, and a message that was
//! not acknowledged is delivered again. A second daemon with its own `durable` is a replica that
//! catches up from the stream. NATS going away (a restart) is waited out, not fatal.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::ingest;
use crate::store::Store;

/// `[nats]` section: server and subscriptions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct NatsConfig {
    /// Server URL, e.g. `nats://127.0.0.1:4222`.
    pub address: String,
    /// User name (with `password`).
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    /// A NATS credentials file (JWT + nkey seed).
    #[serde(default)]
    pub creds_file_path: Option<PathBuf>,
    /// PEM CA(s) the server's certificate must chain to, instead of the system's roots.
    #[serde(default)]
    pub tls_ca: Option<PathBuf>,
    /// PEM client certificate and key, for servers that require one.
    #[serde(default)]
    pub tls_cert: Option<PathBuf>,
    #[serde(default)]
    pub tls_key: Option<PathBuf>,
    /// Subjects to subscribe to.
    pub subscriptions: Vec<NatsSubscription>,
}

/// One subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct NatsSubscription {
    /// Subject (wildcards allowed).
    pub subscribe_to: String,
    /// Cluster for lines without a `cluster` tag.
    #[serde(default)]
    pub cluster_tag: Option<String>,
    /// A JetStream stream to consume `subscribe-to` from (created with that subject when it
    /// is missing), instead of a core NATS subscription.
    #[serde(default)]
    pub stream: Option<String>,
    /// The durable consumer's name (with `stream`): the server remembers what it acknowledged
    /// across restarts. Daemons with different names each get every message (replicas).
    #[serde(default)]
    pub durable: Option<String>,
    /// The stream's de-duplication window when this daemon creates it: at least as long as the
    /// senders' retry horizon, so a re-sent batch is stored once.
    #[serde(default = "default_window", with = "crate::duration::serde")]
    pub duplicate_window: std::time::Duration,
}

fn default_window() -> std::time::Duration {
    crate::sink::config::DEFAULT_DUPLICATE_WINDOW
}

impl NatsConfig {
    /// Checks stream and consumer names (NATS refuses some) and that TLS files go together.
    pub fn check(&self) -> Result<(), String> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err("nats: tls-cert and tls-key go together".into());
        }
        for (i, sc) in self.subscriptions.iter().enumerate() {
            let at = |f: &str, e: String| format!("nats.subscriptions[{i}].{f}: {e}");
            if let Some(s) = &sc.stream {
                crate::sink::config::check_stream_name(s).map_err(|e| at("stream", e))?;
            } else if sc.durable.is_some() {
                return Err(at("durable", "goes with `stream`".into()));
            }
            if let Some(d) = &sc.durable {
                crate::sink::config::check_stream_name(d).map_err(|e| at("durable", e))?;
            }
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NatsError {
    #[error(transparent)]
    Connect(#[from] crate::nats::ConnectError),
    #[error("subscribing to {subject}: {source}")]
    Subscribe {
        subject: String,
        source: async_nats::SubscribeError,
    },
}

/// Connects, subscribes and stores messages until `shutdown` is cancelled.
pub async fn run_nats_ingest(
    store: Arc<Store>,
    cfg: NatsConfig,
    shutdown: CancellationToken,
) -> Result<(), NatsError> {
    let mut opts = crate::nats::options(
        std::path::Path::new(""),
        &cfg.address,
        None,
        cfg.creds_file_path.as_deref(),
        crate::nats::Tls {
            ca: cfg.tls_ca.as_deref(),
            client: cfg.tls_cert.as_deref().zip(cfg.tls_key.as_deref()),
        },
    )
    .await?;
    if let (Some(u), Some(p)) = (&cfg.username, &cfg.password) {
        opts = opts.user_and_password(u.clone(), p.clone());
    }
    // A JetStream consumer waits out a NATS server that is down at start; core NATS
    // subscriptions fail the start as before (nothing would be kept for them anyway).
    if !cfg.subscriptions.is_empty() && cfg.subscriptions.iter().all(|s| s.stream.is_some()) {
        opts = opts.retry_on_initial_connect();
    }
    let client = opts.connect(cfg.address.as_str()).await.map_err(|source| {
        crate::nats::ConnectError::Connect {
            address: cfg.address.clone(),
            source,
        }
    })?;
    let mut tasks = Vec::new();
    for sc in cfg.subscriptions {
        if sc.stream.is_some() {
            let (store, shutdown, client) = (store.clone(), shutdown.clone(), client.clone());
            tasks.push(tokio::spawn(run_consumer(store, client, sc, shutdown)));
            continue;
        }
        let mut sub = client
            .subscribe(sc.subscribe_to.clone())
            .await
            .map_err(|source| NatsError::Subscribe {
                subject: sc.subscribe_to.clone(),
                source,
            })?;
        tracing::info!(subject = %sc.subscribe_to, address = %cfg.address, "NATS subscription established");
        let store = store.clone();
        let shutdown = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    _ = shutdown.cancelled() => break,
                    m = sub.next() => match m { Some(m) => m, None => break },
                };
                let now = chrono::Utc::now().timestamp();
                let out = ingest(&store, &msg.payload, sc.cluster_tag.as_deref(), now);
                for e in out.errors.iter().take(5) {
                    tracing::warn!(subject = %msg.subject, error = %e, "NATS line rejected");
                }
            }
            let _ = sub.unsubscribe().await;
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let _ = client.flush().await;
    tracing::info!("NATS ingest stopped");
    Ok(())
}

/// Messages fetched (and acknowledged after one WAL commit) at a time.
const FETCH: usize = 256;

/// A durable pull consumer on `sc.stream`, until `shutdown`: fetch, store, wait for the WAL,
/// acknowledge. Errors (NATS restarting, the stream missing) are logged once and retried.
async fn run_consumer(
    store: Arc<Store>,
    client: async_nats::Client,
    sc: NatsSubscription,
    shutdown: CancellationToken,
) {
    use async_nats::jetstream::consumer::pull;
    let js = async_nats::jetstream::new(client);
    let stream = sc.stream.clone().unwrap_or_default();
    let durable = sc.durable.clone().unwrap_or_else(|| "wasmon".into());
    let mut failing = false;
    let fail = |what: String, failing: &mut bool| {
        if !std::mem::replace(failing, true) {
            tracing::warn!(stream = %stream, durable = %durable, error = %what, "JetStream ingest: retrying (logged again when it works)");
        }
    };
    'setup: loop {
        if shutdown.is_cancelled() {
            return;
        }
        let consumer = async {
            let st = crate::nats::stream_for(
                &js,
                &stream,
                std::slice::from_ref(&sc.subscribe_to),
                sc.duplicate_window,
            )
            .await?;
            st.get_or_create_consumer(
                &durable,
                pull::Config {
                    durable_name: Some(durable.clone()),
                    filter_subject: sc.subscribe_to.clone(),
                    ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| format!("consumer {durable:?}: {e}"))
        }
        .await;
        let consumer = match consumer {
            Ok(c) => c,
            Err(e) => {
                fail(e, &mut failing);
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => continue 'setup,
                }
            }
        };
        tracing::info!(stream = %stream, durable = %durable, subject = %sc.subscribe_to, "JetStream consumer established");
        loop {
            let batch = tokio::select! {
                _ = shutdown.cancelled() => return,
                b = consumer.fetch().max_messages(FETCH).expires(std::time::Duration::from_secs(1)).messages() => b,
            };
            let mut messages = match batch {
                Ok(m) => m,
                Err(e) => {
                    fail(e.to_string(), &mut failing);
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    continue 'setup;
                }
            };
            let mut got = Vec::new();
            let mut wal_seq = 0;
            while let Some(m) = messages.next().await {
                let Ok(m) = m else { break };
                let now = chrono::Utc::now().timestamp();
                let out = ingest(&store, &m.payload, sc.cluster_tag.as_deref(), now);
                for e in out.errors.iter().take(5) {
                    tracing::warn!(stream = %stream, error = %e, "JetStream line rejected");
                }
                wal_seq = wal_seq.max(out.wal_seq);
                got.push(m);
            }
            if got.is_empty() {
                continue;
            }
            // Acknowledge only what the WAL holds: a crash before this re-delivers them.
            if let Err(e) = store.wait_durable(wal_seq).await {
                tracing::error!(error = %e, "WAL commit failed: messages left unacknowledged");
                continue;
            }
            for m in got {
                if let Err(e) = m.ack().await {
                    fail(format!("ack: {e}"), &mut failing);
                }
            }
            if std::mem::replace(&mut failing, false) {
                tracing::info!(stream = %stream, durable = %durable, "JetStream ingest works again");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{StoreConfig, selector};
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ingest_from_real_nats_server() {
        let server = crate::testutil::NatsServer::start();
        let address = server.address.clone();
        let publisher = server.client().await;
        let store = Arc::new(Store::new(StoreConfig::default()));
        let token = CancellationToken::new();
        let cfg = NatsConfig {
            address,
            username: None,
            password: None,
            creds_file_path: None,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            subscriptions: vec![
                NatsSubscription {
                    subscribe_to: "updates.>".into(),
                    cluster_tag: Some("fritz".into()),
                    stream: None,
                    durable: None,
                    duplicate_window: default_window(),
                },
                NatsSubscription {
                    subscribe_to: "other".into(),
                    cluster_tag: None,
                    stream: None,
                    durable: None,
                    duplicate_window: default_window(),
                },
            ],
        };
        let task = tokio::spawn(run_nats_ingest(store.clone(), cfg, token.clone()));
        // Subscriptions are live once a published message arrives; retry until it does.
        let mut got = false;
        for i in 0..100 {
            publisher
                .publish(
                    "updates.a",
                    format!("load,hostname=f1 value={i} 600\nbad\n").into(),
                )
                .await
                .unwrap();
            publisher
                .publish("other", "load,cluster=c2,hostname=h value=2 600".into())
                .await
                .unwrap();
            publisher.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let a = store.read(&selector(&["fritz", "f1"]), "load", 600, 601, 0);
            let b = store.read(&selector(&["c2", "h"]), "load", 600, 601, 0);
            if let (Ok(a), Ok(b)) = (a, b) {
                assert!(a.data[0] <= i as f64);
                assert_eq!(b.data, vec![2.0]);
                got = true;
                break;
            }
        }
        assert!(got, "no NATS message was stored");
        token.cancel();
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn connect_error_is_reported() {
        let cfg = NatsConfig {
            address: format!("nats://127.0.0.1:{}", crate::testutil::free_port()),
            username: None,
            password: None,
            creds_file_path: None,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            subscriptions: vec![],
        };
        let store = Arc::new(Store::new(StoreConfig::default()));
        let r = run_nats_ingest(store, cfg, CancellationToken::new()).await;
        assert!(matches!(r, Err(NatsError::Connect { .. })));
    }
}
