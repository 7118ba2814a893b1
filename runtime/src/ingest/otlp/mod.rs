//! OTLP/HTTP metrics (`ExportMetricsServiceRequest`, protobuf or JSON) into samples:
//! - resource and data point attributes become metadata (a point's own win over its
//!   resource's), `host.name` as `hostname`, the key the store sink reads the host from;
//! - gauge → gauge; sum: delta temporality → delta, cumulative monotonic → cumulative,
//!   cumulative non-monotonic (an up-down counter) → gauge;
//! - histograms and exponential histograms → `NAME_count`, `NAME_sum` and `NAME_bucket` with
//!   an `le` metadata (the upper bound, `+Inf` last), counts cumulative across buckets as
//!   Prometheus has them, so buckets of one bound sum across series and hosts; an
//!   exponential histogram's buckets get their bounds from its scale (negative buckets, then
//!   the zero bucket at `le` = its threshold, then positive ones); kind by temporality;
//! - summary → `NAME_count`, `NAME_sum` (cumulative) and `NAME` with a `quantile` metadata
//!   per quantile (gauge);
//! - the metric's unit is the samples' unit; a point flagged "no recorded value" is dropped.
//!
//! A body that is not a request is refused whole ([`ReceiveError`]); a data point that is a
//! request's but that wasmon cannot take (no value, unspecified temporality, bucket counts
//! that do not fit the bounds) is rejected alone and counted for the partial-success answer.

use std::sync::Arc;

use super::build::{Limits, MAX_LABELS, Nested, ReceiveError, check_label};
use super::pb::{DecodeError, Reader, Wire, extend_packed, for_each_packed, utf8, zigzag};
use crate::sample::Pair;
use crate::util::eq_bytes;
use crate::util::{pb_bytes, pb_varint};

mod emit;
mod json;
mod recall;
pub use emit::*;
pub use json::decode_json;
pub use recall::Memory;
use recall::{Recall, Resource, heads_key, point_key};

/// Decodes an `ExportMetricsServiceRequest` protobuf (already inflated), on its own.
pub fn decode_protobuf(raw: &[u8], limits: Limits) -> Result<OtlpDecoded, ReceiveError> {
    decode_protobuf_with(raw, limits, &Memory::default())
}

/// Decodes a protobuf request with what earlier ones taught `memory` (and teaches it this
/// one's).
pub fn decode_protobuf_with(
    raw: &[u8],
    limits: Limits,
    memory: &Memory,
) -> Result<OtlpDecoded, ReceiveError> {
    let mut x = Decoder {
        e: Emitter::new(limits, raw.len(), 24),
        recall: memory.recall(),
        points: Vec::new(),
        prev: Vec::new(),
        cur: Vec::new(),
    };
    let mut r = Reader::new(raw);
    let mut ri = 0;
    while let Some((f, v)) = r.next_field()? {
        if f == 1 {
            resource_metrics(&mut x, v.bytes("resource_metrics")?)
                .map_err(|e| e.at("resource_metrics", Some(ri)))?;
            ri += 1;
        }
    }
    x.recall.keep();
    Ok(x.e.finish())
}

/// One protobuf request being decoded.
struct Decoder<'a, 'm> {
    e: Emitter<'a>,
    recall: Recall<'m>,
    /// A metric's points (reused).
    points: Vec<&'a [u8]>,
    /// The previous scope's metrics by position, and the current scope's: a batch of many
    /// resources repeats one list of metrics in one order, and comparing a metric's name
    /// with the one at its position costs less than hashing it.
    prev: Vec<Seen<'a>>,
    cur: Vec<Seen<'a>>,
}

/// A metric as a scope had it.
struct Seen<'a> {
    name: &'a [u8],
    unit: &'a [u8],
    data: Data,
    heads: Heads,
}

fn resource_metrics<'a>(x: &mut Decoder<'a, '_>, rm: &'a [u8]) -> Result<(), Nested> {
    // The resource may follow its scopes on the wire: found first. One `resource` field (or
    // none: the empty resource) is the key it is remembered by.
    let (mut found, mut fields) = (&[][..], 0);
    let mut r = Reader::new(rm);
    while let Some((f, v)) = r.next_field()? {
        if f == 1 {
            found = v.bytes("resource")?;
            fields += 1;
        }
    }
    let known = if fields <= 1 {
        x.recall.resources.get(found).cloned()
    } else {
        None
    };
    let resource = match known {
        Some(res) => res,
        None => {
            let res = resource(&mut x.e, &x.recall, rm)?;
            if fields <= 1 {
                x.recall.resources.learn(found, &res);
            }
            res
        }
    };
    let mut r = Reader::new(rm);
    let mut si = 0;
    while let Some((f, v)) = r.next_field()? {
        if f != 2 {
            continue;
        }
        let mut sr = Reader::new(v.bytes("scope_metrics")?);
        std::mem::swap(&mut x.prev, &mut x.cur);
        x.cur.clear();
        let mut mi = 0;
        while let Some((f, v)) = sr
            .next_field()
            .map_err(|x| x.at("scope_metrics", Some(si)))?
        {
            if f == 2 {
                metric(x, v.bytes("metrics")?, mi, &resource).map_err(|e| {
                    e.within("metrics", Some(mi))
                        .within("scope_metrics", Some(si))
                })?;
                mi += 1;
            }
        }
        si += 1;
    }
    Ok(())
}

/// The resource attributes of every `resource` field of a `ResourceMetrics`, decoded.
fn resource<'a>(e: &mut Emitter<'a>, recall: &Recall, rm: &'a [u8]) -> Result<Resource, Nested> {
    let mut pairs = Vec::new();
    let mut r = Reader::new(rm);
    while let Some((f, v)) = r.next_field()? {
        if f == 1 {
            let mut rr = Reader::new(v.bytes("resource")?);
            let mut i = 0;
            while let Some((f, v)) = rr.next_field()? {
                if f == 1 {
                    attribute(e, v, &mut pairs)
                        .map_err(|x| x.at("attributes", Some(i)).at("resource", None))?;
                    i += 1;
                }
            }
        }
    }
    let plain = e.carried(pairs.clone());
    Ok(Resource {
        id: recall.next_id(),
        pairs: pairs.into(),
        plain,
    })
}

/// A `KeyValue` appended to `out` as a metadata pair.
fn attribute<'a>(
    e: &mut Emitter<'a>,
    kv: Wire<'a>,
    out: &mut Vec<Pair>,
) -> Result<(), DecodeError> {
    let mut r = Reader::new(kv.bytes("attributes")?);
    let (mut key, mut value) = ("", None);
    while let Some((f, v)) = r.next_field()? {
        match f {
            1 => key = v.str("key")?,
            2 => value = Some(any_value(e, v.bytes("value")?).map_err(|x| x.at("value", None))?),
            _ => {}
        }
    }
    check_label(key, "an attribute key").map_err(|x| x.at("key", None))?;
    if out.len() >= MAX_LABELS {
        return Err(DecodeError::new(format!(
            "more than {MAX_LABELS} attributes"
        )));
    }
    let v = value.unwrap_or_else(|| Arc::from(""));
    check_label(&v, "an attribute value").map_err(|x| x.at("value", None))?;
    out.push((e.b.arc(meta_key(key)), v));
    Ok(())
}

/// An `AnyValue` as metadata text: strings as they are, numbers and booleans as their
/// text, bytes in base64 (as OTLP/JSON has them), arrays and maps as JSON.
fn any_value<'a>(e: &mut Emitter<'a>, b: &'a [u8]) -> Result<Arc<str>, DecodeError> {
    let mut r = Reader::new(b);
    let mut out: Option<Arc<str>> = None;
    while let Some((f, v)) = r.next_field()? {
        out = Some(match f {
            1 => e.b.arc(v.str("string_value")?),
            2 => Arc::from(if v.varint("bool_value")? != 0 {
                "true"
            } else {
                "false"
            }),
            3 => e.b.owned((v.varint("int_value")? as i64).to_string()),
            4 => e.b.owned(v.double("double_value")?.to_string()),
            5 | 6 => e.b.owned(any_json(v, f)?.to_string()),
            7 => {
                use base64::Engine;
                let s = base64::engine::general_purpose::STANDARD.encode(v.bytes("bytes_value")?);
                e.b.owned(s)
            }
            _ => continue,
        });
    }
    Ok(out.unwrap_or_else(|| Arc::from("")))
}

/// An array (field 5) or key-value list (6) as JSON.
fn any_json(v: Wire, field: u32) -> Result<serde_json::Value, DecodeError> {
    use serde_json::Value as J;
    fn scalar(b: &[u8]) -> Result<J, DecodeError> {
        let mut r = Reader::new(b);
        let mut out = J::Null;
        while let Some((f, v)) = r.next_field()? {
            out = match f {
                1 => J::from(v.str("string_value")?),
                2 => J::from(v.varint("bool_value")? != 0),
                3 => J::from(v.varint("int_value")? as i64),
                4 => J::from(v.double("double_value")?),
                5 | 6 => any_json(v, f)?,
                7 => J::from(hex::encode(v.bytes("bytes_value")?)),
                _ => continue,
            };
        }
        Ok(out)
    }
    let mut r = Reader::new(v.bytes("value")?);
    if field == 5 {
        let mut a = Vec::new();
        while let Some((f, v)) = r.next_field()? {
            if f == 1 {
                a.push(scalar(v.bytes("values")?)?);
            }
        }
        return Ok(J::Array(a));
    }
    let mut m = serde_json::Map::new();
    while let Some((f, v)) = r.next_field()? {
        if f == 1 {
            let mut kv = Reader::new(v.bytes("values")?);
            let (mut k, mut val) = ("", J::Null);
            while let Some((f, v)) = kv.next_field()? {
                match f {
                    1 => k = v.str("key")?,
                    2 => val = scalar(v.bytes("value")?)?,
                    _ => {}
                }
            }
            m.insert(k.to_string(), val);
        }
    }
    Ok(J::Object(m))
}

/// Metric `mi` of its scope.
fn metric<'a>(
    x: &mut Decoder<'a, '_>,
    m: &'a [u8],
    mi: usize,
    resource: &Resource,
) -> Result<(), Nested> {
    // Name and unit as bytes: checked as text when the metric is not known already.
    let (mut name, mut unit, mut data) = (&[][..], &[][..], None);
    let mut r = Reader::new(m);
    while let Some((f, v)) = r.next_field()? {
        match f {
            1 => name = v.bytes("name")?,
            3 => unit = v.bytes("unit")?,
            5 | 7 | 9 | 10 | 11 => data = Some((f, v.bytes("data")?)),
            _ => {}
        }
    }
    let Some((kind, body)) = data else {
        utf8(name, "name")?;
        utf8(unit, "unit")?;
        return Ok(());
    };
    // The oneof's points, temporality and monotonicity.
    let mut points = std::mem::take(&mut x.points);
    points.clear();
    let (mut temporality, mut monotonic) = (0, false);
    let mut r = Reader::new(body);
    while let Some((f, v)) = r.next_field()? {
        match f {
            1 => points.push(v.bytes("data_points")?),
            2 => temporality = v.varint("aggregation_temporality")?,
            3 => monotonic = v.varint("is_monotonic")? != 0,
            _ => {}
        }
    }
    let d = match kind {
        5 => Data::Gauge,
        7 => Data::Sum {
            temporality,
            monotonic,
        },
        9 => Data::Histogram { temporality },
        10 => Data::Exponential { temporality },
        _ => Data::Summary,
    };
    let field = match kind {
        5 => "gauge",
        7 => "sum",
        9 => "histogram",
        10 => "exponential_histogram",
        _ => "summary",
    };
    let h = heads(x, name, unit, d, mi)?;
    for (pi, &p) in points.iter().enumerate() {
        let pairs = &resource.pairs[..];
        let res = match d {
            Data::Gauge | Data::Sum { .. } => number_point(x, &h, p, resource),
            _ => summed_point(&mut x.e, &h, p, pairs, d),
        };
        res.map_err(|e| e.within("data_points", Some(pi)).within(field, None))?;
    }
    x.points = points;
    Ok(())
}

/// A metric's heads: the previous scope's at the same position, the memory's, or made anew.
fn heads<'a>(
    x: &mut Decoder<'a, '_>,
    name: &'a [u8],
    unit: &'a [u8],
    d: Data,
    mi: usize,
) -> Result<Heads, Nested> {
    let h = match x.prev.get(mi) {
        Some(s) if eq_bytes(s.name, name) && eq_bytes(s.unit, unit) && s.data == d => s.heads,
        _ => {
            let key = heads_key(&mut x.recall.key, name, unit, d);
            match x.recall.heads.get(key) {
                Some(h) => *h,
                None => {
                    let h =
                        x.e.heads(utf8(name, "name")?, utf8(unit, "unit")?, d)
                            .map_err(|e| e.at("name", None))?;
                    let key = heads_key(&mut x.recall.key, name, unit, d);
                    x.recall.heads.learn(key, &h);
                    h
                }
            }
        }
    };
    x.cur.push(Seen {
        name,
        unit,
        data: d,
        heads: h,
    });
    Ok(h)
}

/// Appends one of a point's attributes to `out`.
fn point_attrs<'a>(
    e: &mut Emitter<'a>,
    v: Wire<'a>,
    out: &mut Vec<Pair>,
) -> Result<(), DecodeError> {
    let i = out.len();
    attribute(e, v, out).map_err(|x| x.at("attributes", Some(i)))
}

fn number_point<'a>(
    x: &mut Decoder<'a, '_>,
    h: &Heads,
    p: &'a [u8],
    resource: &Resource,
) -> Result<(), Nested> {
    let (e, recall) = (&mut x.e, &mut x.recall);
    let (mut ts_, mut value, mut flags) = (0u64, None, 0);
    // The attributes' bytes: with the resource's id, the key of what the point carries.
    let span = Reader::new(p).fields_spanning(7, |f, v| {
        match f {
            7 => {
                v.bytes("attributes")?;
            }
            3 => ts_ = v.fixed64("time_unix_nano")?,
            4 => value = Some(v.double("as_double")?),
            6 => value = Some(v.fixed64("as_int")? as i64 as f64),
            8 => flags = v.varint("flags")?,
            _ => {}
        }
        Ok::<_, Nested>(())
    })?;
    let learned;
    let attrs = span.bytes(p);
    let known = match attrs {
        _ if span.is_empty() => Some(&resource.plain),
        Some(a) => recall
            .points
            .get(point_key(&mut recall.key, resource.id, a)),
        None => None,
    };
    let c = match known {
        Some(c) => c,
        None => {
            let mut pairs = Vec::new();
            let mut r = Reader::new(p);
            while let Some((f, v)) = r.next_field()? {
                if f == 7 {
                    point_attrs(e, v, &mut pairs)?;
                }
            }
            learned = e.carried(e.merge(&resource.pairs, pairs));
            if let Some(a) = attrs {
                let key = point_key(&mut recall.key, resource.id, a);
                recall.points.learn(key, &learned);
            }
            &learned
        }
    };
    if flags & NO_RECORDED_VALUE != 0 {
        e.out.no_value += 1;
        return Ok(());
    }
    e.number(h, c, ts(ts_), value)?;
    Ok(())
}

/// The fields a histogram, exponential histogram and summary point share (attributes and
/// flags under each message's own numbers), read as they come.
struct Summed {
    attrs_field: u32,
    flags_field: u32,
    attrs: Vec<Pair>,
    time: u64,
    count: u64,
    sum: Option<f64>,
    flags: u64,
}

impl Summed {
    fn new(attrs_field: u32, flags_field: u32) -> Summed {
        Summed {
            attrs_field,
            flags_field,
            attrs: Vec::new(),
            time: 0,
            count: 0,
            sum: None,
            flags: 0,
        }
    }

    /// Reads field `f` if it is one of these; skips it otherwise.
    fn read<'a>(&mut self, e: &mut Emitter<'a>, f: u32, v: Wire<'a>) -> Result<(), Nested> {
        match f {
            _ if f == self.attrs_field => point_attrs(e, v, &mut self.attrs)?,
            _ if f == self.flags_field => self.flags = v.varint("flags")?,
            3 => self.time = v.fixed64("time_unix_nano")?,
            4 => self.count = v.fixed64("count")?,
            5 => self.sum = Some(v.double("sum")?),
            _ => {}
        }
        Ok(())
    }

    /// The point's metadata (its attributes after the resource's) and time; `None`, counted,
    /// for a point flagged as having no recorded value.
    fn recorded(&mut self, e: &mut Emitter, resource: &[Pair]) -> Option<(Vec<Pair>, Option<i64>)> {
        if self.flags & NO_RECORDED_VALUE != 0 {
            e.out.no_value += 1;
            return None;
        }
        Some((
            e.merge(resource, std::mem::take(&mut self.attrs)),
            ts(self.time),
        ))
    }
}

/// What a histogram, exponential histogram or summary point carries beyond [`Summed`].
enum Own {
    Explicit {
        counts: Vec<u64>,
        bounds: Vec<f64>,
    },
    Exponential {
        scale: i32,
        zero_count: u64,
        zero_threshold: f64,
        positive: (i32, Vec<u64>),
        negative: (i32, Vec<u64>),
    },
    Summary {
        quantiles: Vec<(f64, f64)>,
    },
}

impl Own {
    /// Reads field `f` if it is this kind's own: whether it was.
    fn read(&mut self, f: u32, v: Wire) -> Result<bool, Nested> {
        match (self, f) {
            (Own::Explicit { counts, .. }, 6) => extend_packed(counts, v, "bucket_counts", true)?,
            (Own::Explicit { bounds, .. }, 7) => {
                for_each_packed(v, "explicit_bounds", true, |x| {
                    bounds.push(f64::from_bits(x));
                    Ok(())
                })?
            }
            (Own::Exponential { scale, .. }, 6) => *scale = zigzag(v.varint("scale")?) as i32,
            (Own::Exponential { zero_count, .. }, 7) => *zero_count = v.fixed64("zero_count")?,
            (Own::Exponential { positive, .. }, 8) => {
                *positive = exp_buckets(v).map_err(|x| x.at("positive", None))?
            }
            (Own::Exponential { negative, .. }, 9) => {
                *negative = exp_buckets(v).map_err(|x| x.at("negative", None))?
            }
            (Own::Exponential { zero_threshold, .. }, 14) => {
                *zero_threshold = v.double("zero_threshold")?
            }
            (Own::Summary { quantiles }, 6) => quantiles.push(quantile(v)?),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

fn exp_buckets(v: Wire) -> Result<(i32, Vec<u64>), DecodeError> {
    let (mut offset, mut counts) = (0, Vec::new());
    let mut r = Reader::new(v.bytes("buckets")?);
    while let Some((f, v)) = r.next_field()? {
        match f {
            1 => offset = zigzag(v.varint("offset")?) as i32,
            2 => extend_packed(&mut counts, v, "bucket_counts", false)?,
            _ => {}
        }
    }
    Ok((offset, counts))
}

/// A summary's `ValueAtQuantile`: (quantile, value).
fn quantile(v: Wire) -> Result<(f64, f64), DecodeError> {
    let (mut q, mut val) = (0.0, 0.0);
    let mut r = Reader::new(v.bytes("quantile_values")?);
    while let Some((f, v)) = r.next_field()? {
        match f {
            1 => q = v.double("quantile")?,
            2 => val = v.double("value")?,
            _ => {}
        }
    }
    Ok((q, val))
}

/// A histogram, exponential histogram or summary point (`d` says which), emitted unless it
/// has no recorded value.
fn summed_point<'a>(
    e: &mut Emitter<'a>,
    h: &Heads,
    p: &'a [u8],
    resource: &[Pair],
    d: Data,
) -> Result<(), Nested> {
    let (mut c, mut own) = match d {
        Data::Histogram { .. } => (
            Summed::new(9, 10),
            Own::Explicit {
                counts: Vec::new(),
                bounds: Vec::new(),
            },
        ),
        Data::Exponential { .. } => (
            Summed::new(1, 10),
            Own::Exponential {
                scale: 0,
                zero_count: 0,
                zero_threshold: 0.0,
                positive: (0, Vec::new()),
                negative: (0, Vec::new()),
            },
        ),
        _ => (
            Summed::new(7, 8),
            Own::Summary {
                quantiles: Vec::new(),
            },
        ),
    };
    let mut r = Reader::new(p);
    while let Some((f, v)) = r.next_field()? {
        if !own.read(f, v)? {
            c.read(e, f, v)?;
        }
    }
    let Some((meta, time)) = c.recorded(e, resource) else {
        return Ok(());
    };
    let buckets = match &own {
        Own::Explicit { counts, bounds } => Buckets::Explicit { bounds, counts },
        Own::Exponential {
            scale,
            zero_count,
            zero_threshold,
            positive,
            negative,
        } => Buckets::Exponential {
            scale: *scale,
            zero_count: *zero_count,
            zero_threshold: *zero_threshold,
            positive: (positive.0, &positive.1),
            negative: (negative.0, &negative.1),
        },
        Own::Summary { quantiles } => {
            let sum = c.sum.unwrap_or(0.0);
            e.summary(h, &meta, time, (c.count, sum), quantiles)?;
            return Ok(());
        }
    };
    let point = HistogramPoint {
        count: c.count,
        sum: c.sum,
        buckets,
    };
    e.histogram(h, &meta, time, point)?;
    Ok(())
}

// ---- answers --------------------------------------------------------------------------

/// The `ExportMetricsServiceResponse` protobuf: empty on full success, else
/// `partial_success { rejected_data_points, error_message }`.
pub fn response_protobuf(rejected: u64, message: &str) -> Vec<u8> {
    let mut out = Vec::new();
    if rejected == 0 && message.is_empty() {
        return out;
    }
    let mut ps = Vec::new();
    pb_varint(&mut ps, 1 << 3);
    pb_varint(&mut ps, rejected);
    pb_bytes(&mut ps, 2, message.as_bytes());
    pb_bytes(&mut out, 1, &ps);
    out
}

/// The same in OTLP/JSON (int64 as a string, lowerCamelCase names).
pub fn response_json(rejected: u64, message: &str) -> serde_json::Value {
    if rejected == 0 && message.is_empty() {
        return serde_json::json!({});
    }
    serde_json::json!({"partialSuccess": {
        "rejectedDataPoints": rejected.to_string(),
        "errorMessage": message,
    }})
}

/// A refusal as OTLP/HTTP answers one: a `google.rpc.Status` with `code` and `message`.
pub fn status_protobuf(code: u64, message: &str) -> Vec<u8> {
    let mut out = Vec::new();
    pb_varint(&mut out, 1 << 3);
    pb_varint(&mut out, code);
    pb_bytes(&mut out, 2, message.as_bytes());
    out
}

#[cfg(test)]
mod tests;
