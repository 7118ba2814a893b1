//! The proc agent on trees: three processes captured from a 2-CPU VM (its init, kthreadd and a
//! `sleep`, in testdata/tree) plus processes synthesized here in the shapes the kernel writes
//! (a comm with spaces and parentheses on a pty, a zombie, a process whose `io` cannot be read
//! and whose `status` is gone, one that vanished before its `stat`, a seven-digit kernel
//! thread); the parsers alone; and the agent on this machine's /proc.

use std::collections::HashMap;
use std::path::Path;

use super::files::*;
use super::table::*;
use super::*;
use crate::namespace::Value;

fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// A stat line with `fields` (4..) given by number; the rest 0.
fn stat_line(pid: u32, comm: &str, state: char, set: &[(usize, i64)]) -> String {
    let mut f = vec![0i64; 53];
    for &(n, v) in set {
        f[n] = v;
    }
    let rest: Vec<String> = f[4..].iter().map(i64::to_string).collect();
    format!("{pid} ({comm}) {state} {}\n", rest.join(" "))
}

const CID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// The captured tree plus the synthesized processes, in a temporary directory.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/procfs/agent/testdata/tree"),
        root,
    );
    let proc = root.join("proc");
    let put = |rel: &str, body: &[u8]| {
        let p = proc.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    };
    // 300: comm with spaces and parentheses, running, on /dev/pts/3 (136 << 8 | 3), uid 1000,
    // the fields past `processor` numbered 40.. so the shift pmdaproc makes is visible.
    put(
        "300/stat",
        stat_line(
            300,
            "a) b (c",
            'R',
            &[
                (4, 1),
                (7, (136 << 8) | 3),
                (8, 300),
                (14, 250),
                (15, 50),
                (18, 20),
                (19, -5),
                (22, 1000),
                (23, 8 << 20),
                (24, 100),
                (40, 7),
                (41, 2),
                (42, 3),
                (43, 4),
                (44, 5),
                (45, 6),
            ],
        )
        .as_bytes(),
    );
    put("300/cmdline", b"my prog\0--flag\0\0");
    put(
        "300/status",
        b"Name:\ta) b (c\nUid:\t1000\t1000\t1000\t1000\nGid:\t50\t50\t50\t50\nVmRSS:\t  400 kB\nVmSwap:\t  100 kB\nVmLib:\t  1000 kB\nNSpid:\t300\t1\nThreads:\t2\n",
    );
    put(
        "300/cgroup",
        format!("1:cpu:/\n0:cpuset:/machine.slice/libpod-{CID}.scope\n").as_bytes(),
    );
    put("300/environ", b"A=1\0B=two words\0");
    // 400: a zombie (no command line, no memory).
    put(
        "400/stat",
        stat_line(400, "defunct-kid", 'Z', &[(4, 1)]).as_bytes(),
    );
    put("400/cmdline", b"");
    put("400/status", b"Name:\tdefunct-kid\nState:\tZ (zombie)\n");
    // 500: in disk wait; its `io` cannot be read (a directory stands in for a file this
    // daemon may not open: the tests run as root, whom modes do not stop) and its `status`
    // went away mid-pass; three open files, an executable and a working directory.
    put(
        "500/stat",
        stat_line(500, "worker", 'D', &[(4, 1), (23, 4096)]).as_bytes(),
    );
    put("500/cmdline", b"/usr/bin/worker\0");
    std::fs::create_dir_all(proc.join("500/io")).unwrap();
    for fd in 0..3 {
        put(&format!("500/fd/{fd}"), b"");
    }
    std::os::unix::fs::symlink("/usr/bin/worker", proc.join("500/exe")).unwrap();
    std::os::unix::fs::symlink("/srv", proc.join("500/cwd")).unwrap();
    // 600: listed, but gone before its stat was read.
    std::fs::create_dir_all(proc.join("600")).unwrap();
    // 1234567: a kernel thread with a seven-digit pid.
    put(
        "1234567/stat",
        stat_line(1234567, "kworker/u8:0", 'I', &[(4, 2)]).as_bytes(),
    );
    put("1234567/status", b"Name:\tkworker/u8:0\nState:\tI (idle)\n");
    dir
}

fn id(cluster: u32, item: u32) -> Pmid {
    Pmid {
        domain: PROC_DOMAIN,
        cluster,
        item,
    }
}

fn all_ids() -> Vec<Pmid> {
    DEFS.iter().map(pmid_of).collect()
}

/// Every metric's values by name, then instance name.
fn fetch_all(agent: &mut ProcAgent) -> HashMap<&'static str, HashMap<String, Value>> {
    let ids = all_ids();
    let got = agent.fetch(&ids);
    assert_eq!(got.len(), DEFS.len());
    got.into_iter()
        .zip(DEFS)
        .map(|((pmid, r), def)| {
            assert_eq!(pmid, pmid_of(def));
            let vals = r.unwrap_or_else(|e| panic!("{}: {e}", def.name));
            (def.name, vals.into_iter().collect())
        })
        .collect()
}

fn u(v: u64) -> Value {
    Value::Uint(v)
}

fn t(s: &str) -> Value {
    Value::Text(s.to_string())
}

#[test]
fn every_metric_of_a_captured_and_synthesized_tree() {
    let dir = tree();
    let mut agent = ProcAgent::with_root(dir.path());
    let hz = agent.pass.reader.clk_tck();
    let page_kb = agent.pass.reader.page_size() / 1024;
    let v = fetch_all(&mut agent);
    assert_eq!(agent.passes(), 1, "one pass for all 153 metrics");
    assert_eq!(agent.skipped(), 1, "pid 600 vanished");
    let get = |m: &str, inst: &str| v[m].get(inst).cloned();

    // Instances: named as pmdaproc names them, numbered by pid.
    let mut insts: Vec<&String> = v["proc.psinfo.pid"].keys().collect();
    insts.sort();
    assert_eq!(
        insts,
        [
            "000001 /process_api",
            "000002 (kthreadd)",
            "000300 my",
            "000400 (defunct-kid)",
            "000500 /usr/bin/worker",
            "006745 sleep",
            "1234567 (worker/u8:0)",
        ]
    );
    for name in &insts {
        let pid = agent.instance_id(PROC_INDOM, name).unwrap();
        assert_eq!(get("proc.psinfo.pid", name), Some(u(u64::from(pid))));
        assert_eq!(
            agent.labels(LabelsOf::Instance(PROC_INDOM, name)),
            vec![("pid".to_string(), serde_json::Value::from(pid))]
        );
    }
    assert_eq!(v["proc.nprocs"][""], u(7));
    assert_eq!(
        get("proc.psinfo.psargs", "000001 /process_api"),
        Some(t(
            "/process_api --firecracker-init --addr 0.0.0.0:2024 --max-ws-buffer-size 32768 --block-local-connections --log-vsock-port 5002 --control-vsock-port 5001 --listen-vsock-port 2024 --tcp-readiness-only --auth-required"
        ))
    );
    assert_eq!(
        get("proc.psinfo.psargs", "000002 (kthreadd)"),
        Some(t("(kthreadd)"))
    );

    // stat, with pmdaproc's shift past `processor`.
    let p = "000300 my";
    assert_eq!(get("proc.psinfo.cmd", p), Some(t("a) b (c")));
    assert_eq!(get("proc.psinfo.psargs", p), Some(t("my prog --flag")));
    assert_eq!(get("proc.psinfo.sname", p), Some(t("R")));
    assert_eq!(get("proc.psinfo.ppid", p), Some(u(1)));
    assert_eq!(get("proc.psinfo.tty_pgrp", p), Some(u(300)));
    assert_eq!(get("proc.psinfo.tty_pgrp", "000001 /process_api"), None);
    assert_eq!(get("proc.psinfo.ttyname", p), Some(t("pts/3")));
    assert_eq!(get("proc.psinfo.ttyname", "006745 sleep"), Some(t("?")));
    assert_eq!(get("proc.psinfo.utime", p), Some(u(250 * 1000 / hz)));
    assert_eq!(get("proc.psinfo.stime", p), Some(u(50 * 1000 / hz)));
    assert_eq!(get("proc.psinfo.start_time", p), Some(u(1000 * 1000 / hz)));
    assert_eq!(get("proc.psinfo.nice", p), Some(Value::Int(-5)));
    assert_eq!(get("proc.psinfo.priority", p), Some(Value::Int(7)));
    assert_eq!(get("proc.psinfo.rt_priority", p), Some(u(2)));
    assert_eq!(get("proc.psinfo.policy", p), Some(u(3)));
    assert_eq!(get("proc.psinfo.policy_s", p), Some(t("BATCH")));
    assert_eq!(
        get("proc.psinfo.delayacct_blkio_time", p),
        Some(u(4000 / hz))
    );
    assert_eq!(get("proc.psinfo.guest_time", p), Some(u(5000 / hz)));
    assert_eq!(get("proc.psinfo.cguest_time", p), Some(u(6000 / hz)));
    assert_eq!(get("proc.psinfo.vsize", p), Some(u(8 << 10)));
    assert_eq!(get("proc.psinfo.rss", p), Some(u(100 * page_kb)));
    assert_eq!(get("proc.psinfo.environ", p), Some(t("A=1 B=two words")));
    // The captured init: rss_rlim is "unlimited" (2^64-1 bytes) in Kbyte.
    assert_eq!(
        get("proc.psinfo.rss_rlim", "000001 /process_api"),
        Some(u(u64::MAX / 1024))
    );
    assert_eq!(
        get("proc.psinfo.minflt", "000001 /process_api"),
        Some(u(60763))
    );
    assert_eq!(
        get("proc.psinfo.cmin_flt", "000001 /process_api"),
        Some(u(25497207))
    );

    // status, names from ROOT/etc, and the uid pmdaproc gives for the gid.
    assert_eq!(get("proc.id.uid", p), Some(u(1000)));
    assert_eq!(get("proc.id.uid_nm", p), Some(t("alice")));
    assert_eq!(get("proc.id.gid", p), Some(u(1000)));
    assert_eq!(get("proc.id.egid", p), Some(u(50)));
    assert_eq!(get("proc.id.gid_nm", p), Some(t("staff")));
    assert_eq!(get("proc.id.uid_nm", "006745 sleep"), Some(t("root")));
    assert_eq!(get("proc.memory.vmreal", p), Some(u(500)));
    assert_eq!(get("proc.memory.vmnonlib", p), Some(u(0)));
    assert_eq!(get("proc.namespaces.pid", p), Some(t("300,1")));
    assert_eq!(get("proc.psinfo.threads", p), Some(u(2)));
    let s = "006745 sleep";
    assert_eq!(get("proc.memory.vmsize", s), Some(u(2920)));
    assert_eq!(get("proc.memory.vmhwm", s), Some(u(1796)));
    assert_eq!(get("proc.memory.vmlib", s), Some(u(1528)));
    assert_eq!(
        get("proc.psinfo.sigignore_s", s),
        Some(t("0000000000000006"))
    );
    assert_eq!(get("proc.psinfo.cpusallowed", s), Some(t("0-1")));
    assert_eq!(get("proc.psinfo.tgid", s), Some(u(6745)));
    assert_eq!(get("proc.psinfo.ngid", s), Some(u(0)));
    assert_eq!(get("proc.namespaces.sid", s), Some(t("8026")));
    assert_eq!(get("proc.namespaces.envid", s), None);
    // 500's status went away: its status metrics have no value, its others do.
    assert_eq!(get("proc.id.uid", "000500 /usr/bin/worker"), None);
    assert_eq!(
        get("proc.psinfo.vsize", "000500 /usr/bin/worker"),
        Some(u(4))
    );

    // statm in Kbyte, io, schedstat, smaps, fd, oom, links, cgroup, autogroup, wchan.
    assert_eq!(get("proc.memory.size", s), Some(u(730 * page_kb)));
    assert_eq!(get("proc.memory.datrss", s), Some(u(89 * page_kb)));
    assert_eq!(get("proc.io.rchar", s), Some(u(6976)));
    assert_eq!(get("proc.io.syscr", s), Some(u(10)));
    assert_eq!(get("proc.io.rchar", "000500 /usr/bin/worker"), None);
    assert_eq!(get("proc.io.rchar", "000001 /process_api"), None);
    assert_eq!(get("proc.schedstat.cpu_time", s), Some(u(944038)));
    assert_eq!(get("proc.schedstat.pcount", s), Some(u(1)));
    assert_eq!(get("proc.smaps.rss", s), Some(u(1796)));
    assert_eq!(get("proc.smaps.pss", s), Some(u(205)));
    assert_eq!(get("proc.smaps.rss", "000002 (kthreadd)"), None);
    assert_eq!(get("proc.fd.count", "000500 /usr/bin/worker"), Some(u(3)));
    assert_eq!(get("proc.fd.count", s), None);
    assert_eq!(get("proc.psinfo.oom_score", s), Some(u(666)));
    assert_eq!(
        get("proc.psinfo.exe", "000500 /usr/bin/worker"),
        Some(t("/usr/bin/worker"))
    );
    assert_eq!(
        get("proc.psinfo.cwd", "000500 /usr/bin/worker"),
        Some(t("/srv"))
    );
    assert_eq!(get("proc.psinfo.exe", s), Some(t("")));
    assert_eq!(
        get("proc.psinfo.cgroups", p),
        Some(t(
            "cpu:/;cpuset:/machine.slice/libpod-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope"
        ))
    );
    assert_eq!(get("proc.id.container", p), Some(t(CID)));
    assert_eq!(get("proc.id.container", s), Some(t("")));
    assert!(get("proc.psinfo.cgroups", s).is_some_and(|c| c
        == t("name=systemd:/;pids:/;blkio:/;freezer:/;devices:/;memory:/process_api/4d0019d4416e3c7bc286ba19c48a17ab;cpuset:/;cpuacct:/;cpu:/;:/")));
    assert_eq!(v["proc.autogroup.enabled"][""], u(1));
    assert_eq!(get("proc.autogroup.id", s), Some(u(8)));
    assert_eq!(get("proc.autogroup.nice", s), Some(Value::Int(0)));
    assert_eq!(get("proc.psinfo.wchan_s", s), Some(t("hrtimer_nanosleep")));
    assert!(v["proc.psinfo.labels"].is_empty());
    // No maps in the tree: empty, as pmdaproc answers an unreadable one.
    assert_eq!(get("proc.memory.maps", s), Some(t("")));

    // Run queue: 1 and 6745 sleep, 2 and 1234567 are kernel threads, 300 runs, 400 is a
    // zombie, 500 waits on disk.
    let q: Vec<Value> = [
        "runnable", "blocked", "sleeping", "stopped", "swapped", "defunct", "unknown", "kernel",
    ]
    .iter()
    .map(|n| v[format!("proc.runq.{n}").as_str()][""].clone())
    .collect();
    let want: Vec<Value> = [1, 1, 2, 0, 2, 1, 0, 0]
        .into_iter()
        .map(Value::Int)
        .collect();
    assert_eq!(q, want);
    assert_eq!(v["proc.control.all.threads"][""], u(0));
    assert_eq!(v["proc.control.perclient.cgroups"][""], t(""));

    // The agent's own instance listing, and an unknown PMID.
    let mut listed = agent.instances(PROC_INDOM).unwrap();
    listed.sort();
    assert_eq!(listed.iter().collect::<Vec<_>>(), insts);
    assert_eq!(agent.instances(0), None);
    assert_eq!(
        agent.fetch(&[id(8, 19)]).pop().unwrap().1,
        Err(NsError::UnknownPmid)
    );
}

#[test]
fn a_missing_root_is_an_error_for_every_metric() {
    let mut agent = ProcAgent::with_root("/nonexistent-wasmon-root");
    for (_, r) in agent.fetch(&[id(8, 0), id(8, 99)]) {
        let e = r.unwrap_err();
        assert!(
            e.to_string().contains("/nonexistent-wasmon-root/proc"),
            "{e}"
        );
    }
}

#[test]
fn descriptors_and_pmns_cover_the_table() {
    assert_eq!(DEFS.len(), 153);
    let ns = crate::namespace::Namespace::from_pmns(&[("proc", PROC_PMNS.as_str())]).unwrap();
    let mut agent = ProcAgent::new();
    for def in DEFS {
        assert_eq!(
            ns.lookup(def.name, None).unwrap(),
            pmid_of(def),
            "{}",
            def.name
        );
        assert_eq!(agent.lookup_name(def.name), Ok(pmid_of(def)));
        let d = agent.describe(pmid_of(def)).unwrap();
        assert_eq!(d.indom.is_some(), def.per_proc);
        assert!(!d.help.is_empty());
    }
    // PMIDs are unique.
    let mut ids: Vec<Pmid> = DEFS.iter().map(pmid_of).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), DEFS.len());
    assert_eq!(agent.lookup_name("proc.psinfo"), Err(NsError::NonLeaf));
    assert_eq!(agent.lookup_name("proc.nosuch"), Err(NsError::UnknownName));
    assert_eq!(agent.label_name().as_deref(), Some("proc"));
}

/// Each metric's help is one line of its own: no two alike, short enough for `pminfo -T`,
/// and naming where the value comes from (or saying why it is fixed).
#[test]
fn help_is_one_distinct_line_per_metric() {
    let mut seen: HashMap<&str, &str> = HashMap::new();
    for def in DEFS {
        let h = def.help;
        assert!(!h.trim().is_empty() && h.trim() == h, "{}: {h:?}", def.name);
        assert!(!h.chars().any(char::is_control), "{}: {h:?}", def.name);
        assert!(h.chars().count() <= 160, "{}: help too long", def.name);
        assert!(
            h.contains("/proc")
                || h.contains("always")
                || h.contains("PCP")
                || h.contains("policy"),
            "{}: help names no source: {h:?}",
            def.name
        );
        if let Some(other) = seen.insert(h, def.name) {
            panic!("{} repeats the help of {other}: {h:?}", def.name);
        }
    }
}

#[test]
fn this_machines_processes_in_one_pass() {
    // A child with a known descriptor count: this process's own moves with the other tests'
    // agents and the files they keep open.
    let kid = crate::procfs::tests::spawn_with_fds(20);
    crate::procfs::tests::wait_for_state(kid.pid(), b'S');
    let mut agent = ProcAgent::new();
    let me = std::process::id();
    let v = fetch_all(&mut agent);
    assert_eq!(agent.passes(), 1);
    let mine = v["proc.psinfo.pid"]
        .iter()
        .find(|(_, pid)| **pid == u(u64::from(me)))
        .map(|(n, _)| n.clone())
        .expect("this test's own process");
    assert!(mine.starts_with(&format!("{me:06} ")), "{mine}");
    assert!(matches!(v["proc.fd.count"].get(&mine), Some(Value::Uint(n)) if *n >= 3));
    // 0, 1, 2 and the 20 dups.
    let kid_name = format!("{:06} sleep", kid.pid());
    assert_eq!(
        v["proc.fd.count"].get(&kid_name),
        Some(&u(23)),
        "{kid_name}"
    );
    assert!(matches!(v["proc.psinfo.exe"].get(&mine), Some(Value::Text(e)) if !e.is_empty()));
    let Value::Uint(n) = v["proc.nprocs"][""] else {
        panic!()
    };
    assert_eq!(n as usize, v["proc.psinfo.pid"].len());
}

#[test]
fn parsers() {
    let st = parse_full_stat(b"9 (a) b) (c) S 1 2 3 4 -1 6\n").unwrap();
    assert_eq!(
        (st.cmd.as_str(), st.state, st.get(4), st.get(8), st.fields),
        ("a) b) (c", b'S', 1, u64::MAX, 9)
    );
    assert_eq!(parse_full_stat(b"9 a S 1"), None);
    assert_eq!(parse_full_stat(b"9 (a)"), None);
    // Command lines: inner NULs become spaces, trailing ones go, a full read loses a byte.
    assert_eq!(psargs_of(b"a\0\0b\0\0", 100), "a  b");
    assert_eq!(psargs_of(b"\0a\0", 100), "");
    assert_eq!(psargs_of(b"abcdef", 6), "abcde");
    assert_eq!(status_name(7, b"Name:\tinit\nState: S\n"), "000007 (init)");
    assert_eq!(status_name(1234567, b"Name:\tinit\n"), "1234567 (nit)");
    assert_eq!(instance_name("000123 /bin/sh -c x"), "000123 /bin/sh");
    assert_eq!(instance_name("000123 "), "000123 ");
    assert_eq!(pid_of_instance("000123 /bin/sh"), Some(123));
    assert_eq!(pid_of_instance("123"), Some(123));
    assert_eq!(pid_of_instance("x123 y"), None);
    let (line, cid) =
        parse_cgroup(format!("3:cpuset:/docker-{CID}.scope\n2:cpu:/\n1:x:/y").as_bytes());
    assert_eq!(line, format!("cpuset:/docker-{CID}.scope;cpu:/"));
    assert_eq!(cid, "");
    let (_, cid) = parse_cgroup(format!("3:cpuset:/a/docker-{CID}.scope\n").as_bytes());
    assert_eq!(cid, CID);
    assert_eq!(parse_autogroup(b"/autogroup-12 nice -3\n"), (12, -3));
    assert_eq!(parse_autogroup(b"junk"), (0, 0));
    assert_eq!(
        parse_keyed(b"rchar: 5\nbogus\nwchar: 7\n", &IO_KEYS)[..2],
        [5, 7]
    );
    assert_eq!(parse_numbers::<3>(b"1 2"), [1, 2, 0]);
    let drivers = parse_tty_drivers(
        b"/dev/tty /dev/tty 5 0 system:/dev/tty\nserial /dev/ttyS 4 64-111 serial\npty_slave /dev/pts 136 0-1048575 pty:slave\n",
    );
    assert_eq!(drivers.len(), 3);
    assert_eq!(tty_from_drivers(&drivers, 5 << 8), Some("tty".into()));
    assert_eq!(
        tty_from_drivers(&drivers, (4 << 8) | 65),
        Some("ttyS/65".into())
    );
    assert_eq!(tty_from_drivers(&drivers, (4 << 8) | 1), None);
    // pts 300: minor past 255 is split around the major.
    assert_eq!(
        tty_from_drivers(&drivers, (136 << 8) | 44 | (1 << 20)),
        Some("pts/300".into())
    );
    assert_eq!(dev_split((136 << 8) | 44 | (1 << 20)), (136, 300));
    assert_eq!(policy_name(6), "DEADLN");
    assert_eq!(policy_name(4), "?");
    let st = parse_status(b"Uid:\t1\t2\t3\t4\nVmSwap:\t 9 kB\nNSpgid:\t5 6\nbogus\n");
    assert_eq!((st.uid, st.vm[VM_SWAP]), ([1, 2, 3, 4], 9));
    assert_eq!(st.ns[2].as_deref(), Some("5,6"));
    assert_eq!(st.ngid, None);
}

/// A pass shared out among threads answers what one thread reads: the same instances, in
/// pid order, with the same values (the fixture tree with 200 more processes, enough to be
/// shared out).
#[test]
fn threads_read_what_one_thread_reads() {
    let dir = tree();
    let proc = dir.path().join("proc");
    for pid in 2000..2200u32 {
        let p = proc.join(pid.to_string());
        std::fs::create_dir_all(&p).unwrap();
        let rss = i64::from(pid % 7) * 100;
        std::fs::write(
            p.join("stat"),
            stat_line(pid, "many", 'S', &[(4, 1), (22, i64::from(pid)), (24, rss)]),
        )
        .unwrap();
        std::fs::write(p.join("cmdline"), format!("many\0--n={pid}\0")).unwrap();
        std::fs::write(
            p.join("smaps_rollup"),
            format!("Rss: {rss} kB\nPss: {pid} kB\n"),
        )
        .unwrap();
    }
    let ids = all_ids();
    let mut one = ProcAgent::with_threads(dir.path(), 1);
    let mut four = ProcAgent::with_threads(dir.path(), 4);
    // Twice: the second pass orders the work by the sizes the first one read.
    for _ in 0..2 {
        let (a, b) = (one.fetch(&ids), four.fetch(&ids));
        assert_eq!(a, b);
        let pid_metric = id(8, 0);
        let pids = &a.iter().find(|(m, _)| *m == pid_metric).unwrap().1;
        let names: Vec<&str> = pids
            .as_ref()
            .unwrap()
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(names.len(), 207, "the fixture's 7 and 200 more: {names:?}");
        assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "pid order: {names:?}"
        );
        assert!(names.contains(&"002199 many"));
    }
    assert_eq!(four.skipped(), 1, "pid 600 vanished");
}
