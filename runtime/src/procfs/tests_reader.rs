//! Tests of the /proc reader itself: real and fake trees, a single-threaded process's
//! thread, descriptor counts, the schedstat filter and the task files kept between passes.
//! The child-process helpers are `tests`'.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::tests::*;
use super::*;
use crate::notify::Event;

#[test]
fn reads_own_process_and_threads_from_real_proc() {
    let me = std::process::id();
    // The name is set inside the new thread before its closure runs: wait until it runs.
    let (tx, rx) = std::sync::mpsc::channel();
    let _t = std::thread::Builder::new()
        .name("probe-thread".into())
        .spawn(move || {
            tx.send(()).unwrap();
            std::thread::sleep(Duration::from_secs(2))
        })
        .unwrap();
    rx.recv().unwrap();
    let mut r = ProcReader::new();
    let s = r.read_all(Fields::ALL, true).unwrap();
    let p = s.find(me).expect("own pid listed");
    assert_eq!(p.stat.ppid, unsafe { libc::getppid() } as u32);
    assert!(p.stat.num_threads >= 2);
    assert!(p.fd_count.unwrap() >= 3);
    assert!(s.rss_bytes(&p.stat) > 0);
    let threads = s.threads_of(p);
    // Other tests start and stop threads concurrently, so the count may differ by a few between
    // reading stat and listing task/; each record must still be one of ours.
    assert!(threads.len() >= 2 && threads.iter().all(|t| t.pid == me));
    assert!(threads.iter().any(|t| t.tid == me));
    assert!(
        threads
            .iter()
            .any(|t| t.stat.comm.as_str() == "probe-thread")
    );
    assert!(s.procs.len() > 1);
    // Only the asked-for extra files are read.
    let s = r.read_all(Fields::CPU, false).unwrap();
    let p = s.find(me).unwrap();
    assert_eq!((p.fd_count, p.wchan, p.sched), (None, None, None));
    assert!(s.threads.is_empty());
}

#[test]
fn fake_tree_with_odd_comm_and_vanished_process() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let line = "10 (we) ird (x)) S 1 10 10 0 -1 0 5 0 0 0 250 50 0 0 20 0 2 0 99 8192 3 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1\n";
    std::fs::create_dir_all(root.join("10/task/10")).unwrap();
    std::fs::create_dir_all(root.join("10/task/11")).unwrap();
    std::fs::create_dir_all(root.join("10/fd")).unwrap();
    std::fs::write(root.join("10/stat"), line).unwrap();
    std::fs::write(root.join("10/task/10/stat"), line).unwrap();
    std::fs::write(
        root.join("10/task/11/stat"),
        line.replacen("10 (", "11 (", 1),
    )
    .unwrap();
    for fd in 0..4 {
        std::fs::write(root.join(format!("10/fd/{fd}")), "").unwrap();
    }
    std::fs::create_dir_all(root.join("20")).unwrap(); // vanished: no stat
    std::fs::create_dir_all(root.join("sys")).unwrap(); // not a pid
    let mut r = ProcReader::with_root(root);
    let s = r.read_all(Fields::CPU | Fields::FD, true).unwrap();
    assert_eq!(s.procs.len(), 1);
    assert_eq!(s.skipped, 1);
    let p = &s.procs[0];
    assert_eq!(p.stat.comm.as_str(), "we) ird (x)");
    assert_eq!((p.stat.utime, p.stat.stime, p.fd_count), (250, 50, Some(4)));
    let tids: Vec<u32> = s.threads_of(p).iter().map(|t| t.tid).collect();
    assert_eq!(tids.len(), 2);
    assert!(tids.contains(&10) && tids.contains(&11));
    // Samples: cpu and fd metrics, processes and threads, nothing for unread groups.
    let samples = samples(&s);
    let find = |m: &str, i: &str| {
        samples
            .iter()
            .find(|(mm, ii, _)| *mm == m && ii == i)
            .map(|x| x.2)
    };
    assert_eq!(
        find(metrics::CPU_USER, "10"),
        Some(250.0 / s.clk_tck as f64)
    );
    assert_eq!(find(metrics::FD_COUNT, "10"), Some(4.0));
    assert_eq!(find(metrics::THREAD_COUNT, "10"), Some(2.0));
    assert!(find(metrics::THREAD_CPU_SYSTEM, "10/11").is_some());
    assert_eq!(find(metrics::MEM_RSS, "10"), None);
    // Missing root is an error, not an empty result.
    assert!(
        ProcReader::with_root(root.join("nope"))
            .read_all(Fields::CPU, false)
            .is_err()
    );
}

/// A process whose `stat` counts one thread: its task directory is not listed (a tid listed
/// there beside it is not read), and its thread's values come from the thread's own files
/// (a process's CPU times also count threads that exited), schedstat included.
#[test]
fn single_threaded_process_reads_its_only_thread_without_listing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let line = |pid: u32, state: &str, utime: u32| {
        format!(
            "{pid} (one) {state} 1 {pid} {pid} 0 -1 0 5 0 0 0 {utime} 50 0 0 20 0 1 0 99 8192 3 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1\n"
        )
    };
    std::fs::create_dir_all(root.join("30/task/30")).unwrap();
    std::fs::create_dir_all(root.join("30/task/31")).unwrap();
    std::fs::write(root.join("30/stat"), line(30, "D", 900)).unwrap();
    std::fs::write(root.join("30/schedstat"), "700 1 1\n").unwrap();
    std::fs::write(root.join("30/task/30/stat"), line(30, "D", 400)).unwrap();
    std::fs::write(root.join("30/task/30/schedstat"), "600 2 3\n").unwrap();
    std::fs::write(root.join("30/task/31/stat"), line(31, "S", 1)).unwrap();
    let mut r = ProcReader::with_root(root);
    r.thread_sched_only_in(Some(vec![b'D']));
    let s = r
        .read_all(Fields::CPU | Fields::STATE | Fields::SCHED, true)
        .unwrap();
    let p = s.find(30).unwrap();
    assert_eq!((p.stat.utime, p.sched.unwrap().run_ns), (900, 700));
    let threads = s.threads_of(p);
    assert_eq!(threads.len(), 1, "{threads:?}");
    let t = &threads[0];
    assert_eq!((t.tid, t.stat.state, t.stat.utime), (30, b'D', 400));
    assert_eq!(t.sched.unwrap().run_ns, 600);
}

#[test]
fn counts_fds_of_a_child() {
    let kid = spawn_with_fds(50);
    let mut r = ProcReader::new();
    // 0, 1, 2 plus the 50 dups (the original /dev/null descriptor is closed). Right after exec
    // the dynamic loader and `sleep`'s start-up briefly hold files of their own: read until
    // the count settles.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let s = r.read_into_pid(kid.pid(), Fields::FD);
        let n = s.find(kid.pid()).unwrap().fd_count;
        if n == Some(53) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "fd count stays at {n:?}, expected 53"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

impl ProcReader {
    fn read_into_pid(&mut self, pid: u32, fields: Fields) -> Snapshot {
        let mut s = Snapshot::default();
        self.read_into(&mut s, fields, false, Scope::Pid(pid))
            .unwrap();
        s
    }
}

/// The blocked-thread detector's reader reads a thread's schedstat only when the thread is in
/// a blocking state: a stopped child's thread has it, this process's running and sleeping
/// threads do not; without the setting every thread has it.
#[test]
fn thread_schedstat_only_for_threads_in_the_given_states() {
    let kid = spawn("sleep", &["600"]);
    kid.signal(libc::SIGSTOP);
    wait_for_state(kid.pid(), b'T');
    let me = std::process::id();
    let mut r = ProcReader::new();
    r.thread_sched_only_in(Some(vec![b'T']));
    let s = r.read_all(Fields::STATE | Fields::SCHED, true).unwrap();
    let stopped = s.find(kid.pid()).expect("the child is listed");
    assert!(s.threads_of(stopped).iter().all(|t| t.sched.is_some()));
    let mine = s.find(me).unwrap();
    assert!(
        s.threads_of(mine)
            .iter()
            .all(|t| t.stat.state == b'T' || t.sched.is_none())
    );
    // Processes keep theirs: proc.sched.* samples come from them.
    assert!(mine.sched.is_some());
    r.thread_sched_only_in(None);
    let s = r.read_all(Fields::STATE | Fields::SCHED, true).unwrap();
    let mine = s.find(me).unwrap();
    assert!(s.threads_of(mine).iter().all(|t| t.sched.is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_thread_fires_once_per_blocking_episode() {
    let n = quiet();
    let cfg = blocked_config("stop-test", &["T"], 300, 0);
    let sub_name = cfg.blocked.subscriber.clone();
    let kid = spawn("sleep", &["600"]);
    let inst = format!("{0}/{0}", kid.pid());
    kid.signal(libc::SIGSTOP);
    wait_for_state(kid.pid(), b'T');
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(run_detectors(Arc::clone(&n), cfg, shutdown.clone()));
    // 12 polls while stopped: one alarm, not one per poll.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // The alarms about the stopped child since the last look.
    let ours = || -> Vec<_> {
        drain(&n, &sub_name)
            .into_iter()
            .filter(|x| *x.instance == *inst)
            .collect()
    };
    let first = ours();
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(first[0].value >= 0.3);
    // Unblock, let a poll see it running, block again: a second alarm.
    kid.signal(libc::SIGCONT);
    wait_for_state(kid.pid(), b'S');
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(ours().is_empty());
    kid.signal(libc::SIGSTOP);
    tokio::time::sleep(Duration::from_millis(900)).await;
    let second = ours();
    assert_eq!(second.len(), 1, "{second:?}");
    shutdown.cancel();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_alarms_of_a_burst_arrive_as_one_batch() {
    let n = quiet();
    let cfg = blocked_config("burst-test", &["T"], 200, 500);
    let sub = n.subscriber(&cfg.blocked.subscriber);
    let kids: Vec<Kid> = (0..3).map(|_| spawn("sleep", &["600"])).collect();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(run_detectors(Arc::clone(&n), cfg, shutdown.clone()));
    for k in &kids {
        k.signal(libc::SIGSTOP);
    }
    let ours: Vec<String> = kids.iter().map(|k| format!("{0}/{0}", k.pid())).collect();
    let batch = loop {
        let b = tokio::time::timeout(Duration::from_secs(5), sub.recv_batch(1000))
            .await
            .expect("alarms");
        let names: Vec<String> = b
            .iter()
            .filter_map(|e| match e {
                Event::Notification(x) if ours.contains(&x.instance.to_string()) => {
                    Some(x.instance.to_string())
                }
                _ => None,
            })
            .collect();
        if !names.is_empty() {
            break names;
        }
    };
    assert_eq!(
        batch.len(),
        3,
        "all three stopped threads in one batch: {batch:?}"
    );
    shutdown.cancel();
    task.await.unwrap().unwrap();
}

/// A reader keeping its task files reads through them pass after pass what a fresh reader
/// reads (the fields that do not move of a sleeping child and of this process's own thread);
/// a child that exits is no longer listed, and its files are let go at the end of that pass.
#[test]
fn kept_task_files_read_what_fresh_opens_read_and_go_with_their_task() {
    let kid = spawn("sleep", &["600"]);
    wait_for_state(kid.pid(), b'S');
    let fields = Fields::CPU | Fields::MEM | Fields::STATE | Fields::SCHED;
    let mut kept = ProcReader::new();
    kept.keep_files();
    let me = std::process::id();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let still = |s: &Snapshot, pid: u32| {
        let p = s.find(pid).unwrap();
        let st = &p.stat;
        (st.ppid, st.starttime, st.num_threads > 0, p.sched.is_some())
    };
    let mut snap = Snapshot::default();
    for pass in 0..3 {
        kept.read_into(&mut snap, fields, true, Scope::All).unwrap();
        assert!(kept.kept_files() > 0, "pass {pass}: nothing kept");
        assert!(kept.keeps(kid.pid(), 0) && kept.keeps(kid.pid(), kid.pid()));
        assert!(
            kept.keeps(me, 0) && kept.keeps(me, tid),
            "pass {pass}: own thread"
        );
        let fresh = ProcReader::new().read_all(fields, true).unwrap();
        for pid in [kid.pid(), me] {
            assert_eq!(
                still(&snap, pid),
                still(&fresh, pid),
                "pass {pass}, pid {pid}"
            );
        }
        let t = snap.threads.iter().find(|t| t.tid == tid).unwrap();
        assert_eq!(
            (t.pid, t.stat.starttime),
            (
                me,
                fresh
                    .threads
                    .iter()
                    .find(|t| t.tid == tid)
                    .unwrap()
                    .stat
                    .starttime
            )
        );
        assert_eq!(snap.find(kid.pid()).unwrap().stat.state, b'S');
    }
    let gone = kid.pid();
    drop(kid); // killed and reaped
    kept.read_into(&mut snap, fields, true, Scope::All).unwrap();
    assert!(snap.find(gone).is_none(), "a reaped child is not listed");
    assert!(!kept.keeps(gone, 0) && !kept.keeps(gone, gone));
}

/// Only procfs task files are kept: a tree of regular files (whose files a test may
/// replace) is opened per read.
#[test]
fn no_file_is_kept_under_a_root_that_is_not_procfs() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("7");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(
        p.join("stat"),
        "7 (x) S 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 100 1000 10 0\n",
    )
    .unwrap();
    std::fs::write(p.join("schedstat"), "1 2 3\n").unwrap();
    let mut r = ProcReader::with_root(dir.path());
    r.keep_files();
    let s = r.read_all(Fields::CPU | Fields::SCHED, false).unwrap();
    assert_eq!(s.find(7).unwrap().stat.utime, 5);
    assert_eq!(r.kept_files(), 0);
}

/// A python3 child with three threads besides its main one; each line on its stdin ends one
/// thread and starts another (the count stays), and every change is answered with the
/// threads' tids on stdout.
struct Threads {
    kid: Kid,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Threads {
    const SCRIPT: &str = "import sys, threading\n\
        stops = []\n\
        def start():\n    e = threading.Event()\n    t = threading.Thread(target=e.wait)\n    t.start()\n    stops.append((e, t))\n\
        def show():\n    print(' '.join(str(t.native_id) for _, t in stops), flush=True)\n\
        for _ in range(3): start()\n\
        show()\n\
        for _ in sys.stdin:\n    e, t = stops.pop(0)\n    e.set()\n    t.join()\n    start()\n    show()\n";

    fn start() -> (Threads, Vec<u32>) {
        let mut child = std::process::Command::new("python3")
            .args(["-c", Self::SCRIPT])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut t = Threads {
            out,
            kid: Kid(child),
        };
        let tids = t.tids();
        (t, tids)
    }

    fn tids(&mut self) -> Vec<u32> {
        use std::io::BufRead;
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line.split_whitespace()
            .map(|t| t.parse().unwrap())
            .collect()
    }

    /// Ends the oldest thread and starts another: the new tids.
    fn swap(&mut self) -> Vec<u32> {
        use std::io::Write;
        writeln!(self.kid.0.stdin.as_mut().unwrap()).unwrap();
        self.tids()
    }
}

/// A multi-threaded process's task directory is listed once, then its threads are read
/// through their kept descriptors; when one thread ends and another starts (the same count),
/// the pass sees it and lists again: the new thread is read, the ended one is not, and every
/// pass reads the threads a fresh reader lists, with their fresh state.
#[test]
fn kept_threads_are_read_without_a_listing_until_one_of_them_goes() {
    let (mut kid, mut tids) = Threads::start();
    let pid = kid.kid.pid();
    let fields = Fields::CPU | Fields::MEM | Fields::STATE | Fields::SCHED;
    let mut kept = ProcReader::new();
    kept.keep_files();
    // Only the blocked-thread detector's threads' schedstat, as the daemon reads them.
    kept.thread_sched_only_in(Some(vec![b'D']));
    let threads_of = |s: &Snapshot| -> Vec<(u32, u8)> {
        let mut v: Vec<(u32, u8)> = s
            .threads_of(s.find(pid).unwrap())
            .iter()
            .map(|t| (t.tid, t.stat.state))
            .collect();
        v.sort();
        v
    };
    let mut snap = Snapshot::default();
    for round in 0..3 {
        for pass in 0..2 {
            kept.read_into(&mut snap, fields, true, Scope::All).unwrap();
            assert!(
                kept.remembers_threads_of(pid),
                "round {round} pass {pass}: the listing is remembered"
            );
            let fresh = ProcReader::new().read_all(fields, true).unwrap();
            let (got, want) = (threads_of(&snap), threads_of(&fresh));
            assert_eq!(got, want, "round {round} pass {pass}");
            assert_eq!(got.len(), 4, "the main thread and three: {got:?}");
            for t in &tids {
                assert!(got.iter().any(|(g, _)| g == t), "round {round}: {t} read");
            }
        }
        let before = tids.clone();
        tids = kid.swap();
        let ended = before.iter().find(|t| !tids.contains(t)).copied().unwrap();
        kept.read_into(&mut snap, fields, true, Scope::All).unwrap();
        let got = threads_of(&snap);
        assert!(
            !got.iter().any(|(t, _)| *t == ended),
            "round {round}: ended thread {ended} still read: {got:?}"
        );
        for t in &tids {
            assert!(
                got.iter().any(|(g, _)| g == t),
                "round {round}: new {t} read"
            );
        }
        assert!(!kept.keeps(pid, ended), "round {round}: {ended} let go");
    }
    // Once the process is gone, nothing of it is remembered.
    drop(kid);
    kept.read_into(&mut snap, fields, true, Scope::All).unwrap();
    assert!(!kept.remembers_threads_of(pid));
}
