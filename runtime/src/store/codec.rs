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
//!   3 raw: `m × u64 bits`;
//!   4 integer constant: zigzag varint `d`, the value `d as f64` (`compact.rs`);
//!   5 decimal with a compact header: `u8 (e + 18) | mode << 7`, zigzag varint base, zigzag
//!   varint min_delta (mode 1 only), `u8 width`, varint exceptions, then form 2's packed words
//!   and exceptions. The encoder writes 4 and 5 where 0 and 2 would read the same; 0 and 2
//!   stay readable (snapshots written before them);
//!   6 ratio (rates of counters, `n / (j × 2^-s)`): the layout in `ratio.rs`.
//! - Bit-packed values sit in little-endian u64 words, `ceil(count × width / 64)` of them.

/// The most values one buffer holds (the store's `BUFFER_CAP`).
pub const MAX_VALUES: usize = 512;

/// Largest decimal exponent tried: beyond 10^18 the scaled values leave the 2^53 range in
/// which an i64 converts to f64 exactly for any value that has fractional digits at all.
const MAX_EXP: i32 = 18;

/// Distinct values a dictionary holds: 4-bit indices; beyond that decimal or raw wins.
const MAX_DICT: usize = 16;

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

/// `*o = v`, or with `ADD` `*o += v`.
#[inline(always)]
fn put<const ADD: bool>(o: &mut f64, v: f64) {
    if ADD { *o += v } else { *o = v }
}

/// [`put`] of one value over a run.
#[inline(always)]
fn fill<const ADD: bool>(o: &mut [f64], v: f64) {
    if ADD {
        o.iter_mut().for_each(|x| *x += v)
    } else {
        o.fill(v)
    }
}

// Paths spelled out: the fuzz target includes this file by `#[path]`, where bare names would
// resolve beside it.
#[path = "codec/compact.rs"]
mod compact;
#[path = "codec/decode.rs"]
mod decode;
#[path = "codec/encode.rs"]
mod encode;
#[path = "codec/ratio.rs"]
mod ratio;
#[path = "codec/unpack.rs"]
mod unpack;

pub use decode::{add_range, constant, decode, decode_range};
pub use encode::{encode, encode_rounded, round_to_digits};

#[cfg(test)]
mod tests;
