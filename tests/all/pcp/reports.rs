//! PCP's report tools against wasmon's native linux agent and the reference pmcd:
//! pcp-mpstat (CPU utilisation per CPU, interrupts and softirqs per CPU), pmstat, pcp-free,
//! pcp-iostat and pcp-dstat. Values
//! change between runs, so the reports are compared by shape: the same header lines, the
//! same rows (CPUs) in the same order, the same number of columns, and no column without a
//! value (`?`, `None`, empty) where pmcd's report has one.

use super::*;

/// Runs pcp-mpstat against `port`.
fn mpstat(port: u16, args: &[&str]) -> String {
    pcp_tool("mpstat", port, args)
}

/// Runs `pcp TOOL` (a Python tool: Debian's python3 has PCP's module) against `port`.
fn pcp_tool(tool: &str, port: u16, args: &[&str]) -> String {
    let o = Command::new("/usr/bin/python3")
        .arg(format!("/usr/lib/pcp/bin/pcp-{tool}"))
        .args(args)
        // The host as `pcp -h HOST mpstat` passes it: pcp-mpstat has no -h of its own.
        .env("PCP_HOST", format!("localhost:{port}"))
        .env("PCP_DERIVED_CONFIG", "")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("pcp-{tool}: {e}"));
    assert!(
        o.status.success(),
        "pcp-{tool} {args:?} on {port}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

fn no_value(field: &str) -> bool {
    matches!(field, "?" | "None" | "" | "N/A" | "nan")
}

/// A report's lines as fields, with the fields that change from run to run (times, dates)
/// and the lines that only date the report dropped: (header lines, data lines).
fn shape(text: &str, is_data: impl Fn(&[&str]) -> bool) -> (Vec<String>, Vec<Vec<String>>) {
    let mut heads = Vec::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() || f[0] == "@" || f[0] == "Linux" {
            continue;
        }
        if is_data(&f) {
            rows.push(f.iter().map(|s| s.to_string()).collect());
        } else {
            heads.push(f.join(" "));
        }
    }
    (heads, rows)
}

/// Every way `ours` differs in shape from `theirs`; `key` columns name a row (kept as is),
/// the others are values.
fn compare(
    what: &str,
    ours: &str,
    theirs: &str,
    is_data: impl Fn(&[&str]) -> bool + Copy,
    key: &[usize],
) -> Vec<String> {
    let (oh, or) = shape(ours, is_data);
    let (th, tr) = shape(theirs, is_data);
    let mut diffs = Vec::new();
    if oh != th {
        diffs.push(format!("{what}: headers\n  wasmon {oh:?}\n  pmcd   {th:?}"));
    }
    let names = |rows: &[Vec<String>]| -> Vec<Vec<String>> {
        rows.iter()
            .map(|r| key.iter().filter_map(|&k| r.get(k).cloned()).collect())
            .collect()
    };
    if names(&or) != names(&tr) {
        diffs.push(format!(
            "{what}: rows\n  wasmon {:?}\n  pmcd   {:?}",
            names(&or),
            names(&tr)
        ));
    }
    for (o, t) in or.iter().zip(&tr) {
        if o.len() != t.len() {
            diffs.push(format!("{what}: columns\n  wasmon {o:?}\n  pmcd   {t:?}"));
            continue;
        }
        for (i, (a, b)) in o.iter().zip(t).enumerate() {
            if no_value(a) && !no_value(b) {
                diffs.push(format!(
                    "{what}: column {i} has no value\n  wasmon {o:?}\n  pmcd   {t:?}"
                ));
            }
        }
    }
    diffs
}

/// A data row of pcp-mpstat: a time stamp first.
fn mpstat_row(f: &[&str]) -> bool {
    f.len() > 2 && f[0].len() == 8 && f[0].as_bytes()[2] == b':' && f[0].as_bytes()[5] == b':'
}

#[test]
fn pcp_mpstat_reports_what_pmcds_report_shows() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    let mut diffs = Vec::new();
    for args in [
        &["-P", "ALL", "-t", "1", "-s", "2"][..],
        &["-I", "ALL", "-t", "1", "-s", "2"][..],
    ] {
        let ours = mpstat(w.pcp, args);
        let theirs = mpstat(pmcd, args);
        // The rows are CPUs: named by their second column.
        diffs.extend(compare(
            &format!("pcp-mpstat {args:?}"),
            &ours,
            &theirs,
            mpstat_row,
            &[1],
        ));
        let (_, rows) = shape(&ours, mpstat_row);
        assert!(rows.len() >= 2, "pcp-mpstat {args:?} gave no rows:\n{ours}");
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    drop(w.daemon);
}

/// A data row of pmstat or pcp-dstat (its `|` separators made blanks): more than five fields,
/// each a number (with a unit suffix) or `?`.
fn numbers_row(f: &[&str]) -> bool {
    f.len() > 5
        && f.iter()
            .all(|x| *x == "?" || x.starts_with(|c: char| c.is_ascii_digit()))
}

#[test]
fn pmstat_reports_what_pmcds_report_shows() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    let args = ["-s", "2", "-t", "1"];
    let ours = ok("pmstat", w.pcp, &args);
    let theirs = ok("pmstat", pmcd, &args);
    let (_, rows) = shape(&ours, numbers_row);
    assert_eq!(rows.len(), 2, "{ours}");
    let diffs = compare("pmstat", &ours, &theirs, numbers_row, &[]);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    drop(w.daemon);
}

/// A data row of numbers after a name (pcp-free's `Mem:`, pcp-iostat's devices).
fn named_row(f: &[&str]) -> bool {
    f.len() > 3
        && f[0] != "#"
        && f[1..]
            .iter()
            .all(|x| *x == "?" || x.starts_with(|c: char| c.is_ascii_digit()))
}

#[test]
fn pcp_free_and_iostat_report_what_pmcds_reports_show() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    let mut diffs = Vec::new();
    for (tool, args) in [
        ("free", &[][..]),
        ("free", &["-w", "-t"][..]),
        ("iostat", &["-s", "2", "-t", "1"][..]),
        ("iostat", &["-s", "2", "-t", "1", "-x", "dm"][..]),
    ] {
        let ours = pcp_tool(tool, w.pcp, args);
        let theirs = pcp_tool(tool, pmcd, args);
        assert!(
            !ours.contains("Unknown metric"),
            "pcp-{tool} {args:?}:\n{ours}"
        );
        // Rows are named by their first column (Mem, Swap, Total; a device).
        diffs.extend(compare(
            &format!("pcp-{tool} {args:?}"),
            &ours,
            &theirs,
            named_row,
            &[0],
        ));
    }
    let (_, rows) = shape(&pcp_tool("free", w.pcp, &[]), named_row);
    assert!(rows.len() >= 2, "pcp-free gave no Mem and Swap rows");
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    drop(w.daemon);
}

#[test]
fn pcp_dstat_reports_what_pmcds_report_shows() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    let args = ["-cdngy", "--disk-util", "1", "2"];
    // A value and the next group's first run together across `|` ("0|3679k"): split there.
    let run = |port| pcp_tool("dstat", port, &args).replace('|', " ");
    let ours = run(w.pcp);
    let theirs = run(pmcd);
    let (_, rows) = shape(&ours, numbers_row);
    assert!(rows.len() >= 2, "pcp-dstat gave no rows:\n{ours}");
    let diffs = compare("pcp-dstat", &ours, &theirs, numbers_row, &[]);
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
    drop(w.daemon);
}
