//! The guest author's kit behind `wasmon guest new|build|check`: scaffolds a guest in Rust,
//! Python, JavaScript or C, builds it with that language's toolchain (installing the pip and
//! npm toolchains into a cache directory when missing) and embeds the non-Rust SDKs and the WIT
//! so that a guest directory needs nothing but this binary. It drives external tools and writes
//! files; it may not touch the daemon, the pipelines or the store, and knows the host only
//! through `host::check`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

mod build;
pub mod bundled;
mod scaffold;
mod scaffold_agent;
mod scaffold_exporter;
mod toolchain;

pub use build::{Built, build};
pub use scaffold::new;
pub use toolchain::toolchains_dir;

/// The manifest every guest directory has.
pub const MANIFEST: &str = "wasmon-guest.toml";

/// The WIT package, as the SDKs and builds see it.
pub(crate) const WIT: &[(&str, &str)] = &[
    ("types.wit", include_str!("../../../wit/types.wit")),
    ("worlds.wit", include_str!("../../../wit/worlds.wit")),
];

/// A guest's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Rust,
    Python,
    Js,
    C,
}

impl Lang {
    pub fn name(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::Js => "js",
            Lang::C => "c",
        }
    }

    /// This language's entry of `[rust, python, js, c]` (a scaffold's source, say).
    pub fn pick<T>(self, [rust, python, js, c]: [T; 4]) -> T {
        match self {
            Lang::Rust => rust,
            Lang::Python => python,
            Lang::Js => js,
            Lang::C => c,
        }
    }
}

/// The world a guest implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WorldName {
    Transformer,
    Agent,
    Exporter,
}

impl WorldName {
    pub fn name(self) -> &'static str {
        match self {
            WorldName::Transformer => "transformer",
            WorldName::Agent => "agent",
            WorldName::Exporter => "exporter",
        }
    }
}

/// `wasmon-guest.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The component's name: the build writes `NAME.wasm`, which deploys as guest `NAME`.
    pub name: String,
    pub lang: Lang,
    /// `transformer` (default), `agent` or `exporter`.
    #[serde(default = "default_world")]
    pub world: WorldName,
    /// The entry point: the Python module (default `app`), the JS file (default `app.js`).
    /// Rust and C build every source of the directory.
    #[serde(default)]
    pub main: Option<String>,
}

fn default_world() -> WorldName {
    WorldName::Transformer
}

impl Manifest {
    pub fn load(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {} (a guest directory has one; `wasmon guest new` writes it)",
                path.display()
            )
        })?;
        let m: Manifest =
            toml::from_str(&text).with_context(|| format!("{} is invalid", path.display()))?;
        valid_name(&m.name).with_context(|| format!("{}: `name`", path.display()))?;
        Ok(m)
    }
}

/// A guest name: what `guests-dir` and config refer to, and a crate/module name.
pub(crate) fn valid_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        bail!(
            "{name:?} is not a guest name: lowercase letters, digits and `_`, starting with a letter, at most 64"
        );
    }
    Ok(())
}

/// Writes the WIT package into `dir`.
pub(crate) fn write_wit(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, text) in WIT {
        write_if_changed(&dir.join(name), text.as_bytes())?;
    }
    Ok(())
}

/// Writes a file unless it already holds `bytes` (keeps mtimes, so cargo rebuilds nothing).
pub(crate) fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// Where `wasmon guest build DIR` puts `NAME.wasm` unless told otherwise.
pub fn default_out_dir(dir: &Path) -> PathBuf {
    dir.join("target").join("wasmon")
}
