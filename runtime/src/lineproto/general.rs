//! The general line-protocol parser: every line, every escape, every error with its column.
//! Byte-at-a-time scanning (eight bytes at a time where nothing special occurs); the fast
//! path in `lineproto_fast` handles the common lines and falls back to this one.

use super::{ErrorKind, Escapes, FieldValue, Line, MAX_SPANS, SPANS_OVERFLOW, TagSpan, Text};

/// Byte classes for scanning: 1 = `,` or space, 2 = `=`, 4 = backslash.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b',' as usize] = 1;
    t[b' ' as usize] = 1;
    t[b'=' as usize] = 2;
    t[b'\\' as usize] = 4;
    t
};

const LO: u64 = 0x0101_0101_0101_0101;
const SPLAT_COMMA: u64 = LO * b',' as u64;
const SPLAT_SPACE: u64 = LO * b' ' as u64;
const SPLAT_EQ: u64 = LO * b'=' as u64;
const SPLAT_BACKSLASH: u64 = LO * b'\\' as u64;

/// High bit set in each byte of `x` that is zero. Bytes above the first zero byte may be
/// flagged spuriously (borrow), so only the lowest flag is meaningful, which is all we use.
#[inline]
fn zero_byte(x: u64) -> u64 {
    x.wrapping_sub(LO) & !x & (LO << 7)
}

/// Scans a name from `i` up to an unescaped `,` or space (and `=` when `EQ`), or the end.
/// Returns the end and whether a backslash occurred. A table lookup per byte keeps the loop
/// to one load and one test.
#[inline]
pub(super) fn scan<const EQ: bool>(
    b: &[u8],
    mut i: usize,
) -> Result<(usize, bool), (usize, ErrorKind)> {
    let stop = if EQ { 7 } else { 5 };
    let mut escaped = false;
    loop {
        // Eight bytes at a time (SWAR): the lowest byte equal to a stop or a backslash.
        while let Some(w) = b.get(i..i + 8) {
            let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            let hit = zero_byte(w ^ SPLAT_COMMA)
                | zero_byte(w ^ SPLAT_SPACE)
                | zero_byte(w ^ SPLAT_BACKSLASH);
            let hit = if EQ {
                hit | zero_byte(w ^ SPLAT_EQ)
            } else {
                hit
            };
            if hit != 0 {
                i += (hit.trailing_zeros() / 8) as usize;
                break;
            }
            i += 8;
        }
        while i < b.len() && CLASS[b[i] as usize] & stop == 0 {
            i += 1;
        }
        if i < b.len() && b[i] == b'\\' {
            if i + 1 >= b.len() {
                return Err((i, ErrorKind::TrailingBackslash));
            }
            escaped = true;
            // Skip the escaped character, including all bytes of a multi-byte one.
            i += 2;
            while i < b.len() && (b[i] & 0xC0) == 0x80 {
                i += 1;
            }
            continue;
        }
        return Ok((i, escaped));
    }
}

/// Parses `key=value` at `i`; returns the key, value and the index just past the value.
pub(super) fn parse_field(
    s: &str,
    i: usize,
) -> Result<(Text<'_>, FieldValue<'_>, usize), (usize, ErrorKind)> {
    let b = s.as_bytes();
    let (kend, kesc) = scan::<true>(b, i)?;
    if kend == i {
        return Err((i, ErrorKind::MissingFieldKey));
    }
    if b.get(kend) != Some(&b'=') {
        return Err((kend, ErrorKind::MissingFieldValue));
    }
    let key = Text {
        raw: &s[i..kend],
        escaped: kesc,
        kind: Escapes::Name,
    };
    let v = kend + 1;
    match b.get(v) {
        None | Some(b',') | Some(b' ') => Err((v, ErrorKind::MissingFieldValue)),
        Some(b'"') => {
            let mut j = v + 1;
            let mut escaped = false;
            loop {
                match b.get(j) {
                    None => return Err((v, ErrorKind::UnterminatedString)),
                    Some(b'\\') if j + 1 < b.len() => {
                        escaped = true;
                        j += 2;
                    }
                    Some(b'"') => break,
                    Some(_) => j += 1,
                }
            }
            // `j` may have stepped into a multi-byte character only via `\`: find the char
            // boundary-safe slice (the closing quote is ASCII, so `j` is a boundary).
            let raw = s.get(v + 1..j).ok_or((v, ErrorKind::UnterminatedString))?;
            let text = Text {
                raw,
                escaped,
                kind: Escapes::Str,
            };
            Ok((key, FieldValue::Str(text), j + 1))
        }
        Some(_) => {
            let end = memchr::memchr2(b',', b' ', &b[v..]).map_or(b.len(), |p| v + p);
            let value = parse_value(&s[v..end]).map_err(|k| (v, k))?;
            Ok((key, value, end))
        }
    }
}

fn parse_value(t: &str) -> Result<FieldValue<'static>, ErrorKind> {
    let b = t.as_bytes();
    let digits = |d: &[u8]| {
        let d = d
            .strip_prefix(b"-")
            .or_else(|| d.strip_prefix(b"+"))
            .unwrap_or(d);
        !d.is_empty() && d.iter().all(u8::is_ascii_digit)
    };
    match *b.last().unwrap_or(&0) {
        b'i' => {
            let d = &t[..t.len() - 1];
            if !digits(d.as_bytes()) {
                return Err(ErrorKind::InvalidInteger);
            }
            d.parse()
                .map(FieldValue::Int)
                .map_err(|_| ErrorKind::IntegerOverflow)
        }
        b'u' => {
            let d = &t[..t.len() - 1];
            if d.is_empty() || !d.bytes().all(|c| c.is_ascii_digit()) {
                return Err(ErrorKind::InvalidUnsigned);
            }
            d.parse()
                .map(FieldValue::UInt)
                .map_err(|_| ErrorKind::IntegerOverflow)
        }
        _ => match t {
            "t" | "T" | "true" | "True" | "TRUE" => Ok(FieldValue::Bool(true)),
            "f" | "F" | "false" | "False" | "FALSE" => Ok(FieldValue::Bool(false)),
            _ => {
                // Only digits, sign, dot and exponent: rejects "nan", "inf" and "0x10",
                // which Rust's float parser would otherwise accept or misread.
                let mut digit = false;
                let mut other = false;
                for c in b {
                    match c {
                        b'0'..=b'9' => digit = true,
                        b'.' | b'e' | b'E' | b'+' | b'-' => {}
                        _ => other = true,
                    }
                }
                if other || !digit {
                    return Err(
                        if b.first().is_some_and(|c| c.is_ascii_digit() || *c == b'-') {
                            ErrorKind::InvalidFloat
                        } else {
                            ErrorKind::InvalidFieldValue
                        },
                    );
                }
                t.parse()
                    .map(FieldValue::Float)
                    .map_err(|_| ErrorKind::InvalidFloat)
            }
        },
    }
}

pub(super) fn parse_inner(s: &str, line: usize) -> Result<Line<'_>, (usize, ErrorKind)> {
    let b = s.as_bytes();
    let (mend, mesc) = scan::<false>(b, 0)?;
    if mend == 0 {
        return Err((0, ErrorKind::MissingMeasurement));
    }
    let measurement = Text {
        raw: &s[..mend],
        escaped: mesc,
        kind: Escapes::Measurement,
    };
    let mut i = mend;
    let mut spans = [TagSpan::default(); MAX_SPANS];
    let mut n_spans = if b.len() > u16::MAX as usize {
        SPANS_OVERFLOW
    } else {
        0
    };
    while b.get(i) == Some(&b',') {
        let (kend, kesc) = scan::<true>(b, i + 1)?;
        if kend == i + 1 {
            return Err((kend, ErrorKind::MissingTagKey));
        }
        if b.get(kend) != Some(&b'=') {
            return Err((kend, ErrorKind::MissingTagValue));
        }
        let (vend, vesc) = scan::<true>(b, kend + 1)?;
        if vend == kend + 1 {
            return Err((vend, ErrorKind::MissingTagValue));
        }
        if b.get(vend) == Some(&b'=') {
            return Err((vend, ErrorKind::UnescapedEquals));
        }
        if (n_spans as usize) < MAX_SPANS {
            spans[n_spans as usize] = TagSpan {
                key_start: (i + 1 - mend) as u16,
                key_end: (kend - mend) as u16,
                value_end: (vend - mend) as u16,
                key_escaped: kesc,
                value_escaped: vesc,
            };
            n_spans += 1;
        } else {
            n_spans = SPANS_OVERFLOW;
        }
        i = vend;
    }
    let tags = &s[mend..i];
    if b.get(i) != Some(&b' ') {
        return Err((i, ErrorKind::MissingFields));
    }
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    if i >= b.len() {
        return Err((i, ErrorKind::MissingFields));
    }
    let (k, v, mut end) = parse_field(s, i)?;
    let first_field = (k, v);
    let more_start = end + 1;
    while b.get(end) == Some(&b',') {
        let (_, _, e) = parse_field(s, end + 1)?;
        end = e;
    }
    let more_fields = s.get(more_start.min(end)..end).unwrap_or("");
    i = end;
    let timestamp = match b.get(i) {
        None => None,
        Some(b' ') => {
            while b.get(i) == Some(&b' ') {
                i += 1;
            }
            let start = i;
            while i < b.len() && b[i] != b' ' {
                i += 1;
            }
            let tok = &s[start..i];
            while b.get(i) == Some(&b' ') {
                i += 1;
            }
            if i < b.len() {
                return Err((i, ErrorKind::UnexpectedCharacter));
            }
            if tok.is_empty() {
                None
            } else {
                let d = tok.strip_prefix('-').unwrap_or(tok);
                if d.is_empty() || !d.bytes().all(|c| c.is_ascii_digit()) {
                    return Err((start, ErrorKind::InvalidTimestamp));
                }
                Some(
                    tok.parse()
                        .map_err(|_| (start, ErrorKind::InvalidTimestamp))?,
                )
            }
        }
        Some(_) => return Err((i, ErrorKind::UnexpectedCharacter)),
    };
    Ok(Line {
        measurement,
        timestamp,
        line,
        tags,
        spans,
        n_spans,
        first_field,
        more_fields,
    })
}
