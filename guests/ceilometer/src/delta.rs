//! `delta` (Ceilometer's `DeltaTransformer`): turns a cumulative meter into `delta` samples.
//!
//! Per (meter, resource) the previous volume is kept. The first sample is dropped (no
//! predecessor); a sample older than the previous one is dropped and the cache keeps the
//! newer. Otherwise the output is the difference, typed `delta`, with the input's unit, time
//! and metadata; with `growth_only` a negative difference is dropped (but still becomes the
//! new reference). The name comes from `map_from`/`map_to`, else `target.name`, else the input.

use wasmon_guest::{Input, Kind, Params, Sample, Transformer};

use crate::conversion::Target;
use crate::hash::{FxHashMap, Key};
use crate::params::P;

/// The `delta` transformer.
///
/// ```json
/// {"target": {"name": "cpu.delta"}, "growth_only": true}
/// ```
#[derive(Debug)]
pub struct Delta {
    target: Target,
    growth_only: bool,
    prev: FxHashMap<(Key, Key), (f64, i64)>,
}

impl Transformer for Delta {
    fn configure(params: &Params) -> Result<Self, String> {
        let p = P::new("delta", params)?;
        p.warn_unknown(&["name", "growth_only", "map_from", "map_to"]);
        Ok(Delta {
            target: Target::from_params(&p)?,
            growth_only: p.bool(p.top("growth_only"))?.unwrap_or(false),
            prev: FxHashMap::default(),
        })
    }

    fn handle(&mut self, input: impl Input, out: &mut Vec<Sample>) {
        use std::collections::hash_map::Entry;
        for s in input {
            let now = (s.value, s.timestamp_ns);
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
                    if s.timestamp_ns < prev.1 {
                        wasmon_guest::warn!(
                            "delta: dropping out of time order sample of {} for {}",
                            s.name,
                            s.resource
                        );
                        continue;
                    }
                    o.insert(now);
                    prev.0
                }
            };
            let delta = s.value - prev;
            if self.growth_only && delta < 0.0 {
                wasmon_guest::warn!(
                    "delta: dropping negative delta {delta} of {} for {}",
                    s.name,
                    s.resource
                );
                continue;
            }
            out.push(Sample {
                name: self.target.name(&s),
                kind: Kind::Delta,
                value: delta,
                ..s
            });
        }
    }
}
