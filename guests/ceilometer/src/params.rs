//! Reading Ceilometer-shaped parameters: `{"source": {...}, "target": {...}, ...}`.
//!
//! Ceilometer puts a transformer's output settings in `target` and its input matching in
//! `source`. We also accept the target keys at the top level (a flatter config reads better
//! in wasmon), with `target` winning when both are given. JSON `null` counts as absent, like
//! Python's `None`. Errors name the parameter by its path (`target.scale`).

use serde_json::{Map, Value};
use wasmon_guest::{Kind, Params};

/// A view of one transformer's parameters; `what` prefixes error messages.
pub(crate) struct P<'a> {
    pub what: &'static str,
    params: &'a Params,
    target: Option<&'a Map<String, Value>>,
    source: Option<&'a Map<String, Value>>,
}

/// A parameter's value and its path, for error messages.
pub(crate) type Found<'a> = Option<(&'a Value, String)>;

fn section<'a>(
    what: &str,
    params: &'a Params,
    key: &str,
) -> Result<Option<&'a Map<String, Value>>, String> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(other) => Err(format!("{what}: `{key}` must be an object, got {other}")),
    }
}

impl<'a> P<'a> {
    pub(crate) fn new(what: &'static str, params: &'a Params) -> Result<P<'a>, String> {
        Ok(P {
            what,
            params,
            target: section(what, params, "target")?,
            source: section(what, params, "source")?,
        })
    }

    /// Warns about top-level keys this transformer doesn't know (Ceilometer silently swallows
    /// them as `**kwargs`; a typo deserves at least a warning).
    pub(crate) fn warn_unknown(&self, known: &[&str]) {
        for key in self.params.keys() {
            if key != "target" && key != "source" && !known.contains(&key.as_str()) {
                wasmon_guest::warn!("{}: ignoring unknown parameter `{key}`", self.what);
            }
        }
    }

    /// `target.key`, else top-level `key`.
    pub(crate) fn target(&self, key: &str) -> Found<'a> {
        let non_null = |v: &&Value| !v.is_null();
        if let Some(v) = self.target.and_then(|t| t.get(key)).filter(non_null) {
            return Some((v, format!("target.{key}")));
        }
        self.top(key)
    }

    /// `source.key` only: top-level keys mean the target.
    pub(crate) fn source(&self, key: &str) -> Found<'a> {
        let v = self.source?.get(key).filter(|v| !v.is_null())?;
        Some((v, format!("source.{key}")))
    }

    /// `source.key`, else top-level `key` (for keys only a source has, like `map_from`).
    pub(crate) fn source_or_top(&self, key: &str) -> Found<'a> {
        self.source(key).or_else(|| self.top(key))
    }

    pub(crate) fn top(&self, key: &str) -> Found<'a> {
        let v = self.params.get(key).filter(|v| !v.is_null())?;
        Some((v, key.to_string()))
    }

    pub(crate) fn err(&self, path: &str, msg: impl std::fmt::Display) -> String {
        format!("{}: `{path}` {msg}", self.what)
    }

    pub(crate) fn str(&self, found: Found<'a>) -> Result<Option<&'a str>, String> {
        match found {
            None => Ok(None),
            Some((Value::String(s), _)) => Ok(Some(s)),
            Some((v, path)) => Err(self.err(&path, format_args!("must be a string, got {v}"))),
        }
    }

    pub(crate) fn kind(&self, found: Found<'a>) -> Result<Option<Kind>, String> {
        let path = found.as_ref().map(|(_, p)| p.clone()).unwrap_or_default();
        match self.str(found)? {
            None => Ok(None),
            Some(s) => Kind::parse(s).map(Some).ok_or_else(|| {
                self.err(
                    &path,
                    format_args!("must be gauge, delta or cumulative, got {s:?}"),
                )
            }),
        }
    }

    /// A number, or a string holding one (Ceilometer runs these through `int()`/`float()`).
    pub(crate) fn number(&self, found: Found<'a>) -> Result<Option<f64>, String> {
        match found {
            None => Ok(None),
            Some((Value::Number(n), path)) => n
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.err(&path, "is not representable as a number")),
            Some((Value::String(s), path)) => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .map(Some)
                .ok_or_else(|| self.err(&path, format_args!("must be a number, got {s:?}"))),
            Some((v, path)) => Err(self.err(&path, format_args!("must be a number, got {v}"))),
        }
    }

    /// A boolean; `"true"`/`"false"` strings too, since YAML-to-JSON converters differ.
    pub(crate) fn bool(&self, found: Found<'a>) -> Result<Option<bool>, String> {
        match found {
            None => Ok(None),
            Some((Value::Bool(b), _)) => Ok(Some(*b)),
            Some((Value::String(s), _)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some((Value::String(s), _)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some((v, path)) => Err(self.err(&path, format_args!("must be true or false, got {v}"))),
        }
    }

    /// An object (`map_from`, `map_to`).
    pub(crate) fn object(
        &self,
        found: Found<'a>,
    ) -> Result<Option<&'a Map<String, Value>>, String> {
        match found {
            None => Ok(None),
            Some((Value::Object(m), _)) => Ok(Some(m)),
            Some((v, path)) => Err(self.err(&path, format_args!("must be an object, got {v}"))),
        }
    }
}
