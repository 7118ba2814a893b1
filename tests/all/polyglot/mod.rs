//! Guests in Python, JavaScript and C (issue 11): the SDKs' own unit tests, guests built from
//! `guests/{python,js,c}` by `wasmon guest build`, run through `wasmon transform`, the sandbox
//! and a running daemon; the scaffolds of all four languages; `wasmon guest check`.
//!
//! Toolchains are installed once into `target/guest-toolchains` (pip and npm by the kit, Debian
//! packages by these tests) and built components are kept in `target/polyglot`, keyed by a
//! hash of their sources, so a second run rebuilds nothing. A toolchain that cannot be
//! installed fails the test that needs it, naming it.

mod agents;
mod checks;
mod daemon;
mod exporters;
mod files;
mod guests;

pub(crate) use agents::prepare_slurm;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};

use wasmon::host::{AgentInstance, ExporterInstance, Runtime};

use crate::common::{ensure_debian_package, spawn_piped};

/// The repository.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `target/`: toolchains and built components live there, reused across runs.
fn target() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn toolchains() -> PathBuf {
    target().join("guest-toolchains")
}

/// Scratch space of these tests that outlives a run (builds, the CLI's compile cache).
pub fn work() -> PathBuf {
    let d = target().join("polyglot");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `wasmon` with the kit's and the CLI's caches under `target/`.
pub fn wasmon() -> Command {
    let mut c = Command::new(crate::common::wasmon_bin());
    c.env("WASMON_TOOLCHAINS", toolchains())
        .env("XDG_CACHE_HOME", work().join("cache"));
    c
}

/// Points a daemon (or any `wasmon`) at the same caches: the bundled C and Python guests it
/// builds from source on first use, and the pip toolchain the Python ones need.
pub fn cache_env(cmd: &mut Command) {
    cmd.env("WASMON_TOOLCHAINS", toolchains())
        .env("XDG_CACHE_HOME", work().join("cache"));
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

/// Installs what a language's toolchain needs from Debian (the pip and npm parts the kit
/// installs itself).
pub fn ensure_system_toolchain(lang: &str) {
    let works = |prog: &str, args: &[&str]| {
        Command::new(prog)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    match lang {
        "python" => ensure_debian_package("python3-venv", || {
            works("python3", &["-c", "import venv, ensurepip"])
        }),
        "js" => ensure_debian_package("npm", || works("npm", &["--version"])),
        "c" => {
            for p in [
                "clang-19",
                "lld-19",
                "wasi-libc",
                "libclang-rt-19-dev-wasm32",
            ] {
                let present = || {
                    Command::new("dpkg")
                        .args(["-s", p])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                };
                ensure_debian_package(p, present);
            }
        }
        _ => {}
    }
}

/// Builds `guests/LANG/NAME` with `wasmon guest build` (once per run; skipped by the kit when
/// its sources are unchanged since the last run) and returns the component's path.
pub fn built(lang: &str, name: &str) -> PathBuf {
    static BUILDS: OnceLock<Mutex<HashMap<String, Arc<OnceLock<PathBuf>>>>> = OnceLock::new();
    let key = format!("{lang}/{name}");
    let cell = BUILDS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(key.clone())
        .or_default()
        .clone();
    cell.get_or_init(|| {
        ensure_system_toolchain(lang);
        let out_dir = work().join("built").join(lang);
        let out = run(wasmon()
            .args(["guest", "build"])
            .arg(repo().join("guests").join(lang).join(name))
            .arg("--out-dir")
            .arg(&out_dir));
        assert!(
            out.status.success(),
            "wasmon guest build guests/{key} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        assert!(path.exists(), "{} missing", path.display());
        path
    })
    .clone()
}

/// Loads the agent component `wasm` as guest `name` with `params` in the sandbox (256 MiB and
/// 2 s a call: Python and JS agents start a language runtime).
pub fn load_agent(wasm: &Path, name: &str, params: &str) -> anyhow::Result<AgentInstance> {
    load_sandboxed(wasm, name, params, Vec::new())
}

/// [`load_agent`] with directory grants.
pub fn load_agent_granted(
    wasm: &Path,
    name: &str,
    params: &str,
    dirs: Vec<wasmon::host::DirGrant>,
) -> anyhow::Result<AgentInstance> {
    load_sandboxed(wasm, name, params, dirs)
}

/// Loads the exporter component `wasm` as guest `name` with `params` in the sandbox (256 MiB
/// and 2 s a call, as agents: Python and JS exporters start a language runtime).
pub fn load_exporter(wasm: &Path, name: &str, params: &str) -> anyhow::Result<ExporterInstance> {
    load_sandboxed(wasm, name, params, Vec::new())
}

/// Loads `wasm` into world `W` with 256 MiB and 2 s a call.
fn load_sandboxed<W: wasmon::host::World>(
    wasm: &Path,
    name: &str,
    params: &str,
    dirs: Vec<wasmon::host::DirGrant>,
) -> anyhow::Result<wasmon::host::Instance<W>> {
    use wasmon::host::{GuestConfig, Image};
    let rt = cached_runtime();
    let compiled = rt.compile(&std::fs::read(wasm).unwrap(), name).unwrap();
    let mut cfg = GuestConfig::new(name, params);
    cfg.memory = 256 << 20;
    cfg.deadline = std::time::Duration::from_secs(2);
    cfg.grants.dirs = dirs;
    Image::<W>::load(&rt, &compiled, cfg)
}

/// One runtime for these tests, with a disk cache under `target/` (an 18 MB Python component
/// compiles in ~20 s; the cache serves it in milliseconds on later runs).
pub fn cached_runtime() -> Arc<Runtime> {
    static RT: OnceLock<Arc<Runtime>> = OnceLock::new();
    RT.get_or_init(|| Runtime::new(Some(work().join("components"))).unwrap())
        .clone()
}

/// `wasmon transform --guest GUEST --params P` over `input`; returns stdout's JSON lines.
pub fn transform(guest: &Path, params: &serde_json::Value, input: &str) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("params.json");
    std::fs::write(&p, params.to_string()).unwrap();
    let mut child = spawn_piped(
        wasmon()
            .args([
                "transform",
                "--deadline",
                "2s",
                "--memory",
                "256MiB",
                "--guest",
            ])
            .arg(guest)
            .arg("--params")
            .arg(&p),
    );
    let mut stdin = child.stdin.take().unwrap();
    let text = input.to_string();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(text.as_bytes()).unwrap();
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "wasmon transform --guest {} failed:\n{}",
        guest.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

#[test]
fn python_sdk_unit_tests_pass() {
    let out = run(Command::new("python3")
        .args(["-B", "-m", "unittest", "-v", "test_wasmon_guest"])
        .current_dir(repo().join("guests/python/sdk")));
    assert!(
        out.status.success(),
        "python3 -m unittest (guests/python/sdk) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(report.contains("Ran 18 tests"), "{report}");
}

#[test]
fn js_sdk_unit_tests_pass() {
    ensure_system_toolchain("js");
    let out = run(Command::new("node")
        .args(["--test", "wasmon_guest.test.mjs"])
        .current_dir(repo().join("guests/js/sdk")));
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "node --test (guests/js/sdk) failed:\n{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        report.contains("# pass 13") && report.contains("# fail 0"),
        "{report}"
    );
}

#[test]
fn c_sdk_unit_tests_pass() {
    let sdk = repo().join("guests/c/sdk");
    let exe = work().join("test_wasmon_guest");
    let out = run(Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(sdk.join("test_wasmon_guest.c"))
        .arg(sdk.join("wasmon_guest.c"))
        .arg(sdk.join("wasmon_request.c"))
        .arg("-lm"));
    assert!(
        out.status.success(),
        "compiling the C SDK's tests natively (cc) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&mut Command::new(&exe));
    assert!(
        out.status.success(),
        "the C SDK's tests failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all checks passed"));
}
