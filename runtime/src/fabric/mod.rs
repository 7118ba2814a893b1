//! `runtime::fabric` — the fabric poller and its self-healing hierarchy of agents (after the
//! OpenFabrics "Scalable Monitoring" RFC): each agent owns part of a fabric, computes at the
//! edge (rates, error traps, change-threshold reports, rate histograms) and reports up a tree
//! to a master over NATS; ownership lives in JetStream key-value buckets, found by
//! breadth-first discovery and taken over when an agent's lease lapses.
//!
//! Owns: counter sources ([`source`], [`sysfs`], the simulated fat-tree [`sim`]), the rate
//! maths ([`rate`]), the per-epoch engine ([`engine`]), histograms ([`histogram`]), the wire
//! formats ([`wire`]), ownership ([`ownership`]) and the agent ([`agent`], its epoch's
//! blocking part `epoch`, [`handle`], [`tree`]). It does not store samples or serve HTTP:
//! samples go to the daemon's pipeline through a callback, traps to `notify::Notifier`
//! through its public API, and `api::fabric` exposes [`FabricHandle`].

pub mod agent;
pub mod config;
pub mod counters;
pub mod engine;
mod epoch;
pub mod handle;
pub mod histogram;
pub mod ownership;
mod pacer;
pub mod rate;
pub mod sim;
pub mod source;
pub mod sysfs;
pub mod tree;
pub mod wire;

pub use agent::run_agent;
pub use config::{FabricConfig, SourceKind};
pub use engine::{Engine, Output, Thresholds};
pub use handle::FabricHandle;
pub use histogram::Histogram;
pub use sim::{SimFabric, SimSource, SimSpec};
pub use source::{CounterSource, Reading};
