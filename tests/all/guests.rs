//! The guest crates' own unit tests (the Ceilometer transformers' logic, the MMV parser and
//! agent, the SDK) live in the guests workspace, which is built for wasm32 by the build script;
//! this runs them natively so that `cargo test --workspace` runs every test: the tests of every
//! guest crate that has any (found in its sources, so a new crate's tests are not left out).

use std::path::Path;
use std::process::Command;

/// The package names of the guest crates (directories of `guests` with a Cargo.toml) whose
/// Rust sources hold a `#[test]`.
fn crates_with_tests(guests: &Path) -> Vec<String> {
    fn has_test(dir: &Path) -> bool {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                let p = e.path();
                if p.is_dir() {
                    has_test(&p)
                } else {
                    p.extension().is_some_and(|x| x == "rs")
                        && std::fs::read_to_string(&p).is_ok_and(|t| t.contains("#[test]"))
                }
            })
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(guests).unwrap().flatten() {
        let Ok(manifest) = std::fs::read_to_string(e.path().join("Cargo.toml")) else {
            continue;
        };
        if !has_test(&e.path().join("src")) {
            continue;
        }
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .map(|n| n.trim().trim_matches('"').to_string());
        out.extend(name);
    }
    out.sort();
    out
}

#[test]
fn the_guest_crates_unit_tests_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let packages = crates_with_tests(&root.join("guests"));
    for named in [
        "wasmon-ceilometer",
        "mmv",
        "wasmon-guest",
        "infiniband",
        "clustercockpit",
    ] {
        assert!(
            packages.iter().any(|p| p == named),
            "{named} not in {packages:?}"
        );
    }
    let out = Command::new(env!("CARGO"))
        .args(["test", "--manifest-path"])
        .arg(root.join("guests/Cargo.toml"))
        .args(packages.iter().flat_map(|p| ["-p", p.as_str()]))
        .arg("--target-dir")
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
