//! `aggregator` (Ceilometer's `AggregatorTransformer`): merges samples of the same series
//! and releases them in bulk once enough have arrived or the oldest is old enough.
//!
//! A series is (name, resource, unit, type). Within one, deltas are summed, gauges averaged
//! (summed, then divided by their count on release) and cumulatives keep the newest value.
//! The first sample of a series goes through the target conversion (name, unit, type, scale)
//! and later ones are merged into it: `resource_metadata` is kept from the first, replaced by
//! the last, or dropped; the timestamp is the first's, or the last's with `timestamp: last`.
//!
//! Release rule, Ceilometer's `flush`: when at least `size` samples have been aggregated, or
//! when the first one cached is more than `retention_time` seconds older than now, every
//! series is emitted and the cache starts over. `size` 0 / absent means no size limit, but
//! with neither limit `size` is 1, so everything cached is released. As in Ceilometer the
//! rule is checked in `flush` only, never at the end of `handle`: `handle` only merges, so the
//! aggregates do not depend on how the samples were batched (an HTTP client's request sizes,
//! the daemon's batching), only on when the pipeline flushes (its `flush-interval`, a
//! `POST .../flush`, the end of `wasmon transform`'s input). Ceilometer's pipeline flushes
//! after each notification it publishes; wasmon's flushes on its timer.

use std::collections::hash_map::Entry;

use serde_json::Value;
use wasmon_guest::{Input, Kind, Params, Sample, Str, Transformer};

use crate::conversion::Target;
use crate::hash::FxHashMap;
use crate::params::P;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Keep {
    First,
    Last,
    Drop,
}

/// The `aggregator` transformer.
///
/// ```json
/// {"size": 15, "retention_time": 60, "resource_metadata": "last", "timestamp": "first",
///  "target": {"name": "aggregated-bytes"}}
/// ```
#[derive(Debug)]
pub struct Aggregator {
    target: Target,
    size: Option<usize>,
    retention_ns: Option<i64>,
    metadata: Keep,
    timestamp_last: bool,
    clock: fn() -> i64,
    /// Series in first-seen order, so that output order is deterministic.
    series: Vec<Series>,
    index: FxHashMap<(Str, Str, Str, Kind), usize>,
    aggregated: usize,
    /// Timestamp of the first sample cached since the last release.
    initial_ns: Option<i64>,
}

#[derive(Debug)]
struct Series {
    sample: Sample,
    count: u32,
    /// Timestamp of the sample whose value a cumulative series holds.
    newest_ns: i64,
}

fn wall_clock_ns() -> i64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

impl Aggregator {
    /// Replaces the wall clock (nanoseconds since the epoch) used for `retention_time`, for
    /// deterministic tests and benchmarks.
    pub fn with_clock(mut self, clock: fn() -> i64) -> Self {
        self.clock = clock;
        self
    }

    fn release_if_due(&mut self, out: &mut Vec<Sample>) {
        let Some(initial) = self.initial_ns else {
            return;
        };
        let full = self.size.is_some_and(|n| self.aggregated >= n);
        let expired = !full
            && self
                .retention_ns
                .is_some_and(|r| (self.clock)() - initial > r);
        if !(full || expired) {
            return;
        }
        out.reserve(self.series.len());
        for mut s in self.series.drain(..) {
            if s.sample.kind == Kind::Gauge {
                s.sample.value /= f64::from(s.count);
            }
            s.sample.value = self.target.clamp(s.sample.value);
            out.push(s.sample);
        }
        self.index.clear();
        self.aggregated = 0;
        self.initial_ns = None;
    }
}

/// Ceilometer's `int(size) if size else None`, refusing negatives (which would release on
/// every flush).
fn size(p: &P<'_>) -> Result<Option<usize>, String> {
    let n = match p.top("size") {
        None => return Ok(None),
        Some((Value::String(s), path)) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| p.err(&path, format_args!("must be an integer, got {s:?}")))?,
        Some((Value::Number(n), path)) => match n.as_f64() {
            Some(x) if x.is_finite() => x.trunc() as i64,
            _ => return Err(p.err(&path, "must be an integer")),
        },
        Some((Value::Bool(false), _)) => 0,
        Some((v, path)) => return Err(p.err(&path, format_args!("must be an integer, got {v}"))),
    };
    match n {
        0 => Ok(None),
        n if n < 0 => Err(p.err("size", "must not be negative")),
        n => Ok(Some(n as usize)),
    }
}

/// A merge policy: `first`/`last` (and `drop` where allowed); anything else warns and means
/// `last`, as in Ceilometer.
fn keep(p: &P<'_>, name: &str, allow_drop: bool) -> Result<Keep, String> {
    Ok(match p.str(p.top(name))? {
        None | Some("last") => Keep::Last,
        Some("first") => Keep::First,
        Some("drop") if allow_drop => Keep::Drop,
        Some(other) => {
            wasmon_guest::warn!("aggregator: {name} is unknown ({other}), using last");
            Keep::Last
        }
    })
}

impl Transformer for Aggregator {
    fn configure(params: &Params) -> Result<Self, String> {
        let p = P::new("aggregator", params)?;
        p.warn_unknown(&[
            "size",
            "retention_time",
            "resource_metadata",
            "user_id",
            "project_id",
            "timestamp",
            "name",
            "unit",
            "type",
            "scale",
            "max",
            "map_from",
            "map_to",
        ]);
        let mut size = size(&p)?;
        let retention = p.number(p.top("retention_time"))?.filter(|r| *r != 0.0);
        if retention.is_some_and(|r| r < 0.0) {
            return Err(p.err("retention_time", "must not be negative"));
        }
        if size.is_none() && retention.is_none() {
            size = Some(1);
        }
        // wasmon samples carry no user or project: the policies are validated and then moot.
        keep(&p, "user_id", false)?;
        keep(&p, "project_id", false)?;
        let timestamp_last =
            matches!(p.top("timestamp"), Some((Value::String(s), _)) if s == "last");
        Ok(Aggregator {
            target: Target::from_params(&p)?,
            size,
            retention_ns: retention.map(|r| (r * 1e9) as i64),
            metadata: keep(&p, "resource_metadata", true)?,
            timestamp_last,
            clock: wall_clock_ns,
            series: Vec::new(),
            index: FxHashMap::default(),
            aggregated: 0,
            initial_ns: None,
        })
    }

    fn handle(&mut self, input: impl Input, _out: &mut Vec<Sample>) {
        for s in input {
            let v = match self.target.scaled(&s) {
                Ok(v) => v,
                Err(e) => {
                    wasmon_guest::warn!(
                        "aggregator: dropping {} of {}: scale {:?}: {e}",
                        s.name,
                        s.resource,
                        self.target.scale_text()
                    );
                    continue;
                }
            };
            self.initial_ns.get_or_insert(s.timestamp_ns);
            self.aggregated += 1;
            let key = (s.name.clone(), s.resource.clone(), s.unit.clone(), s.kind);
            match self.index.entry(key) {
                Entry::Vacant(slot) => {
                    let mut first = self.target.convert(&s, v);
                    if self.metadata == Keep::Drop {
                        first.metadata = Default::default();
                    }
                    slot.insert(self.series.len());
                    self.series.push(Series {
                        sample: first,
                        count: 1,
                        newest_ns: s.timestamp_ns,
                    });
                }
                Entry::Occupied(slot) => {
                    let a = &mut self.series[*slot.get()];
                    a.count += 1;
                    if self.timestamp_last {
                        a.sample.timestamp_ns = s.timestamp_ns;
                    }
                    if s.kind != Kind::Cumulative {
                        a.sample.value += v;
                    } else if s.timestamp_ns >= a.newest_ns {
                        a.sample.value = v;
                        a.newest_ns = s.timestamp_ns;
                    }
                    if self.metadata == Keep::Last {
                        a.sample.metadata = s.metadata;
                    }
                }
            }
        }
        // No release here: see the module doc.
    }

    fn flush(&mut self, out: &mut Vec<Sample>) {
        self.release_if_due(out);
    }
}
