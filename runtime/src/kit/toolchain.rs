//! Finding each language's toolchain, and installing the pip and npm ones into a cache
//! directory (once, under a lock, with their progress shown). Debian packages and rustup
//! targets are not installed here (that needs root or changes the user's toolchain): a missing
//! one is an error naming it and the command that installs it.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// Pinned versions: the ones checked against this runtime's WIT (docs/toolchain.md).
pub const COMPONENTIZE_PY: &str = "0.25.1";
pub const COMPONENTIZE_JS: &str = "0.23.0";
/// Debian packages a C guest needs.
pub const C_PACKAGES: &[&str] = &[
    "clang-19",
    "lld-19",
    "wasi-libc",
    "libclang-rt-19-dev-wasm32",
];
const CLANG: &str = "clang-19";
const WASI_LIBC: &str = "/usr/lib/wasm32-wasi/libc.a";
const WASM_LD: &str = "/usr/lib/llvm-19/bin/wasm-ld";

/// The toolchain cache: `$WASMON_TOOLCHAINS`, else `$XDG_CACHE_HOME/wasmon/toolchains`, else
/// `~/.cache/wasmon/toolchains`.
pub fn toolchains_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("WASMON_TOOLCHAINS") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("wasmon").join("toolchains")
}

/// An exclusive lock on `dir/.lock` while installing (tests and users may build at once).
pub(super) struct Lock(std::fs::File);

impl Lock {
    pub(super) fn take(dir: &Path) -> Result<Lock> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(".lock");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: flock on a descriptor this function owns; released when the file closes.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            bail!(
                "locking {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            );
        }
        Ok(Lock(f))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        // SAFETY: unlocking the descriptor locked in `take`.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Runs a toolchain step (an installer, a compiler) with its output on our stderr (stdout
/// may be a pipe someone reads).
pub(super) fn run_shown(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .stderr(std::io::stderr())
        .status()
        .with_context(|| format!("{what}: cannot run {:?}", cmd.get_program()))?;
    if !status.success() {
        bail!("{what} failed ({status}); its output is above");
    }
    Ok(())
}

fn on_path(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `componentize-py` of the pinned version is installed in `DIR/python`.
pub fn componentize_py_installed(dir: &Path) -> bool {
    let venv = dir.join("python");
    venv.join(format!(".componentize-py-{COMPONENTIZE_PY}"))
        .exists()
        && venv.join("bin").join("componentize-py").exists()
}

/// `componentize-py`, installed into `DIR/python` (a venv) when missing.
pub fn componentize_py(dir: &Path) -> Result<PathBuf> {
    let venv = dir.join("python");
    let exe = venv.join("bin").join("componentize-py");
    let stamp = venv.join(format!(".componentize-py-{COMPONENTIZE_PY}"));
    if componentize_py_installed(dir) {
        return Ok(exe);
    }
    let _lock = Lock::take(dir)?;
    if stamp.exists() && exe.exists() {
        return Ok(exe);
    }
    if !on_path("python3") {
        bail!(
            "Python guests need componentize-py {COMPONENTIZE_PY}, installed with pip into {}; that needs `python3` (with venv and pip; Debian: apt-get install python3 python3-venv), which is missing",
            venv.display()
        );
    }
    eprintln!(
        "installing componentize-py {COMPONENTIZE_PY} (pip, ~46 MB, once) into {}",
        venv.display()
    );
    run_shown(
        Command::new("python3").arg("-m").arg("venv").arg(&venv),
        "creating a Python venv (Debian: apt-get install python3-venv)",
    )?;
    run_shown(
        Command::new(venv.join("bin").join("pip"))
            .args([
                "install",
                "--disable-pip-version-check",
                "--progress-bar",
                "on",
            ])
            .arg(format!("componentize-py=={COMPONENTIZE_PY}")),
        &format!("pip install componentize-py=={COMPONENTIZE_PY}"),
    )?;
    if !exe.exists() {
        bail!(
            "pip installed componentize-py but {} is missing",
            exe.display()
        );
    }
    std::fs::write(&stamp, "")?;
    Ok(exe)
}

/// `componentize-js`, installed into `DIR/js` with npm when missing.
pub fn componentize_js(dir: &Path) -> Result<PathBuf> {
    let prefix = dir.join("js");
    let exe = prefix.join("node_modules/.bin/componentize-js");
    let installed = prefix.join("node_modules/@bytecodealliance/componentize-js/package.json");
    let version_ok = || {
        std::fs::read_to_string(&installed)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v["version"] == COMPONENTIZE_JS)
    };
    if exe.exists() && version_ok() {
        return Ok(exe);
    }
    let _lock = Lock::take(dir)?;
    if exe.exists() && version_ok() {
        return Ok(exe);
    }
    if !on_path("node") || !on_path("npm") {
        bail!(
            "JavaScript guests need componentize-js {COMPONENTIZE_JS}, installed with npm into {}; that needs `node` (20 or later) and `npm` (Debian: apt-get install nodejs npm), which are missing",
            prefix.display()
        );
    }
    eprintln!(
        "installing @bytecodealliance/componentize-js {COMPONENTIZE_JS} (npm, ~150 MB, once) into {}",
        prefix.display()
    );
    std::fs::create_dir_all(&prefix)?;
    run_shown(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(format!(
                "@bytecodealliance/componentize-js@{COMPONENTIZE_JS}"
            )),
        &format!("npm install @bytecodealliance/componentize-js@{COMPONENTIZE_JS}"),
    )?;
    if !exe.exists() {
        bail!(
            "npm installed componentize-js but {} is missing",
            exe.display()
        );
    }
    Ok(exe)
}

/// `clang-19` able to build wasm32-wasip1 reactors, or an error naming the missing packages.
pub fn clang() -> Result<PathBuf> {
    let mut missing = Vec::new();
    if !on_path(CLANG) {
        missing.push("clang-19");
    }
    if !Path::new(WASM_LD).exists() {
        missing.push("lld-19");
    }
    if !Path::new(WASI_LIBC).exists() {
        missing.push("wasi-libc");
    }
    let rt = Path::new("/usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a");
    if !rt.exists() {
        missing.push("libclang-rt-19-dev-wasm32");
    }
    if !missing.is_empty() {
        bail!(
            "C guests need the Debian packages {}; missing: {} (apt-get install -y {})",
            C_PACKAGES.join(" "),
            missing.join(", "),
            missing.join(" ")
        );
    }
    Ok(PathBuf::from(CLANG))
}

/// `cargo` with the `wasm32-wasip2` target, or an error naming what is missing.
pub fn cargo() -> Result<PathBuf> {
    if !on_path("cargo") {
        bail!(
            "Rust guests need `cargo` (rustup, Rust 1.95) and the wasm32-wasip2 target; cargo is missing"
        );
    }
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok());
    let has_target = sysroot.is_some_and(|s| {
        Path::new(s.trim())
            .join("lib/rustlib/wasm32-wasip2")
            .exists()
    });
    if !has_target {
        bail!("Rust guests need the wasm32-wasip2 target: rustup target add wasm32-wasip2");
    }
    Ok(PathBuf::from("cargo"))
}
