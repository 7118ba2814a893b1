//! Issue 33: the README's examples run as written on the default config. The fenced `sh`
//! blocks that talk to the daemon (`curl localhost:8082/...`, `wasmon ns`, `wasmon fetch`,
//! `wasmon notify`) are taken from README.md and run by `sh` against a daemon on the
//! embedded config, with only the address changed; a line with a placeholder (`[--opt]`,
//! `HANDLE`, a pid of the writer's machine) or one that never ends (`watch`) is left out
//! there, and run by the threshold example's own test (a process of its own for the pid).

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{DaemonProcess, dies_with_test, output_ok};

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap()
}

/// A daemon on the embedded default config, with `wasmon` (the binary under test) first on
/// the `PATH` the README's lines run with.
struct OnDefault {
    d: DaemonProcess,
    dir: tempfile::TempDir,
    path: String,
    url: String,
}

impl OnDefault {
    fn start() -> OnDefault {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("wasmon.toml");
        std::fs::write(&config, wasmon::config::DEFAULT).unwrap();
        let d = DaemonProcess::start(&config);
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(crate::common::wasmon_bin(), bin.join("wasmon")).unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let url = format!("http://127.0.0.1:{}", d.port);
        OnDefault { d, dir, path, url }
    }

    /// `sh -e -c script` with the daemon's address for `localhost:8082`.
    fn sh(&self, script: &str) -> std::process::Output {
        let script = script.replace("localhost:8082", &format!("127.0.0.1:{}", self.d.port));
        self.command(&script).output().unwrap()
    }

    fn command(&self, script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-e", "-c", script])
            .env("PATH", &self.path)
            .env("WASMON_URL", &self.url)
            .current_dir(self.dir.path());
        c
    }
}

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
    let blocks: Vec<String> = sh_blocks(&readme())
        .iter()
        .filter_map(|b| runnable(b))
        .collect();
    assert!(blocks.len() >= 4, "README blocks found: {blocks:?}");
    let on = OnDefault::start();
    let d = &on.d;
    // cpu_util needs two polls of the linux agent (10 s apart).
    let start = Instant::now();
    while !d
        .get("/api/healthcheck")
        .is_ok_and(|r| r.status().is_success())
        || !has_cpu_util(d)
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no cpu_util within 60 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    let mut failures = Vec::new();
    for block in &blocks {
        let out = on.sh(block);
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

/// Threads of the busy process the threshold example is run against: above the README's 40.
const THREADS: usize = 45;

/// The README's "Thresholds and processes" block, line by line, on the default config: its
/// `notify add` thresholds fire for a process with [`THREADS`] threads (the example's pid
/// replaced by that process's), `watch` prints them with RFC 3339 times, `value` answers the
/// tracked thread count, `ls` lists every threshold in aligned columns, `rm` deletes one.
#[test]
fn the_readmes_threshold_example_fires_on_the_default_config() {
    let readme = readme();
    let block = sh_blocks(&readme)
        .into_iter()
        .find(|b| b.contains("wasmon notify add"))
        .expect("the README's notify block");
    let lines: Vec<&str> = block
        .lines()
        .filter(|l| l.starts_with("wasmon notify "))
        .collect();
    let line = |what: &str| -> Vec<String> {
        lines
            .iter()
            .filter(|l| {
                l.starts_with(&format!("wasmon notify {what} "))
                    || **l == format!("wasmon notify {what}")
            })
            .map(|l| l.split("  ").next().unwrap().trim().to_string())
            .collect()
    };
    let (adds, ls, value, rm, watch) = (
        line("add"),
        line("ls"),
        line("value"),
        line("rm"),
        line("watch"),
    );
    assert!(
        adds.len() == 2 && ls.len() == 1 && value.len() == 1 && rm.len() == 1 && watch.len() == 1,
        "{block}"
    );

    // A process with more threads than the example's threshold.
    let mut busy = Command::new("python3");
    busy.args([
        "-c",
        &format!(
            "import threading, time\n\
             for _ in range({THREADS}): threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n\
             print('ready', flush=True)\n\
             time.sleep(600)"
        ),
    ])
    .stdout(Stdio::piped());
    dies_with_test(&mut busy);
    let mut busy = KillOnDrop(busy.spawn().unwrap());
    let mut ready = String::new();
    std::io::BufReader::new(busy.0.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    let pid = busy.0.id().to_string();
    let with_pid = |l: &str| l.replace("4768", &pid);

    let on = OnDefault::start();
    let run = |l: &str| String::from_utf8(output_ok(&mut on.command(l)).stdout).unwrap();
    // The process reader's detectors own thresholds of their own (subscriber wasmon.procfs).
    let before = run(&ls[0]).lines().count();
    let handles: Vec<String> = adds
        .iter()
        .map(|l| run(&with_pid(l)).trim().to_string())
        .collect();
    // Another subscriber's thresholds, so that handles of one and two digits share the table.
    for v in 0..9 {
        run(&format!(
            "wasmon notify add --subscriber other proc.mem.rss --above {v}e12"
        ));
    }
    let mut watch = on.command(&watch[0]);
    watch.stdout(Stdio::piped()).stderr(Stdio::null());
    dies_with_test(&mut watch);
    let mut watching = KillOnDrop(watch.spawn().unwrap());
    let (tx, rx) = crossbeam_channel::unbounded();
    let out = watching.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    // Both thresholds fire for the busy process (the process reader reads every 5 s).
    let mut fired = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fired.len() < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        let l = rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "fired within 30 s: {fired:?}; stderr:\n{}",
                on.d.stderr.lock().unwrap()
            )
        });
        // `2026-11-27T20:41:07.123Z handle=1 proc.thread.count/PID value=46 rising 40`
        let (at, rest) = l.split_once(' ').unwrap();
        chrono::DateTime::parse_from_rfc3339(at).unwrap_or_else(|e| panic!("{l}: {e}"));
        let fields: Vec<&str> = rest.split(' ').collect();
        if fields[1] != format!("proc.thread.count/{pid}") {
            continue; // another process above 40 threads on this machine
        }
        let handle = fields[0].strip_prefix("handle=").unwrap();
        let value: f64 = fields[2].strip_prefix("value=").unwrap().parse().unwrap();
        assert!(value > THREADS as f64, "{l}");
        assert_eq!(&fields[3..], ["rising", "40"], "{l}");
        fired.insert(handle.to_string());
    }
    assert_eq!(fired, handles.iter().cloned().collect(), "both thresholds");

    // The tracked value, once a sample reached the notifier (it has: both fired).
    let v: f64 = run(&with_pid(&value[0])).trim().parse().unwrap();
    assert!(v > THREADS as f64, "{v}");

    // Every threshold, in columns: text starts under its header, numbers end under theirs.
    let table = run(&ls[0]);
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), before + 2 + 9, "{table}");
    let header = rows[0];
    for (col, right) in [
        ("HANDLE", true),
        ("OWNER", false),
        ("METRIC", false),
        ("INSTANCE", false),
        ("VALUE", true),
    ] {
        let at = header.find(col).unwrap();
        for r in &rows[1..] {
            let ok = if right {
                let end = at + col.len();
                r.len() >= end
                    && r.as_bytes()[end - 1] != b' '
                    && r.as_bytes().get(end).is_none_or(|&b| b == b' ')
            } else {
                r.as_bytes()[at] != b' ' && r.as_bytes()[at - 1] == b' '
            };
            assert!(ok, "column {col} misaligned:\n{table}");
        }
    }
    assert!(
        rows.iter()
            .any(|r| r.split_whitespace().next() == Some("10")),
        "{table}"
    );
    assert!(rows.iter().any(|r| r.contains(&pid)), "{table}");

    // `rm HANDLE` with the instance threshold's handle.
    let gone = run(&rm[0].replace("HANDLE", &handles[1]));
    assert_eq!(gone.trim(), format!("deleted {}", handles[1]));
    assert_eq!(run(&ls[0]).lines().count(), rows.len() - 1);
}

/// A child killed when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
