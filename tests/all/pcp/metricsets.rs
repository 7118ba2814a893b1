//! Every metricset Debian's pmrep ships (`/etc/pcp/pmrep/*.conf`: vmstat, sar, iostat,
//! mpstat, numa, collectl, pidstat, proc), run against wasmon and against the reference pmcd:
//! the same columns, and no column empty against wasmon that has a value against pmcd.

use super::*;

/// `[name]` sections of pmrep's shipped configs, but its options and pmproxy's own metrics.
fn metricsets() -> Vec<String> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/etc/pcp/pmrep") else {
        return out;
    };
    for e in dir.flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        for l in text.lines() {
            if let Some(name) = l.trim().strip_prefix('[').and_then(|l| l.strip_suffix(']'))
                && name != "options"
                && !name.starts_with("pmproxy")
            {
                out.push(name.to_string());
            }
        }
    }
    out.sort();
    out
}

/// pmrep's CSV for two samples: (columns, cells of the second sample).
fn run(port: u16, set: &str) -> Option<(Vec<String>, Vec<String>)> {
    let o = pcp_tool(
        "pmrep",
        port,
        &[
            "-s",
            "2",
            "-t",
            "0.5",
            "-o",
            "csv",
            "-l",
            "|",
            "--ignore-unknown",
            &format!(":{set}"),
        ],
    );
    if !o.status.success() {
        return None;
    }
    let text = stdout(&o);
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let head = lines.next()?;
    let last = lines.next_back()?;
    let columns = head
        .split('|')
        .map(|c| c.trim_matches('"').to_string())
        .collect();
    let cells = last.split('|').map(str::to_string).collect();
    Some((columns, cells))
}

#[test]
fn pmreps_shipped_metricsets_show_against_wasmon_what_they_show_against_pmcd() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    let sets = metricsets();
    assert!(sets.len() > 30, "{sets:?}");
    let mut diffs = Vec::new();
    let mut compared = 0;
    for set in &sets {
        // pmdaproc refuses remote clients some proc.* metrics: nothing to compare there.
        let Some((cols_b, cells_b)) = run(pmcd, set) else {
            continue;
        };
        compared += 1;
        let Some((cols_a, cells_a)) = run(w.pcp, set) else {
            diffs.push(format!(":{set}: pmrep fails against wasmon"));
            continue;
        };
        let value = |cols: &[String], cells: &[String], c: &str| {
            cols.iter()
                .position(|x| x == c)
                .and_then(|i| cells.get(i))
                .is_some_and(|v| !v.trim().is_empty())
        };
        // A column pmcd shows with a value that wasmon lacks. (wasmon may show more: it reads
        // as root files pmdalinux, running as user `pcp`, may not, such as
        // /proc/tty/driver/serial; and pmrep names a column of no instances `metric-`.)
        let missing: Vec<&String> = cols_b
            .iter()
            .filter(|c| !cols_a.contains(c) && value(&cols_b, &cells_b, c))
            .collect();
        if !missing.is_empty() {
            diffs.push(format!(
                ":{set}: columns with values against pmcd only: {missing:?}"
            ));
            continue;
        }
        let empty: Vec<&String> = cols_b
            .iter()
            .filter(|c| value(&cols_b, &cells_b, c) && !value(&cols_a, &cells_a, c))
            .collect();
        if !empty.is_empty() {
            diffs.push(format!(":{set}: no value against wasmon for {empty:?}"));
        }
    }
    assert!(compared > 20, "only {compared} metricsets ran against pmcd");
    assert!(
        diffs.is_empty(),
        "{} of {compared} metricsets differ:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    drop(w.daemon);
}
