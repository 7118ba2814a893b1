//! `wasmon guest new|build|check`: the scaffolds of all four languages build as they are and
//! pass the check; the check names a missing export, an import this runtime does not provide
//! (`wasi:http`, as componentize-js adds by default) and another package version.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::{built, ensure_system_toolchain, run, toolchains, wasmon, work};

fn check(file: &Path, extra: &[&str]) -> (bool, String) {
    let out = run(wasmon().args(["guest", "check"]).args(extra).arg(file));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `wasmon guest new --lang LANG --world WORLD my_LANG_WORLD`, then `wasmon guest build` where
/// earlier runs built it (an unchanged scaffold is not rebuilt, and its component, the same
/// bytes, is served by the compile cache); checked with `wasmon guest check`.
pub(super) fn build_scaffold(root: &Path, lang: &str, world: &str) -> (PathBuf, PathBuf) {
    ensure_system_toolchain(lang);
    // Rust scaffolds build in a target dir kept across runs (wit-bindgen compiles once).
    let cargo_target = work().join("scaffold-cargo-target");
    let name = if world == "transformer" {
        format!("my_{lang}_guest")
    } else {
        format!("my_{lang}_{world}")
    };
    let fresh = root.join(&name);
    ok(
        &run(wasmon()
            .args(["guest", "new", "--lang", lang, "--world", world])
            .arg(&fresh)),
        &format!("wasmon guest new --lang {lang} --world {world}"),
    );
    assert!(fresh.join("wasmon-guest.toml").exists());
    let dir = work().join("scaffolds").join(&name);
    refresh(&fresh, &dir);
    let out = run(wasmon()
        .args(["guest", "build"])
        .arg(&dir)
        .env("CARGO_TARGET_DIR", &cargo_target));
    ok(
        &out,
        &format!("wasmon guest build ({lang} {world} scaffold)"),
    );
    let wasm = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert_eq!(
        wasm,
        dir.join(format!("target/wasmon/{name}.wasm")),
        "{lang}"
    );
    // `--no-link` for the big ones: linking compiles 12-18 MB (~20 s each); the built
    // guests of the same toolchains are linked in the other tests.
    let big = matches!(lang, "python" | "js");
    let (accepted, text) = check(&wasm, if big { &["--no-link"] } else { &[] });
    assert!(accepted, "{lang}: {text}");
    assert!(
        text.contains(&format!("implements wasmon:collector/{world}@0.1.0")),
        "{text}"
    );
    assert!(text.contains("accepted"), "{text}");
    (wasm, dir)
}

#[test]
fn the_scaffolds_of_all_four_languages_build_as_they_are_and_pass_the_check() {
    let root = tempfile::tempdir().unwrap();
    for lang in ["rust", "python", "js", "c"] {
        let (wasm, dir) = build_scaffold(root.path(), lang, "transformer");
        // It transforms: the scaffold scales by `factor`.
        let got = super::transform(
            &wasm,
            &serde_json::json!({"factor": 2, "prefix": "d"}),
            r#"{"name":"disk","resource":"r","value":21}"#,
        );
        assert_eq!(got[0]["value"], 42.0, "{lang}");
        // A second build finds nothing to do (its sources are unchanged).
        if lang != "rust" {
            let again = run(wasmon().args(["guest", "build"]).arg(&dir));
            ok(&again, "second build");
            assert!(
                String::from_utf8_lossy(&again.stderr).contains("up to date"),
                "{lang}"
            );
        }
    }
}

/// The agent scaffolds (`--world agent`) build, pass the check and answer in the sandbox:
/// `NAME.up` is 1, `NAME.calls` counts the fetches, the subtree lists both.
#[test]
fn the_agent_scaffolds_of_all_four_languages_build_and_answer() {
    use wasmon::host::agent_types::{Atom, NsError, Pmid, Semantics, ValueType};
    let root = tempfile::tempdir().unwrap();
    for lang in ["rust", "python", "js", "c"] {
        let (wasm, _) = build_scaffold(root.path(), lang, "agent");
        let name = format!("my_{lang}_agent");
        let mut a = super::load_agent(&wasm, &name, r#"{"domain": 201}"#).unwrap();
        let id = |item| Pmid {
            domain: 201,
            cluster: 0,
            item,
        };
        let n = |leaf: &str| format!("{name}.{leaf}");
        assert_eq!(a.lookup_name(&n("calls")).unwrap(), Ok(id(1)), "{lang}");
        assert_eq!(
            a.lookup_name(&name).unwrap(),
            Err(NsError::NonLeaf),
            "{lang}"
        );
        assert_eq!(
            a.lookup_name(&n("nope")).unwrap(),
            Err(NsError::UnknownName),
            "{lang}"
        );
        assert_eq!(a.names_of(id(0)).unwrap(), Ok(vec![n("up")]), "{lang}");
        let kids: Vec<(String, bool)> = a
            .children(&name)
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|c| (c.name, c.leaf))
            .collect();
        assert_eq!(
            kids,
            [("up".to_string(), true), ("calls".to_string(), true)],
            "{lang}"
        );
        let d = a.describe(id(1)).unwrap().unwrap();
        assert_eq!(
            (d.semantics, d.units.as_str(), d.help.as_str()),
            (Semantics::Counter, "count", "fetches answered"),
            "{lang}"
        );
        // PCP types as declared, values in the matching case (integers exact).
        assert_eq!(d.value_type, ValueType::Uint64, "{lang}");
        let up = a.describe(id(0)).unwrap().unwrap();
        assert_eq!(up.value_type, ValueType::Uint32, "{lang}");
        for calls in [0, 1] {
            let v = a.fetch(&[id(0), id(1), id(7)]).unwrap();
            assert_eq!(
                v[0].values.as_ref().unwrap()[0].value,
                Atom::Uint(1),
                "{lang}"
            );
            assert_eq!(
                v[1].values.as_ref().unwrap()[0].value,
                Atom::Uint(calls),
                "{lang}"
            );
            assert_eq!(v[2].values, Err(NsError::UnknownPmid), "{lang}");
        }
        // A bad parameter is refused, naming it.
        let err = format!(
            "{:#}",
            super::load_agent(&wasm, &name, r#"{"domain": 0}"#)
                .err()
                .expect("refused")
        );
        assert!(err.contains("`domain`"), "{lang}: {err}");
    }
}

#[test]
fn check_describes_agents_and_transformers_and_links_them() {
    let (accepted, text) = check(&crate::common::guest_path("foo"), &[]);
    assert!(accepted, "{text}");
    assert!(
        text.contains("implements wasmon:collector/agent@0.1.0"),
        "{text}"
    );
    assert!(text.contains("wasmon:collector/namespace@0.1.0"), "{text}");
    let (accepted, text) = check(&built("c", "clamp"), &[]);
    assert!(accepted, "{text}");
    assert!(text.contains("wasmon:collector/transform@0.1.0"), "{text}");
    // The C SDK's agents: the agent world's exports, linked.
    let (accepted, text) = check(&built("c", "dyn_agent"), &[]);
    assert!(accepted, "{text}");
    assert!(
        text.contains("implements wasmon:collector/agent@0.1.0"),
        "{text}"
    );
    assert!(text.contains("wasmon:collector/metrics@0.1.0"), "{text}");
    assert!(text.contains("accepted"), "{text}");
    // componentize-py's Python guests import WASI the linker has (cli, io, clocks...).
    let (accepted, text) = check(&built("python", "zscore"), &["--no-link"]);
    assert!(accepted, "{text}");
    assert!(text.contains("wasi:cli/"), "{text}");
}

/// Makes `dir` hold `fresh`'s files, keeping its build outputs (`target/`, `.wasmon/`) and the
/// modification times of unchanged files (so cargo rebuilds nothing either).
fn refresh(fresh: &Path, dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let keep = e.file_name() == "target" || e.file_name() == ".wasmon";
        if !keep && !fresh.join(e.file_name()).exists() {
            let p = e.path();
            if p.is_dir() {
                std::fs::remove_dir_all(&p).unwrap();
            } else {
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
    copy_tree(fresh, dir);
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_name() == ".wasmon" {
            continue; // the build refreshes it
        } else if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            let bytes = std::fs::read(e.path()).unwrap();
            if std::fs::read(&dest).ok().as_deref() != Some(&bytes[..]) {
                std::fs::write(&dest, bytes).unwrap();
            }
        }
    }
}

fn component(dir: &Path, name: &str, wat: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, wat::parse_str(wat).unwrap()).unwrap();
    path
}

#[test]
fn check_names_a_missing_export_a_foreign_import_and_another_version() {
    let dir = tempfile::tempdir().unwrap();
    let empty = component(dir.path(), "empty.wasm", "(component)");
    let (accepted, text) = check(&empty, &[]);
    assert!(!accepted);
    assert!(
        text.contains("missing export") && text.contains("wasmon:collector/transform@0.1.0"),
        "{text}"
    );

    let http = component(
        dir.path(),
        "http.wasm",
        r#"(component (import "wasi:http/types@0.2.3" (instance)))"#,
    );
    let (accepted, text) = check(&http, &[]);
    assert!(!accepted);
    assert!(
        text.contains("imports wasi:http/types@0.2.3, which this runtime does not provide"),
        "{text}"
    );

    let other = component(
        dir.path(),
        "v2.wasm",
        r#"(component (instance $i) (export "wasmon:collector/transform@0.2.0" (instance $i)))"#,
    );
    let (accepted, text) = check(&other, &[]);
    assert!(!accepted);
    assert!(
        text.contains("another version of wasmon:collector") && text.contains("transform@0.2.0"),
        "{text}"
    );

    let (accepted, text) = check(&dir.path().join("missing.wasm"), &[]);
    assert!(!accepted && text.contains("missing.wasm"), "{text}");
    std::fs::write(dir.path().join("junk.wasm"), b"not wasm").unwrap();
    let (accepted, text) = check(&dir.path().join("junk.wasm"), &[]);
    assert!(
        !accepted && text.contains("not a WebAssembly file"),
        "{text}"
    );
}

/// The JS toolchain's default (no `-d http fetch-event`) imports wasi:http: refused at check
/// and at load, naming the import. Built once per source change, kept under target/.
#[test]
fn a_js_component_importing_wasi_http_is_refused_naming_the_import() {
    ensure_system_toolchain("js");
    let template = built("js", "template"); // installs componentize-js if needed
    let stage = template.parent().unwrap().join(".stage-template");
    let out = work().join("js-with-http.wasm");
    if !out.exists() {
        let exe = toolchains().join("js/node_modules/.bin/componentize-js");
        let status = run(std::process::Command::new(exe)
            .arg(stage.join("src/app.js"))
            .arg("-w")
            .arg(stage.join("wit"))
            .args(["-n", "transformer", "-o"])
            .arg(&out)
            .current_dir(stage.join("src")));
        ok(&status, "componentize-js without -d http");
    }
    let (accepted, text) = check(&out, &[]);
    assert!(!accepted, "{text}");
    assert!(text.contains("imports wasi:http/"), "{text}");
    assert!(text.contains("-d http -d fetch-event"), "{text}");

    // Loading refuses it too, naming the import (the linker's own words).
    let rt = super::cached_runtime();
    let compiled = rt
        .compile(&std::fs::read(&out).unwrap(), "js-with-http")
        .unwrap();
    let err = wasmon::host::Image::<wasmon::host::TransformerWorld>::load(
        &rt,
        &compiled,
        wasmon::host::GuestConfig::new("js-with-http", "{}"),
    )
    .err()
    .expect("refused");
    let err = format!("{err:#}");
    assert!(err.contains("wasi:http/"), "{err}");
}
