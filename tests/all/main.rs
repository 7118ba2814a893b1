//! wasmon's integration tests: one binary (link time), real wasmtime, real guests compiled
//! from `guests/` by the build, the real `wasmon` binary for the daemon and the CLI.

// A test's locks may panic on poison (clippy.toml's policy is the daemon's): a poisoned lock
// here means a thread of the test failed already.
#![allow(clippy::disallowed_methods)]

mod agents;
mod auth;
mod ceilometer;
mod cli;
mod cluster;
mod clustercockpit;
mod common;
mod daemon;
mod dir_grants;
mod export;
mod fabric;
mod fleet;
mod forward;
mod guest_agents;
mod guests;
mod hostile_daemon;
mod hostile_guests;
mod logs;
mod namespace;
mod nats_cluster;
mod node_exporter;
mod notify;
mod package;
mod pcp;
mod polyglot;
mod prometheus;
mod readme;
mod receive;
mod reload;
mod reload_daemon;
mod sandbox;
mod store;
mod ui;
