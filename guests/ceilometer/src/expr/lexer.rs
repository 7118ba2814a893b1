//! Splits an expression into tokens, each with its byte position (turned into a character
//! offset only when an error is reported).

use super::ParseError;

#[derive(Clone, Debug, PartialEq)]
pub(super) enum Tok {
    Num(f64),
    Str(String),
    Ident(String),
    /// `$(name)`: Ceilometer's meter reference, name made of word characters, `.` and `-`.
    Meter(String),
    /// Operators and punctuation.
    Op(&'static str),
    End,
}

impl Tok {
    /// How the token reads in an error message.
    pub(super) fn describe(&self) -> String {
        match self {
            Tok::Num(x) => format!("number {x}"),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Ident(s) => format!("'{s}'"),
            Tok::Meter(s) => format!("$({s})"),
            Tok::Op(s) => format!("'{s}'"),
            Tok::End => "the end of the expression".to_string(),
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Token {
    pub tok: Tok,
    /// Byte offset in the source.
    pub pos: usize,
}

/// Longest first, so that `**` wins over `*`.
const OPS: [&str; 19] = [
    "**", "//", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "(", ")", "[", "]", ",",
    ".",
];

pub(super) fn error(src: &str, pos: usize, expected: &str, found: String) -> ParseError {
    ParseError {
        offset: src[..pos].chars().count(),
        expected: expected.to_string(),
        found,
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Ceilometer's meter-name pattern is `[\w.-]+`.
fn is_meter_char(c: char) -> bool {
    is_ident_char(c) || c == '.' || c == '-'
}

fn char_at(src: &str, pos: usize) -> Option<char> {
    src[pos..].chars().next()
}

fn describe_char(src: &str, pos: usize) -> String {
    match char_at(src, pos) {
        Some(c) => format!("{c:?}"),
        None => "the end of the expression".to_string(),
    }
}

pub(super) fn lex(src: &str) -> Result<Vec<Token>, ParseError> {
    let mut toks = Vec::new();
    let mut pos = 0;
    while let Some(c) = char_at(src, pos) {
        if c.is_whitespace() {
            pos += c.len_utf8();
            continue;
        }
        let start = pos;
        let rest = &src[pos..];
        let next_is_digit = rest[c.len_utf8()..]
            .chars()
            .next()
            .is_some_and(|d| d.is_ascii_digit());
        let tok = if c.is_ascii_digit() || (c == '.' && next_is_digit) {
            let (x, len) = number(src, pos)?;
            pos += len;
            Tok::Num(x)
        } else if c == '\'' || c == '"' {
            let (s, len) = string(src, pos)?;
            pos += len;
            Tok::Str(s)
        } else if is_ident_start(c) {
            let len = rest
                .find(|ch: char| !is_ident_char(ch))
                .unwrap_or(rest.len());
            pos += len;
            Tok::Ident(rest[..len].to_string())
        } else if c == '$' {
            if !rest.starts_with("$(") {
                return Err(error(
                    src,
                    pos + 1,
                    "'(' after '$'",
                    describe_char(src, pos + 1),
                ));
            }
            let name_start = pos + 2;
            let after = &src[name_start..];
            let len = after
                .find(|ch: char| !is_meter_char(ch))
                .unwrap_or(after.len());
            if len == 0 {
                return Err(error(
                    src,
                    name_start,
                    "a meter name (letters, digits, '_', '.', '-')",
                    describe_char(src, name_start),
                ));
            }
            if !after[len..].starts_with(')') {
                return Err(error(
                    src,
                    name_start + len,
                    "')' closing the meter name",
                    describe_char(src, name_start + len),
                ));
            }
            pos = name_start + len + 1;
            Tok::Meter(after[..len].to_string())
        } else if let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) {
            pos += op.len();
            Tok::Op(op)
        } else {
            let expected = match c {
                '=' => "an operator ('==' compares; there is no assignment)",
                '!' => "an operator ('!=' compares; negation is 'not')",
                '&' | '|' => "an operator ('and' / 'or')",
                _ => "an operand or an operator",
            };
            return Err(error(src, pos, expected, format!("{c:?}")));
        };
        toks.push(Token { tok, pos: start });
    }
    toks.push(Token {
        tok: Tok::End,
        pos: src.len(),
    });
    Ok(toks)
}

/// A Python numeric literal: decimal with optional fraction, exponent and `_` separators, or
/// `0x` / `0o` / `0b` integers. Returns the value and the byte length.
fn number(src: &str, start: usize) -> Result<(f64, usize), ParseError> {
    let bytes = src.as_bytes();
    let mut i = start;
    let radix = match bytes.get(start + 1).map(u8::to_ascii_lowercase) {
        Some(b'x') if bytes[start] == b'0' => 16,
        Some(b'o') if bytes[start] == b'0' => 8,
        Some(b'b') if bytes[start] == b'0' => 2,
        _ => 10,
    };
    let value;
    if radix != 10 {
        i += 2;
        let digits_start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        let digits: String = src[digits_start..i].chars().filter(|&c| c != '_').collect();
        value = u64::from_str_radix(&digits, radix)
            .map(|v| v as f64)
            .map_err(|_| {
                error(
                    src,
                    start,
                    "a valid integer literal",
                    format!("{:?}", &src[start..i]),
                )
            })?;
    } else {
        let digits = |i: &mut usize| {
            while *i < bytes.len() && (bytes[*i].is_ascii_digit() || bytes[*i] == b'_') {
                *i += 1;
            }
        };
        digits(&mut i);
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(bytes.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if bytes.get(j).is_some_and(u8::is_ascii_digit) {
                i = j;
                digits(&mut i);
            } else {
                return Err(error(
                    src,
                    j,
                    "digits of the exponent",
                    describe_char(src, j),
                ));
            }
        }
        let text = &src[start..i];
        // Python allows `_` only between digits.
        let b = text.as_bytes();
        let bad_underscore = b.iter().enumerate().any(|(k, &c)| {
            c == b'_'
                && !(k > 0
                    && b[k - 1].is_ascii_digit()
                    && b.get(k + 1).is_some_and(u8::is_ascii_digit))
        });
        if bad_underscore {
            return Err(error(
                src,
                start,
                "a valid number literal",
                format!("{text:?}"),
            ));
        }
        let cleaned: String = text.chars().filter(|&c| c != '_').collect();
        value = cleaned
            .parse::<f64>()
            .map_err(|_| error(src, start, "a valid number literal", format!("{text:?}")))?;
    }
    // `3j`, `1x`, `2abc`: Python rejects these too (or makes them complex).
    if let Some(c) = char_at(src, i)
        && is_ident_char(c)
    {
        return Err(error(
            src,
            i,
            "an operator after the number",
            format!("{c:?}"),
        ));
    }
    Ok((value, i - start))
}

/// A single- or double-quoted string with the common backslash escapes.
fn string(src: &str, start: usize) -> Result<(String, usize), ParseError> {
    let quote = src.as_bytes()[start] as char;
    let mut out = String::new();
    let mut chars = src[start + 1..].char_indices();
    while let Some((k, c)) = chars.next() {
        match c {
            c if c == quote => return Ok((out, k + 2)),
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, '0')) => out.push('\0'),
                Some((_, e @ ('\\' | '\'' | '"'))) => out.push(e),
                // Python keeps unknown escapes verbatim.
                Some((_, e)) => {
                    out.push('\\');
                    out.push(e);
                }
                None => break,
            },
            c => out.push(c),
        }
    }
    Err(error(
        src,
        src.len(),
        &format!(
            "the closing {quote} of the string opened at character {}",
            src[..start].chars().count()
        ),
        "the end of the expression".to_string(),
    ))
}
