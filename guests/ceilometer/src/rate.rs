//! `rate_of_change` (Ceilometer's `RateOfChangeTransformer`): the per-second rate of a meter,
//! per meter and resource, scaled and optionally clamped.
//!
//! Per (meter, resource) the previous volume and timestamp are kept. The first sample has no
//! predecessor and is dropped; a sample older than the previous one is dropped and the cache
//! keeps the newer one. Otherwise the volume delta is the difference, except that a falling
//! *cumulative* counter is taken as a reset, so the new volume itself is the lower bound on the
//! growth. The rate is delta / seconds (0.0 for a zero time delta), multiplied by the scale
//! (a factor or an expression over the current sample, default 1) and clamped to `max`.
//! Name and unit go through the shared target handling ([`crate::conversion`]).

use wasmon_guest::{Input, Kind, Params, Sample, Transformer};

use crate::conversion::Target;
use crate::hash::{FxHashMap, Key};
use crate::params::P;

/// The `rate_of_change` transformer.
///
/// ```json
/// {"target": {"name": "cpu_util", "unit": "%", "type": "gauge",
///             "scale": "100.0 / (10**9 * (resource_metadata.cpu_number or 1))", "max": 100}}
/// ```
#[derive(Debug)]
pub struct RateOfChange {
    target: Target,
    prev: FxHashMap<(Key, Key), Prev>,
}

#[derive(Clone, Copy, Debug)]
struct Prev {
    value: f64,
    timestamp_ns: i64,
}

impl Transformer for RateOfChange {
    fn configure(params: &Params) -> Result<Self, String> {
        let p = P::new("rate_of_change", params)?;
        p.warn_unknown(&["name", "unit", "type", "scale", "max", "map_from", "map_to"]);
        if p.source("unit").is_some() {
            // Ceilometer's rate_of_change never looks at it either.
            wasmon_guest::warn!("rate_of_change: `source.unit` is ignored; every sample is rated");
        }
        let mut target = Target::from_params(&p)?;
        // A rate is a gauge whatever the input was.
        target.kind.get_or_insert(Kind::Gauge);
        Ok(RateOfChange {
            target,
            prev: FxHashMap::default(),
        })
    }

    fn handle(&mut self, input: impl Input, out: &mut Vec<Sample>) {
        use std::collections::hash_map::Entry;
        for s in input {
            let now = Prev {
                value: s.value,
                timestamp_ns: s.timestamp_ns,
            };
            let prev = match self
                .prev
                .entry((Key(s.name.clone()), Key(s.resource.clone())))
            {
                Entry::Vacant(v) => {
                    v.insert(now);
                    continue;
                }
                Entry::Occupied(mut o) => {
                    let prev = *o.get();
                    if s.timestamp_ns < prev.timestamp_ns {
                        wasmon_guest::warn!(
                            "rate_of_change: dropping out of time order sample of {} for {}",
                            s.name,
                            s.resource
                        );
                        continue;
                    }
                    o.insert(now);
                    prev
                }
            };
            let delta = if prev.value <= s.value || s.kind != Kind::Cumulative {
                s.value - prev.value
            } else {
                s.value
            };
            let dt_ns = s.timestamp_ns - prev.timestamp_ns;
            let rate = if dt_ns != 0 {
                delta / (dt_ns as f64 / 1e9)
            } else {
                0.0
            };
            match self.target.factor(&s) {
                Ok(scale) => {
                    let v = self.target.clamp(scale * rate);
                    out.push(self.target.convert(&s, v));
                }
                Err(e) => wasmon_guest::warn!(
                    "rate_of_change: dropping {} of {}: scale {:?}: {e}",
                    s.name,
                    s.resource,
                    self.target.scale_text()
                ),
            }
        }
    }
}
