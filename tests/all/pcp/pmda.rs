//! `wasmon pmda` under a real pmcd: the foo guest, a trapping guest, a replaced guest, and
//! the mmv guest in pmdammv's place.

use super::*;

/// `wasmon` behind a script that keeps its stderr in `dir/pmda.err` (pmcd gives its pipe
/// PMDAs no stderr a test can read), for pmcd.conf lines.
pub(super) fn pmda_command(dir: &Path) -> String {
    let script = dir.join("wasmon-pmda.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nexec {} \"$@\" 2>>{}\n",
            crate::common::wasmon_bin(),
            dir.join("pmda.err").display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script.display().to_string()
}

/// A pmcd of the test's own, with `conf` as its pmcd.conf and `pmns` as its namespace; killed
/// on drop (its pipe PMDAs see their stdin close and exit).
pub(super) struct Pmcd {
    child: std::process::Child,
    pub(super) port: u16,
    run: tempfile::TempDir,
    logs: PathBuf,
}

impl Pmcd {
    /// `logs`: another directory whose `*.err` files a timeout shows (the PMDAs' stderr).
    pub(super) fn start(conf: &str, pmns: &str, logs: &Path) -> Pmcd {
        ensure_pcp();
        std::fs::create_dir_all("/run/pcp").unwrap();
        let run = tempfile::tempdir().unwrap();
        std::fs::write(run.path().join("pmcd.conf"), conf).unwrap();
        std::fs::write(run.path().join("root.pmns"), pmns).unwrap();
        let conf = run.path().join("pmcd.conf");
        let pmns = run.path().join("root.pmns");
        let args = [
            std::ffi::OsStr::new("-c"),
            conf.as_os_str(),
            std::ffi::OsStr::new("-n"),
            pmns.as_os_str(),
        ];
        let (child, port) = spawn_pmcd(run.path(), &args, false);
        Pmcd {
            child,
            port,
            run,
            logs: logs.to_path_buf(),
        }
    }

    /// [`wait_until`], showing pmcd's log and its PMDAs' when it times out.
    pub(super) fn wait(&self, what: &str, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !check() {
            if Instant::now() > deadline {
                let mut logs = String::new();
                let dirs = [self.run.path(), self.logs.as_path()];
                for e in dirs
                    .iter()
                    .flat_map(|d| std::fs::read_dir(d).unwrap().flatten())
                {
                    if e.path()
                        .extension()
                        .is_some_and(|x| x == "log" || x == "err")
                    {
                        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                        logs.push_str(&format!("== {}\n{text}\n", e.path().display()));
                    }
                }
                panic!("timed out waiting for {what}\n{logs}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Pmcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const FOO_PMNS: &str =
    "root { foo }\nfoo {\n    version 44:0:1\n    count   44:*:*\n    memory  44:0:2\n}\n";

#[test]
fn wasmon_pmda_serves_the_foo_guest_under_a_real_pmcd() {
    let dir = tempfile::tempdir().unwrap();
    let foo_pmns = dir.path().join("foo.pmns");
    std::fs::write(&foo_pmns, FOO_PMNS).unwrap();
    let bar_pmns = dir.path().join("bar.pmns");
    std::fs::write(&bar_pmns, "root { bar 45:*:* }\n").unwrap();
    // Parameters from a file: pmcd.conf's parser eats the quotes of inline JSON.
    let bar_params = dir.path().join("bar.json");
    std::fs::write(&bar_params, r#"{"domain":45,"root":"bar"}"#).unwrap();
    let wasmon = crate::common::wasmon_bin();
    let pmda = pmda_command(dir.path());
    // The install step the README gives: one pmcd.conf line per domain, and each of the
    // agent's top-level names a dynamic root of that domain in pmcd's namespace.
    let testing = crate::common::guest_path("testing_agent");
    let conf = format!(
        "foo\t44\tpipe\tbinary\t{pmda} pmda --pmns {} --agent 44=foo\n\
         bar\t45\tpipe\tbinary\t{pmda} pmda --pmns {} --agent 45={} --params 45=@{}\n",
        foo_pmns.display(),
        bar_pmns.display(),
        testing.display(),
        bar_params.display()
    );
    let pmcd = Pmcd::start(
        &conf,
        "root {\n    foo 44:*:*\n    bar 45:*:*\n}\n",
        dir.path(),
    );
    pmcd.wait("the PMDAs to answer", || {
        pcp_tool("pminfo", pmcd.port, &["foo", "bar.good"])
            .status
            .success()
    });
    // Every name the agents give offline, through pmcd.
    let offline = Command::new(wasmon)
        .args(["ns", "traverse", "foo", "--pmns"])
        .arg(&foo_pmns)
        .args(["--agent", "44=foo"])
        .output()
        .unwrap();
    let expected: Vec<String> = stdout(&offline).lines().map(str::to_string).collect();
    let listed: Vec<String> = ok("pminfo", pmcd.port, &["foo"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(listed, expected);
    assert!(listed.iter().any(|n| n == "foo.count.ops"), "{listed:?}");
    assert_eq!(
        ok("pminfo", pmcd.port, &["-m", "foo.count.ops"]).trim(),
        "foo.count.ops PMID: 44.1.0"
    );
    let m = ok("pminfo", pmcd.port, &["-M", "foo.count.ops"]);
    assert!(m.starts_with("foo.count.ops PMID: 44.1.0 = "), "{m}");
    // Descriptors, help and values come from the guest through pmcd.
    let d = ok("pminfo", pmcd.port, &["-d", "-t", "-f", "foo.count.ops"]);
    assert!(
        d.contains("Semantics: counter") && d.contains("    value "),
        "{d}"
    );
    assert!(d.contains("foo.count.ops ["), "{d}");
    let v = ok("pmval", pmcd.port, &["-s", "2", "-t", "0.2", "foo.memory"]);
    assert!(v.contains("samples:   2"), "{v}");
    let o = pcp_tool("pminfo", pmcd.port, &["-m", "foo.count.nosuch"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("Unknown metric name"));

    // A guest that traps (the testing agent traps on any name with "trap" in it): that call
    // fails, the PMDA and pmcd go on, the guest's good metric and the other PMDA answer.
    let good = ok("pminfo", pmcd.port, &["-f", "bar.good"]);
    assert!(good.contains("value 42"), "{good}");
    // (Three failed guest calls: five in a row would quarantine the guest for a second.)
    {
        // pmLookupName: pmcd passes the PMDA's answer on.
        let o = pcp_tool("pmval", pmcd.port, &["-s", "1", "bar.trap"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("No PMCD agent for domain of request"), "{err}");
        // A traverse: pmcd makes an agent's failure "unknown name".
        assert!(
            !pcp_tool("pminfo", pmcd.port, &["-m", "bar.trap"])
                .status
                .success()
        );
    }
    let good = ok("pminfo", pmcd.port, &["-f", "bar.good"]);
    assert!(good.contains("value 42"), "{good}");
    assert!(ok("pminfo", pmcd.port, &["-f", "foo.count.ops"]).contains("value"));
}

#[test]
fn a_guest_replaced_under_pmcd_answers_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let foo_pmns = dir.path().join("foo.pmns");
    std::fs::write(&foo_pmns, FOO_PMNS).unwrap();
    let guest = dir.path().join("agent.wasm");
    std::fs::write(&guest, crate::common::guest_bytes("foo")).unwrap();
    let wasmon = crate::common::wasmon_bin();
    let pmda = pmda_command(dir.path());
    let params_file = dir.path().join("params.json");
    std::fs::write(&params_file, r#"{"domain":44,"root":"foo.count"}"#).unwrap();
    let params = format!("44=@{}", params_file.display());
    // The replacement compiled once beforehand (the compile cache is shared), so the reload
    // stays well inside pmcd's 5 s per request.
    let testing = crate::common::guest_path("testing_agent");
    output_ok(
        Command::new(wasmon)
            .args(["ns", "lookup", "foo.count.good", "--pmns"])
            .arg(&foo_pmns)
            .arg("--agent")
            .arg(format!("44={}", testing.display()))
            .args(["--params", &params]),
    );
    let conf = format!(
        "foo\t44\tpipe\tbinary\t{pmda} pmda --pmns {} --agent 44={} --params {params}\n",
        foo_pmns.display(),
        guest.display()
    );
    let pmcd = Pmcd::start(&conf, "root {\n    foo 44:*:*\n}\n", dir.path());
    pmcd.wait("the PMDA to answer", || {
        pcp_tool("pminfo", pmcd.port, &["foo.count.ops"])
            .status
            .success()
    });
    assert!(ok("pminfo", pmcd.port, &["-f", "foo.count.ops"]).contains("value"));
    crate::common::replace_file(&guest, &std::fs::read(&testing).unwrap());
    // The next request is answered by the new guest.
    let good = ok("pminfo", pmcd.port, &["-f", "foo.count.good"]);
    assert!(good.contains("value 42"), "{good}");
    assert!(
        !pcp_tool("pminfo", pmcd.port, &["-m", "foo.count.ops"])
            .status
            .success()
    );
}

/// The mmv guest as domain 70 under a pmcd of its own, in the place of PCP's MMV PMDA: an MMV
/// file python3-pcp writes reads the same through it as through the reference pmcd's pmdammv.
#[test]
fn the_mmv_guest_under_pmcd_reads_as_pcps_mmv_pmda() {
    let reference = reference_pmcd();
    let dir = tempfile::tempdir().unwrap();
    let mmv_dir = PathBuf::from("/var/lib/pcp/tmp/mmv");
    std::fs::create_dir_all(&mmv_dir).unwrap();
    let name = format!("wasmonpmda{}", std::process::id());
    let _file = super::mmv::MmvFile::write(mmv_dir.join(&name));
    let pmns = dir.path().join("mmv.pmns");
    std::fs::write(&pmns, "root { mmv 70:*:* }\n").unwrap();
    let params = dir.path().join("mmv.json");
    std::fs::write(&params, r#"{"dir":"mmv","root":"mmv"}"#).unwrap();
    let conf = format!(
        "mmv\t70\tpipe\tbinary\t{} pmda --pmns {} --agent 70=mmv --params 70=@{} --mapped mmv={}\n",
        pmda_command(dir.path()),
        pmns.display(),
        params.display(),
        mmv_dir.display()
    );
    let pmcd = Pmcd::start(&conf, "root {\n    mmv 70:*:*\n}\n", dir.path());
    let prefix = format!("mmv.{name}");
    let fetch = |port| {
        let o = pcp_tool("pminfo", port, &["-f", &prefix]);
        o.status
            .success()
            .then(|| super::mmv::values(&stdout(&o)))
            .filter(|v| v.len() == 9)
    };
    let mut theirs = None;
    wait_until("pmdammv to see the file", || {
        theirs = fetch(reference);
        theirs.is_some()
    });
    let mut ours = None;
    pmcd.wait("the mmv guest under pmcd to see the file", || {
        ours = fetch(pmcd.port);
        ours.is_some()
    });
    assert_eq!(ours, theirs);
    // (pmdammv lists a file's metrics newest first, the guest in the file's order.)
    let desc = |port| {
        let mut d = desc_blocks(&ok("pminfo", port, &["-d", "-m", &prefix]));
        d.sort();
        d
    };
    assert_eq!(desc(pmcd.port), desc(reference));
}
