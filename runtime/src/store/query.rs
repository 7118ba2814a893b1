//! Reads: selector matching (a level's own series, else its children's, recursively),
//! step-wise sum/avg over the matches, downsampling to a coarser resolution, and stats.

use std::sync::Arc;

use super::buffer::{Chain, slot_of};
use super::{Aggregation, Level, MetricInfo, SelectorElement, Store, StoreError};

/// Values of one read. `data[i]` belongs to `from + i * resolution`; `to` is one step past the
/// last value. NaN marks a step without data.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadResult {
    pub data: Vec<f64>,
    pub from: i64,
    pub to: i64,
    pub resolution: i64,
}

/// Average, minimum and maximum of the non-NaN samples, and their count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub samples: usize,
    pub avg: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    /// Stats of a slice, ignoring NaN; all NaN when no sample is a number.
    pub fn of(data: &[f64]) -> Stats {
        let (mut n, mut sum, mut min, mut max) = (0usize, 0.0, f64::INFINITY, f64::NEG_INFINITY);
        for &x in data {
            if !x.is_nan() {
                n += 1;
                sum += x;
                min = min.min(x);
                max = max.max(x);
            }
        }
        if n == 0 {
            return Stats {
                samples: 0,
                avg: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
            };
        }
        Stats {
            samples: n,
            avg: sum / n as f64,
            min,
            max,
        }
    }
}

impl ReadResult {
    pub fn stats(&self) -> Stats {
        Stats::of(&self.data)
    }
}

fn ceil_div(a: i64, b: i64) -> i64 {
    -((-a).div_euclid(b))
}

impl Store {
    /// Levels whose own chain for metric `id` answers the selector: the selected level if it
    /// has the metric, otherwise (recursively) its children.
    /// The metric and the levels a read covers: several only when the metric aggregates.
    fn resolve(
        &self,
        selector: &[SelectorElement],
        metric: &str,
    ) -> Result<(MetricInfo, Vec<Arc<Level>>), StoreError> {
        let m = self
            .registry
            .lookup(metric)
            .ok_or_else(|| StoreError::UnknownMetric(metric.to_string()))?;
        let levels = self.matching_levels(selector, m.id);
        if levels.is_empty() {
            return Err(StoreError::NotFound);
        }
        if levels.len() > 1 && m.aggregation == Aggregation::None {
            return Err(StoreError::NoAggregation {
                metric: metric.to_string(),
                matches: levels.len(),
            });
        }
        Ok((m, levels))
    }

    fn matching_levels(&self, selector: &[SelectorElement], id: u32) -> Vec<Arc<Level>> {
        let mut out = Vec::new();
        collect(&self.root, selector, id, &mut out);
        out
    }

    /// Reads `metric` over `[from, to]` (seconds, inclusive) for the selected level(s).
    /// Several matches are combined per the metric's aggregation; `resolution` (seconds, 0 =
    /// native) averages consecutive steps when it is a multiple of the native step.
    pub fn read(
        &self,
        selector: &[SelectorElement],
        metric: &str,
        from: i64,
        to: i64,
        resolution: i64,
    ) -> Result<ReadResult, StoreError> {
        if from > to {
            return Err(StoreError::InvalidRange);
        }
        let (m, levels) = self.resolve(selector, metric)?;
        // First pass: step and union of spans. All series must share a step (they do unless a
        // snapshot from another configuration was restored).
        let mut freq = 0;
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for l in &levels {
            with_chain(l, m.id, |c| {
                if freq == 0 {
                    freq = c.step();
                } else if freq != c.step() {
                    return Err(StoreError::DataDoesNotAlign);
                }
                let (a, b) = c.span();
                lo = lo.min(a);
                hi = hi.max(b);
                Ok(())
            })?;
        }
        if freq == 0 {
            return Err(StoreError::NotFound);
        }
        // A slot answers for timestamps within half a step of it: include every slot a
        // sample stamped inside [from, to] could have landed in.
        let k0 = slot_of(from, freq).max(lo);
        let k1 = (slot_of(to, freq) + 1).min(hi).max(k0);
        let n = (k1 - k0) as usize;
        let mut data = vec![0.0; n];
        if levels.len() == 1 {
            with_chain(&levels[0], m.id, |c| {
                c.copy_into(k0, k1, &mut data);
                Ok(())
            })?;
        } else {
            for l in &levels {
                with_chain(l, m.id, |c| {
                    c.add_into(k0, k1, &mut data);
                    Ok(())
                })?;
            }
            if m.aggregation == Aggregation::Avg {
                let scale = 1.0 / levels.len() as f64;
                data.iter_mut().for_each(|x| *x *= scale);
            }
        }
        let r = ReadResult {
            data,
            from: k0 * freq,
            to: k1 * freq,
            resolution: freq,
        };
        Ok(downsample(r, resolution))
    }

    /// Stats over the raw samples of every matched series in `[from, to]` (not over the
    /// aggregate): `samples` counts each series' values.
    pub fn stats(
        &self,
        selector: &[SelectorElement],
        metric: &str,
        from: i64,
        to: i64,
    ) -> Result<(Stats, i64, i64), StoreError> {
        let (m, levels) = self.resolve(selector, metric)?;
        let mut all = Vec::new();
        let (mut rfrom, mut rto) = (i64::MAX, i64::MIN);
        for l in &levels {
            with_chain(l, m.id, |c| {
                let (a, b) = c.span();
                let k0 = slot_of(from, c.step()).max(a);
                let k1 = (slot_of(to, c.step()) + 1).min(b).max(k0);
                let mut buf = vec![0.0; (k1 - k0) as usize];
                c.copy_into(k0, k1, &mut buf);
                all.extend_from_slice(&buf);
                rfrom = rfrom.min(k0 * c.step());
                rto = rto.max(k1 * c.step());
                Ok(())
            })?;
        }
        if rfrom > rto {
            return Err(StoreError::NotFound);
        }
        Ok((Stats::of(&all), rfrom, rto))
    }
}

fn with_chain(
    level: &Level,
    id: u32,
    f: impl FnOnce(&Chain) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    // Freed between matching and reading: contributes nothing (a gap).
    level.with_chain(id, f).unwrap_or(Ok(()))
}

fn has_chain(level: &Level, id: u32) -> bool {
    level.with_chain(id, |_| ()).is_some()
}

fn collect(level: &Arc<Level>, selector: &[SelectorElement], id: u32, out: &mut Vec<Arc<Level>>) {
    let Some((first, rest)) = selector.split_first() else {
        if has_chain(level, id) {
            out.push(level.clone());
        } else {
            for c in level.children() {
                collect(&c, &[], id, out);
            }
        }
        return;
    };
    match first {
        SelectorElement::Name(n) => {
            if let Some(c) = level.get_child(n) {
                collect(&c, rest, id, out);
            }
        }
        SelectorElement::Group(names) => {
            for n in names {
                if let Some(c) = level.get_child(n) {
                    collect(&c, rest, id, out);
                }
            }
        }
        SelectorElement::Any => {
            for c in level.children() {
                collect(&c, rest, id, out);
            }
        }
    }
}

/// Averages groups of `resolution / step` steps (NaN ignored; all-NaN stays NaN). Groups are
/// aligned to multiples of `resolution` so repeated queries return stable buckets.
fn downsample(r: ReadResult, resolution: i64) -> ReadResult {
    let step = r.resolution;
    if resolution <= step || step <= 0 {
        return r;
    }
    let factor = resolution / step;
    if factor <= 1 {
        return r;
    }
    let k0 = r.from / step;
    let k1 = r.to / step;
    let b0 = k0.div_euclid(factor);
    let b1 = ceil_div(k1, factor).max(b0);
    let mut out = Vec::with_capacity((b1 - b0) as usize);
    for b in b0..b1 {
        let lo = (b * factor).max(k0);
        let hi = ((b + 1) * factor).min(k1);
        let slice = &r.data[(lo - k0) as usize..(hi - k0) as usize];
        out.push(Stats::of(slice).avg);
    }
    ReadResult {
        data: out,
        from: b0 * factor * step,
        to: b1 * factor * step,
        resolution: factor * step,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downsample_aligned_buckets() {
        let r = ReadResult {
            data: vec![1.0, 2.0, f64::NAN, 4.0, 5.0],
            from: 10,
            to: 60,
            resolution: 10,
        };
        let d = downsample(r.clone(), 20);
        // Buckets [0,20) [20,40) [40,60): slot 1 | 2,3 | 4,5
        assert_eq!(d.from, 0);
        assert_eq!(d.to, 60);
        assert_eq!(d.resolution, 20);
        assert_eq!(d.data, vec![1.0, 2.0, 4.5]);
        assert_eq!(downsample(r.clone(), 0).data.len(), 5);
        assert_eq!(downsample(r.clone(), 15).resolution, 10);
    }

    #[test]
    fn stats_ignore_nan() {
        let s = Stats::of(&[1.0, f64::NAN, 3.0]);
        assert_eq!(ceil_div(-5, 10), 0);
        assert_eq!(ceil_div(15, 10), 2);
        assert_eq!((s.samples, s.avg, s.min, s.max), (2, 2.0, 1.0, 3.0));
        assert!(Stats::of(&[f64::NAN]).avg.is_nan());
    }
}
