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
