//! Transformer tests, re-expressing Ceilometer's `pipeline_base.py` and
//! `transformer/test_conversions.py` cases plus wasmon's own acceptance cases.

mod aggregator;
mod arithmetic;
mod conversion;
mod delta;
mod rate;

use serde_json::Value;
use wasmon_guest::{Params, Sample, Transformer};

/// 2015-10-29T14:12:15Z, an arbitrary fixed "now".
pub(crate) const T0: i64 = 1_446_128_935_000_000_000;
pub(crate) const SEC: i64 = 1_000_000_000;

pub(crate) fn params(v: Value) -> Params {
    match v {
        Value::Object(m) => m,
        other => panic!("params must be an object: {other}"),
    }
}

pub(crate) fn configure<T: Transformer>(v: Value) -> T {
    T::configure(&params(v)).unwrap_or_else(|e| panic!("configure failed: {e}"))
}

pub(crate) fn configure_err<T: Transformer + std::fmt::Debug>(v: Value) -> String {
    match T::configure(&params(v)) {
        Ok(t) => panic!("configure succeeded: {t:?}"),
        Err(e) => e,
    }
}

pub(crate) fn handle<T: Transformer>(t: &mut T, input: Vec<Sample>) -> Vec<Sample> {
    let mut out = Vec::new();
    t.handle(input.into_iter(), &mut out);
    out
}

pub(crate) fn flush<T: Transformer>(t: &mut T) -> Vec<Sample> {
    let mut out = Vec::new();
    t.flush(&mut out);
    out
}

pub(crate) fn volumes(samples: &[Sample]) -> Vec<f64> {
    samples.iter().map(|s| s.value).collect()
}
