//! Samples as JSON lines, the shape `wasmon transform` and the HTTP sample endpoint speak:
//! `{"name","resource","value","unit","type":"gauge|delta|cumulative","timestamp": RFC 3339 or
//! epoch seconds,"metadata":{...}}`.
//!
//! Metadata is flat (string keys, string values): nested objects, as Ceilometer sends
//! `resource_metadata`, are flattened to dotted keys (`{"user_metadata": {"weight": 1.1}}` is
//! the key `user_metadata.weight`, which an expression reads as
//! `resource_metadata.user_metadata.weight`); arrays likewise by index (`{"tags": ["a"]}` is
//! `tags.0`); numbers, booleans and null are kept as their JSON text.
//!
//! Metric names and units are interned for the life of the daemon, so input from the network
//! goes through a [`NameBudget`]: a request may add only so many new ones.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};

use super::name::{Name, NamesFull};
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
    #[error(
        "field `{0}`: a request may add at most {MAX_NEW_NAMES_PER_REQUEST} metric names and \
         units the daemon has not seen before; send the rest in another request"
    )]
    TooManyNewNames(&'static str),
    #[error("field `{0}`: {1}")]
    NamesFull(&'static str, NamesFull),
}

/// New metric names and units one request may add (they are kept for the daemon's life; see
/// [`super::MAX_NAMES`] for the daemon's total). A collector's first request carries its
/// whole schema, a few hundred names; a request minting thousands is minting them from data.
pub const MAX_NEW_NAMES_PER_REQUEST: usize = 10_000;

/// How many new names and units the request being parsed may still add.
pub struct NameBudget {
    left: usize,
}

impl NameBudget {
    /// The budget of one network request.
    pub fn per_request() -> NameBudget {
        NameBudget {
            left: MAX_NEW_NAMES_PER_REQUEST,
        }
    }

    /// No per-request bound (local input: `wasmon transform`'s stdin, files).
    pub fn unlimited() -> NameBudget {
        NameBudget { left: usize::MAX }
    }

    /// `text` interned, counting it against the budget when it is new.
    pub fn name(&mut self, field: &'static str, text: &str) -> Result<Name, LineError> {
        if let Some(n) = Name::get(text) {
            return Ok(n);
        }
        if self.left == 0 {
            return Err(LineError::TooManyNewNames(field));
        }
        let n = Name::try_new(text).map_err(|e| LineError::NamesFull(field, e))?;
        self.left -= 1;
        Ok(n)
    }
}

fn bad(field: &'static str, why: impl Into<String>) -> LineError {
    LineError::Bad {
        field,
        why: why.into(),
    }
}

/// Parses one line of local input. `now_ns` is the timestamp of a sample that has none.
pub fn parse_line(line: &str, now_ns: i64) -> Result<Line, LineError> {
    parse_line_within(line, now_ns, &mut NameBudget::unlimited())
}

/// Parses one line, interning new names and units only within `budget`.
pub fn parse_line_within(
    line: &str,
    now_ns: i64,
    budget: &mut NameBudget,
) -> Result<Line, LineError> {
    let Value::Object(obj) = serde_json::from_str::<Value>(line)? else {
        return Err(LineError::NotObject);
    };
    if let Some(flush) = obj.get("flush") {
        return match flush {
            Value::Bool(true) => Ok(Line::Flush),
            other => Err(bad("flush", format!("must be true, got {other}"))),
        };
    }
    from_object(&obj, now_ns, budget).map(Line::Sample)
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

fn from_object(
    obj: &Map<String, Value>,
    now_ns: i64,
    budget: &mut NameBudget,
) -> Result<Sample, LineError> {
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
        Some(Value::Object(m)) => {
            let mut pairs = Vec::new();
            for (k, v) in m {
                flatten(k, v, &mut pairs);
            }
            Metadata::new(pairs)
        }
        Some(other) => return Err(bad("metadata", format!("must be an object, got {other}"))),
    };
    let (name, unit) = (budget.name("name", name)?, budget.name("unit", unit)?);
    Ok(Sample {
        name,
        resource: resource.into(),
        unit,
        kind,
        value,
        timestamp_ns,
        metadata,
    })
}

/// Appends `value` under `key` to `pairs`: objects and arrays become dotted keys.
fn flatten(key: &str, value: &Value, pairs: &mut Vec<(Arc<str>, Arc<str>)>) {
    match value {
        Value::Object(m) => {
            for (k, v) in m {
                flatten(&format!("{key}.{k}"), v, pairs);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                flatten(&format!("{key}.{i}"), v, pairs);
            }
        }
        Value::String(s) => pairs.push((key.into(), s.as_str().into())),
        other => pairs.push((key.into(), other.to_string().into())),
    }
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

    #[test]
    fn nested_metadata_is_flattened_to_dotted_keys() {
        let line = r#"{"name":"cpu","value":1,"metadata":{"resource_metadata":{"user_metadata":
            {"autoscaling_weight":1.1},"flavor":{"vcpus":2,"name":"m1"}},"tags":["a",{"b":true}],
            "none":null,"plain":"x"}}"#
            .replace('\n', "");
        let Line::Sample(s) = parse_line(&line, 0).unwrap() else {
            panic!()
        };
        let mut pairs: Vec<(&str, &str)> = s.metadata.iter().collect();
        pairs.sort();
        assert_eq!(
            pairs,
            [
                ("none", "null"),
                ("plain", "x"),
                ("resource_metadata.flavor.name", "m1"),
                ("resource_metadata.flavor.vcpus", "2"),
                ("resource_metadata.user_metadata.autoscaling_weight", "1.1"),
                ("tags.0", "a"),
                ("tags.1.b", "true"),
            ]
        );
    }

    #[test]
    fn a_request_may_add_only_so_many_new_names() {
        let mut budget = NameBudget { left: 2 };
        let tag = std::process::id();
        let line = |n: &str, u: &str| format!(r#"{{"name":"{n}.{tag}","unit":"{u}","value":1}}"#);
        assert!(parse_line_within(&line("budget.a", ""), 0, &mut budget).is_ok());
        // A name seen before costs nothing; a new name and a new unit cost one each.
        assert!(parse_line_within(&line("budget.a", ""), 0, &mut budget).is_ok());
        assert!(parse_line_within(&line("budget.b", ""), 0, &mut budget).is_ok());
        let e = parse_line_within(&line("budget.c", ""), 0, &mut budget).unwrap_err();
        assert!(matches!(e, LineError::TooManyNewNames("name")), "{e}");
        assert!(e.to_string().contains("at most 10000"), "{e}");
        assert!(
            Name::get(&format!("budget.c.{tag}")).is_none(),
            "nothing interned"
        );
    }
}
