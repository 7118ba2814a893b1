//! wasmon's integration tests: one binary (link time), real wasmtime, real guests compiled
//! from `guests/` by the build, the real `wasmon` binary for the daemon and the CLI.

mod agents;
mod ceilometer;
mod cli;
mod common;
mod daemon;
mod guests;
mod logs;
mod namespace;
mod notify;
mod package;
mod reload;
mod sandbox;
mod store;
mod ui;
