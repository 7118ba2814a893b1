//! wasmon: a metrics collector whose plug-ins run as WebAssembly components.
//!
//! Parts (each module's `//!` says what it owns and what it may not touch):
//! - [`host`]: the wasmtime sandbox guests run in;
//! - [`pipeline`]: samples from sources through transformer chains to sinks;
//! - [`config`]: the daemon's configuration, embedded default included;
//! - [`daemon`]: `wasmon run`: wiring, hot reload, shutdown;
//! - [`api`]: the HTTP API;
//! - [`guests`]: the guests bundled in the binary and how names resolve to components.

pub mod api;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod guests;
pub mod host;
pub mod pipeline;
pub mod telemetry;

/// Where the build put the compiled guests (bundled and test-only ones).
pub const BUILT_GUESTS_DIR: &str = env!("WASMON_BUILT_GUESTS");
