//! The daemon's log as an operator's tooling sees it: no colour codes in a pipe, JSON lines
//! with `--log-format json` or `[log] format`, the level from `[log] level` and `RUST_LOG`.

use std::path::Path;

use serde_json::Value;

use crate::common::*;

fn config(dir: &Path, log: &str) -> std::path::PathBuf {
    config_file(
        dir,
        &format!("\n[[pipeline]]\nname = \"p\"\nsinks = [\"log\"]\n\n[log]\n{log}\n"),
    )
}

/// Starts the daemon, posts a sample (the `log` sink logs it at info), stops it, and returns
/// its stderr.
fn run(config: &Path, adjust: impl FnOnce(&mut std::process::Command)) -> String {
    let mut d = DaemonProcess::start_with(config, adjust);
    assert_eq!(
        d.post("/api/pipelines/p/samples", r#"{"name":"m","value":1}"#)
            .status(),
        200
    );
    assert_eq!(d.post("/api/pipelines/p/flush", "").status(), 200);
    d.signal("-TERM");
    let status = d.child.wait().unwrap();
    assert!(status.success(), "{status}");
    // The reader thread may still be copying the last lines.
    std::thread::sleep(std::time::Duration::from_millis(200));
    d.stderr.lock().unwrap().clone()
}

fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

#[test]
fn text_log_in_a_pipe_has_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "level = \"info\"");
    let log = run(&cfg, |c| {
        c.env_remove("RUST_LOG").env_remove("NO_COLOR");
    });
    assert!(log.contains("HTTP API listening"), "{log}");
    assert!(log.contains(" INFO "), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "ANSI escape in a piped log:\n{log:?}"
    );
}

#[test]
fn json_from_config_at_the_configured_level() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "level = \"debug\"\nformat = \"json\"");
    let log = run(&cfg, |c| {
        c.env_remove("RUST_LOG");
    });
    let lines = json_lines(&log);
    let level = |l: &Value| l["level"].as_str().unwrap_or("").to_string();
    assert!(lines.iter().any(|l| level(l) == "DEBUG"), "{log}");
    let listening = lines
        .iter()
        .find(|l| l["message"] == "HTTP API listening")
        .unwrap_or_else(|| panic!("{log}"));
    // Fields at the top level, for log shippers.
    assert!(listening["addr"].as_str().is_some(), "{listening}");
    assert!(listening["timestamp"].as_str().is_some(), "{listening}");
}

#[test]
fn flag_and_rust_log_override_config() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "level = \"debug\"\nformat = \"text\"");
    let log = run(&cfg, |c| {
        c.args(["--log-format", "json"]).env("RUST_LOG", "warn");
    });
    let lines = json_lines(&log);
    assert!(!lines.is_empty());
    for l in &lines {
        let level = l["level"].as_str().unwrap();
        assert!(
            level == "WARN" || level == "ERROR",
            "RUST_LOG=warn let through {l}"
        );
    }
    // The unauthenticated-API warning is logged at every start without a key.
    assert!(
        lines.iter().any(|l| l["message"]
            .as_str()
            .is_some_and(|m| m.contains("unauthenticated"))),
        "{log}"
    );
}

#[test]
fn a_bad_level_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "level = \"loud\"");
    let err = output_err(
        std::process::Command::new(crate::common::wasmon_bin())
            .args(["config", "check"])
            .arg(&cfg),
    );
    assert!(err.contains("log.level") && err.contains("loud"), "{err}");
}

/// Issue 33: the log says once, at start, which config runs with which pipelines, agents and
/// sinks (the default config, with a forwarding sink added).
#[test]
fn the_start_up_log_says_once_which_config_pipelines_agents_and_sinks_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("wasmon.toml");
    let sink =
        "\n[[sink]]\nname = \"central\"\ntype = \"http\"\nurl = \"http://127.0.0.1:9/api/write\"\n";
    std::fs::write(&cfg, format!("{}{sink}", wasmon::config::DEFAULT)).unwrap();
    let mut d = DaemonProcess::start_with(&cfg, |c| {
        c.args(["--log-format", "json"]).env_remove("RUST_LOG");
    });
    d.signal("-TERM");
    assert!(d.child.wait().unwrap().success());
    std::thread::sleep(std::time::Duration::from_millis(200));
    let log = d.stderr.lock().unwrap().clone();
    let running: Vec<Value> = json_lines(&log)
        .into_iter()
        .filter(|l| l["message"] == "running")
        .collect();
    assert_eq!(running.len(), 1, "{log}");
    let r = &running[0];
    assert_eq!(r["config"], cfg.display().to_string(), "{r}");
    assert_eq!(
        r["pipelines"],
        "memory [arithmetic] -> store, notify; cpu [arithmetic > rate_of_change] -> store, \
         notify; host -> store, notify",
        "{r}"
    );
    let agents = r["agents"].as_str().unwrap();
    for a in [
        "linux (native linux, domain 60, every 10s -> host)",
        "proc (native proc, domain 3)",
        "foo (guest foo, domain 44)",
        "mmv (guest mmv, domain 70)",
    ] {
        assert!(agents.contains(a), "{a} not in {agents}");
    }
    assert_eq!(
        r["sinks"], "central (http http://127.0.0.1:9/api/write)",
        "{r}"
    );
}
