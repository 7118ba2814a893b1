//! `wasmon guest new`: a guest that builds as is, in each language, with its manifest: a
//! transformer scaling samples (like the bundled `template`), an agent (`scaffold_agent.rs`)
//! or an exporter (`scaffold_exporter.rs`).

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::{
    Lang, MANIFEST, WorldName, scaffold_agent, scaffold_exporter, valid_name, write_if_changed,
    write_wit,
};

/// The Rust SDK (`guests/sdk`), vendored into a Rust guest's `.wasmon/rust/sdk` by `new` and
/// refreshed by `build`, so that a guest outside this repository builds.
const RUST_SDK: &[(&str, &str)] = &[
    ("lib.rs", include_str!("../../../guests/sdk/src/lib.rs")),
    ("agent.rs", include_str!("../../../guests/sdk/src/agent.rs")),
    ("batch.rs", include_str!("../../../guests/sdk/src/batch.rs")),
    (
        "exporter.rs",
        include_str!("../../../guests/sdk/src/exporter.rs"),
    ),
    ("hash.rs", include_str!("../../../guests/sdk/src/hash.rs")),
    ("log.rs", include_str!("../../../guests/sdk/src/log.rs")),
    ("names.rs", include_str!("../../../guests/sdk/src/names.rs")),
    (
        "params.rs",
        include_str!("../../../guests/sdk/src/params.rs"),
    ),
    (
        "sample.rs",
        include_str!("../../../guests/sdk/src/sample.rs"),
    ),
    ("sysfs.rs", include_str!("../../../guests/sdk/src/sysfs.rs")),
    (
        "transformer.rs",
        include_str!("../../../guests/sdk/src/transformer.rs"),
    ),
];

const RUST_SDK_MANIFEST: &str = r#"# Written by `wasmon guest build`: the wasmon guest SDK (do not edit; rebuilt each time).
[package]
name = "wasmon-guest"
edition = "2024"
version = "0.1.0"
license = "Apache-2.0"

[dependencies]
wit-bindgen = { version = "0.63", default-features = false, features = ["macros", "realloc", "std"] }
serde_json = "1"
"#;

/// Writes (or refreshes) the vendored Rust SDK and its WIT under `dir/.wasmon`.
pub(crate) fn write_rust_sdk(dir: &Path) -> Result<()> {
    let base = dir.join(".wasmon");
    write_wit(&base.join("wit"))?;
    let sdk = base.join("rust").join("sdk");
    write_if_changed(&sdk.join("Cargo.toml"), RUST_SDK_MANIFEST.as_bytes())?;
    for (name, text) in RUST_SDK {
        write_if_changed(&sdk.join("src").join(name), text.as_bytes())?;
    }
    Ok(())
}

fn manifest(name: &str, lang: Lang, world: WorldName) -> String {
    format!(
        "# A wasmon guest: `wasmon guest build` builds it into target/wasmon/{name}.wasm.\nname = \"{name}\"\nlang = \"{}\"\nworld = \"{}\"\n",
        lang.name(),
        world.name()
    )
}

const DOC: &str = "multiplies every sample whose name starts with `prefix` by `factor`, and may \
give it a new `unit`. Parameters: {\"factor\": 0.001, \"prefix\": \"disk.\", \"unit\": \"KB\"}";

/// Creates `dir` (which must not exist) with a guest named after its last component.
pub fn new(dir: &Path, lang: Lang, world: WorldName) -> Result<String> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .context("the guest directory needs a name")?
        .to_string();
    valid_name(&name)?;
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let w = |rel: &str, text: &str| write_if_changed(&dir.join(rel), text.as_bytes());
    w(MANIFEST, &manifest(&name, lang, world))?;
    w(".gitignore", "target/\n.wasmon/\n__pycache__/\n")?;
    if lang == Lang::Rust {
        w("Cargo.toml", &rust_manifest(&name))?;
        write_rust_sdk(dir)?;
    }
    // The file the build starts from, in each language.
    let file = match lang {
        Lang::Rust => "src/lib.rs".to_string(),
        Lang::Python => "app.py".to_string(),
        Lang::Js => "app.js".to_string(),
        Lang::C => format!("{name}.c"),
    };
    let text = match world {
        WorldName::Transformer => lang
            .pick([RUST_LIB, PYTHON_APP, JS_APP, C_APP])
            .replace("{DOC}", DOC),
        WorldName::Agent => scaffold_agent::source(lang, &name),
        WorldName::Exporter => scaffold_exporter::source(lang),
    };
    w(&file, &text)?;
    Ok(name)
}

fn rust_manifest(name: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
edition = "2024"
version = "0.1.0"

[lib]
crate-type = ["cdylib"]

[dependencies]
# The SDK, vendored by `wasmon guest build` (it matches the runtime that builds it).
wasmon-guest = {{ path = ".wasmon/rust/sdk" }}
serde_json = "1"

# A workspace of its own, wherever it is put.
[workspace]

[profile.release]
lto = true
strip = true
codegen-units = 1
opt-level = 3
panic = "abort"
"#
    )
}

const RUST_LIB: &str = r#"//! A wasmon transformer: {DOC}

use wasmon_guest::{Input, Params, Sample, Str, Transformer};

pub struct Scale {
    factor: f64,
    prefix: String,
    unit: Option<Str>,
}

fn get<'a>(p: &'a Params, key: &str) -> Option<&'a serde_json::Value> {
    p.get(key).filter(|v| !v.is_null())
}

impl Transformer for Scale {
    fn configure(p: &Params) -> Result<Self, String> {
        let factor = match get(p, "factor") {
            None => 1.0,
            Some(v) => v.as_f64().ok_or(format!("`factor` must be a number, got {v}"))?,
        };
        let prefix = match get(p, "prefix") {
            None => String::new(),
            Some(v) => v.as_str().ok_or(format!("`prefix` must be a string, got {v}"))?.into(),
        };
        let unit = match get(p, "unit") {
            None => None,
            Some(v) => Some(Str::from(v.as_str().ok_or(format!("`unit` must be a string, got {v}"))?)),
        };
        Ok(Scale { factor, prefix, unit })
    }

    fn handle(&mut self, input: impl Input, out: &mut Vec<Sample>) {
        for mut s in input {
            if s.name.starts_with(&self.prefix) {
                s.value *= self.factor;
                if let Some(unit) = &self.unit {
                    s.unit = unit.clone();
                }
            }
            out.push(s);
        }
    }
}

wasmon_guest::export_transformer!(Scale);
"#;

const PYTHON_APP: &str = r#""""A wasmon transformer: {DOC}

Runs on the CPython 3.14 that componentize-py embeds. `wasmon guest build` builds it;
`wasmon transform --guest target/wasmon/NAME.wasm` tries it on JSON lines.
"""

from wasmon_guest import export_transformer


class Scale:
    def __init__(self, params):
        self.factor = params.number("factor", 1.0)
        self.prefix = params.string("prefix", "")
        self.unit = params.string("unit", None)

    def handle(self, samples):
        for s in samples:
            if s.name.startswith(self.prefix):
                s.value *= self.factor
                if self.unit is not None:
                    s.unit = self.unit
        return samples

    def flush(self):
        return []


Transform = export_transformer(Scale)
"#;

const JS_APP: &str = r#"// A wasmon transformer: {DOC}
//
// `wasmon guest build` builds it (componentize-js); `wasmon transform --guest
// target/wasmon/NAME.wasm` tries it on JSON lines.
import { exportTransformer } from "./wasmon_guest.js";

class Scale {
  constructor(params) {
    this.factor = params.number("factor", 1);
    this.prefix = params.string("prefix", "");
    this.unit = params.string("unit", null);
  }

  handle(samples) {
    for (const s of samples) {
      if (s.name.startsWith(this.prefix)) {
        s.value *= this.factor;
        if (this.unit !== null) s.unit = this.unit;
      }
    }
    return samples;
  }

  flush() {
    return [];
  }
}

export const transform = exportTransformer(Scale);
"#;

const C_APP: &str = r#"/* A wasmon transformer: {DOC}
 *
 * `wasmon guest build` builds it (clang-19, wasm32-wasip1, componentized with the preview1
 * adapter); `wasmon transform --guest target/wasmon/NAME.wasm` tries it on JSON lines. */
#include <string.h>

#include "wasmon_guest.h"

static double factor;
static const char *prefix;
static const char *unit;

const char *wg_configure(const wg_params *p) {
    const char *err;
    if ((err = wg_param_number(p, "factor", 1.0, &factor))) return err;
    if ((err = wg_param_string(p, "prefix", "", &prefix))) return err;
    return wg_param_string(p, "unit", NULL, &unit);
}

void wg_handle(wg_sample *in, size_t n, wg_out *out) {
    size_t len = strlen(prefix);
    for (size_t i = 0; i < n; i++) {
        wg_sample *s = &in[i];
        if (!strncmp(s->name, prefix, len)) {
            s->value *= factor;
            if (unit) s->unit = unit;
        }
        wg_emit(out, s);
    }
}

void wg_flush(wg_out *out) { (void)out; }
"#;

#[cfg(test)]
mod tests {
    /// A file added to the SDK but not to `RUST_SDK` builds in this repository and fails in
    /// every scaffolded guest (`file not found for module`): the two lists are one.
    #[test]
    fn the_vendored_sdk_is_every_file_of_the_sdk() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guests/sdk/src");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".rs"))
            .collect();
        on_disk.sort();
        let mut vendored: Vec<String> =
            super::RUST_SDK.iter().map(|(n, _)| n.to_string()).collect();
        vendored.sort();
        assert_eq!(vendored, on_disk);
    }
}
