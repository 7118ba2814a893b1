//! Parser for PCP's ASCII PMNS format (what `pmLoadASCIINameSpace` reads after `pmcpp`):
//!
//! ```text
//! root { foo }
//! foo {
//!     version 44:0:1
//!     count   44:*:*      /* root of a subtree the agent for domain 44 resolves */
//!     memory  44:0:2
//! }
//! ```
//!
//! A file is a list of subtree definitions `path { entry... }`, each entry a name with a PMID
//! (leaf or dynamic root) or without one (non-terminal, defined by a later `path.name { }`).
//! The pmcpp subset PMNS files use is handled here: `/* */` comments, `#define NAME VALUE`
//! / `#undef` with whole-word substitution, `#ifdef` / `#ifndef` / `#else` / `#endif`, and
//! `# N "file"` line markers. `#include` is refused: the caller passes every file it wants
//! merged (no file access here). Spaces around `:` in a PMID are allowed, as in PCP.
//!
//! Owns only the syntax; joining subtrees into a tree (and its checks) is `tree.rs`'s.

use super::types::{Child, Pmid};
use std::collections::HashMap;
use std::fmt;

/// One `name [pmid]` inside a subtree definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    /// `None` for a non-terminal (its own definition follows somewhere).
    pub pmid: Option<Pmid>,
    pub line: usize,
}

/// One `path { ... }` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subtree {
    /// `root` or a dotted path (`foo`, `foo.bar`).
    pub path: String,
    pub entries: Vec<Entry>,
    pub file: String,
    pub line: usize,
}

/// A PMNS syntax or consistency error, located like PCP's loader reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmnsError {
    pub file: String,
    /// 1-based; 0 when the error is not tied to a line (e.g. "no root").
    pub line: usize,
    pub reason: String,
}

impl PmnsError {
    /// `PM_ERR_PMNS`.
    pub fn code(&self) -> i32 {
        super::types::PM_ERR_PMNS
    }
}

impl fmt::Display for PmnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "[{}:{}] ", self.file, self.line)?;
        } else if !self.file.is_empty() {
            write!(f, "[{}] ", self.file)?;
        }
        write!(f, "Error Parsing ASCII PMNS: {}", self.reason)
    }
}

impl std::error::Error for PmnsError {}

#[derive(Debug, PartialEq)]
enum Token {
    LBrace,
    RBrace,
    Name(String),
    Path(String),
    Pmid(Pmid),
}

/// Parses one PMNS text. `file` only labels errors.
pub fn parse(file: &str, text: &str) -> Result<Vec<Subtree>, PmnsError> {
    let mut p = Parser {
        file: file.to_string(),
        ..Parser::default()
    };
    let mut in_comment = false;
    let mut line_no = 0usize;
    for raw in text.lines() {
        line_no += 1;
        let line = strip_comments(raw, &mut in_comment);
        let trimmed = line.trim_start();
        if let Some(directive) = trimmed.strip_prefix('#') {
            p.directive(directive, &mut line_no)?;
            continue;
        }
        if p.skipping() {
            continue;
        }
        p.line = line_no;
        for tok in tokenize(&line, &p.macros).map_err(|r| p.err(r))? {
            p.token(tok)?;
        }
    }
    p.line = line_no;
    if in_comment {
        return Err(p.err("unterminated /* comment".into()));
    }
    if !p.conds.is_empty() {
        return Err(p.err("missing #endif".into()));
    }
    if p.state != State::Start {
        return Err(p.err("unexpected end of input: missing }".into()));
    }
    Ok(p.subtrees)
}

#[derive(Default, PartialEq, Clone, Copy)]
enum State {
    /// Expect a subtree path.
    #[default]
    Start,
    /// Expect `{`.
    Open,
    /// Inside braces, expect a name or `}`.
    Body,
    /// After a name, expect its PMID, another name or `}`.
    AfterName,
}

#[derive(Default)]
struct Parser {
    file: String,
    line: usize,
    state: State,
    subtrees: Vec<Subtree>,
    macros: HashMap<String, String>,
    /// One entry per open `#if*`: whether its current branch is active.
    conds: Vec<bool>,
}

impl Parser {
    fn err(&self, reason: String) -> PmnsError {
        PmnsError {
            file: self.file.clone(),
            line: self.line,
            reason,
        }
    }

    fn skipping(&self) -> bool {
        self.conds.iter().any(|active| !active)
    }

    fn directive(&mut self, d: &str, line_no: &mut usize) -> Result<(), PmnsError> {
        self.line = *line_no;
        let d = d.trim();
        let (word, rest) = match d.find(char::is_whitespace) {
            Some(i) => (&d[..i], d[i..].trim()),
            None => (d, ""),
        };
        // `# 12 "file"`: pmcpp's line marker; the next line is line 12 of `file`.
        if !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit()) {
            let n: usize = word
                .parse()
                .map_err(|_| self.err("Illegal line number control number".into()))?;
            let name = rest.trim_matches('"');
            if !name.is_empty() {
                self.file = name.to_string();
            }
            *line_no = n.saturating_sub(1);
            return Ok(());
        }
        match word {
            "ifdef" | "ifndef" => {
                let defined = self.macros.contains_key(rest);
                self.conds.push(defined == (word == "ifdef"));
            }
            "else" => match self.conds.last_mut() {
                Some(c) => *c = !*c,
                None => return Err(self.err("#else without #ifdef".into())),
            },
            "endif" => {
                if self.conds.pop().is_none() {
                    return Err(self.err("#endif without #ifdef".into()));
                }
            }
            _ if self.skipping() => {}
            "define" => {
                let mut it = rest.split_whitespace();
                let name = it.next().unwrap_or("");
                if !is_macro_name(name) {
                    return Err(self.err(format!("#define: illegal macro name {name:?}")));
                }
                let value = it.next().unwrap_or("").to_string();
                if it.next().is_some() {
                    return Err(
                        self.err(format!("#define {name}: value may not contain white space"))
                    );
                }
                self.macros.insert(name.to_string(), value);
            }
            "undef" => {
                self.macros.remove(rest);
            }
            "include" => {
                return Err(self.err(format!(
                    "#include {rest} is not supported: pass each PMNS file to the loader instead"
                )));
            }
            _ => return Err(self.err(format!("unknown directive #{word}"))),
        }
        Ok(())
    }

    fn token(&mut self, tok: Token) -> Result<(), PmnsError> {
        match (self.state, tok) {
            (State::Start, Token::Name(path) | Token::Path(path)) => {
                self.subtrees.push(Subtree {
                    path,
                    entries: Vec::new(),
                    file: self.file.clone(),
                    line: self.line,
                });
                self.state = State::Open;
            }
            (State::Start, _) => return Err(self.err("Expected NAME or PATH".into())),
            (State::Open, Token::LBrace) => self.state = State::Body,
            (State::Open, _) => return Err(self.err("{ expected".into())),
            (State::Body | State::AfterName, Token::Name(name)) => {
                let sub = self.subtrees.last_mut().expect("a subtree is open in Body");
                if sub.entries.iter().any(|e| e.name == name) {
                    let reason =
                        format!("Duplicate name \"{name}\" in subtree for \"{}\"", sub.path);
                    return Err(self.err(reason));
                }
                sub.entries.push(Entry {
                    name,
                    pmid: None,
                    line: self.line,
                });
                self.state = State::AfterName;
            }
            (State::AfterName, Token::Pmid(pmid)) => {
                let sub = self
                    .subtrees
                    .last_mut()
                    .expect("a subtree is open in AfterName");
                sub.entries.last_mut().expect("a name precedes").pmid = Some(pmid);
                self.state = State::Body;
            }
            (State::Body | State::AfterName, Token::RBrace) => self.state = State::Start,
            (State::Body, _) => return Err(self.err("Expected NAME or }".into())),
            (State::AfterName, _) => return Err(self.err("Expected NAME, PMID or }".into())),
        }
        Ok(())
    }
}

/// Removes `/* ... */` (possibly spanning lines) from one line.
fn strip_comments(line: &str, in_comment: &mut bool) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    loop {
        if *in_comment {
            match rest.find("*/") {
                Some(i) => {
                    rest = &rest[i + 2..];
                    *in_comment = false;
                    // A comment separates tokens, as in C.
                    out.push(' ');
                }
                None => return out,
            }
        } else {
            match rest.find("/*") {
                Some(i) => {
                    out.push_str(&rest[..i]);
                    rest = &rest[i + 2..];
                    *in_comment = true;
                }
                None => {
                    out.push_str(rest);
                    return out;
                }
            }
        }
    }
}

fn is_macro_name(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Replaces every macro-name-shaped run in `word` that names a macro (pmcpp's rule: words
/// are separated by white space or by characters that cannot be in a macro name).
fn substitute(word: &str, macros: &HashMap<String, String>) -> String {
    if macros.is_empty() {
        return word.to_string();
    }
    let bytes = word.as_bytes();
    let mut out = String::with_capacity(word.len());
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let w = &word[start..i];
            out.push_str(macros.get(w).map_or(w, String::as_str));
        } else {
            // Copy one whole UTF-8 character.
            let ch = word[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn tokenize(line: &str, macros: &HashMap<String, String>) -> Result<Vec<Token>, String> {
    // PCP squeezes white space around ':' so `60 : 1 : 2` is one PMID token.
    let mut squeezed = String::with_capacity(line.len());
    let mut pending_space = false;
    for ch in line.chars() {
        if ch.is_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space && ch != ':' && !squeezed.ends_with(':') && !squeezed.is_empty() {
            squeezed.push(' ');
        }
        pending_space = false;
        squeezed.push(ch);
    }
    let mut toks = Vec::new();
    for word in squeezed.split(' ').filter(|w| !w.is_empty()) {
        // Braces need not be separated by white space.
        let mut rest = word;
        while !rest.is_empty() {
            let cut = rest.find(['{', '}']).unwrap_or(rest.len());
            if cut > 0 {
                toks.push(classify(&substitute(&rest[..cut], macros))?);
            }
            if cut < rest.len() {
                toks.push(if rest.as_bytes()[cut] == b'{' {
                    Token::LBrace
                } else {
                    Token::RBrace
                });
                rest = &rest[cut + 1..];
            } else {
                rest = "";
            }
        }
    }
    Ok(toks)
}

fn classify(word: &str) -> Result<Token, String> {
    if word.contains(':') {
        if word.split(':').count() != 3 {
            return Err(format!("Illegal PMID {word:?}"));
        }
        return word
            .parse::<Pmid>()
            .map(Token::Pmid)
            .map_err(|e| format!("Illegal PMID: {e}"));
    }
    let first = word.as_bytes()[0];
    if !first.is_ascii_alphabetic() {
        return Err(format!(
            "Illegal name {word:?}: a name starts with a letter"
        ));
    }
    let mut dotted = false;
    for comp in word.split('.') {
        if comp.is_empty() {
            return Err(format!("Illegal path {word:?}: empty component"));
        }
        if !comp.as_bytes()[0].is_ascii_alphabetic()
            || !comp.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            return Err(format!("Illegal name {word:?}"));
        }
        dotted |= comp.len() < word.len();
    }
    Ok(if dotted {
        Token::Path(word.to_string())
    } else {
        Token::Name(word.to_string())
    })
}

/// Children of `name` ("" for the root) in a flat list of full leaf names, each once, in
/// list order, with leaf status: what an agent whose names are a fixed table answers for
/// `pmGetChildrenStatus` (the native linux and proc agents).
pub fn children_of<'a>(leaves: impl IntoIterator<Item = &'a str>, name: &str) -> Vec<Child> {
    let mut out: Vec<Child> = Vec::new();
    for leaf in leaves {
        let rest = if name.is_empty() {
            Some(leaf)
        } else {
            leaf.strip_prefix(name).and_then(|r| r.strip_prefix('.'))
        };
        if let Some(rest) = rest {
            let (first, is_leaf) = rest
                .split_once('.')
                .map_or((rest, true), |(f, _)| (f, false));
            if !out.iter().any(|c| c.name == first) {
                out.push(Child {
                    name: first.to_string(),
                    leaf: is_leaf,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: &str =
        "root {\n    foo\n}\n\nfoo {\n\tversion\t44:0:1\n\tcount\t\t44:*:*\n\tmemory\t44:0:2\n}\n";

    #[test]
    fn parses_the_seed_fragment() {
        let subs = parse("seed", SEED).unwrap();
        assert_eq!(subs.len(), 2);
        assert_eq!(subs[0].path, "root");
        assert_eq!(
            subs[0].entries,
            vec![Entry {
                name: "foo".into(),
                pmid: None,
                line: 2
            }]
        );
        assert_eq!(subs[1].path, "foo");
        let e = &subs[1].entries;
        assert_eq!(
            e[0].pmid,
            Some(Pmid {
                domain: 44,
                cluster: 0,
                item: 1
            })
        );
        assert_eq!(e[1].pmid, Some(Pmid::dynamic_root(44)));
        assert_eq!(e[2].name, "memory");
        assert_eq!(e[2].line, 8);
    }

    #[test]
    fn comments_macros_conditionals_and_spacing() {
        let text = "/* header\n spanning lines */\n#define FOO 44\n#ifdef NOPE\nbogus { x 1:2 }\n#else\nroot { a FOO : 0 : 1 /* inline */ b FOO:*:* }\n#endif\nroot.c{d 2:0:0}\n";
        let subs = parse("m", text).unwrap();
        assert_eq!(subs.len(), 2);
        assert_eq!(
            subs[0].entries[0].pmid,
            Some(Pmid {
                domain: 44,
                cluster: 0,
                item: 1
            })
        );
        assert_eq!(subs[0].entries[1].pmid, Some(Pmid::dynamic_root(44)));
        assert_eq!(subs[0].line, 7);
        assert_eq!(subs[1].path, "root.c");
    }

    #[test]
    fn line_markers_relabel_errors() {
        let e = parse("x", "# 10 \"other\"\nroot {\n}\n}\n").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("other", 12));
        assert_eq!(
            e.to_string(),
            "[other:12] Error Parsing ASCII PMNS: Expected NAME or PATH"
        );
    }

    fn err(text: &str) -> PmnsError {
        parse("f", text).unwrap_err()
    }

    #[test]
    fn syntax_errors_name_file_line_and_reason() {
        let e = err("root {\n a 1:2:3\n a 1:2:4\n}\n");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (3, "Duplicate name \"a\" in subtree for \"root\"")
        );
        assert_eq!(err("root a").reason, "{ expected");
        assert_eq!(err("{").reason, "Expected NAME or PATH");
        assert_eq!(err("root { 1:2:3 }").reason, "Expected NAME or }");
        assert_eq!(err("root { a b.c }").reason, "Expected NAME, PMID or }");
        assert!(err("root { a 511:0:0 }").reason.contains("domain"));
        assert!(err("root { a 1:4096:0 }").reason.contains("cluster"));
        assert!(err("root { a 1:0:1024 }").reason.contains("item"));
        assert!(err("root { a 1:0 }").reason.contains("Illegal PMID"));
        assert!(err("root { a 1:*:0 }").reason.contains("Illegal PMID"));
        assert!(err("root { 9a }").reason.contains("Illegal name"));
        assert!(err("a..b { }").reason.contains("empty component"));
        let e = err("root {\n a 1:2:3\n");
        assert_eq!(
            (e.line, e.reason.as_str()),
            (2, "unexpected end of input: missing }")
        );
        assert!(err("/* open").reason.contains("unterminated"));
        assert!(err("#include <stdpmid>").reason.contains("#include"));
        assert!(err("#pragma x").reason.contains("unknown directive"));
        assert!(err("#ifdef A\n").reason.contains("#endif"));
        assert!(err("#endif\n").reason.contains("without"));
        assert_eq!(err("root {").code(), -12346);
    }
}
