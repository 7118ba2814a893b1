//! Zero-copy InfluxDB line protocol parser:
//! `measurement[,tag=value...] field=value[,field=value...] [timestamp]`.
//!
//! Escaping per the InfluxDB spec: in the measurement `\,` and `\ `; in tag keys, tag values
//! and field keys `\,`, `\=` and `\ `; in string field values `\"` and `\\`; a backslash
//! before any other character is literal. Names are returned as [`Text`], which borrows the
//! input and unescapes only on request. Field values: float (`1.5`, `-3e4`), integer (`3i`),
//! unsigned (`3u`), bool (`t`, `true`, `F`, ...) and string (`"..."`). Blank lines and `#`
//! comments are skipped. [`parse_lines`] yields one `Result` per line so a bad line does not
//! stop the rest; no input makes it panic.

use std::borrow::Cow;
use std::fmt;

/// Why a line was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error("invalid UTF-8")]
    InvalidUtf8,
    #[error("missing measurement")]
    MissingMeasurement,
    #[error("missing tag key")]
    MissingTagKey,
    #[error("missing tag value")]
    MissingTagValue,
    #[error("unescaped '=' in tag value")]
    UnescapedEquals,
    #[error("missing fields")]
    MissingFields,
    #[error("missing field key")]
    MissingFieldKey,
    #[error("missing field value")]
    MissingFieldValue,
    #[error("invalid float")]
    InvalidFloat,
    #[error("invalid integer")]
    InvalidInteger,
    #[error("integer out of range")]
    IntegerOverflow,
    #[error("invalid unsigned integer")]
    InvalidUnsigned,
    #[error("invalid field value (not a number, bool or quoted string)")]
    InvalidFieldValue,
    #[error("unterminated string")]
    UnterminatedString,
    #[error("unexpected character")]
    UnexpectedCharacter,
    #[error("invalid timestamp")]
    InvalidTimestamp,
    #[error("backslash at end of line")]
    TrailingBackslash,
}

/// A rejected line: 1-based line number, 1-based byte column, reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {kind}")]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub kind: ErrorKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escapes {
    Measurement,
    Name,
    Str,
}

/// A name or string borrowed from the input; [`Text::as_str`] unescapes (allocating only if
/// the raw text contains a backslash).
#[derive(Clone, Copy)]
pub struct Text<'a> {
    raw: &'a str,
    escaped: bool,
    kind: Escapes,
}

impl<'a> Text<'a> {
    /// The text exactly as it appears in the input.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// The unescaped text.
    pub fn as_str(&self) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(self.raw);
        }
        let special: &[char] = match self.kind {
            Escapes::Measurement => &[',', ' ', '\\'],
            Escapes::Name => &[',', '=', ' ', '\\'],
            Escapes::Str => &['"', '\\'],
        };
        let mut out = String::with_capacity(self.raw.len());
        let mut chars = self.raw.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.clone().next() {
                    Some(n) if special.contains(&n) => {
                        out.push(n);
                        chars.next();
                    }
                    _ => out.push('\\'),
                }
            } else {
                out.push(c);
            }
        }
        Cow::Owned(out)
    }
}

impl PartialEq<str> for Text<'_> {
    fn eq(&self, other: &str) -> bool {
        if self.escaped {
            self.as_str() == other
        } else {
            self.raw == other
        }
    }
}

impl PartialEq<&str> for Text<'_> {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

impl fmt::Debug for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.as_str(), f)
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// A field value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldValue<'a> {
    Float(f64),
    Int(i64),
    UInt(u64),
    Bool(bool),
    Str(Text<'a>),
}

impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl FieldValue<'_> {
    /// The value as f64 for numeric kinds; `None` for bools and strings.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            FieldValue::Float(v) => Some(v),
            FieldValue::Int(v) => Some(v as f64),
            FieldValue::UInt(v) => Some(v as f64),
            FieldValue::Bool(_) | FieldValue::Str(_) => None,
        }
    }
}

/// One parsed line. Tags and fields were validated while parsing and are iterated lazily
/// from the input; the first field is kept parsed (the common one-field case costs nothing).
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    pub measurement: Text<'a>,
    pub timestamp: Option<i64>,
    /// 1-based line number within the body.
    pub line: usize,
    tags: &'a str,
    /// The whole line; `spans` index into it.
    src: &'a str,
    /// Tag positions recorded while validating, so iterating tags does not scan again.
    /// `n_spans == SPANS_OVERFLOW` means "too many or too long: rescan `tags`".
    spans: [TagSpan; MAX_SPANS],
    n_spans: u8,
    first_field: (Text<'a>, FieldValue<'a>),
    more_fields: &'a str,
}

const MAX_SPANS: usize = 8;
const SPANS_OVERFLOW: u8 = u8::MAX;

/// Offsets of `key=value` within a line (value starts at `key_end + 1`).
#[derive(Debug, Clone, Copy, Default)]
struct TagSpan {
    key_start: u16,
    key_end: u16,
    value_end: u16,
    key_escaped: bool,
    value_escaped: bool,
}

impl<'a> Line<'a> {
    /// `(key, value)` of each tag in input order.
    pub fn tags(&self) -> Tags<'a, '_> {
        if self.n_spans == SPANS_OVERFLOW {
            return Tags {
                rest: self.tags,
                src: self.src,
                spans: &[],
            };
        }
        Tags {
            rest: "",
            src: self.src,
            spans: &self.spans[..self.n_spans as usize],
        }
    }

    /// `(key, value)` of each field in input order.
    pub fn fields(&self) -> Fields<'a> {
        Fields {
            first: Some(self.first_field),
            rest: self.more_fields,
        }
    }

    /// The value of the field named `key` (first occurrence).
    pub fn field(&self, key: &str) -> Option<FieldValue<'a>> {
        self.fields().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// Iterator over a line's tags.
pub struct Tags<'a, 'l> {
    rest: &'a str,
    src: &'a str,
    spans: &'l [TagSpan],
}

impl<'a> Iterator for Tags<'a, '_> {
    type Item = (Text<'a>, Text<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        if let Some((t, rest)) = self.spans.split_first() {
            self.spans = rest;
            let (k0, k1, v1) = (
                t.key_start as usize,
                t.key_end as usize,
                t.value_end as usize,
            );
            let key = Text {
                raw: self.src.get(k0..k1)?,
                escaped: t.key_escaped,
                kind: Escapes::Name,
            };
            let val = Text {
                raw: self.src.get(k1 + 1..v1)?,
                escaped: t.value_escaped,
                kind: Escapes::Name,
            };
            return Some((key, val));
        }
        let b = self.rest.as_bytes();
        if b.first() != Some(&b',') {
            return None;
        }
        // Validated at parse time, so the scans below cannot fail.
        let (kend, kesc) = scan::<true>(b, 1).ok()?;
        let (vend, vesc) = scan::<true>(b, kend + 1).ok()?;
        let key = Text {
            raw: &self.rest[1..kend],
            escaped: kesc,
            kind: Escapes::Name,
        };
        let val = Text {
            raw: &self.rest[kend + 1..vend],
            escaped: vesc,
            kind: Escapes::Name,
        };
        self.rest = &self.rest[vend..];
        Some((key, val))
    }
}

/// Iterator over a line's fields.
pub struct Fields<'a> {
    first: Option<(Text<'a>, FieldValue<'a>)>,
    rest: &'a str,
}

impl<'a> Iterator for Fields<'a> {
    type Item = (Text<'a>, FieldValue<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(f) = self.first.take() {
            return Some(f);
        }
        if self.rest.is_empty() {
            return None;
        }
        let (key, value, end) = parse_field(self.rest, 0).ok()?;
        // Skip the separating comma, if any; a space ends the section (never included).
        self.rest = self.rest.get(end + 1..).unwrap_or("");
        Some((key, value))
    }
}

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
fn scan<const EQ: bool>(b: &[u8], mut i: usize) -> Result<(usize, bool), (usize, ErrorKind)> {
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
fn parse_field(s: &str, i: usize) -> Result<(Text<'_>, FieldValue<'_>, usize), (usize, ErrorKind)> {
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

/// Parses one line (without its newline). `line` is the 1-based number used in errors.
#[inline]
pub fn parse_line(s: &str, line: usize) -> Result<Line<'_>, ParseError> {
    parse_inner(s, line).map_err(|(pos, kind)| ParseError {
        line,
        column: pos + 1,
        kind,
    })
}

fn parse_inner(s: &str, line: usize) -> Result<Line<'_>, (usize, ErrorKind)> {
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
                key_start: (i + 1) as u16,
                key_end: kend as u16,
                value_end: vend as u16,
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
        src: s,
        spans,
        n_spans,
        first_field,
        more_fields,
    })
}

/// Iterator over the lines of a body; see [`parse_lines`].
pub struct Lines<'a> {
    rest: &'a [u8],
    /// `rest` as text when the whole body is valid UTF-8: lines then need no validation.
    text: Option<&'a str>,
    line: usize,
}

/// Parses a body line by line: `Ok(Line)` or `Err(ParseError)` per non-blank, non-comment line.
pub fn parse_lines(body: &[u8]) -> Lines<'_> {
    // One validation pass over the body is cheaper than one per line; only a body with
    // invalid bytes falls back to per-line checks (so the error names the line).
    let text = std::str::from_utf8(body).ok();
    Lines {
        rest: body,
        text,
        line: 0,
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Result<Line<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.rest.is_empty() {
                return None;
            }
            let end = memchr::memchr(b'\n', self.rest);
            let (raw, rest) = match end {
                Some(p) => (&self.rest[..p], &self.rest[p + 1..]),
                None => (self.rest, &[][..]),
            };
            // Cutting valid text at '\n' (ASCII) keeps both halves valid.
            let raw_text = self.text.map(|t| match end {
                Some(p) => {
                    self.text = Some(&t[p + 1..]);
                    &t[..p]
                }
                None => {
                    self.text = Some("");
                    t
                }
            });
            self.rest = rest;
            self.line += 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let lead = raw
                .iter()
                .take_while(|c| **c == b' ' || **c == b'\t')
                .count();
            let body = &raw[lead..];
            if body.is_empty() || body[0] == b'#' {
                continue;
            }
            let line = self.line;
            let s = match raw_text {
                // Same bytes as `body`: strip the same ASCII prefix and suffix.
                Some(t) => &t[lead..lead + body.len()],
                None => match std::str::from_utf8(body) {
                    Ok(s) => s,
                    Err(e) => {
                        return Some(Err(ParseError {
                            line,
                            column: lead + e.valid_up_to() + 1,
                            kind: ErrorKind::InvalidUtf8,
                        }));
                    }
                },
            };
            return Some(parse_line(s, line).map_err(|mut e| {
                e.column += lead;
                e
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> Line<'_> {
        parse_line(s, 1).unwrap()
    }

    fn err(s: &str) -> ParseError {
        match parse_line(s, 1) {
            Ok(l) => panic!("{s:?} parsed: {l:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn full_line() {
        let l =
            one("cpu_load,cluster=alex,hostname=a903,type=hwthread,type-id=1 value=1.5 1700000000");
        assert_eq!(l.measurement, "cpu_load");
        let tags: Vec<(String, String)> = l
            .tags()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(tags[0], ("cluster".into(), "alex".into()));
        assert_eq!(tags[3], ("type-id".into(), "1".into()));
        assert_eq!(tags.len(), 4);
        assert_eq!(l.field("value"), Some(FieldValue::Float(1.5)));
        assert_eq!(l.timestamp, Some(1_700_000_000));
    }

    #[test]
    fn many_tags_fall_back_to_rescanning() {
        let tags: String = (0..12).map(|i| format!(",k{i}=v\\ {i}")).collect();
        let line = format!("m{tags} v=1");
        let l = one(&line);
        let got: Vec<String> = l.tags().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(got.len(), 12);
        assert_eq!(got[11], "k11=v 11");
        // Within the recorded spans the same answers come back.
        let l = one("m,a=1,b\\,=2 v=1");
        let got: Vec<String> = l.tags().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(got, vec!["a=1", "b,=2"]);
    }

    #[test]
    fn value_kinds() {
        let l = one(r#"m a=1,b=-3i,c=7u,d=t,e=FALSE,f="hi \"you\"",g=-1.5e3,h=+2 -5"#);
        let v: Vec<FieldValue> = l.fields().map(|(_, v)| v).collect();
        assert_eq!(v[0], FieldValue::Float(1.0));
        assert_eq!(v[1], FieldValue::Int(-3));
        assert_eq!(v[2], FieldValue::UInt(7));
        assert_eq!(v[3], FieldValue::Bool(true));
        assert_eq!(v[4], FieldValue::Bool(false));
        match v[5] {
            FieldValue::Str(t) => assert_eq!(t.as_str(), r#"hi "you""#),
            other => panic!("{other:?}"),
        }
        assert_eq!(v[6], FieldValue::Float(-1500.0));
        assert_eq!(v[7], FieldValue::Float(2.0));
        assert_eq!(v.len(), 8);
        assert_eq!(l.timestamp, Some(-5));
        assert_eq!(v[2].as_f64(), Some(7.0));
        assert_eq!(v[3].as_f64(), None);
    }

    #[test]
    fn escaping_per_spec() {
        // Measurement: comma and space escaped; '=' literal.
        let l = one(r"my\ meas\,ure=x,t\ k\=y=v\,1\ 2 f\=k=1");
        assert_eq!(l.measurement.as_str(), "my meas,ure=x");
        let (k, v) = l.tags().next().unwrap();
        assert_eq!(
            (k.as_str().as_ref(), v.as_str().as_ref()),
            ("t k=y", "v,1 2")
        );
        assert_eq!(l.fields().next().unwrap().0.as_str(), "f=k");
        // Backslash before another character is literal; double backslash is one.
        let l = one(r"m,p=C:\dir\\x v=1");
        assert_eq!(l.tags().next().unwrap().1.as_str(), r"C:\dir\x");
        // Strings may contain commas, spaces and '='.
        let l = one(r#"m s="a, b=c d" 10"#);
        assert_eq!(l.timestamp, Some(10));
        // Unicode passes through.
        assert_eq!(
            one("temp\\ °C,ort=Zürich v=1").measurement.as_str(),
            "temp °C"
        );
    }

    #[test]
    fn typed_errors_with_columns() {
        let cases: &[(&str, ErrorKind, usize)] = &[
            (",t=1 v=1", ErrorKind::MissingMeasurement, 1),
            ("m,=1 v=1", ErrorKind::MissingTagKey, 3),
            ("m,t v=1", ErrorKind::MissingTagValue, 4),
            ("m,t= v=1", ErrorKind::MissingTagValue, 5),
            ("m,t=a=b v=1", ErrorKind::UnescapedEquals, 6),
            ("m", ErrorKind::MissingFields, 2),
            ("m ", ErrorKind::MissingFields, 3),
            ("m,t=1", ErrorKind::MissingFields, 6),
            ("m =1", ErrorKind::MissingFieldKey, 3),
            ("m v", ErrorKind::MissingFieldValue, 4),
            ("m v=", ErrorKind::MissingFieldValue, 5),
            ("m v=1,", ErrorKind::MissingFieldKey, 7),
            ("m v=1.2.3", ErrorKind::InvalidFloat, 5),
            ("m v=nan", ErrorKind::InvalidFieldValue, 5),
            ("m v=1x", ErrorKind::InvalidFloat, 5),
            ("m v=1.5i", ErrorKind::InvalidInteger, 5),
            ("m v=99999999999999999999i", ErrorKind::IntegerOverflow, 5),
            ("m v=-1u", ErrorKind::InvalidUnsigned, 5),
            ("m v=\"abc", ErrorKind::UnterminatedString, 5),
            ("m v=\"abc\"x", ErrorKind::UnexpectedCharacter, 10),
            ("m v=1 12a", ErrorKind::InvalidTimestamp, 7),
            ("m v=1 1 2", ErrorKind::UnexpectedCharacter, 9),
            ("m v=1 99999999999999999999", ErrorKind::InvalidTimestamp, 7),
            ("m\\", ErrorKind::TrailingBackslash, 2),
        ];
        for (line, kind, col) in cases {
            let e = err(line);
            assert_eq!((e.kind, e.column), (*kind, *col), "{line:?}");
        }
    }

    #[test]
    fn lines_iterator_continues_after_errors() {
        let body = b"# comment\n\nm v=1 1\r\nbad\n  m,t=x v=2i\n\xff v=1\nm v=3";
        let r: Vec<_> = parse_lines(body).collect();
        assert_eq!(r.len(), 5);
        assert_eq!(r[0].as_ref().unwrap().line, 3);
        assert_eq!(r[0].as_ref().unwrap().timestamp, Some(1));
        let e = r[1].as_ref().unwrap_err();
        assert_eq!((e.line, e.kind), (4, ErrorKind::MissingFields));
        assert_eq!(r[2].as_ref().unwrap().field("v"), Some(FieldValue::Int(2)));
        let e = r[3].as_ref().unwrap_err();
        assert_eq!((e.line, e.column, e.kind), (6, 1, ErrorKind::InvalidUtf8));
        assert_eq!(r[4].as_ref().unwrap().timestamp, None);
        assert_eq!(e.to_string(), "line 6, column 1: invalid UTF-8");
    }

    /// xorshift64*: deterministic, no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const ALPHABET: &[u8] = b"abcXYZ019_-.,= \\\"#itu\te+\xc3\xa9\xff\n\r";

    fn random_line(r: &mut Rng, out: &mut Vec<u8>) -> (f64, i64) {
        let names = ["cpu", "mem used", "a,b", "x=y", "flops_any", "q\"z"];
        let esc = |s: &str, out: &mut Vec<u8>, set: &[u8]| {
            for c in s.bytes() {
                if set.contains(&c) {
                    out.push(b'\\');
                }
                out.push(c);
            }
        };
        esc(names[r.below(names.len())], out, b", ");
        for _ in 0..r.below(4) {
            out.push(b',');
            esc(names[r.below(names.len())], out, b",= ");
            out.push(b'=');
            esc(names[r.below(names.len())], out, b",= ");
        }
        out.push(b' ');
        let value = (r.next() % 100_000) as f64 / 8.0 - 5000.0;
        out.extend_from_slice(format!("value={value}").as_bytes());
        if r.below(2) == 0 {
            out.extend_from_slice(b",s=\"he said \\\"hi\\\", ok\",n=42i,u=7u,b=true");
        }
        let ts = (r.next() % 2_000_000_000) as i64;
        out.extend_from_slice(format!(" {ts}").as_bytes());
        (value, ts)
    }

    #[test]
    fn million_random_and_mutated_lines() {
        let mut r = Rng(0x1234_5678_9abc_def1);
        let (mut ok, mut rejected) = (0usize, 0usize);
        let mut line = Vec::new();
        for i in 0..1_000_000 {
            line.clear();
            let (value, ts) = random_line(&mut r, &mut line);
            let mutate = i % 4 != 0;
            if mutate {
                for _ in 0..1 + r.below(3) {
                    let pos = r.below(line.len() + 1);
                    let c = ALPHABET[r.below(ALPHABET.len())];
                    match r.below(3) {
                        0 if pos < line.len() => line[pos] = c,
                        1 if pos < line.len() => {
                            line.remove(pos);
                        }
                        _ => line.insert(pos, c),
                    }
                }
            }
            let mut n_lines = 0;
            for res in parse_lines(&line) {
                n_lines += 1;
                match res {
                    Ok(l) => {
                        ok += 1;
                        // Every accessor works on whatever was accepted.
                        let _ = l.measurement.as_str();
                        for (k, v) in l.tags() {
                            assert!(!k.raw().is_empty() && !v.raw().is_empty());
                        }
                        assert!(l.fields().count() >= 1);
                        if !mutate {
                            assert_eq!(l.field("value"), Some(FieldValue::Float(value)));
                            assert_eq!(l.timestamp, Some(ts));
                        }
                    }
                    Err(e) => {
                        rejected += 1;
                        assert!(
                            mutate,
                            "valid line rejected: {e} in {:?}",
                            String::from_utf8_lossy(&line)
                        );
                        assert!(e.column >= 1 && e.column <= line.len() + 1, "{e}");
                        assert!(e.line >= 1);
                    }
                }
            }
            if !mutate {
                assert_eq!(n_lines, 1);
            }
        }
        assert!(
            ok > 250_000 && rejected > 100_000,
            "ok {ok}, rejected {rejected}"
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut r = Rng(42);
        let mut buf = Vec::new();
        let mut errors = 0;
        for _ in 0..200_000 {
            buf.clear();
            for _ in 0..r.below(40) {
                buf.push(ALPHABET[r.below(ALPHABET.len())]);
            }
            errors += parse_lines(&buf).filter(|l| l.is_err()).count();
        }
        assert!(errors > 0);
    }
}
