//! The `[nats]` section: its servers and subscriptions, and the checks a config load runs on
//! them (names NATS refuses, replicas, a hedge's second stream). What a subscription does at
//! run time is the parent's.

use serde::{Deserialize, Serialize};

crate::nats::section! {
    /// `[nats]` section: server and subscriptions.
    #[derive(Debug, Clone, PartialEq)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    pub struct NatsConfig as NatsToml (servers: address, "nats.address") {
        /// Server URL, e.g. `nats://127.0.0.1:4222`, or a cluster's seeds (a list, or URLs
        /// separated by commas).
        #[serde(deserialize_with = "crate::nats::servers")]
        pub address: String,
        /// Subjects to subscribe to.
        pub subscriptions: Vec<NatsSubscription>,
    }
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
    /// The stream's replicas when this daemon creates it (1 when not set; 3 on a 3-server
    /// cluster). When set, an existing stream with another number is reported, not used.
    #[serde(default)]
    pub replicas: Option<usize>,
    /// With `stream`: a second stream, on `hedge-subject`, that the senders' `jetstream`
    /// sinks publish every record to as well (their `hedge-stream`). Both are consumed (the
    /// same `durable` on each) and a record is stored once, whichever delivers it first; the
    /// daemon keeps the two streams' leaders (and their consumers') on different servers, so
    /// that the loss of any one server leaves one of them delivering.
    #[serde(default)]
    pub hedge_stream: Option<String>,
    /// With `hedge-stream`: the second stream's subject.
    #[serde(default)]
    pub hedge_subject: Option<String>,
}

impl NatsSubscription {
    /// The subscription's second stream: this one with the hedge's stream and subject.
    pub(super) fn hedge(&self) -> Option<NatsSubscription> {
        Some(NatsSubscription {
            stream: Some(self.hedge_stream.clone()?),
            subscribe_to: self.hedge_subject.clone()?,
            hedge_stream: None,
            hedge_subject: None,
            ..self.clone()
        })
    }
}

pub(super) fn default_window() -> std::time::Duration {
    crate::sink::config::DEFAULT_DUPLICATE_WINDOW
}

impl NatsConfig {
    /// Checks the servers, stream and consumer names (NATS refuses some), replicas, and that
    /// credentials and TLS files go together.
    pub fn check(&self) -> Result<(), String> {
        self.connection()
            .check(None)
            .map_err(|(f, p)| format!("{f}: {p}"))?;
        for (i, sc) in self.subscriptions.iter().enumerate() {
            let at = |f: &str, e: String| format!("nats.subscriptions[{i}].{f}: {e}");
            if let Some(r) = sc.replicas {
                crate::nats::check_replicas(r).map_err(|e| at("replicas", e))?;
                if sc.stream.is_none() {
                    return Err(at("replicas", "goes with `stream`".into()));
                }
            }
            if let Some(s) = &sc.stream {
                crate::sink::config::check_stream_name(s).map_err(|e| at("stream", e))?;
            } else if sc.durable.is_some() {
                return Err(at("durable", "goes with `stream`".into()));
            }
            if let Some(d) = &sc.durable {
                crate::sink::config::check_stream_name(d).map_err(|e| at("durable", e))?;
            }
            let hedge = crate::sink::config::hedge_pair(
                sc.hedge_stream.as_deref(),
                sc.hedge_subject.as_deref(),
            );
            if let Some(second) = hedge.map_err(|(f, p)| at(f, p.into()))? {
                if sc.stream.is_none() {
                    return Err(at("hedge-stream", "goes with `stream`".into()));
                }
                let first = (
                    sc.stream.as_deref(),
                    ("subscribe-to", Some(sc.subscribe_to.as_str())),
                );
                crate::sink::config::check_hedge_apart(first, second).map_err(|(f, p)| at(f, p))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hedge_goes_with_a_stream_and_names_another_stream_and_subject() {
        let cfg = |extra: &str| {
            let text = format!(
                "address = 'nats://a:4222'\n[[subscriptions]]\nsubscribe-to = 'lp'\n{extra}"
            );
            toml::from_str::<NatsConfig>(&text).unwrap()
        };
        let ok = "stream = 'A'\nhedge-stream = 'B'\nhedge-subject = 'lpb'";
        assert_eq!(cfg(ok).check(), Ok(()));
        for (extra, why) in [
            (
                "stream = 'A'\nhedge-stream = 'B'",
                "hedge-subject: goes with `hedge-stream`",
            ),
            (
                "stream = 'A'\nhedge-subject = 'lpb'",
                "hedge-stream: goes with `hedge-subject`",
            ),
            (
                "hedge-stream = 'B'\nhedge-subject = 'lpb'",
                "hedge-stream: goes with `stream`",
            ),
            (
                "stream = 'A'\nhedge-stream = 'A'\nhedge-subject = 'lpb'",
                "hedge-stream: is `stream`: name a second stream",
            ),
            (
                "stream = 'A'\nhedge-stream = 'B'\nhedge-subject = 'lp'",
                "hedge-subject: is `subscribe-to`: two streams cannot share one",
            ),
        ] {
            assert_eq!(
                cfg(extra).check(),
                Err(format!("nats.subscriptions[0].{why}")),
                "{extra}"
            );
        }
    }
}
