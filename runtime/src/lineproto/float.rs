//! Float field values as Go's `strconv.ParseFloat(s, 64)` reads them, which is what
//! influxdata/line-protocol v2 (cc-metric-store's decoder) calls: decimal with `_` between
//! digits (`1_000`), hexadecimal with a binary exponent (`0x1p4`, `0x1.8p-2`), and an error
//! for what overflows (`1e9999`). NaN and infinities are refused as the decoder refuses them
//! (`non-number ... cannot be represented`). Owns nothing else; the caller has already
//! checked the first character (`-`, a digit or `.`).

use super::ErrorKind;
use crate::util::split_sign;

/// Largest binary exponent magnitude worth tracking: past it every f64 result is already 0 or
/// infinite, and the sum stays far from i64 overflow however many digits follow.
const EXP_CLAMP: i64 = 100_000;

/// Parses a float field value; `InvalidFloat` for bad syntax, `FloatOutOfRange` for a value
/// beyond f64 (Go's `ErrRange`), and for NaN and infinities.
pub(super) fn parse_float(t: &str) -> Result<f64, ErrorKind> {
    let b = t.as_bytes();
    if b.contains(&b'_') && !underscore_ok(b) {
        return Err(ErrorKind::InvalidFloat);
    }
    let (neg, body) = match b.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, b),
    };
    let v = match body {
        [b'0', b'x' | b'X', hex @ ..] => parse_hex(hex).ok_or(ErrorKind::InvalidFloat)?,
        _ => parse_decimal(body)?,
    };
    if v.is_infinite() {
        return Err(ErrorKind::FloatOutOfRange);
    }
    Ok(if neg { -v } else { v })
}

/// Decimal: only digits, `_`, `.`, exponent letters and signs reach Rust's parser (which
/// would also take `inf`, `nan` and a leading `+` that Go's syntax here does not).
fn parse_decimal(b: &[u8]) -> Result<f64, ErrorKind> {
    let mut text = String::with_capacity(b.len());
    for &c in b {
        match c {
            b'_' => {}
            b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-' => text.push(c as char),
            _ => return Err(ErrorKind::InvalidFloat),
        }
    }
    if text.starts_with(['+', '-']) {
        return Err(ErrorKind::InvalidFloat);
    }
    text.parse::<f64>().map_err(|_| ErrorKind::InvalidFloat)
}

/// Hexadecimal after `0x`: hex digits with at most one `.`, then a mandatory `p` exponent in
/// decimal. The first 15 significant hex digits (60 bits) are kept, the rest folded into a
/// sticky bit, so converting to f64 rounds to nearest as Go does (except, possibly, in the
/// last bit of a subnormal result).
fn parse_hex(b: &[u8]) -> Option<f64> {
    let (mut mant, mut exp2, mut digits, mut dot, mut sticky) = (0u64, 0i64, false, false, false);
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        let d = match c {
            b'_' => {
                i += 1;
                continue;
            }
            b'.' if !dot => {
                dot = true;
                i += 1;
                continue;
            }
            _ => match (c as char).to_digit(16) {
                Some(d) => d as u64,
                None => break,
            },
        };
        digits = true;
        if mant >> 56 == 0 {
            mant = mant * 16 + d;
            if dot {
                exp2 -= 4;
            }
        } else {
            sticky |= d != 0;
            if !dot {
                exp2 += 4;
            }
        }
        i += 1;
    }
    if !digits || !matches!(b.get(i), Some(b'p' | b'P')) {
        return None;
    }
    let (neg, exp_text) = split_sign(&b[i + 1..]);
    let mut e: i64 = 0;
    let mut exp_digits = false;
    for &c in exp_text {
        match c {
            b'_' => {}
            b'0'..=b'9' => {
                exp_digits = true;
                e = (e * 10 + i64::from(c - b'0')).min(EXP_CLAMP);
            }
            _ => return None,
        }
    }
    if !exp_digits {
        return None;
    }
    if mant == 0 {
        return Some(0.0);
    }
    let m = (mant << 1 | sticky as u64) as f64;
    let exp = (if neg { -e } else { e }) + exp2 - 1;
    Some(scale2(m, exp.clamp(-EXP_CLAMP, EXP_CLAMP)))
}

/// `m * 2^exp` in steps that stay exact until the result itself under- or overflows.
fn scale2(mut m: f64, mut exp: i64) -> f64 {
    while exp > 1000 {
        m *= 2f64.powi(1000);
        exp -= 1000;
    }
    while exp < -1000 {
        m *= 2f64.powi(-1000);
        exp += 1000;
    }
    m * 2f64.powi(exp as i32)
}

/// Go's `underscoreOK`: an underscore only between digits, or between a base prefix and a
/// digit; the sign and a `0x`/`0b`/`0o` prefix count as Go counts them.
fn underscore_ok(s: &[u8]) -> bool {
    let (_, s) = split_sign(s);
    // What was seen last: '^' start, '0' a digit or base prefix, '_' an underscore, '!' other.
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if s.len() >= 2 && s[0] == b'0' && matches!(s[1] | 0x20, b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = s[1] | 0x20 == b'x';
    }
    for &c in &s[i..] {
        if c.is_ascii_digit() || (hex && (c | 0x20).is_ascii_hexdigit()) {
            saw = b'0';
            continue;
        }
        if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
            continue;
        }
        if saw == b'_' {
            return false;
        }
        saw = b'!';
    }
    saw != b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_go_parse_float_accepts() {
        // Each from Go's strconv ParseFloat syntax (atof_test.go's shapes).
        for (text, want) in [
            ("1", 1.0),
            ("-1.5", -1.5),
            (".5", 0.5),
            ("5.", 5.0),
            ("1e3", 1000.0),
            ("1E-2", 0.01),
            ("1.e2", 100.0),
            ("1_000", 1000.0),
            ("1_000.000_1", 1000.0001),
            ("0x1p4", 16.0),
            ("0x1.8p1", 3.0),
            ("-0x1p-2", -0.25),
            ("0X_1P4", 16.0),
            ("0x.8p1", 1.0),
            ("0x1fffffffffffffp0", 9007199254740991.0),
            ("1e-9999", 0.0),
            ("0x1p-1075", 0.0),
        ] {
            assert_eq!(parse_float(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn what_go_parse_float_refuses() {
        for text in [
            "1__0", "_1", "1_", "1_.5", "1._5", "0x1", "0x1p", "0xp4", "1e", ".", "-", "1.2.3",
            "1x", "-inf", "-nan", "-+1", "1e+", "0x1.8",
        ] {
            assert_eq!(parse_float(text), Err(ErrorKind::InvalidFloat), "{text}");
        }
        for text in ["1e9999", "-1e309", "0x1p1024", "-0x1.fffffffffffff8p1023"] {
            assert_eq!(parse_float(text), Err(ErrorKind::FloatOutOfRange), "{text}");
        }
    }
}
