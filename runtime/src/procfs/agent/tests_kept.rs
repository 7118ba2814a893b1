//! The files the proc agent keeps open between fetches (`pass::KEEP`), on this machine's
//! /proc: a child's values through the kept files equal a fresh agent's after the child
//! `exec`s, after it exits and its pid is reused; the agent's share of the budget and the
//! budget every reader shares hold; nothing is kept under a root that is not procfs.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::table::*;
use super::*;
use crate::namespace::Value;
use crate::procfs::sys::{kept_budget, kept_now};

/// Metrics whose values do not move while a process sleeps in one system call: one at least
/// from each kept file (stat, status, statm, io, schedstat, oom_score, cgroup, wchan,
/// autogroup, attr/current) and from the files opened per fetch (smaps_rollup, maps, environ,
/// fd, exe, cwd).
const STILL: [&str; 26] = [
    "proc.psinfo.pid",
    "proc.psinfo.cmd",
    "proc.psinfo.sname",
    "proc.psinfo.ppid",
    "proc.psinfo.start_time",
    "proc.psinfo.vsize",
    "proc.psinfo.rss",
    "proc.psinfo.wchan_s",
    "proc.psinfo.cgroups",
    "proc.psinfo.labels",
    "proc.psinfo.oom_score",
    "proc.psinfo.exe",
    "proc.psinfo.cwd",
    "proc.psinfo.environ",
    "proc.psinfo.vctxsw",
    "proc.id.uid",
    "proc.memory.size",
    "proc.memory.textrss",
    "proc.memory.vmsize",
    "proc.memory.maps",
    "proc.io.rchar",
    "proc.io.syscr",
    "proc.schedstat.cpu_time",
    "proc.smaps.rss",
    "proc.fd.count",
    "proc.autogroup.id",
];

fn still_ids() -> Vec<Pmid> {
    STILL
        .iter()
        .map(|n| pmid_of(DEFS.iter().find(|d| d.name == *n).expect(n)))
        .collect()
}

/// The process `pid`'s instance name and its value of each of `ids` (`None`: no value).
fn values_of(agent: &mut ProcAgent, ids: &[Pmid], pid: u32) -> (String, Vec<Option<Value>>) {
    let mut inst = None;
    let vals = agent
        .fetch(ids)
        .into_iter()
        .map(|(_, r)| {
            let (name, v) = r
                .unwrap()
                .into_iter()
                .find(|(n, _)| pid_of_instance(n) == Some(pid))?;
            inst.get_or_insert(name);
            Some(v)
        })
        .collect();
    (inst.unwrap_or_else(|| panic!("pid {pid} not listed")), vals)
}

/// What an agent that keeps no file reads of `pid` now, beside what `kept` reads.
fn kept_and_fresh(kept: &mut ProcAgent, pid: u32) -> (Vec<Option<Value>>, Vec<Option<Value>>) {
    let ids = still_ids();
    let (_, k) = values_of(kept, &ids, pid);
    let mut fresh = ProcAgent::new();
    fresh.pass.keep_at_most(0);
    let (_, f) = values_of(&mut fresh, &ids, pid);
    assert_eq!(fresh.kept_files(), 0);
    (k, f)
}

fn field(vals: &[Option<Value>], name: &str) -> Value {
    let i = STILL.iter().position(|n| *n == name).unwrap();
    vals[i]
        .clone()
        .unwrap_or_else(|| panic!("{name}: no value"))
}

/// A shell blocked reading its stdin: a line makes it `exec` a sleep.
fn shell() -> Child {
    Command::new("sh")
        .args(["-c", "read x; exec sleep 600"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until `pid`'s command is `comm` and it sleeps.
fn wait_for(pid: u32, comm: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.contains(&format!("({comm}) S ")) {
            return;
        }
        assert!(Instant::now() < deadline, "pid {pid}: {stat}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A `sleep` started with the pid `pid` (the kernel's next pid set through `ns_last_pid`),
/// `None` when this test may not set it (not root) or other processes kept taking the pid.
fn sleep_at(pid: u32) -> Option<Child> {
    for _ in 0..200 {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open("/proc/sys/kernel/ns_last_pid")
            .ok()?;
        f.write_all((pid - 1).to_string().as_bytes()).ok()?;
        let mut c = Command::new("sleep")
            .arg("601")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        if c.id() == pid {
            return Some(c);
        }
        let _ = c.kill();
        let _ = c.wait();
    }
    None
}

#[test]
fn kept_files_read_what_a_fresh_open_reads_after_exec_exit_and_pid_reuse() {
    let mut sh = shell();
    let pid = sh.id();
    wait_for(pid, "sh");
    let mut kept = ProcAgent::new();
    let ids = still_ids();
    // The first fetch opens and keeps; the next ones read through the kept files.
    values_of(&mut kept, &ids, pid);
    assert!(kept.kept_files() > 0, "nothing kept");
    let (before, fresh) = kept_and_fresh(&mut kept, pid);
    assert_eq!(before, fresh, "before exec");
    assert_eq!(field(&before, "proc.psinfo.cmd"), Value::Text("sh".into()));

    // The shell becomes `sleep`: same task, new address space.
    sh.stdin.take().unwrap().write_all(b"go\n").unwrap();
    wait_for(pid, "sleep");
    let (after, fresh) = kept_and_fresh(&mut kept, pid);
    assert_eq!(after, fresh, "after exec");
    assert_eq!(
        field(&after, "proc.psinfo.cmd"),
        Value::Text("sleep".into())
    );
    for moved in [
        "proc.psinfo.exe",
        "proc.memory.maps",
        "proc.memory.vmsize",
        "proc.smaps.rss",
    ] {
        assert_ne!(field(&before, moved), field(&after, moved), "{moved}");
    }

    // It exits and is reaped; no fetch until a new process has its pid.
    let start = field(&after, "proc.psinfo.start_time");
    sh.kill().unwrap();
    sh.wait().unwrap();
    let Some(mut again) = sleep_at(pid) else {
        eprintln!("pid {pid} could not be reused here (not root?): the reuse is not checked");
        return;
    };
    wait_for(pid, "sleep");
    let (reused, fresh) = kept_and_fresh(&mut kept, pid);
    let (inst, psargs) = values_of(
        &mut kept,
        &[pmid_of(
            DEFS.iter()
                .find(|d| d.name == "proc.psinfo.psargs")
                .unwrap(),
        )],
        pid,
    );
    let _ = again.kill();
    let _ = again.wait();
    assert_eq!(reused, fresh, "after pid reuse");
    assert_ne!(field(&reused, "proc.psinfo.start_time"), start);
    assert_eq!(inst, format!("{pid:06} sleep"));
    assert_eq!(psargs, vec![Some(Value::Text("sleep 601".into()))]);
}

#[test]
fn kept_files_stay_within_the_agents_share_and_the_shared_budget() {
    let ids = still_ids();
    let me = std::process::id();
    let mut small = ProcAgent::new();
    small.pass.keep_at_most(7);
    let mut whole = ProcAgent::new();
    for round in 0..3 {
        let (_, a) = values_of(&mut small, &ids, me);
        let (_, b) = values_of(&mut whole, &ids, me);
        // This process's own fd count moves with the other tests; the rest does not.
        let fd = STILL.iter().position(|n| *n == "proc.fd.count").unwrap();
        let cmd = STILL.iter().position(|n| *n == "proc.psinfo.cmd").unwrap();
        assert_eq!(a[cmd], b[cmd], "round {round}");
        assert!(a[fd].is_some() && b[fd].is_some());
        let n = small.kept_files();
        assert!((1..=7).contains(&n), "round {round}: {n} kept, at most 7");
        let n = whole.kept_files();
        assert!(
            n > 7 && n <= kept_budget() / 2,
            "round {round}: {n} kept of a budget of {}",
            kept_budget()
        );
        assert!(
            kept_now() <= kept_budget(),
            "{} > {}",
            kept_now(),
            kept_budget()
        );
    }
}

#[test]
fn nothing_is_kept_under_a_root_that_is_not_procfs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("proc/7");
    std::fs::create_dir_all(&p).unwrap();
    let stat =
        |utime: u32| format!("7 (x) S 1 7 7 0 -1 0 0 0 0 0 {utime} 6 0 0 20 0 1 0 100 1000 10 0\n");
    std::fs::write(p.join("stat"), stat(5)).unwrap();
    let mut agent = ProcAgent::with_threads(dir.path(), 1);
    let utime = [pmid_of(
        DEFS.iter().find(|d| d.name == "proc.psinfo.utime").unwrap(),
    )];
    let read = |agent: &mut ProcAgent| values_of(agent, &utime, 7).1;
    assert_eq!(read(&mut agent), vec![Some(Value::Uint(50))]);
    // A file replaced (a new inode) is read as it is now.
    let tmp = p.join("stat.new");
    std::fs::write(&tmp, stat(9)).unwrap();
    std::fs::rename(&tmp, p.join("stat")).unwrap();
    assert_eq!(read(&mut agent), vec![Some(Value::Uint(90))]);
    assert_eq!(agent.kept_files(), 0);
}
