//! Reading a guest's parameters (the JSON object of its config section) with errors that name
//! the field: unknown keys refused (a typo must not silently fall back to a default), and
//! each value checked for its type.

use std::fmt;

use crate::Params;

/// Why parameters are refused; the text names the field.
#[derive(Clone, Debug, PartialEq)]
pub enum ParamError {
    /// A key the guest does not know.
    Unknown {
        field: String,
        known: &'static [&'static str],
    },
    /// A value of the wrong JSON type.
    Type {
        field: String,
        expected: &'static str,
        got: String,
    },
    /// A value of the right type that cannot be used.
    Invalid { field: String, why: String },
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamError::Unknown { field, known } => {
                write!(
                    f,
                    "unknown parameter `{field}` (known: {})",
                    known.join(", ")
                )
            }
            ParamError::Type {
                field,
                expected,
                got,
            } => write!(f, "parameter `{field}`: expected {expected}, got {got}"),
            ParamError::Invalid { field, why } => write!(f, "parameter `{field}`: {why}"),
        }
    }
}

impl std::error::Error for ParamError {}

impl From<ParamError> for String {
    fn from(e: ParamError) -> String {
        e.to_string()
    }
}

/// Refuses any key of `params` not in `known`.
pub fn refuse_unknown(params: &Params, known: &'static [&'static str]) -> Result<(), ParamError> {
    match params.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ParamError::Unknown {
            field: k.clone(),
            known,
        }),
        None => Ok(()),
    }
}

fn type_error(field: &str, expected: &'static str, got: &serde_json::Value) -> ParamError {
    ParamError::Type {
        field: field.into(),
        expected,
        got: got.to_string(),
    }
}

/// A string parameter; `default` when absent or null.
pub fn string(params: &Params, field: &str, default: &str) -> Result<String, ParamError> {
    match params.get(field) {
        None | Some(serde_json::Value::Null) => Ok(default.into()),
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(type_error(field, "a string", other)),
    }
}

/// A positive integer parameter; `None` when absent or null.
pub fn positive(params: &Params, field: &str) -> Result<Option<u64>, ParamError> {
    match params.get(field) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(type_error(field, "a positive integer", v)),
        },
    }
}

/// An object of strings, in the order given; empty when absent or null.
pub fn string_map(params: &Params, field: &str) -> Result<Vec<(String, String)>, ParamError> {
    match params.get(field) {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(serde_json::Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(type_error(&format!("{field}.{k}"), "a string", other)),
            })
            .collect(),
        Some(other) => Err(type_error(field, "an object of strings", other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(json: &str) -> Params {
        crate::parse_params(json).unwrap()
    }

    #[test]
    fn errors_name_the_field() {
        let p = params(r#"{"sufix": "/x", "n": 0, "resource": {"a": 1}}"#);
        let e = refuse_unknown(&p, &["suffix", "n", "resource"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown parameter `sufix` (known: suffix, n, resource)"
        );
        let e = positive(&p, "n").unwrap_err().to_string();
        assert_eq!(e, "parameter `n`: expected a positive integer, got 0");
        let e = string_map(&p, "resource").unwrap_err().to_string();
        assert_eq!(e, "parameter `resource.a`: expected a string, got 1");
        assert_eq!(string(&p, "suffix", "").unwrap(), "");
        assert!(string(&p, "n", "").is_err());
    }
}
