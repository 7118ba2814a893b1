//! Reads: selector matching (a level's own series, else its children's, recursively),
//! step-wise sum/avg over the matches, downsampling to a coarser resolution, and stats.

use std::sync::Arc;

use super::buffer::{Chain, slot_of};
use super::config::LTTB_MIN_POINTS;
use super::{Aggregation, Level, MetricInfo, SelectorElement, Store, StoreError};

/// Values of one read. `data[i]` belongs to `from + i * resolution` (roughly, once LTTB
/// picked the values); `to` is one native step past the last value read. NaN marks a step
/// without data.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadResult {
    pub data: Vec<f64>,
    pub from: i64,
    pub to: i64,
    pub resolution: i64,
    /// The series' own step (`resolution` before downsampling).
    pub step: i64,
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

    /// Reads `metric` over `[from, to)` (seconds; `to` exclusive) for the selected level(s),
    /// as cc-metric-store's `MemoryStore.Read` does: value `i` is the slot holding the time
    /// `from + i * step` (each series on its own grid), `from` moves up to the oldest
    /// sample when it lies before it, and the answer ends with the newest sample. An empty
    /// answer has `from == to`, at the requested `from` when that lies after the data.
    /// Several matches are combined per the metric's aggregation (a series without data at a
    /// step makes that step NaN). `resolution` (seconds, 0 = native) downsamples with
    /// cc-lib's LTTB (see [`lttb`]).
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
        let (data, from, freq) = match &levels[..] {
            // One series (most reads): everything under one hold of its level's lock.
            [level] => level
                .with_chain(m.id, |c| {
                    let freq = c.step();
                    let (first, end) = c.span();
                    let from = from.max(c.time(first));
                    let wanted = ceil_div(to.saturating_sub(from), freq).max(0);
                    let k0 = c.slot(from);
                    let n = (end - k0).clamp(0, wanted);
                    let mut data = vec![0.0; n as usize];
                    c.copy_into(k0, k0 + n, &mut data);
                    (data, from, freq)
                })
                .ok_or(StoreError::NotFound)?,
            _ => self.combine(&levels, &m, from, to)?,
        };
        let n = data.len() as i64;
        let (data, resolution) = lttb_with(
            data,
            freq,
            resolution,
            self.config().resampling_minimum_points,
        )?;
        Ok(ReadResult {
            data,
            from,
            to: from + n * freq,
            resolution,
            step: freq,
        })
    }

    /// The step-wise sum (or average) of several (two or more) series over `[from, to)`, as [`Store::read`]
    /// describes: the values, the answer's `from` and the step.
    fn combine(
        &self,
        levels: &[Arc<Level>],
        m: &MetricInfo,
        from: i64,
        to: i64,
    ) -> Result<(Vec<f64>, i64, i64), StoreError> {
        // One hold of each level's lock: the answer starts at `from` unless every series
        // starts after it, which is known only at the end (then the sum is redone from the
        // oldest sample). The answer is as long as the longest series' part, so it grows
        // as series are added: steps past the series added before are theirs to make NaN.
        let (mut freq, mut oldest, mut added) = (0, i64::MAX, 0usize);
        let mut data = Vec::new();
        for l in levels {
            with_chain(l, m.id, |c| {
                if freq == 0 {
                    freq = c.step();
                } else if freq != c.step() {
                    return Err(StoreError::DataDoesNotAlign);
                }
                let (first, end) = c.span();
                oldest = oldest.min(c.time(first));
                let wanted = ceil_div(to.saturating_sub(from), freq).max(0);
                let k0 = c.slot(from);
                let n = (end - k0).clamp(0, wanted) as usize;
                if n > data.len() {
                    data.resize(n, if added == 0 { 0.0 } else { f64::NAN });
                }
                c.add_into(k0, k0 + data.len() as i64, &mut data);
                added += 1;
                Ok(())
            })?;
        }
        if freq == 0 {
            return Err(StoreError::NotFound);
        }
        let from = if oldest > from {
            data = self.sum_from(levels, m, oldest, to, freq)?;
            oldest
        } else {
            from
        };
        if m.aggregation == Aggregation::Avg {
            let scale = 1.0 / levels.len() as f64;
            data.iter_mut().for_each(|x| *x *= scale);
        }
        Ok((data, from, freq))
    }

    /// The sum of [`Store::combine`] for a read that started before every series (`from`
    /// moved up to the oldest sample): the answer's length first, then the sum.
    fn sum_from(
        &self,
        levels: &[Arc<Level>],
        m: &MetricInfo,
        from: i64,
        to: i64,
        freq: i64,
    ) -> Result<Vec<f64>, StoreError> {
        let wanted = ceil_div(to.saturating_sub(from), freq).max(0);
        let mut n = 0;
        for l in levels {
            with_chain(l, m.id, |c| {
                if freq != c.step() {
                    return Err(StoreError::DataDoesNotAlign);
                }
                n = n.max((c.span().1 - slot_of(from, freq, c.phase())).clamp(0, wanted));
                Ok(())
            })?;
        }
        let mut data = vec![0.0; n as usize];
        for l in levels {
            with_chain(l, m.id, |c| {
                let k0 = c.slot(from);
                c.add_into(k0, k0 + n, &mut data);
                Ok(())
            })?;
        }
        Ok(data)
    }

    /// Stats over the raw samples of every matched series in `[from, to)` (not over the
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
                let k0 = c.slot(from.max(c.time(a))).max(a);
                let k1 = (k0 + ceil_div(to.saturating_sub(c.time(k0)), c.step()).max(0)).min(b);
                let k1 = k1.max(k0);
                let mut buf = vec![0.0; (k1 - k0) as usize];
                c.copy_into(k0, k1, &mut buf);
                all.extend_from_slice(&buf);
                rfrom = rfrom.min(c.time(k0));
                rto = rto.max(c.time(k1));
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

/// Downsamples `data` (one value per `step` seconds) to one per `resolution` seconds with
/// Largest-Triangle-Three-Buckets, with cc-lib's `resampler.LargestTriangleThreeBucket`
/// rules (read from its source, reimplemented): the first and last values are kept and each
/// bucket between them contributes the value making the largest triangle with the previous
/// pick and the next bucket's mean (a NaN area wins, so gaps show); nothing changes when
/// `resolution` is 0, not coarser than `step`, would leave no or as many values, or the
/// series is shorter than [`LTTB_MIN_POINTS`]; a coarser `resolution` that is not a multiple
/// of `step` is an error. Returns the values and the step they have.
pub fn lttb(data: Vec<f64>, step: i64, resolution: i64) -> Result<(Vec<f64>, i64), StoreError> {
    lttb_with(data, step, resolution, LTTB_MIN_POINTS)
}

pub(crate) fn lttb_with(
    data: Vec<f64>,
    step: i64,
    resolution: i64,
    min_points: usize,
) -> Result<(Vec<f64>, i64), StoreError> {
    if step <= 0 || resolution <= 0 || resolution <= step {
        return Ok((data, step));
    }
    if resolution % step != 0 {
        return Err(StoreError::Resolution { resolution, step });
    }
    let n = data.len();
    let out_len = n / (resolution / step) as usize;
    if out_len == 0 || n < min_points || out_len >= n {
        return Ok((data, step));
    }
    let mut out = Vec::with_capacity(out_len.max(2));
    out.push(data[0]);
    // Buckets between the first and the last value; `bucket` is fractional. With fewer than
    // three values wanted the loop below does not run (cc-lib divides by zero there and
    // keeps the first and the last).
    let bucket = (n - 2) as f64 / (out_len as f64 - 2.0);
    let (mut low, mut mid) = (1, bucket.floor() as usize + 1);
    let mut prev = 0;
    for i in 0..out_len.saturating_sub(2) {
        let high = (((i + 2) as f64 * bucket).floor() as usize + 1).min(n - 2);
        let (cx, cy) = mean_point(&data[mid..=high], mid);
        let (ax, ay) = (prev as f64, data[prev]);
        let mut best = (-1.0, 0);
        for (j, &y) in data.iter().enumerate().take(mid).skip(low) {
            let area = triangle_area(ax, ay, cx, cy, j as f64, y);
            if area > best.0 || area.is_nan() {
                best = (area, j);
            }
        }
        out.push(data[best.1]);
        prev = best.1;
        (low, mid) = (mid, high);
    }
    out.push(data[n - 1]);
    Ok((out, resolution))
}

/// The mean point of `ys` placed at x = `x0`, `x0 + 1`, ...; NaN y if any y is NaN.
fn mean_point(ys: &[f64], x0: usize) -> (f64, f64) {
    let l = ys.len() as f64;
    let x: f64 = (0..ys.len()).map(|i| (x0 + i) as f64).sum();
    let y: f64 = ys.iter().sum();
    (x / l, y / l)
}

fn triangle_area(ax: f64, ay: f64, bx: f64, by: f64, cx: f64, cy: f64) -> f64 {
    (((ax - cx) * (by - ay) - (ax - bx) * (cy - ay)) * 0.5).abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_ignore_nan() {
        let s = Stats::of(&[1.0, f64::NAN, 3.0]);
        assert_eq!(ceil_div(-5, 10), 0);
        assert_eq!(ceil_div(15, 10), 2);
        assert_eq!((s.samples, s.avg, s.min, s.max), (2, 2.0, 1.0, 3.0));
        assert!(Stats::of(&[f64::NAN]).avg.is_nan());
    }
}
