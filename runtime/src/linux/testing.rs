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
