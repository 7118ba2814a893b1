//! The decoder: reads any byte string back into slots or fails with a [`DecodeError`], never
//! panicking (the format is described in `codec.rs`).

use super::compact::{self, DecimalHead};
use super::ratio::{self, RatioHead};
use super::{DecodeError, MAX_DICT, MAX_EXP, MAX_VALUES, POW10, bits, unpack, words};

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

/// The value every slot holds when the buffer is one constant without gaps: sums and
/// averages use it without decoding.
pub fn constant(bytes: &[u8]) -> Option<f64> {
    match bytes {
        [0, 0, rest @ ..] if rest.len() == 8 => {
            Some(f64::from_bits(u64::from_le_bytes(rest.try_into().ok()?)))
        }
        [0, 4, rest @ ..] => {
            let mut r: &[u8] = rest;
            let v = compact::read_int_constant(&mut r).ok()?;
            r.is_empty().then_some(v)
        }
        _ => None,
    }
}

/// Decodes an encoded buffer of `out.len()` slots into `out` (NaN where the buffer has no
/// value). Any byte string either decodes or is an error; nothing panics.
pub fn decode(bytes: &[u8], out: &mut [f64]) -> Result<(), DecodeError> {
    decode_range(bytes, out.len(), 0, out)
}

/// Decodes slots `a..a + out.len()` of an encoded buffer of `n` slots into `out`, unpacking
/// only the values those slots hold (a read of part of a buffer). The sections are still
/// walked to their end, so truncated or trailing bytes are errors as in [`decode`]; values
/// outside the range are not checked.
pub fn decode_range(bytes: &[u8], n: usize, a: usize, out: &mut [f64]) -> Result<(), DecodeError> {
    let b = a + out.len();
    if n > MAX_VALUES {
        return Err(DecodeError::Invalid("more than 512 slots"));
    }
    if b > n {
        return Err(DecodeError::Invalid("range past the buffer's end"));
    }
    let mut r = Reader(bytes);
    let form = r.u8()?;
    if form == 0 {
        // No gaps: present value `i` is slot `i`, straight into `out`.
        decode_values(&mut r, n, a, out)?;
        return finish(r);
    }
    // Which slots hold values: bit `i` of word `i / 64`.
    let mut present = [0u64; MAX_VALUES / 64];
    match form {
        1 => {
            let map = r.take(n.div_ceil(8))?;
            for (i, b) in map.iter().enumerate() {
                present[i / 8] |= (*b as u64) << (i % 8 * 8);
            }
            if map.len() * 8 > n && map[n / 8] >> (n % 8) != 0 {
                return Err(DecodeError::Invalid("bitmap bits past the end"));
            }
        }
        2 => {
            let runs = r.u16()? as usize;
            for w in present.iter_mut().take(n.div_ceil(64)) {
                *w = u64::MAX;
            }
            if !n.is_multiple_of(64) {
                present[n / 64] = (1u64 << (n % 64)) - 1;
            }
            let mut next = 0usize;
            for _ in 0..runs {
                let (s, l) = (r.u16()? as usize, r.u16()? as usize);
                if s < next || l == 0 || s + l > n {
                    return Err(DecodeError::Invalid("NaN runs out of order or range"));
                }
                for i in s..s + l {
                    present[i / 64] &= !(1u64 << (i % 64));
                }
                next = s + l;
            }
        }
        3 => {
            out.fill(f64::NAN);
            return finish(r);
        }
        f => return Err(DecodeError::NanForm(f)),
    }
    let m = ones_before(&present, n);
    if m == 0 {
        return Err(DecodeError::Invalid("no values but not the all-NaN form"));
    }
    // The range's present values go to the front of `out`, then move out to their slots
    // from the back (a value never moves left of where it was decoded): no scratch array.
    let (pa, pb) = (ones_before(&present, a), ones_before(&present, b));
    decode_values(&mut r, m, pa, &mut out[..pb - pa])?;
    if pb - pa < out.len() {
        let mut j = pb - pa;
        for s in (a..b).rev() {
            out[s - a] = if present[s / 64] >> (s % 64) & 1 == 1 {
                j -= 1;
                out[j]
            } else {
                f64::NAN
            };
        }
    }
    finish(r)
}

/// Set bits of `bits` below bit `i`.
fn ones_before(bits: &[u64; MAX_VALUES / 64], i: usize) -> usize {
    let whole: u32 = bits[..i / 64].iter().map(|w| w.count_ones()).sum();
    let part = match i % 64 {
        0 => 0,
        r => (bits[i / 64] & ((1u64 << r) - 1)).count_ones(),
    };
    (whole + part) as usize
}

/// Present values `from..from + dst.len()` of the value section of `m` present values.
fn decode_values(
    r: &mut Reader<'_>,
    m: usize,
    from: usize,
    dst: &mut [f64],
) -> Result<(), DecodeError> {
    let to = from + dst.len();
    match r.u8()? {
        0 => dst.fill(f64::from_bits(r.u64()?)),
        1 => {
            let k = r.u8()? as usize;
            if k == 0 || k > MAX_DICT {
                return Err(DecodeError::Invalid("dictionary size"));
            }
            let mut dict = [0f64; MAX_DICT];
            for d in dict.iter_mut().take(k) {
                *d = f64::from_bits(r.u64()?);
            }
            let w = bits(k as u64 - 1);
            let src = r.take(words(m, w) * 8)?;
            // An index past the `k` entries set (of the 2^w <= 16 that `w` bits can name)
            // is flagged by a table rather than compared: no branch per value.
            let mut unset = [1u8; MAX_DICT];
            unset[..k].fill(0);
            let mut bad = 0u8;
            unpack::each_run(src, w, from, dst.len(), |at, idx, zero| {
                let o = &mut dst[at..at + idx.len()];
                if zero {
                    return o.fill(dict[0]);
                }
                for (o, i) in o.iter_mut().zip(idx) {
                    let i = *i as usize % MAX_DICT;
                    *o = dict[i];
                    bad |= unset[i];
                }
            });
            if bad != 0 {
                return Err(DecodeError::Invalid("dictionary index out of range"));
            }
        }
        2 => {
            let e = r.u8()? as i8 as i32;
            if !(-MAX_EXP..=MAX_EXP).contains(&e) {
                return Err(DecodeError::Invalid("decimal exponent out of range"));
            }
            let delta = match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err(DecodeError::Invalid("decimal mode")),
            };
            let base = r.u64()? as i64;
            let min_delta = if delta { r.u64()? as i64 } else { 0 };
            let width = r.u8()? as u32;
            if width > 64 {
                return Err(DecodeError::Invalid("bit width over 64"));
            }
            let exceptions = r.u16()? as usize;
            let head = DecimalHead {
                e,
                delta,
                base,
                min_delta,
                width,
                exceptions,
            };
            decimal_body(r, &head, m, from, dst)?;
        }
        4 => dst.fill(compact::read_int_constant(&mut r.0)?),
        6 => {
            let head = RatioHead::read(&mut r.0, m)?;
            let ns = Packed::new(r.take(words(m, head.n_width) * 8)?, head.n_width);
            let js = Packed::new(r.take(words(m, head.j_width) * 8)?, head.j_width);
            let scale = head.scale();
            for (i, o) in dst.iter_mut().enumerate() {
                *o = ratio::value_of(&head, ns.get(from + i), js.get(from + i), scale);
            }
            exceptions(r, head.exceptions, m, from, dst)?;
        }
        5 => {
            let head = DecimalHead::read(&mut r.0)?;
            decimal_body(r, &head, m, from, dst)?;
        }
        3 => {
            let src = r.take(m * 8)?;
            for (o, c) in dst.iter_mut().zip(src[from * 8..to * 8].chunks_exact(8)) {
                *o = f64::from_bits(u64::from_le_bytes(c.try_into().expect("8 bytes")));
            }
        }
        f => return Err(DecodeError::ValueForm(f)),
    }
    Ok(())
}

/// The decimal form's packed integers and exceptions (forms 2 and 5 after their headers):
/// present values `from..from + dst.len()` of `m`.
fn decimal_body(
    r: &mut Reader<'_>,
    head: &DecimalHead,
    m: usize,
    from: usize,
    dst: &mut [f64],
) -> Result<(), DecodeError> {
    let DecimalHead {
        e,
        delta,
        base,
        min_delta,
        width: w,
        exceptions: nexc,
    } = *head;
    let count = if delta { m.saturating_sub(1) } else { m };
    let src = r.take(words(count, w) * 8)?;
    // One loop per sign of `e` (what `scale_back` computes): integers convert without a
    // division by 1.
    let p = POW10[e.unsigned_abs() as usize];
    let dec = Decimal { src, w, base, from };
    match (delta, e.signum()) {
        (true, 0) => dec.running(dst, min_delta, |d| d as f64),
        (true, 1) => dec.running(dst, min_delta, |d| d as f64 / p),
        (true, _) => dec.running(dst, min_delta, |d| d as f64 * p),
        (false, 0) => dec.framed(dst, |d| d as f64),
        (false, 1) => dec.framed(dst, |d| d as f64 / p),
        (false, _) => dec.framed(dst, |d| d as f64 * p),
    }
    exceptions(r, nexc, m, from, dst)
}

/// `count` exceptions `(u16 index, u64 bits)` of a section of `m` values over the decoded
/// values `from..from + dst.len()`.
fn exceptions(
    r: &mut Reader<'_>,
    count: usize,
    m: usize,
    from: usize,
    dst: &mut [f64],
) -> Result<(), DecodeError> {
    let to = from + dst.len();
    for _ in 0..count {
        let i = r.u16()? as usize;
        let v = f64::from_bits(r.u64()?);
        if i >= m {
            return Err(DecodeError::Invalid("exception index out of range"));
        }
        if (from..to).contains(&i) {
            dst[i - from] = v;
        }
    }
    Ok(())
}

/// The packed integers of a decimal section and the range's first present value.
struct Decimal<'a> {
    src: &'a [u8],
    w: u32,
    base: i64,
    from: usize,
}

impl Decimal<'_> {
    /// Frame-of-reference values into `dst`: `base` plus each one's packed offset (a run of
    /// zero offsets is `base` converted once).
    #[inline(always)]
    fn framed(&self, dst: &mut [f64], conv: impl Fn(i64) -> f64) {
        unpack::each_run(self.src, self.w, self.from, dst.len(), |at, p, zero| {
            let o = &mut dst[at..at + p.len()];
            if zero {
                return o.fill(conv(self.base));
            }
            for (o, x) in o.iter_mut().zip(p) {
                *o = conv(self.base.wrapping_add(*x as i64));
            }
        });
    }

    /// Delta-mode values into `dst`: integer `i` is `base` plus `i × min_delta` plus the
    /// packed deltas before it (those before the range summed without converting them).
    #[inline(always)]
    fn running(&self, dst: &mut [f64], min_delta: i64, conv: impl Fn(i64) -> f64) {
        let Some((first, rest)) = dst.split_first_mut() else {
            return;
        };
        let mut skipped = 0i64;
        unpack::each_run(self.src, self.w, 0, self.from, |_, p, _| {
            skipped = p.iter().fold(skipped, |a, x| a.wrapping_add(*x as i64));
        });
        let mut d = self
            .base
            .wrapping_add((self.from as i64).wrapping_mul(min_delta))
            .wrapping_add(skipped);
        *first = conv(d);
        unpack::each_run(self.src, self.w, self.from, rest.len(), |at, p, _| {
            for (o, x) in rest[at..at + p.len()].iter_mut().zip(p) {
                d = d.wrapping_add(min_delta).wrapping_add(*x as i64);
                *o = conv(d);
            }
        });
    }
}

/// Bit-packed values of `w` bits in little-endian u64 words (exactly as many as they need).
struct Packed<'a> {
    src: &'a [u8],
    w: u32,
    mask: u64,
}

impl<'a> Packed<'a> {
    fn new(src: &'a [u8], w: u32) -> Packed<'a> {
        let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        Packed { src, w, mask }
    }

    /// Value `i`, read from its own bit offset (two words where it may straddle them).
    #[inline(always)]
    fn get(&self, i: usize) -> u64 {
        if self.w == 0 {
            return 0;
        }
        let bit = i * self.w as usize;
        let (at, shift) = ((bit / 64) * 8, (bit % 64) as u32);
        match self.src.get(at..at + 16) {
            Some(two) => {
                let two = u128::from_le_bytes(two.try_into().expect("16 bytes"));
                (two >> shift) as u64 & self.mask
            }
            // The last word: a value ending in it does not straddle into another.
            None => self.src.get(at..at + 8).map_or(0, |one| {
                u64::from_le_bytes(one.try_into().expect("8 bytes")) >> shift & self.mask
            }),
        }
    }
}

fn finish(r: Reader<'_>) -> Result<(), DecodeError> {
    match r.0.len() {
        0 => Ok(()),
        n => Err(DecodeError::Trailing(n)),
    }
}
