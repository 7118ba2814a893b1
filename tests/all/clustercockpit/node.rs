//! A node on `wasmon config default --profile clustercockpit`, reading a captured tree whose
//! state changes once (snapshot A, then B), forwards to a central wasmon; the central's
//! `/api/query` answers cc-metric-collector's names at its levels with the values its
//! collectors compute from A and B (`tree.rs`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::guest_tree;
use super::jobs_nfs;
use super::tree::{self, Expected};
use crate::common::*;

/// The node's poll interval: the central stores at the same step, so each poll has its slot.
const STEP: i64 = 2;

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap()
}

/// Every value the central holds for `metric` at one level, by timestamp.
fn series(
    central: &DaemonProcess,
    metric: &str,
    typ: &str,
    tid: &str,
    from: i64,
) -> Vec<(i64, f64)> {
    let mut q = json!({"metric": metric, "host": hostname()});
    if typ != "node" {
        q["type"] = typ.into();
        q["type-ids"] = json!([tid]);
    }
    let body = json!({"cluster": "testcluster", "from": from, "to": chrono::Utc::now().timestamp() + 10,
        "queries": [q], "with-stats": false, "with-padding": false});
    let resp: Value = reqwest::blocking::Client::new()
        .post(central.url("/api/query"))
        .json(&body)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let r = &resp["results"][0][0];
    let Some(data) = r["data"].as_array() else {
        return Vec::new();
    };
    let start = r["from"].as_i64().unwrap();
    data.iter()
        .enumerate()
        .filter_map(|(k, v)| Some((start + k as i64 * STEP, v.as_f64()?)))
        .collect()
}

fn wait(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Points `link` at `target` in one rename, so a poll reads all of A or all of B.
fn point(link: &Path, target: &Path) {
    let tmp = link.with_extension("new");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).unwrap();
    std::fs::rename(&tmp, link).unwrap();
}

/// The profile with the node's state in `dir`, its lines to `url` and to `capture` too, every
/// 2 s, the linux agent reading `root`, the guest agents `guests` (their grants' hosts).
fn node_config(dir: &Path, url: &str, capture: &str, root: &Path, guests: &Path) -> String {
    let out = output_ok(std::process::Command::new(wasmon_bin()).args([
        "config",
        "default",
        "--profile",
        "clustercockpit",
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    let edits = [
        (
            "data-dir = \"wasmon-data\"",
            format!("data-dir = \"{}\"", dir.display()),
        ),
        (
            "url = \"http://localhost:8080/api/write\"",
            format!("url = \"{url}\""),
        ),
        (
            "native = \"linux\"\n",
            format!("native = \"linux\"\nroot = \"{}\"\n", root.display()),
        ),
    ];
    let mut text = text;
    for (from, to) in edits {
        assert_eq!(
            text.matches(from).count(),
            1,
            "the profile has one {from:?}"
        );
        text = text.replace(from, &to);
    }
    let every = "poll-interval = \"10s\"";
    assert_eq!(text.matches(every).count(), 6, "linux and 5 guest agents");
    text = text.replace(every, &format!("poll-interval = \"{STEP}s\""));
    for (agent, dirs) in [
        ("hwmon", &["sys"][..]),
        ("infiniband", &["sys"]),
        ("cpusys", &["proc", "sys"]),
        ("nfsclient", &["proc"]),
        ("slurm", &["sys/fs/cgroup", "sys/devices/system/cpu"]),
    ] {
        let entry = format!("guest = \"{agent}\"\n");
        assert_eq!(text.matches(&entry).count(), 1, "the profile runs {agent}");
        let grants: Vec<String> = dirs
            .iter()
            .map(|d| {
                format!(
                    "{{ host = \"{}\", guest = \"/{d}\" }}",
                    guests.join(d).display()
                )
            })
            .collect();
        text = text.replace(
            &entry,
            &format!("{entry}grants = {{ dirs = [{}] }}\n", grants.join(", ")),
        );
    }
    let sinks = "sinks = [\"central\"]";
    assert_eq!(
        text.matches(sinks).count(),
        2,
        "the profile's two pipelines send to central"
    );
    text = text.replace(sinks, "sinks = [\"central\", \"capture\"]");
    text.push_str(&format!(
        "\n[[sink]]\nname = \"capture\"\ntype = \"http\"\nurl = \"{capture}\"\ngzip = false\n\
         meta-as-tags = [\"type\", \"type-id\", \"stype\", \"stype-id\", \"device\", \"port\", \"lid\", \"package_id\", \"unit\"]\n"
    ));
    text
}

/// An HTTP server that keeps every body POSTed to it (the line protocol a sink sends) and
/// answers 204; its URL and the bodies' lines.
fn capture() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api/write", listener.local_addr().unwrap());
    let lines: Arc<Mutex<Vec<String>>> = Arc::default();
    let keep = lines.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().map_while(Result::ok) {
            let keep = keep.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                loop {
                    let mut len = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        if let Some((k, v)) = line.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            len = v.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; len];
                    r.read_exact(&mut body).unwrap();
                    let text = String::from_utf8(body).unwrap();
                    keep.lock()
                        .unwrap()
                        .extend(text.lines().map(str::to_string));
                    w.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                        .unwrap();
                }
            });
        }
    });
    (url, lines)
}

/// A line's name, tags, value.
fn parse(line: &str) -> (String, BTreeMap<String, String>, f64) {
    let parts: Vec<&str> = line.split(' ').collect();
    assert_eq!(parts.len(), 3, "{line}");
    let mut tags = parts[0].split(',');
    let name = tags.next().unwrap().to_string();
    let tags = tags
        .map(|t| {
            let (k, v) = t.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    let value = parts[1].strip_prefix("value=").unwrap().parse().unwrap();
    (name, tags, value)
}

/// Whether `values` (a series' values, poll by poll) hold `want` as cc-metric-collector would
/// send it: a change (rate, difference) in exactly one poll, 0 in the polls before and after
/// it (they read equal files); an absolute value as the last one.
fn holds(name: &str, values: &[f64], want: f64) -> bool {
    let eq = |x: f64| (x - want).abs() <= 1e-9 * want.abs().max(1.0);
    let change = name.ends_with("_bw")
        || name.starts_with("io_")
        || name.starts_with("cpu_")
        || name.starts_with("nfs3_")
        || name.starts_with("nfs4_");
    if change && want == 0.0 {
        // Sent, and only as 0 (an operation nfsstat listed first in B: B -> B).
        !values.is_empty() && values.iter().all(|x| *x == 0.0)
    } else if change {
        let moved: Vec<f64> = values.iter().copied().filter(|x| *x != 0.0).collect();
        values.len() >= 3 && moved.len() == 1 && eq(moved[0])
    } else {
        values.last().is_some_and(|x| eq(*x))
    }
}

/// The time step of the one poll pair in which hwthread 0's `metric` moved: its rate over
/// a step of 1 s (`at_one`) over the rate on the wire.
fn step(lines: &[(String, BTreeMap<String, String>, f64)], at_one: &Expected, metric: &str) -> f64 {
    let at_one_s = at_one[&(metric.into(), "hwthread".into(), "0".into(), String::new())].0;
    let moved: Vec<f64> = lines
        .iter()
        .filter(|(n, t, v)| {
            n == metric && t.get("type-id").map(String::as_str) == Some("0") && *v != 0.0
        })
        .map(|(_, _, v)| *v)
        .collect();
    assert_eq!(
        moved.len(),
        1,
        "one poll pair saw {metric} change: {moved:?}"
    );
    at_one_s / moved[0]
}

#[test]
fn a_node_on_the_profile_sends_what_cc_metric_collector_computes() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, root) = (
        tmp.path().join("A"),
        tmp.path().join("B"),
        tmp.path().join("root"),
    );
    tree::write(&a, 0);
    tree::write(&b, 1);
    point(&root, &a);
    // The guest agents' grants are opened once, at their start: their tree is one directory
    // whose files change (each renamed into place) rather than a link that moves.
    let guests = tmp.path().join("guests");
    guest_tree::write_guest_files(&a, 0);
    guest_tree::write_guest_files(&b, 1);
    guest_tree::write_guest_files(&guests, 0);
    for (dir, s) in [(&a, 0), (&b, 1)] {
        jobs_nfs::write_rpc(dir, s);
        jobs_nfs::write_slurm(dir, s);
    }
    jobs_nfs::write_slurm(&guests, 0);
    let central_toml = tmp.path().join("central.toml");
    std::fs::write(
        &central_toml,
        format!(
            "[daemon]\ndata-dir = \"{}\"\n\n[store]\ndefault-frequency = {STEP}\n",
            tmp.path().join("central").display()
        ),
    )
    .unwrap();
    let central = DaemonProcess::start(&central_toml);
    let (capture_url, lines) = capture();
    let node_toml = tmp.path().join("node.toml");
    let config = node_config(
        &tmp.path().join("node"),
        &central.url("/api/write"),
        &capture_url,
        &root,
        &guests,
    );
    std::fs::write(&node_toml, config).unwrap();
    // The slurm agent is Python: built (and its toolchain installed) into the tests' cache.
    crate::polyglot::prepare_slurm();
    let node = DaemonProcess::start_with(&node_toml, crate::polyglot::cache_env);
    let t0 = chrono::Utc::now().timestamp() - 5;

    // Two polls of A (rates between them are 0), then B between two polls.
    let polls = || series(&central, "num_cpus", "node", "", t0).len();
    wait(
        "two polls of A at the central",
        Duration::from_secs(60),
        || polls() >= 2,
    );
    let last = series(&central, "num_cpus", "node", "", t0)
        .last()
        .unwrap()
        .0;
    // The poll stamped `last` ran within [last, last + 1): the next one is ~STEP later, so
    // 1.3 s after `last` falls between two polls.
    let swap_at = last * 1000 + 1300;
    let now_ms = chrono::Utc::now().timestamp_millis();
    assert!(
        now_ms < swap_at + 400,
        "the test saw the poll too late to swap between polls"
    );
    std::thread::sleep(Duration::from_millis((swap_at - now_ms).max(0) as u64));
    point(&root, &b);
    guest_tree::write_guest_files(&guests, 1);
    jobs_nfs::write_slurm(&guests, 1);
    let n = polls();
    wait(
        "two polls of B after the change",
        Duration::from_secs(60),
        || polls() >= n + 3,
    );
    drop(node);

    // The time step of the poll pair A -> B, from one rate (hwthread 0's user time): every
    // other rate of that pair must agree with it exactly.
    let lines: Vec<(String, BTreeMap<String, String>, f64)> =
        lines.lock().unwrap().iter().map(|l| parse(l)).collect();
    let mut at_one = Expected::new();
    tree::cpustat(&a, &b, 1.0, &mut at_one);
    let dt = step(&lines, &at_one, "cpu_user");
    assert!(
        (1.0..=(3 * STEP) as f64).contains(&dt),
        "dt {dt} s for a {STEP} s poll"
    );

    let mut want = Expected::new();
    tree::cpustat(&a, &b, dt, &mut want);
    tree::loadavg(&b, &mut want);
    tree::memstat(&b, &mut want);
    tree::iostat(&a, &b, &mut want);
    tree::numastats(&b, &mut want);
    let mut package = BTreeMap::new();
    tree::cpufreq_cpuinfo(&b, &mut want, &mut package);
    // netstat's include_devices: every interface but loopback (the profile's default).
    tree::netstat(&a, &b, dt, &["eth0", "ib0"], &mut want);
    guest_tree::tempstat(&b, &mut want);
    let mut ib_tags = BTreeMap::new();
    guest_tree::ibstat(&b, &mut want, &mut ib_tags);
    guest_tree::nfsiostat(&b, &mut want);
    jobs_nfs::nfsstat(&a, &b, &mut want);
    jobs_nfs::slurm_cgroup(&b, &mut want);
    // schedstat's rates come from the cpusys agent's polls, a few ms apart from the linux
    // agent's: their time step, from hwthread 0's, must give every other hwthread's too.
    let mut sched_at_one = Expected::new();
    tree::schedstat(&a, &b, 1.0, &mut sched_at_one);
    let sched_dt = step(&lines, &sched_at_one, "cpu_load_core");
    assert!(
        (dt - sched_dt).abs() < 0.5,
        "cpusys's step {sched_dt} s beside linux's {dt} s"
    );
    tree::schedstat(&a, &b, sched_dt, &mut want);

    let mut failures = Vec::new();
    // On the wire: every series with its tags, as cc-metric-collector's sinks write them.
    for ((name, typ, tid, dev), (v, unit)) in &want {
        let of_series: Vec<&(String, BTreeMap<String, String>, f64)> = lines
            .iter()
            .filter(|(n, t, _)| {
                n == name
                    && t.get("type") == Some(typ)
                    && t.get("type-id").map_or("", String::as_str) == tid
                    && (dev.is_empty()
                        || t.get("device") == Some(dev)
                        || t.get("stype-id") == Some(dev))
            })
            .collect();
        let values: Vec<f64> = of_series.iter().map(|(_, _, v)| *v).collect();
        let tags_ok = of_series.iter().all(|(_, t, _)| {
            t.get("unit").map_or("", String::as_str) == unit
                && t.get("cluster").map(String::as_str) == Some("testcluster")
                && t.get("hostname") == Some(&hostname())
                && (!name.starts_with("net_")
                    || t.get("stype").map(String::as_str) == Some("network"))
                && (!name.starts_with("nfsio_")
                    || t.get("stype").map(String::as_str) == Some("filesystem"))
                && (!name.starts_with("ib_")
                    || ib_tags.get(dev).is_some_and(|(port, lid)| {
                        t.get("port") == Some(port) && t.get("lid") == Some(lid)
                    }))
        });
        // cpufreq's package_id comes from the cpusys agent's topology: once it has polled.
        let package_ok = name != "cpufreq"
            || of_series
                .last()
                .is_some_and(|(_, t, _)| t.get("package_id") == package.get(tid));
        if !holds(name, &values, *v) || !tags_ok || !package_ok {
            let tags: Vec<_> = of_series.iter().map(|(_, t, _)| t).take(1).collect();
            failures.push(format!(
                "lines {name} {typ}{tid} {dev}: want {v} {unit:?}, got {values:?} {tags:?}"
            ));
        }
    }
    let names: std::collections::BTreeSet<&String> = want.keys().map(|(n, ..)| n).collect();
    for (n, t, _) in &lines {
        if !names.contains(n) {
            failures.push(format!(
                "lines: {n} {t:?} is not what cc-metric-collector sends"
            ));
        }
    }
    // At the central: each series with a level of its own. (Series told apart only by a
    // device or a node's stype share the node's level, in cc-metric-store as in wasmon.)
    for ((name, typ, tid, dev), (v, _)) in &want {
        if dev.is_empty() {
            let values: Vec<f64> = series(&central, name, typ, tid, t0)
                .iter()
                .map(|(_, v)| *v)
                .collect();
            if !holds(name, &values, *v) {
                failures.push(format!(
                    "central {name} {typ}{tid}: want {v}, got {values:?}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} series differ:\n{}",
        failures.len(),
        want.len(),
        failures.join("\n")
    );
}
