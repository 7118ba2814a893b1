//! pmproxy (Debian's, unchanged) in front of wasmon: its REST API is what grafana-pcp's
//! Vector data source and pmseries read, and it identifies a metric by a `series` hash of the
//! metric's descriptor and labels, so wasmon's linux agent must give the same hashes as PCP's
//! own linux PMDA through a reference pmcd on the same machine.

use serde_json::Value;

use super::*;

/// A pmproxy on a free port, with its run and log files in a directory of its own.
struct Pmproxy {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Pmproxy {
    fn start() -> Pmproxy {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = Command::new("/usr/lib/pcp/bin/pmproxy")
            .args(["-f", "-U", "root", "-p", &port.to_string(), "-l"])
            .arg(dir.path().join("pmproxy.log"))
            .env("PCP_RUN_DIR", dir.path())
            .env("PCP_LOG_DIR", dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting pmproxy");
        let p = Pmproxy {
            child,
            port,
            _dir: dir,
        };
        wait_until("pmproxy to listen", || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        p
    }

    fn get(&self, path: &str) -> Value {
        let url = format!("http://127.0.0.1:{}{path}", self.port);
        let r = reqwest::blocking::get(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(r.status().is_success(), "{url}: {}", r.status());
        r.json().unwrap()
    }

    /// A pmproxy context on the pmcd (or wasmon) at `port`.
    fn context(&self, port: u16) -> u64 {
        let v = self.get(&format!(
            "/pmapi/context?hostspec=localhost:{port}&polltimeout=60"
        ));
        v["context"]
            .as_u64()
            .unwrap_or_else(|| panic!("no context: {v}"))
    }
}

impl Drop for Pmproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `/pmapi/metric` of `names`, keyed by name, without the help texts (wasmon's linux agent
/// words them its own way).
fn metrics(proxy: &Pmproxy, ctx: u64, names: &[String]) -> Vec<(String, Value)> {
    // In batches: pmproxy refuses a URI past 8 KB.
    let mut out: Vec<(String, Value)> = names
        .chunks(100)
        .flat_map(|batch| {
            let v = proxy.get(&format!("/pmapi/{ctx}/metric?names={}", batch.join(",")));
            v["metrics"]
                .as_array()
                .unwrap_or_else(|| panic!("{v}"))
                .iter()
                .map(|m| {
                    let mut m = m.clone();
                    let o = m.as_object_mut().unwrap();
                    o.remove("text-oneline");
                    o.remove("text-help");
                    (o["name"].as_str().unwrap().to_string(), m)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// `/pmapi/indom` of `name`: (instance name, labels), sorted (instance numbers of network
/// interfaces depend on discovery order).
fn instances(proxy: &Pmproxy, ctx: u64, name: &str) -> Vec<(String, Value)> {
    let v = proxy.get(&format!("/pmapi/{ctx}/indom?name={name}"));
    let mut out: Vec<(String, Value)> = v["instances"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|i| (i["name"].as_str().unwrap().to_string(), i["labels"].clone()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn pmproxy_serves_wasmon_with_the_series_pmcd_gives() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    let proxy = Pmproxy::start();
    let (ours, theirs) = (proxy.context(w.pcp), proxy.context(pmcd));

    // Every linux metric: PMID, indom, type, semantics, units, labels, and so its series.
    let names = linux_names(w.pcp);
    let (a, b) = (
        metrics(&proxy, ours, &names),
        metrics(&proxy, theirs, &names),
    );
    assert_eq!(a.len(), names.len(), "{a:?}");
    // pmproxy merges an indom's labels into a metric's only where the indom has instances, so
    // labels (and the series id they feed) compare where both servers have values or neither
    // has: pmdalinux runs as user `pcp` and has none for root-only files (/proc/slabinfo)
    // that the test's daemon, running as root, reads.
    let has_values = |port| -> std::collections::HashSet<String> {
        let mut args = vec!["-f"];
        args.extend(names.iter().map(String::as_str));
        let text = stdout(&pcp_tool("pminfo", port, &args));
        let mut out = std::collections::HashSet::new();
        let mut current = None;
        for l in text.lines() {
            if !l.starts_with(' ') && !l.is_empty() && !l.starts_with("No value") {
                current = Some(l.trim().to_string());
            } else if l.trim_start().starts_with("value ") || l.trim_start().starts_with("inst [") {
                out.extend(current.clone());
            }
        }
        out
    };
    let (ours_valued, theirs_valued) = (has_values(w.pcp), has_values(pmcd));
    for ((name, x), (_, y)) in a.iter().zip(&b) {
        assert!(x["series"].as_str().is_some_and(|s| s.len() == 40), "{x}");
        let (mut x, mut y) = (x.clone(), y.clone());
        if ours_valued.contains(name) != theirs_valued.contains(name) {
            for v in [&mut x, &mut y] {
                let o = v.as_object_mut().unwrap();
                o.remove("labels");
                o.remove("series");
            }
        }
        assert_eq!(x, y, "{name}: wasmon (left) vs pmcd's linux PMDA (right)");
    }
    assert_eq!(a.len(), b.len());
    for indom in ["kernel.percpu.cpu.user", "network.interface.in.bytes"] {
        assert_eq!(
            instances(&proxy, ours, indom),
            instances(&proxy, theirs, indom),
            "{indom}"
        );
    }

    // A guest agent's metric fetched through pmproxy: an integer that grows.
    let ops = || {
        let v = proxy.get(&format!("/pmapi/{ours}/fetch?names=foo.count.ops"));
        v["values"][0]["instances"][0]["value"]
            .as_u64()
            .unwrap_or_else(|| panic!("{v}"))
    };
    let first = ops();
    assert!(ops() > first);
    drop(w.daemon);
}
