//! The decoder: reads any byte string back into slots or fails with a [`DecodeError`], never
//! panicking (the format is described in `codec.rs`).

use super::compact::{self, DecimalHead};
use super::ratio::{self, RatioHead};
use super::{DecodeError, MAX_DICT, MAX_EXP, MAX_VALUES, POW10, bits, fill, put, unpack, words};

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
    range::<false>(bytes, n, a, out).map(|_| ())
}

/// Adds slots `a..a + out.len()` of an encoded buffer of `n` slots to `out` (`out[i] +=`
/// slot `a + i`: what decoding into a scratch array and then adding computes, bit for bit)
/// without a scratch array, when the buffer has no gaps and its form no exceptions: `Ok(true)`.
/// `Ok(false)`: it has some, `out` is untouched (decode, then add). On an error `out` may
/// hold part of the sum (a caller adds NaN, as it does for a buffer that fails to decode).
pub fn add_range(bytes: &[u8], n: usize, a: usize, out: &mut [f64]) -> Result<bool, DecodeError> {
    range::<true>(bytes, n, a, out)
}

/// Writes (with `ADD`: adds) slots `a..a + out.len()`; `Ok(false)` when `ADD` and the
/// buffer has gaps or exceptions (nothing written).
fn range<const ADD: bool>(
    bytes: &[u8],
    n: usize,
    a: usize,
    out: &mut [f64],
) -> Result<bool, DecodeError> {
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
        if !decode_values::<ADD>(&mut r, n, a, out)? {
            return Ok(false);
        }
        return finish(r).map(|_| true);
    }
    if ADD && form != 3 {
        return Ok(false);
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
            fill::<ADD>(out, f64::NAN);
            return finish(r).map(|_| true);
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
    decode_values::<false>(&mut r, m, pa, &mut out[..pb - pa])?;
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
    finish(r).map(|_| true)
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

/// Present values `from..from + dst.len()` of the value section of `m` present values into
/// `dst` (added to it with `ADD`). `Ok(false)`: `ADD` and the section has exceptions, which
/// replace values rather than add to them; nothing is written.
fn decode_values<const ADD: bool>(
    r: &mut Reader<'_>,
    m: usize,
    from: usize,
    dst: &mut [f64],
) -> Result<bool, DecodeError> {
    let to = from + dst.len();
    match r.u8()? {
        0 => fill::<ADD>(dst, f64::from_bits(r.u64()?)),
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
            // Two entries (a counter that is mostly one value): each value is a select by
            // its bit, which vectorises (a table lookup does not), and needs no check.
            let (d0, dx) = (dict[0].to_bits(), dict[0].to_bits() ^ dict[1].to_bits());
            let mut bad = 0u8;
            unpack::each_run(src, w, from, dst.len(), |at, idx, zero| {
                let o = &mut dst[at..at + idx.len()];
                if zero {
                    return fill::<ADD>(o, dict[0]);
                }
                if k == 2 {
                    for (o, i) in o.iter_mut().zip(idx) {
                        put::<ADD>(o, f64::from_bits(d0 ^ (dx & 0u64.wrapping_sub(*i))));
                    }
                    return;
                }
                // Kept in a register for the run (`bad` is the closure's capture).
                let mut b = 0u8;
                for (o, i) in o.iter_mut().zip(idx) {
                    let i = *i as usize % MAX_DICT;
                    put::<ADD>(o, dict[i]);
                    b |= unset[i];
                }
                bad |= b;
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
            return decimal_body::<ADD>(r, &head, m, from, dst);
        }
        4 => fill::<ADD>(dst, compact::read_int_constant(&mut r.0)?),
        6 => {
            let head = RatioHead::read(&mut r.0, m)?;
            if ADD && head.exceptions > 0 {
                return Ok(false);
            }
            let ns = r.take(words(m, head.n_width) * 8)?;
            let js = r.take(words(m, head.j_width) * 8)?;
            ratio::values_into::<ADD>(&head, ns, js, from, dst);
            exceptions(r, head.exceptions, m, from, dst)?;
        }
        5 => {
            let head = DecimalHead::read(&mut r.0)?;
            return decimal_body::<ADD>(r, &head, m, from, dst);
        }
        3 => {
            let src = r.take(m * 8)?;
            for (o, c) in dst.iter_mut().zip(src[from * 8..to * 8].chunks_exact(8)) {
                put::<ADD>(
                    o,
                    f64::from_bits(u64::from_le_bytes(c.try_into().expect("8 bytes"))),
                );
            }
        }
        f => return Err(DecodeError::ValueForm(f)),
    }
    Ok(true)
}

/// The decimal form's packed integers and exceptions (forms 2 and 5 after their headers):
/// present values `from..from + dst.len()` of `m`.
fn decimal_body<const ADD: bool>(
    r: &mut Reader<'_>,
    head: &DecimalHead,
    m: usize,
    from: usize,
    dst: &mut [f64],
) -> Result<bool, DecodeError> {
    let DecimalHead {
        e,
        delta,
        base,
        min_delta,
        width: w,
        exceptions: nexc,
    } = *head;
    if ADD && nexc > 0 {
        return Ok(false);
    }
    let count = if delta { m.saturating_sub(1) } else { m };
    let src = r.take(words(count, w) * 8)?;
    let dec = Decimal { src, w, base, from };
    // Where every integer of the block lies within ±2^51 (all but pathological blocks), it
    // converts by the exponent trick, which vectorises (an i64 conversion does not).
    if small_integers(head, count) {
        dec.values::<ADD>(dst, e, min_delta, delta, exact_small);
    } else {
        dec.values::<ADD>(dst, e, min_delta, delta, |d| d as f64);
    }
    exceptions(r, nexc, m, from, dst).map(|_| true)
}

/// Whether every integer of a decimal section of `count` packed values lies strictly within
/// ±2^51: `base` plus offsets below `2^width` (frame of reference), or `base` plus `i ×
/// min_delta` plus `i` such offsets (deltas).
fn small_integers(head: &DecimalHead, count: usize) -> bool {
    const LIMIT: i128 = 1 << 51;
    if head.width > 50 {
        return false;
    }
    let (base, top) = (head.base as i128, (1i128 << head.width) - 1);
    let (lo, hi) = if head.delta {
        let steps = count as i128 * head.min_delta as i128;
        (
            base + steps.min(0),
            base + steps.max(0) + count as i128 * top,
        )
    } else {
        (base, base + top)
    };
    -LIMIT < lo && hi < LIMIT
}

/// `d` (strictly within ±2^51) as f64, exactly: `d` added to the mantissa of 1.5 × 2^52,
/// minus that.
#[inline(always)]
fn exact_small(d: i64) -> f64 {
    const BIAS: f64 = 6_755_399_441_055_744.0;
    f64::from_bits(d.wrapping_add(BIAS.to_bits() as i64) as u64) - BIAS
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
    /// The section's values into `dst`: `d / 10^e` (`d × 10^-e`), `d` converted by `int`
    /// (exactly), one loop per mode and sign of `e` (what `scale_back` computes: integers
    /// convert without a division by 1).
    #[inline(always)]
    fn values<const ADD: bool>(
        &self,
        dst: &mut [f64],
        e: i32,
        min_delta: i64,
        delta: bool,
        int: impl Fn(i64) -> f64 + Copy,
    ) {
        let p = POW10[e.unsigned_abs() as usize];
        match (delta, e.signum()) {
            (true, 0) => self.running::<ADD>(dst, min_delta, int),
            (true, 1) => self.running::<ADD>(dst, min_delta, |d| int(d) / p),
            (true, _) => self.running::<ADD>(dst, min_delta, |d| int(d) * p),
            (false, 0) => self.framed::<ADD>(dst, int),
            (false, 1) => self.framed::<ADD>(dst, |d| int(d) / p),
            (false, _) => self.framed::<ADD>(dst, |d| int(d) * p),
        }
    }

    /// Frame-of-reference values into `dst`: `base` plus each one's packed offset (a run of
    /// zero offsets is `base` converted once).
    #[inline(always)]
    fn framed<const ADD: bool>(&self, dst: &mut [f64], conv: impl Fn(i64) -> f64) {
        unpack::each_run(self.src, self.w, self.from, dst.len(), |at, p, zero| {
            let o = &mut dst[at..at + p.len()];
            if zero {
                return fill::<ADD>(o, conv(self.base));
            }
            for (o, x) in o.iter_mut().zip(p) {
                put::<ADD>(o, conv(self.base.wrapping_add(*x as i64)));
            }
        });
    }

    /// Delta-mode values into `dst`: integer `i` is `base` plus `i × min_delta` plus the
    /// packed deltas before it (those before the range summed without converting them).
    #[inline(always)]
    fn running<const ADD: bool>(&self, dst: &mut [f64], min_delta: i64, conv: impl Fn(i64) -> f64) {
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
        put::<ADD>(first, conv(d));
        unpack::each_run(self.src, self.w, self.from, rest.len(), |at, p, _| {
            for (o, x) in rest[at..at + p.len()].iter_mut().zip(p) {
                d = d.wrapping_add(min_delta).wrapping_add(*x as i64);
                put::<ADD>(o, conv(d));
            }
        });
    }
}

fn finish(r: Reader<'_>) -> Result<(), DecodeError> {
    match r.0.len() {
        0 => Ok(()),
        n => Err(DecodeError::Trailing(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exponent trick against the conversion instruction, over the whole range it is
    /// used for and its edges.
    #[test]
    fn small_integers_convert_exactly() {
        let mut r = crate::util::TestRng(0x51_DEC0);
        let edge = (1i64 << 51) - 1;
        let fixed = [
            0,
            1,
            -1,
            edge,
            -edge,
            edge - 1,
            -edge + 1,
            1 << 50,
            -(1 << 50),
        ];
        let random = (0..100_000).map(|_| (r.next() as i64) >> (13 + r.below(50)));
        for d in fixed.into_iter().chain(random) {
            assert_eq!(exact_small(d).to_bits(), (d as f64).to_bits(), "{d}");
        }
    }

    /// Blocks whose integers reach ±2^51 and past it, framed and by deltas, read back exactly
    /// (on both sides of the bound the fast conversion is used within).
    #[test]
    fn decimal_blocks_near_the_bound_read_back() {
        for base in [
            (1i64 << 51) - 600,
            -(1i64 << 51) + 3,
            (1i64 << 52) + 7,
            -(1 << 53) + 9,
        ] {
            for delta in [false, true] {
                let v: Vec<f64> = (0..512i64)
                    .map(|i| (base + if delta { i } else { (i * 7919) % 512 }) as f64 / 100.0)
                    .collect();
                let mut enc = Vec::new();
                super::super::encode(&v, &mut enc);
                let mut out = vec![0.0; 512];
                decode(&enc, &mut out).unwrap();
                for (a, b) in v.iter().zip(&out) {
                    assert_eq!(a.to_bits(), b.to_bits(), "base {base}, deltas {delta}");
                }
            }
        }
    }
}
