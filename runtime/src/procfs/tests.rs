//! Tests of the /proc reader (real and fake trees), samples, ps output, config, and the
//! detectors against real child processes.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::*;
use crate::notify::{Event, Notification, Notifier, NotifierConfig};

/// A child process killed and reaped when dropped.
struct Kid(Child);

impl Kid {
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn signal(&self, sig: libc::c_int) {
        // SAFETY: plain kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(self.0.id() as libc::pid_t, sig) }, 0);
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(cmd: &str, args: &[&str]) -> Kid {
    Kid(Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap())
}

/// `sleep 600` holding `extra` more descriptors (dup'ed /dev/null on fds 3..3+extra).
fn spawn_with_fds(extra: i32) -> Kid {
    let mut c = Command::new("sleep");
    c.arg("600").stdin(Stdio::null()).stdout(Stdio::null());
    // SAFETY: only async-signal-safe calls (open, dup2, close) between fork and exec.
    unsafe {
        c.pre_exec(move || {
            let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            for i in 0..extra {
                if libc::dup2(fd, 100 + i) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // Nothing else: inherited descriptors (a jobserver pipe...) would skew the count.
            // Marked close-on-exec rather than closed, so std's own exec-status pipe stays open
            // until exec and `spawn` returns only once the count is final.
            const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
            libc::syscall(libc::SYS_close_range, 3u32, 99u32, CLOSE_RANGE_CLOEXEC);
            libc::syscall(
                libc::SYS_close_range,
                100 + extra as u32,
                u32::MAX,
                CLOSE_RANGE_CLOEXEC,
            );
            Ok(())
        });
    }
    Kid(c.spawn().unwrap())
}

fn quiet() -> Arc<Notifier> {
    Arc::new(Notifier::new(NotifierConfig {
        queue_capacity: 4096,
        log: false,
        ..Default::default()
    }))
}

fn drain(n: &Notifier, sub: &str) -> Vec<Notification> {
    let s = n.subscriber(sub);
    std::iter::from_fn(|| s.try_recv())
        .filter_map(|e| match e {
            Event::Notification(x) => Some(x),
            Event::Dropped { .. } => None,
        })
        .collect()
}

fn wait_for_state(pid: u32, state: u8) {
    let mut r = ProcReader::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let s = r.read_all(Fields::STATE, false).unwrap();
        if s.find(pid).is_some_and(|p| p.stat.state == state) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pid {pid} never reached state {}",
            state as char
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn config(sub: &str) -> ProcfsConfig {
    let mut cfg = ProcfsConfig {
        subscriber: sub.into(),
        interval: Duration::from_millis(100),
        ..Default::default()
    };
    cfg.cpu_hog.enabled = false;
    cfg.blocked.enabled = false;
    cfg.fields = vec![];
    cfg.blocked.subscriber = format!("{sub}.blocked");
    cfg
}

/// [`config`] with the blocked-thread detector on: a thread in one of `states` for
/// `after_ms` is blocked, and alarms wait `batch_ms` to go out together.
fn blocked_config(sub: &str, states: &[&str], after_ms: u64, batch_ms: u64) -> ProcfsConfig {
    let mut cfg = config(sub);
    cfg.blocked.enabled = true;
    cfg.blocked.states = states.iter().map(|s| s.to_string()).collect();
    cfg.blocked.after = Duration::from_millis(after_ms);
    cfg.blocked.batch_window = Duration::from_millis(batch_ms);
    cfg
}

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

#[test]
fn ps_table_and_json() {
    let kid = spawn("sleep", &["600"]);
    let mut r = ProcReader::new();
    let mut s = Snapshot::default();
    r.read_into(
        &mut s,
        Fields::CPU | Fields::MEM | Fields::STATE | Fields::WCHAN,
        true,
        Scope::Pid(kid.pid()),
    )
    .unwrap();
    let mut out = Vec::new();
    write_ps(&s, false, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    for col in [
        "PID", "TID", "STAT", "UTIME", "RSS(KiB)", "NLWP", "WCHAN", "COMMAND",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let row = lines.next().unwrap();
    assert!(
        row.trim_start().starts_with(&kid.pid().to_string()) && row.ends_with(" sleep"),
        "{row}"
    );
    assert!(lines.next().unwrap().ends_with("\\_ sleep"), "thread row");
    let mut out = Vec::new();
    write_ps(&s, true, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v[0]["pid"], kid.pid());
    assert_eq!(v[0]["comm"], "sleep");
    assert_eq!(v[0]["threads"][0]["tid"], kid.pid());
    // A just-exec'd child may not have faulted a page in yet: rss can still be 0.
    assert!(v[0]["rss_bytes"].is_u64() && v[0]["vsize_bytes"].as_u64().unwrap() > 0);
    let args = PsArgs {
        fields: vec!["cpu".into(), "bogus".into()],
        threads: false,
        pid: None,
        json: false,
    };
    assert!(args.field_set().is_err());
}

#[test]
fn config_parses_kebab_case_and_rejects_unknown_fields() {
    let cfg: ProcfsConfig = toml::from_str(
        r#"
        interval = "200ms"
        [cpu-hog]
        percent = 50
        [blocked]
        states = ["D", "T"]
        wchan = ["futex"]
        after = 30
        batch-window = "1m"
        [[limits]]
        resource = "fd-count"
        value = 40
        [[limits]]
        resource = "rss"
        value = 1e9
        pid = 4768
        direction = "rising"
        "#,
    )
    .unwrap();
    assert_eq!(cfg.interval, Duration::from_millis(200));
    assert_eq!(cfg.cpu_hog.percent, 50.0);
    assert!(cfg.cpu_hog.enabled, "defaults fill the rest");
    assert_eq!(cfg.blocked.after, Duration::from_secs(30));
    assert_eq!(cfg.blocked.batch_window, Duration::from_secs(60));
    assert_eq!(cfg.limits[1].pid, Some(4768));
    assert!(toml::from_str::<ProcfsConfig>("intervall = 5").is_err());
    assert!(toml::from_str::<ProcfsConfig>("[cpu-hog]\npercnt = 5").is_err());
    assert!(toml::from_str::<ProcfsConfig>("interval = \"5 parsecs\"").is_err());
    let round: ProcfsConfig = toml::from_str(&toml::to_string(&cfg).unwrap()).unwrap();
    assert_eq!(round, cfg);
}

#[test]
fn global_fd_threshold_fires_once_naming_the_pid() {
    let n = quiet();
    let mut cfg = config("fd-test");
    cfg.limits.push(LimitConfig {
        resource: LimitResource::FdCount,
        value: 40.0,
        direction: crate::notify::Direction::Rising,
        pid: None,
        hysteresis: 0.0,
    });
    let mut det = Detectors::new(Arc::clone(&n), cfg).unwrap();
    assert_eq!(
        n.threshold_count(),
        1,
        "one global threshold, not one per process"
    );
    det.poll().unwrap();
    let kid = spawn_with_fds(50);
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(30));
        det.poll().unwrap();
    }
    let pid = kid.pid().to_string();
    let mine: Vec<_> = drain(&n, "fd-test")
        .into_iter()
        .filter(|x| *x.instance == *pid)
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!((mine[0].value, &*mine[0].metric), (53.0, metrics::FD_COUNT));
    assert_eq!(n.value(metrics::FD_COUNT, &pid).unwrap().value, 53.0);
    // The exited pid is forgotten.
    drop(kid);
    det.poll().unwrap();
    assert_eq!(n.value(metrics::FD_COUNT, &pid), None);
    drop(det);
    assert_eq!(n.threshold_count(), 0, "detectors delete their thresholds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_hog_fires_within_two_windows() {
    let n = quiet();
    let window = Duration::from_millis(200);
    let mut cfg = config("hog-test");
    cfg.interval = window;
    cfg.cpu_hog.enabled = true;
    // Low enough that a busy loop qualifies on a machine shared with other builds (an idle
    // process stays near 0).
    cfg.cpu_hog.percent = 10.0;
    let kid = spawn("sh", &["-c", "while :; do :; done"]);
    let pid = kid.pid().to_string();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(run_detectors(Arc::clone(&n), cfg, shutdown.clone()));
    let started = Instant::now();
    let sub = n.subscriber("hog-test");
    let hit = loop {
        // 2 windows, plus slack for the first poll's own duration on a loaded machine.
        let left = (2 * window + Duration::from_millis(250)).saturating_sub(started.elapsed());
        match tokio::time::timeout(left, sub.recv()).await {
            Ok(Event::Notification(x)) if *x.instance == *pid => break x,
            Ok(_) => continue,
            Err(_) => panic!(
                "no hog alarm for {pid} within two windows; last cpu% {:?}",
                n.value(metrics::CPU_PERCENT, &pid)
            ),
        }
    };
    assert_eq!(&*hit.metric, metrics::CPU_PERCENT);
    assert!(hit.value >= 10.0);
    shutdown.cancel();
    task.await.unwrap().unwrap();
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

#[test]
fn detector_config_errors_are_reported() {
    let mut cfg = config("bad");
    cfg.blocked.enabled = true;
    cfg.blocked.states = vec!["DD".into()];
    assert!(matches!(
        Detectors::new(quiet(), cfg),
        Err(DetectError::Config(_))
    ));
    let mut cfg = config("bad");
    cfg.limits.push(LimitConfig {
        resource: LimitResource::Rss,
        value: f64::NAN,
        direction: crate::notify::Direction::Rising,
        pid: None,
        hysteresis: 0.0,
    });
    let n = quiet();
    assert!(matches!(
        Detectors::new(Arc::clone(&n), cfg),
        Err(DetectError::Notify(_))
    ));
    assert_eq!(n.threshold_count(), 0);
}

#[test]
fn wchan_pattern_counts_as_blocked() {
    // `sleep` waits in hrtimer_nanosleep (state S, which is not in the configured states): only
    // the wchan pattern can make it count as blocked.
    let n = quiet();
    let mut cfg = blocked_config("wchan-test", &[], 150, 0);
    cfg.blocked.wchan = vec!["nanosleep".into()];
    let sub = cfg.blocked.subscriber.clone();
    let kid = spawn("sleep", &["600"]);
    let inst = format!("{0}/{0}", kid.pid());
    let mut det = Detectors::new(Arc::clone(&n), cfg).unwrap();
    for _ in 0..8 {
        det.poll().unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let t = det
        .snapshot()
        .threads
        .iter()
        .find(|t| t.tid == kid.pid())
        .unwrap();
    assert!(
        t.wchan.unwrap().as_str().contains("nanosleep"),
        "{:?}",
        t.wchan
    );
    let mine: Vec<_> = drain(&n, &sub)
        .into_iter()
        .filter(|x| *x.instance == *inst)
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_reach_the_pipeline_callback_with_the_configured_fields() {
    let mut cfg = config("pipe-test");
    cfg.fields = vec!["mem".into()];
    cfg.threads = true;
    cfg.interval = Duration::from_millis(50);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(run_detectors_with(
        quiet(),
        cfg,
        shutdown.clone(),
        move |s| {
            let me = std::process::id();
            let rss = s.find(me).map(|p| s.rss_bytes(&p.stat));
            let mine = samples(s)
                .into_iter()
                .filter(|(_, i, _)| *i == me.to_string())
                .count();
            let _ = tx.send((s.fields, rss, s.threads.len(), mine));
        },
    ));
    let mut polls = Vec::new();
    while polls.len() < 3 {
        polls.push(
            tokio::time::timeout(Duration::from_secs(5), rx.recv())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    shutdown.cancel();
    task.await.unwrap().unwrap();
    for (fields, rss, threads, mine) in polls {
        assert_eq!(fields, Fields::MEM);
        assert!(rss.unwrap() > 0 && threads > 0);
        // thread count + rss + vsize + majflt for our own pid
        assert_eq!(mine, 4);
    }
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
