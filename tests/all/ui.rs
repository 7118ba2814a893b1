//! The live view in real browsers: the daemon with data in it (a guest pipeline, components'
//! series, 100k series in a second cluster), the page opened headless in Debian's `chromium`
//! (through playwright-core) and Debian's `firefox-esr` (through puppeteer-core over WebDriver
//! BiDi), a notification fired while it is open. Both drivers come from npm, with no browser
//! download. The page's findings come back as JSON (`ui/check.js`, one script for both) and are
//! judged here, the same way for each browser.
//!
//! The screenshots go to `<target>/tmp/live-view.png` and `<target>/tmp/live-view-firefox.png`.
//! The README's `docs/live-view.png` is the page on the embedded default config
//! (`the_live_view_on_the_default_config_shows_this_hosts_own_data`, with
//! `WASMON_UPDATE_SCREENSHOT=1`).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// A browser the page is checked in, and what drives it.
struct Driver {
    /// check.js's first argument.
    name: &'static str,
    debian_package: &'static str,
    executable: &'static str,
    /// The npm package that drives it, pinned (only its JS: it uses `executable`).
    npm: &'static str,
    screenshot: &'static str,
}

const CHROMIUM: Driver = Driver {
    name: "chromium",
    debian_package: "chromium",
    executable: "/usr/bin/chromium",
    npm: "playwright-core@1.65.1",
    screenshot: "live-view.png",
};

/// playwright-core's own BiDi Firefox (channel `moz-firefox`) launches firefox-esr 153 but
/// fails at the first page: it needs `emulation.setMediaFeaturesOverride`, which that Firefox
/// does not have. puppeteer-core 24 (node >= 18; 25 wants node 22) drives it over BiDi.
const FIREFOX: Driver = Driver {
    name: "firefox",
    debian_package: "firefox-esr",
    executable: "/usr/bin/firefox-esr",
    npm: "puppeteer-core@24.43.1",
    screenshot: "live-view-firefox.png",
};

/// The whole browser session (two pages, the waits in check.js are 60 s each at most).
const BROWSER_BUDGET: Duration = Duration::from_secs(240);
const BIG_HOSTS: usize = 1000;
const BIG_METRICS: usize = 100;

const CONFIG: &str = r#"
[daemon]
data-dir = "data"
cluster = "test"

[[pipeline]]
name = "memory"
sinks = ["store"]
[[pipeline.transformer]]
guest = "arithmetic"
[pipeline.transformer.params.target]
name = "memory_util"
unit = "%"
type = "gauge"
expr = "100 * $(memory.usage) / $(memory)"

[[pipeline]]
name = "alerts"
sinks = ["notify", "store", "upstream"]

# A forwarding sink whose destination is down: the live view shows it failing, queuing.
[[sink]]
name = "upstream"
type = "http"
url = "http://127.0.0.1:9/api/write"

[[agent]]
name = "foo"
guest = "foo"
domain = 44
pmns = """
root { foo }
foo {
    version 44:0:1
    count   44:*:*
    memory  44:0:2
}
"""

[store]
default-frequency = 10
"#;

/// Installs what `driver` needs (apt, npm) and returns the node dir with check.js in it. The
/// two browser tests run in parallel: apt and npm into one prefix must not, so one at a time.
fn ensure_tools(driver: &Driver) -> PathBuf {
    static SETUP: Mutex<()> = Mutex::new(());
    let _one = SETUP.lock().unwrap_or_else(|e| e.into_inner());
    ensure_debian_package(driver.debian_package, || {
        Path::new(driver.executable).exists()
    });
    let has = |cmd: &str| {
        std::process::Command::new(cmd)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    ensure_debian_package("nodejs", || has("node"));
    ensure_debian_package("npm", || has("npm"));
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ui-node");
    let (package, version) = driver.npm.rsplit_once('@').unwrap();
    let installed =
        std::fs::read_to_string(dir.join(format!("node_modules/{package}/package.json")))
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .is_some_and(|p| p["version"] == version);
    if !installed {
        std::fs::create_dir_all(&dir).unwrap();
        let ok = std::process::Command::new("npm")
            .args([
                "install",
                "--save-exact",
                "--no-audit",
                "--no-fund",
                "--prefix",
            ])
            .arg(&dir)
            .arg(driver.npm)
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "npm install {} failed (it drives {})",
            driver.npm, driver.name
        );
    }
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/all/ui/check.js"),
        dir.join("check.js"),
    )
    .unwrap();
    dir
}

fn write(d: &DaemonProcess, cluster: &str, body: &str) {
    let r = d.post(&format!("/api/write?cluster={cluster}"), body);
    assert_eq!(r.status(), 200, "{}", r.text().unwrap_or_default());
}

/// Cluster `test`: node1-3, each with `load` at the host and `cpu_load` on cpu0-3, ten
/// minutes of 10 s steps. Cluster `big`: 1,000 hosts x 100 metrics = 100k series.
fn fill_store(d: &DaemonProcess, now: i64) {
    let mut body = String::new();
    for node in 1..=3 {
        for step in 0..60 {
            let ts = now - 600 + step * 10;
            let wave = ((step as f64) / 6.0).sin();
            body += &format!(
                "load,hostname=node{node},type=node value={} {ts}\n",
                1.0 + wave
            );
            for cpu in 0..4 {
                let v = 20.0 * cpu as f64 + 10.0 * wave + node as f64;
                body += &format!(
                    "cpu_load,hostname=node{node},type=cpu,type-id={cpu} value={v} {ts}\n"
                );
            }
        }
    }
    write(d, "test", &body);
    for chunk in 0..10 {
        let mut body = String::new();
        for h in chunk * BIG_HOSTS / 10..(chunk + 1) * BIG_HOSTS / 10 {
            for m in 0..BIG_METRICS {
                for ts in [now - 20, now - 10] {
                    body += &format!("m{m:02},hostname=host{h:04} value={} {ts}\n", h + m);
                }
            }
        }
        write(d, "big", &body);
    }
}

/// `<target>/tmp/NAME`, with no screenshot of an earlier run in it.
fn fresh_screenshot(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// Runs check.js in `browser` on the page `mode` names (`fixture` or `default`); when it says
/// "ready", `fire` runs; returns its JSON report.
fn drive_browser(
    dir: &Path,
    browser: &str,
    mode: &str,
    base: &str,
    screenshot: &Path,
    fire: impl FnOnce(),
) -> Value {
    use std::os::unix::process::CommandExt;
    let mut child = std::process::Command::new("node")
        .arg(dir.join("check.js"))
        .arg(browser)
        .arg(base)
        .arg(screenshot)
        .arg(mode)
        .current_dir(dir)
        // Its own process group: on a timeout the browser goes with node.
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + BROWSER_BUDGET;
    let mut fire = Some(fire);
    let report = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line == "ready" => (fire.take().unwrap())(),
            Ok(line) if line.starts_with('{') => break serde_json::from_str(&line).unwrap(),
            Ok(other) => eprintln!("check.js: {other}"),
            Err(e) => {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .status();
                let _ = child.wait();
                match e {
                    crossbeam_channel::RecvTimeoutError::Timeout => {
                        panic!("the {browser} session did not finish within {BROWSER_BUDGET:?}")
                    }
                    crossbeam_channel::RecvTimeoutError::Disconnected => {
                        panic!("check.js ({browser}) ended without a report")
                    }
                }
            }
        }
    };
    let _ = child.wait();
    report
}

/// The daemon with data, the page in `driver`'s browser, everything it must show judged.
fn check_live_view(driver: &Driver) {
    let started = Instant::now();
    let dir = ensure_tools(driver);
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("wasmon.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let d = DaemonProcess::start(&config);
    let now = chrono::Utc::now().timestamp();
    fill_store(&d, now);
    // The arithmetic guest gets called: its counters show on the page.
    let r = d.post(
        "/api/pipelines/memory/samples",
        "{\"name\":\"memory\",\"resource\":\"node1\",\"value\":1024,\"unit\":\"MB\"}\n\
         {\"name\":\"memory.usage\",\"resource\":\"node1\",\"value\":512,\"unit\":\"MB\"}\n",
    );
    assert_eq!(r.status(), 200);
    assert_eq!(d.post("/api/pipelines/memory/flush", "").status(), 200);
    let r = reqwest::blocking::Client::new()
        .post(d.url("/api/notify/thresholds"))
        .json(&serde_json::json!({"subscriber": "ui-test", "metric": "temp", "value": 50.0, "direction": "rising"}))
        .send()
        .unwrap();
    assert_eq!(r.status(), 201);

    let screenshot = fresh_screenshot(driver.screenshot);
    let session = Instant::now();
    let report = drive_browser(
        &dir,
        driver.name,
        "fixture",
        &d.url(""),
        &screenshot,
        || {
            // While the page is open: temp goes from 20 to 80, crossing the threshold.
            for (i, v) in [20.0, 80.0].into_iter().enumerate() {
                let line = format!(
                    "{{\"name\":\"temp\",\"resource\":\"rack1\",\"value\":{v},\"timestamp\":{}}}",
                    now - 2 + i as i64
                );
                assert_eq!(d.post("/api/pipelines/alerts/samples", &line).status(), 200);
                assert_eq!(d.post("/api/pipelines/alerts/flush", "").status(), 200);
            }
        },
    );
    eprintln!(
        "{}: browser session {:.1?}, whole check {:.1?}\n{report:#}",
        driver.name,
        session.elapsed(),
        started.elapsed()
    );
    assert_eq!(
        report["errors"],
        serde_json::json!([]),
        "{}: {report:#}",
        driver.name
    );
    // The notification stream shows live before its first keep-alive (15 s): a browser that
    // resolves fetch() only at the first body byte (Firefox) needs the server's opening comment.
    let live = report["stream_live_ms"].as_u64().unwrap();
    assert!(live < 10_000, "the stream went live after {live} ms");

    let pipelines: Vec<&str> = report["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(pipelines, ["alerts", "memory"]);
    let memory_row = report["guests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == "memory")
        .unwrap();
    // guest, health, calls (at least configure's instance and the handle + flush calls).
    assert_eq!(memory_row[5], "memory[0]:arithmetic", "{memory_row}");
    assert_eq!(memory_row[6], "ok", "{memory_row}");
    assert!(memory_row[7].as_str().unwrap().parse::<u64>().unwrap() >= 2);
    assert_eq!(memory_row[10].as_str().unwrap().len(), 12, "component hash");

    // The chart: one line per component of node1, each with the ten minutes written.
    let series = report["series"].as_array().unwrap();
    let names: Vec<&str> = series.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(
        names,
        ["node1/cpu0", "node1/cpu1", "node1/cpu2", "node1/cpu3"]
    );
    for s in series {
        assert!(s["points"].as_u64().unwrap() >= 55, "{s}");
    }
    // cpu3 of node1 = 60 + 10 sin(59/6) + 1.
    let last = series[3]["last"].as_f64().unwrap();
    let expected = 61.0 + 10.0 * (59.0f64 / 6.0).sin();
    assert!((last - expected).abs() < 1e-6, "{last} vs {expected}");

    let notes: Vec<&str> = report["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("temp[rack1] = 80") && n.contains("rose above 50")),
        "{notes:?}"
    );
    assert!(report["fetched"].as_str().unwrap().contains("foo.version"));
    assert_eq!(report["agents"], serde_json::json!(["foo"]));
    // The Forwarding card: the sink, failing (nothing listens on port 9), its samples queued.
    let sink = &report["sinks"][0];
    assert!(sink[0].as_str().unwrap().starts_with("upstream"), "{sink}");
    assert_eq!(sink[2], "failing", "{sink}");
    assert!(!sink[3].as_str().unwrap().starts_with("0 "), "{sink}");
    assert!(sink[9].as_str().unwrap().contains("127.0.0.1:9"), "{sink}");
    // Sorted by RSS: the first row is at least as large as the last (units differ: parse).
    let rss: Vec<f64> = report["procs_by_mem"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| parse_size(r.as_str().unwrap()))
        .collect();
    assert!(
        rss.len() > 1 && rss.windows(2).all(|w| w[0] >= w[1]),
        "{rss:?}"
    );

    // 100k series: the page lists at most 200 hosts and says how many there are.
    assert_eq!(report["big_host_options"], 200);
    assert_eq!(
        report["big_host_count"],
        "200 of 1000 hosts shown (filter to narrow)"
    );
    assert_eq!(report["big_metric_options"], BIG_METRICS);
    assert_eq!(report["big_filtered_options"], 100);

    let png = std::fs::read(&screenshot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000);
}

#[test]
fn live_view_shows_pipelines_a_live_chart_and_a_notification() {
    check_live_view(&CHROMIUM);
}

/// What a user of the embedded default config sees on opening `/` (the README's screenshot):
/// this host's own `cpu_util` charted, the default pipelines and agents, its processes. With
/// `WASMON_UPDATE_SCREENSHOT=1` it waits for five minutes of data (the chart's window) and
/// writes the page to `docs/live-view.png`.
#[test]
fn the_live_view_on_the_default_config_shows_this_hosts_own_data() {
    let update = std::env::var_os("WASMON_UPDATE_SCREENSHOT").is_some_and(|v| v == "1");
    let dir = ensure_tools(&CHROMIUM);
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("wasmon.toml");
    std::fs::write(&config, wasmon::config::DEFAULT).unwrap();
    let d = DaemonProcess::start_with(&config, |c| {
        c.current_dir(tmp.path());
    });
    if update {
        std::thread::sleep(Duration::from_secs(300));
    }
    let screenshot = fresh_screenshot("live-view-default.png");
    // check.js waits (60 s at most) for the chart's second point: cpu_util is a rate of the
    // linux agent's 10 s polls.
    let report = drive_browser(
        &dir,
        CHROMIUM.name,
        "default",
        &d.url(""),
        &screenshot,
        || {},
    );
    eprintln!("default config:\n{report:#}");
    assert_eq!(report["errors"], serde_json::json!([]), "{report:#}");
    assert_eq!(report["cluster"], "local", "{report:#}");
    assert_eq!(
        report["host"],
        wasmon::util::hostname().as_str(),
        "{report:#}"
    );
    // The page opens on the load (cpu_util, a rate, has no value yet) and moves to cpu_util.
    assert_eq!(report["metric"], "cpu_util", "{report:#}");
    assert_eq!(report["metric_drawn"], "cpu_util", "{report:#}");
    let series = report["series"].as_array().unwrap();
    assert_eq!(series.len(), 1, "the host's own series: {report:#}");
    assert!(series[0]["points"].as_u64().unwrap() >= 2, "{report:#}");
    let last = series[0]["last"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&last), "cpu_util {last}");
    let strings = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let pipelines = strings("pipelines");
    for p in ["memory", "cpu", "host"] {
        assert!(pipelines.iter().any(|x| x == p), "{pipelines:?}");
    }
    let agents = strings("agents");
    for a in ["linux", "proc", "foo", "mmv"] {
        assert!(agents.iter().any(|x| x == a), "{agents:?}");
    }
    assert!(report["procs"].as_u64().unwrap() > 1, "{report:#}");
    let png = std::fs::read(&screenshot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000);
    if update {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::write(docs.join("live-view.png"), &png).unwrap();
    }
}

/// The same page, the same checks, in Debian's firefox-esr.
#[test]
fn live_view_works_in_firefox() {
    check_live_view(&FIREFOX);
}

/// "1.5 MiB" -> bytes.
fn parse_size(s: &str) -> f64 {
    let (n, unit) = s.split_once(' ').unwrap();
    let n: f64 = n.parse().unwrap();
    let k = match unit {
        "B" => 0,
        "KiB" => 1,
        "MiB" => 2,
        "GiB" => 3,
        _ => 4,
    };
    n * 1024f64.powi(k)
}

#[test]
fn ui_routes_share_the_api_auth() {
    use base64::Engine;
    let tmp = tempfile::tempdir().unwrap();
    // Any valid Ed25519 public key: no token can be made for it here, so every data route
    // must refuse, while the page (static, no data) is served.
    let key = base64::engine::general_purpose::STANDARD.encode(
        ed25519_dalek::SigningKey::from_bytes(&[3; 32])
            .verifying_key()
            .to_bytes(),
    );
    let d = DaemonProcess::with_config(
        tmp.path(),
        &format!("\n[api]\njwt-public-key = \"{key}\"\n"),
    );
    let page = d.get("/").unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().unwrap().contains("<title>wasmon</title>"));
    assert_eq!(d.get("/ui/app.js").unwrap().status(), 200);
    for route in [
        "/api/ui/overview",
        "/api/ui/store",
        "/api/ui/ps",
        "/api/ui/thresholds",
        "/api/ui/notifications",
        "/api/ui/notifications/stream",
    ] {
        assert_eq!(d.get(route).unwrap().status(), 401, "{route}");
        let r = reqwest::blocking::Client::new()
            .get(d.url(route))
            .bearer_auth("not.a.token")
            .send()
            .unwrap();
        assert_eq!(r.status(), 401, "{route} with a bad token");
    }
    // A token signed with the key: the page's data routes answer.
    let token = {
        use ed25519_dalek::Signer;
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let claims = serde_json::json!({"sub": "ui", "exp": chrono::Utc::now().timestamp() + 600});
        let msg = format!(
            "{}.{}",
            b64(br#"{"alg":"EdDSA","typ":"JWT"}"#),
            b64(claims.to_string().as_bytes())
        );
        let sig = ed25519_dalek::SigningKey::from_bytes(&[3; 32]).sign(msg.as_bytes());
        format!("{msg}.{}", b64(&sig.to_bytes()))
    };
    for route in ["/api/ui/overview", "/api/ui/store", "/api/ui/thresholds"] {
        let r = reqwest::blocking::Client::new()
            .get(d.url(route))
            .bearer_auth(&token)
            .send()
            .unwrap();
        assert_eq!(r.status(), 200, "{route} with a valid token");
    }
}
