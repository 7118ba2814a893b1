//! The process reader and the notifier inside the daemon: a configured global limit ("any
//! process, fd count above 40") fires once for a process that opens 50 files, and the
//! notification reaches a subscriber through `wasmon notify watch`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::*;

#[test]
fn a_global_fd_limit_fires_once_naming_the_pid() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_file(
        dir.path(),
        r#"[procfs]
interval = "200ms"
limits = [{ resource = "fd-count", value = 40 }]
"#,
    );
    let d = DaemonProcess::start(&config);
    let mut watch = Command::new(crate::common::wasmon_bin())
        .args([
            "notify",
            "--url",
            &d.url(""),
            "watch",
            "--subscriber",
            "wasmon.procfs",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(watch.stdout.take().unwrap());
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for line in lines.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(500));

    // A process holding 50 more descriptors open, then sleeping.
    let mut holder = Command::new("/usr/bin/python3")
        .args([
            "-c",
            "import time; fds = [open('/dev/null') for _ in range(50)]; time.sleep(30)",
        ])
        .spawn()
        .unwrap();
    let pid = holder.id().to_string();

    let mut fired = Vec::new();
    let mut seen = Vec::new();
    let mut deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(std::time::Duration::from_millis(200)) {
            let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            if line.contains("proc.fd.count") && line.contains(&format!("\"{pid}\"")) {
                if fired.is_empty() {
                    // Ten more polls: it must not fire again while the fds stay open.
                    deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                }
                fired.push(v);
            } else {
                seen.push(line);
            }
        }
    }
    let _ = holder.kill();
    let _ = holder.wait();
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(
        fired.len(),
        1,
        "fired {} times for pid {pid}: {fired:?}; other events: {seen:?}",
        fired.len()
    );
}
