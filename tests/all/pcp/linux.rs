//! Every metric of PCP's linux PMDA (domain 60), side by side with a reference pmcd on the
//! same machine: descriptors, instances where pmcd has values, the values of discrete
//! metrics (hardware, kernel and configuration facts), and labels.
//!
//! Each test gathers every difference before failing, so one run shows all that is left.
//! `WASMON_PCP_ONLY=mem.,disk.` (name prefixes) narrows a run while working on a group.

use super::*;

/// Every domain-60 name the reference pmcd answers (its pmns: PCP's whole linux PMDA).
fn pmcd_linux_names(pmcd: u16) -> Vec<String> {
    let only: Vec<String> = std::env::var("WASMON_PCP_ONLY")
        .unwrap_or_default()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    let names: Vec<String> = ok("pminfo", pmcd, &["-m"])
        .lines()
        .filter_map(|l| {
            let (name, pmid) = l.split_once(" PMID: ")?;
            pmid.starts_with("60.").then(|| name.to_string())
        })
        .filter(|n| only.is_empty() || only.iter().any(|p| n.starts_with(p.as_str())))
        .collect();
    assert!(!names.is_empty());
    names
}

/// `pminfo -f` as (metric, None when no values, else [(instance name, value text)]).
type Fetched = Vec<(String, Option<Vec<(String, String)>>)>;

fn values(text: &str) -> Fetched {
    let mut out: Fetched = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("No value") || t.starts_with("Error:") {
            if let Some(last) = out.last_mut() {
                last.1 = None;
            }
        } else if !line.starts_with(' ') && !line.is_empty() {
            out.push((t.to_string(), Some(Vec::new())));
        } else if let Some(Some(vals)) = out.last_mut().map(|l| &mut l.1) {
            if let Some(v) = t.strip_prefix("value ") {
                vals.push((String::new(), v.to_string()));
            } else if let Some(rest) = t.strip_prefix("inst [")
                && let Some((_, name)) = rest.split_once(" or \"")
                && let Some((name, v)) = name.split_once("\"] value ")
            {
                vals.push((name.to_string(), v.to_string()));
            }
        }
    }
    for vals in out.iter_mut().filter_map(|(_, n)| n.as_mut()) {
        vals.sort();
    }
    out
}

/// Counts of differences per top-level group, for the failure message.
fn by_group(diffs: &[String]) -> String {
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for d in diffs {
        let g = d.split(['.', ':']).next().unwrap_or("").to_string();
        *groups.entry(g).or_default() += 1;
    }
    format!("{groups:?}")
}

fn fail_with(what: &str, diffs: &[String]) {
    if !diffs.is_empty() {
        panic!(
            "{} {what} ({}):\n{}",
            diffs.len(),
            by_group(diffs),
            diffs.join("\n")
        );
    }
}

use std::collections::BTreeMap;

#[test]
fn every_linux_pmda_metric_is_described_as_pmcd_describes_it() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    let names = pmcd_linux_names(pmcd);
    let args: Vec<&str> = ["-m", "-d"]
        .into_iter()
        .chain(names.iter().map(String::as_str))
        .collect();
    let ours: BTreeMap<_, _> = desc_blocks(&ok("pminfo", w.pcp, &args))
        .into_iter()
        .collect();
    let theirs = desc_blocks(&ok("pminfo", pmcd, &args));
    let mut diffs = Vec::new();
    for (name, b) in &theirs {
        match ours.get(name) {
            None => diffs.push(format!("{name}: unknown to wasmon")),
            Some(a) if a != b => diffs.push(format!("{name}:\n  wasmon {a:?}\n  pmcd   {b:?}")),
            _ => {}
        }
    }
    assert_eq!(theirs.len(), names.len());
    fail_with("descriptors differ", &diffs);
    drop(w.daemon);
}

/// Metrics whose pmcd values depend on what else the same fetch asks for.
const PMCD_BATCH_DEPENDENT: &[&str] = &[
    "network.interface.type",
    "network.interface.virtual",
    "network.interface.wireless",
];

/// Where pmcd has values, wasmon has values for the same instances; discrete metrics (facts
/// that do not change while the machine runs) have the same values.
#[test]
fn every_linux_pmda_metric_has_values_for_the_instances_pmcd_has() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    let names = pmcd_linux_names(pmcd);
    let discrete: std::collections::HashSet<String> = desc_blocks(&ok(
        "pminfo",
        pmcd,
        &["-d"]
            .into_iter()
            .chain(names.iter().map(String::as_str))
            .collect::<Vec<_>>(),
    ))
    .into_iter()
    .filter(|(_, b)| b.contains("Semantics: discrete"))
    .map(|(n, _)| n)
    .collect();
    let mut fargs = vec!["-f"];
    fargs.extend(names.iter().map(String::as_str));
    let mut theirs = values(&stdout(&pcp_tool("pminfo", pmcd, &fargs)));
    // pmdalinux answers these from sysfs when fetched alone, and from its ioctl fallback
    // (type 0 for loopback, never virtual) when a fetch also holds an attribute sysfs
    // refuses for some interface (`speed` of `lo`): compare with its sysfs answer.
    for (name, vals) in theirs.iter_mut() {
        if PMCD_BATCH_DEPENDENT.contains(&name.as_str())
            && let Some((_, alone)) = values(&stdout(&pcp_tool("pminfo", pmcd, &["-f", name])))
                .into_iter()
                .next()
        {
            *vals = alone;
        }
    }
    let ours: BTreeMap<_, _> = values(&stdout(&pcp_tool("pminfo", w.pcp, &fargs)))
        .into_iter()
        .collect();
    let mut diffs = Vec::new();
    let mut compared = 0;
    for (name, b) in &theirs {
        let Some(b) = b else { continue };
        compared += 1;
        let Some(Some(a)) = ours.get(name) else {
            diffs.push(format!(
                "{name}: no values from wasmon (pmcd has {})",
                b.len()
            ));
            continue;
        };
        let (ia, ib): (Vec<&String>, Vec<&String>) = (
            a.iter().map(|v| &v.0).collect(),
            b.iter().map(|v| &v.0).collect(),
        );
        if ia != ib {
            diffs.push(format!(
                "{name}: instances\n  wasmon {ia:?}\n  pmcd   {ib:?}"
            ));
        } else if discrete.contains(name) && a != b {
            diffs.push(format!("{name}: values\n  wasmon {a:?}\n  pmcd   {b:?}"));
        }
    }
    assert!(compared > 0);
    fail_with("metrics differ in values", &diffs);
    drop(w.daemon);
}

#[test]
fn every_linux_pmda_metric_has_pmcds_labels() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    let names = pmcd_linux_names(pmcd);
    let mut largs = vec!["-l"];
    largs.extend(names.iter().map(String::as_str));
    // Per metric block: its lines, instances by name (numbers may differ where instances
    // are numbered in discovery order).
    let labels = |port| -> BTreeMap<String, Vec<String>> {
        let text = stdout(&pcp_tool("pminfo", port, &largs));
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut current = String::new();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            if !l.starts_with(' ') {
                current = l.trim().to_string();
                out.entry(current.clone()).or_default();
            } else {
                let line = match l.split_once(" or \"") {
                    Some((head, rest)) if head.trim_start().starts_with("inst [") => {
                        format!("    inst \"{rest}")
                    }
                    _ => l.to_string(),
                };
                out.entry(current.clone()).or_default().push(line);
            }
        }
        for v in out.values_mut() {
            v.sort();
        }
        out
    };
    let (ours, theirs) = (labels(w.pcp), labels(pmcd));
    let mut diffs = Vec::new();
    for (name, b) in &theirs {
        // Instances pmcd has and wasmon has not are the values test's to report.
        let a = ours.get(name).cloned().unwrap_or_default();
        if a.len() == b.len() && &a != b {
            diffs.push(format!("{name}: labels\n  wasmon {a:?}\n  pmcd   {b:?}"));
        }
    }
    fail_with("metrics differ in labels", &diffs);
    drop(w.daemon);
}

/// `pminfo -T` output as metric -> help text (the lines after `Help:`, joined).
fn help_blocks(text: &str) -> BTreeMap<String, String> {
    text.split("\n\n")
        .filter_map(|b| {
            let (name, rest) = b.trim().split_once('\n')?;
            let help = rest.strip_prefix("Help:\n")?;
            Some((name.trim().to_string(), help.trim().replace('\n', " ")))
        })
        .collect()
}

/// `pminfo -T` of `names` from wasmon and from pmcd: wasmon's help by name, and a difference
/// for each name wasmon gives no help, or pmcd's very text.
fn served_help(port: u16, pmcd: u16, names: &[&str]) -> (BTreeMap<String, String>, Vec<String>) {
    let args: Vec<&str> = std::iter::once("-T").chain(names.iter().copied()).collect();
    let ours = help_blocks(&ok("pminfo", port, &args));
    let theirs = help_blocks(&ok("pminfo", pmcd, &args));
    // pmcd answered for (nearly) the same names, so the comparison had something to compare.
    assert!(
        theirs.len() * 100 >= names.len() * 98,
        "pmcd gave help for {} of {} names",
        theirs.len(),
        names.len()
    );
    let mut diffs = Vec::new();
    for name in names {
        match ours.get(*name) {
            None => diffs.push(format!("{name}: no help text through pminfo -T")),
            Some(got)
                if theirs
                    .get(*name)
                    .is_some_and(|t| t.eq_ignore_ascii_case(got)) =>
            {
                diffs.push(format!("{name}: help is pmcd's text {got:?}"))
            }
            _ => {}
        }
    }
    (ours, diffs)
}

/// A PCP client asking for help text gets the agent's own sentence for every linux metric:
/// the help column of runtime/src/linux/metrics.tsv, word for word, and never pmcd's text.
#[test]
fn every_linux_metric_has_its_own_help_text_through_pcp() {
    let table = include_str!("../../../runtime/src/linux/metrics.tsv");
    let want: BTreeMap<&str, &str> = table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| Some((l.split('\t').next()?, l.rsplit('\t').next()?)))
        .collect();
    assert_eq!(want.len(), 1340);
    let w = wasmon(&no_mmv());
    let names: Vec<&str> = want.keys().copied().collect();
    let (ours, mut diffs) = served_help(w.pcp, reference_pmcd(), &names);
    for (name, help) in &want {
        if let Some(got) = ours.get(*name).filter(|got| got != help) {
            diffs.push(format!("{name}:\n  served {got:?}\n  table  {help:?}"));
        }
    }
    fail_with("help text differs", &diffs);
    drop(w.daemon);
}

/// The proc agent's 153 metrics too: each has a help text through `pminfo -T`, no two alike,
/// none of them pmcd's (pmdaproc's) text.
#[test]
fn every_proc_metric_has_its_own_help_text_through_pcp() {
    let w = wasmon(&no_mmv());
    let listed = ok("pminfo", w.pcp, &["proc"]);
    let names: Vec<&str> = listed.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(names.len(), 153, "{listed}");
    let (ours, mut diffs) = served_help(w.pcp, reference_pmcd(), &names);
    let mut seen = BTreeMap::new();
    for (name, help) in &ours {
        if let Some(other) = seen.insert(help, name) {
            diffs.push(format!("{name}: same help as {other}: {help:?}"));
        }
    }
    fail_with("proc help text", &diffs);
    drop(w.daemon);
}
