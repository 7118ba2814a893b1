//! `wasmon guest build`: one function per language, each ending in a component file. A build
//! whose inputs (the guest's sources, the embedded SDK and WIT, the toolchain versions) hash as
//! the last one did is skipped: an 18 MB Python component takes ~20 s to build.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use super::toolchain::{self, COMPONENTIZE_JS, COMPONENTIZE_PY};
use super::{Lang, Manifest, write_if_changed, write_wit};

/// The Python SDK (`guests/python/sdk`).
const PY_SDK: &str = include_str!("../../../guests/python/sdk/wasmon_guest.py");
/// The JavaScript SDK (`guests/js/sdk`).
const JS_SDK: &str = include_str!("../../../guests/js/sdk/wasmon_guest.js");
/// The C SDK (`guests/c/sdk`): the codec, the agent's tree, the exporter's requests and one
/// glue file per world to wit-bindgen's bindings (`glue_WORLD.c`: a build compiles only its
/// world's).
const C_SDK: &[(&str, &str)] = &[
    (
        "wasmon_guest.h",
        include_str!("../../../guests/c/sdk/wasmon_guest.h"),
    ),
    (
        "wasmon_guest.c",
        include_str!("../../../guests/c/sdk/wasmon_guest.c"),
    ),
    (
        "glue_transformer.c",
        include_str!("../../../guests/c/sdk/glue_transformer.c"),
    ),
    (
        "wasmon_request.c",
        include_str!("../../../guests/c/sdk/wasmon_request.c"),
    ),
    (
        "glue_agent.c",
        include_str!("../../../guests/c/sdk/glue_agent.c"),
    ),
    (
        "glue_exporter.c",
        include_str!("../../../guests/c/sdk/glue_exporter.c"),
    ),
];

/// Directories never hashed or copied as sources.
const SKIP: &[&str] = &["target", "node_modules", "__pycache__", ".git", ".wasmon"];

/// What a build produced.
#[derive(Debug)]
pub struct Built {
    pub path: PathBuf,
    /// False when the previous build's output was still current.
    pub rebuilt: bool,
}

/// Builds the guest in `dir` into `out_dir/NAME.wasm` (default `dir/target/wasmon`).
pub fn build(dir: &Path, out_dir: Option<&Path>, toolchains: &Path) -> Result<Built> {
    // Absolute: componentize-js runs in the staging directory, where a relative path given on
    // the command line (`wasmon guest build my_guest`) would name nothing.
    let dir = &std::path::absolute(dir).with_context(|| format!("{}", dir.display()))?;
    let m = Manifest::load(dir)?;
    let out_dir = match out_dir {
        Some(d) => std::path::absolute(d).with_context(|| format!("{}", d.display()))?,
        None => super::default_out_dir(dir),
    };
    std::fs::create_dir_all(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let out = out_dir.join(format!("{}.wasm", m.name));
    let stamp = out_dir.join(format!("{}.wasm.sources", m.name));
    let hash = source_hash(dir, &m)?;
    if is_current(&m, &out, &stamp, &hash) {
        return Ok(Built {
            path: out,
            rebuilt: false,
        });
    }
    let stage = out_dir.join(format!(".stage-{}", m.name));
    std::fs::create_dir_all(&stage).with_context(|| format!("creating {}", stage.display()))?;
    let started = Instant::now();
    eprintln!(
        "building {} guest `{}` ({}) from {}",
        m.lang.name(),
        m.name,
        m.world.name(),
        dir.display()
    );
    let tmp = out_dir.join(format!(".{}.wasm.tmp", m.name));
    match m.lang {
        Lang::Rust => build_rust(dir, &m, &tmp)?,
        Lang::Python => build_python(dir, &m, &stage, &tmp, toolchains)?,
        Lang::Js => build_js(dir, &m, &stage, &tmp, toolchains)?,
        Lang::C => build_c(dir, &m, &stage, &tmp)?,
    }
    // Renamed into place: a daemon watching guests-dir never sees half a file.
    std::fs::rename(&tmp, &out).with_context(|| format!("writing {}", out.display()))?;
    std::fs::write(&stamp, &hash)?;
    let size = std::fs::metadata(&out)?.len();
    eprintln!(
        "built {} ({:.1} MB) in {:.1} s",
        out.display(),
        size as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(Built {
        path: out,
        rebuilt: true,
    })
}

/// Whether `out` was built from sources hashing as `hash`. Rust: cargo knows best what changed
/// (dependencies, lock file); it is always asked.
fn is_current(m: &Manifest, out: &Path, stamp: &Path, hash: &str) -> bool {
    m.lang != Lang::Rust
        && out.exists()
        && std::fs::read_to_string(stamp).is_ok_and(|s| s.trim() == hash)
}

/// `out_dir/NAME.wasm` when it was built from the guest in `dir` as it is now (no toolchain
/// run), else `None`.
pub(super) fn current(dir: &Path, out_dir: &Path) -> Result<Option<PathBuf>> {
    let m = Manifest::load(dir)?;
    let out = out_dir.join(format!("{}.wasm", m.name));
    let stamp = out_dir.join(format!("{}.wasm.sources", m.name));
    let hash = source_hash(dir, &m)?;
    Ok(is_current(&m, &out, &stamp, &hash).then_some(out))
}

/// Hash of everything a build reads.
fn source_hash(dir: &Path, m: &Manifest) -> Result<String> {
    let mut h = Sha256::new();
    h.update(format!(
        "{}|{}|{:?}|py {COMPONENTIZE_PY}|js {COMPONENTIZE_JS}|wasmon {}\n",
        m.lang.name(),
        m.world.name(),
        m.main,
        env!("CARGO_PKG_VERSION")
    ));
    for (_, text) in super::WIT {
        h.update(text);
    }
    match m.lang {
        Lang::Python => h.update(PY_SDK),
        Lang::Js => h.update(JS_SDK),
        Lang::C => C_SDK.iter().for_each(|(_, t)| h.update(t)),
        Lang::Rust => {}
    }
    let mut files = Vec::new();
    sources(dir, dir, &mut files)?;
    files.sort();
    for rel in files {
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        h.update(std::fs::read(dir.join(&rel))?);
    }
    Ok(hex::encode(h.finalize()))
}

/// The guest's source files (relative paths), recursively.
fn sources(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            if !SKIP.iter().any(|s| name == *s) {
                sources(root, &path, out)?;
            }
        } else {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}

fn build_rust(dir: &Path, m: &Manifest, out: &Path) -> Result<()> {
    let cargo = toolchain::cargo()?;
    super::scaffold::write_rust_sdk(dir)?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("target"));
    toolchain::run_shown(
        Command::new(cargo)
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "--manifest-path",
            ])
            .arg(dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target_dir),
        "cargo build --release --target wasm32-wasip2",
    )?;
    let built = target_dir
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", m.name));
    std::fs::copy(&built, out).with_context(|| {
        format!(
            "cargo built no {} (is the crate named `{}` with crate-type cdylib?)",
            built.display(),
            m.name
        )
    })?;
    Ok(())
}

fn build_python(dir: &Path, m: &Manifest, stage: &Path, out: &Path, tc: &Path) -> Result<()> {
    let exe = toolchain::componentize_py(tc)?;
    let wit = stage.join("wit");
    write_wit(&wit)?;
    let sdk = stage.join("sdk");
    write_if_changed(&sdk.join("wasmon_guest.py"), PY_SDK.as_bytes())?;
    let main = m.main.as_deref().unwrap_or("app");
    toolchain::run_shown(
        Command::new(exe)
            .arg("-d")
            .arg(&wit)
            .args(["-w", m.world.name(), "componentize", "-p"])
            .arg(dir)
            .arg("-p")
            .arg(&sdk)
            .arg(main)
            .arg("-o")
            .arg(out),
        &format!("componentize-py {COMPONENTIZE_PY}"),
    )
}

fn build_js(dir: &Path, m: &Manifest, stage: &Path, out: &Path, tc: &Path) -> Result<()> {
    let exe = toolchain::componentize_js(tc)?;
    let wit = stage.join("wit");
    write_wit(&wit)?;
    // componentize-js reads one module and what it imports by relative path: the guest's
    // scripts and the SDK side by side.
    let src = stage.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src)?;
    let mut files = Vec::new();
    sources(dir, dir, &mut files)?;
    for rel in files {
        if rel
            .extension()
            .is_some_and(|e| e == "js" || e == "mjs" || e == "json")
        {
            let to = src.join(&rel);
            if let Some(p) = to.parent() {
                std::fs::create_dir_all(p)?;
            }
            std::fs::copy(dir.join(&rel), &to)?;
        }
    }
    std::fs::write(src.join("wasmon_guest.js"), JS_SDK)?;
    let main = m.main.as_deref().unwrap_or("app.js");
    // Without `-d http fetch-event` the component imports wasi:http, which wasmon refuses.
    toolchain::run_shown(
        Command::new(exe)
            .arg(src.join(main))
            .arg("-w")
            .arg(&wit)
            .args(["-n", m.world.name(), "-d", "http", "fetch-event", "-o"])
            .arg(out)
            .current_dir(&src),
        &format!("componentize-js {COMPONENTIZE_JS}"),
    )
}

fn build_c(dir: &Path, m: &Manifest, stage: &Path, out: &Path) -> Result<()> {
    let clang = toolchain::clang()?;
    let wit = stage.join("wit");
    write_wit(&wit)?;
    // Bindings from wit-bindgen's C generator, as a library (no CLI to install).
    let mut resolve = wit_parser::Resolve::default();
    let (pkg, _) = resolve.push_dir(&wit)?;
    let world = resolve.select_world(&[pkg], Some(m.world.name()))?;
    let mut files = wit_bindgen_core::Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world, &mut files)
        .context("generating the C bindings")?;
    let gen_dir = stage.join("gen");
    for (name, bytes) in files.iter() {
        write_if_changed(&gen_dir.join(name), bytes)?;
    }
    for (name, text) in C_SDK {
        write_if_changed(&gen_dir.join(name), text.as_bytes())?;
    }
    let mut cmd = Command::new(clang);
    cmd.args([
        "--target=wasm32-wasi",
        "-mexec-model=reactor",
        "-O2",
        "-std=c11",
        "-Wall",
        "-Wl,--strip-debug",
        "-I",
    ])
    .arg(&gen_dir)
    .arg("-I")
    .arg(dir);
    let mut srcs = Vec::new();
    sources(dir, dir, &mut srcs)?;
    srcs.sort();
    for rel in srcs
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
    {
        cmd.arg(dir.join(rel));
    }
    for (name, _) in files.iter() {
        if name.ends_with(".c") || name.ends_with(".o") {
            cmd.arg(gen_dir.join(name));
        }
    }
    cmd.arg(gen_dir.join("wasmon_guest.c"))
        .arg(gen_dir.join("wasmon_request.c"))
        .arg(gen_dir.join(format!("glue_{}.c", m.world.name())))
        .arg("-lm")
        .arg("-o")
        .arg(stage.join("module.wasm"));
    toolchain::run_shown(&mut cmd, "clang-19 (wasm32-wasip1 reactor)")?;
    let module = std::fs::read(stage.join("module.wasm"))?;
    // Debian's wasi-libc is wasip1 only: the module becomes a component through the preview1
    // adapter of this wasmtime's version.
    let component = wit_component::ComponentEncoder::default()
        .module(&module)?
        .validate(true)
        .adapter(
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .encode()
        .context("making a component of the wasip1 module")?;
    std::fs::write(out, component).with_context(|| format!("writing {}", out.display()))
}
