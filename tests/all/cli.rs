//! The CLI as a guest author uses it.

use std::io::Write;
use std::process::Command;

use serde_json::Value;

use crate::common::spawn_piped;

fn transform(args: &[&str], stdin: &str) -> (Option<i32>, Vec<Value>, String) {
    transform_bytes(args, stdin.as_bytes())
}

fn transform_bytes(args: &[&str], stdin: &[u8]) -> (Option<i32>, Vec<Value>, String) {
    let mut child = spawn_piped(
        Command::new(crate::common::wasmon_bin())
            .arg("transform")
            .args(args),
    );
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (
        out.status.code(),
        lines,
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn transform_runs_a_bundled_guest_over_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("p.yaml");
    std::fs::write(&params, "target:\n  name: memory_util\n  unit: '%'\n  type: gauge\n  expr: 100 * $(memory.usage) / $(memory)\n").unwrap();
    let input = [
        r#"{"name":"memory","resource":"h1","value":1024,"unit":"MB","type":"gauge","timestamp":"2024-05-01T10:00:00Z"}"#,
        r#"{"name":"memory.usage","resource":"h1","value":256,"type":"gauge","timestamp":1714557600,"metadata":{"host":"h1"}}"#,
        r#"{"name":"memory","resource":"h2","value":"lots"}"#,
        r#"{"flush": true}"#,
        r#"{"name":"memory","resource":"h2","value":100,"timestamp":1714557700}"#,
        "{not json",
        r#"{"name":"memory.usage","resource":"h2","value":50,"timestamp":1714557700}"#,
    ]
    .join("\n");
    let (code, out, err) = transform(
        &[
            "--guest",
            "arithmetic",
            "--params",
            params.to_str().unwrap(),
        ],
        &input,
    );
    assert_eq!(out.len(), 2, "{out:?} / {err}");
    assert_eq!(
        (
            out[0]["name"].as_str(),
            out[0]["value"].as_f64(),
            out[0]["unit"].as_str()
        ),
        (Some("memory_util"), Some(25.0), Some("%"))
    );
    assert_eq!(out[0]["resource"], "h1");
    assert_eq!(out[0]["timestamp"], "2024-05-01T10:00:00Z");
    assert_eq!(
        (out[1]["resource"].as_str(), out[1]["value"].as_f64()),
        (Some("h2"), Some(50.0)),
        "end of input flushes"
    );
    assert!(err.contains("line 3:") && err.contains("`value`"), "{err}");
    assert!(err.contains("line 6:"), "{err}");
    assert_eq!(
        code,
        Some(1),
        "malformed lines make the exit status non-zero"
    );
}

#[test]
fn transform_reports_bad_params_and_unknown_guests() {
    let dir = tempfile::tempdir().unwrap();
    let params = dir.path().join("p.json");
    std::fs::write(&params, r#"{"target": {"expr": "512 * 3"}}"#).unwrap();
    let (code, out, err) = transform(
        &[
            "--guest",
            "arithmetic",
            "--params",
            params.to_str().unwrap(),
        ],
        "",
    );
    assert_eq!(code, Some(2));
    assert!(out.is_empty());
    assert!(err.contains("configure refused"), "{err}");

    let (code, _, err) = transform(&["--guest", "no_such"], "");
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no guest named") && err.contains("arithmetic"),
        "{err}"
    );

    let wasm = crate::common::guest_path("template");
    let (code, out, _) = transform(
        &["--guest", wasm.to_str().unwrap()],
        r#"{"name":"x","value":7}"#,
    );
    assert_eq!(
        (code, out[0]["value"].as_f64()),
        (Some(0), Some(7.0)),
        "a guest by path"
    );
}

#[test]
fn config_default_is_the_documented_embedded_config() {
    let out = Command::new(crate::common::wasmon_bin())
        .args(["config", "default"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text, wasmon::config::DEFAULT);
    wasmon::config::Config::parse(&text).unwrap();
    // Every field is documented: the line before each `key = value` line (outside the
    // transformer's params) is a comment.
    let lines: Vec<&str> = text.lines().collect();
    let mut seen = std::collections::HashSet::new();
    for (i, line) in lines.iter().enumerate() {
        let key = line.split('=').next().unwrap().trim();
        let documented_key = [
            "listen",
            "data-dir",
            "guests-dir",
            "watch-interval",
            "deadline",
            "memory",
            "quarantine-after",
            "flush-interval",
            "sinks",
        ];
        if line.contains('=')
            && !line.starts_with('#')
            && documented_key.contains(&key)
            && seen.insert(key)
        {
            assert!(lines[i - 1].starts_with('#'), "{key} is not documented");
        }
    }
}

#[test]
fn transform_fails_when_a_guest_call_fails_and_skips_a_line_that_is_not_utf8() {
    let testing = crate::common::guest_path("testing");
    let guest = testing.to_str().unwrap();
    let mut input = b"{\"name\":\"a\",\"value\":1}\n".to_vec();
    input.extend_from_slice(b"{\"name\":\"\xff\xfe\",\"value\":2}\n");
    input.extend_from_slice(b"{\"name\":\"b\",\"value\":3}\n");
    let (code, out, err) = transform_bytes(&["--guest", guest], &input);
    assert_eq!(code, Some(1), "a bad line makes the run fail: {err}");
    assert!(err.contains("line 2: not UTF-8"), "{err}");
    let names: Vec<&str> = out.iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b"], "the run went on past the bad line");

    let input = "{\"name\":\"ok\",\"value\":1}\n{\"name\":\"test.trap\",\"value\":1}\n";
    let (code, _, err) = transform(&["--guest", guest], input);
    assert_eq!(
        code,
        Some(1),
        "a failed guest call makes the run fail: {err}"
    );
    assert!(err.contains("the guest failed"), "{err}");
}

#[test]
fn transform_abandons_a_sleeping_guest_at_its_deadline() {
    use std::io::BufRead;
    let testing = crate::common::guest_path("testing");
    let mut child = spawn_piped(
        Command::new(crate::common::wasmon_bin())
            .args(["transform", "--deadline", "100ms", "--guest"])
            .arg(&testing),
    );
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    // A first sample through: the guest is compiled and running.
    writeln!(stdin, r#"{{"name":"warm","value":1}}"#).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("warm"), "{line}");
    let start = std::time::Instant::now();
    writeln!(stdin, r#"{{"name":"test.sleep","value":4}}"#).unwrap();
    let mut err = String::new();
    stderr.read_line(&mut err).unwrap();
    let took = start.elapsed();
    assert!(err.contains("deadline"), "{err}");
    assert!(
        took < std::time::Duration::from_millis(500),
        "a 4 s sleep took {took:?} to be reported"
    );
    drop(stdin);
    assert_eq!(child.wait().unwrap().code(), Some(1));
}

#[test]
fn transform_says_once_how_many_log_lines_a_guest_lost() {
    // Issue 22 item 10: a guest writing 50,000 lines in one call shows the per-call cap's
    // 100, and the run ends with one line naming the guest, the count lost and why.
    let testing = crate::common::guest_path("testing");
    let guest = testing.to_str().unwrap();
    let input = "{\"name\":\"test.stderr\",\"value\":50000}\n";
    let (code, out, err) = transform(&["--deadline", "30s", "--guest", guest], input);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.len(), 1);
    let shown = err.lines().filter(|l| l.contains("xxxxxxxx")).count();
    assert_eq!(shown, 100, "{}", &err[err.len().saturating_sub(2000)..]);
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("not shown")).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].contains(&format!("{guest}: 49900 log line(s) not shown"))
            && notes[0].contains("at most 100 lines"),
        "{}",
        notes[0]
    );
    // Nothing lost, nothing said.
    let (_, _, err) = transform(&["--guest", guest], "{\"name\":\"a\",\"value\":1}\n");
    assert!(!err.contains("not shown"), "{err}");
}
