//! NATS ingest as cc-metric-store does it: subscribe to the configured subjects, each message
//! a line-protocol body, the cluster for lines without a `cluster` tag taken from the
//! subscription. Core NATS is at-most-once, so messages are not held back for WAL durability;
//! the WAL is still appended (durable at the next group commit).

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::ingest::ingest;
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
    let client = crate::nats::connect(
        &cfg.address,
        cfg.username.as_deref(),
        cfg.password.as_deref(),
        cfg.creds_file_path.as_deref(),
    )
    .await?;
    let mut tasks = Vec::new();
    for sc in cfg.subscriptions {
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
            subscriptions: vec![
                NatsSubscription {
                    subscribe_to: "updates.>".into(),
                    cluster_tag: Some("fritz".into()),
                },
                NatsSubscription {
                    subscribe_to: "other".into(),
                    cluster_tag: None,
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
            subscriptions: vec![],
        };
        let store = Arc::new(Store::new(StoreConfig::default()));
        let r = run_nats_ingest(store, cfg, CancellationToken::new()).await;
        assert!(matches!(r, Err(NatsError::Connect { .. })));
    }
}
