//! The frozen part of the open block: slots the head has moved past, encoded in pieces while
//! the block is still open, so a series that never fills a block (a day at 5 min is 288
//! values) is not kept raw. Owns this in-memory byte format only (snapshots hold whole
//! buffers encoded by `codec`); may not touch buffers or the chain.
//!
//! Format: pieces in slot order, each `u16 slots | u16 bytes | codec bytes` (the codec form
//! of that many slots, NaN gaps included). A new piece is `FREEZE` slots; whenever the last
//! `MERGE` pieces have the same length they are encoded again as one, so a block holds a few
//! pieces of 16, 64 and 256 slots: each value is encoded about three times before its block
//! closes (and once more when the closed block is encoded whole), and the per-piece headers (about 20 bytes) stay a small share.

use super::{BUFFER_CAP, codec};

/// Raw slots the background pass leaves in the head before it freezes them into a piece:
/// small, because the raw tail costs 8 bytes a slot in every series (a tail's storage holds
/// this plus what a series writes between two passes), while a piece's header (~15 bytes)
/// is shared by its values.
pub(super) const FREEZE: usize = 16;

/// Pieces of one length merged into one (a base-4 counter: 16, 64, 256 slots).
const MERGE: usize = 4;

/// Bytes before each piece's codec bytes.
const HEAD: usize = 4;

/// The pieces of `bytes`: (first slot relative to the frozen part's start, slots, codec
/// bytes). Stops at the first piece that does not fit (bytes this module wrote itself).
fn each(bytes: &[u8]) -> impl Iterator<Item = (usize, usize, &[u8])> {
    let (mut at, mut slot) = (0usize, 0usize);
    std::iter::from_fn(move || {
        let h = bytes.get(at..at + HEAD)?;
        let n = u16::from_le_bytes([h[0], h[1]]) as usize;
        let len = u16::from_le_bytes([h[2], h[3]]) as usize;
        let body = bytes.get(at + HEAD..at + HEAD + len)?;
        let piece = (slot, n, body);
        at += HEAD + len;
        slot += n;
        Some(piece)
    })
}

/// How many pieces `bytes` holds.
pub(super) fn count(bytes: &[u8]) -> usize {
    each(bytes).count()
}

/// Appends one piece of `values`, rounded to `digits` significant digits if set (the
/// metric's `precision`: the open block's older values are encoded, so rounded, as a closed
/// block's are).
fn put(out: &mut Vec<u8>, values: &[f64], digits: u32) {
    let at = out.len();
    out.extend_from_slice(&(values.len() as u16).to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    codec::encode_rounded(values, digits, out);
    let len = (out.len() - at - HEAD) as u16;
    out[at + 2..at + HEAD].copy_from_slice(&len.to_le_bytes());
}

/// Pieces holding `values` (one piece).
pub(super) fn new(values: &[f64], digits: u32) -> Box<[u8]> {
    let mut out = Vec::with_capacity(HEAD + 16 + values.len() * 2);
    put(&mut out, values, digits);
    out.into_boxed_slice()
}

/// Appends `values` as a new piece, then merges the last pieces while `MERGE` of them have
/// the same length (not when `merge` is false: a block closing on the write path, encoded
/// whole by the next pass anyway).
pub(super) fn append(bytes: &mut Box<[u8]>, values: &[f64], merge: bool, digits: u32) {
    let mut out = std::mem::take(bytes).into_vec();
    out.reserve_exact(HEAD + 16 + values.len() * 2);
    put(&mut out, values, digits);
    if merge {
        merge_last(&mut out, digits);
    }
    *bytes = out.into_boxed_slice();
}

/// Merges the last pieces of `out` while `MERGE` of them have the same length.
fn merge_last(out: &mut Vec<u8>, digits: u32) {
    loop {
        // The last `MERGE` pieces: (byte offset, slots), oldest first.
        let mut last = [(0usize, 0usize); MERGE];
        let (mut k, mut at) = (0usize, 0usize);
        for (_, n, body) in each(out) {
            last[k % MERGE] = (at, n);
            k += 1;
            at += HEAD + body.len();
        }
        if k < MERGE {
            break;
        }
        let newest = last[(k - 1) % MERGE].1;
        if last.iter().any(|p| p.1 != newest) || newest * MERGE > BUFFER_CAP {
            break;
        }
        let from = last[k % MERGE].0;
        let slots = newest * MERGE;
        let mut tmp = [0f64; BUFFER_CAP];
        decode(&out[from..], &mut tmp[..slots]);
        out.truncate(from);
        put(out, &tmp[..slots], digits);
    }
}

/// Slots `a..a + out.len()` (relative to the frozen part's start) into `out`; only the pieces
/// that overlap them are decoded. A piece that does not decode (a bug) reads as gaps.
pub(super) fn decode_range(bytes: &[u8], a: usize, out: &mut [f64]) {
    each_in(bytes, a, out, |body, n, at, dst| {
        if codec::decode_range(body, n, at, dst).is_err() {
            dst.fill(f64::NAN);
        }
    });
}

/// Hands each piece overlapping slots `a..a + out.len()` to `f` as (its codec bytes, its
/// slots, the first slot wanted relative to the piece, the part of `out` it covers).
pub(super) fn each_in(
    bytes: &[u8],
    a: usize,
    out: &mut [f64],
    mut f: impl FnMut(&[u8], usize, usize, &mut [f64]),
) {
    let b = a + out.len();
    for (start, n, body) in each(bytes) {
        let end = start + n;
        if end <= a {
            continue;
        }
        if start >= b {
            break;
        }
        let (x, y) = (start.max(a), end.min(b));
        f(body, n, x - start, &mut out[x - a..y - a]);
    }
}

/// Every slot of the pieces into `out` (as many as it holds).
pub(super) fn decode(bytes: &[u8], out: &mut [f64]) {
    decode_range(bytes, 0, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_pieces_merge_and_read_back() {
        let value = |i: usize| match i % 13 {
            3 => f64::NAN,
            _ => (i as f64) * 0.25 - 7.0,
        };
        let all: Vec<f64> = (0..480).map(value).collect();
        let mut p = new(&all[..FREEZE], 0);
        for c in all[FREEZE..].chunks(FREEZE) {
            append(&mut p, c, true, 0);
        }
        // 30 pieces of 16 are 1 of 256, 3 of 64 and 2 of 16 after the merges.
        let lens: Vec<usize> = each(&p).map(|(_, n, _)| n).collect();
        assert_eq!(lens, vec![256, 64, 64, 64, 16, 16]);
        let mut out = vec![0.0; 480];
        decode(&p, &mut out);
        for (i, (a, b)) in out.iter().zip(&all).enumerate() {
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{i}"
            );
        }
        // A range across pieces, starting and ending inside them.
        let mut part = vec![0.0; 200];
        decode_range(&p, 100, &mut part);
        assert!((0..200).all(|j| part[j].to_bits() == all[100 + j].to_bits()
            || (part[j].is_nan() && all[100 + j].is_nan())));
    }
}
