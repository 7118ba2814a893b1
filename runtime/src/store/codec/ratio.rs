//! Form 6, rates of counters: values that are `n / d` with `n` an integer (a counter's
//! increase) and `d` a multiple of `2^-s` (an interval between two timestamps held as f64
//! seconds since the epoch: between 2004 and 2038 such a difference is a multiple of 2^-22).
//! A collector's rate `Δcount / Δt` is such a value; its decimal digits are noise (no decimal
//! form holds it) but the pair `(n, d·2^s)` is two small integers. Owns this form's bytes;
//! the caller writes the form byte's section only when it is the smallest.
//!
//! Layout after the form byte 6: `u8 s`, zigzag varint `n_lo`, `u8 n_width`, varint `j_lo`,
//! `u8 j_width`, varint exception count, then `m` packed `n - n_lo` (words as in the decimal
//! form), `m` packed `j - j_lo`, then `(u16 index, u64 bits)` per exception. Value `i` is
//! `n_i as f64 / (j_i as f64 × 2^-s)`, bit for bit; exceptions replace the values with no
//! such pair within the search below.

use super::compact::{put_uvar, read_ivar, read_uvar, uvar_len, zigzag};
use super::{DecodeError, bits, put, unpack, words};

/// The grid of intervals between epoch timestamps held as f64 (2^30 ≤ t < 2^31 s: 2004-2038).
/// A coarser grid (integer seconds, later epochs) is a subset of it.
const S: u32 = 22;

/// Intervals tried for a block's first rate, seconds: the usual collection intervals.
const INTERVALS: [f64; 15] = [
    1.0, 2.0, 3.0, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0,
];

/// Counter increases tried around `r × d` (either side) for a block's first rate, over each
/// of the usual intervals: jitter of the interval moves `n` by `r × jitter`.
const NEAR: i64 = 12;

/// The same over the interval of the value before (the block is rates): wider, so a fast
/// counter's rate (20,000 a second with 3 ms of jitter) still finds its pair.
const NEAR_NEXT: i64 = 64;

/// Values of a block tried as the first rate before the form is given up on.
const FIRST_TRIES: usize = 4;

/// `n / (j × 2^-s)`: the one formula encoder and decoder share.
#[inline(always)]
fn value(n: i64, j: i64, scale: f64) -> f64 {
    n as f64 / (j as f64 * scale)
}

fn scale_of(s: u32) -> f64 {
    f64::from_bits(((1023 - s) as u64) << 52)
}

/// A pair `(n, j)` within [`NEAR`] counts of `r × d` that gives back `r` exactly.
fn near(r: f64, d: f64, scale: f64, span: i64) -> Option<(i64, i64)> {
    let x = r * d;
    if !x.is_finite() || x.abs() > 1e15 {
        return None;
    }
    let n0 = x.round() as i64;
    // `j = n / (r × 2^-s)` is an integer for the pair sought, up to the rounding of `r`
    // (relative 2^-52): a multiplication sorts out the candidates, a division checks one.
    let inv = 1.0 / (r * scale);
    for k in 0..=2 * span {
        // 0, -1, 1, -2, 2, ...
        let n = n0 + if k % 2 == 0 { -(k / 2) } else { (k + 1) / 2 };
        if n == 0 {
            continue;
        }
        let jf = n as f64 * inv;
        if !(1.0..9e15).contains(&jf) {
            continue;
        }
        let j0 = jf.round();
        if (jf - j0).abs() > 1e-6 + jf * 1e-12 {
            continue;
        }
        let j0 = j0 as i64;
        for j in [j0, j0 - 1, j0 + 1] {
            if j > 0 && value(n, j, scale).to_bits() == r.to_bits() {
                return Some((n, j));
            }
        }
    }
    None
}

/// Multiples of the interval before tried for a value: 1 first; 2 and 3 for missed samples;
/// 4 to 6 when the block's first value came out as a reduced fraction (`n/4` over a quarter
/// of the interval reads back the same), which `encode` scales up afterwards.
const MULTIPLES: [f64; 7] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 0.5];

/// The pair of `r` given the interval of the value before it (`d`; `confirmed`: two values
/// in a row had it, so only a missed sample's double is tried besides it), or one of the
/// usual intervals. Also whether `d` itself (no multiple) gave it.
fn pair(r: f64, d: Option<f64>, confirmed: bool, scale: f64) -> Option<((i64, i64), bool)> {
    if r == 0.0 && r.is_sign_positive() {
        return Some(((0, 0), false));
    }
    let Some(d) = d else {
        return INTERVALS
            .iter()
            .find_map(|d| near(r, *d, scale, NEAR))
            .map(|p| (p, false));
    };
    if let Some(p) = near(r, d, scale, NEAR_NEXT) {
        return Some((p, true));
    }
    let multiples = if confirmed {
        &MULTIPLES[1..2]
    } else {
        &MULTIPLES[1..]
    };
    multiples
        .iter()
        .find_map(|k| near(r, d * k, scale, NEAR))
        .map(|p| (p, false))
}

/// Form 6's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RatioHead {
    pub(super) s: u32,
    pub(super) n_lo: i64,
    pub(super) n_width: u32,
    pub(super) j_lo: u64,
    pub(super) j_width: u32,
    pub(super) exceptions: usize,
}

impl RatioHead {
    /// Header bytes, the form byte included.
    pub(super) fn size(&self) -> usize {
        1 + 1
            + uvar_len(zigzag(self.n_lo))
            + 1
            + uvar_len(self.j_lo)
            + 1
            + uvar_len(self.exceptions as u64)
    }

    pub(super) fn write(&self, out: &mut Vec<u8>) {
        out.push(6);
        out.push(self.s as u8);
        put_uvar(out, zigzag(self.n_lo));
        out.push(self.n_width as u8);
        put_uvar(out, self.j_lo);
        out.push(self.j_width as u8);
        put_uvar(out, self.exceptions as u64);
    }

    /// A form-6 header at the front of `bytes` (after the form byte), for `m` values.
    pub(super) fn read(bytes: &mut &[u8], m: usize) -> Result<RatioHead, DecodeError> {
        let s = byte(bytes)? as u32;
        if s > 52 {
            return Err(DecodeError::Invalid("ratio scale out of range"));
        }
        let n_lo = read_ivar(bytes)?;
        let n_width = byte(bytes)? as u32;
        let j_lo = read_uvar(bytes)?;
        let j_width = byte(bytes)? as u32;
        if n_width > 64 || j_width > 64 {
            return Err(DecodeError::Invalid("bit width over 64"));
        }
        let exceptions = read_uvar(bytes)?;
        if exceptions > m as u64 {
            return Err(DecodeError::Invalid("more exceptions than values"));
        }
        Ok(RatioHead {
            s,
            n_lo,
            n_width,
            j_lo,
            j_width,
            exceptions: exceptions as usize,
        })
    }

    /// `2^-s`, what the decoder multiplies `j` by.
    pub(super) fn scale(&self) -> f64 {
        scale_of(self.s)
    }
}

/// Values `from..from + dst.len()` of a form-6 section into `dst` (added with `ADD`), from
/// its packed `n` and `j` offsets (`ns`, `js`): `n / (j × 2^-s)`, the one formula encoder and
/// decoder share, 64 values at a time off the bulk kernels. Where every `n` and `j` the
/// header allows converts exactly (within ±2^53, offsets below 2^52: every block the encoder
/// writes), the conversion is `lo + offset` in f64 (exact, so bit for bit the formula's) by
/// the exponent trick, which the compiler vectorises with the division (a division by
/// value was most of this form's read time); other headers take the formula as written.
#[inline]
pub(super) fn values_into<const ADD: bool>(
    head: &RatioHead,
    ns: &[u8],
    js: &[u8],
    from: usize,
    dst: &mut [f64],
) {
    let scale = head.scale();
    let exact = exact_range(head.n_lo as i128, head.n_width)
        && exact_range(head.j_lo as i128, head.j_width);
    let (n_lo, j_lo) = (head.n_lo as f64, head.j_lo as f64);
    let (mut nv, mut jv) = ([0u64; unpack::GROUP], [0u64; unpack::GROUP]);
    let end = from + dst.len();
    let mut i = from;
    while i < end {
        let g = i / unpack::GROUP;
        let (lo, hi) = (
            i % unpack::GROUP,
            (end - g * unpack::GROUP).min(unpack::GROUP),
        );
        let (n, _) = unpack::group(ns, head.n_width, g, &mut nv);
        let (j, _) = unpack::group(js, head.j_width, g, &mut jv);
        let o = &mut dst[i - from..i - from + (hi - lo)];
        let pairs = o.iter_mut().zip(n[lo..hi].iter().zip(&j[lo..hi]));
        if exact {
            for (o, (n, j)) in pairs {
                put::<ADD>(o, (n_lo + small(*n)) / ((j_lo + small(*j)) * scale));
            }
        } else {
            for (o, (n, j)) in pairs {
                let (n, j) = (
                    head.n_lo.wrapping_add(*n as i64),
                    head.j_lo.wrapping_add(*j) as i64,
                );
                put::<ADD>(o, value(n, j, scale));
            }
        }
        i = g * unpack::GROUP + hi;
    }
}

/// Whether every `lo + offset` (offsets of `width` bits) converts to f64 exactly as `lo`
/// and `offset` converted apart and added: `|lo|` and `|lo + offset|` within 2^53 (integers
/// an f64 holds, so the sum of the two exact parts is not rounded), offsets below 2^52.
fn exact_range(lo: i128, width: u32) -> bool {
    const LIMIT: i128 = 1 << 53;
    width <= 52 && (-LIMIT..=LIMIT).contains(&lo) && lo + (1i128 << width) - 1 <= LIMIT
}

/// `x` (below 2^52) as f64 without an integer conversion instruction: its bits as the
/// mantissa of 2^52, minus 2^52 (exact).
#[inline(always)]
fn small(x: u64) -> f64 {
    const TWO_52: f64 = 4_503_599_627_370_496.0;
    f64::from_bits(x | TWO_52.to_bits()) - TWO_52
}

/// Form 6 for `v` (present values, none NaN): its header, with `pairs[..m]` set to each
/// value's `(n, j)` (an exception's to a neighbour's, so it widens nothing) and the
/// exceptions' indices in `exceptions`; `None` unless it is smaller than `budget` bytes.
/// Gives up once half the values have no pair (the search costs ~0.3 µs a value that has
/// none, and exceptions cost 10 bytes: such a block is noise, not rates).
pub(super) fn analyse(
    v: &[f64],
    budget: usize,
    pairs: &mut [(i64, i64); super::MAX_VALUES],
    exceptions: &mut Vec<u16>,
) -> Option<RatioHead> {
    let m = v.len();
    let scale = scale_of(S);
    exceptions.clear();
    let mut d: Option<f64> = None;
    let (mut tries, mut confirmed) = (0, false);
    for (i, r) in v.iter().enumerate() {
        if d.is_none() && tries >= FIRST_TRIES {
            return None;
        }
        let found = pair(*r, d, confirmed, scale).map(|(p, same)| {
            confirmed = same;
            p
        });
        match found {
            Some((n, j)) => {
                pairs[i] = (n, j);
                if j > 0 {
                    d = Some(j as f64 * scale);
                }
            }
            None => {
                if d.is_none() && *r != 0.0 {
                    tries += 1;
                }
                if exceptions.len() * 2 >= m || exceptions.len() * 10 >= budget {
                    return None;
                }
                pairs[i] = (0, 0);
                exceptions.push(i as u16);
            }
        }
    }
    // A pair found over a fraction of the block's interval (the same value as `k·n` over `k`
    // times it) is scaled to that interval, so the intervals' range stays their jitter's.
    // Zeros and exceptions (`j` = 0) take a neighbour's interval.
    let jd = (d? / scale) as i64;
    let mut last_j = jd;
    for p in pairs[..m].iter_mut() {
        if p.1 == 0 {
            *p = (0, last_j);
            continue;
        }
        let k = (jd + p.1 / 2) / p.1;
        if let Some(scaled) = p.0.checked_mul(k).zip(p.1.checked_mul(k))
            && k >= 2
            && scaled.1 < 1 << 53
            && scaled.0.unsigned_abs() < 1 << 53
        {
            *p = scaled;
        }
        last_j = p.1;
    }
    let pairs = &pairs[..m];
    let (n_lo, n_hi) = pairs
        .iter()
        .fold((i64::MAX, i64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (j_lo, j_hi) = pairs
        .iter()
        .fold((i64::MAX, i64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let head = RatioHead {
        s: S,
        n_lo,
        n_width: bits(n_hi.wrapping_sub(n_lo) as u64),
        j_lo: j_lo as u64,
        j_width: bits((j_hi - j_lo) as u64),
        exceptions: exceptions.len(),
    };
    let size =
        head.size() + (words(m, head.n_width) + words(m, head.j_width)) * 8 + exceptions.len() * 10;
    (size < budget).then_some(head)
}

fn byte(bytes: &mut &[u8]) -> Result<u8, DecodeError> {
    let (&b, rest) = bytes.split_first().ok_or(DecodeError::Truncated)?;
    *bytes = rest;
    Ok(b)
}

#[cfg(test)]
mod tests {

    /// Rates as a collector computes them: counter increases over float epoch timestamps.
    fn rates(count: usize, seed: u64) -> Vec<f64> {
        let mut x = seed;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut t, mut c) = (1_528_207_811.719_152f64, 1_000_000u64);
        (0..count)
            .map(|_| {
                let t2 = t + 60.0 + (next() % 3000) as f64 * 1e-6;
                let c2 = c + next() % 5000;
                let r = (c2 - c) as f64 / (t2 - t);
                (t, c) = (t2, c2);
                r
            })
            .collect()
    }

    /// The bulk decode equals the formula on each value, for headers whose pairs convert
    /// exactly (the encoder's) and for those that do not (wide offsets, `lo` near or past
    /// 2^53, wrapping), from random packed words; also added onto a sum.
    #[test]
    fn bulk_values_equal_the_formula() {
        use super::*;
        let mut r = crate::util::TestRng(0x05EE_D0F4_A710);
        let los = [
            0i64,
            1,
            -7,
            1 << 40,
            (1 << 53) - 3,
            1 << 53,
            -(1 << 53),
            i64::MAX - 5,
        ];
        for case in 0..400 {
            let m = 1 + r.below(512);
            let head = RatioHead {
                s: [22, 0, 30, 52][case % 4],
                n_lo: los[r.below(los.len())],
                n_width: [0, 1, 13, 31, 51, 52, 53, 64][r.below(8)],
                j_lo: los[r.below(los.len())] as u64,
                j_width: [0, 2, 20, 33, 52, 53, 64][r.below(7)],
                exceptions: 0,
            };
            let ns: Vec<u8> = (0..words(m, head.n_width) * 8)
                .map(|_| r.next() as u8)
                .collect();
            let js: Vec<u8> = (0..words(m, head.j_width) * 8)
                .map(|_| r.next() as u8)
                .collect();
            let get = |src: &[u8], w: u32, i: usize| -> u64 {
                (0..w as usize).fold(0u64, |a, b| {
                    let bit = i * w as usize + b;
                    a | ((src[bit / 8] >> (bit % 8)) as u64 & 1) << b
                })
            };
            let scale = head.scale();
            let want: Vec<f64> = (0..m)
                .map(|i| {
                    let n = head.n_lo.wrapping_add(get(&ns, head.n_width, i) as i64);
                    let j = head.j_lo.wrapping_add(get(&js, head.j_width, i)) as i64;
                    value(n, j, scale)
                })
                .collect();
            let from = r.below(m);
            let to = from + r.below(m - from + 1);
            let mut got = vec![0.0; to - from];
            values_into::<false>(&head, &ns, &js, from, &mut got);
            let mut sum = vec![0.25; to - from];
            values_into::<true>(&head, &ns, &js, from, &mut sum);
            for (k, (g, s)) in got.iter().zip(&sum).enumerate() {
                let w = want[from + k];
                let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan();
                assert!(
                    same(*g, w),
                    "case {case} {head:?}: value {}: {g:e} != {w:e}",
                    from + k
                );
                assert!(same(*s, 0.25 + w), "case {case}: sum {}", from + k);
            }
        }
    }

    #[test]
    fn counter_rates_come_back_bit_for_bit_in_fewer_bytes() {
        let v = rates(512, 7);
        let mut out = Vec::new();
        crate::store::codec::encode(&v, &mut out);
        assert_eq!(out[1], 6, "no ratio form for rates");
        assert!(out.len() < v.len() * 4, "{} bytes", out.len());
        let mut back = vec![0.0; v.len()];
        crate::store::codec::decode(&out, &mut back).unwrap();
        for (a, b) in v.iter().zip(&back) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }
}
