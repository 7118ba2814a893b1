//! Issue 33 item 5: `/metrics?profile=node` of a daemon on the embedded default config beside
//! Debian's real `prometheus-node-exporter` (1.5) on the same machine: for the groups both
//! collect, the same family names, types, label names and label sets, and values within a
//! scrape's drift. Every difference is printed, grouped; the families node_exporter gives and
//! the profile does not are the README's table ("node_exporter profile"), kept here so the
//! two stay one list.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{
    DaemonProcess, NO_PROCFS, dies_with_test, ensure_debian_package_without_systemd, free_port,
};

const NODE_EXPORTER: &str = "/usr/bin/prometheus-node-exporter";

/// Family-name prefixes of the groups both collect.
const SHARED: &[&str] = &[
    "node_boot_time_seconds",
    "node_context_switches_total",
    "node_cpu_",
    "node_disk_",
    "node_entropy_",
    "node_filefd_",
    "node_filesystem_",
    "node_forks_total",
    "node_intr_total",
    "node_load",
    "node_memory_",
    "node_netstat_",
    "node_network_",
    "node_pressure_",
    "node_procs_",
    "node_sockstat_",
    "node_softnet_",
    "node_time_seconds",
    "node_uname_info",
    "node_vmstat_",
];

/// Families of the shared groups the profile does not give (README "node_exporter profile":
/// PCP's linux agent does not read what they come from). A name ending in `*` is a prefix.
const NOT_GIVEN: &[&str] = &[
    // meminfo lines PCP's mem.util does not name.
    "node_memory_Balloon_bytes",
    "node_memory_FileHugePages_bytes",
    "node_memory_FilePmdMapped_bytes",
    "node_memory_Hugetlb_bytes",
    "node_memory_KReclaimable_bytes",
    "node_memory_Percpu_bytes",
    "node_memory_SecPageTables_bytes",
    "node_memory_ShmemHugePages_bytes",
    "node_memory_ShmemPmdMapped_bytes",
    "node_memory_Unaccepted_bytes",
    "node_memory_WritebackTmp_bytes",
    "node_memory_Zswap_bytes",
    "node_memory_Zswapped_bytes",
    "node_memory_CmaFree_bytes",
    "node_memory_CmaTotal_bytes",
    // disk identity from udev and sysfs.
    "node_disk_info",
    "node_disk_filesystem_info",
    "node_disk_device_mapper_info",
    "node_disk_ata_*",
    // netdev's nohandler column, and the sysfs attributes of interfaces.
    "node_network_receive_nohandler_total",
    "node_network_address_assign_type",
    "node_network_carrier*",
    "node_network_device_id",
    "node_network_dormant",
    "node_network_flags",
    "node_network_iface_*",
    "node_network_info",
    "node_network_name_assign_type",
    "node_network_net_dev_group",
    "node_network_protocol_type",
    "node_network_speed_bytes",
    "node_network_transmit_queue_length",
    "node_network_up",
    // the time collector's clock sources and zone.
    "node_time_clocksource_*",
    "node_time_zone_offset_seconds",
    // pressure of IRQs (node_exporter 1.5 has none; later ones do).
    "node_pressure_irq_*",
];

fn not_given(family: &str) -> bool {
    NOT_GIVEN.iter().any(|n| match n.strip_suffix('*') {
        Some(prefix) => family.starts_with(prefix),
        None => family == *n,
    })
}

fn shared(family: &str) -> bool {
    SHARED.iter().any(|p| family.starts_with(p))
}

struct NodeExporter {
    child: std::process::Child,
    port: u16,
}

impl NodeExporter {
    fn start() -> NodeExporter {
        ensure_debian_package_without_systemd("prometheus-node-exporter", || {
            Path::new(NODE_EXPORTER).exists()
        });
        let port = free_port();
        let mut cmd = Command::new(NODE_EXPORTER);
        // Debian's build excludes `lo` from netdev by default; upstream's (and the
        // profile) include it.
        cmd.arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--collector.netdev.device-exclude=")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        dies_with_test(&mut cmd);
        let n = NodeExporter {
            child: cmd.spawn().unwrap(),
            port,
        };
        let start = Instant::now();
        while reqwest::blocking::get(n.url()).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "node_exporter did not serve"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        n
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.port)
    }
}

impl Drop for NodeExporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One family: its type and its series (label set -> value).
#[derive(Debug, Default, Clone)]
struct Family {
    kind: String,
    series: BTreeMap<BTreeMap<String, String>, f64>,
}

fn get(url: &str) -> String {
    let r = reqwest::blocking::get(url).unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    r.text().unwrap()
}

/// The text format as both write it (no timestamps; label values without `,` or `}` in
/// the families compared here, except uname's version, parsed with quotes in mind).
fn parse(text: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            let (name, kind) = t.split_once(' ').unwrap();
            out.entry(name.into()).or_default().kind = kind.into();
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (head, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}"));
        let (name, labels) = match head.split_once('{') {
            Some((n, rest)) => (n, labels(rest.trim_end_matches('}'))),
            None => (head, BTreeMap::new()),
        };
        out.entry(name.into())
            .or_default()
            .series
            .insert(labels, value);
    }
    out
}

fn labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some((k, after)) = rest.split_once("=\"") {
        let mut v = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, n)) = chars.next() {
                        v.push(if n == 'n' { '\n' } else { n });
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                c => v.push(c),
            }
        }
        out.insert(k.trim_start_matches(',').to_string(), v);
        rest = &after[end..];
    }
    out
}

/// How far apart two scrapes of a family may be: a counter lies between node_exporter's
/// scrape before and after ours (give or take its resolution); a gauge within the drift
/// between those two scrapes, 2% of its value, or a floor for its unit.
fn within(family: &str, kind: &str, ours: f64, before: f64, after: f64) -> bool {
    let (lo, hi) = (before.min(after), before.max(after));
    if family == "node_time_seconds" {
        return ours >= lo - 1.0 && ours <= hi + 1.0;
    }
    let resolution = if family.contains("seconds") {
        0.02
    } else {
        1.0
    };
    if kind == "counter" {
        return ours >= lo - resolution && ours <= hi + resolution;
    }
    let floor = if family.ends_with("_bytes") {
        64.0 * 1024.0 * 1024.0
    } else {
        10.0
    };
    let tol = (hi - lo).max(0.02 * hi.abs()).max(floor);
    ours >= lo - tol && ours <= hi + tol
}

#[test]
fn the_node_profile_matches_node_exporter_for_the_shared_groups() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("wasmon.toml");
    std::fs::write(&config, wasmon::config::DEFAULT).unwrap();
    let d = DaemonProcess::start(&config);
    let ne = NodeExporter::start();

    // An unknown profile is a clear error, not wasmon's families.
    let r = d.get("/metrics?profile=nodex").unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().unwrap().contains("unknown profile \\\"nodex\\\""));

    // Three rounds of node_exporter, us, node_exporter: a series agrees when it agrees in
    // one round (a gauge that jumped during one round still agrees in another).
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let before = parse(&get(&ne.url()));
        let ours = parse(&get(&d.url("/metrics?profile=node")));
        let after = parse(&get(&ne.url()));
        rounds.push((before, ours, after));
        std::thread::sleep(Duration::from_millis(300));
    }
    let (ne_families, our_families) = (&rounds[0].0, &rounds[0].1);

    let mut diffs: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut note = |what: &'static str, line: String| diffs.entry(what).or_default().push(line);

    for (name, ours) in our_families {
        match ne_families.get(name) {
            None => note("families only the profile gives", name.clone()),
            Some(theirs) if theirs.kind != ours.kind => note(
                "types differ",
                format!("{name}: ours {} theirs {}", ours.kind, theirs.kind),
            ),
            Some(_) => {}
        }
    }
    let mut compared = 0;
    for (name, theirs) in ne_families.iter().filter(|(n, _)| shared(n)) {
        let Some(ours) = our_families.get(name) else {
            if !not_given(name) {
                note(
                    "families node_exporter gives and the profile does not",
                    name.clone(),
                );
            }
            continue;
        };
        let names = |f: &Family| -> BTreeSet<BTreeSet<String>> {
            f.series
                .keys()
                .map(|l| l.keys().cloned().collect())
                .collect()
        };
        if names(ours) != names(theirs) {
            note(
                "label names differ",
                format!("{name}: ours {:?} theirs {:?}", names(ours), names(theirs)),
            );
            continue;
        }
        let ours_sets: BTreeSet<_> = ours.series.keys().collect();
        let theirs_sets: BTreeSet<_> = theirs.series.keys().collect();
        for l in theirs_sets.difference(&ours_sets) {
            note("series only node_exporter gives", format!("{name}{l:?}"));
        }
        for l in ours_sets.difference(&theirs_sets) {
            note("series only the profile gives", format!("{name}{l:?}"));
        }
        for l in ours_sets.intersection(&theirs_sets) {
            compared += 1;
            let agrees = rounds.iter().any(|(before, ours, after)| {
                let v = |f: &BTreeMap<String, Family>| f.get(name)?.series.get(*l).copied();
                match (v(before), v(ours), v(after)) {
                    (Some(b), Some(o), Some(a)) => within(name, &theirs.kind, o, b, a),
                    _ => false,
                }
            });
            if !agrees {
                let v = |f: &BTreeMap<String, Family>| {
                    f.get(name).and_then(|f| f.series.get(*l).copied())
                };
                note(
                    "values differ",
                    format!(
                        "{name}{l:?}: ours {:?}, node_exporter {:?} .. {:?}",
                        v(&rounds[0].1),
                        v(&rounds[0].0),
                        v(&rounds[0].2)
                    ),
                );
            }
        }
    }
    let report: String = diffs
        .iter()
        .map(|(what, lines)| format!("{what} ({}):\n  {}\n", lines.len(), lines.join("\n  ")))
        .collect();
    println!(
        "node profile: {} families, {} series compared with node_exporter's",
        our_families.len(),
        compared
    );
    assert!(compared > 100, "only {compared} series compared");
    assert!(diffs.is_empty(), "{report}");
}

/// A daemon without the native linux agent answers the profile with 503 naming what is
/// missing, not an empty exposition Prometheus would take as a host with no metrics.
#[test]
fn the_node_profile_without_the_linux_agent_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = DaemonProcess::with_config(dir.path(), NO_PROCFS);
    let r = d.get("/metrics?profile=node").unwrap();
    assert_eq!(r.status(), 503);
    let body = r.text().unwrap();
    assert!(body.contains("native linux agent"), "{body}");
    // wasmon's own families still answer.
    let own = d.get("/metrics").unwrap();
    assert_eq!(own.status(), 200);
    assert!(
        own.text()
            .unwrap()
            .contains("wasmon_store_samples_written_total")
    );
}
