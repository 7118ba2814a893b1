//! Issue 33: Debian's real Prometheus (2.42) scraping `/metrics` of a daemon on the embedded
//! default config: nothing dropped, counters typed counters with HELP, an exited process's
//! series gone within a few intervals.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{DaemonProcess, ensure_debian_package, free_port, prometheus_command};

/// A `prometheus` server scraping one target every second, with its own storage in a tempdir.
struct Prometheus {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target_port: u16) -> Prometheus {
        ensure_debian_package("prometheus", || Path::new("/usr/bin/prometheus").exists());
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: wasmon\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let mut cmd = prometheus_command(&config, &dir.path().join("data"), port);
        cmd.stderr(std::fs::File::create(dir.path().join("log")).unwrap());
        let p = Prometheus {
            child: cmd.spawn().unwrap(),
            port,
            _dir: dir,
        };
        p.wait("Prometheus ready", Duration::from_secs(60), || {
            reqwest::blocking::get(p.url("/-/ready")).is_ok_and(|r| r.status().is_success())
        });
        p
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("log")).unwrap_or_default()
    }

    fn wait(&self, what: &str, within: Duration, mut ok: impl FnMut() -> bool) {
        let start = Instant::now();
        while !ok() {
            assert!(
                start.elapsed() < within,
                "{what}: not within {within:?}; prometheus log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// An instant query's result vector.
    fn query(&self, q: &str) -> Vec<Value> {
        let r: Value = reqwest::blocking::Client::new()
            .get(self.url("/api/v1/query"))
            .query(&[("query", q)])
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(r["status"], "success", "{q}: {r}");
        r["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// A counter of Prometheus' own `/metrics` (summed over its series).
    fn own(&self, name: &str) -> f64 {
        let text = reqwest::blocking::get(self.url("/metrics"))
            .unwrap()
            .text()
            .unwrap();
        let found: Vec<f64> = text
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
            .collect();
        assert!(!found.is_empty(), "no {name} in Prometheus' own metrics");
        found.iter().sum()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn default_daemon(dir: &Path) -> DaemonProcess {
    let config = dir.join("wasmon.toml");
    std::fs::write(&config, wasmon::config::DEFAULT).unwrap();
    DaemonProcess::start(&config)
}

/// The done-when of issue 33's first part: Prometheus scraping the default config every
/// second drops nothing, sees counters as counters with HELP, and loses an exited process's
/// series within a few of its intervals.
#[test]
fn prometheus_scrapes_the_default_config_without_dropping_and_forgets_exited_processes() {
    let dir = tempfile::tempdir().unwrap();
    let d = default_daemon(dir.path());
    let prom = Prometheus::start(d.port);
    let started = Instant::now();
    prom.wait("the wasmon job up", Duration::from_secs(60), || {
        prom.query("up{job=\"wasmon\"} == 1").len() == 1
    });
    // A process that lives until we end it; its series appear in Prometheus.
    let mut short = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    let pid = short.id();
    let rss = format!("wasmon_proc_mem_rss_bytes{{pid=\"{pid}\"}}");
    prom.wait("the process's series", Duration::from_secs(60), || {
        !prom.query(&rss).is_empty()
    });
    let series = prom.query(&rss);
    assert_eq!(series[0]["metric"]["command"], "sleep", "{series:?}");
    // Counters as counters (Prometheus' metadata API), HELP on every wasmon family.
    let meta: Value = reqwest::blocking::get(prom.url("/api/v1/metadata"))
        .unwrap()
        .json()
        .unwrap();
    let meta = meta["data"].as_object().cloned().unwrap_or_default();
    let kind = |family: &str| -> String {
        meta.get(family)
            .and_then(|m| m[0]["type"].as_str())
            .unwrap_or_else(|| panic!("no metadata for {family}"))
            .to_string()
    };
    for counter in [
        "wasmon_kernel_all_cpu_user_seconds_total",
        "wasmon_kernel_all_pswitch_total",
        "wasmon_network_interface_in_bytes_total",
        "wasmon_proc_cpu_user_seconds_total",
        "wasmon_pipeline_samples_in_total",
    ] {
        assert_eq!(kind(counter), "counter", "{counter}");
    }
    for gauge in [
        "wasmon_kernel_all_load",
        "wasmon_mem_util_used_bytes",
        "wasmon_proc_mem_rss_bytes",
    ] {
        assert_eq!(kind(gauge), "gauge", "{gauge}");
    }
    let wasmon: Vec<_> = meta.keys().filter(|k| k.starts_with("wasmon_")).collect();
    assert!(wasmon.len() > 50, "{wasmon:?}");
    for family in &wasmon {
        assert!(
            meta[*family][0]["help"]
                .as_str()
                .is_some_and(|h| !h.is_empty()),
            "{family} has no HELP"
        );
    }
    // Instances by their PCP name; the load's three carry the linux agent's ids.
    let load = prom.query("wasmon_kernel_all_load");
    let names: Vec<&str> = load
        .iter()
        .filter_map(|s| s["metric"]["instname"].as_str())
        .collect();
    assert!(names.contains(&"1 minute"), "{load:?}");
    assert!(
        load.iter().all(|s| s["metric"]["instid"].is_string()),
        "{load:?}"
    );
    // The process ends: its series leave /metrics within a few of its intervals (5 s reads
    // into 10 s slots: 30 s), and Prometheus marks them stale at the first scrape without.
    short.kill().unwrap();
    short.wait().unwrap();
    let gone = Instant::now();
    prom.wait(
        "the exited process's series gone",
        Duration::from_secs(60),
        || prom.query(&rss).is_empty(),
    );
    let text = d.get("/metrics").unwrap().text().unwrap();
    assert!(!text.contains(&format!("pid=\"{pid}\"")), "still exposed");
    eprintln!(
        "exited process gone from Prometheus after {:?}",
        gone.elapsed()
    );
    // At least 20 s of scrapes every second, none refused or dropped.
    if let Some(rest) = Duration::from_secs(25).checked_sub(started.elapsed()) {
        std::thread::sleep(rest);
    }
    for dropped in [
        "prometheus_target_scrapes_sample_duplicate_timestamp_total",
        "prometheus_target_scrapes_sample_out_of_order_total",
        "prometheus_target_scrapes_sample_out_of_bounds_total",
        "prometheus_target_scrapes_exceeded_sample_limit_total",
    ] {
        assert_eq!(prom.own(dropped), 0.0, "{dropped}; log:\n{}", prom.log());
    }
    let scrapes = prom.query("count_over_time(up{job=\"wasmon\"}[1m])");
    let n: f64 = scrapes[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(n >= 20.0, "{n} scrapes");
    assert_eq!(prom.query("up{job=\"wasmon\"} == 0").len(), 0);
    assert!(!prom.log().contains("Error on ingesting"), "{}", prom.log());
}

/// promtool's linter (Prometheus' own naming rules: counters end in `_total`, units in base
/// units, snake case) finds nothing in the default config's exposition but PCP's `.count`.
#[test]
fn promtool_finds_nothing_to_lint_in_the_exposition() {
    ensure_debian_package("prometheus", || Path::new("/usr/bin/promtool").exists());
    let dir = tempfile::tempdir().unwrap();
    let d = default_daemon(dir.path());
    let mut text = String::new();
    d.wait_for("the linux agent's and process reader's series", || {
        text = d.get("/metrics").unwrap().text().unwrap();
        text.contains("wasmon_kernel_all_load{") && text.contains("wasmon_proc_mem_rss_bytes{")
    });
    let mut lint = std::process::Command::new("/usr/bin/promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    lint.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = lint.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The findings allowed: PCP's gauges named `.count` (`proc.thread.count`) or `...Total`
    // (`mem.util.hugepagesTotal`, a count of pages) keep the word, which promtool reserves
    // for a histogram's part or a counter: renaming them would hide the PCP name.
    let allowed = [
        "non-histogram and non-summary metrics should not have \"_count\" suffix",
        "non-counter metrics should not have \"_total\" suffix",
    ];
    let findings: Vec<&str> = said
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !allowed.iter().any(|a| l.ends_with(a)))
        .collect();
    assert!(findings.is_empty(), "promtool: {said}");
}
