//! wasmon: a metrics collector whose plug-ins run as WebAssembly components.
//!
//! Parts (each module's `//!` says what it owns and what it may not touch):
//! - [`host`]: the wasmtime sandbox guests run in;
//! - [`namespace`]: the PMNS and the agents behind its dynamic subtrees;
//! - [`linux`]: the native linux agent, PCP's linux PMDA (domain 60) from /proc and /sys;
//! - [`store`]: the in-memory hierarchical time-series store (cc-metric-store's model);
//! - [`notify`]: thresholds with direction and edge-triggering, and their subscribers;
//! - [`pcp`]: PCP's binary protocol: a pmcd-compatible port for PCP's own tools;
//! - [`procfs`]: all processes and threads in one pass, and the detectors built on it;
//! - [`sample`]: the sample types and their JSON-lines form, below `host` and `pipeline`;
//! - [`lineproto`]: the InfluxDB line-protocol parser the HTTP and NATS ingests share;
//! - [`ingest`]: line protocol into the store, from HTTP bodies, NATS and JetStream;
//! - [`fabric`]: fabric port counters, and the hierarchy of agents that share a fabric over NATS;
//! - [`fleet`]: guests published once to a fleet over JetStream, signed, rolled out by group;
//! - [`pipeline`]: samples from sources through transformer chains to sinks;
//! - [`nats`]: the one NATS connection config (servers, credentials, TLS) and wasmon's streams;
//! - [`supervise`]: long-lived tasks restarted (and counted) when they fail or panic;
//! - [`sink`]: forwarding sinks: durable queues, retries, acknowledgements, TLS clients;
//! - [`config`]: the daemon's configuration, embedded default included;
//! - [`daemon`]: `wasmon run`: wiring, hot reload, shutdown;
//! - [`api`]: the HTTP API;
//! - [`guests`]: the guests bundled in the binary and how names resolve to components;
//! - [`kit`]: the guest author's kit (`wasmon guest new|build|check`).
//! - [`logging`]: the log's format, colours and level.

pub mod api;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod duration;
pub mod fabric;
pub mod fleet;
pub mod guests;
pub mod host;
pub mod ingest;
pub mod kit;
pub mod lineproto;
pub mod linux;
pub mod logging;
pub mod namespace;
pub mod nats;
pub mod notify;
pub mod pcp;
pub mod pipeline;
pub mod procfs;
pub mod sample;
pub mod sink;
pub mod store;
pub mod supervise;
pub mod telemetry;
#[cfg(test)]
mod testutil;
pub mod util;

/// Where the build put the compiled guests (bundled and test-only ones).
pub const BUILT_GUESTS_DIR: &str = env!("WASMON_BUILT_GUESTS");
