//! `wasmon guest check`: what a component file is (which world, what it imports and exports)
//! and whether this runtime accepts it, with a message naming what is wrong. It reads the
//! component's WIT without compiling it, then links a compiled copy against the world as
//! loading does; it changes nothing in the engine or the linkers.
//!
//! Import policy: a component whose imports the linker cannot satisfy (a WASI interface the
//! worlds do not grant, such as `wasi:http`, or an unknown package) is *refused* at load time,
//! naming the import. Linking such imports as traps was the alternative; it was not chosen
//! because the guest would then fail at its first use of the import, mid-pipeline, instead of
//! at deploy time, and because the toolchain that adds `wasi:http` unasked (componentize-js)
//! can leave it out (`-d http -d fetch-event`, which `wasmon guest build` passes).

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::{Context, Result};
use wit_parser::decoding::{DecodedWasm, decode};
use wit_parser::{IndexMap, Resolve, WorldItem, WorldKey};

use super::agent::AgentWorld;
use super::engine::Runtime;
use super::exporter::ExporterWorld;
use super::guest::World;
use super::transformer::TransformerWorld;

/// The WIT package every world of this runtime belongs to.
pub const PACKAGE: &str = "wasmon:collector";
/// Its version: a component built against another one is refused.
pub const VERSION: &str = "0.1.0";

/// WASI interface packages the linker provides (wasmtime-wasi's p2 set); what a guest may use
/// of them is decided by its grants (files, network), not by linking.
const PROVIDED_WASI: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:io/",
    "wasi:random/",
    "wasi:sockets/",
];

/// Which world a component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorldKind {
    Transformer,
    Agent,
    Exporter,
}

impl WorldKind {
    pub fn name(self) -> &'static str {
        match self {
            WorldKind::Transformer => "transformer",
            WorldKind::Agent => "agent",
            WorldKind::Exporter => "exporter",
        }
    }

    fn exports(self) -> &'static [&'static str] {
        match self {
            WorldKind::Transformer => &["transform"],
            WorldKind::Agent => &["namespace", "metrics"],
            WorldKind::Exporter => &["encode"],
        }
    }

    fn imports(self) -> &'static [&'static str] {
        match self {
            WorldKind::Transformer => &["types", "host"],
            WorldKind::Agent => &["types", "host", "mapped", "files"],
            WorldKind::Exporter => &["types", "host"],
        }
    }
}

/// What `guest check` found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The world the exports match, if any.
    pub world: Option<WorldKind>,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    /// Why the runtime refuses the component (empty: accepted).
    pub problems: Vec<String>,
    /// An agent of the `legacy-agent` world (it exports `source`, not `metrics`): loaded, its
    /// values carrying their instance names as before.
    pub legacy_agent: bool,
    /// Size of the component in bytes.
    pub size: usize,
}

impl Report {
    pub fn accepted(&self) -> bool {
        self.problems.is_empty()
    }

    /// The report as `wasmon guest check` prints it.
    pub fn render(&self, what: &str) -> String {
        let mut s = String::new();
        let world = match self.world {
            Some(_) if self.legacy_agent => format!("{PACKAGE}/legacy-agent@{VERSION}"),
            Some(w) => format!("{PACKAGE}/{}@{VERSION}", w.name()),
            None => "none of this runtime's worlds".into(),
        };
        let _ = writeln!(s, "{what}: {} bytes, implements {world}", self.size);
        if self.legacy_agent {
            let _ = writeln!(
                s,
                "note: an agent built before the {PACKAGE}/metrics@{VERSION} export: it exports {PACKAGE}/source@{VERSION}, whose values each carry their instance name; it is loaded and answers as before, and rebuilding it with this wasmon's SDK (`wasmon guest build`) sends each instance name once per fetch"
            );
        }
        let _ = writeln!(s, "imports:");
        for i in &self.imports {
            let _ = writeln!(s, "  {i}");
        }
        let _ = writeln!(s, "exports:");
        for e in &self.exports {
            let _ = writeln!(s, "  {e}");
        }
        if self.accepted() {
            let _ = writeln!(s, "accepted: this runtime loads it");
        } else {
            let _ = writeln!(s, "refused:");
            for p in &self.problems {
                let _ = writeln!(s, "  - {p}");
            }
        }
        s
    }
}

/// Splits `ns:pkg/iface@ver` into (`ns:pkg`, `iface`, `ver`).
fn split(name: &str) -> Option<(&str, &str, &str)> {
    let (pkg, rest) = name.split_once('/')?;
    let (iface, ver) = rest.split_once('@').unwrap_or((rest, ""));
    Some((pkg, iface, ver))
}

fn names(resolve: &Resolve, items: &IndexMap<WorldKey, WorldItem>) -> Vec<String> {
    items
        .iter()
        .map(|(key, item)| match item {
            WorldItem::Interface { .. } => resolve.name_world_key(key),
            WorldItem::Function(f) => format!("function {}", f.name),
            WorldItem::Type { .. } => format!("type {}", resolve.name_world_key(key)),
        })
        .collect()
}

/// Whether the component's `types` interface of this package and version has a type `name`.
fn has_type(resolve: &Resolve, name: &str) -> bool {
    resolve.interfaces.iter().any(|(_, i)| {
        i.name.as_deref() == Some("types")
            && i.package.is_some_and(|p| {
                let p = &resolve.packages[p].name;
                format!("{}:{}", p.namespace, p.name) == PACKAGE
                    && p.version.as_ref().is_some_and(|v| v.to_string() == VERSION)
            })
            && i.types.contains_key(name)
    })
}

/// Reads a component's WIT (no compilation) and says what is wrong with it for this runtime.
pub fn inspect(bytes: &[u8]) -> Result<Report> {
    if !bytes.starts_with(b"\0asm") {
        anyhow::bail!("not a WebAssembly file (no `\\0asm` header)");
    }
    let decoded = decode(bytes).context("cannot read the component's WIT")?;
    let DecodedWasm::Component(resolve, world_id) = decoded else {
        anyhow::bail!("a WIT package, not a component");
    };
    let world = &resolve.worlds[world_id];
    let imports = names(&resolve, &world.imports);
    let exports = names(&resolve, &world.exports);
    let mut problems = Vec::new();

    // The world: by the interfaces exported, of this package and version.
    let ours = |list: &[String], iface: &str| {
        list.iter()
            .any(|n| split(n).is_some_and(|(p, i, v)| p == PACKAGE && i == iface && v == VERSION))
    };
    let kind = [
        WorldKind::Agent,
        WorldKind::Transformer,
        WorldKind::Exporter,
    ]
    .into_iter()
    .find(|w| w.exports().iter().all(|e| ours(&exports, e)));
    // The agent world before `metrics`: `source` beside `namespace`.
    let legacy_agent = kind.is_none() && ours(&exports, "namespace") && ours(&exports, "source");
    let kind = kind.or(legacy_agent.then_some(WorldKind::Agent));
    // `metrics` as it was before a metric's values crossed column-wise (2026-11-28): the
    // export's name is the same, its `fetch` answers `indexed-value` records.
    if kind == Some(WorldKind::Agent) && !legacy_agent && has_type(&resolve, "indexed-value") {
        problems.push(format!(
            "built against {PACKAGE}/metrics@{VERSION} as it was before a metric's values crossed column-wise (its fetch answers indexed-value records, which this runtime no longer reads): rebuild it with this wasmon's SDK (`wasmon guest build`)"
        ));
    }
    match kind {
        // Other exports are harmless (componentize-py adds one): nothing calls them.
        Some(_) => {}
        None => {
            let other_version: Vec<&String> = exports
                .iter()
                .filter(|n| split(n).is_some_and(|(p, _, v)| p == PACKAGE && v != VERSION))
                .collect();
            if !other_version.is_empty() {
                problems.push(format!(
                    "built against another version of {PACKAGE}: exports {}, this runtime implements {PACKAGE}@{VERSION}; rebuild it against this runtime's wit/",
                    other_version
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            } else if ours(&exports, "namespace")
                || ours(&exports, "metrics")
                || ours(&exports, "source")
            {
                let missing = if ours(&exports, "namespace") {
                    "metrics"
                } else {
                    "namespace"
                };
                problems.push(format!(
                    "missing export {PACKAGE}/{missing}@{VERSION}: an agent exports both namespace and metrics (or, built before metrics, namespace and source)"
                ));
            } else {
                problems.push(format!(
                    "missing export: a transformer exports {PACKAGE}/transform@{VERSION}, an agent {PACKAGE}/namespace@{VERSION} and {PACKAGE}/metrics@{VERSION}, an exporter {PACKAGE}/encode@{VERSION}; this component exports {}",
                    if exports.is_empty() { "nothing".to_string() } else { exports.join(", ") }
                ));
            }
        }
    }

    // Imports: this package's (of the right world and version), the WASI the linker has.
    for i in &imports {
        let Some((pkg, iface, ver)) = split(i) else {
            problems.push(format!(
                "imports {i}, a bare name no linker of this runtime provides"
            ));
            continue;
        };
        if pkg == PACKAGE {
            if ver != VERSION {
                problems.push(format!(
                    "imports {i}: another version of {PACKAGE} (this runtime has {VERSION}); rebuild it against this runtime's wit/"
                ));
            } else if let Some(w) = kind
                && !w.imports().contains(&iface)
            {
                problems.push(format!(
                    "imports {i}, which the {} world does not grant",
                    w.name()
                ));
            }
        } else if !PROVIDED_WASI.iter().any(|p| i.starts_with(p)) {
            let hint = if pkg == "wasi:http" {
                " (componentize-js adds it unless built with `-d http -d fetch-event`, as `wasmon guest build` does)"
            } else {
                ""
            };
            problems.push(format!(
                "imports {i}, which this runtime does not provide: guests get wasmon:collector's host interfaces and WASI cli, clocks, filesystem, io, random and sockets (used as their grants allow){hint}"
            ));
        }
    }
    Ok(Report {
        world: kind,
        imports,
        exports,
        problems,
        legacy_agent,
        size: bytes.len(),
    })
}

/// What [`inspect`] finds wrong with `bytes` (its first problem), to tell with a failed load:
/// the linker names a mismatched field (`expected record, found list`), not what to do.
pub fn why_refused(bytes: &[u8]) -> Option<String> {
    inspect(bytes).ok()?.problems.into_iter().next()
}

/// Compiles (through the runtime's cache) and links the component against its world, as
/// loading it would; the linker's refusal is the answer of last resort.
pub fn link(rt: &Arc<Runtime>, bytes: &[u8], world: WorldKind, what: &str) -> Result<()> {
    let compiled = rt.compile(bytes, what)?;
    let linked = match world {
        WorldKind::Transformer => TransformerWorld::pre(rt, &compiled.component).map(|_| ()),
        WorldKind::Agent => AgentWorld::pre(rt, &compiled.component).map(|_| ()),
        WorldKind::Exporter => ExporterWorld::pre(rt, &compiled.component).map(|_| ()),
    };
    linked
        .map_err(anyhow::Error::from)
        .with_context(|| format!("the {} world's linker refuses it", world.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resolve of a package `pkg` whose `types` interface defines `types`.
    fn resolve(pkg: &str, types: &str) -> Resolve {
        let mut resolve = Resolve::default();
        resolve
            .push_source(
                "test.wit",
                &format!("package {pkg}; interface types {{ {types} }}"),
            )
            .unwrap();
        resolve
    }

    #[test]
    fn the_metrics_before_columns_is_told_by_its_indexed_value_type() {
        let record = "record indexed-value { instance: u32, value: u64 }";
        assert!(has_type(
            &resolve("wasmon:collector@0.1.0", record),
            "indexed-value"
        ));
        let now = "record indexed-values { instances: list<u32>, values: list<u64> }";
        assert!(!has_type(
            &resolve("wasmon:collector@0.1.0", now),
            "indexed-value"
        ));
        // Another package's or version's type of that name is not ours.
        assert!(!has_type(
            &resolve("other:collector@0.1.0", record),
            "indexed-value"
        ));
        assert!(!has_type(
            &resolve("wasmon:collector@0.2.0", record),
            "indexed-value"
        ));
    }
}
