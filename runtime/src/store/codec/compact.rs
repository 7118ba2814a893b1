//! The compact headers of the value forms most pieces and buffers take (forms 4 and 5 in
//! `codec.rs`'s layout): the same values as the constant and decimal forms, with the header's
//! integers as varints instead of fixed `u64`s. A piece of 16 values paid ~23 header bytes in
//! the fixed form, more than its packed values; here it pays ~7. Owns these headers' bytes
//! only; the packed body after them is the decimal form's (`decode.rs` reads both alike).

use super::{DecodeError, MAX_EXP};

/// LEB128: 7 bits a byte, low first, the top bit set on every byte but the last.
pub(super) fn put_uvar(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push(x as u8 | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

/// Bytes [`put_uvar`] writes for `x`.
pub(super) fn uvar_len(x: u64) -> usize {
    (64 - (x | 1).leading_zeros() as usize).div_ceil(7)
}

/// Signed integers with small magnitude as small unsigned ones (0, -1, 1, -2, ...).
pub(super) fn zigzag(x: i64) -> u64 {
    ((x << 1) ^ (x >> 63)) as u64
}

fn unzigzag(x: u64) -> i64 {
    (x >> 1) as i64 ^ -((x & 1) as i64)
}

/// Reads a [`put_uvar`] integer from the front of `bytes`.
pub(super) fn read_uvar(bytes: &mut &[u8]) -> Result<u64, DecodeError> {
    let mut x = 0u64;
    for (i, b) in bytes.iter().enumerate().take(10) {
        let part = (*b & 0x7f) as u64;
        if i == 9 && part > 1 {
            return Err(DecodeError::Invalid("varint over 64 bits"));
        }
        x |= part << (7 * i);
        if b & 0x80 == 0 {
            *bytes = &bytes[i + 1..];
            return Ok(x);
        }
    }
    Err(if bytes.len() < 10 {
        DecodeError::Truncated
    } else {
        DecodeError::Invalid("varint over 64 bits")
    })
}

pub(super) fn read_ivar(bytes: &mut &[u8]) -> Result<i64, DecodeError> {
    read_uvar(bytes).map(unzigzag)
}

/// The integer a constant is, if it reads back bit for bit (not -0.0, within 2^53).
pub(super) fn small_int(v: f64) -> Option<i64> {
    let d = v as i64;
    (v.abs() < 9_007_199_254_740_992.0 && (d as f64).to_bits() == v.to_bits()).then_some(d)
}

/// Form 4: a constant integer `d` (zigzag varint).
pub(super) fn write_int_constant(d: i64, out: &mut Vec<u8>) {
    out.push(4);
    put_uvar(out, zigzag(d));
}

/// The value of a form-4 body at the front of `bytes`.
pub(super) fn read_int_constant(bytes: &mut &[u8]) -> Result<f64, DecodeError> {
    let d = read_ivar(bytes)?;
    if d.unsigned_abs() >= 1 << 53 {
        return Err(DecodeError::Invalid("integer constant out of range"));
    }
    Ok(d as f64)
}

/// The decimal form's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DecimalHead {
    pub(super) e: i32,
    pub(super) delta: bool,
    pub(super) base: i64,
    pub(super) min_delta: i64,
    pub(super) width: u32,
    pub(super) exceptions: usize,
}

/// Bit 7 of form 5's first byte: delta mode; bits 0..6: the exponent plus [`MAX_EXP`].
const DELTA_BIT: u8 = 0x80;

impl DecimalHead {
    /// Form 5's header bytes, the form byte included.
    pub(super) fn size(&self) -> usize {
        1 + 1
            + uvar_len(zigzag(self.base))
            + if self.delta {
                uvar_len(zigzag(self.min_delta))
            } else {
                0
            }
            + 1
            + uvar_len(self.exceptions as u64)
    }

    /// Form 5: `u8 (e + 18) | delta << 7`, varint base, varint min_delta (delta mode only),
    /// `u8 width`, varint exception count.
    pub(super) fn write(&self, out: &mut Vec<u8>) {
        out.push(5);
        out.push((self.e + MAX_EXP) as u8 | if self.delta { DELTA_BIT } else { 0 });
        put_uvar(out, zigzag(self.base));
        if self.delta {
            put_uvar(out, zigzag(self.min_delta));
        }
        out.push(self.width as u8);
        put_uvar(out, self.exceptions as u64);
    }

    /// A form-5 header at the front of `bytes` (after the form byte).
    pub(super) fn read(bytes: &mut &[u8]) -> Result<DecimalHead, DecodeError> {
        let (&first, rest) = bytes.split_first().ok_or(DecodeError::Truncated)?;
        *bytes = rest;
        let e = (first & !DELTA_BIT) as i32 - MAX_EXP;
        if e > MAX_EXP {
            return Err(DecodeError::Invalid("decimal exponent out of range"));
        }
        let delta = first & DELTA_BIT != 0;
        let base = read_ivar(bytes)?;
        let min_delta = if delta { read_ivar(bytes)? } else { 0 };
        let (&width, rest) = bytes.split_first().ok_or(DecodeError::Truncated)?;
        *bytes = rest;
        if width > 64 {
            return Err(DecodeError::Invalid("bit width over 64"));
        }
        let exceptions = read_uvar(bytes)?;
        if exceptions > super::MAX_VALUES as u64 {
            return Err(DecodeError::Invalid("more exceptions than values"));
        }
        Ok(DecimalHead {
            e,
            delta,
            base,
            min_delta,
            width: width as u32,
            exceptions: exceptions as usize,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_refuse_overlong() {
        for x in [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_uvar(&mut out, x);
            assert_eq!(out.len(), uvar_len(x), "{x}");
            let mut s = &out[..];
            assert_eq!(read_uvar(&mut s), Ok(x));
            assert!(s.is_empty());
        }
        for x in [0i64, -1, 1, i64::MIN, i64::MAX, -(1 << 40)] {
            assert_eq!(unzigzag(zigzag(x)), x);
        }
        assert_eq!(
            read_uvar(&mut &[0x80u8, 0x80][..]),
            Err(DecodeError::Truncated)
        );
        assert!(read_uvar(&mut &[0xffu8; 11][..]).is_err());
        assert!(
            read_uvar(&mut &[0xffu8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02][..])
                .is_err()
        );
        assert_eq!(small_int(-0.0), None);
        assert_eq!(small_int(3.0), Some(3));
        assert_eq!(small_int(0.5), None);
        assert_eq!(small_int(1e300), None);
    }
}
