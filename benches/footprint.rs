//! Idle footprint of `wasmon run` on the embedded default config (issue 13): starts the release
//! binary in an empty directory, lets it settle, then reads `/proc/PID/stat` (CPU time) over a
//! window and `/proc/PID/status` (RSS, threads) at its end, and groups `/proc/PID/smaps` to
//! show where the resident memory is.
//!
//! `cargo bench -p wasmon-benches --bench footprint` (builds `target/release/wasmon` first if
//! needed). `WASMON_BIN` picks another binary; `FOOTPRINT_SETTLE` and `FOOTPRINT_MEASURE` are
//! the two phases in seconds (default 20 and 60).

#[path = "release.rs"]
mod release;
use release::binary;

use std::collections::BTreeMap;
use std::io::{Read, Write};

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The goals for a fresh default config on a quiet machine.
const GOAL_RSS_MB: f64 = 40.0;
const GOAL_CPU_PERCENT: f64 = 0.2;

fn healthy(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /api/healthcheck HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200") || out.starts_with("HTTP/1.0 200")
}

/// utime + stime of the process, clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    // Fields 14 and 15 of stat; `after` starts at field 3.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// CPU ticks per thread name (`/proc/PID/task/TID/stat`), to see who wakes up when idle.
fn thread_ticks(pid: u32) -> BTreeMap<(u32, String), u64> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let f: Vec<&str> = stat[close + 2..].split(' ').collect();
        let ticks = f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
        let tid = t.file_name().to_string_lossy().parse().unwrap_or(0);
        out.insert((tid, name), ticks);
    }
    out
}

/// `/proc/PID/status` fields in kB (or counts).
fn status(pid: u32) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            let n = v.split_whitespace().next()?.parse().ok()?;
            Some((k.to_string(), n))
        })
        .collect()
}

/// Resident kB of the process's mappings, grouped: the binary, other files, the heap, thread
/// stacks, and other anonymous mappings (wasmtime's, the store's chunks, malloc's arenas).
fn smaps(pid: u32) -> BTreeMap<String, (u64, usize)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut out: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    let mut group = String::new();
    for line in text.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && !first.ends_with(':') {
            let name = line.split_whitespace().nth(5).unwrap_or("");
            group = match name {
                "" => "anonymous (wasmtime, store chunks, malloc arenas)".into(),
                "[heap]" => "[heap] (brk)".into(),
                n if n.starts_with("[stack") => "[stack]".into(),
                n if n.ends_with("/wasmon") => "the wasmon binary".into(),
                n if n.starts_with('[') => n.to_string(),
                n if n.ends_with(".cwasm") => "compiled guests (.cwasm, mapped)".into(),
                _ => "other files (libc, ...)".into(),
            };
            out.entry(group.clone()).or_default().1 += 1;
        } else if let Some(kb) = line.strip_prefix("Rss:") {
            let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
            out.entry(group.clone()).or_default().0 += kb;
        }
    }
    out
}

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument that is not ours means another bench.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with("--") && a != "footprint")
    {
        return;
    }
    let settle = release::secs_env("FOOTPRINT_SETTLE", 20);
    let measure = release::secs_env("FOOTPRINT_MEASURE", 60);
    let bin = binary();
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(&bin)
        .args(["run", "--listen", &format!("127.0.0.1:{port}")])
        .current_dir(dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    let pid = child.id();
    let daemon = Daemon(child);
    let started = Instant::now();
    while !healthy(port) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no healthcheck"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let ready = started.elapsed();
    let at_ready = status(pid);
    std::thread::sleep(settle);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let (t0, c0, th0) = (Instant::now(), cpu_ticks(pid), thread_ticks(pid));
    std::thread::sleep(measure);
    let (t1, c1, th1) = (Instant::now(), cpu_ticks(pid), thread_ticks(pid));
    let cpu = (c1 - c0) as f64 / hz / t1.duration_since(t0).as_secs_f64() * 100.0;
    let st = status(pid);
    let groups = smaps(pid);
    drop(daemon);

    let mb = |kb: u64| kb as f64 / 1024.0;
    println!("wasmon idle footprint, default config ({})", bin.display());
    println!(
        "  serving after {:.2} s; RSS then {:.1} MB",
        ready.as_secs_f64(),
        mb(at_ready["VmRSS"])
    );
    println!(
        "  idle RSS {:.1} MB (anon {:.1}, file {:.1}; peak {:.1})   goal <= {GOAL_RSS_MB} MB {}",
        mb(st["VmRSS"]),
        mb(st["RssAnon"]),
        mb(st["RssFile"]),
        mb(st["VmHWM"]),
        if mb(st["VmRSS"]) <= GOAL_RSS_MB {
            "ok"
        } else {
            "MISSED"
        }
    );
    println!(
        "  idle CPU {cpu:.3} % of one core over {} s   goal <= {GOAL_CPU_PERCENT} % {}",
        measure.as_secs(),
        if cpu <= GOAL_CPU_PERCENT {
            "ok"
        } else {
            "MISSED"
        }
    );
    println!(
        "  threads {}, virtual {:.0} MB",
        st["Threads"],
        mb(st["VmSize"])
    );
    let mut by_name: BTreeMap<String, (u64, usize)> = BTreeMap::new();
    for ((tid, name), t) in &th1 {
        let before = th0.get(&(*tid, name.clone())).copied().unwrap_or(0);
        let e = by_name.entry(name.clone()).or_default();
        e.0 += t - before;
        e.1 += 1;
    }
    println!("  CPU by thread over the window (ticks of 1/{hz} s):");
    let mut threads: Vec<_> = by_name.into_iter().collect();
    threads.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
    for (name, (ticks, n)) in threads {
        println!("    {ticks:>6}  {name} (x{n})");
    }
    println!("  resident by mapping:");
    let mut g: Vec<_> = groups.into_iter().collect();
    g.sort_by_key(|e| std::cmp::Reverse(e.1.0));
    for (name, (kb, n)) in g {
        println!("    {:>8.1} MB  {name} ({n} mappings)", mb(kb));
    }
}
