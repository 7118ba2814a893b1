//! OpenStack Ceilometer's pipeline transformers, re-expressed in plain Rust over the wasmon
//! guest SDK.
//!
//! | type               | Ceilometer                | what it does                                  |
//! |--------------------|---------------------------|-----------------------------------------------|
//! | [`Arithmetic`]     | `ArithmeticTransformer`   | one meter computed from several, per resource |
//! | [`RateOfChange`]   | `RateOfChangeTransformer` | per-second rate, scaled and clamped           |
//! | [`UnitConversion`] | `ScalingTransformer`      | rescale / rename / retype samples             |
//! | [`Delta`]          | `DeltaTransformer`        | cumulative → delta                            |
//! | [`Aggregator`]     | `AggregatorTransformer`   | merge a series, release in bulk               |
//!
//! Parameters take Ceilometer's shape (`{"source": {...}, "target": {...}}`); target keys may
//! also be given at the top level (`target` wins). Unknown top-level keys are warned about.
//!
//! Ceilometer `eval()`s Python for `expr` and `scale`. Here they are parsed once at configure
//! time into resolved, constant-folded trees (a parse error names the character offset and
//! what was expected there), so evaluating them per sample allocates nothing. The language is
//! Python's expression subset: numbers, strings, `+ - * / // % **`, comparisons, `and or not`,
//! `a if c else b`, `float int bool abs min max round pow`. `arithmetic` names meters as
//! `$(meter)` (its volume) or `$(meter).field`; a `scale` names the sample's fields directly.
//! Fields: `volume`, `timestamp` (seconds since the epoch), `unit`, `name`, `type`,
//! `resource_id`, `resource_metadata.key` (wasmon metadata is flat, so the nested
//! `resource_metadata.a.b` reads the key `"a.b"`; `resource_metadata['odd-key']` reaches keys
//! that aren't identifiers). Metadata values that read as numbers are numbers; a missing key
//! is Python's falsy empty namespace, so `resource_metadata.cpu_number or 1` defaults it.
//!
//! Each type is exported as a wasm component by its own crate beside this one, and used
//! natively as a benchmark baseline.

mod aggregator;
mod arithmetic;
mod conversion;
mod delta;
mod expr;
mod hash;
mod mapping;
mod params;
mod rate;

pub use aggregator::Aggregator;
pub use arithmetic::Arithmetic;
pub use conversion::UnitConversion;
pub use delta::Delta;
pub use rate::RateOfChange;

#[cfg(test)]
mod tests;
