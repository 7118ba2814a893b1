//! NATS delivery of notifications: every notification (all subscribers) is published as JSON to
//! `{subject-prefix}.{owner}`. Ingest hands notifications to a bounded `ChannelSink` (never
//! blocks, drops counted); one task publishes them. Owns only the `[notify.nats]` config and
//! that task; the notifier's semantics are untouched.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{ChannelSink, Notifier, forward};

crate::nats::section! {
    /// `[notify.nats]`: where notifications are published.
    #[derive(Clone, Debug, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    pub struct NatsSinkConfig as NatsSinkToml (servers: address, "notify.nats.address") {
        /// Server URL, e.g. `nats://127.0.0.1:4222`, or a cluster's seeds (a list, or URLs
        /// separated by commas).
        #[serde(deserialize_with = "crate::nats::servers")]
        pub address: String,
        /// Notifications go to `{subject-prefix}.{subscriber}` (`.`, `*`, `>` and spaces in the
        /// subscriber name become `_`).
        #[serde(default = "default_prefix")]
        pub subject_prefix: String,
        /// Notifications buffered between ingest and the publisher; beyond it they are dropped
        /// (and counted) rather than slowing ingest.
        #[serde(default = "default_capacity")]
        pub queue_capacity: usize,
    }
}

fn default_prefix() -> String {
    "wasmon.notify".into()
}

fn default_capacity() -> usize {
    4096
}

/// Why the sink could not start.
pub type NatsSinkError = crate::nats::ConnectError;

/// Connect, attach a sink to the notifier and publish until `shutdown` is cancelled.
pub async fn run_nats_sink(
    notifier: Arc<Notifier>,
    cfg: NatsSinkConfig,
    shutdown: CancellationToken,
) -> Result<(), NatsSinkError> {
    let client = cfg.connection().connect(std::path::Path::new("")).await?;
    // Attach only once connected: while the server is unreachable nothing piles up.
    let (sink, rx) = ChannelSink::new(cfg.queue_capacity);
    notifier.add_sink(sink.clone());
    tracing::info!(address = %cfg.address, prefix = %cfg.subject_prefix, "publishing notifications to NATS");
    let publisher = client.clone();
    forward(rx, cfg.subject_prefix, shutdown, move |subject, payload| {
        let c = publisher.clone();
        async move { c.publish(subject, payload.into()).await }
    })
    .await;
    let _ = client.flush().await;
    tracing::info!(dropped = sink.dropped(), "NATS notification sink stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::StreamExt;

    use super::*;
    use crate::notify::{Notification, Selector, ThresholdSpec};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn notifications_are_published_to_a_real_nats_server() {
        let server = crate::testutil::NatsServer::start();
        let listener = server.client().await;
        let mut sub = listener.subscribe("wasmon.notify.>").await.unwrap();
        listener.flush().await.unwrap();

        let n = Arc::new(Notifier::quiet(16));
        let h = n
            .add(
                "ops.team",
                ThresholdSpec::rising(Selector::any("proc.fd.count"), 40.0),
            )
            .unwrap();
        let cfg = NatsSinkConfig {
            address: server.address.clone(),
            subject_prefix: default_prefix(),
            queue_capacity: 16,
            auth: Default::default(),
        };
        let token = CancellationToken::new();
        let task = tokio::spawn(run_nats_sink(Arc::clone(&n), cfg, token.clone()));
        // The sink is attached once connected; cross the threshold again until a message comes.
        let msg = tokio::time::timeout(Duration::from_secs(10), async {
            let mut i = 0i64;
            loop {
                n.observe("proc.fd.count", "4768", 10.0, i);
                n.observe("proc.fd.count", "4768", 50.0, i + 1);
                i += 2;
                if let Ok(Some(m)) =
                    tokio::time::timeout(Duration::from_millis(100), sub.next()).await
                {
                    break m;
                }
            }
        })
        .await
        .expect("a notification published to NATS");
        assert_eq!(msg.subject.as_str(), "wasmon.notify.ops_team");
        let got: Notification = serde_json::from_slice(&msg.payload).unwrap();
        assert_eq!((got.handle, &*got.instance, got.value), (h, "4768", 50.0));
        crate::testutil::stop(&token, task).await;
    }

    #[tokio::test]
    async fn connect_error_is_reported() {
        let cfg = NatsSinkConfig {
            address: format!("nats://127.0.0.1:{}", crate::testutil::free_port()),
            subject_prefix: default_prefix(),
            queue_capacity: 1,
            auth: Default::default(),
        };
        let r = run_nats_sink(Arc::new(Notifier::default()), cfg, CancellationToken::new()).await;
        assert!(matches!(r, Err(NatsSinkError::Connect { .. })));
    }
}
