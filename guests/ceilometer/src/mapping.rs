//! Ceilometer's `map_from` / `map_to` renaming: Python's `re.sub(map_from[attr], map_to[attr],
//! value)`, with the Python replacement template (`\1`, `\g<1>`, `\g<name>`) compiled once
//! into literal pieces and group numbers.
//!
//! Meter names and units repeat endlessly, so results are memoised per input string: after the
//! first sample of a meter, renaming is a hash lookup and a reference-count bump.

use regex_lite::Regex;
use wasmon_guest::Str;

use crate::hash::FxHashMap;

#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Lit(String),
    Group(usize),
}

/// One compiled `re.sub`.
#[derive(Debug)]
pub(crate) struct Mapper {
    regex: Regex,
    template: Vec<Piece>,
    /// Input → output (`None`: the substitution came out empty).
    memo: FxHashMap<Str, Option<Str>>,
}

/// Beyond this many distinct inputs the memo is dropped and rebuilt, bounding memory when
/// names are unbounded (per-device meters, say).
const MEMO_LIMIT: usize = 4096;

impl Mapper {
    /// Compiles `pattern` (a Python regex; the common syntax is shared with `regex-lite`) and
    /// the Python replacement `template`. Errors are plain text for the caller to prefix.
    pub(crate) fn new(pattern: &str, template: &str) -> Result<Mapper, String> {
        let regex = Regex::new(pattern).map_err(|e| format!("is not a valid regex: {e}"))?;
        let template = compile_template(template, &regex)?;
        Ok(Mapper {
            regex,
            template,
            memo: FxHashMap::default(),
        })
    }

    /// The substituted value, or `None` when it is empty (Ceilometer then falls back to the
    /// target's fixed value or the input). An input the pattern doesn't match comes back
    /// unchanged, as from `re.sub`.
    pub(crate) fn map(&mut self, input: &Str) -> Option<Str> {
        if let Some(hit) = self.memo.get(&**input) {
            return hit.clone();
        }
        if self.memo.len() >= MEMO_LIMIT {
            self.memo.clear();
        }
        let out = self.substitute(input);
        self.memo.insert(input.clone(), out.clone());
        out
    }

    fn substitute(&self, input: &Str) -> Option<Str> {
        let mut out = String::new();
        let mut last = 0;
        let mut matched = false;
        for caps in self.regex.captures_iter(input) {
            matched = true;
            let whole = caps.get(0).expect("group 0 always matches");
            out.push_str(&input[last..whole.start()]);
            for piece in &self.template {
                match piece {
                    Piece::Lit(s) => out.push_str(s),
                    // A group that took no part in the match is empty, as in Python 3.5+.
                    Piece::Group(g) => out.push_str(caps.get(*g).map_or("", |m| m.as_str())),
                }
            }
            last = whole.end();
        }
        if !matched {
            return (!input.is_empty()).then(|| input.clone());
        }
        out.push_str(&input[last..]);
        (!out.is_empty()).then(|| out.into())
    }
}

/// Translates Python's `re.sub` template syntax. References to groups the pattern lacks are
/// rejected here (Python raises at substitution time, which Ceilometer swallows).
fn compile_template(template: &str, regex: &Regex) -> Result<Vec<Piece>, String> {
    let groups = regex.captures_len();
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let mut chars = template.char_indices().peekable();
    let group = |g: usize| {
        if g < groups {
            Ok(Piece::Group(g))
        } else {
            Err(format!(
                "refers to group {g}, but the pattern has {} group(s)",
                groups - 1
            ))
        }
    };
    while let Some((i, c)) = chars.next() {
        if c != '\\' {
            lit.push(c);
            continue;
        }
        let Some((_, e)) = chars.next() else {
            return Err(format!("ends with a lone backslash at character {i}"));
        };
        let piece = match e {
            '1'..='9' => {
                let mut g = e.to_digit(10).unwrap() as usize;
                if let Some(&(_, d)) = chars.peek()
                    && d.is_ascii_digit()
                {
                    chars.next();
                    g = g * 10 + d.to_digit(10).unwrap() as usize;
                }
                group(g)?
            }
            'g' => {
                let rest = &template[i + 2..];
                let close = rest
                    .strip_prefix('<')
                    .and_then(|r| r.find('>'))
                    .ok_or_else(|| format!("has a malformed \\g<...> at character {i}"))?;
                let name = &rest[1..close + 1];
                for _ in 0..name.chars().count() + 2 {
                    chars.next();
                }
                match name.parse::<usize>() {
                    Ok(g) => group(g)?,
                    Err(_) => regex
                        .capture_names()
                        .position(|n| n == Some(name))
                        .map(Piece::Group)
                        .ok_or_else(|| format!("refers to unknown group name {name:?}"))?,
                }
            }
            'n' => Piece::Lit("\n".into()),
            't' => Piece::Lit("\t".into()),
            'r' => Piece::Lit("\r".into()),
            'f' => Piece::Lit("\x0c".into()),
            'v' => Piece::Lit("\x0b".into()),
            'a' => Piece::Lit("\x07".into()),
            'b' => Piece::Lit("\x08".into()),
            '\\' => Piece::Lit("\\".into()),
            e if e.is_ascii_alphabetic() || e == '0' => {
                return Err(format!("has an unsupported escape \\{e} at character {i}"));
            }
            // Python keeps other escaped characters with their backslash.
            e => Piece::Lit(format!("\\{e}")),
        };
        match piece {
            Piece::Lit(s) => lit.push_str(&s),
            g => {
                if !lit.is_empty() {
                    pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                pieces.push(g);
            }
        }
    }
    if !lit.is_empty() {
        pieces.push(Piece::Lit(lit));
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pattern: &str, template: &str, input: &str) -> Option<String> {
        let mut m = Mapper::new(pattern, template).unwrap();
        let first = m.map(&input.into()).map(|s| s.to_string());
        // The memoised answer is the same.
        assert_eq!(m.map(&input.into()).map(|s| s.to_string()), first);
        first
    }

    #[test]
    fn python_templates() {
        let p = r"disk\.(read|write)\.(bytes|requests)";
        assert_eq!(
            map(p, r"disk.\1.\2.rate", "disk.read.bytes").unwrap(),
            "disk.read.bytes.rate"
        );
        assert_eq!(
            map(p, r"disk.\g<1>.kb", "disk.write.bytes").unwrap(),
            "disk.write.kb"
        );
        assert_eq!(
            map(r"(?P<u>B|request)", r"\g<u>/s", "request").unwrap(),
            "request/s"
        );
        // No match: unchanged, like re.sub.
        assert_eq!(map(p, r"\1", "cpu").unwrap(), "cpu");
        // Every match is replaced.
        assert_eq!(map("a", "b", "banana").unwrap(), "bbnbnb");
        // An empty result lets the caller fall back.
        assert_eq!(map(".*", "", "cpu"), None);
        assert_eq!(map("(x)?y", r"[\1]", "y").unwrap(), "[]");
        assert_eq!(map("a", r"\\\.", "a").unwrap(), r"\\.");
    }

    #[test]
    fn bad_templates_are_rejected() {
        assert!(Mapper::new("(a)", r"\2").unwrap_err().contains("group 2"));
        assert!(
            Mapper::new("(a)", r"\g<nope>")
                .unwrap_err()
                .contains("nope")
        );
        assert!(Mapper::new("(a)", r"\q").unwrap_err().contains("escape"));
        assert!(Mapper::new("(a", "x").unwrap_err().contains("regex"));
    }
}
