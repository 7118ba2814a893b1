//! Test helpers for the linux agent's groups: captured or synthesized trees in a temporary
//! directory, and fetches by name. Test-only.

use super::LinuxAgent;
use crate::namespace::{Agent, Value};

/// A root holding `files` (path relative to the root, contents); directories are made.
pub fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (rel, text) in files {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// One metric's values, by instance name, as the agent answers them (typed).
pub fn fetch(a: &mut LinuxAgent, name: &str) -> Vec<(String, Value)> {
    let id = a
        .lookup_name(name)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut r = a.fetch(&[id]);
    r.pop().unwrap().1.unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// One metric's values as numbers.
pub fn fetch_f64(a: &mut LinuxAgent, name: &str) -> Vec<(String, f64)> {
    fetch(a, name)
        .into_iter()
        .map(|(n, v)| (n, v.as_f64().unwrap()))
        .collect()
}

/// A singular metric's one value as a number, `None` when it has none.
pub fn one(a: &mut LinuxAgent, name: &str) -> Option<f64> {
    let v = fetch_f64(a, name);
    assert!(v.len() <= 1, "{name}: {v:?}");
    v.first().map(|(_, x)| *x)
}

/// An agent reading a root that holds `files` (see [`tree`]); keep the directory alive
/// while the agent reads it.
pub fn agent(files: &[(&str, &str)]) -> (tempfile::TempDir, LinuxAgent) {
    let dir = tree(files);
    let a = LinuxAgent::with_root(dir.path());
    (dir, a)
}

/// Checks many metrics against a table, one metric a line, and lists every mismatch
/// before failing (one failing line does not hide the others):
/// - `name 12.5`: exactly one value, equal to the number (`_` separators allowed);
/// - `name -`: no value;
/// - `name "text"`: exactly one value, this text;
/// - `name sda=1 sdb=2`: exactly these instances, in this order, with these values (`sda="none"`
///   for a text without blanks);
/// - `name !AppVersion`: the fetch fails with this error.
///
/// Blank lines and `#` comment lines are skipped.
impl LinuxAgent {
    pub fn expect(&mut self, table: &str) {
        expect(self, table)
    }
}

fn expect(a: &mut LinuxAgent, table: &str) {
    let mut wrong = Vec::new();
    for line in table.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, want) = line.split_once(' ').unwrap_or((line, ""));
        let want = want.trim();
        let Ok(id) = a.lookup_name(name) else {
            wrong.push(format!("{name}: not a metric name"));
            continue;
        };
        let got = match a.fetch(&[id]).pop().map(|r| r.1) {
            Some(Ok(v)) => v,
            Some(Err(e)) if want.strip_prefix('!') == Some(&format!("{e:?}")) => continue,
            other => {
                wrong.push(format!("{name}: want {want}, got {other:?}"));
                continue;
            }
        };
        let ok = match want {
            "-" => got.is_empty(),
            _ if want.contains('=') && !want.starts_with('"') => {
                let insts: Vec<(&str, &str)> = want
                    .split_ascii_whitespace()
                    .map(|p| p.split_once('=').expect("instance=value"))
                    .collect();
                got.len() == insts.len()
                    && got
                        .iter()
                        .zip(&insts)
                        .all(|((gi, gv), (wi, wv))| gi == wi && same(gv, wv))
            }
            _ => matches!(&got[..], [(_, v)] if same(v, want)),
        };
        if !ok {
            wrong.push(format!("{name}: want {want}, got {got:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} mismatches:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// Whether `got` is the table's `want`: a `"text"` or a number.
fn same(got: &Value, want: &str) -> bool {
    match want.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
        Some(text) => matches!(got, Value::Text(t) if t == text),
        None => got.as_f64() == Some(number(want)),
    }
}

fn number(text: &str) -> f64 {
    text.replace('_', "")
        .parse()
        .unwrap_or_else(|_| panic!("{text:?} is not a number"))
}
