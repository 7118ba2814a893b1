//! Bad sink configuration, each kind the issue names: `wasmon config check` fails naming the
//! field, `wasmon run` refuses to start naming it, and a reload to it on a running daemon is
//! refused (422) naming it while the running sink keeps delivering, nothing lost.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::rig::*;
use crate::common::*;

/// A node whose pipeline `host` forwards to `central_port`; `extra` is appended, `edit`
/// changes the text (the bad part of each case).
fn config(data: &Path, central_port: u16, edit: impl Fn(String) -> String) -> String {
    edit(format!(
        "[daemon]\ndata-dir = \"{}\"\n\n[[pipeline]]\nname = \"host\"\nsinks = [\"up\"]\n\n\
         [[sink]]\nname = \"up\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{central_port}/api/write\"\nmax-backoff = \"200ms\"\n",
        data.display()
    ))
}

/// (what, the field the error must name, the bad value it must show, the edit)
type Case = (
    &'static str,
    &'static str,
    &'static str,
    fn(String) -> String,
);

const CASES: &[Case] = &[
    ("a URL that does not parse", "url", "http://[::1", |c| {
        let at = c.find("url = ").unwrap();
        let end = at + c[at..].find('\n').unwrap();
        format!("{}url = \"http://[::1/api/write\"{}", &c[..at], &c[end..])
    }),
    ("an unknown type", "type", "kafka", |c| {
        c.replace("type = \"http\"", "type = \"kafka\"")
    }),
    (
        "a missing token file",
        "token-file",
        "/nonexistent/token",
        |c| c + "token-file = \"/nonexistent/token\"\n",
    ),
    ("a stream name NATS refuses", "stream", "a.b", |c| {
        c + "\n[[sink]]\nname = \"js\"\ntype = \"jetstream\"\nurl = \"nats://127.0.0.1:4222\"\nsubject = \"fwd.lp\"\nstream = \"a.b\"\n"
    }),
    ("a sink named like a built-in", "name", "store", |c| {
        c + "\n[[sink]]\nname = \"store\"\ntype = \"http\"\nurl = \"http://127.0.0.1:1/api/write\"\n"
    }),
    (
        "a pipeline naming an undefined sink",
        "sinks",
        "nowhere",
        |c| c.replace("sinks = [\"up\"]", "sinks = [\"up\", \"nowhere\"]"),
    ),
];

fn assert_names(what: &str, text: &str, field: &str, value: &str) {
    assert!(
        text.contains(field) && text.contains(value),
        "{what}: the error does not name {field} ({value}): {text}"
    );
}

/// `wasmon run` on `config`: must exit unsuccessfully; returns its stderr.
pub(super) fn run_refused(config: &Path) -> String {
    let mut child = Command::new(crate::common::wasmon_bin())
        .args(["run", "--config"])
        .arg(config)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("wasmon run started with a bad config: {}", config.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    assert!(!status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn bad_sink_config_is_refused_at_check_start_and_reload() {
    let tmp = tempfile::tempdir().unwrap();
    let central_port = free_port();
    let central = start_central(tmp.path(), Some(central_port));
    let node_toml = tmp.path().join("node.toml");
    let good = config(&tmp.path().join("node"), central_port, |c| c);
    std::fs::write(&node_toml, &good).unwrap();
    let node = DaemonProcess::start(&node_toml);
    let base = chrono::Utc::now().timestamp() - 3600;
    let per_case = HOSTS;
    let mut posted = 0u64;
    let mut post = |n: u64| {
        post_hosts(&node, posted..posted + n, base);
        posted += n;
    };
    post(per_case);

    for (i, (what, field, value, edit)) in CASES.iter().enumerate() {
        // `config check` and `run` with a data directory of their own.
        let file = tmp.path().join(format!("bad-{i}.toml"));
        std::fs::write(
            &file,
            config(&tmp.path().join(format!("bad-{i}")), central_port, edit),
        )
        .unwrap();
        let check = Command::new(crate::common::wasmon_bin())
            .args(["config", "check"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(!check.status.success(), "{what}: config check passed");
        assert_names(what, &String::from_utf8_lossy(&check.stderr), field, value);
        assert_names(what, &run_refused(&file), field, value);

        // The running node: the same edit to its own config, then a reload.
        replace_file(&node_toml, edit(good.clone()).as_bytes());
        let r = node.post("/api/admin/reload", "");
        assert_eq!(r.status(), 422, "{what}");
        assert_names(what, &r.text().unwrap(), field, value);
        // The sink as it was, still delivering.
        post(per_case);
        let s = sink(&node, "up");
        assert!(
            s["url"]
                .as_str()
                .unwrap()
                .ends_with(&format!(":{central_port}/api/write"))
        );
    }
    let statuses: serde_json::Value = node.get("/api/sinks").unwrap().json().unwrap();
    assert_eq!(statuses["sinks"].as_array().unwrap().len(), 1, "{statuses}");
    wait_until(
        "the node delivered everything",
        Duration::from_secs(30),
        || sink(&node, "up")["sent-samples"] == posted,
    );
    let values = central_values(&central, base, base + (posted / HOSTS) as i64);
    assert_all_there("central", &[(0, posted)], &values, base);
}
