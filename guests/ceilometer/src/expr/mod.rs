//! Python-flavoured arithmetic expressions, compiled once and evaluated per sample.
//!
//! Ceilometer `eval()`s Python source for `arithmetic` expressions and for the `scale` of
//! `unit_conversion` / `rate_of_change` / `aggregator`. We parse the same surface syntax at
//! configure time into a flat arena of nodes whose variables are already resolved to
//! `(slot, field)` pairs, constant-fold what we can (`10**9`, `float('nan')`), and evaluate
//! by walking the arena: no allocation, no string building, no map lookups per sample.
//!
//! Supported: numbers (`1`, `1.5`, `1e9`, `1_000`, `0x10`), strings, `True`/`False`/`None`,
//! `+ - * / // % **` with Python precedence and semantics (`**` is right-associative and binds
//! tighter than a unary minus on its left, `%`/`//` floor), unary `+ - not`, comparisons
//! (chainable), `and`/`or` returning an operand (so `x or 1` defaults a missing or falsy value),
//! `a if c else b`, and the builtins `float int abs min max round pow bool`.
//!
//! Two variable syntaxes, chosen by [`Mode`]: arithmetic's `$(meter)` / `$(meter).field`, and
//! the bare sample fields of a `scale` (`volume`, `resource_metadata.key`, ...).

mod eval;
mod lexer;
mod parser;
mod program;

use std::fmt;

use wasmon_guest::Sample;

pub(crate) use eval::EvalError;

/// Which variables an expression may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `$(meter)` and `$(meter).field`: arithmetic over several meters, one slot per meter.
    Meters,
    /// Bare fields of the one sample being scaled: `volume`, `resource_metadata.cpu_number`.
    Sample,
}

/// A field of a sample, as reachable from an expression.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Field {
    Volume,
    /// Seconds since the Unix epoch (Ceilometer has an ISO string here, useless in arithmetic).
    Timestamp,
    Name,
    Unit,
    /// `type`: `gauge`, `delta` or `cumulative`.
    Kind,
    Resource,
    /// `resource_metadata.a.b` looks up the flat key `a.b` (wasmon metadata is flat).
    Meta(Box<str>),
    /// Fields Ceilometer samples have but wasmon's don't (`user_id`, `project_id`, `source`):
    /// always `None`, so `user_id or x` still works.
    Absent,
}

/// A value during evaluation. Python's empty `Namespace` (a missing attribute) and `None` are
/// both `Missing`: falsy, and an error when used as a number.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Val<'a> {
    Num(f64),
    Str(&'a str),
    Missing,
}

/// Where variables get their values from.
pub(crate) trait Env {
    fn get(&self, slot: u16, field: &Field) -> Val<'_>;

    /// The volume (or, with `timestamp`, the timestamp) of a slot as a number, if it is one:
    /// what the numeric fast path reads, without going through a [`Val`].
    #[inline]
    fn num(&self, slot: u16, timestamp: bool) -> Option<f64> {
        match self.get(
            slot,
            if timestamp {
                &Field::Timestamp
            } else {
                &Field::Volume
            },
        ) {
            Val::Num(x) => Some(x),
            _ => None,
        }
    }
}

/// A single sample is the environment of a `scale` expression.
impl Env for Sample {
    fn get(&self, _slot: u16, field: &Field) -> Val<'_> {
        field_of(self, field)
    }

    #[inline]
    fn num(&self, _slot: u16, timestamp: bool) -> Option<f64> {
        Some(volume_or_time(self, timestamp))
    }
}

/// A sample's volume, or its timestamp in seconds.
#[inline]
pub(crate) fn volume_or_time(s: &Sample, timestamp: bool) -> f64 {
    if timestamp {
        s.timestamp_ns as f64 / 1e9
    } else {
        s.value
    }
}

/// Reads one field of a sample as an expression value.
pub(crate) fn field_of<'a>(s: &'a Sample, field: &Field) -> Val<'a> {
    match field {
        Field::Volume => Val::Num(volume_or_time(s, false)),
        Field::Timestamp => Val::Num(volume_or_time(s, true)),
        Field::Name => Val::Str(&s.name),
        Field::Unit => Val::Str(&s.unit),
        Field::Kind => Val::Str(s.kind.as_str()),
        Field::Resource => Val::Str(&s.resource),
        Field::Meta(key) => s.metadata.get(key).map_or(Val::Missing, meta_value),
        Field::Absent => Val::Missing,
    }
}

/// wasmon metadata values are strings where Ceilometer's are JSON values: a value that reads as
/// a finite number is that number (so `cpu_number or 1` sees `0` as falsy, as Python would),
/// anything else stays a string.
fn meta_value(v: &str) -> Val<'_> {
    // Cheap pre-check so that ordinary text never goes through the float parser.
    let numeric_start = v
        .as_bytes()
        .first()
        .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.'));
    if numeric_start
        && let Ok(x) = v.trim_end().parse::<f64>()
        && x.is_finite()
    {
        return Val::Num(x);
    }
    Val::Str(v)
}

/// A configure-time error: where (a character offset into the expression) and what was
/// expected there.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ParseError {
    /// Offset in characters (not bytes) from the start of the expression.
    pub offset: usize,
    pub expected: String,
    pub found: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "at character {}: expected {}, found {}",
            self.offset, self.expected, self.found
        )
    }
}

impl std::error::Error for ParseError {}

/// A compiled expression.
#[derive(Clone, Debug)]
pub(crate) struct Expr {
    nodes: Vec<eval::Node>,
    /// Argument lists of calls, as node indices (kept out of `Node` so that it stays `Copy`-small).
    args: Vec<u32>,
    root: u32,
    /// In [`Mode::Meters`], the meter of each slot, in order of first reference.
    meters: Vec<wasmon_guest::Str>,
    /// The same expression as a flat program, when it is purely numeric.
    program: Option<Box<[program::Op]>>,
}

impl Expr {
    /// Parses `src`; in [`Mode::Meters`] each distinct `$(name)` gets the next slot.
    pub(crate) fn parse(src: &str, mode: Mode) -> Result<Expr, ParseError> {
        let mut e = parser::parse(src, mode)?;
        e.program = program::compile(&e.nodes, &e.args, e.root);
        Ok(e)
    }

    /// The meters referenced, slot by slot (empty in [`Mode::Sample`]).
    pub(crate) fn meters(&self) -> &[wasmon_guest::Str] {
        &self.meters
    }

    /// Evaluates to a number; a string or missing result is an error, as `float()` of it would
    /// be in Ceilometer.
    pub(crate) fn eval_f64<E: Env + ?Sized>(&self, env: &E) -> Result<f64, EvalError> {
        if let Some(ops) = &self.program
            && let Some(result) = program::run(ops, env)
        {
            return result;
        }
        self.walk(env)
    }

    /// [`Self::eval_f64`] by walking the tree, even when there is a program.
    fn walk<E: Env + ?Sized>(&self, env: &E) -> Result<f64, EvalError> {
        eval::num(self.eval_node(self.root, env)?)
    }

    /// The constant value of an expression without variables, if it folded to one.
    #[cfg(test)]
    pub(crate) fn as_const(&self) -> Option<f64> {
        match self.nodes[self.root as usize] {
            eval::Node::Num(x) => Some(x),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
