//! The seed's `foo` example, end to end: every row of PCP's table in local and delegated mode,
//! offline (`--pmns`, `--agent`) and through the daemon; MMV files written by PCP's own writer
//! discovered live; an agent that traps does not disturb other subtrees.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::*;

const FOO_PMNS: &str =
    "root { foo }\nfoo {\n    version 44:0:1\n    count   44:*:*\n    memory  44:0:2\n}\n";

/// `wasmon ARGS --json`: (exit code, parsed stdout).
fn wasmon_json(args: &[&str]) -> (i32, Value) {
    let out = Command::new(crate::common::wasmon_bin())
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), v)
}

/// The seed's table, asked through `source` (CLI arguments selecting offline or a daemon).
fn check_table(source: &[&str], delegated: bool) {
    let q = |args: &[&str]| -> (i32, Value) {
        let mut all: Vec<&str> = args.to_vec();
        all.extend_from_slice(source);
        wasmon_json(&all)
    };
    let (code, v) = q(&[
        "ns",
        "lookup",
        "foo.count",
        "foo.count.ops",
        "foo.count.anything.else",
        "foo.version",
    ]);
    assert_eq!(code, 1, "some names fail: {v}");
    assert_eq!(v[0]["error"], "Metric name is not a leaf in PMNS");
    assert_eq!(v[3]["pmid"], "44.0.1");
    if delegated {
        assert_eq!(v[1]["pmid"], "44.1.0");
        assert_eq!(v[2]["error"], "Unknown metric name");
    } else {
        assert_eq!(v[1]["pmid"], "44.*.*");
        assert_eq!(v[2]["pmid"], "44.*.*");
    }

    let (_, v) = q(&["ns", "name", "44.1.0", "44.*.*", "44.0.2"]);
    if delegated {
        assert_eq!(v[0]["names"], json!(["foo.count.ops"]));
    } else {
        assert_eq!(v[0]["error"], "Unknown or illegal metric identifier");
    }
    assert_eq!(
        v[1]["error"], "Unknown or illegal metric identifier",
        "a dynamic root's PMID has no name"
    );
    assert_eq!(v[2]["names"], json!(["foo.memory"]));

    let (code, v) = q(&["ns", "children", "foo"]);
    assert_eq!(code, 0);
    assert_eq!(
        v["children"],
        json!([{"name": "version", "leaf": true}, {"name": "count", "leaf": false}, {"name": "memory", "leaf": true}])
    );

    let (_, v) = q(&["ns", "children", "foo.count"]);
    let kids: Vec<&str> = v["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    if delegated {
        assert_eq!(kids, ["ops", "errs", "numcount"]);
    } else {
        assert!(
            kids.is_empty(),
            "local mode: no descendants of a dynamic node: {v}"
        );
    }

    let (_, v) = q(&["ns", "traverse", "foo"]);
    let names: Vec<&str> = v["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    if delegated {
        assert_eq!(
            names,
            [
                "foo.version",
                "foo.count.ops",
                "foo.count.errs",
                "foo.count.numcount",
                "foo.memory"
            ]
        );
    } else {
        assert_eq!(names, ["foo.version", "foo.memory"]);
    }
}

#[test]
fn the_seed_table_offline_in_local_and_delegated_mode() {
    let dir = tempfile::tempdir().unwrap();
    let pmns = dir.path().join("foo.pmns");
    std::fs::write(&pmns, FOO_PMNS).unwrap();
    let pmns = pmns.to_str().unwrap();
    check_table(&["--pmns", pmns], false);
    let agent = format!("44={}", guest_path("foo").display());
    check_table(&["--pmns", pmns, "--agent", &agent], true);

    // Values change between fetches (each offline run is a fresh agent: fetch twice in one).
    let (code, v) = wasmon_json(&[
        "fetch",
        "foo.count.ops",
        "foo.count.ops",
        "foo",
        "--pmns",
        pmns,
        "--agent",
        &agent,
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v.as_array().unwrap().len(), 2 + 5);
    assert_eq!(v[0]["semantics"], "counter");
}

/// `/api/ns/lookup?name=NAME`'s answer for the one name.
fn lookup(d: &DaemonProcess, name: &str) -> Value {
    let v: Value = d
        .get(&format!("/api/ns/lookup?name={name}"))
        .unwrap()
        .json()
        .unwrap();
    v[0].clone()
}

fn daemon_with_agents(dir: &Path, extra: &str) -> DaemonProcess {
    let config = config_file(
        dir,
        &format!(
            r#"{NO_PROCFS}
[[agent]]
name = "foo"
guest = "foo"
domain = 44
pmns = """{FOO_PMNS}"""
{extra}
"#
        ),
    );
    DaemonProcess::start(&config)
}

#[test]
fn the_seed_table_through_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let d = daemon_with_agents(dir.path(), "");
    let url = d.url("");
    check_table(&["--url", &url], true);
    let ops = |d: &DaemonProcess| -> f64 {
        let v: Value = d
            .get("/api/fetch?name=foo.count.ops")
            .unwrap()
            .json()
            .unwrap();
        v[0]["values"][0][1].as_f64().unwrap()
    };
    let first = ops(&d);
    assert!(ops(&d) > first, "values change");
}

#[test]
fn an_agent_that_traps_answers_no_agent_for_that_call_only() {
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        r#"
[[agent]]
name = "bad"
guest = "{}"
domain = 77
pmns = "root {{ bar }}\nbar {{ dyn 77:*:* }}"
params = {{ domain = 77, root = "bar.dyn" }}
"#,
        guest_path("testing_agent").display()
    );
    let d = daemon_with_agents(dir.path(), &extra);
    let lookup = |name: &str| lookup(&d, name);
    assert_eq!(
        lookup("bar.dyn.trap")["error"],
        "No PMCD agent for domain of request"
    );
    assert_eq!(
        lookup("foo.count.ops")["pmid"],
        "44.1.0",
        "another agent's subtree is undisturbed"
    );
    assert_eq!(
        lookup("bar.dyn.good")["pmid"],
        "77.0.0",
        "the trapped agent serves the next call"
    );
    assert_eq!(
        lookup("bar.dyn.loop")["error"],
        "No PMCD agent for domain of request"
    );
    assert_eq!(lookup("foo.version")["pmid"], "44.0.1");
    let v: Value = d.get("/api/ns/traverse?prefix=").unwrap().json().unwrap();
    assert!(
        v["names"]
            .as_array()
            .unwrap()
            .contains(&json!("foo.count.ops")),
        "{v}"
    );
}

/// PCP's own MMV writer (Debian's python3-pcp), driven statement by statement.
struct MmvWriter {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

const PY_WRITER: &str = r#"
import os, sys, traceback
from pcp import mmv, pmapi
import cmmv
D = os.environ["DIR"]
def make(name):
    indom = mmv.mmv_indom(serial=1, shorttext="ports", helptext="ports")
    indom.set_instances([mmv.mmv_instance(0, "p0"), mmv.mmv_instance(1, "p1")])
    v = mmv.MemoryMappedValues(os.path.join(D, name), cluster=0)
    v.add_indoms([indom])
    ops = mmv.mmv_metric("ops", 1, cmmv.MMV_TYPE_U64, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(0,0,1,0,0,0), 0, "ops", "ops")
    ops.semantics = cmmv.MMV_SEM_COUNTER; ops.dimension = pmapi.pmUnits(0,0,1,0,0,0)
    port = mmv.mmv_metric("port.bytes", 2, cmmv.MMV_TYPE_U64, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(1,0,0,0,0,0), 1, "bytes", "bytes")
    port.semantics = cmmv.MMV_SEM_COUNTER; port.dimension = pmapi.pmUnits(1,0,0,0,0,0)
    v.add_metrics([ops, port])
    v.start()
    return v
F = {}
for line in sys.stdin:
    try:
        exec(line, globals())
        print("ok", flush=True)
    except Exception:
        print(traceback.format_exc().replace("\n", " | "), flush=True)
"#;

impl MmvWriter {
    fn start(dir: &Path) -> MmvWriter {
        ensure_debian_package("python3-pcp", || {
            Command::new("/usr/bin/python3")
                .args(["-c", "import pcp.mmv"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", PY_WRITER])
            .env("DIR", dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        MmvWriter {
            child,
            stdin,
            stdout,
        }
    }

    fn run(&mut self, statement: &str) {
        writeln!(self.stdin, "{statement}").unwrap();
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).unwrap();
        assert_eq!(answer.trim(), "ok", "python: {statement}");
    }
}

impl Drop for MmvWriter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn mmv_files_written_by_pcp_are_discovered_fetched_and_dropped_live() {
    let dir = tempfile::tempdir().unwrap();
    let mmv_dir = dir.path().join("mmv");
    std::fs::create_dir(&mmv_dir).unwrap();
    let extra = format!(
        r#"
[[agent]]
name = "mmv"
guest = "mmv"
domain = 70
pmns = "root {{ mmv 70:*:* }}"
grants = {{ mapped = [{{ name = "mmv", host = "{}" }}] }}
"#,
        mmv_dir.display()
    );
    let d = daemon_with_agents(dir.path(), &extra);
    let traverse = |d: &DaemonProcess| -> Vec<String> {
        let v: Value = d
            .get("/api/ns/traverse?prefix=mmv")
            .unwrap()
            .json()
            .unwrap();
        v["names"]
            .as_array()
            .map(|a| a.iter().map(|n| n.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    assert!(traverse(&d).is_empty());

    let mut w = MmvWriter::start(&mmv_dir);
    w.run(r#"F["app"] = make("app"); F["app"].lookup_add("ops", "", 41); F["app"].lookup_add("port.bytes", "p1", 7)"#);
    d.wait_for("the new file's names", || {
        traverse(&d) == ["mmv.app.ops", "mmv.app.port.bytes"]
    });
    let fetch =
        |d: &DaemonProcess| -> Value { d.get("/api/fetch?name=mmv.app").unwrap().json().unwrap() };
    let v = fetch(&d);
    assert_eq!(v[0]["values"], json!([["", 41]]), "{v}");
    assert_eq!(v[1]["values"], json!([["p0", 0], ["p1", 7]]), "{v}");

    w.run(r#"F["app"].lookup_inc("ops", ""); F["app"].lookup_add("port.bytes", "p0", 5)"#);
    let v = fetch(&d);
    assert_eq!(
        v[0]["values"],
        json!([["", 42]]),
        "values change in place: {v}"
    );
    assert_eq!(v[1]["values"], json!([["p0", 5], ["p1", 7]]));

    w.run(r#"F["app"].stop(); os.path.exists(os.path.join(D, "app")) and os.remove(os.path.join(D, "app"))"#);
    d.wait_for("the names to go", || traverse(&d).is_empty());
    let v: Value = d
        .get("/api/ns/lookup?name=mmv.app.ops")
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(v[0]["error"], "Unknown metric name");
}

#[test]
fn agents_are_hot_reloaded_and_a_broken_one_keeps_the_old() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("guests")).unwrap();
    let agent_file = dir.path().join("guests/dyn.wasm");
    std::fs::write(&agent_file, guest_bytes("testing_agent")).unwrap();
    let write_config = |root: &str| {
        config_file(
            dir.path(),
            &format!(
                r#"guests-dir = "guests"
watch-interval = "100ms"
{NO_PROCFS}[[agent]]
name = "dyn"
guest = "dyn"
domain = 77
pmns = "root {{ bar baz }}\nbar {{ dyn 77:*:* }}\nbaz {{ dyn 77:*:* }}"
params = {{ domain = 77, root = "{root}" }}
"#
            ),
        )
    };
    let d = DaemonProcess::start(&write_config("bar.dyn"));
    let lookup = |name: &str| lookup(&d, name);
    assert_eq!(lookup("bar.dyn.good")["pmid"], "77.0.0");
    assert_eq!(lookup("baz.dyn.good")["error"], "Unknown metric name");

    // New parameters: the agent is replaced, its subtree answers differently.
    write_config("baz.dyn");
    d.wait_for("the reconfigured agent", || {
        lookup("baz.dyn.good")["pmid"] == "77.0.0"
    });
    assert_eq!(lookup("bar.dyn.good")["error"], "Unknown metric name");

    // A broken component file: refused, the running agent keeps answering.
    replace_file(&agent_file, b"not a component");
    let r = d.post("/api/admin/reload", "");
    assert_eq!(r.status(), 422);
    let outcome: Value = r.json().unwrap();
    assert!(
        outcome["agents_error"]
            .as_str()
            .unwrap()
            .contains("dyn.wasm"),
        "{outcome}"
    );
    assert_eq!(lookup("baz.dyn.good")["pmid"], "77.0.0");
}

/// `wasmon fetch --agent 60=linux --root DIR`: the native linux agent reads a captured tree
/// offline; a root that is not a directory is refused naming it.
#[test]
fn offline_linux_agent_reads_a_captured_root() {
    let root = tempfile::tempdir().unwrap();
    let w = |rel: &str, text: &str| {
        let p = root.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w("proc/loadavg", "7.50 1.25 0.05 4/321 999\n");
    w(
        "proc/stat",
        "cpu  300 0 30 900 0 0 0 0 0 0\ncpu0 100 0 10 300 0 0 0 0 0 0\n\
         cpu1 100 0 10 300 0 0 0 0 0 0\ncpu7 100 0 10 300 0 0 0 0 0 0\nctxt 5\n",
    );
    let r = root.path().to_str().unwrap();
    let (code, v) = wasmon_json(&[
        "fetch",
        "--agent",
        "60=linux",
        "--root",
        r,
        "kernel.all.load",
        "hinv.ncpu",
        "kernel.percpu.cpu.user",
        "mem.physmem",
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v[0]["values"][0], json!(["1 minute", 7.5]));
    assert_eq!(v[1]["values"][0][1], json!(3));
    assert_eq!(v[2]["values"][2], json!(["cpu7", 1000]));
    // No meminfo in the tree: no value, not an error.
    assert_eq!(v[3]["values"], json!([]));

    let out = Command::new(crate::common::wasmon_bin())
        .args([
            "fetch",
            "--agent",
            "60=linux",
            "--root",
            "/nonexistent/tree",
            "hinv.ncpu",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/tree") && err.contains("not a directory"),
        "{err}"
    );
}
