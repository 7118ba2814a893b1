//! The bundled guest agents that read /proc and /sys through read-only directory grants:
//! what a bundled agent brings to its `[[agent]]` entry, and `when-present`.

use serde_json::Value;

use crate::common::*;

fn fetch(d: &DaemonProcess, name: &str) -> Value {
    d.get(&format!("/api/fetch?name={name}"))
        .unwrap()
        .json()
        .unwrap()
}

#[test]
fn a_bundled_agent_needs_only_its_name_and_when_present_is_checked_at_every_reload() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("hw")).unwrap();
    // `foo` brings its domain (44) and PMNS; the grant and when-present are this test's.
    let config = config_file(
        dir.path(),
        &format!(
            "{NO_PROCFS}[[agent]]\nname = \"foo\"\nguest = \"foo\"\nwhen-present = \"/hw/card0\"\n\
             grants = {{ dirs = [{{ host = \"hw\", guest = \"/hw\" }}] }}\n"
        ),
    );
    let d = DaemonProcess::start(&config);
    let ops = |d: &DaemonProcess| fetch(d, "foo.count.ops")[0]["values"][0][1].as_f64();
    assert_eq!(ops(&d), None, "not run while /hw/card0 is absent");
    assert!(
        d.stderr.lock().unwrap().contains("does not exist"),
        "the log says why"
    );

    std::fs::write(dir.path().join("hw/card0"), "").unwrap();
    let outcome = d.reload();
    assert!(
        outcome.to_string().contains("foo"),
        "started at the reload: {outcome}"
    );
    assert!(ops(&d).is_some(), "{}", fetch(&d, "foo.count.ops"));

    std::fs::remove_file(dir.path().join("hw/card0")).unwrap();
    d.reload();
    assert_eq!(ops(&d), None, "stopped at the next reload");
}
