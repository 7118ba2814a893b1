//! wasmon: a metrics collector whose plug-ins run as WebAssembly components.
//!
//! Parts (each module's `//!` says what it owns and what it may not touch), from the top
//! down; imports run one way, from a line to the lines below it (`.ci/imports.py` checks):
//!
//! - the edges: [`cli`], the command line (`wasmon run|transform|config|guest|...`); [`api`],
//!   the HTTP API, its authentication and its one error reply;
//! - [`daemon`]: `wasmon run`: wiring, hot reload, shutdown;
//! - [`config`]: the daemon's configuration, embedded default included;
//! - the parts:
//!   - [`pipeline`]: samples from sources through transformer chains to sinks;
//!   - [`sink`]: forwarding sinks: durable queues, retries, acknowledgements, TLS clients;
//!   - [`ingest`]: samples coming in over the network: line protocol into the store (HTTP
//!     bodies, NATS, JetStream) and the Prometheus remote-write and OTLP receivers' decoders;
//!   - [`store`]: the in-memory hierarchical time-series store (cc-metric-store's model);
//!   - [`notify`]: thresholds with direction and edge-triggering, and their subscribers;
//!   - [`namespace`]: the PMNS and the agents behind its dynamic subtrees;
//!   - [`linux`]: the native linux agent, PCP's linux PMDA (domain 60) from /proc and /sys;
//!   - [`procfs`]: all processes and threads in one pass, and the detectors built on it;
//!   - [`pcp`]: PCP's binary protocol: a pmcd-compatible port for PCP's own tools;
//!   - [`fabric`]: fabric port counters, and the hierarchy of agents sharing a fabric over NATS;
//!   - [`fleet`]: guests published once to a fleet over JetStream, signed, rolled out by group;
//!   - [`guests`]: the guests bundled in the binary and how names resolve to components;
//!   - [`kit`]: the guest author's kit (`wasmon guest new|build|check`);
//!   - [`host`]: the wasmtime sandbox guests run in;
//!   - [`sample`]: the sample types and their JSON-lines form, below `host` and `pipeline`;
//! - the shared leaves, which know no part: [`lineproto`], the InfluxDB line-protocol parser;
//!   [`nats`], the one NATS connection config (servers, credentials, TLS) and wasmon's streams;
//!   [`supervise`], long-lived tasks restarted (and counted) when they fail or panic;
//!   [`telemetry`], wasmon's own
//!   counters; [`logging`], the log's format, colours and level; [`duration`], durations in
//!   configs; [`util`], sizes, the host name, NATS-safe keys, byte compares and the lock policy;
//!   [`flat`], config sections whose shared group of keys is spelt flat in the file.

pub mod api;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod duration;
pub mod fabric;
pub mod flat;
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
pub mod resident;
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
