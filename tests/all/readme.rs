//! Issue 33: the README's examples run as written on the default config. The fenced `sh`
//! blocks that talk to the daemon (`curl localhost:8082/...`, `wasmon ns`, `wasmon fetch`,
//! `wasmon notify`) are taken from README.md and run by `sh` against a daemon on the
//! embedded config, with only the address changed; a line with a placeholder (`[--opt]`,
//! `HANDLE`, a pid of the writer's machine) or one that never ends (`watch`) is left out.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::DaemonProcess;

/// The `sh` blocks of the README, in order.
fn sh_blocks(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = readme;
    while let Some(start) = rest.find("```sh\n") {
        let body = &rest[start + 6..];
        let Some(end) = body.find("```") else { break };
        out.push(body[..end].to_string());
        rest = &body[end + 3..];
    }
    out
}

/// The lines of `block` this test runs, or `None` when the block is not the daemon's.
fn runnable(block: &str) -> Option<String> {
    if block.contains("localhost:8082/api/") {
        return Some(block.to_string());
    }
    let lines: Vec<&str> = block
        .lines()
        .filter(|l| {
            let cli = ["wasmon ns ", "wasmon fetch ", "wasmon notify "]
                .iter()
                .any(|p| l.starts_with(p));
            cli && !l.contains('[')
                && !l.contains("HANDLE")
                && !l.contains(" watch ")
                && !l.contains("4768")
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

#[test]
fn the_readmes_daemon_examples_run_as_written_on_the_default_config() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let blocks: Vec<String> = sh_blocks(&readme)
        .iter()
        .filter_map(|b| runnable(b))
        .collect();
    assert!(blocks.len() >= 4, "README blocks found: {blocks:?}");

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("wasmon.toml");
    std::fs::write(&config, wasmon::config::DEFAULT).unwrap();
    let d = DaemonProcess::start(&config);
    // `wasmon` on PATH is the binary under test.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(crate::common::wasmon_bin(), bin.join("wasmon")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let url = format!("http://127.0.0.1:{}", d.port);
    // cpu_util needs two polls of the linux agent (10 s apart).
    let start = Instant::now();
    while !d
        .get("/api/healthcheck")
        .is_ok_and(|r| r.status().is_success())
        || !has_cpu_util(&d)
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no cpu_util within 60 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    let mut failures = Vec::new();
    for block in &blocks {
        let script = block.replace("localhost:8082", &format!("127.0.0.1:{}", d.port));
        let out = Command::new("sh")
            .args(["-e", "-c", &script])
            .env("PATH", &path)
            .env("WASMON_URL", &url)
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let answered_error = stdout.contains("\"error\":") || stdout.contains("\"error\" :");
        if !out.status.success() || answered_error || stdout.trim().is_empty() {
            failures.push(format!(
                "--- block:\n{block}\n--- status {}\n--- stdout:\n{stdout}\n--- stderr:\n{stderr}",
                out.status
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn has_cpu_util(d: &DaemonProcess) -> bool {
    let now = chrono::Utc::now().timestamp();
    let host = wasmon::util::hostname();
    let body = serde_json::json!({
        "cluster": "local", "from": now - 60, "to": now + 1, "with-padding": false,
        "queries": [{"metric": "cpu_util", "host": host}]
    });
    let r = d.post("/api/query", &body.to_string());
    r.text()
        .is_ok_and(|t| t.contains("\"data\"") && !t.contains("\"error\""))
}
