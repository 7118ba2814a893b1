//! The seed's dynamic names, pmval,
//! pmprobe, pmrep, pmlogger and pmie against the port; a port held by pmcd.

use super::*;

#[test]
fn dynamic_names_over_the_wire_as_the_seed_says() {
    let w = wasmon(&no_mmv());
    // The daemon's own traverse (HTTP) is what pminfo must list.
    let v: serde_json::Value = w
        .daemon
        .get("/api/ns/traverse?prefix=foo")
        .unwrap()
        .json()
        .unwrap();
    let expected: Vec<String> = v["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    let listed: Vec<String> = ok("pminfo", w.pcp, &["foo"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(listed, expected);
    for name in ["foo.count.ops", "foo.count.errs", "foo.count.numcount"] {
        assert!(listed.iter().any(|n| n == name), "{listed:?}");
    }
    // The seed's PMIDs: foo.count.ops is 44.1.0, by name and (pmNameAll) back.
    assert_eq!(
        ok("pminfo", w.pcp, &["-m", "foo.count.ops"]).trim(),
        "foo.count.ops PMID: 44.1.0"
    );
    let m = ok("pminfo", w.pcp, &["-M", "foo.count.ops"]);
    assert!(m.starts_with("foo.count.ops PMID: 44.1.0 = "), "{m}");
    // One-line help of each dynamic metric, from the guest.
    let t = ok("pminfo", w.pcp, &["-t", "foo.count"]);
    assert_eq!(t.lines().count(), 3, "{t}");
    assert!(
        t.lines()
            .all(|l| l.starts_with("foo.count.") && l.contains(" [")),
        "{t}"
    );
    // Unknown names: below the dynamic root (the agent says so) and outside it.
    for name in ["foo.count.nosuch", "nosuch.metric"] {
        let o = pcp_tool("pminfo", w.pcp, &["-m", name]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{name}: Unknown metric name")),
            "{err}"
        );
    }
    // A non-leaf: pmLookupName answers PM_ERR_NONLEAF (pmval looks names up as given).
    let o = pcp_tool("pmval", w.pcp, &["-s", "1", "foo.count"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("Metric name is not a leaf in PMNS"), "{err}");
    // Values of the dynamic metrics arrive through FETCH.
    let f = ok("pminfo", w.pcp, &["-f", "foo.count.ops"]);
    assert!(f.contains("    value "), "{f}");
}

#[test]
fn pmval_pmprobe_pmrep_agree_with_pmcd() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    // pmval: a sample per interval, with the instance names of the indom as columns.
    let v = ok("pmval", w.pcp, &["-s", "3", "-t", "0.2", "kernel.all.load"]);
    assert!(v.contains("host:      "), "{v}");
    let samples = v
        .lines()
        .filter(|l| l.split_whitespace().count() == 3 && l.trim().starts_with(char::is_numeric))
        .count();
    assert_eq!(samples, 3, "{v}");
    assert!(v.contains("1 minute") && v.contains("15 minute"), "{v}");
    // pmval -i: one instance through the profile.
    let one = ok(
        "pmval",
        w.pcp,
        &["-s", "1", "-i", "cpu0", "kernel.percpu.cpu.user"],
    );
    assert!(one.contains("cpu0") && !one.contains("cpu1"), "{one}");
    // pmprobe -v: a value that does not move, the same from both.
    let probe = |port| ok("pmprobe", port, &["-v", "hinv.ncpu", "mem.physmem"]);
    assert_eq!(probe(w.pcp), probe(pmcd));
    // pmrep (python3-pcp) over both.
    let rep = |port| {
        ok(
            "pmrep",
            port,
            &["-s", "1", "-t", "0.2", "-H", "hinv.ncpu", "mem.physmem"],
        )
    };
    assert_eq!(rep(w.pcp), rep(pmcd));
    // pmcd.hostname as pmcd answers it.
    let host = |port| ok("pmprobe", port, &["-v", "pmcd.hostname"]);
    assert_eq!(host(w.pcp), host(pmcd));
}

#[test]
fn pmlogger_writes_an_archive_pmval_reads_back_and_pmie_evaluates() {
    let w = wasmon(&no_mmv());
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("pmlogger.conf");
    std::fs::write(
        &conf,
        "log mandatory on 100 msec {\n  hinv.ncpu\n  kernel.all.load\n  foo.count.ops\n}\n",
    )
    .unwrap();
    let archive = dir.path().join("arch");
    let log = dir.path().join("pmlogger.log");
    let conf_s = conf.to_str().unwrap();
    let log_s = log.to_str().unwrap();
    let arch_s = archive.to_str().unwrap();
    ok(
        "pmlogger",
        w.pcp,
        &["-c", conf_s, "-s", "5", "-l", log_s, arch_s],
    );
    let ncpu = ok("pmprobe", w.pcp, &["-v", "hinv.ncpu"]);
    let ncpu = ncpu.split_whitespace().nth(2).unwrap().to_string();
    // Read back without a server.
    let back = Command::new("pmval")
        .args(["-a", arch_s, "-t", "0.1", "hinv.ncpu"])
        .output()
        .unwrap();
    let back = stdout(&back);
    let values: Vec<&str> = back
        .lines()
        .filter(|l| l.starts_with(char::is_numeric) && !l.contains("No values"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(
        !values.is_empty() && values.iter().all(|v| *v == ncpu),
        "{back}"
    );
    output_ok(Command::new("pmval").args(["-a", arch_s, "-t", "0.1", "foo.count.ops"]));

    // pmie: a rule over a metric with instances, and an expression's value.
    let rules = dir.path().join("pmie.conf");
    std::fs::write(
        &rules,
        "ncpu = hinv.ncpu;\nloaded = some_inst kernel.all.load >= 0 -> print \"load seen\";\n",
    )
    .unwrap();
    let out = ok(
        "pmie",
        w.pcp,
        &["-c", rules.to_str().unwrap(), "-t", "0.2", "-T", "1", "-v"],
    );
    assert!(out.contains(&format!("ncpu: {ncpu}")), "{out}");
    assert!(out.contains("loaded: true"), "{out}");
}

#[test]
fn a_port_held_by_pmcd_is_logged_once_and_the_daemon_runs_without_it() {
    let pmcd = reference_pmcd();
    let dir = tempfile::tempdir().unwrap();
    let d = DaemonProcess::with_config(
        dir.path(),
        &format!(
            "{NO_PROCFS}[[agent]]\nname = \"linux\"\nnative = \"linux\"\n[pcp]\nlisten = \"127.0.0.1:{pmcd}\"\n"
        ),
    );
    // It serves its HTTP API (start() waited for it), and pmcd still owns the port.
    assert!(d.get("/api/healthcheck").unwrap().status().is_success());
    let version = ok("pminfo", pmcd, &["-f", "pmcd.build"]);
    assert!(!version.contains("wasmon"), "{version}");
    let log = d.stderr.lock().unwrap().clone();
    assert_eq!(log.matches("PCP port in use").count(), 1, "{log}");
}
