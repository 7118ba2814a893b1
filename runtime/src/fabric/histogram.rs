//! Rate histograms in one fixed exponential schema, identical on every agent, so that merging
//! children's histograms is an exact bucket add (equal to the histogram of the union of their
//! ports). Owns the schema, the bucket function, the merge and the wire and text forms.
//!
//! Schema 1: base 2^(1/4) (four buckets per doubling); bucket `i` holds rates in
//! `[2^(MIN_EXP + i/4), 2^(MIN_EXP + (i+1)/4))`; a zero bucket for a rate of exactly 0;
//! rates below `2^MIN_EXP` fall into bucket 0, rates at or above `2^MAX_EXP` into the last.
//! `invalid` counts ports whose rate was unknowable (reset, saturation, unavailable),
//! `missing` ports that could not be read. Every owned port with a previous reading adds
//! exactly one observation (a port's first reading is only a baseline).

use serde::{Deserialize, Serialize};

/// Version of the bucket layout; histograms of different schemas are never merged.
pub const SCHEMA: u32 = 1;
/// Buckets per power of two.
pub const PER_DOUBLING: i32 = 4;
/// Smallest resolved rate, 2^-20 per second (about one event in 12 days).
pub const MIN_EXP: i32 = -20;
/// Largest resolved rate, 2^50 per second (1 PB/s).
pub const MAX_EXP: i32 = 50;
pub const BUCKETS: usize = ((MAX_EXP - MIN_EXP) * PER_DOUBLING) as usize;

/// 2^(1/4), 2^(1/2), 2^(3/4) as f64 literals: the sub-bucket boundaries within a doubling,
/// fixed here rather than computed so every build draws them at the same bits.
const STEPS: [f64; 3] = [
    1.189_207_115_002_721,
    std::f64::consts::SQRT_2,
    1.681_792_830_507_429,
];
const MANTISSA: u64 = (1 << 52) - 1;

/// The bucket of a positive finite rate.
#[inline]
pub fn bucket(rate: f64) -> usize {
    let bits = rate.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32 - 1023;
    if exp < MIN_EXP {
        return 0;
    }
    if exp >= MAX_EXP {
        return BUCKETS - 1;
    }
    let m = bits & MANTISSA;
    let sub = (m >= STEPS[0].to_bits() & MANTISSA) as i32
        + (m >= STEPS[1].to_bits() & MANTISSA) as i32
        + (m >= STEPS[2].to_bits() & MANTISSA) as i32;
    ((exp - MIN_EXP) * PER_DOUBLING + sub) as usize
}

/// The lower boundary of bucket `i`.
pub fn lower_bound(i: usize) -> f64 {
    let i = i as i32;
    let exp = MIN_EXP + i.div_euclid(PER_DOUBLING);
    let sub = i.rem_euclid(PER_DOUBLING);
    let step = if sub == 0 {
        1.0
    } else {
        STEPS[sub as usize - 1]
    };
    step * 2f64.powi(exp)
}

/// One counter's histogram over a set of ports for one epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    pub zero: u64,
    pub invalid: u64,
    pub missing: u64,
    pub counts: Vec<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            zero: 0,
            invalid: 0,
            missing: 0,
            counts: vec![0; BUCKETS],
        }
    }
}

impl Histogram {
    #[inline]
    pub fn observe(&mut self, rate: f64) {
        if rate == 0.0 {
            self.zero += 1;
        } else {
            self.counts[bucket(rate)] += 1;
        }
    }

    /// Exact merge: bucket by bucket.
    pub fn merge(&mut self, other: &Histogram) {
        self.zero += other.zero;
        self.invalid += other.invalid;
        self.missing += other.missing;
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
    }

    /// Valid rates (zero bucket included).
    pub fn valid(&self) -> u64 {
        self.zero + self.counts.iter().sum::<u64>()
    }

    /// Every observation: one per owned port that has a baseline.
    pub fn total(&self) -> u64 {
        self.valid() + self.invalid + self.missing
    }

    pub fn reset(&mut self) {
        self.zero = 0;
        self.invalid = 0;
        self.missing = 0;
        self.counts.fill(0);
    }

    /// The sparse wire form.
    pub fn to_wire(&self) -> WireHistogram {
        WireHistogram {
            schema: SCHEMA,
            zero: self.zero,
            invalid: self.invalid,
            missing: self.missing,
            buckets: self
                .counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(i, c)| (i as u32, *c))
                .collect(),
        }
    }

    /// From the wire form; refuses another schema or a bucket out of range.
    pub fn from_wire(w: &WireHistogram) -> Result<Histogram, String> {
        if w.schema != SCHEMA {
            return Err(format!(
                "histogram schema {} (this agent uses {SCHEMA})",
                w.schema
            ));
        }
        let mut h = Histogram {
            zero: w.zero,
            invalid: w.invalid,
            missing: w.missing,
            ..Histogram::default()
        };
        for &(i, c) in &w.buckets {
            let slot = h
                .counts
                .get_mut(i as usize)
                .ok_or_else(|| format!("bucket {i} out of range (0..{BUCKETS})"))?;
            *slot += c;
        }
        Ok(h)
    }

    /// A text histogram: one line per non-empty bucket, a bar scaled to the largest.
    pub fn render(&self, unit: &str) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let peak = self
            .counts
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(self.zero)
            .max(1);
        let bar = |n: u64| "#".repeat(((n * 50).div_ceil(peak)) as usize);
        let _ = writeln!(out, "{:>24}  {:>10}", format!("rate ({unit}/s)"), "ports");
        let _ = writeln!(out, "{:>24}  {:>10}  {}", "0", self.zero, bar(self.zero));
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let range = format!("{} - {}", human(lower_bound(i)), human(lower_bound(i + 1)));
            let _ = writeln!(out, "{range:>24}  {c:>10}  {}", bar(c));
        }
        let _ = writeln!(out, "{:>24}  {:>10}", "invalid", self.invalid);
        let _ = writeln!(out, "{:>24}  {:>10}", "missing", self.missing);
        let _ = writeln!(out, "{:>24}  {:>10}", "total", self.total());
        out
    }
}

fn human(v: f64) -> String {
    const SI: [(f64, &str); 5] = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    for (f, s) in SI {
        if v >= f {
            return format!("{:.3}{s}", v / f);
        }
    }
    if v >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

/// A histogram on the wire: only non-empty buckets, as `[index, count]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireHistogram {
    pub schema: u32,
    pub zero: u64,
    pub invalid: u64,
    pub missing: u64,
    pub buckets: Vec<(u32, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_the_boundaries() {
        assert_eq!(bucket(1.0), (-MIN_EXP * PER_DOUBLING) as usize);
        for i in 1..BUCKETS - 1 {
            let lo = lower_bound(i);
            assert_eq!(bucket(lo), i, "lower bound of {i}");
            assert_eq!(bucket(lo * (1.0 - 1e-12)), i - 1, "just below {i}");
        }
        assert_eq!(bucket(1e-30), 0);
        assert_eq!(bucket(1e300), BUCKETS - 1);
        assert_eq!(bucket(f64::MIN_POSITIVE / 4.0), 0); // subnormal
    }

    #[test]
    fn merge_equals_the_histogram_of_the_union() {
        let rates: Vec<f64> = (0..10_000u64)
            .map(|i| {
                let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11;
                if i % 7 == 0 { 0.0 } else { (x as f64) * 1e-9 }
            })
            .collect();
        let mut union = Histogram::default();
        let mut parts = vec![Histogram::default(); 4];
        for (i, r) in rates.iter().enumerate() {
            union.observe(*r);
            parts[i % 4].observe(*r);
        }
        union.invalid = 3;
        parts[1].invalid = 3;
        let mut merged = Histogram::default();
        for p in &parts {
            merged.merge(&Histogram::from_wire(&p.to_wire()).unwrap());
        }
        assert_eq!(merged, union);
        assert_eq!(merged.total(), 10_003);
    }

    #[test]
    fn other_schemas_are_refused() {
        let mut w = Histogram::default().to_wire();
        w.schema = 2;
        assert!(Histogram::from_wire(&w).unwrap_err().contains("schema 2"));
        let mut w = Histogram::default().to_wire();
        w.buckets.push((BUCKETS as u32, 1));
        assert!(Histogram::from_wire(&w).is_err());
    }

    #[test]
    fn renders_non_empty_buckets() {
        let mut h = Histogram::default();
        h.observe(1000.0);
        h.observe(1001.0);
        h.observe(0.0);
        h.invalid = 1;
        let t = h.render("B");
        assert!(t.contains("861.078 - 1.024k"), "{t}");
        assert!(t.contains("total"), "{t}");
        assert_eq!(t.lines().filter(|l| l.contains('#')).count(), 2, "{t}");
    }
}
