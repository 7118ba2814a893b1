//! The release binary the process benches start (`footprint`, `forward`): `WASMON_BIN`, or
//! `target/release/wasmon` built first when needed.

use std::path::PathBuf;
use std::process::Command;

pub fn binary() -> PathBuf {
    if let Some(b) = std::env::var_os("WASMON_BIN") {
        return b.into();
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = Command::new(cargo)
        .args(["build", "--release", "-p", "wasmon", "--bin", "wasmon"])
        .current_dir(&root)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cargo build --release -p wasmon failed");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    target.join("release/wasmon")
}

/// A duration in whole seconds from the environment variable `name`, else `default`.
#[allow(dead_code)] // not every bench that includes this file reads one
pub fn secs_env(name: &str, default: u64) -> std::time::Duration {
    std::time::Duration::from_secs(
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
    )
}
