//! The guest crates' own unit tests (the Ceilometer transformers' logic, the MMV parser and
//! agent, the SDK) live in the guests workspace, which is built for wasm32 by the build script;
//! this runs them natively so that `cargo test --workspace` runs every test.

use std::path::Path;
use std::process::Command;

#[test]
fn the_guest_crates_unit_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new(env!("CARGO"))
        .args(["test", "--manifest-path"])
        .arg(root.join("guests/Cargo.toml"))
        .args([
            "-p",
            "wasmon-ceilometer",
            "-p",
            "mmv",
            "-p",
            "wasmon-guest",
            "--target-dir",
        ])
        // Its own target directory: the outer `cargo test` holds the lock on the main one.
        .arg(root.join("target/guests-native"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "guest unit tests failed:\n{stdout}\n{stderr}"
    );
    let passed: usize = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("test result: ok. "))
        .filter_map(|l| l.split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert!(
        passed >= 100,
        "only {passed} guest unit tests ran:\n{stdout}"
    );
}
