//! wasmon's native proc agent (domain 3) against PCP's pmdaproc on the same machine: every
//! `proc.*` descriptor, the instances and values of processes that live through the test
//! (pid 1 and the test's own children, one with a command name of spaces and parentheses),
//! and `pcp ps` / `pcp pidstat` rows, through wasmon's PCP port and through a pmcd whose proc
//! PMDA is `wasmon pmda --agent 3=proc`.
//!
//! The reference pmdaproc runs with `-A`: without it, pmdaproc answers per-process metrics
//! only to clients that authenticated (a local socket with credentials), and "No permission"
//! to `-h localhost:PORT`.

use std::collections::BTreeMap;

use super::pmda::{Pmcd, pmda_command};
use super::*;

const REFERENCE_CONF: &str = "\
pmcd\t2\tdso\tpmcd_init\t/var/lib/pcp/pmdas/pmcd/pmda_pmcd.so
linux\t60\tpipe\tbinary\t\t/var/lib/pcp/pmdas/linux/pmdalinux
proc\t3\tpipe\tbinary\t\t/var/lib/pcp/pmdas/proc/pmdaproc -d 3 -A
";

/// PCP's namespace, as `Rebuild -s` writes it (the reference's `reference_pmcd` makes sure).
fn pcp_pmns() -> String {
    reference_pmcd();
    std::fs::read_to_string("/var/lib/pcp/pmns/root").unwrap()
}

/// Children that outlive the test's fetches; killed on drop.
struct Kids(
    Vec<std::process::Child>,
    #[allow(dead_code)] tempfile::TempDir,
);

impl Drop for Kids {
    fn drop(&mut self) {
        for k in &mut self.0 {
            let _ = k.kill();
            let _ = k.wait();
        }
    }
}

impl Kids {
    /// A plain `sleep`, and `sleep` run through a link named with spaces and parentheses (its
    /// comm and command line carry them).
    fn spawn() -> Kids {
        let dir = tempfile::tempdir().unwrap();
        let odd = dir.path().join("sl eep (x)");
        std::os::unix::fs::symlink("/bin/sleep", &odd).unwrap();
        let kids: Vec<std::process::Child> = [Path::new("/bin/sleep"), odd.as_path()]
            .iter()
            .map(|p| {
                Command::new(p)
                    .arg("3600")
                    .stdin(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for k in &kids {
            let comm = format!("/proc/{}/comm", k.id());
            wait_until("the child's exec", || {
                std::fs::read_to_string(&comm).is_ok_and(|c| c.starts_with("sl"))
            });
        }
        Kids(kids, dir)
    }

    fn pids(&self) -> Vec<u32> {
        self.0.iter().map(|k| k.id()).collect()
    }
}

/// `pminfo -f` of `names`: metric -> instance name ("" when singular) -> value as printed (a
/// string value's later lines, as in `proc.memory.maps`, joined to it).
fn values(text: &str, names: &[String]) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut metric = String::new();
    let mut last: Option<String> = None;
    for line in text.lines() {
        if names.iter().any(|n| n == line) {
            metric = line.to_string();
            out.entry(metric.clone()).or_default();
            last = None;
            continue;
        }
        let l = line.trim_start();
        let (inst, value) = if let Some(v) = l.strip_prefix("value ") {
            (String::new(), v)
        } else if let Some(rest) = l.strip_prefix("inst [")
            && let Some((_, rest)) = rest.split_once(" or \"")
            && let Some((name, v)) = rest.split_once("\"] value ")
        {
            (name.to_string(), v)
        } else {
            if let Some(inst) = &last
                && let Some(v) = out.get_mut(&metric).and_then(|m| m.get_mut(inst))
            {
                v.push('\n');
                v.push_str(line);
            }
            continue;
        };
        out.entry(metric.clone())
            .or_default()
            .insert(inst.clone(), value.to_string());
        last = Some(inst);
    }
    out
}

/// Values that move while a sleeping process sleeps: shares of pages other processes map too,
/// the OOM score (relative to everyone's memory), and `ngid`, which pmdaproc 6.0.3 answers
/// with the index of the number's text in its string table rather than the number.
const MOVING: &[&str] = &[
    "proc.smaps.pss",
    "proc.smaps.pss_anon",
    "proc.smaps.pss_file",
    "proc.smaps.pss_shmem",
    "proc.smaps.swappss",
    "proc.psinfo.oom_score",
    "proc.psinfo.ngid",
];

#[test]
fn proc_agent_matches_pcps_proc_pmda_descriptors_instances_and_values() {
    let pmns = pcp_pmns();
    let logs = tempfile::tempdir().unwrap();
    let reference = Pmcd::start(REFERENCE_CONF, &pmns, logs.path());
    reference.wait("pmdaproc", || {
        pcp_tool("pminfo", reference.port, &["-f", "proc.psinfo.pid"])
            .stdout
            .windows(7)
            .any(|w| w == b"000001 ")
    });
    let w = wasmon_with("");
    let names: Vec<String> = ok("pminfo", reference.port, &["proc"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(names.len(), 153, "{names:?}");
    let ours: Vec<String> = ok("pminfo", w.pcp, &["proc"])
        .lines()
        .map(str::to_string)
        .collect();
    let (mut a, mut b) = (ours.clone(), names.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b, "proc.* names: wasmon (left) vs pmcd (right)");

    // Descriptors: PMID, type, indom, semantics, units.
    let mut args = vec!["-m", "-d"];
    args.extend(names.iter().map(String::as_str));
    let ours = desc_blocks(&ok("pminfo", w.pcp, &args));
    let theirs = desc_blocks(&ok("pminfo", reference.port, &args));
    assert_eq!(ours.len(), names.len());
    for ((name, a), (_, b)) in ours.iter().zip(&theirs) {
        assert_eq!(a, b, "{name}: wasmon (left) vs pmcd's proc PMDA (right)");
    }

    // Values of the processes that live through both fetches.
    let kids = Kids::spawn();
    let mut fargs = vec!["-f"];
    fargs.extend(names.iter().map(String::as_str));
    let ours = values(&ok("pminfo", w.pcp, &fargs), &names);
    let theirs = values(&ok("pminfo", reference.port, &fargs), &names);
    assert_eq!(ours.len(), names.len());
    let stable: Vec<String> = std::iter::once(1)
        .chain(kids.pids())
        .map(|pid| format!("{pid:06} "))
        .collect();
    let mut compared = 0;
    let mut wrong = Vec::new();
    for name in &names {
        let (a, b) = (&ours[name], &theirs[name]);
        if b.contains_key("") || name.starts_with("proc.runq.") || name == "proc.nprocs" {
            // Singular: both have a value (counts of processes move between the fetches).
            assert_eq!(a.contains_key(""), b.contains_key(""), "{name}");
            continue;
        }
        for prefix in &stable {
            let pick = |m: &BTreeMap<String, String>| {
                m.iter()
                    .find(|(i, _)| i.starts_with(prefix.as_str()))
                    .map(|(i, v)| (i.clone(), v.clone()))
            };
            let (x, y) = (pick(a), pick(b));
            // A process's io that the kernel refuses at read (not at open: pid 1 here, whose
            // capabilities exceed the test's) is no value for wasmon; pmdaproc answers the
            // numbers left in its buffer by the file it read before (0 here).
            let refused = name.starts_with("proc.io.")
                && x.is_none()
                && std::fs::read(format!(
                    "/proc/{}/io",
                    prefix.trim().parse::<u32>().unwrap()
                ))
                .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
            // The same instance, with a value or without one in both.
            if !refused && x.as_ref().map(|p| &p.0) != y.as_ref().map(|p| &p.0) {
                wrong.push(format!("{name} {prefix}: instance {x:?} vs pmcd's {y:?}"));
            }
            // The children sleep: every value but the moving ones stays put.
            if prefix != &stable[0] && !MOVING.contains(&name.as_str()) {
                let (x, y) = (x.map(|p| p.1), y.map(|p| p.1));
                if x != y {
                    wrong.push(format!("{name} {prefix}: value {x:?} vs pmcd's {y:?}"));
                }
                compared += 1;
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "wasmon vs pmdaproc:\n{}",
        wrong.join("\n")
    );
    assert!(compared > 250, "{compared} values compared");
    let odd = format!("{:06} ", kids.pids()[1]);
    let cmd = ours["proc.psinfo.cmd"]
        .iter()
        .find(|(i, _)| i.starts_with(&odd))
        .map(|(_, v)| v.clone());
    assert_eq!(cmd.as_deref(), Some("\"sl eep (x)\""));

    // The instance domain alone (pmGetInDom, as pmprobe -I asks it).
    let probe = ok("pmprobe", w.pcp, &["-I", "proc.psinfo.pid"]);
    for prefix in &stable {
        assert!(
            probe.contains(&format!("\"{prefix}")),
            "{prefix} in {probe}"
        );
    }
    drop(w.daemon);
}

/// A PCP python front-end (`pcp ps`, `pcp pidstat`) against `localhost:port`: Debian's
/// python3 first on PATH (its `pcp` module), the timestamps of its rows cut.
fn front_end(port: u16, args: &[&str]) -> (bool, String) {
    // Bounded: pcp-ps waits without end for values a server lists but never has.
    let o = Command::new("timeout")
        .args(["60", "pcp", "-h", &format!("localhost:{port}")])
        .args(args)
        .env(
            "PATH",
            format!("/usr/bin:{}", std::env::var("PATH").unwrap_or_default()),
        )
        .env("PCP_DERIVED_CONFIG", "")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let rows = text
        .lines()
        .map(|l| {
            let cut = l.len().min(8);
            if l.is_char_boundary(cut) && l[..cut].bytes().all(|b| b.is_ascii_digit() || b == b':')
            {
                l[cut..].trim_start().to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    (o.status.success(), rows)
}

/// The front-ends' runs compared: ps rows of the children, pidstat's reports of them.
fn front_end_runs(kids: &Kids) -> Vec<Vec<String>> {
    let p = kids
        .pids()
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut runs: Vec<Vec<String>> = vec![vec!["ps".into(), "-p".into(), p.clone()]];
    runs.push(vec![
        "ps".into(),
        "-p".into(),
        p.clone(),
        "-o".into(),
        "all".into(),
    ]);
    // Every column pcp-ps knows, each from its own metrics.
    runs.push(vec![
        "ps".into(),
        "-p".into(),
        p.clone(),
        "-o".into(),
        "pid,ppid,cls,rtprio,pname,tty,uid,uname,wchan,start,cmd,%mem,rss,vsize,state,pri,time"
            .into(),
    ]);
    for extra in ["", "-R", "-r", "-k", "-l", "-U", "-I"] {
        let mut run: Vec<String> = ["pidstat", "-s", "2", "-t", "1", "-p"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        run.push(p.clone());
        if !extra.is_empty() {
            run.push(extra.into());
        }
        runs.push(run);
    }
    runs
}

#[test]
fn pcp_ps_and_pidstat_show_the_same_rows_as_against_pmdaproc() {
    let pmns = pcp_pmns();
    let logs = tempfile::tempdir().unwrap();
    let reference = Pmcd::start(REFERENCE_CONF, &pmns, logs.path());
    // The same pmcd, with wasmon's proc agent as its proc PMDA.
    let ours_conf = REFERENCE_CONF.replace(
        "/var/lib/pcp/pmdas/proc/pmdaproc -d 3 -A",
        &format!("{} pmda --agent 3=proc", pmda_command(logs.path())),
    );
    let through_pmda = Pmcd::start(&ours_conf, &pmns, logs.path());
    for pmcd in [&reference, &through_pmda] {
        pmcd.wait("the proc PMDA", || {
            pcp_tool("pminfo", pmcd.port, &["-f", "proc.psinfo.pid"])
                .stdout
                .windows(7)
                .any(|w| w == b"000001 ")
        });
    }
    let w = wasmon_with("");
    let kids = Kids::spawn();
    for run in front_end_runs(&kids) {
        let args: Vec<&str> = run.iter().map(String::as_str).collect();
        let (ok_ref, theirs) = front_end(reference.port, &args);
        assert!(ok_ref, "{args:?} against pmcd: {theirs}");
        // Rows of both children (`-R` lists real-time processes only: none here).
        let rows = kids.pids().iter().all(|p| theirs.contains(&p.to_string()));
        assert!(rows || args.contains(&"-R"), "{args:?}: {theirs}");
        let (ok_pmda, ours) = front_end(through_pmda.port, &args);
        assert!(ok_pmda, "{args:?} with wasmon as proc PMDA: {ours}");
        assert_eq!(
            ours, theirs,
            "{args:?}: wasmon's proc agent (left) vs pmdaproc (right)"
        );
        // wasmon's own port: the same rows, once its linux agent has the values the
        // front-ends also ask of domain 60 (pcp-ps waits without end for values a server
        // lists but lacks).
        let linux = [
            "kernel.uname.release",
            "kernel.uname.nodename",
            "kernel.all.boottime",
        ];
        let lacking: Vec<&str> = linux
            .into_iter()
            .filter(|m| !stdout(&pcp_tool("pminfo", w.pcp, &["-f", m])).contains("value "))
            .collect();
        if lacking.is_empty() {
            let (ok_port, direct) = front_end(w.pcp, &args);
            assert!(ok_port, "{args:?} against wasmon's port: {direct}");
            assert_eq!(
                direct, theirs,
                "{args:?}: wasmon's port (left) vs pmcd (right)"
            );
        } else {
            eprintln!("{args:?} not run against wasmon's port: no values for {lacking:?}");
        }
    }
    drop(w.daemon);
}
