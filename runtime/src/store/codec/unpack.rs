//! Bulk unpacking of bit-packed values (the codec's little-endian bit stream in u64 words):
//! 64 values at a time by a kernel specialised for their width, so a read does a few shifts
//! per value with constant offsets instead of locating each value's bits (the per-value
//! offset arithmetic and bounds checks were most of a read's time). Owns no format: callers
//! hand the packed bytes and what to do with each run of values.

/// Values per kernel call: 64 values of width `w` fill exactly `w` words, so every group of 64
/// starts on a word boundary.
pub(super) const GROUP: usize = 64;

/// A run of zero values.
static ZEROS: [u64; GROUP] = [0; GROUP];

/// One group's bytes in (at least its `8 w`), its values out.
type Kernel = fn(&[u8], &mut [u64; GROUP]);

/// Unpacks 64 values of `W` bits (the `W` little-endian words at the front of `src`), read
/// in place: no copy of the words first. Spelled out value by value (`each_value!`): as a
/// loop the compiler kept it rolled, with a variable shift and a branch per value (whether
/// it straddles two words), which was a quarter of an average's read time; unrolled, every
/// offset and that branch are constants.
#[inline(always)]
fn unpack<const W: usize>(src: &[u8], out: &mut [u64; GROUP]) {
    let src = &src[..W * 8];
    let word = |k: usize| u64::from_le_bytes(src[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
    let mask = if W == 64 { u64::MAX } else { (1u64 << W) - 1 };
    macro_rules! each_value {
        ($($i:literal)*) => {$({
            let bit = $i * W;
            let (at, shift) = (bit / 64, bit % 64);
            let mut v = word(at) >> shift;
            if shift + W > 64 {
                v |= word(at + 1) << (64 - shift);
            }
            out[$i] = v & mask;
        })*};
    }
    each_value!(
        0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60
        61 62 63
    );
}

macro_rules! kernels {
    ($($w:literal)*) => {
        [$(unpack::<$w> as Kernel),*]
    };
}

/// The kernel of each width 1..=64 (index `w - 1`).
static KERNELS: [Kernel; 64] = kernels!(
    1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
    33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62
    63 64
);

/// Hands packed values `from..from + count` of width `w` (0..=64) in `src` to `f` as
/// `(index of the first relative to from, values, whether all are zero)`, in order, in runs
/// of up to 64: a run of zeros (a gapless run of a block's most common value, its base or
/// its first dictionary entry) is not unpacked, and callers fill it instead of converting
/// each value. Bytes missing at the end of `src` read as zero bits (callers check the length
/// they expect).
#[inline]
pub(super) fn each_run(
    src: &[u8],
    w: u32,
    from: usize,
    count: usize,
    mut f: impl FnMut(usize, &[u64], bool),
) {
    let end = from + count;
    if w == 0 {
        let mut i = from;
        while i < end {
            let n = (end - i).min(GROUP);
            f(i - from, &ZEROS[..n], true);
            i += n;
        }
        return;
    }
    let mut vals = [0u64; GROUP];
    let mut i = from;
    while i < end {
        let g = i / GROUP;
        let (lo, hi) = (i - g * GROUP, (end - g * GROUP).min(GROUP));
        let (v, zero) = group(src, w, g, &mut vals);
        f(i - from, &v[lo..hi], zero);
        i = g * GROUP + hi;
    }
}

/// Group `g` of the values of width `w` (0..=64) in `src` (values `64 g .. 64 g + 64`),
/// unpacked into `vals`, or the zeros when its words are all zero (nothing unpacked); also
/// whether it is all zero. Bytes missing at the end of `src` read as zero bits.
#[inline]
pub(super) fn group<'a>(
    src: &[u8],
    w: u32,
    g: usize,
    vals: &'a mut [u64; GROUP],
) -> (&'a [u64; GROUP], bool) {
    if w == 0 {
        return (&ZEROS, true);
    }
    let w = w.min(64) as usize;
    let bytes = src.get(g * w * 8..).unwrap_or(&[]);
    let padded: [u8; GROUP * 8];
    let bytes = match bytes.get(..w * 8) {
        Some(whole) => whole,
        None => {
            // The last group, its words cut short: zero bits past the end (the only group
            // whose bytes are copied).
            let mut p = [0u8; GROUP * 8];
            p[..bytes.len()].copy_from_slice(bytes);
            padded = p;
            &padded[..w * 8]
        }
    };
    if bytes.iter().all(|b| *b == 0) {
        return (&ZEROS, true);
    }
    KERNELS[w - 1](bytes, vals);
    (vals, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every width, ranges starting and ending inside groups: the kernels against a plain
    /// bit-by-bit read of the stream.
    #[test]
    fn runs_match_a_bit_by_bit_read() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Random bits with a stretch of zeros (whole groups of every width in it).
        let src: Vec<u8> = (0..512 * 8 + 3)
            .map(|i| {
                if (1024..3072).contains(&i) {
                    0
                } else {
                    next() as u8
                }
            })
            .collect();
        let bit = |i: usize| src.get(i / 8).map_or(0, |b| (b >> (i % 8)) as u64 & 1);
        for w in 0..=64u32 {
            let ranges = [(0, 512), (3, 100), (63, 2), (64, 64), (130, 382), (500, 12)];
            for (from, count) in ranges {
                let mut got = vec![u64::MAX; count];
                each_run(&src, w, from, count, |at, v, zero| {
                    assert!(!zero || v.iter().all(|x| *x == 0), "width {w}: zero run");
                    got[at..at + v.len()].copy_from_slice(v)
                });
                for (k, g) in got.iter().enumerate() {
                    let i = from + k;
                    let want = (0..w as usize).fold(0u64, |a, b| a | bit(i * w as usize + b) << b);
                    assert_eq!(*g, want, "width {w}, value {i}");
                }
            }
        }
    }
}
