//! The encoder: picks each buffer's smallest form of the cascade and writes it (the format is
//! described in `codec.rs`).

use super::compact::{self, DecimalHead};
use super::ratio;
use super::{MAX_DICT, MAX_EXP, MAX_VALUES, POW10, bits, scale_back, words};

/// Values up to which encoding works in arrays of this size on the stack rather than of
/// [`MAX_VALUES`] (clearing 4 KiB twice cost more than encoding 16 values).
const SMALL: usize = 64;

/// Values sampled to pick the decimal exponent before the full pass.
const EXP_SAMPLES: usize = 16;

/// |scaled value| below this converts to f64 and back exactly.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

/// Encodes `values` (at most [`MAX_VALUES`]) into `out` (appended).
pub fn encode(values: &[f64], out: &mut Vec<u8>) {
    assert!(
        values.len() <= MAX_VALUES,
        "a buffer holds at most 512 values"
    );
    let n = values.len();
    let nans = values.iter().filter(|v| v.is_nan()).count();
    if nans == n {
        out.push(3);
        return;
    }
    if nans == 0 {
        out.push(0);
    } else {
        let mut runs: Vec<(u16, u16)> = Vec::new();
        for (i, v) in values.iter().enumerate() {
            if v.is_nan() {
                match runs.last_mut() {
                    Some((s, l)) if (*s + *l) as usize == i => *l += 1,
                    _ => runs.push((i as u16, 1)),
                }
            }
        }
        if 2 + 4 * runs.len() < n.div_ceil(8) {
            out.push(2);
            out.extend_from_slice(&(runs.len() as u16).to_le_bytes());
            for (s, l) in runs {
                out.extend_from_slice(&s.to_le_bytes());
                out.extend_from_slice(&l.to_le_bytes());
            }
        } else {
            out.push(1);
            let mut map = vec![0u8; n.div_ceil(8)];
            for (i, v) in values.iter().enumerate() {
                if !v.is_nan() {
                    map[i / 8] |= 1 << (i % 8);
                }
            }
            out.extend_from_slice(&map);
        }
    }
    if nans == 0 {
        return encode_values(values, out);
    }
    // A small piece (the store freezes 16 values at a time) does not clear a 4 KiB array.
    let (mut small, mut big);
    let present: &mut [f64] = if n <= SMALL {
        small = [0f64; SMALL];
        &mut small
    } else {
        big = [0f64; MAX_VALUES];
        &mut big
    };
    let mut m = 0;
    for v in values.iter().filter(|v| !v.is_nan()) {
        present[m] = *v;
        m += 1;
    }
    encode_values(&present[..m], out);
}

fn encode_values(v: &[f64], out: &mut Vec<u8>) {
    let m = v.len();
    let first = v[0].to_bits();
    if v.iter().all(|x| x.to_bits() == first) {
        match compact::small_int(v[0]) {
            Some(d) => compact::write_int_constant(d, out),
            None => {
                out.push(0);
                out.extend_from_slice(&first.to_le_bytes());
            }
        }
        return;
    }
    let raw_size = m * 8;
    let mut table = [0u64; MAX_DICT];
    let dict = dictionary(v, &mut table);
    let dict_size = dict.as_ref().map_or(usize::MAX, |d| {
        1 + d.len() * 8 + words(m, bits(d.len() as u64 - 1)) * 8
    });
    let (mut small, mut big);
    let ds: &mut [i64] = if m <= SMALL {
        small = [0i64; SMALL];
        &mut small
    } else {
        big = [0i64; MAX_VALUES];
        &mut big
    };
    let dec = decimal(v, ds);
    let dec_size = dec.as_ref().map_or(usize::MAX, Decimal::size);
    // Noisy values (more than half a value's bytes in the best form so far) may be rates of
    // counters: the ratio form's search costs ~10 ns a value, paid only then.
    let best = dict_size.min(dec_size).min(raw_size);
    if best > m * 4 {
        let mut pairs = [(0i64, 0i64); MAX_VALUES];
        let mut exceptions = Vec::new();
        if let Some(head) = ratio::analyse(v, best, &mut pairs, &mut exceptions) {
            head.write(out);
            let pairs = &pairs[..m];
            let (n_lo, j_lo) = (head.n_lo, head.j_lo as i64);
            pack(
                pairs.iter().map(|p| p.0.wrapping_sub(n_lo) as u64),
                head.n_width,
                out,
            );
            pack(pairs.iter().map(|p| (p.1 - j_lo) as u64), head.j_width, out);
            for i in exceptions {
                out.extend_from_slice(&i.to_le_bytes());
                out.extend_from_slice(&v[i as usize].to_bits().to_le_bytes());
            }
            return;
        }
    }
    if dict_size <= dec_size && dict_size < raw_size {
        let d = dict.expect("sized above");
        out.push(1);
        out.push(d.len() as u8);
        for b in d {
            out.extend_from_slice(&b.to_le_bytes());
        }
        let w = bits(d.len() as u64 - 1);
        pack(
            v.iter().map(|x| {
                let b = x.to_bits();
                d.iter().position(|e| *e == b).expect("in the dictionary") as u64
            }),
            w,
            out,
        );
    } else if dec_size < raw_size {
        dec.expect("sized above").write(&ds[..m], out);
    } else {
        out.push(3);
        for x in v {
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
    }
}

/// The distinct bit patterns of `v` (in `table`) if there are at most [`MAX_DICT`].
fn dictionary<'t>(v: &[f64], table: &'t mut [u64; MAX_DICT]) -> Option<&'t [u64]> {
    let mut k = 0;
    for x in v {
        let b = x.to_bits();
        if !table[..k].contains(&b) {
            if k == MAX_DICT {
                return None;
            }
            table[k] = b;
            k += 1;
        }
    }
    Some(&table[..k])
}
/// The integer `v` is at exponent `e`, if it reads back as exactly `v`.
#[inline]
fn fits(v: f64, e: i32) -> Option<i64> {
    scaled(v, e).filter(|d| scale_back(*d, e).to_bits() == v.to_bits())
}

/// `v × 10^e` rounded to an integer, if it lies where integers convert to f64 exactly.
#[inline]
fn scaled(v: f64, e: i32) -> Option<i64> {
    let x = if e >= 0 {
        v * POW10[e as usize]
    } else {
        v / POW10[(-e) as usize]
    };
    (x.abs() < EXACT_INT).then(|| x.round() as i64)
}

/// Rounds `v` to `digits` significant decimal digits (the lossy `precision` option), in the
/// form the decimal encoding reads back exactly. Non-finite values and zero stay.
pub fn round_to_digits(v: f64, digits: u32) -> f64 {
    if !v.is_finite() || v == 0.0 || digits == 0 {
        return v;
    }
    let mag = v.abs().log10().floor() as i32;
    let e = (digits as i32 - 1 - mag).clamp(-MAX_EXP, MAX_EXP);
    scaled(v, e).map_or(v, |d| scale_back(d, e))
}

/// [`encode`]s `values` rounded to `digits` significant digits first (0: every bit kept).
pub fn encode_rounded(values: &[f64], digits: u32, out: &mut Vec<u8>) {
    if digits == 0 {
        return encode(values, out);
    }
    let mut v = [0f64; MAX_VALUES];
    for (d, s) in v.iter_mut().zip(values) {
        *d = round_to_digits(*s, digits);
    }
    encode(&v[..values.len().min(MAX_VALUES)], out);
}

/// The smallest exponent at which `x` is a decimal.
fn min_exp(x: f64) -> Option<i32> {
    (0..=MAX_EXP).find(|&k| fits(x, k).is_some())
}

/// The decimal form of a block's integers (`ds`, kept by the caller: packed as written).
struct Decimal {
    e: i32,
    delta: bool,
    base: i64,
    min_delta: i64,
    width: u32,
    /// Values packed: one fewer than the integers in delta mode.
    count: usize,
    exceptions: Vec<(u16, u64)>,
}

impl Decimal {
    fn head(&self) -> DecimalHead {
        DecimalHead {
            e: self.e,
            delta: self.delta,
            base: self.base,
            min_delta: self.min_delta,
            width: self.width,
            exceptions: self.exceptions.len(),
        }
    }

    fn size(&self) -> usize {
        self.head().size() + words(self.count, self.width) * 8 + self.exceptions.len() * 10
    }

    /// Form 5 (the decimal form with its header compact; form 2's body).
    fn write(&self, ds: &[i64], out: &mut Vec<u8>) {
        self.head().write(out);
        if self.delta {
            let md = self.min_delta;
            let deltas = ds
                .windows(2)
                .map(|w| w[1].wrapping_sub(w[0]).wrapping_sub(md) as u64);
            pack(deltas, self.width, out);
        } else {
            let lo = self.base;
            pack(
                ds.iter().map(|d| d.wrapping_sub(lo) as u64),
                self.width,
                out,
            );
        }
        for (i, b) in &self.exceptions {
            out.extend_from_slice(&i.to_le_bytes());
            out.extend_from_slice(&b.to_le_bytes());
        }
    }
}

/// The decimal form of `v`, if most values are decimals of a few digits.
fn decimal(v: &[f64], ds: &mut [i64]) -> Option<Decimal> {
    let m = v.len();
    // The exponent: the largest a sample of the values needs (most series keep the same
    // number of decimals); values that need more become exceptions.
    // An odd stride, so a period in the series does not make every sample alike.
    let stride = m.div_ceil(EXP_SAMPLES) | 1;
    // An exponent at which the largest value leaves the exact-integer range would make every
    // other value an exception: one long value (1/3 is a decimal of 16 digits) among short
    // ones is an exception instead.
    // The bound is the largest sampled decimal (a huge value that is no decimal at all is an
    // exception either way).
    let mut sampled = [None; EXP_SAMPLES + 1];
    let mut max = 0f64;
    for (k, x) in sampled.iter_mut().zip(v.iter().step_by(stride)) {
        *k = min_exp(*x);
        if k.is_some() {
            max = max.max(x.abs());
        }
    }
    let usable = |k: &i32| max * POW10[*k as usize] < EXACT_INT;
    let tried = v.len().div_ceil(stride);
    let (mut e, mut misses) = (0, 0);
    for k in &sampled[..tried] {
        match k.filter(usable) {
            Some(k) => e = e.max(k),
            None => misses += 1,
        }
    }
    if misses * 4 > tried {
        return None;
    }
    let mut exceptions = Vec::new();
    // A value the sample did not foresee raises the exponent and starts over (a few times).
    let mut retries = 3;
    'pass: loop {
        exceptions.clear();
        let mut prev = None;
        for (i, x) in v.iter().enumerate() {
            ds[i] = match fits(*x, e) {
                Some(d) => d,
                None => {
                    if exceptions.len() * 8 >= m {
                        return None;
                    }
                    if let Some(k) = min_exp(*x).filter(|k| *k > e && retries > 0 && usable(k)) {
                        retries -= 1;
                        e = k;
                        continue 'pass;
                    }
                    exceptions.push((i as u16, x.to_bits()));
                    // An exception keeps its neighbour's integer so it widens nothing.
                    prev.unwrap_or_else(|| v.iter().find_map(|y| fits(*y, e)).unwrap_or(0))
                }
            };
            prev = Some(ds[i]);
        }
        break;
    }
    let ds = &ds[..m];
    let (lo, hi) = ds
        .iter()
        .fold((i64::MAX, i64::MIN), |(a, b), d| (a.min(*d), b.max(*d)));
    let for_width = bits(hi.wrapping_sub(lo) as u64);
    let (mut dlo, mut dhi) = (i64::MAX, i64::MIN);
    for w in ds.windows(2) {
        let d = w[1].wrapping_sub(w[0]);
        dlo = dlo.min(d);
        dhi = dhi.max(d);
    }
    let delta_width = if m > 1 {
        bits(dhi.wrapping_sub(dlo) as u64)
    } else {
        64
    };
    // Deltas cost 8 more header bytes and one fewer value.
    let delta = m > 1 && words(m - 1, delta_width) * 8 + 8 < words(m, for_width) * 8;
    Some(Decimal {
        e,
        delta,
        base: if delta { ds[0] } else { lo },
        min_delta: dlo,
        width: if delta { delta_width } else { for_width },
        count: if delta { m - 1 } else { m },
        exceptions,
    })
}

fn pack(vals: impl Iterator<Item = u64>, w: u32, out: &mut Vec<u8>) {
    if w == 0 {
        return;
    }
    let (mut acc, mut used) = (0u64, 0u32);
    for v in vals {
        acc |= v << used;
        let total = used + w;
        if total >= 64 {
            out.extend_from_slice(&acc.to_le_bytes());
            let spill = total - 64;
            acc = if spill == 0 { 0 } else { v >> (w - spill) };
            used = spill;
        } else {
            used = total;
        }
    }
    if used > 0 {
        out.extend_from_slice(&acc.to_le_bytes());
    }
}
