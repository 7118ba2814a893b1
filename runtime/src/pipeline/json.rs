//! Samples as JSON lines, the shape `wasmon transform` and the HTTP sample endpoint speak:
//! `{"name","resource","value","unit","type":"gauge|delta|cumulative","timestamp": RFC 3339 or
//! epoch seconds,"metadata":{...}}`.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::sample::{Kind, Metadata, Sample};

/// One parsed input line.
#[derive(Debug)]
pub enum Line {
    Sample(Sample),
    /// `{"flush": true}`.
    Flush,
}

/// Why a line is not a sample; the message names the field.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("expected a JSON object")]
    NotObject,
    #[error("missing field `{0}`")]
    Missing(&'static str),
    #[error("field `{field}`: {why}")]
    Bad { field: &'static str, why: String },
}

fn bad(field: &'static str, why: impl Into<String>) -> LineError {
    LineError::Bad {
        field,
        why: why.into(),
    }
}

/// Parses one line. `now_ns` is the timestamp of a sample that has none.
pub fn parse_line(line: &str, now_ns: i64) -> Result<Line, LineError> {
    let Value::Object(obj) = serde_json::from_str::<Value>(line)? else {
        return Err(LineError::NotObject);
    };
    if let Some(flush) = obj.get("flush") {
        return match flush {
            Value::Bool(true) => Ok(Line::Flush),
            other => Err(bad("flush", format!("must be true, got {other}"))),
        };
    }
    from_object(&obj, now_ns).map(Line::Sample)
}

fn str_field<'a>(
    obj: &'a Map<String, Value>,
    field: &'static str,
) -> Result<Option<&'a str>, LineError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(bad(field, format!("must be a string, got {other}"))),
    }
}

fn from_object(obj: &Map<String, Value>, now_ns: i64) -> Result<Sample, LineError> {
    for key in obj.keys() {
        if !matches!(
            key.as_str(),
            "name" | "resource" | "value" | "unit" | "type" | "timestamp" | "metadata"
        ) {
            return Err(LineError::Bad {
                field: "(object)",
                why: format!("unknown field `{key}`"),
            });
        }
    }
    let name = str_field(obj, "name")?.ok_or(LineError::Missing("name"))?;
    if name.is_empty() {
        return Err(bad("name", "must not be empty"));
    }
    let resource = str_field(obj, "resource")?.unwrap_or("");
    let unit = str_field(obj, "unit")?.unwrap_or("");
    let value = match obj.get("value") {
        None => return Err(LineError::Missing("value")),
        Some(Value::Number(n)) => n
            .as_f64()
            .ok_or_else(|| bad("value", "not representable as f64"))?,
        // JSON has no NaN: accept the spellings other tools write.
        Some(Value::String(s)) => match s.as_str() {
            "NaN" | "nan" => f64::NAN,
            "inf" | "Infinity" => f64::INFINITY,
            "-inf" | "-Infinity" => f64::NEG_INFINITY,
            _ => return Err(bad("value", format!("must be a number, got {s:?}"))),
        },
        Some(other) => return Err(bad("value", format!("must be a number, got {other}"))),
    };
    let kind = match str_field(obj, "type")? {
        None => Kind::Gauge,
        Some("gauge") => Kind::Gauge,
        Some("delta") => Kind::Delta,
        Some("cumulative") => Kind::Cumulative,
        Some(other) => {
            return Err(bad(
                "type",
                format!("must be gauge, delta or cumulative, got {other:?}"),
            ));
        }
    };
    let timestamp_ns = match obj.get("timestamp") {
        None | Some(Value::Null) => now_ns,
        Some(Value::Number(n)) => {
            let secs = n.as_f64().ok_or_else(|| bad("timestamp", "not a number"))?;
            if !secs.is_finite() || secs.abs() > 9.2e9 {
                return Err(bad("timestamp", format!("{secs} seconds is out of range")));
            }
            (secs * 1e9).round() as i64
        }
        Some(Value::String(s)) => chrono::DateTime::parse_from_rfc3339(s)
            .map_err(|e| bad("timestamp", format!("{s:?} is not RFC 3339: {e}")))?
            .timestamp_nanos_opt()
            .ok_or_else(|| bad("timestamp", format!("{s:?} is out of range")))?,
        Some(other) => {
            return Err(bad(
                "timestamp",
                format!("must be RFC 3339 or epoch seconds, got {other}"),
            ));
        }
    };
    let metadata = match obj.get("metadata") {
        None | Some(Value::Null) => Metadata::default(),
        Some(Value::Object(m)) => Metadata::new(
            m.iter()
                .map(|(k, v)| {
                    let v: Arc<str> = match v {
                        Value::String(s) => s.as_str().into(),
                        other => other.to_string().into(),
                    };
                    (Arc::<str>::from(k.as_str()), v)
                })
                .collect(),
        ),
        Some(other) => return Err(bad("metadata", format!("must be an object, got {other}"))),
    };
    Ok(Sample {
        name: name.into(),
        resource: resource.into(),
        unit: unit.into(),
        kind,
        value,
        timestamp_ns,
        metadata,
    })
}

#[derive(Serialize)]
struct Out<'a> {
    name: &'a str,
    resource: &'a str,
    value: Value,
    unit: &'a str,
    #[serde(rename = "type")]
    kind: Kind,
    timestamp: String,
    metadata: Map<String, Value>,
}

/// Renders a sample as one JSON line (no newline). Timestamps are RFC 3339 with nanoseconds;
/// a non-finite value is written as the string `"NaN"`/`"inf"`/`"-inf"`.
pub fn to_line(s: &Sample) -> String {
    let value = if s.value.is_finite() {
        serde_json::Number::from_f64(s.value)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    } else if s.value.is_nan() {
        Value::String("NaN".into())
    } else if s.value > 0.0 {
        Value::String("inf".into())
    } else {
        Value::String("-inf".into())
    };
    let timestamp = chrono::DateTime::from_timestamp_nanos(s.timestamp_ns)
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
    let out = Out {
        name: &s.name,
        resource: &s.resource,
        value,
        unit: &s.unit,
        kind: s.kind,
        timestamp,
        metadata: s
            .metadata
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect(),
    };
    serde_json::to_string(&out).expect("a sample always serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_renders_round_trip() {
        let line = r#"{"name":"cpu","resource":"h1","value":1.5,"unit":"ns","type":"cumulative","timestamp":"2024-01-01T00:00:00Z","metadata":{"cpu_number":4}}"#;
        let Line::Sample(s) = parse_line(line, 0).unwrap() else {
            panic!()
        };
        assert_eq!(s.kind, Kind::Cumulative);
        assert_eq!(s.timestamp_ns, 1_704_067_200_000_000_000);
        assert_eq!(s.metadata.get("cpu_number"), Some("4"));
        let again = to_line(&s);
        let Line::Sample(t) = parse_line(&again, 0).unwrap() else {
            panic!()
        };
        assert_eq!(s, t);
    }

    #[test]
    fn epoch_seconds_and_errors_name_the_field() {
        let Line::Sample(s) = parse_line(r#"{"name":"m","value":2,"timestamp":1.5}"#, 0).unwrap()
        else {
            panic!()
        };
        assert_eq!(s.timestamp_ns, 1_500_000_000);
        let e = parse_line(r#"{"name":"m","value":"x"}"#, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`value`"), "{e}");
        let e = parse_line(r#"{"name":"m","value":1,"type":"counter"}"#, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`type`"), "{e}");
        let e = parse_line(r#"{"value":1}"#, 0).unwrap_err().to_string();
        assert!(e.contains("`name`"), "{e}");
        assert!(matches!(
            parse_line(r#"{"flush": true}"#, 0),
            Ok(Line::Flush)
        ));
    }
}
