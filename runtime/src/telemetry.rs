//! wasmon's own counters: a registry every part registers its counters in, rendered as
//! Prometheus text at `GET /metrics`. Counting is one relaxed atomic add.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// A monotonically increasing count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

struct Entry {
    name: &'static str,
    help: &'static str,
    labels: Vec<(&'static str, String)>,
    counter: Arc<Counter>,
}

/// All counters of the process.
#[derive(Default)]
pub struct Registry {
    entries: RwLock<Vec<Entry>>,
}

/// The process-wide registry.
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

impl Registry {
    /// The counter `name{labels}`, created on first use; the same labels give the same counter.
    pub fn counter(
        &self,
        name: &'static str,
        help: &'static str,
        labels: &[(&'static str, &str)],
    ) -> Arc<Counter> {
        let same = |e: &Entry| {
            e.name == name
                && e.labels.len() == labels.len()
                && e.labels
                    .iter()
                    .zip(labels)
                    .all(|(a, b)| a.0 == b.0 && a.1 == b.1)
        };
        if let Some(e) = crate::util::read(&self.entries).iter().find(|e| same(e)) {
            return e.counter.clone();
        }
        let mut entries = crate::util::write(&self.entries);
        if let Some(e) = entries.iter().find(|e| same(e)) {
            return e.counter.clone();
        }
        let counter = Arc::new(Counter::default());
        entries.push(Entry {
            name,
            help,
            labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            counter: counter.clone(),
        });
        counter
    }

    /// Every counter carrying the label `key="value"`, by name (e.g. one guest's counters).
    pub fn labelled(&self, key: &str, value: &str) -> Vec<(&'static str, u64)> {
        let entries = crate::util::read(&self.entries);
        entries
            .iter()
            .filter(|e| e.labels.iter().any(|(k, v)| *k == key && v == value))
            .map(|e| (e.name, e.counter.get()))
            .collect()
    }

    /// Prometheus text exposition (version 0.0.4) of every counter.
    pub fn render(&self, out: &mut String) {
        let entries = crate::util::read(&self.entries);
        let mut names: Vec<&'static str> = entries.iter().map(|e| e.name).collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let mut first = true;
            for e in entries.iter().filter(|e| e.name == name) {
                if first {
                    let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} counter", e.help);
                    first = false;
                }
                out.push_str(name);
                if !e.labels.is_empty() {
                    out.push('{');
                    for (i, (k, v)) in e.labels.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        let v = v
                            .replace('\\', "\\\\")
                            .replace('"', "\\\"")
                            .replace('\n', "\\n");
                        let _ = write!(out, "{k}=\"{v}\"");
                    }
                    out.push('}');
                }
                let _ = writeln!(out, " {}", e.counter.get());
            }
        }
    }
}
