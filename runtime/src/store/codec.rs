//! The encoding of a closed buffer's values (up to 512 f64, NaN = no value): per buffer the
//! smallest of a cascade, lossless bit for bit (every NaN reads back as the one canonical NaN).
//! Owns the byte format and nothing else: no store types, only `std` and `thiserror`, so the
//! fuzz target compiles this file alone (`fuzz/fuzz_targets/store_codec.rs`).
//!
//! Layout: `nan form u8 | nan section | value form u8 | value section`, where
//! - nan form 0: no NaN; 1: a bitmap of the present slots (`ceil(n/8)` bytes); 2: runs of NaN
//!   (`u16 count`, then `u16 start, u16 len` each); 3: every slot NaN (nothing follows).
//! - value form (over the `m` present values, in slot order) 0 constant: `u64 bits`;
//!   1 dictionary: `u8 k` (1..=16), `k × u64 bits`, indices bit-packed in `bits(k-1)` bits;
//!   2 decimal (ALP-style): `i8 e`, `u8 mode`, `i64 base`, `i64 min_delta` (mode 1 only),
//!   `u8 width`, `u16 exceptions`, the packed words, then `(u16 index, u64 bits)` per
//!   exception; value `i` is `d_i / 10^e` (`d_i * 10^-e` for negative `e`) with `d_i = base +
//!   p_i` (mode 0, frame of reference) or `d_i = d_{i-1} + min_delta + p_{i-1}`, `d_0 = base`
//!   (mode 1, deltas); exceptions replace the values that do not survive that round trip;
//!   3 raw: `m × u64 bits`.
//! - Bit-packed values sit in little-endian u64 words, `ceil(count × width / 64)` of them.

/// The most values one buffer holds (the store's `BUFFER_CAP`).
pub const MAX_VALUES: usize = 512;

/// Largest decimal exponent tried: beyond 10^18 the scaled values leave the 2^53 range in
/// which an i64 converts to f64 exactly for any value that has fractional digits at all.
const MAX_EXP: i32 = 18;

/// Values up to which encoding works in arrays of this size on the stack rather than of
/// [`MAX_VALUES`] (clearing 4 KiB twice cost more than encoding 16 values).
const SMALL: usize = 64;

/// Distinct values a dictionary holds: 4-bit indices; beyond that decimal or raw wins.
const MAX_DICT: usize = 16;

/// Values sampled to pick the decimal exponent before the full pass.
const EXP_SAMPLES: usize = 16;

/// |scaled value| below this converts to f64 and back exactly.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

const POW10: [f64; 19] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18,
];

/// Why bytes are not an encoded buffer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("encoded buffer truncated")]
    Truncated,
    #[error("encoded buffer has {0} bytes after its end")]
    Trailing(usize),
    #[error("unknown NaN form {0}")]
    NanForm(u8),
    #[error("unknown value form {0}")]
    ValueForm(u8),
    #[error("invalid encoded buffer: {0}")]
    Invalid(&'static str),
}

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
        out.push(0);
        out.extend_from_slice(&first.to_le_bytes());
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

/// Bits needed for `x`.
fn bits(x: u64) -> u32 {
    64 - x.leading_zeros()
}

/// u64 words holding `count` values of `w` bits.
fn words(count: usize, w: u32) -> usize {
    (count * w as usize).div_ceil(64)
}

/// `d / 10^e` (`d * 10^-e` for negative `e`): the one formula encoder and decoder share.
#[inline(always)]
fn scale_back(d: i64, e: i32) -> f64 {
    if e >= 0 {
        d as f64 / POW10[e as usize]
    } else {
        d as f64 * POW10[(-e) as usize]
    }
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
    fn size(&self) -> usize {
        1 + 1
            + 1
            + 8
            + if self.delta { 8 } else { 0 }
            + 1
            + 2
            + words(self.count, self.width) * 8
            + self.exceptions.len() * 10
    }

    fn write(&self, ds: &[i64], out: &mut Vec<u8>) {
        out.push(2);
        out.push(self.e as i8 as u8);
        out.push(self.delta as u8);
        out.extend_from_slice(&self.base.to_le_bytes());
        if self.delta {
            out.extend_from_slice(&self.min_delta.to_le_bytes());
        }
        out.push(self.width as u8);
        out.extend_from_slice(&(self.exceptions.len() as u16).to_le_bytes());
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
            let w = r.u8()? as u32;
            if w > 64 {
                return Err(DecodeError::Invalid("bit width over 64"));
            }
            let nexc = r.u16()? as usize;
            let count = if delta { m - 1 } else { m };
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
            for _ in 0..nexc {
                let i = r.u16()? as usize;
                let v = f64::from_bits(r.u64()?);
                if i >= m {
                    return Err(DecodeError::Invalid("exception index out of range"));
                }
                if (from..to).contains(&i) {
                    dst[i - from] = v;
                }
            }
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

#[cfg(test)]
mod tests;
