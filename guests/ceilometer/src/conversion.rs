//! `unit_conversion` (Ceilometer's `ScalingTransformer`), and the target handling it shares
//! with `rate_of_change`, `delta` and `aggregator`: renaming, retyping, scaling, clamping.
//!
//! Ceilometer semantics kept:
//! - only samples whose unit equals `source.unit` (when given) are converted; the others pass
//!   through untouched;
//! - `scale` is either a factor (`volume * scale`) or an expression over the sample that
//!   *replaces* the volume (`volume / 10**6`); a missing, zero or empty scale leaves it alone;
//! - `target.max` clamps the result (a zero `max` is no clamp, Python's falsiness);
//! - name and unit come from `map_from`/`map_to` regex substitution when both sides define
//!   them (an empty substitution falls back), else from `target`, else from the sample;
//! - type from `target.type`, else the sample's.
//!
//! A scale that fails to evaluate (missing metadata without `or`, ...) logs a warning and
//! drops the sample, which is what an exception in Ceilometer's `handle_sample` amounts to.

use serde_json::Value;
use wasmon_guest::{Input, Kind, Params, Sample, Str, Transformer};

use crate::expr::{EvalError, Expr, Mode};
use crate::mapping::Mapper;
use crate::params::P;

/// How the volume is scaled.
#[derive(Debug)]
pub(crate) enum Scale {
    None,
    Factor(f64),
    Expr(Box<Expr>, Box<str>),
}

/// The output side of a conversion: Ceilometer's `target` plus the `source.map_from` half of
/// the renaming.
#[derive(Debug)]
pub(crate) struct Target {
    pub name: Option<Str>,
    pub unit: Option<Str>,
    pub kind: Option<Kind>,
    pub max: Option<f64>,
    pub scale: Scale,
    name_map: Option<Mapper>,
    unit_map: Option<Mapper>,
}

impl Target {
    /// Reads `target.{name,unit,type,scale,max,map_to}` and `source.map_from`.
    pub(crate) fn from_params(p: &P<'_>) -> Result<Target, String> {
        let scale = match p.target("scale") {
            None => Scale::None,
            Some((Value::String(s), path)) => {
                if s.trim().is_empty() {
                    Scale::None
                } else {
                    let e = Expr::parse(s, Mode::Sample)
                        .map_err(|e| p.err(&path, format_args!("{s:?}: {e}")))?;
                    Scale::Expr(Box::new(e), s.as_str().into())
                }
            }
            found => match p.number(found)? {
                Some(x) if x != 0.0 => Scale::Factor(x),
                _ => Scale::None,
            },
        };
        let map_from = p.object(p.source_or_top("map_from"))?;
        let map_to = p.object(p.target("map_to"))?;
        let mapper = |attr: &str| -> Result<Option<Mapper>, String> {
            let (Some(from), Some(to)) = (map_from, map_to) else {
                return Ok(None);
            };
            let get = |m: &serde_json::Map<String, Value>, side: &str| match m.get(attr) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.is_empty() => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(v) => Err(p.err(
                    &format!("{side}.{attr}"),
                    format_args!("must be a string, got {v}"),
                )),
            };
            match (get(from, "map_from")?, get(to, "map_to")?) {
                (Some(pattern), Some(template)) => Mapper::new(&pattern, &template)
                    .map(Some)
                    .map_err(|e| p.err(&format!("map_from.{attr} / map_to.{attr}"), e)),
                _ => Ok(None),
            }
        };
        Ok(Target {
            name: p.str(p.target("name"))?.map(Str::from),
            unit: p.str(p.target("unit"))?.map(Str::from),
            kind: p.kind(p.target("type"))?,
            max: p.number(p.target("max"))?.filter(|m| *m != 0.0),
            scale,
            name_map: mapper("name")?,
            unit_map: mapper("unit")?,
        })
    }

    /// Ceilometer's `_map(s, 'name')`.
    pub(crate) fn name(&mut self, s: &Sample) -> Str {
        pick(&mut self.name_map, &self.name, &s.name)
    }

    /// Ceilometer's `_map(s, 'unit')`.
    pub(crate) fn unit(&mut self, s: &Sample) -> Str {
        pick(&mut self.unit_map, &self.unit, &s.unit)
    }

    /// Ceilometer's `_scale(s)`: the scaled volume.
    pub(crate) fn scaled(&self, s: &Sample) -> Result<f64, EvalError> {
        match &self.scale {
            Scale::None => Ok(s.value),
            Scale::Factor(k) => Ok(s.value * k),
            Scale::Expr(e, _) => e.eval_f64(s),
        }
    }

    /// Scale as a pure factor, for `rate_of_change` (default 1).
    pub(crate) fn factor(&self, s: &Sample) -> Result<f64, EvalError> {
        match &self.scale {
            Scale::None => Ok(1.0),
            Scale::Factor(k) => Ok(*k),
            Scale::Expr(e, _) => e.eval_f64(s),
        }
    }

    /// The scale's source text, for warnings.
    pub(crate) fn scale_text(&self) -> String {
        match &self.scale {
            Scale::None => "1".into(),
            Scale::Factor(k) => k.to_string(),
            Scale::Expr(_, src) => src.to_string(),
        }
    }

    /// `min(volume, max)` when a max is set; NaN stays NaN, as with Python's `min(nan, m)`.
    pub(crate) fn clamp(&self, v: f64) -> f64 {
        match self.max {
            Some(m) if v > m => m,
            _ => v,
        }
    }

    /// Ceilometer's `_convert(s)` with the volume already computed (and clamped, if wanted).
    pub(crate) fn convert(&mut self, s: &Sample, volume: f64) -> Sample {
        Sample {
            name: self.name(s),
            resource: s.resource.clone(),
            unit: self.unit(s),
            kind: self.kind.unwrap_or(s.kind),
            value: volume,
            timestamp_ns: s.timestamp_ns,
            metadata: s.metadata.clone(),
        }
    }
}

fn pick(map: &mut Option<Mapper>, fixed: &Option<Str>, current: &Str) -> Str {
    if let Some(mapped) = map.as_mut().and_then(|m| m.map(current)) {
        return mapped;
    }
    fixed.as_ref().unwrap_or(current).clone()
}

/// The `unit_conversion` transformer.
///
/// ```json
/// {"source": {"unit": "B"},
///  "target": {"name": "disk.kilobytes", "unit": "KB", "scale": "volume / 1024"}}
/// ```
#[derive(Debug)]
pub struct UnitConversion {
    source_unit: Option<Str>,
    target: Target,
}

impl Transformer for UnitConversion {
    fn configure(params: &Params) -> Result<Self, String> {
        let p = P::new("unit_conversion", params)?;
        p.warn_unknown(&["name", "unit", "type", "scale", "max", "map_from", "map_to"]);
        Ok(UnitConversion {
            source_unit: p.str(p.source("unit"))?.map(Str::from),
            target: Target::from_params(&p)?,
        })
    }

    fn handle(&mut self, input: impl Input, out: &mut Vec<Sample>) {
        out.reserve(input.len());
        for s in input {
            if self.source_unit.as_ref().is_some_and(|u| *u != s.unit) {
                out.push(s);
                continue;
            }
            match self.target.scaled(&s) {
                Ok(v) => out.push(self.target.convert(&s, self.target.clamp(v))),
                Err(e) => wasmon_guest::warn!(
                    "unit_conversion: dropping {} of {}: scale {:?}: {e}",
                    s.name,
                    s.resource,
                    self.target.scale_text()
                ),
            }
        }
    }
}
