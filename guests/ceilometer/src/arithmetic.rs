//! `arithmetic`: one new meter computed from several, per resource (Ceilometer's
//! `ArithmeticTransformer`).
//!
//! Samples of the referenced meters are cached per resource (a later sample of the same meter
//! and resource replaces the earlier one) and nothing is emitted until flush. At flush every
//! resource that has all the referenced meters yields one sample and leaves the cache; a
//! resource still missing a meter stays cached for a later flush, as in Ceilometer (whose tests
//! flush after every sample and still expect results). The output takes name, unit and type
//! from `target`, else from the sample of the first meter the expression names, whose
//! metadata it also carries; its timestamp is the newest of the samples used. Samples of
//! other meters are consumed and dropped, as Ceilometer's transformer does.
//!
//! A NaN or infinite result, or an evaluation error (division by zero, a missing metadata key
//! without `or`, non-numeric metadata), logs a warning and yields nothing for that resource.

use wasmon_guest::{Input, Kind, Params, Sample, Str, Transformer};

use crate::expr::{Env, Expr, Field, Mode, Val, field_of, volume_or_time};
use crate::hash::{FxHashMap, Key, same};
use crate::params::P;

/// The `arithmetic` transformer.
///
/// ```json
/// {"target": {"name": "memory_util", "unit": "%", "type": "gauge",
///             "expr": "100 * $(memory.usage) / $(memory)"}}
/// ```
#[derive(Debug)]
pub struct Arithmetic {
    expr: Expr,
    src: Box<str>,
    name: Option<Str>,
    unit: Option<Str>,
    kind: Option<Kind>,
    /// Resources in first-seen order, so that output order is deterministic.
    entries: Vec<Entry>,
    index: FxHashMap<Key, usize>,
    /// Slot arrays of flushed entries, reused so that a steady state allocates nothing.
    spare: Vec<Box<[Option<Sample>]>>,
}

#[derive(Debug)]
struct Entry {
    resource: Str,
    /// One cached sample per referenced meter, by slot.
    slots: Box<[Option<Sample>]>,
    filled: usize,
}

/// The cached samples of one resource are the expression's variables.
struct Slots<'a>(&'a [Option<Sample>]);

impl Env for Slots<'_> {
    fn get(&self, slot: u16, field: &Field) -> Val<'_> {
        match &self.0[slot as usize] {
            Some(s) => field_of(s, field),
            None => Val::Missing,
        }
    }

    #[inline]
    fn num(&self, slot: u16, timestamp: bool) -> Option<f64> {
        let s = self.0[slot as usize].as_ref()?;
        Some(volume_or_time(s, timestamp))
    }
}

impl Transformer for Arithmetic {
    fn configure(params: &Params) -> Result<Self, String> {
        let p = P::new("arithmetic", params)?;
        p.warn_unknown(&["name", "unit", "type", "expr"]);
        let src = p.str(p.target("expr"))?.ok_or_else(|| {
            p.err(
                "target.expr",
                "is required: an expression over $(meter) references",
            )
        })?;
        if src.trim().is_empty() {
            return Err(p.err(
                "target.expr",
                "is empty: expected an expression over $(meter) references, e.g. 100 * $(memory.usage) / $(memory)",
            ));
        }
        let expr = Expr::parse(src, Mode::Meters)
            .map_err(|e| p.err("target.expr", format_args!("{src:?}: {e}")))?;
        if expr.meters().is_empty() {
            return Err(p.err(
                "target.expr",
                format_args!("{src:?} references no meter: expected at least one $(meter), e.g. 100 * $(memory.usage) / $(memory)"),
            ));
        }
        if expr.meters().len() > u16::MAX as usize {
            return Err(p.err("target.expr", "references too many meters"));
        }
        Ok(Arithmetic {
            expr,
            src: src.into(),
            name: p.str(p.target("name"))?.map(Str::from),
            unit: p.str(p.target("unit"))?.map(Str::from),
            kind: p.kind(p.target("type"))?,
            entries: Vec::new(),
            index: FxHashMap::default(),
            spare: Vec::new(),
        })
    }

    fn handle(&mut self, input: impl Input, _out: &mut Vec<Sample>) {
        for s in input {
            // Expressions name a handful of meters: a linear scan beats hashing. The meters
            // are interned, so a match is a pointer comparison.
            let Some(slot) = self.expr.meters().iter().position(|m| same(m, &s.name)) else {
                continue;
            };
            let key = Key(s.resource.clone());
            let i = match self.index.get(&key) {
                Some(&i) => i,
                None => {
                    let n = self.expr.meters().len();
                    let slots = self
                        .spare
                        .pop()
                        .unwrap_or_else(|| (0..n).map(|_| None).collect());
                    self.entries.push(Entry {
                        resource: s.resource.clone(),
                        slots,
                        filled: 0,
                    });
                    self.index.insert(key, self.entries.len() - 1);
                    self.entries.len() - 1
                }
            };
            let e = &mut self.entries[i];
            if e.slots[slot].is_none() {
                e.filled += 1;
            }
            e.slots[slot] = Some(s);
        }
    }

    fn flush(&mut self, out: &mut Vec<Sample>) {
        let Arithmetic {
            expr,
            src,
            name,
            unit,
            kind,
            entries,
            index,
            spare,
        } = self;
        let needed = expr.meters().len();
        let before = entries.len();
        entries.retain_mut(|e| {
            if e.filled < needed {
                return true;
            }
            match expr.eval_f64(&Slots(&e.slots)) {
                Ok(v) if v.is_finite() => {
                    let reference = e.slots[0].as_ref().expect("complete entry");
                    let newest = e.slots.iter().flatten().map(|s| s.timestamp_ns).max();
                    out.push(Sample {
                        name: name.as_ref().unwrap_or(&reference.name).clone(),
                        resource: e.resource.clone(),
                        unit: unit.as_ref().unwrap_or(&reference.unit).clone(),
                        kind: kind.unwrap_or(reference.kind),
                        value: v,
                        timestamp_ns: newest.unwrap_or(reference.timestamp_ns),
                        metadata: reference.metadata.clone(),
                    });
                }
                Ok(v) => wasmon_guest::warn!(
                    "arithmetic: expression {src:?} evaluated to {v} for resource {}; no sample",
                    e.resource
                ),
                Err(err) => wasmon_guest::warn!(
                    "arithmetic: unable to evaluate {src:?} for resource {}: {err}",
                    e.resource
                ),
            }
            let mut slots = std::mem::take(&mut e.slots);
            slots.iter_mut().for_each(|s| *s = None);
            spare.push(slots);
            false
        });
        if entries.len() != before {
            index.clear();
            for (i, e) in entries.iter().enumerate() {
                index.insert(Key(e.resource.clone()), i);
            }
        }
    }
}
