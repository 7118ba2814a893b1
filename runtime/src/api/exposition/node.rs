//! `GET /metrics?profile=node`: node_exporter's families (names, labels, units, types) from
//! the native linux agent's PCP metrics, read when Prometheus scrapes, as node_exporter reads
//! `/proc` and `/sys` at each scrape, so dashboards and alerts written for node_exporter work
//! unchanged. Owns the mapping from PCP names to node_exporter families only: it gets values
//! from whoever fetches them (the daemon's agents, a test's agent) and reads two small files
//! the agent does not (`/proc/self/mounts` for filesystem types, the NIS domain name).
//!
//! The families are node_exporter 1.5's (Debian's `prometheus-node-exporter`) for the groups
//! both collect: cpu, meminfo, loadavg, stat, vmstat, diskstats, filesystem, netdev,
//! netstat (its default field set), sockstat, softnet, filefd, entropy, pressure, uname,
//! time. The README's "node_exporter profile" tables what differs.
//!
//! By role: `families` is the table (family, type, help, PCP source, scale, labels), `env`
//! what is read besides the agent's values; this file names what to fetch and renders.

mod env;
mod families;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use crate::namespace::{Value, Values};
pub use env::{Env, fstypes};
use families::{Kind, Labels, Scale, UNAME, rows};

/// The query value that selects this profile: `/metrics?profile=node`.
pub const PROFILE: &str = "node";

/// PCP's domain of the linux agent, as a PMID's text starts: a guest or another agent that
/// happens to serve a name the profile reads is not the linux agent.
pub const LINUX_DOMAIN: &str = "60";

/// Every PCP name the profile reads, each once.
pub fn names() -> Vec<String> {
    let mut out: Vec<String> = rows().iter().map(|r| r.pcp.clone()).collect();
    out.extend(UNAME.iter().map(|(_, p)| p.to_string()));
    out.push("filesys.mountdir".into());
    out.push("hinv.pagesize".into());
    out.sort();
    out.dedup();
    out
}

/// A family as it is written.
struct Out {
    kind: Kind,
    help: String,
    /// Labels as written between the braces (sorted by name) -> value.
    series: BTreeMap<String, f64>,
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64()
}

/// `cpu3` -> `3`; a name that is not `cpuN` stays as it is.
fn cpu_number(inst: &str) -> &str {
    match inst.strip_prefix("cpu") {
        Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => n,
        _ => inst,
    }
}

/// Renders the profile from `values` (PCP name -> its values; a name absent or without
/// values costs only its own families).
pub fn render(values: &HashMap<String, Values>, env: &Env, out: &mut String) {
    let mut families: BTreeMap<String, Out> = BTreeMap::new();
    let text_of = |name: &str, inst: &str| -> Option<String> {
        values.get(name)?.iter().find_map(|(i, v)| match v {
            Value::Text(t) if i == inst => Some(t.clone()),
            _ => None,
        })
    };
    let single = |name: &str| -> Option<f64> {
        values
            .get(name)?
            .iter()
            .find(|(i, _)| i.is_empty())
            .and_then(|(_, v)| number(v))
    };
    let pagesize = single("hinv.pagesize");
    let mountdirs: HashMap<&str, &str> = values
        .get("filesys.mountdir")
        .map(|v| {
            v.iter()
                .filter_map(|(i, v)| match v {
                    Value::Text(t) => Some((i.as_str(), t.as_str())),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    for r in rows() {
        let Some(vals) = values.get(&r.pcp) else {
            continue;
        };
        let scale = match r.scale {
            Scale::By(s) => s,
            Scale::PageSize => match pagesize {
                Some(p) => p,
                None => continue,
            },
        };
        for (inst, v) in vals {
            let Some(x) = number(v) else { continue };
            let mut labels = String::new();
            match r.labels {
                Labels::None => {}
                Labels::Instance(want) => {
                    if inst != want {
                        continue;
                    }
                }
                Labels::Device => label(&mut labels, "device", inst),
                Labels::Cpu(mode) => {
                    label(&mut labels, "cpu", cpu_number(inst));
                    if let Some(m) = mode {
                        label(&mut labels, "mode", m);
                    }
                }
                Labels::Filesystem => {
                    let Some(dir) = mountdirs.get(inst.as_str()) else {
                        continue;
                    };
                    filesystem_labels(&mut labels, inst, dir, env);
                }
            }
            let f = families.entry(r.family.clone()).or_insert_with(|| Out {
                kind: r.kind,
                help: r.help.clone(),
                series: BTreeMap::new(),
            });
            f.series.entry(labels).or_insert(x * scale);
        }
    }

    // A mounted filesystem whose statfs failed has a mount point and no size: node_exporter
    // reports it with device_error 1.
    let sizes = values.get("filesys.capacity");
    let mut errors = BTreeMap::new();
    for (inst, dir) in &mountdirs {
        let ok = sizes.is_some_and(|s| s.iter().any(|(i, _)| i == inst));
        let mut labels = String::new();
        filesystem_labels(&mut labels, inst, dir, env);
        errors.insert(labels, if ok { 0.0 } else { 1.0 });
    }
    if !errors.is_empty() {
        families.insert(
            "node_filesystem_device_error".into(),
            Out {
                kind: Kind::Gauge,
                help: "1 when the filesystem's figures could not be read (statfs failed).".into(),
                series: errors,
            },
        );
    }

    let uname: Vec<(&str, String)> = UNAME
        .iter()
        .filter_map(|(label, pcp)| Some((*label, text_of(pcp, "")?)))
        .collect();
    if !uname.is_empty() {
        let mut labels = String::new();
        let domain = if env.domainname.is_empty() {
            "(none)"
        } else {
            env.domainname.as_str()
        };
        label(&mut labels, "domainname", domain);
        for (k, v) in &uname {
            label(&mut labels, k, v);
        }
        families.insert(
            "node_uname_info".into(),
            Out {
                kind: Kind::Gauge,
                help: "Always 1: the kernel's uname fields as labels.".into(),
                series: BTreeMap::from([(labels, 1.0)]),
            },
        );
    }
    families.insert(
        "node_time_seconds".into(),
        Out {
            kind: Kind::Gauge,
            help: "The host's wall-clock time at the scrape, in seconds since the epoch.".into(),
            series: BTreeMap::from([(String::new(), env.now)]),
        },
    );

    for (name, f) in families {
        let kind = match f.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Untyped => "untyped",
        };
        let _ = writeln!(out, "# HELP {name} {}", super::escape_help(&f.help));
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, v) in f.series {
            if labels.is_empty() {
                let _ = writeln!(out, "{name} {}", super::format_value(v));
            } else {
                let _ = writeln!(out, "{name}{{{labels}}} {}", super::format_value(v));
            }
        }
    }
}

/// `device`, `fstype`, `mountpoint` (node_exporter's order: by name).
fn filesystem_labels(labels: &mut String, device: &str, dir: &str, env: &Env) {
    label(labels, "device", device);
    label(
        labels,
        "fstype",
        env.fstypes.get(dir).map(String::as_str).unwrap_or(""),
    );
    label(labels, "mountpoint", dir);
}

fn label(out: &mut String, k: &str, v: &str) {
    super::add(k, v, out);
}

#[cfg(test)]
mod tests;
