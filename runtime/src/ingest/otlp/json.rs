//! OTLP/JSON: the protobuf request in proto3's JSON mapping, as the OTLP spec fixes it:
//! lowerCamelCase field names (the proto's own snake_case names are read too, as proto3 JSON
//! parsers do), 64-bit integers as strings (numbers taken as well), enums as integers, bytes
//! in base64, unknown fields ignored. Mapped by the same [`Emitter`] as protobuf.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Buckets, Data, Emitter, HistogramPoint, Nested, OtlpDecoded, meta_key, ts};
use crate::ingest::build::{Limits, MAX_LABELS, ReceiveError, check_label};
use crate::ingest::pb::DecodeError;
use crate::sample::Pair;

/// Decodes an `ExportMetricsServiceRequest` in OTLP/JSON (already inflated).
pub fn decode_json(raw: &[u8], limits: Limits) -> Result<OtlpDecoded, ReceiveError> {
    let v: Value =
        serde_json::from_slice(raw).map_err(|e| DecodeError::new(format!("not JSON: {e}")))?;
    let root = object(&v).map_err(|e| e.at("(request)", None))?;
    let mut e = Emitter::new(limits, raw.len(), 64);
    for (ri, rm) in array(root, "resourceMetrics", "resource_metrics")?
        .iter()
        .enumerate()
    {
        resource_metrics(&mut e, rm).map_err(|x| x.at("resourceMetrics", Some(ri)))?;
    }
    Ok(e.finish())
}

fn object(v: &Value) -> Result<&Map<String, Value>, DecodeError> {
    v.as_object()
        .ok_or_else(|| DecodeError::new(format!("expected an object, got {}", kind(v))))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn field<'v>(o: &'v Map<String, Value>, camel: &str, snake: &str) -> Option<&'v Value> {
    o.get(camel)
        .or_else(|| o.get(snake))
        .filter(|v| !v.is_null())
}

fn array<'v>(
    o: &'v Map<String, Value>,
    camel: &str,
    snake: &str,
) -> Result<&'v [Value], DecodeError> {
    match field(o, camel, snake) {
        None => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(v) => {
            Err(DecodeError::new(format!("expected an array, got {}", kind(v))).at(camel, None))
        }
    }
}

fn string<'v>(o: &'v Map<String, Value>, camel: &str, snake: &str) -> Result<&'v str, DecodeError> {
    match field(o, camel, snake) {
        None => Ok(""),
        Some(Value::String(s)) => Ok(s),
        Some(v) => {
            Err(DecodeError::new(format!("expected a string, got {}", kind(v))).at(camel, None))
        }
    }
}

/// A 64-bit unsigned integer: a decimal string (the OTLP/JSON form) or a number.
fn uint(o: &Map<String, Value>, camel: &str, snake: &str) -> Result<u64, DecodeError> {
    match field(o, camel, snake) {
        None => Ok(0),
        Some(v) => uint_value(v).map_err(|e| e.at(camel, None)),
    }
}

fn uint_value(v: &Value) -> Result<u64, DecodeError> {
    integer_value(v, "an unsigned 64-bit integer", serde_json::Number::as_u64)
}

fn int_value(v: &Value) -> Result<i64, DecodeError> {
    integer_value(v, "a 64-bit integer", serde_json::Number::as_i64)
}

/// A 64-bit integer (`what` names its kind in errors): a decimal string, as OTLP/JSON writes
/// 64-bit fields, or a number that `exact` takes without loss.
fn integer_value<T: std::str::FromStr>(
    v: &Value,
    what: &str,
    exact: fn(&serde_json::Number) -> Option<T>,
) -> Result<T, DecodeError> {
    match v {
        Value::String(s) => s
            .parse()
            .map_err(|_| DecodeError::new(format!("{s:?} is not {what}"))),
        Value::Number(n) => exact(n).ok_or_else(|| DecodeError::new(format!("{n} is not {what}"))),
        v => Err(DecodeError::new(format!(
            "expected an integer, got {}",
            kind(v)
        ))),
    }
}

/// A double: a number, or proto3 JSON's `"NaN"`, `"Infinity"`, `"-Infinity"`.
fn double_value(v: &Value) -> Result<f64, DecodeError> {
    match v {
        Value::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            other => other
                .parse()
                .map_err(|_| DecodeError::new(format!("{other:?} is not a number"))),
        },
        v => Err(DecodeError::new(format!(
            "expected a number, got {}",
            kind(v)
        ))),
    }
}

fn double(o: &Map<String, Value>, camel: &str, snake: &str) -> Result<Option<f64>, DecodeError> {
    field(o, camel, snake)
        .map(double_value)
        .transpose()
        .map_err(|e| e.at(camel, None))
}

/// An enum: its number (the OTLP/JSON form) or its name.
fn enum_value(o: &Map<String, Value>, camel: &str, snake: &str) -> Result<u64, DecodeError> {
    match field(o, camel, snake) {
        Some(Value::String(s)) if s.starts_with("AGGREGATION_TEMPORALITY_") => {
            Ok(match &s["AGGREGATION_TEMPORALITY_".len()..] {
                "DELTA" => super::DELTA,
                "CUMULATIVE" => super::CUMULATIVE,
                _ => 0,
            })
        }
        _ => uint(o, camel, snake),
    }
}

fn resource_metrics<'a>(e: &mut Emitter<'a>, rm: &'a Value) -> Result<(), Nested> {
    let rm = object(rm)?;
    let mut resource = Vec::new();
    if let Some(r) = field(rm, "resource", "resource") {
        attributes(e, object(r)?, &mut resource).map_err(|x| x.at("resource", None))?;
    }
    for (si, sm) in array(rm, "scopeMetrics", "scope_metrics")?
        .iter()
        .enumerate()
    {
        let sm = object(sm).map_err(|x| x.at("scopeMetrics", Some(si)))?;
        for (mi, m) in array(sm, "metrics", "metrics")?.iter().enumerate() {
            metric(e, m, &resource).map_err(|x| {
                x.within("metrics", Some(mi))
                    .within("scopeMetrics", Some(si))
            })?;
        }
    }
    Ok(())
}

fn attributes<'a>(
    e: &mut Emitter<'a>,
    o: &'a Map<String, Value>,
    out: &mut Vec<Pair>,
) -> Result<(), DecodeError> {
    for (i, kv) in array(o, "attributes", "attributes")?.iter().enumerate() {
        let at = |x: DecodeError| x.at("attributes", Some(i));
        let kv = object(kv).map_err(at)?;
        let key = string(kv, "key", "key").map_err(at)?;
        check_label(key, "an attribute key").map_err(at)?;
        if out.len() >= MAX_LABELS {
            return Err(DecodeError::new(format!(
                "more than {MAX_LABELS} attributes"
            )));
        }
        let value = match field(kv, "value", "value") {
            None => Arc::from(""),
            Some(v) => any_value(e, v).map_err(|x| at(x.at("value", None)))?,
        };
        check_label(&value, "an attribute value").map_err(at)?;
        out.push((e.b.arc(meta_key(key)), value));
    }
    Ok(())
}

/// An `AnyValue` as metadata text, as the protobuf decoder makes it.
fn any_value<'a>(e: &mut Emitter<'a>, v: &'a Value) -> Result<Arc<str>, DecodeError> {
    let o = object(v)?;
    let Some((k, v)) = o.iter().find(|(_, v)| !v.is_null()) else {
        return Ok(Arc::from(""));
    };
    Ok(match (k.as_str(), v) {
        ("stringValue" | "string_value", Value::String(s)) => e.b.arc(s),
        ("boolValue" | "bool_value", Value::Bool(b)) => {
            Arc::from(if *b { "true" } else { "false" })
        }
        ("intValue" | "int_value", v) => e.b.owned(int_value(v)?.to_string()),
        ("doubleValue" | "double_value", v) => e.b.owned(double_value(v)?.to_string()),
        // Base64 already, as the protobuf decoder writes bytes.
        ("bytesValue" | "bytes_value", Value::String(s)) => e.b.arc(s),
        ("arrayValue" | "array_value" | "kvlistValue" | "kvlist_value", v) => {
            e.b.owned(v.get("values").cloned().unwrap_or_default().to_string())
        }
        (k, v) => {
            return Err(DecodeError::new(format!(
                "`{k}` ({}) is not an AnyValue field",
                kind(v)
            )));
        }
    })
}

fn metric<'a>(e: &mut Emitter<'a>, m: &'a Value, resource: &[Pair]) -> Result<(), Nested> {
    let m = object(m)?;
    let name = string(m, "name", "name")?;
    let unit = string(m, "unit", "unit")?;
    let found = [
        ("gauge", "gauge"),
        ("sum", "sum"),
        ("histogram", "histogram"),
        ("exponentialHistogram", "exponential_histogram"),
        ("summary", "summary"),
    ]
    .into_iter()
    .find_map(|(c, s)| field(m, c, s).map(|v| (c, v)));
    let Some((which, body)) = found else {
        return Ok(());
    };
    let body = object(body).map_err(|x| x.at(which, None))?;
    let temporality = enum_value(body, "aggregationTemporality", "aggregation_temporality")
        .map_err(|x| x.at(which, None))?;
    let d = match which {
        "gauge" => Data::Gauge,
        "sum" => Data::Sum {
            temporality,
            monotonic: matches!(
                field(body, "isMonotonic", "is_monotonic"),
                Some(Value::Bool(true))
            ),
        },
        "histogram" => Data::Histogram { temporality },
        "exponentialHistogram" => Data::Exponential { temporality },
        _ => Data::Summary,
    };
    let h = e.heads(name, unit, d).map_err(|x| x.at("name", None))?;
    let points = array(body, "dataPoints", "data_points").map_err(|x| x.at(which, None))?;
    for (pi, p) in points.iter().enumerate() {
        point(e, &h, d, p, resource)
            .map_err(|x| x.within("dataPoints", Some(pi)).within(which, None))?;
    }
    Ok(())
}

fn u64s(o: &Map<String, Value>, camel: &str, snake: &str) -> Result<Vec<u64>, DecodeError> {
    array(o, camel, snake)?
        .iter()
        .map(uint_value)
        .collect::<Result<_, _>>()
        .map_err(|x| x.at(camel, None))
}

fn point<'a>(
    e: &mut Emitter<'a>,
    h: &super::Heads,
    d: Data,
    p: &'a Value,
    resource: &[Pair],
) -> Result<(), Nested> {
    let p = object(p)?;
    let mut attrs = Vec::new();
    attributes(e, p, &mut attrs)?;
    let time = ts(uint(p, "timeUnixNano", "time_unix_nano")?);
    if uint(p, "flags", "flags")? & super::NO_RECORDED_VALUE != 0 {
        e.out.no_value += 1;
        return Ok(());
    }
    let meta = e.merge(resource, attrs);
    match d {
        Data::Gauge | Data::Sum { .. } => {
            let value = match (
                double(p, "asDouble", "as_double")?,
                field(p, "asInt", "as_int"),
            ) {
                (Some(v), _) => Some(v),
                (None, Some(i)) => Some(int_value(i).map_err(|x| x.at("asInt", None))? as f64),
                (None, None) => None,
            };
            let c = e.carried(meta);
            e.number(h, &c, time, value)?;
        }
        Data::Histogram { .. } => {
            let counts = u64s(p, "bucketCounts", "bucket_counts")?;
            let bounds = array(p, "explicitBounds", "explicit_bounds")?
                .iter()
                .map(double_value)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|x| x.at("explicitBounds", None))?;
            let point = HistogramPoint {
                count: uint(p, "count", "count")?,
                sum: double(p, "sum", "sum")?,
                buckets: Buckets::Explicit {
                    bounds: &bounds,
                    counts: &counts,
                },
            };
            e.histogram(h, &meta, time, point)?;
        }
        Data::Exponential { .. } => {
            let side = |name: &str| -> Result<(i32, Vec<u64>), DecodeError> {
                match field(p, name, name) {
                    None => Ok((0, Vec::new())),
                    Some(b) => {
                        let b = object(b).map_err(|x| x.at(name, None))?;
                        let off = field(b, "offset", "offset")
                            .map(int_value)
                            .transpose()
                            .map_err(|x| x.at(name, None))?
                            .unwrap_or(0);
                        let counts = u64s(b, "bucketCounts", "bucket_counts")
                            .map_err(|x| x.at(name, None))?;
                        Ok((off as i32, counts))
                    }
                }
            };
            let (pos, neg) = (side("positive")?, side("negative")?);
            let scale = field(p, "scale", "scale")
                .map(int_value)
                .transpose()
                .map_err(|x| x.at("scale", None))?
                .unwrap_or(0);
            let point = HistogramPoint {
                count: uint(p, "count", "count")?,
                sum: double(p, "sum", "sum")?,
                buckets: Buckets::Exponential {
                    scale: scale.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
                    zero_count: uint(p, "zeroCount", "zero_count")?,
                    zero_threshold: double(p, "zeroThreshold", "zero_threshold")?.unwrap_or(0.0),
                    positive: (pos.0, &pos.1),
                    negative: (neg.0, &neg.1),
                },
            };
            e.histogram(h, &meta, time, point)?;
        }
        Data::Summary => {
            let mut qs = Vec::new();
            for (i, q) in array(p, "quantileValues", "quantile_values")?
                .iter()
                .enumerate()
            {
                let at = |x: DecodeError| x.at("quantileValues", Some(i));
                let q = object(q).map_err(at)?;
                let quantile = double(q, "quantile", "quantile")
                    .map_err(at)?
                    .unwrap_or(0.0);
                let value = double(q, "value", "value").map_err(at)?.unwrap_or(0.0);
                qs.push((quantile, value));
            }
            let count = uint(p, "count", "count")?;
            let sum = double(p, "sum", "sum")?.unwrap_or(0.0);
            e.summary(h, &meta, time, (count, sum), &qs)?;
        }
    }
    Ok(())
}
