//! The OTLP encoding: parameters ([`Config`]) and samples into one protobuf
//! `ExportMetricsServiceRequest` ([`encode_request`]), written by hand (a varint and
//! length-delimited writer; no protobuf library in the guest).
//!
//! The inverse of wasmon's OTLP receiver (`runtime/src/ingest/otlp.rs`), so that a round trip
//! through `/api/pipelines/NAME/otlp` gives back the samples sent:
//! - one `ResourceMetrics` (attributes: the `resource` parameter), one `ScopeMetrics` (scope
//!   `wasmon`, this crate's version), one `Metric` per distinct (name, unit, kind) in order of
//!   first appearance, its points in input order;
//! - gauge → `Gauge`; cumulative → `Sum { is_monotonic: true, CUMULATIVE }`; delta →
//!   `Sum { is_monotonic: false, DELTA }` (not monotonic: Ceilometer's deltas can be negative);
//! - a point: `time_unix_nano` the sample's timestamp, `as_double` its value, attributes its
//!   metadata as strings (`hostname` as OTel's `host.name`, which the receiver maps back) and
//!   `wasmon.resource` = its resource when that is not empty.
//!
//! Sizes are computed before anything is written (protobuf prefixes each message with its
//! length), so the body is written once, into a vector of exactly its size.
//!
//! This file is also compiled into the test-only `trap_third` guest (by `#[path]`): linking
//! this crate there would link its component exports twice.

use std::borrow::Borrow;
use std::collections::HashMap;

use wasmon_guest::exporter::Request;
use wasmon_guest::params::{self, ParamError};
use wasmon_guest::{FxBuildHasher, Kind, Metadata, Params, Sample, Str};

/// What an OTLP/HTTP receiver expects for a protobuf body.
pub const CONTENT_TYPE: &str = "application/x-protobuf";

/// The attribute that carries a sample's resource (OTLP points have none of their own).
pub const RESOURCE_KEY: &str = "wasmon.resource";

/// `AggregationTemporality` as OTLP numbers it.
const DELTA: u64 = 1;
const CUMULATIVE: u64 = 2;

/// The exporter's parameters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    /// Resource attributes of every request (`resource`: a JSON object of strings), in key
    /// order.
    pub resource: Vec<(String, String)>,
    /// Appended to the sink's URL (`suffix`; default none: the URL is the whole endpoint,
    /// `http://collector:4318/v1/metrics`).
    pub suffix: String,
}

impl Config {
    pub const KNOWN: &[&str] = &["resource", "suffix"];

    pub fn from_params(p: &Params) -> Result<Config, ParamError> {
        params::refuse_unknown(p, Self::KNOWN)?;
        Ok(Config {
            resource: params::string_map(p, "resource")?,
            suffix: params::string(p, "suffix", "")?,
        })
    }
}

/// The one request that carries `samples` (none for no samples).
pub fn request<S: Borrow<Sample>>(
    samples: impl IntoIterator<Item = S>,
    cfg: &Config,
) -> Option<Request> {
    let plan = Plan::new(samples);
    (!plan.metrics.is_empty()).then(|| Request {
        suffix: cfg.suffix.clone(),
        content_type: CONTENT_TYPE.into(),
        headers: Vec::new(),
        body: plan.write(cfg),
    })
}

/// The `ExportMetricsServiceRequest` that carries `samples` (an empty one for none).
pub fn encode_request<S: Borrow<Sample>>(
    samples: impl IntoIterator<Item = S>,
    cfg: &Config,
) -> Vec<u8> {
    Plan::new(samples).write(cfg)
}

/// OTel's name for the host: the receiver maps `host.name` back to `hostname`, the key
/// wasmon's store sink reads.
fn attribute_key(k: &str) -> &str {
    if k == "hostname" { "host.name" } else { k }
}

/// A request's metrics, their points and the sizes of everything, from one pass over the
/// samples (which need not be kept: a point holds all it needs).
struct Plan {
    metrics: Vec<Metric>,
    /// Every distinct (metadata set, resource)'s attributes, encoded once: the samples of a
    /// batch share a few of them (a set and a resource per host, say), so a point's
    /// attributes are one copy (in a guest each copy of variable length is a call out of
    /// the sandbox). Entry 0 is the empty one.
    attrs: Vec<u8>,
    spans: Vec<(u32, u32)>,
    /// The strings and sets whose addresses key the lookups, kept alive so that no other
    /// allocation takes their address while the plan is built.
    alive: Vec<(Str, Metadata)>,
}

struct Metric {
    name: Str,
    unit: Str,
    kind: Kind,
    points: Vec<Point>,
    /// Size of the `Metric` message.
    size: usize,
    /// Size of its `Gauge` or `Sum` message.
    data: usize,
}

struct Point {
    timestamp_ns: i64,
    value: f64,
    /// Index into [`Plan::spans`].
    attrs: u32,
    /// Size of its `NumberDataPoint` message.
    size: u32,
}

/// Finds things by the addresses of a sample's shared strings and metadata: the SDK hands
/// out one allocation per distinct string and set, so an address seen before (and kept
/// alive) is the same text; a new one is looked up by content once.
type ByAddress = HashMap<(usize, usize, u8), u32, FxBuildHasher>;

/// A shared string's address.
fn addr(s: &Str) -> usize {
    s.as_ptr() as usize
}

impl Plan {
    fn new<S: Borrow<Sample>>(samples: impl IntoIterator<Item = S>) -> Plan {
        let mut plan = Plan {
            metrics: Vec::new(),
            attrs: Vec::new(),
            spans: vec![(0, 0)],
            alive: Vec::new(),
        };
        let mut metric_at = ByAddress::default();
        let mut attrs_at = ByAddress::default();
        for s in samples {
            let s = s.borrow();
            let key = (addr(&s.name), addr(&s.unit), s.kind as u8);
            let m = match metric_at.get(&key) {
                Some(&m) => m,
                None => {
                    let m = plan.metric(s);
                    metric_at.insert(key, m);
                    plan.alive.push((s.name.clone(), Metadata::default()));
                    plan.alive.push((s.unit.clone(), Metadata::default()));
                    m
                }
            };
            let attrs = match (s.metadata.is_empty(), s.resource.is_empty()) {
                (true, true) => 0,
                _ => {
                    let key = (s.metadata.0.as_ptr() as usize, addr(&s.resource), 0);
                    match attrs_at.get(&key) {
                        Some(&a) => a,
                        None => {
                            let a = plan.encode_attrs(s);
                            attrs_at.insert(key, a);
                            plan.alive.push((s.resource.clone(), s.metadata.clone()));
                            a
                        }
                    }
                }
            };
            // Two fixed64 fields and the attributes.
            let size = 2 * 9 + plan.spans[attrs as usize].1;
            plan.metrics[m as usize].points.push(Point {
                timestamp_ns: s.timestamp_ns,
                value: s.value,
                attrs,
                size,
            });
        }
        for m in &mut plan.metrics {
            let head = field(m.name.len())
                + if m.unit.is_empty() {
                    0
                } else {
                    field(m.unit.len())
                };
            let points: usize = m.points.iter().map(|p| field(p.size as usize)).sum();
            // Two-byte varint fields: temporality, and is_monotonic when true.
            m.data = points
                + match m.kind {
                    Kind::Gauge => 0,
                    Kind::Cumulative => 4,
                    Kind::Delta => 2,
                };
            m.size = head + field(m.data);
        }
        plan
    }

    /// The index of `s`'s metric, added if new.
    fn metric(&mut self, s: &Sample) -> u32 {
        let same = |m: &Metric| m.kind == s.kind && m.name == s.name && m.unit == s.unit;
        if let Some(at) = self.metrics.iter().position(same) {
            return at as u32;
        }
        self.metrics.push(Metric {
            name: s.name.clone(),
            unit: s.unit.clone(),
            kind: s.kind,
            points: Vec::new(),
            size: 0,
            data: 0,
        });
        self.metrics.len() as u32 - 1
    }

    /// Encodes `s`'s attributes (NumberDataPoint.attributes = 7): its metadata, then its
    /// resource.
    fn encode_attrs(&mut self, s: &Sample) -> u32 {
        let mut w = Writer(std::mem::take(&mut self.attrs));
        let start = w.0.len();
        for (k, v) in s.metadata.iter() {
            w.kv(7, attribute_key(k), v);
        }
        if !s.resource.is_empty() {
            w.kv(7, RESOURCE_KEY, &s.resource);
        }
        self.attrs = w.0;
        self.spans
            .push((start as u32, (self.attrs.len() - start) as u32));
        self.spans.len() as u32 - 1
    }

    fn write(&self, cfg: &Config) -> Vec<u8> {
        let resource: usize = cfg.resource.iter().map(|(k, v)| field(kv(k, v))).sum();
        let scope = field("wasmon".len()) + field(env!("CARGO_PKG_VERSION").len());
        let metrics: usize = self.metrics.iter().map(|m| field(m.size)).sum();
        let scope_metrics = field(scope) + metrics;
        let mut resource_metrics = field(scope_metrics);
        if resource > 0 {
            resource_metrics += field(resource);
        }
        let mut w = Writer(Vec::with_capacity(field(resource_metrics)));
        // ExportMetricsServiceRequest.resource_metrics = 1
        w.len(1, resource_metrics);
        if resource > 0 {
            // ResourceMetrics.resource = 1; Resource.attributes = 1
            w.len(1, resource);
            for (k, v) in &cfg.resource {
                w.kv(1, k, v);
            }
        }
        // ResourceMetrics.scope_metrics = 2; ScopeMetrics.scope = 1 (name = 1, version = 2)
        w.len(2, scope_metrics);
        w.len(1, scope);
        w.bytes(1, b"wasmon");
        w.bytes(2, env!("CARGO_PKG_VERSION").as_bytes());
        for m in &self.metrics {
            // ScopeMetrics.metrics = 2
            w.len(2, m.size);
            w.bytes(1, m.name.as_bytes());
            if !m.unit.is_empty() {
                w.bytes(3, m.unit.as_bytes());
            }
            // Metric.gauge = 5 or Metric.sum = 7; then data_points = 1 of either
            w.len(if m.kind == Kind::Gauge { 5 } else { 7 }, m.data);
            for p in &m.points {
                w.len(1, p.size as usize);
                // NumberDataPoint: time_unix_nano = 3, as_double = 4 (fixed64), attributes
                w.fixed64(3, p.timestamp_ns as u64);
                w.fixed64(4, p.value.to_bits());
                let (start, len) = self.spans[p.attrs as usize];
                w.0.extend_from_slice(&self.attrs[start as usize..][..len as usize]);
            }
            match m.kind {
                Kind::Gauge => {}
                // Sum.aggregation_temporality = 2, Sum.is_monotonic = 3
                Kind::Cumulative => {
                    w.varint_field(2, CUMULATIVE);
                    w.varint_field(3, 1);
                }
                Kind::Delta => w.varint_field(2, DELTA),
            }
        }
        debug_assert_eq!(w.0.len(), w.0.capacity());
        w.0
    }
}

/// Size of a `KeyValue { key, value: AnyValue { string_value } }`.
fn kv(k: &str, v: &str) -> usize {
    field(k.len()) + field(field(v.len()))
}

/// Size of a length-delimited field (fields 1 to 15: a one-byte tag) with `len` bytes.
fn field(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

fn varint_len(v: u64) -> usize {
    // 7 bits a byte; 0 takes one.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

struct Writer(Vec<u8>);

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn tag(&mut self, f: u8, wire: u8) {
        self.0.push(f << 3 | wire);
    }

    fn len(&mut self, f: u8, len: usize) {
        self.tag(f, 2);
        self.varint(len as u64);
    }

    fn bytes(&mut self, f: u8, b: &[u8]) {
        self.len(f, b.len());
        self.0.extend_from_slice(b);
    }

    fn fixed64(&mut self, f: u8, v: u64) {
        self.tag(f, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn varint_field(&mut self, f: u8, v: u64) {
        self.tag(f, 0);
        self.varint(v);
    }

    /// A `KeyValue` with a string value as field `f`.
    fn kv(&mut self, f: u8, k: &str, v: &str) {
        self.len(f, kv(k, v));
        self.bytes(1, k.as_bytes());
        self.len(2, field(v.len()));
        self.bytes(1, v.as_bytes());
    }
}
