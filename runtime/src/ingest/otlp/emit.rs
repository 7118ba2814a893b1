//! OTLP's data model into samples, for both encodings: a metric's names and kind
//! ([`Heads`]), its points' values, histograms and summaries as the mapping in `otlp.rs` says,
//! and the count of rejected points for the partial-success answer. Knows no wire format.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use super::super::build::{Build, Limits, ReceiveError, check_label};
use super::super::pb::DecodeError;
use crate::sample::{Kind, Metadata, Name, Pair, Sample};

/// The data point flag "no recorded value" (`DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK`).
pub const NO_RECORDED_VALUE: u64 = 1;

/// A decoded request: the samples, and the data points rejected.
#[derive(Debug, Default)]
pub struct OtlpDecoded {
    pub samples: Vec<Sample>,
    /// Data points rejected (the partial-success answer's `rejected_data_points`).
    pub rejected: u64,
    /// Why, for the first few (`error_message`).
    pub error_message: String,
    /// Points flagged as having no recorded value, dropped.
    pub no_value: usize,
}

/// The attribute wasmon's `otlp` exporter carries a sample's resource in (OTLP has no such
/// field): a gauge or sum point that has it becomes a sample of that resource again, so that
/// wasmon to wasmon over OTLP is exact.
pub const RESOURCE_ATTRIBUTE: &str = "wasmon.resource";

/// The resource of OTLP samples: one string for the process, so that the samples of one
/// set of attributes are the same (set, resource) pair in every request (the store sink
/// remembers levels by that pair).
static EMPTY: std::sync::LazyLock<Arc<str>> = std::sync::LazyLock::new(|| Arc::from(""));

/// Reasons named in a partial-success `error_message`.
const REASONS_SHOWN: u64 = 5;

/// Aggregation temporality as OTLP numbers it.
pub const DELTA: u64 = 1;
pub const CUMULATIVE: u64 = 2;

/// What a metric's data is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Data {
    Gauge,
    Sum { temporality: u64, monotonic: bool },
    Histogram { temporality: u64 },
    Exponential { temporality: u64 },
    Summary,
}

/// What a gauge or sum point's sample carries besides its name and value: shared by the
/// points of one resource and attribute set.
#[derive(Clone, Debug)]
pub struct Carried {
    pub resource: Arc<str>,
    pub metadata: Metadata,
}

/// A metric's names, interned once for its points.
#[derive(Clone, Copy)]
pub struct Heads {
    name: Name,
    unit: Name,
    /// `_count`, `_sum`, `_bucket`, for the aggregates.
    parts: Option<[Name; 3]>,
    /// The kind of its plain values (gauge/sum) or counts (histograms); `None` when the
    /// temporality is unspecified (its points are rejected).
    kind: Option<Kind>,
}

/// A histogram point, explicit or exponential.
pub struct HistogramPoint<'p> {
    pub count: u64,
    pub sum: Option<f64>,
    pub buckets: Buckets<'p>,
}

pub enum Buckets<'p> {
    Explicit {
        bounds: &'p [f64],
        counts: &'p [u64],
    },
    Exponential {
        scale: i32,
        zero_count: u64,
        zero_threshold: f64,
        positive: (i32, &'p [u64]),
        negative: (i32, &'p [u64]),
    },
}

/// Turns a request's points into samples, counting rejections.
pub struct Emitter<'a> {
    pub b: Build<'a>,
    pub out: OtlpDecoded,
    /// OTLP samples have no resource (the store keys them by host and name; metadata tells
    /// series apart downstream): [`EMPTY`].
    empty: Arc<str>,
    /// Heads by name, unit and data: a request repeats a metric once per resource (host),
    /// and interning its names each time took the global interner's lock and compared text.
    heads: HashMap<(&'a str, &'a str, Data), Heads, foldhash::fast::FixedState>,
}

impl<'a> Emitter<'a> {
    /// For a body of `raw` bytes, at least `per_sample` of them a sample (see [`Build::new`]).
    pub fn new(limits: Limits, raw: usize, per_sample: usize) -> Emitter<'a> {
        Emitter {
            b: Build::new(limits, raw, per_sample),
            out: OtlpDecoded::default(),
            empty: EMPTY.clone(),
            heads: HashMap::default(),
        }
    }

    pub fn finish(mut self) -> OtlpDecoded {
        if self.out.rejected > REASONS_SHOWN {
            let _ = write!(
                self.out.error_message,
                "; and {} more",
                self.out.rejected - REASONS_SHOWN
            );
        }
        self.out.samples = self.b.samples;
        self.out
    }

    /// Rejects one data point of `metric`.
    pub fn reject(&mut self, metric: &str, why: &str) {
        self.out.rejected += 1;
        if self.out.rejected <= REASONS_SHOWN {
            if !self.out.error_message.is_empty() {
                self.out.error_message.push_str("; ");
            }
            let _ = write!(self.out.error_message, "metric {metric:?}: {why}");
        }
    }

    pub fn heads(
        &mut self,
        name: &'a str,
        unit: &'a str,
        data: Data,
    ) -> Result<Heads, DecodeError> {
        if let Some(h) = self.heads.get(&(name, unit, data)) {
            return Ok(*h);
        }
        let h = self.new_heads(name, unit, data)?;
        self.heads.insert((name, unit, data), h);
        Ok(h)
    }

    /// A metric's heads, made anew (the request's own map and the receiver's memory are
    /// the callers').
    pub fn new_heads(&mut self, name: &str, unit: &str, data: Data) -> Result<Heads, DecodeError> {
        if name.is_empty() {
            return Err(DecodeError::new("a metric without a name"));
        }
        check_label(name, "a metric name")?;
        let n = self.b.name("name", name)?;
        let unit = self.b.name("unit", unit)?;
        let by = |t: u64| match t {
            DELTA => Some(Kind::Delta),
            CUMULATIVE => Some(Kind::Cumulative),
            _ => None,
        };
        let (kind, aggregate) = match data {
            Data::Gauge => (Some(Kind::Gauge), false),
            Data::Sum {
                temporality: CUMULATIVE,
                monotonic: false,
            } => (Some(Kind::Gauge), false),
            Data::Sum { temporality, .. } => (by(temporality), false),
            Data::Histogram { temporality } | Data::Exponential { temporality } => {
                (by(temporality), true)
            }
            Data::Summary => (Some(Kind::Cumulative), true),
        };
        let parts = if aggregate {
            let mut part = |s: &str| self.b.name("name", &format!("{name}{s}"));
            Some([part("_count")?, part("_sum")?, part("_bucket")?])
        } else {
            None
        };
        Ok(Heads {
            name: n,
            unit,
            parts,
            kind,
        })
    }

    /// The kind of `h`'s points, or the point's rejection.
    fn kind(&mut self, h: &Heads) -> Option<Kind> {
        if h.kind.is_none() {
            self.reject(&h.name, "aggregation temporality unspecified");
        }
        h.kind
    }

    fn sample(&self, name: Name, h: &Heads, kind: Kind, meta: Metadata, ts: i64, v: f64) -> Sample {
        Sample {
            name,
            resource: self.empty.clone(),
            unit: h.unit,
            kind,
            value: v,
            timestamp_ns: ts,
            metadata: meta,
        }
    }

    /// `pairs` (a point's merged attributes) as what a gauge or sum point's sample carries:
    /// the `wasmon.resource` attribute, if any, is its resource and leaves the metadata.
    pub fn carried(&mut self, mut pairs: Vec<Pair>) -> Carried {
        let mut resource = None;
        pairs.retain(|(k, v)| {
            if &**k != RESOURCE_ATTRIBUTE {
                return true;
            }
            resource.get_or_insert_with(|| v.clone());
            false
        });
        Carried {
            resource: resource.unwrap_or_else(|| self.empty.clone()),
            metadata: self.b.metadata(pairs),
        }
    }

    /// A gauge or sum point; `value` `None` when the point has none.
    pub fn number(
        &mut self,
        h: &Heads,
        c: &Carried,
        ts: Option<i64>,
        value: Option<f64>,
    ) -> Result<(), ReceiveError> {
        let Some(kind) = self.kind(h) else {
            return Ok(());
        };
        let Some(v) = value else {
            self.reject(&h.name, "a number data point without a value");
            return Ok(());
        };
        let Some(ts) = self.time(h, ts) else {
            return Ok(());
        };
        self.b.push(Sample {
            name: h.name,
            resource: c.resource.clone(),
            unit: h.unit,
            kind,
            value: v,
            timestamp_ns: ts,
            metadata: c.metadata.clone(),
        })
    }

    fn time(&mut self, h: &Heads, ts: Option<i64>) -> Option<i64> {
        match ts {
            Some(t) if t > 0 => Some(t),
            _ => {
                self.reject(&h.name, "time_unix_nano is 0 or past 2262");
                None
            }
        }
    }

    /// A histogram point (explicit or exponential bounds).
    pub fn histogram(
        &mut self,
        h: &Heads,
        meta: &[Pair],
        ts: Option<i64>,
        p: HistogramPoint,
    ) -> Result<(), ReceiveError> {
        let Some(kind) = self.kind(h) else {
            return Ok(());
        };
        let Some(ts) = self.time(h, ts) else {
            return Ok(());
        };
        let [count, sum, bucket] = h.parts.expect("aggregate metrics have parts");
        // Bounds and per-bucket counts, checked before anything is emitted.
        let mut les: Vec<(f64, u64)> = Vec::new();
        match p.buckets {
            Buckets::Explicit { bounds, counts } => {
                if !counts.is_empty() && counts.len() != bounds.len() + 1 {
                    self.reject(
                        &h.name,
                        &format!(
                            "{} bucket counts for {} explicit bounds (must be bounds + 1)",
                            counts.len(),
                            bounds.len()
                        ),
                    );
                    return Ok(());
                }
                les.extend(bounds.iter().copied().zip(counts.iter().copied()));
            }
            Buckets::Exponential {
                scale,
                zero_count,
                zero_threshold,
                positive,
                negative,
            } => {
                if !(-10..=20).contains(&scale) {
                    self.reject(&h.name, &format!("scale {scale} outside -10..=20"));
                    return Ok(());
                }
                self.b.room(positive.1.len() + negative.1.len() + 4)?;
                // Bucket `i` holds (base^i, base^(i+1)], base = 2^(2^-scale); negative ones
                // mirror it, so the most negative comes first.
                let bound = |i: i64| (i as f64 * (-scale as f64).exp2()).exp2();
                let (off, counts) = negative;
                for (k, &c) in counts.iter().enumerate().rev() {
                    les.push((-bound(i64::from(off) + k as i64), c));
                }
                les.push((zero_threshold, zero_count));
                let (off, counts) = positive;
                for (k, &c) in counts.iter().enumerate() {
                    les.push((bound(i64::from(off) + k as i64 + 1), c));
                }
            }
        }
        self.b.room(les.len() + 3)?;
        let meta_of = |extra: Option<Pair>| {
            let mut v = Vec::with_capacity(meta.len() + 1);
            v.extend_from_slice(meta);
            v.extend(extra);
            Metadata::new(v)
        };
        let plain = meta_of(None);
        let s = self.sample(count, h, kind, plain.clone(), ts, p.count as f64);
        self.b.push(s)?;
        if let Some(v) = p.sum {
            let s = self.sample(sum, h, kind, plain, ts, v);
            self.b.push(s)?;
        }
        if les.is_empty() {
            return Ok(());
        }
        let le: Arc<str> = Arc::from("le");
        let mut acc = 0u64;
        for (bound, c) in les {
            acc = acc.saturating_add(c);
            let m = meta_of(Some((le.clone(), format_le(bound).into())));
            let s = self.sample(bucket, h, kind, m, ts, acc as f64);
            self.b.push(s)?;
        }
        let m = meta_of(Some((le, "+Inf".into())));
        let s = self.sample(bucket, h, kind, m, ts, p.count as f64);
        self.b.push(s)
    }

    /// A summary point: count, sum and one sample per quantile.
    pub fn summary(
        &mut self,
        h: &Heads,
        meta: &[Pair],
        ts: Option<i64>,
        (count, sum): (u64, f64),
        quantiles: &[(f64, f64)],
    ) -> Result<(), ReceiveError> {
        let Some(ts) = self.time(h, ts) else {
            return Ok(());
        };
        let [c, s, _] = h.parts.expect("aggregate metrics have parts");
        self.b.room(quantiles.len() + 2)?;
        let plain = Metadata::new(meta.to_vec());
        let x = self.sample(c, h, Kind::Cumulative, plain.clone(), ts, count as f64);
        self.b.push(x)?;
        let x = self.sample(s, h, Kind::Cumulative, plain, ts, sum);
        self.b.push(x)?;
        let key: Arc<str> = Arc::from("quantile");
        for &(q, v) in quantiles {
            let mut m = meta.to_vec();
            m.push((key.clone(), format_le(q).into()));
            let x = self.sample(h.name, h, Kind::Gauge, Metadata::new(m), ts, v);
            self.b.push(x)?;
        }
        Ok(())
    }

    /// Resource pairs with a point's own on top (a point's key replaces its resource's).
    pub fn merge(&self, resource: &[Pair], point: Vec<Pair>) -> Vec<Pair> {
        if resource.is_empty() {
            return point;
        }
        let mut v: Vec<Pair> = resource
            .iter()
            .filter(|(k, _)| !point.iter().any(|(pk, _)| pk == k))
            .cloned()
            .collect();
        v.extend(point);
        v
    }
}

/// A bucket bound as Prometheus writes `le` and `quantile`: `0.5`, `1`, `+Inf`, `-Inf`.
pub fn format_le(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// An attribute key as metadata: `host.name` is the `hostname` the store sink reads.
pub fn meta_key(k: &str) -> &str {
    if k == "host.name" { "hostname" } else { k }
}

/// A nanosecond timestamp from OTLP's unsigned one (`None` past i64).
pub fn ts(ns: u64) -> Option<i64> {
    i64::try_from(ns).ok()
}

// ---- protobuf -------------------------------------------------------------------------
