//! wasmon guest SDK: one trait and one export macro per world.
//!
//! - a transformer implements [`Transformer`] and is exported with [`export_transformer!`];
//! - an exporter implements [`exporter::Exporter`] (batches into the requests the host sends)
//!   and is exported with [`export_exporter!`];
//! - an agent implements [`agent::Agent`] and is exported with [`export_agent!`].
//!
//! The SDK hides the WIT bindings, decodes the interned batches the host sends into
//! [`Sample`]s ([`batch`], shared by every world that takes batches) and encodes the results
//! back. A transformer, run natively as its unit tests would (the export macro expands to
//! nothing off wasm):
//!
//! ```
//! use wasmon_guest::{Input, Kind, Params, Sample, Transformer, parse_params};
//! struct Scale(f64);
//! impl Transformer for Scale {
//!     fn configure(params: &Params) -> Result<Self, String> {
//!         Ok(Scale(params.get("factor").and_then(|v| v.as_f64()).unwrap_or(1.0)))
//!     }
//!     fn handle(&mut self, input: impl Input, out: &mut Vec<Sample>) {
//!         out.extend(input.map(|mut s| { s.value *= self.0; s }));
//!     }
//! }
//! wasmon_guest::export_transformer!(Scale);
//!
//! let mut t = Scale::configure(&parse_params(r#"{"factor": 2.5}"#).unwrap()).unwrap();
//! let mut out = Vec::new();
//! t.handle(vec![Sample::new("disk.read", "sda", Kind::Cumulative, 4.0, 0)].into_iter(), &mut out);
//! assert_eq!(out[0].value, 10.0);
//! ```
//!
//! An exporter (the bundled `guests/otlp` and `guests/jsonl` are complete ones):
//!
//! ```
//! use wasmon_guest::{Input, Params};
//! use wasmon_guest::exporter::{Exporter, Request};
//! struct Csv;
//! impl Exporter for Csv {
//!     fn configure(_params: &Params) -> Result<Self, String> {
//!         Ok(Csv)
//!     }
//!     fn encode(&mut self, input: impl Input, out: &mut Vec<Request>) -> Result<(), String> {
//!         let body: String = input.map(|s| format!("{},{},{}\n", s.name, s.value, s.timestamp_ns)).collect();
//!         out.push(Request { content_type: "text/csv".into(), body: body.into(), ..Request::default() });
//!         Ok(())
//!     }
//! }
//! wasmon_guest::export_exporter!(Csv);
//! ```

pub mod agent;
pub mod batch;
pub mod exporter;
mod hash;
pub mod log;
pub mod names;
pub mod params;
mod sample;
pub mod sysfs;
pub mod transformer;

pub use hash::{FxBuildHasher, FxHasher, Key, same};
pub use sample::{Kind, Metadata, Sample, Str, intern};

/// The samples of a batch handed to [`Transformer::handle`]: iterate them (`for s in input`);
/// `input.len()` says how many. In a guest each sample is decoded from the host's batch when
/// the loop reaches it; natively (tests, benches) any such iterator will do, e.g.
/// `vec.into_iter()`.
pub trait Input: ExactSizeIterator<Item = Sample> {}

impl<I: ExactSizeIterator<Item = Sample>> Input for I {}

/// A guest's parameters: the JSON object from the pipeline config.
pub type Params = serde_json::Map<String, serde_json::Value>;

/// A transformer: Ceilometer's `handle_sample` / `flush`, a batch at a time.
pub trait Transformer: Sized + 'static {
    /// Builds the transformer from its parameters; an error names the bad parameter.
    fn configure(params: &Params) -> Result<Self, String>;

    /// Handles one batch; pushes what is to be passed on now onto `out`.
    fn handle(&mut self, input: impl Input, out: &mut Vec<Sample>);

    /// Pushes whatever is cached and ready onto `out`. Called on the pipeline's flush
    /// interval, before the guest is replaced, and at shutdown.
    fn flush(&mut self, out: &mut Vec<Sample>) {
        let _ = out;
    }
}

thread_local! {
    /// The instance's configured transformer or exporter (a component is one world).
    static STATE: std::cell::RefCell<Option<Box<dyn std::any::Any>>> =
        const { std::cell::RefCell::new(None) };
}

/// Keeps what `configure` built for the calls that follow.
pub(crate) fn set_state<T: 'static>(t: T) {
    STATE.with(|cell| *cell.borrow_mut() = Some(Box::new(t)));
}

/// Runs `f` on the configured state; `None` before `configure`.
pub(crate) fn with_state<T: 'static, R>(f: impl FnOnce(&mut T) -> R) -> Option<R> {
    STATE.with(|cell| {
        cell.borrow_mut()
            .as_mut()
            .and_then(|b| b.downcast_mut::<T>())
            .map(f)
    })
}

/// Parses the parameters the host passes to `configure`: a JSON object (or null for none).
#[doc(hidden)]
pub fn parse_params(params: &str) -> Result<Params, String> {
    match serde_json::from_str::<serde_json::Value>(params) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(serde_json::Value::Null) => Ok(Params::new()),
        Ok(other) => Err(format!("parameters must be an object, got {other}")),
        Err(e) => Err(format!("parameters are not valid JSON: {e}")),
    }
}

/// Exports an [`agent::Agent`] as this component's `namespace` and `metrics` interfaces.
/// Natively it expands to nothing.
#[macro_export]
macro_rules! export_agent {
    ($ty:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            type WasmonExport = $crate::agent::Export<$ty>;
            $crate::agent::bindings::export_raw!(WasmonExport with_types_in $crate::agent::bindings);
        };
    };
}

/// Exports a [`Transformer`] as this component's `transform` interface. Natively (unit tests,
/// benchmarks) it expands to nothing, so a guest crate is also a plain Rust library.
#[macro_export]
macro_rules! export_transformer {
    ($ty:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            type WasmonExport = $crate::transformer::Export<$ty>;
            $crate::transformer::bindings::export_raw!(WasmonExport with_types_in $crate::transformer::bindings);
        };
    };
}

/// Exports an [`exporter::Exporter`] as this component's `encode` interface. Natively it
/// expands to nothing, so an exporter crate is also a plain Rust library (tests, benches).
#[macro_export]
macro_rules! export_exporter {
    ($ty:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            type WasmonExport = $crate::exporter::Export<$ty>;
            $crate::exporter::bindings::export_raw!(WasmonExport with_types_in $crate::exporter::bindings);
        };
    };
}
