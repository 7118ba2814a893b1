//! The general line-protocol parser: every line, every escape, every error with its column.
//! Byte-at-a-time scanning (eight bytes at a time where nothing special occurs); the fast
//! path in `lineproto_fast` handles the common lines and falls back to this one.

use super::float::parse_float;
use super::{ErrorKind, Escapes, FieldValue, Line, MAX_SPANS, SPANS_OVERFLOW, TagSpan, Text};

/// Byte classes for scanning: 1 = `,` or space, 2 = `=`, 4 = backslash, 8 = a control
/// character (0x00-0x1f, 0x7f), which line protocol refuses in names.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b',' as usize] = 1;
    t[b' ' as usize] = 1;
    t[b'=' as usize] = 2;
    t[b'\\' as usize] = 4;
    let mut c = 0;
    while c < 0x20 {
        t[c] = 8;
        c += 1;
    }
    t[0x7f] = 8;
    t
};

const LO: u64 = 0x0101_0101_0101_0101;
const SPLAT_COMMA: u64 = LO * b',' as u64;
const SPLAT_SPACE: u64 = LO * b' ' as u64;
const SPLAT_EQ: u64 = LO * b'=' as u64;
const SPLAT_BACKSLASH: u64 = LO * b'\\' as u64;
const SPLAT_DEL: u64 = LO * 0x7f;

/// High bit set in each byte of `x` that is zero. Bytes above the first zero byte may be
/// flagged spuriously (borrow), so only the lowest flag is meaningful, which is all we use.
#[inline]
fn zero_byte(x: u64) -> u64 {
    x.wrapping_sub(LO) & !x & (LO << 7)
}

/// High bit set in each byte of `x` below 0x20 (same caveat as [`zero_byte`]).
#[inline]
fn control_byte(x: u64) -> u64 {
    x.wrapping_sub(LO * 0x20) & !x & (LO << 7)
}

/// Whether `\` followed by `c` is an escape in a measurement (`EQ` false: `\ ` and `\,`) or a
/// tag key, tag value or field key (`EQ` true: also `\=`), as influxdata/line-protocol v2
/// reads them; before anything else a backslash is itself (`\\` stays two characters).
#[inline]
fn escapable<const EQ: bool>(c: u8) -> bool {
    c == b' ' || c == b',' || (EQ && c == b'=')
}

/// Scans a name from `i` up to an unescaped `,` or space (and `=` when `EQ`), or the end.
/// Returns the end and whether an escape occurred; a control character is an error. A table
/// lookup per byte keeps the loop to one load and one test.
#[inline]
pub(super) fn scan<const EQ: bool>(
    b: &[u8],
    mut i: usize,
) -> Result<(usize, bool), (usize, ErrorKind)> {
    let stop = if EQ { 15 } else { 13 };
    let mut escaped = false;
    loop {
        // Eight bytes at a time (SWAR): the lowest byte equal to a stop, a backslash or a
        // control character.
        while let Some(w) = b.get(i..i + 8) {
            let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            let hit = zero_byte(w ^ SPLAT_COMMA)
                | zero_byte(w ^ SPLAT_SPACE)
                | zero_byte(w ^ SPLAT_BACKSLASH)
                | zero_byte(w ^ SPLAT_DEL)
                | control_byte(w);
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
        match b.get(i) {
            Some(b'\\') => {
                if b.get(i + 1).is_some_and(|&c| escapable::<EQ>(c)) {
                    escaped = true;
                    i += 2;
                } else {
                    i += 1;
                }
            }
            Some(&c) if CLASS[c as usize] == 8 => return Err((i, ErrorKind::ControlCharacter)),
            _ => return Ok((i, escaped)),
        }
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
                    // `\\`, `\"`, `\n`, `\r` and `\t` are escapes in a string; a backslash
                    // before anything else is itself.
                    Some(b'\\') if b.get(j + 1).is_some_and(|c| b"\\\"nrt".contains(c)) => {
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

/// A field value other than a string, by influxdata/line-protocol v2's rules: its first
/// character decides the kind (`t`/`f` bool, `-`, a digit or `.` a number, anything else,
/// a leading `+` included, no kind at all); an `i` or `u` suffix makes a number an integer
/// (Go's `ParseInt`/`ParseUint`, base 10), otherwise it is a float as Go's `ParseFloat`
/// reads it ([`parse_float`]), finite only.
fn parse_value(t: &str) -> Result<FieldValue<'static>, ErrorKind> {
    let b = t.as_bytes();
    match b.first() {
        Some(b't' | b'T' | b'f' | b'F') => match t {
            "t" | "T" | "true" | "True" | "TRUE" => Ok(FieldValue::Bool(true)),
            "f" | "F" | "false" | "False" | "FALSE" => Ok(FieldValue::Bool(false)),
            _ => Err(ErrorKind::InvalidFieldValue),
        },
        Some(b'-' | b'0'..=b'9' | b'.') => match *b.last().unwrap_or(&0) {
            b'i' => {
                let d = &t[..t.len() - 1];
                let digits = d.strip_prefix('-').unwrap_or(d);
                if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
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
            _ => parse_float(t).map(FieldValue::Float),
        },
        _ => Err(ErrorKind::InvalidFieldValue),
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
