//! `wasmon run` as a user runs it: the real binary, a config file, a guests directory.

use std::path::Path;

use serde_json::Value;

use crate::common::*;

fn write_config(dir: &Path, watch: &str, tag: &str, mode: &str) -> std::path::PathBuf {
    config_file(
        dir,
        &format!(
            r#"guests-dir = "guests"
watch-interval = "{watch}"

[[pipeline]]
name = "p"
sinks = ["stdout"]

[[pipeline.transformer]]
guest = "probe"
params = {{ tag = "{tag}", mode = "{mode}" }}
"#
        ),
    )
}

/// A directory with `guests/probe.wasm` (the `testing` guest) and a config on it: the
/// directory (to keep) and the config's path.
fn probe_dir(watch: &str, tag: &str, mode: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("guests")).unwrap();
    std::fs::write(dir.path().join("guests/probe.wasm"), guest_bytes("testing")).unwrap();
    let config = write_config(dir.path(), watch, tag, mode);
    (dir, config)
}

fn stage_hash(d: &DaemonProcess) -> String {
    let v: Value = d.get("/api/pipelines").unwrap().json().unwrap();
    v[0]["stages"][0]["hash"].as_str().unwrap().to_string()
}

fn post_one(d: &DaemonProcess, value: f64) -> Value {
    let r = d.post(
        "/api/pipelines/p/samples",
        &format!(r#"{{"name":"m","resource":"r","value":{value}}}"#),
    );
    assert_eq!(r.status(), 200);
    d.next_sample()
}

#[test]
fn a_changed_guest_file_is_swapped_in_and_a_broken_one_is_refused() {
    let (dir, config) = probe_dir("100ms", "v1", "passthrough");
    let probe = dir.path().join("guests/probe.wasm");
    let d = DaemonProcess::start(&config);

    assert_eq!(post_one(&d, 1.0)["metadata"]["version"], "v1");
    let first = stage_hash(&d);

    // Swap in another component (the template passes samples through untagged).
    replace_file(&probe, &guest_bytes("template"));
    d.wait_for("the new component", || stage_hash(&d) != first);
    let out = post_one(&d, 2.0);
    assert_eq!(out["value"], 2.0);
    assert!(out["metadata"].get("version").is_none(), "{out}");
    let second = stage_hash(&d);

    // A broken file: refused with a clear reason, the running version keeps serving.
    replace_file(&probe, b"this is not a component");
    let r = d.post("/api/admin/reload", "");
    assert_eq!(r.status(), 422);
    let outcome: Value = r.json().unwrap();
    let error = outcome["pipelines"]["p"]["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        error.contains("not a valid WebAssembly component") && error.contains("probe.wasm"),
        "{error}"
    );
    assert_eq!(stage_hash(&d), second);
    assert_eq!(post_one(&d, 3.0)["value"], 3.0);

    let metrics = d.get("/metrics").unwrap().text().unwrap();
    assert!(
        metrics.contains("wasmon_pipeline_guest_swaps_total{pipeline=\"p\"} 1"),
        "{metrics}"
    );
}

#[test]
fn sighup_reloads_the_config_and_sigterm_flushes_before_exit() {
    // The watcher is too slow to matter: only SIGHUP reloads.
    let (dir, config) = probe_dir("1h", "v1", "hold");
    let mut d = DaemonProcess::start(&config);

    let r = d.post(
        "/api/pipelines/p/samples",
        "{\"name\":\"m\",\"value\":1}\n{\"name\":\"m\",\"value\":2}\n",
    );
    assert_eq!(r.status(), 200);
    write_config(dir.path(), "1h", "v2", "hold");
    d.signal("-HUP");
    // The swap flushes the held samples of v1; then v2 is in place.
    let a = d.next_sample();
    let b = d.next_sample();
    assert_eq!(
        (a["value"].as_f64(), b["value"].as_f64()),
        (Some(1.0), Some(2.0))
    );
    assert_eq!(a["metadata"]["version"], "v1");

    let r = d.post("/api/pipelines/p/samples", "{\"name\":\"m\",\"value\":3}");
    assert_eq!(r.status(), 200);
    d.signal("-TERM");
    let status = d.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let last = d.next_sample();
    assert_eq!(
        (last["value"].as_f64(), &last["metadata"]["version"]),
        (Some(3.0), &Value::from("v2")),
        "held sample flushed at exit"
    );
}

#[test]
fn bad_samples_are_named_by_line_and_good_ones_kept() {
    let (_dir, config) = probe_dir("1h", "v1", "passthrough");
    let d = DaemonProcess::start(&config);
    let r = d.post("/api/pipelines/p/samples", "{\"name\":\"m\",\"value\":1}\n{\"name\":\"m\",\"value\":\"x\"}\nnot json\n{\"name\":\"m\",\"value\":4}\n");
    assert_eq!(r.status(), 400);
    let body: Value = r.json().unwrap();
    assert_eq!(body["accepted"], 2);
    let errors = body["errors"].as_array().unwrap();
    assert!(
        errors[0].as_str().unwrap().starts_with("line 2:")
            && errors[1].as_str().unwrap().starts_with("line 3:"),
        "{body}"
    );
    assert_eq!(d.next_sample()["value"], 1.0);
    assert_eq!(d.next_sample()["value"], 4.0);
    assert_eq!(d.post("/api/pipelines/nope/samples", "{}").status(), 404);
}

#[test]
fn a_config_with_an_unknown_field_is_refused_at_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    // The reason `wasmon run` gives for refusing `toml` as its config.
    let refused = |toml: &str| {
        std::fs::write(&config, toml).unwrap();
        refused_start(&config)
    };
    let err = refused("[daemon]\nlisten = \"127.0.0.1:0\"\nwatch-intervall = \"1s\"\n");
    assert!(
        err.contains("watch-intervall") && err.contains("bad.toml"),
        "{err}"
    );

    let err = refused(
        "[[pipeline]]\nname = \"p\"\n[[pipeline.transformer]]\nguest = \"no-such-guest\"\n",
    );
    assert!(
        err.contains("no guest named \\\"no-such-guest\\\"")
            || err.contains("no guest named \"no-such-guest\""),
        "{err}"
    );
}

#[test]
fn the_embedded_default_config_starts() {
    let dir = tempfile::tempdir().unwrap();
    // No --config: the embedded default, with its data-dir relative to the working directory.
    let port = free_port();
    let mut child = std::process::Command::new(crate::common::wasmon_bin())
        .args(["run", "--listen", &format!("127.0.0.1:{port}")])
        .current_dir(dir.path())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/api/pipelines");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let pipelines: Value = loop {
        if let Ok(r) = reqwest::blocking::get(&url) {
            break r.json().unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "default config did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let names: Vec<&str> = pipelines
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["cpu", "host", "memory"]);
    assert!(
        dir.path().join("wasmon-data/components").is_dir(),
        "compiled guests cached under the data dir"
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
}

/// Issue 22 item 9: on its own default config, with nothing posted, the daemon computes this
/// host's memory_util (arithmetic over the linux agent's memory figures) and cpu_util
/// (rate_of_change and arithmetic over its per-CPU counters) within one poll interval of the
/// polls they need (one for memory, two for a rate), and shows both in the store, in
/// `/metrics` and in the list the live view picks its chart from, which opens on cpu_util.
#[test]
fn the_default_config_computes_memory_and_cpu_utilisation_from_this_host() {
    let dir = tempfile::tempdir().unwrap();
    // The embedded default as `wasmon config default` prints it (data-dir beside it).
    let config = dir.path().join("wasmon.toml");
    std::fs::write(&config, wasmon::config::DEFAULT).unwrap();
    let d = DaemonProcess::start(&config);
    let get = |path: &str| {
        d.get(path)
            .ok()
            .filter(|r| r.status().is_success())
            .and_then(|r| r.text().ok())
            .unwrap_or_default()
    };
    let host = hostname();
    let store_path = format!("/api/ui/store?path=local:{host}");
    // Two polls 10 s apart make the first rate; allow one more interval for a loaded machine.
    let up = std::time::Instant::now();
    let listed = |text: &str, m: &str| text.contains(&format!("\"name\":\"{m}\""));
    let (metrics, store) = loop {
        let metrics = get("/metrics");
        let store = get(&store_path);
        if metrics.contains("\nwasmon_memory_util{") && metrics.contains("\nwasmon_cpu_util{") {
            break (metrics, store);
        }
        assert!(
            up.elapsed().as_secs() < 30,
            "no memory_util/cpu_util after {:?}; store lists {store}",
            up.elapsed()
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    };
    // `name{labels} value [timestamp]`
    let value = |name: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{")))
            .and_then(|l| l.split_once("} "))
            .and_then(|(_, rest)| rest.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {metrics}"))
    };
    // The store's values carry the `wasmon_` prefix in the exposition.
    for m in ["wasmon_memory_util", "wasmon_cpu_util"] {
        let v = value(m);
        assert!((0.0..=100.5).contains(&v), "{m} = {v}");
    }
    // The store, as the live view lists it: memory_util at the host, cpu_util per CPU.
    assert!(listed(&store, "memory_util"), "{store}");
    assert!(listed(&store, "cpu_util"), "{store}");
    let q = serde_json::json!({"cluster": "local", "from": 0, "to": i64::MAX / 2,
        "queries": [{"metric": "memory_util", "host": host}]});
    let r: Value =
        serde_json::from_str(&d.post("/api/query", &q.to_string()).text().unwrap()).unwrap();
    assert!(
        r["results"][0][0]["data"]
            .as_array()
            .is_some_and(|d| !d.is_empty()),
        "{r}"
    );
    // The live view opens on cpu_util when no metric is asked for.
    assert!(get("/ui/app.js").contains(r#"PREFERRED_METRICS = ["cpu_util""#));
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}
