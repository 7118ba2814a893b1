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
pub(super) struct Kid(pub(super) Child);

impl Kid {
    pub(super) fn pid(&self) -> u32 {
        self.0.id()
    }
    pub(super) fn signal(&self, sig: libc::c_int) {
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

pub(super) fn spawn(cmd: &str, args: &[&str]) -> Kid {
    Kid(Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap())
}

/// `sleep 600` holding `extra` more descriptors (dup'ed /dev/null on fds 3..3+extra).
pub(super) fn spawn_with_fds(extra: i32) -> Kid {
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

pub(super) fn quiet() -> Arc<Notifier> {
    Arc::new(Notifier::new(NotifierConfig {
        queue_capacity: 4096,
        log: false,
        ..Default::default()
    }))
}

pub(super) fn drain(n: &Notifier, sub: &str) -> Vec<Notification> {
    let s = n.subscriber(sub);
    std::iter::from_fn(|| s.try_recv())
        .filter_map(|e| match e {
            Event::Notification(x) => Some(x),
            Event::Dropped { .. } => None,
        })
        .collect()
}

pub(super) fn wait_for_state(pid: u32, state: u8) {
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
pub(super) fn blocked_config(
    sub: &str,
    states: &[&str],
    after_ms: u64,
    batch_ms: u64,
) -> ProcfsConfig {
    let mut cfg = config(sub);
    cfg.blocked.enabled = true;
    cfg.blocked.states = states.iter().map(|s| s.to_string()).collect();
    cfg.blocked.after = Duration::from_millis(after_ms);
    cfg.blocked.batch_window = Duration::from_millis(batch_ms);
    cfg
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
