//! Bundled guests written in C and Python. Their sources (a few KB each) are embedded in the
//! binary and built by this kit on first use into a cache directory, so that `guest =
//! "nfsclient"` works from a fresh clone without making `cargo build` need clang or
//! componentize-py, and without 18 MB Python components in the binary. A later use finds the
//! component current (its sources, SDK, WIT and this binary's version hash as at the build) and
//! runs no toolchain.
//!
//! C guests build in about a second when Debian's clang-19, lld-19, wasi-libc and
//! libclang-rt-19-dev-wasm32 are installed; a missing package is an error naming it. Python
//! guests need componentize-py, which only `wasmon guest prepare` installs (pip, ~46 MB): a
//! daemon never downloads anything, and says which command to run.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::toolchain::{self, COMPONENTIZE_PY};
use super::{Lang, write_if_changed};

/// One bundled guest built from source.
pub struct FromSource {
    pub name: &'static str,
    pub lang: Lang,
    /// Its directory: `wasmon-guest.toml` and sources.
    files: &'static [(&'static str, &'static str)],
}

/// The guests bundled as sources (`guests/c/NAME`, `guests/python/NAME`).
pub const FROM_SOURCE: &[FromSource] = &[
    FromSource {
        name: "nfsclient",
        lang: Lang::C,
        files: &[
            (
                "wasmon-guest.toml",
                include_str!("../../../guests/c/nfsclient/wasmon-guest.toml"),
            ),
            (
                "nfsclient.c",
                include_str!("../../../guests/c/nfsclient/nfsclient.c"),
            ),
        ],
    },
    FromSource {
        name: "slurm",
        lang: Lang::Python,
        files: &[
            (
                "wasmon-guest.toml",
                include_str!("../../../guests/python/slurm/wasmon-guest.toml"),
            ),
            (
                "app.py",
                include_str!("../../../guests/python/slurm/app.py"),
            ),
        ],
    },
];

/// Names of the guests bundled as sources.
pub fn names() -> impl Iterator<Item = &'static str> {
    FROM_SOURCE.iter().map(|s| s.name)
}

/// Where they are built: `$XDG_CACHE_HOME/wasmon/bundled`, else `~/.cache/wasmon/bundled`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("wasmon")
        .join("bundled")
}

/// The component of the bundled guest `name`, built into `cache` unless current; `None` when
/// no guest of that name is bundled as source. `install`: whether componentize-py may be
/// installed (`wasmon guest prepare`); without it a Python guest not yet built is an error
/// naming that command.
pub fn component(
    name: &str,
    cache: &Path,
    toolchains: &Path,
    install: bool,
) -> Result<Option<PathBuf>> {
    let Some(src) = FROM_SOURCE.iter().find(|s| s.name == name) else {
        return Ok(None);
    };
    let dir = cache.join("src").join(name);
    // Several daemons (or tests) may want it at once: one writes and builds, the others then
    // find it current.
    let _lock = toolchain::Lock::take(cache)?;
    for (file, text) in src.files {
        write_if_changed(&dir.join(file), text.as_bytes())?;
    }
    if let Some(path) = super::build::current(&dir, cache)? {
        return Ok(Some(path));
    }
    let what = || {
        format!(
            "bundled guest `{name}` is written in {} and is built on first use",
            src.lang.name()
        )
    };
    match src.lang {
        Lang::Python if !install && !toolchain::componentize_py_installed(toolchains) => bail!(
            "{}: that needs componentize-py {COMPONENTIZE_PY}, not installed in {}. Run `wasmon guest prepare {name}` once as this user (pip installs it, ~46 MB; needs python3 with venv: apt-get install python3-venv), or put a built {name}.wasm in the guests directory",
            what(),
            toolchains.join("python").display()
        ),
        Lang::C => {
            toolchain::clang().with_context(what)?;
        }
        _ => {}
    }
    let built = super::build(&dir, Some(cache), toolchains).with_context(what)?;
    Ok(Some(built.path))
}
