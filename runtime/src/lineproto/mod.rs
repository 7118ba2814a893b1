//! Zero-copy InfluxDB line protocol parser:
//! `measurement[,tag=value...] field=value[,field=value...] [timestamp]`, accepting and
//! refusing what influxdata/line-protocol v2's decoder (cc-metric-store's) does; the cases
//! taken from its tests and corpus are in `tests_conformance.rs`.
//!
//! Escapes as that decoder reads them: in the measurement `\,` and `\ `; in tag keys, tag
//! values and field keys `\,`, `\=` and `\ `; in string field values `\"`, `\\`, `\n`,
//! `\r` and `\t`; a backslash before anything else is itself (`\\` in a tag value stays two
//! characters). Names are returned as [`Text`], which borrows the input and unescapes only on
//! request; a control character (0x00-0x1f, 0x7f) in a name is an error. Field values: float
//! as Go's `ParseFloat` reads it (`1.5`, `-3e4`, `1_000`, `0x1p4`; `1e9999` overflows),
//! integer (`3i`), unsigned (`3u`), bool (`t`, `true`, `F`, ...) and string (`"..."`, which
//! may span lines). Blank lines and `#` comments are skipped (a comment holding a control
//! character, a lone carriage return included, is an error); only spaces may precede an
//! entry. [`parse_lines`] yields one `Result` per entry so a bad one does not stop the rest;
//! no input makes it panic.

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
    #[error("float out of range")]
    FloatOutOfRange,
    #[error("control character in a name")]
    ControlCharacter,
    #[error("control character in a comment line")]
    InvalidComment,
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
    #[inline]
    pub fn as_str(&self) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(self.raw);
        }
        self.unescape()
    }

    fn unescape(&self) -> Cow<'a, str> {
        // (escaped, meaning) pairs per section, as the reference decoder's escapers have them.
        let table: &[(char, char)] = match self.kind {
            Escapes::Measurement => &[(',', ','), (' ', ' ')],
            Escapes::Name => &[(',', ','), ('=', '='), (' ', ' ')],
            Escapes::Str => &[
                ('"', '"'),
                ('\\', '\\'),
                ('n', '\n'),
                ('r', '\r'),
                ('t', '\t'),
            ],
        };
        let mut out = String::with_capacity(self.raw.len());
        let mut chars = self.raw.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                let next = chars.clone().next();
                match table.iter().find(|(e, _)| Some(*e) == next) {
                    Some((_, meaning)) => {
                        out.push(*meaning);
                        chars.next();
                    }
                    None => out.push('\\'),
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
    /// Tag positions recorded while validating, so iterating tags does not scan again.
    /// `n_spans == SPANS_OVERFLOW` means "too many or too long: rescan `tags`".
    spans: [TagSpan; MAX_SPANS],
    n_spans: u8,
    first_field: (Text<'a>, FieldValue<'a>),
    more_fields: &'a str,
}

const MAX_SPANS: usize = 8;
const SPANS_OVERFLOW: u8 = u8::MAX;

/// Offsets of `key=value` within the tag section (value starts at `key_end + 1`). Relative
/// to the section, not the line, so a line repeating the previous line's tags reuses them.
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
                src: self.tags,
                spans: &[],
            };
        }
        Tags {
            rest: "",
            src: self.tags,
            spans: &self.spans[..self.n_spans as usize],
        }
    }

    /// `(key, value)` of each field in input order.
    /// The tag section exactly as in the input (`,k=v,k=v`, empty without tags): lines
    /// with equal tag sections have equal tags, which ingest uses to skip their resolution.
    pub fn tags_raw(&self) -> &'a str {
        self.tags
    }

    pub fn fields(&self) -> Fields<'a> {
        Fields {
            first: Some(self.first_field),
            rest: self.more_fields,
        }
    }

    /// The value of field `key` when the line has no other field, its last occurrence when it
    /// repeats (cc-metric-store's rules: any other field makes the line an error, and each
    /// `value` overwrites the one before); `Err` names the first other field.
    #[inline]
    pub fn sole_field(&self, key: &str) -> Result<FieldValue<'a>, Text<'a>> {
        if self.first_field.0 != key {
            return Err(self.first_field.0);
        }
        let mut v = self.first_field.1;
        if !self.more_fields.is_empty() {
            let more = Fields {
                first: None,
                rest: self.more_fields,
            };
            for (k, f) in more {
                if k != key {
                    return Err(k);
                }
                v = f;
            }
        }
        Ok(v)
    }

    /// The value of the field named `key` (first occurrence).
    #[inline]
    pub fn field(&self, key: &str) -> Option<FieldValue<'a>> {
        // The usual line has one field: compare it in place instead of copying it through
        // the iterator (its mixed-size fields make the copy stall on store forwarding).
        if self.first_field.0 == key {
            return Some(self.first_field.1);
        }
        self.fields()
            .skip(1)
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
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
    #[inline]
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
        self.rescan()
    }
}

impl<'a> Tags<'a, '_> {
    /// The next tag of a line with more tags than recorded spans: scan the text again.
    #[cold]
    fn rescan(&mut self) -> Option<(Text<'a>, Text<'a>)> {
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

/// Parses one line (without its newline). `line` is the 1-based number used in errors.
#[inline]
pub fn parse_line(s: &str, line: usize) -> Result<Line<'_>, ParseError> {
    if let Some(l) = fast::parse(s, line) {
        return Ok(l);
    }
    parse_slow(s, line)
}

/// The general parser alone (no fast path): every line and every error. Public so tests and
/// the fuzz target can check that the fast path agrees with it.
#[doc(hidden)]
pub fn parse_slow(s: &str, line: usize) -> Result<Line<'_>, ParseError> {
    parse_inner(s, line).map_err(|(pos, kind)| ParseError {
        line,
        column: pos + 1,
        kind,
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
///
/// ```
/// use wasmon::lineproto::{FieldValue, parse_lines};
///
/// let body = b"# a comment\ncpu,host=n1,cpu=0 user=0.5,idle=99.5 1700000000\nbad line\n";
/// let mut lines = parse_lines(body);
/// let cpu = lines.next().unwrap().unwrap();
/// assert_eq!(cpu.measurement.as_str(), "cpu");
/// assert_eq!((cpu.line, cpu.timestamp), (2, Some(1_700_000_000)));
/// let tags: Vec<String> = cpu.tags().map(|(k, v)| format!("{k}={v}")).collect();
/// assert_eq!(tags, ["host=n1", "cpu=0"]);
/// assert!(matches!(cpu.field("idle"), Some(FieldValue::Float(v)) if v == 99.5));
/// // A bad entry is an error naming its line; it does not stop the rest.
/// assert_eq!(lines.next().unwrap().unwrap_err().line, 3);
/// assert!(lines.next().is_none());
/// ```
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

impl<'a> Lines<'a> {
    /// The next non-blank, non-comment entry as text (with the number of the line it starts
    /// on and the count of leading spaces stripped), or the error that stops it from being
    /// one (invalid UTF-8, a control character in a comment). An entry is a line unless a
    /// quoted string field runs on across newlines, as the reference decoder reads it.
    #[inline]
    fn next_text(&mut self) -> Option<Result<(&'a str, usize, usize), ParseError>> {
        loop {
            if self.rest.is_empty() {
                return None;
            }
            let (end, quoted) = match fast::find_newline_or_quote(self.rest) {
                Some(p) if self.rest[p] == b'"' => (entry_end(self.rest), true),
                found => (found, false),
            };
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
            let line = self.line + 1;
            self.line += 1 + if quoted {
                raw.iter().filter(|&&c| c == b'\n').count()
            } else {
                0
            };
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            // Only spaces: the decoder refuses a tab before the measurement.
            let lead = raw.iter().take_while(|c| **c == b' ').count();
            let body = &raw[lead..];
            if body.is_empty() {
                continue;
            }
            if body[0] == b'#' {
                // A comment is printable to its end: a control character (a tab, a lone
                // carriage return) makes the decoder refuse the line.
                match body.iter().position(|&c| c < 0x20 || c == 0x7f) {
                    None => continue,
                    Some(p) => {
                        return Some(Err(ParseError {
                            line,
                            column: lead + p + 1,
                            kind: ErrorKind::InvalidComment,
                        }));
                    }
                }
            }
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
            return Some(Ok((s, line, lead)));
        }
    }
}

/// Where the entry at the start of `b` ends (its `\n`, `None` for the end of `b`) when a quote
/// comes before the first newline: a string field value runs to its closing quote across
/// newlines, as influxdata/line-protocol v2 reads it (an unclosed one takes the rest of the
/// body, as there). Walks the entry's structure only as far as it needs to find string values;
/// where the entry is malformed, it ends at the next newline and the parser names the error.
#[cold]
fn entry_end(b: &[u8]) -> Option<usize> {
    let nl = |from: usize| memchr::memchr(b'\n', b.get(from..)?).map(|p| from + p);
    // `\` before one of `escapes` takes both bytes; before anything else it is itself.
    let step = |i: usize, escapes: &[u8]| {
        if b[i] == b'\\' && b.get(i + 1).is_some_and(|c| escapes.contains(c)) {
            i + 2
        } else {
            i + 1
        }
    };
    let mut i = b.iter().take_while(|c| **c == b' ').count();
    if b.get(i) == Some(&b'#') {
        return nl(i);
    }
    // Measurement and tags: up to the first unescaped space.
    loop {
        match b.get(i)? {
            b'\n' => return Some(i),
            b' ' => break,
            _ => i = step(i, b" ,="),
        }
    }
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    loop {
        // A field key, up to '='.
        loop {
            match b.get(i)? {
                b'\n' => return Some(i),
                b'=' => break,
                b' ' | b',' => return nl(i),
                _ => i = step(i, b" ,="),
            }
        }
        i += 1;
        if b.get(i) == Some(&b'"') {
            i += 1;
            while *b.get(i)? != b'"' {
                i = step(i, b"\\\"nrt");
            }
            i += 1;
        } else {
            while !matches!(b.get(i)?, b'\n' | b',' | b' ') {
                i += 1;
            }
        }
        if b.get(i) != Some(&b',') {
            // The timestamp, the end, or an error: the rest of this line either way.
            return nl(i);
        }
        i += 1;
    }
}

fn shift_column(lead: usize) -> impl Fn(ParseError) -> ParseError {
    move |mut e| {
        e.column += lead;
        e
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Result<Line<'a>, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(match self.next_text()? {
            Ok((s, line, lead)) => parse_line(s, line).map_err(shift_column(lead)),
            Err(e) => Err(e),
        })
    }
}

/// Like [`parse_lines`], but hands each line to `f` by reference. The hot path of ingest: a
/// `Line` is a few hundred bytes, and not moving it through an iterator's `Option<Result<..>>`
/// saves a third of the parse time.
#[inline]
pub fn for_each_line<'a>(body: &'a [u8], mut f: impl FnMut(Result<&Line<'a>, ParseError>)) {
    let mut lines = parse_lines(body);
    // The tags of the last line parsed in full: most lines repeat them.
    let mut prev: Option<fast::PrevTags<'a>> = None;
    while let Some(t) = lines.next_text() {
        let (s, line, lead) = match t {
            Ok(t) => t,
            Err(e) => {
                f(Err(e));
                continue;
            }
        };
        if let Some(p) = &prev
            && let Some(ref l) = fast::parse_same_tags(s, line, p)
        {
            f(Ok(l));
            continue;
        }
        match fast::parse(s, line) {
            Some(ref l) => {
                prev = fast::PrevTags::of(l);
                f(Ok(l))
            }
            None => match parse_slow(s, line) {
                Ok(ref l) => {
                    prev = fast::PrevTags::of(l);
                    f(Ok(l))
                }
                Err(e) => f(Err(shift_column(lead)(e))),
            },
        }
    }
}

pub(crate) mod fast;

mod float;

mod general;
use general::{parse_field, parse_inner, scan};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_conformance;
