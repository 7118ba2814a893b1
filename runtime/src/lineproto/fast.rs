//! Fast path of the line-protocol parser for the common line: no backslash, no quote, no
//! control character, at most
//! 256 bytes, at most `MAX_SPANS` tags, numeric field values in plain notation (`12`, `-0.25`,
//! `3i`, `7u`) and a timestamp of at most 18 digits. One SIMD pass classifies the separators
//! of the whole line into a bitmask; each token end is then a trailing-zero count instead of a
//! byte loop whose length-dependent exit the branch predictor keeps missing. Anything else (and
//! every error) returns `None` and the general parser runs instead, so both agree by
//! construction; `lineproto_tests` checks that on a large batch of random lines.

use super::{Escapes, FieldValue, Line, MAX_SPANS, SPANS_OVERFLOW, TagSpan, Text};
use crate::util::eq_bytes;

const MAX_LEN: usize = 256;
const WORDS: usize = MAX_LEN / 64;

/// Positions of `,`, ` ` and `=` in a line: bit `i % 64` of `bits[i / 64]`.
struct Stops {
    bits: [u64; WORDS],
}

/// Separator and escape masks of 16 bytes (bit `j` = byte `j`). "Escape" covers what the
/// fast path leaves to the general parser: a backslash, a quote, and the control characters
/// (0x00-0x1f, 0x7f) line protocol refuses in names.
#[cfg(target_arch = "x86_64")]
#[inline]
fn mask16(c: &[u8; 16]) -> (u32, u32) {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86_64 baseline; the load reads exactly the 16 bytes of `c`.
    unsafe {
        let v = _mm_loadu_si128(c.as_ptr().cast());
        let eq = |x: u8| _mm_cmpeq_epi8(v, _mm_set1_epi8(x as i8));
        let sep = _mm_or_si128(_mm_or_si128(eq(b','), eq(b' ')), eq(b'='));
        // Unsigned `v <= 0x1f`: min(v, 0x1f) == v.
        let low = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
        let esc = _mm_or_si128(
            _mm_or_si128(eq(b'\\'), eq(b'"')),
            _mm_or_si128(low, eq(0x7f)),
        );
        (_mm_movemask_epi8(sep) as u32, _mm_movemask_epi8(esc) as u32)
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn mask16(c: &[u8; 16]) -> (u32, u32) {
    let (mut sep, mut esc) = (0u32, 0u32);
    for (j, &x) in c.iter().enumerate() {
        sep |= u32::from(x == b',' || x == b' ' || x == b'=') << j;
        esc |= u32::from(x == b'\\' || x == b'"' || x < 0x20 || x == 0x7f) << j;
    }
    (sep, esc)
}

/// The first `\n` or `"` in `b`. A quote may open a string field, which runs on across
/// newlines, so the caller then finds the entry's end the long way. Inline, 16 bytes a step:
/// lines are ~100 bytes, where a call into `memchr` and its runtime dispatch cost more than
/// the search.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn find_newline_or_quote(b: &[u8]) -> Option<usize> {
    use std::arch::x86_64::*;
    let mut i = 0;
    while let Some(c) = b.get(i..i + 16) {
        // SAFETY: SSE2 is part of the x86_64 baseline; the load reads the 16 bytes of `c`.
        let m = unsafe {
            let v = _mm_loadu_si128(c.as_ptr().cast());
            let nl = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\n' as i8));
            let q = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
            _mm_movemask_epi8(_mm_or_si128(nl, q))
        };
        if m != 0 {
            return Some(i + m.trailing_zeros() as usize);
        }
        i += 16;
    }
    b[i..]
        .iter()
        .position(|&c| c == b'\n' || c == b'"')
        .map(|p| i + p)
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn find_newline_or_quote(b: &[u8]) -> Option<usize> {
    memchr::memchr2(b'\n', b'"', b)
}

/// The separators of `b` (at most `MAX_LEN` bytes); `None` if it holds a backslash or quote.
#[inline]
fn classify(b: &[u8]) -> Option<Stops> {
    let n = b.len();
    let mut bits = [0u64; WORDS];
    let mut special = 0u32;
    let mut i = 0;
    while i + 16 <= n {
        let (s, e) = mask16(b[i..i + 16].try_into().expect("16 bytes"));
        // `i` is a multiple of 16, so the 16 bits never straddle two words.
        bits[i / 64] |= u64::from(s) << (i % 64);
        special |= e;
        i += 16;
    }
    if i < n {
        let (s, e) = if n >= 16 {
            // Reload the last 16 bytes (overlapping) and drop the already classified ones.
            let (s, e) = mask16(b[n - 16..].try_into().expect("16 bytes"));
            let done = 16 - (n - i);
            (s >> done, e >> done)
        } else {
            let mut pad = [0u8; 16];
            pad[..n].copy_from_slice(b);
            let (s, e) = mask16(&pad);
            // The zero padding reads as control characters: keep the line's own bits.
            (s, e & ((1 << n) - 1))
        };
        bits[i / 64] |= u64::from(s) << (i % 64);
        special |= e;
    }
    (special == 0).then_some(Stops { bits })
}

/// At most this many separators: 8 tags, a few fields and the timestamp need about 24.
const MAX_SEPS: usize = 64;

/// Separator positions in a line, in order; entries past the last hold the line length.
type Seps = [u16; MAX_SEPS + 2];

/// Lists the separators of `b[start..]` (absolute positions) into `pos`; `None` if that part
/// is longer than `MAX_LEN`, holds a backslash or quote, or has too many separators. (Filled
/// in place: returning the 132-byte array in an `Option` costs a `memcpy` call per line.)
#[inline(always)]
fn seps(b: &[u8], start: usize, pos: &mut Seps) -> Option<()> {
    let n = b.len();
    if n - start > MAX_LEN || n > u16::MAX as usize {
        return None;
    }
    let st = classify(&b[start..])?;
    *pos = [n as u16; MAX_SEPS + 2];
    let mut k = 0;
    for (w, &word) in st.bits.iter().enumerate() {
        let mut m = word;
        while m != 0 {
            // Written unconditionally (masked index); the count is checked once below.
            pos[k & (MAX_SEPS - 1)] = (start + w * 64 + m.trailing_zeros() as usize) as u16;
            k += 1;
            m &= m - 1;
        }
    }
    (k < MAX_SEPS).then_some(())
}

/// Parses a line the general parser would accept, or returns `None` (see the module doc).
///
/// The separator positions are first listed in order; the structure is then checked on that
/// list. Each check reads a position by a known index, so the loads do not wait for each
/// other the way a scan from token to token does.
#[inline(always)]
pub(super) fn parse(s: &str, line: usize) -> Option<Line<'_>> {
    let b = s.as_bytes();
    let mut pos = [0; MAX_SEPS + 2];
    seps(b, 0, &mut pos)?;
    // Position of separator `j` (or the length) and the byte there (0 at the end).
    let p = |j: usize| pos[j] as usize;
    let c = |j: usize| b.get(pos[j] as usize).copied().unwrap_or(0);
    let mend = p(0);
    // A measurement may contain '='; leave that rarity to the general parser.
    if mend == 0 || c(0) == b'=' {
        return None;
    }
    let mut j = 0;
    let mut spans = [TagSpan::default(); MAX_SPANS];
    let mut n_spans = 0;
    while c(j) == b',' {
        let (k0, kend, vend) = (p(j) + 1, p(j + 1), p(j + 2));
        if kend == k0 || c(j + 1) != b'=' || vend == kend + 1 || c(j + 2) == b'=' {
            return None;
        }
        if n_spans == MAX_SPANS {
            return None;
        }
        spans[n_spans] = TagSpan {
            key_start: (k0 - mend) as u16,
            key_end: (kend - mend) as u16,
            value_end: (vend - mend) as u16,
            key_escaped: false,
            value_escaped: false,
        };
        n_spans += 1;
        j += 2;
    }
    let fields = rest(s, &pos, j)?;
    Some(line_of(s, line, mend, p(j), spans, n_spans as u8, fields))
}

/// The line whose measurement ends at `mend` and tag section at `tags_end`.
#[inline(always)]
fn line_of<'a>(
    s: &'a str,
    line: usize,
    mend: usize,
    tags_end: usize,
    spans: [TagSpan; MAX_SPANS],
    n_spans: u8,
    (first_field, more_fields, timestamp): Fields<'a>,
) -> Line<'a> {
    Line {
        measurement: Text {
            raw: &s[..mend],
            escaped: false,
            kind: Escapes::Measurement,
        },
        timestamp,
        line,
        tags: &s[mend..tags_end],
        spans,
        n_spans,
        first_field,
        more_fields,
    }
}

/// What a line shares with the next one when cc-metric-collector sends a host's metrics one
/// per line: the tag section (as text) with its parsed spans.
#[derive(Clone, Copy)]
pub(super) struct PrevTags<'a> {
    tags: &'a str,
    spans: [TagSpan; MAX_SPANS],
    n_spans: u8,
}

impl<'a> PrevTags<'a> {
    /// The tags of an accepted line, if it has some that were recorded as spans.
    #[inline]
    pub(super) fn of(l: &Line<'a>) -> Option<PrevTags<'a>> {
        (!l.tags.is_empty() && l.n_spans != SPANS_OVERFLOW).then_some(PrevTags {
            tags: l.tags,
            spans: l.spans,
            n_spans: l.n_spans,
        })
    }
}

/// A line whose tag section is byte for byte `prev`'s: the tags are compared instead of
/// parsed (equal text parses to equal tags), only the measurement and the fields are
/// scanned. `None` when the tags differ or anything is unusual.
#[inline(always)]
pub(super) fn parse_same_tags<'a>(
    s: &'a str,
    line: usize,
    prev: &PrevTags<'_>,
) -> Option<Line<'a>> {
    let b = s.as_bytes();
    // The measurement ends at the first ',' (a ' ' would mean no tags); a backslash, or a
    // '=' or quote the fast path does not reason about, sends the line the long way.
    let head: &[u8; 16] = b.first_chunk()?;
    let (sep, esc) = mask16(head);
    let first = (sep | esc).trailing_zeros() as usize;
    if first == 0 || first >= 16 || b[first] != b',' {
        return None;
    }
    let mend = first;
    let t = prev.tags.len();
    let after = mend + t;
    if b.get(after) != Some(&b' ') || !eq_bytes(&b[mend..after], prev.tags.as_bytes()) {
        return None;
    }
    let mut pos = [0; MAX_SEPS + 2];
    seps(b, after, &mut pos)?;
    let fields = rest(s, &pos, 0)?;
    Some(line_of(
        s,
        line,
        mend,
        after,
        prev.spans,
        prev.n_spans,
        fields,
    ))
}

/// A line's first field, the text of the others, and its timestamp.
type Fields<'a> = ((Text<'a>, FieldValue<'a>), &'a str, Option<i64>);

/// The fields and timestamp after the tag section, whose end is separator `j` (a space).
#[inline(always)]
fn rest<'a>(s: &'a str, pos: &Seps, mut j: usize) -> Option<Fields<'a>> {
    let b = s.as_bytes();
    let n = b.len();
    let p = |j: usize| pos[j] as usize;
    let c = |j: usize| b.get(pos[j] as usize).copied().unwrap_or(0);
    if c(j) != b' ' {
        return None;
    }
    while c(j + 1) == b' ' && p(j + 1) == p(j) + 1 {
        j += 1;
    }
    let first_field = field(s, pos, j)?;
    j += 2;
    let more_start = p(j) + 1;
    while c(j) == b',' {
        field(s, pos, j)?;
        j += 2;
    }
    let end = p(j);
    let more_fields = s.get(more_start.min(end)..end).unwrap_or("");
    let timestamp = match c(j) {
        0 => None,
        b' ' => {
            while c(j + 1) == b' ' && p(j + 1) == p(j) + 1 {
                j += 1;
            }
            let (start, tend) = (p(j) + 1, p(j + 1));
            // The token must end the line, followed by spaces only.
            if b[tend.min(n)..].iter().any(|&x| x != b' ') {
                return None;
            }
            if tend == start {
                None
            } else {
                Some(int(&b[start..tend])?)
            }
        }
        _ => return None,
    };
    Some((first_field, more_fields, timestamp))
}

/// `key=value` after separator `j` (fields are separated by ','): the key and the value.
#[inline(always)]
fn field<'a>(s: &'a str, pos: &[u16], j: usize) -> Option<(Text<'a>, FieldValue<'a>)> {
    let b = s.as_bytes();
    let (k0, kend, vend) = (
        pos[j] as usize + 1,
        pos[j + 1] as usize,
        pos[j + 2] as usize,
    );
    if kend == k0 || b.get(kend) != Some(&b'=') || vend == kend + 1 || b.get(vend) == Some(&b'=') {
        return None;
    }
    let key = Text {
        raw: &s[k0..kend],
        escaped: false,
        kind: Escapes::Name,
    };
    Some((key, value(&b[kend + 1..vend])?))
}

/// Exact powers of ten: every one up to 1e22 is representable as an f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A numeric field value in plain notation. Floats use Clinger's fast path: an integer
/// mantissa of at most 2^53 divided by an exact power of ten is one correctly rounded
/// operation, so the result equals what `str::parse::<f64>` returns. Other notations (and
/// anything that could overflow) return `None`.
#[inline(always)]
fn value(t: &[u8]) -> Option<FieldValue<'static>> {
    match *t.last()? {
        b'i' => int(&t[..t.len() - 1]).map(FieldValue::Int),
        b'u' => digits(&t[..t.len() - 1]).map(FieldValue::UInt),
        _ => {
            let (neg, t) = match t.split_first() {
                Some((b'-', rest)) => (true, rest),
                _ => (false, t),
            };
            let (m, frac) = match t.iter().position(|&c| c == b'.') {
                None => (digits(t)?, 0),
                Some(p) => {
                    let (i, f) = (&t[..p], &t[p + 1..]);
                    // "1." and ".5" are left to the general parser.
                    if i.is_empty() || f.is_empty() || i.len() + f.len() > 19 {
                        return None;
                    }
                    (digits(i)? * POW10_INT[f.len()] + digits(f)?, f.len())
                }
            };
            if m > 1 << 53 {
                return None;
            }
            let v = m as f64 / POW10[frac];
            Some(FieldValue::Float(if neg { -v } else { v }))
        }
    }
}

const POW10_INT: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// An optionally negative decimal integer that fits an i64 (else `None`).
#[inline(always)]
fn int(t: &[u8]) -> Option<i64> {
    match t.split_first() {
        Some((b'-', d)) => digits(d)
            .filter(|&v| v <= i64::MAX as u64)
            .map(|v| -(v as i64)),
        _ => digits(t).and_then(|v| i64::try_from(v).ok()),
    }
}

/// 1 to 19 decimal digits (19 cannot overflow a u64). Eight digits at a time: a nanosecond
/// timestamp takes two such steps and three single digits.
#[inline(always)]
fn digits(d: &[u8]) -> Option<u64> {
    if d.is_empty() || d.len() > 19 {
        return None;
    }
    let mut v = 0u64;
    let mut rest = d;
    while let Some((chunk, tail)) = rest.split_first_chunk::<8>() {
        v = v * 100_000_000 + eight_digits(u64::from_le_bytes(*chunk))?;
        rest = tail;
    }
    for &c in rest {
        let x = c.wrapping_sub(b'0');
        if x > 9 {
            return None;
        }
        v = v * 10 + u64::from(x);
    }
    Some(v)
}

/// Eight ASCII digits (first digit in the low byte) as a number, `None` if any is not a digit.
#[inline(always)]
fn eight_digits(x: u64) -> Option<u64> {
    const LO: u64 = 0x0101_0101_0101_0101;
    let d = x.wrapping_sub(LO * b'0' as u64);
    // Each byte must be 0..=9: no borrow from the subtraction and no byte above 9.
    if (x & (LO * 0xF0)) != LO * 0x30 || (d.wrapping_add(LO * 6) & (LO * 0xF0)) != 0 {
        return None;
    }
    let d = (d * 10 + (d >> 8)) & 0x00FF_00FF_00FF_00FF;
    let d = (d * 100 + (d >> 16)) & 0x0000_FFFF_0000_FFFF;
    Some((d * 10_000 + (d >> 32)) & 0xFFFF_FFFF)
}
