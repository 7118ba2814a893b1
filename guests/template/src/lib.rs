//! The template guest: copy this crate to start your own transformer.
//!
//! `scale` multiplies every sample whose name matches `prefix` by `factor` and may give it a new
//! unit. Parameters (JSON object, from the pipeline config or `wasmon transform --params`):
//!
//! ```json
//! { "factor": 0.001, "prefix": "disk.", "unit": "KB" }
//! ```
//!
//! Build with `cargo build --release --target wasm32-wasip2`; the component is
//! `target/wasm32-wasip2/release/template.wasm`. Try it offline:
//! `echo '{"name":"disk.read","resource":"sda","value":2048,"type":"gauge"}' | wasmon transform --guest template.wasm --params p.json`

use wasmon_guest::{Input, Params, Sample, Str, Transformer};

pub struct Scale {
    factor: f64,
    prefix: String,
    unit: Option<Str>,
}

impl Transformer for Scale {
    fn configure(params: &Params) -> Result<Self, String> {
        let factor = match params.get("factor") {
            None => 1.0,
            Some(v) => v
                .as_f64()
                .ok_or_else(|| format!("`factor` must be a number, got {v}"))?,
        };
        let prefix = match params.get("prefix") {
            None => String::new(),
            Some(v) => v
                .as_str()
                .ok_or_else(|| format!("`prefix` must be a string, got {v}"))?
                .to_string(),
        };
        let unit = match params.get("unit") {
            None => None,
            Some(v) => {
                Some(Str::from(v.as_str().ok_or_else(|| {
                    format!("`unit` must be a string, got {v}")
                })?))
            }
        };
        Ok(Scale {
            factor,
            prefix,
            unit,
        })
    }

    fn handle(&mut self, input: impl Input, out: &mut Vec<Sample>) {
        for mut s in input {
            if s.name.starts_with(&self.prefix) {
                s.value *= self.factor;
                if let Some(unit) = &self.unit {
                    s.unit = unit.clone();
                }
            }
            out.push(s);
        }
    }
}

wasmon_guest::export_transformer!(Scale);
