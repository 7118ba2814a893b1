//! Builds the guests workspace (`../guests`) for `wasm32-wasip2` as part of the normal build,
//! so `cargo run` and `cargo test` need no manual step, and embeds the bundled guests in the
//! binary. Installs the `wasm32-wasip2` target with rustup when it is missing.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Guests embedded in the daemon (looked up by name from config and the CLI).
const BUNDLED: &[&str] = &[
    "arithmetic",
    "rate_of_change",
    "unit_conversion",
    "delta",
    "aggregator",
    "template",
    "foo",
    "mmv",
    "otlp",
    "jsonl",
    "infiniband",
    "denki",
    "hwmon",
    "lustre",
    "cpusys",
    "clustercockpit",
];
/// Guests built for the tests only (found through `wasmon::BUILT_GUESTS_DIR`).
const TEST_ONLY: &[&str] = &[
    "testing",
    "testing_agent",
    "trap_always",
    "trap_third",
    "trap_agent",
    "trap_export",
    "fsprobe",
    "legacy_agent",
];
const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    let guests = root.join("guests");
    println!("cargo:rerun-if-changed={}", guests.display());
    println!("cargo:rerun-if-changed={}", root.join("wit").display());

    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // Worktrees sharing one target dir would overwrite each other's guests there: a private
    // one may be named.
    println!("cargo:rerun-if-env-changed=WASMON_GUESTS_TARGET_DIR");
    let target_dir = std::env::var_os("WASMON_GUESTS_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir(&out_dir, &root).join("guests"));
    ensure_wasm_target();

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--target", TARGET, "--manifest-path"])
        .arg(guests.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(&guests);
    scrub_env(&mut cmd);
    let status = cmd.status().expect("running cargo to build the guests");
    if !status.success() {
        panic!(
            "building the guests in {} for {TARGET} failed (see the output above)",
            guests.display()
        );
    }

    let built = target_dir.join(TARGET).join("release");
    let dest = out_dir.join("guests");
    std::fs::create_dir_all(&dest).unwrap();
    let mut table = String::from(
        "/// Guests compiled into the daemon: (name, component bytes).\npub static BUNDLED: &[(&str, &[u8])] = &[\n",
    );
    for name in BUNDLED.iter().chain(TEST_ONLY) {
        let from = built.join(format!("{name}.wasm"));
        let to = dest.join(format!("{name}.wasm"));
        std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("copying {}: {e}", from.display()));
        if BUNDLED.contains(name) {
            table.push_str(&format!(
                "    ({name:?}, include_bytes!({:?})),\n",
                to.display().to_string()
            ));
        }
    }
    table.push_str("];\n");
    std::fs::write(out_dir.join("bundled.rs"), table).unwrap();
    println!("cargo:rustc-env=WASMON_BUILT_GUESTS={}", dest.display());
}

/// `target/` of the outer build: OUT_DIR is `<target>/[<triple>/]<profile>/build/<pkg>/out`.
fn target_dir(out_dir: &Path, root: &Path) -> PathBuf {
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent()?.parent())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.join("target"))
}

/// rustup does not add targets named in rust-toolchain.toml by itself here
/// (RUSTUP_AUTO_INSTALL=0), so add `wasm32-wasip2` when the sysroot lacks it.
fn ensure_wasm_target() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok());
    if let Some(sysroot) = sysroot
        && Path::new(sysroot.trim())
            .join("lib/rustlib")
            .join(TARGET)
            .exists()
    {
        return;
    }
    println!("cargo:warning=installing the {TARGET} target with rustup (once)");
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => panic!(
            "the {TARGET} target is missing and `rustup target add {TARGET}` failed ({other:?}); run it by hand"
        ),
    }
}

/// The outer cargo's environment must not leak into the inner build (flags, wrappers, the
/// outer target dir, per-package variables); the jobserver is kept so both share the cores.
fn scrub_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let keep = matches!(key, "CARGO_HOME" | "CARGO_MAKEFLAGS")
            || key.starts_with("CARGO_NET_")
            || key.starts_with("CARGO_REGISTRIES_");
        let drop = (key.starts_with("CARGO_") && !keep)
            || matches!(
                key,
                "RUSTFLAGS"
                    | "RUSTDOCFLAGS"
                    | "RUSTC"
                    | "RUSTC_WRAPPER"
                    | "RUSTC_WORKSPACE_WRAPPER"
                    | "TARGET"
                    | "HOST"
                    | "OUT_DIR"
                    | "OPT_LEVEL"
                    | "PROFILE"
                    | "DEBUG"
                    | "NUM_JOBS"
                    | "RUSTC_LINKER"
            );
        if drop {
            cmd.env_remove(key);
        }
    }
}
