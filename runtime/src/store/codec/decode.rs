//! The decoder: reads any byte string back into slots or fails with a [`DecodeError`], never
//! panicking (the format is described in `codec.rs`).

use super::compact::{self, DecimalHead};
use super::ratio::{self, RatioHead};
use super::{DecodeError, MAX_DICT, MAX_EXP, MAX_VALUES, POW10, bits, words};

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
    // The slots holding values, in order.
    let mut slots = [0u16; MAX_VALUES];
    let m;
    match form {
        1 => {
            let map = r.take(n.div_ceil(8))?;
            let mut k = 0;
            for i in 0..n {
                if map[i / 8] >> (i % 8) & 1 == 1 {
                    slots[k] = i as u16;
                    k += 1;
                }
            }
            if map.len() * 8 > n && map[n / 8] >> (n % 8) != 0 {
                return Err(DecodeError::Invalid("bitmap bits past the end"));
            }
            m = k;
        }
        2 => {
            let runs = r.u16()? as usize;
            let mut nan = [false; MAX_VALUES];
            let mut next = 0usize;
            for _ in 0..runs {
                let (s, l) = (r.u16()? as usize, r.u16()? as usize);
                if s < next || l == 0 || s + l > n {
                    return Err(DecodeError::Invalid("NaN runs out of order or range"));
                }
                nan[s..s + l].fill(true);
                next = s + l;
            }
            let mut k = 0;
            for (i, is_nan) in nan.iter().enumerate().take(n) {
                if !is_nan {
                    slots[k] = i as u16;
                    k += 1;
                }
            }
            m = k;
        }
        3 => {
            out.fill(f64::NAN);
            return finish(r);
        }
        f => return Err(DecodeError::NanForm(f)),
    }
    if m == 0 {
        return Err(DecodeError::Invalid("no values but not the all-NaN form"));
    }
    let (pa, pb) = (
        slots[..m].partition_point(|s| (*s as usize) < a),
        slots[..m].partition_point(|s| (*s as usize) < b),
    );
    let mut vals = [0f64; MAX_VALUES];
    decode_values(&mut r, m, pa, &mut vals[..pb - pa])?;
    out.fill(f64::NAN);
    for (s, v) in slots[pa..pb].iter().zip(&vals) {
        out[*s as usize - a] = *v;
    }
    finish(r)
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
            let src = Packed::new(r.take(words(m, w) * 8)?, w);
            for (i, o) in dst.iter_mut().enumerate() {
                // `w` bits index a table of 2^w entries; only the first `k` are set.
                match dict[..k].get(src.get(from + i) as usize) {
                    Some(v) => *o = *v,
                    None => return Err(DecodeError::Invalid("dictionary index out of range")),
                }
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
    let src = Packed::new(r.take(words(count, w) * 8)?, w);
    if delta {
        // Each integer is the running sum up to it: sum the ones before the range
        // without converting them.
        let mut d = base;
        for i in 1..=from {
            d = d
                .wrapping_add(min_delta)
                .wrapping_add(src.get(i - 1) as i64);
        }
        // One loop per sign of `e` (what `scale_back` computes): integers convert
        // without a division by 1.
        let p = POW10[e.unsigned_abs() as usize];
        match e.signum() {
            0 => running(dst, d, min_delta, &src, from, |d| d as f64),
            1 => running(dst, d, min_delta, &src, from, |d| d as f64 / p),
            _ => running(dst, d, min_delta, &src, from, |d| d as f64 * p),
        }
    } else {
        // Each value from its own bit offset: no dependency between iterations.
        let p = POW10[e.unsigned_abs() as usize];
        let int = |i: usize| base.wrapping_add(src.get(from + i) as i64) as f64;
        match e.signum() {
            0 => dst.iter_mut().enumerate().for_each(|(i, o)| *o = int(i)),
            1 => dst
                .iter_mut()
                .enumerate()
                .for_each(|(i, o)| *o = int(i) / p),
            _ => dst
                .iter_mut()
                .enumerate()
                .for_each(|(i, o)| *o = int(i) * p),
        }
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

/// Delta-mode values into `dst`: `d` is the integer of present value `from`, each next one
/// adds `min_delta` and its packed delta.
#[inline(always)]
fn running(
    dst: &mut [f64],
    mut d: i64,
    min_delta: i64,
    src: &Packed<'_>,
    from: usize,
    conv: impl Fn(i64) -> f64,
) {
    for (j, o) in dst.iter_mut().enumerate() {
        if j > 0 {
            d = d
                .wrapping_add(min_delta)
                .wrapping_add(src.get(from + j - 1) as i64);
        }
        *o = conv(d);
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
