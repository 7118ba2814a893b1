//! What collecting costs (issue 28), side by side in one run:
//! - `fetch`: one FETCH of every linux (domain 60) metric, and one of every `proc.*` metric
//!   over all processes, through wasmon's PCP port (the release daemon with its native linux
//!   and proc agents) and through a reference pmcd (pmdalinux, pmdaproc): the median wall time
//!   per fetch, and the CPU the server's processes spend per fetch (pmcd and its PMDAs
//!   together);
//! - `scrape`: Debian's prometheus-node-exporter with its default collectors: median wall time
//!   and CPU per scrape;
//! - `threads`: the proc agent in this process, every `proc.*` metric over all processes, read
//!   with 1, 2 and 4 threads: median wall time and the process's CPU per fetch;
//! - `cpus`: the linux agent in this process on synthesized roots of 2 to 1,024 CPUs (this
//!   host's files, with /proc/stat, /proc/interrupts, /proc/softirqs and /proc/cpuinfo made for
//!   N CPUs): CPU per fetch of every linux metric;
//! - `poll`: what the embedded default config polls, per 10 s interval, on this host and on
//!   live roots faking 64 to 1,024 CPUs: the release daemon running the default config itself
//!   (its linux agent's `poll-names` every 10 s into the `host` pipeline, the process reader
//!   and its detectors every 5 s, the pipelines, the store), beside pmcd + pmdalinux +
//!   pmdaproc asked the same set on the same schedule by a client (pmdalinux on the same root
//!   through `LINUX_STATSPATH`), and beside node_exporter scraped every 10 s (its default
//!   collectors on the same root through `--path.procfs`/`--path.sysfs`); the three run at
//!   once and their CPU is counted over the same windows: each process's CPU-time clock (ns,
//!   every thread's run time, the exited ones' too), summed over each server's process tree,
//!   and utime + stime in ticks beside it. Also, in this process: the linux
//!   agent's CPU per fetch of the poll set, and the process reader's CPU per pass.
//!
//! `cargo bench -p wasmon-benches --bench collect` (builds `target/release/wasmon` unless
//! `WASMON_BIN` is set); `COLLECT_ROUNDS` fetches per server (default 200); `COLLECT_ONLY=fetch`,
//! `COLLECT_ONLY=threads` or `COLLECT_ONLY=poll` runs one section alone; `COLLECT_POLL_SECS` is
//! the `poll` window (default 60 s, after `COLLECT_POLL_WARMUP`, 65 s), `COLLECT_POLL_ROUNDS` how
//! many windows in a row (default 3; the median is reported) and `COLLECT_POLL_CPUS` its CPU
//! counts (default
//! `host,64,256,1024`); `WASMON_BIN_BEFORE` runs a second daemon binary beside it in `poll`
//! (a change's before and after in one run).

#[path = "pcp_wire.rs"]
mod pcp_wire;
#[path = "release.rs"]
mod release;

#[path = "thread_cpu.rs"]
mod thread_cpu;

#[path = "collect_common.rs"]
mod common;
#[path = "collect_poll.rs"]
mod poll;
use common::*;
use poll::poll;
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use thread_cpu::thread_cpu;

use pcp_wire::{Client, pmcd_with, pmids};
use wasmon::linux::{LinuxAgent, table};
use wasmon::namespace::Agent;
use wasmon::procfs::agent::ProcAgent;

fn rounds() -> usize {
    std::env::var("COLLECT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

fn fetches(n: usize) {
    // pmdaproc refuses per-process values to a client that did not authenticate over its
    // local socket unless it runs with `-A`: the installed pmcd.conf with that flag added.
    let conf = std::fs::read_to_string("/etc/pcp/pmcd/pmcd.conf")
        .unwrap_or_default()
        .replace("pmdaproc -d 3\n", "pmdaproc -d 3 -A\n");
    let Some(pmcd) = pmcd_with((!conf.is_empty()).then_some(conf.as_str())) else {
        eprintln!("collect: no reference pmcd: no fetch figures");
        return;
    };
    let wasmon = daemon(true);
    // The same PMIDs of both servers: every name pmcd's linux PMDA has, and proc.*.
    let linux: Vec<u32> = pmids(pmcd.port, "")
        .into_iter()
        .filter(|id| id >> 22 == 60)
        .collect();
    let proc = pmids(pmcd.port, "proc");
    // What `pcp ps` and `pcp pidstat` ask: every proc.* metric but the smaps rollup (whose
    // cost is the kernel's page-table walk of each process, the same for both servers).
    let smaps = pmids(pmcd.port, "proc.smaps");
    let no_smaps: Vec<u32> = proc
        .iter()
        .copied()
        .filter(|id| !smaps.contains(id))
        .collect();
    println!(
        "| fetch | metrics | wasmon wall | pmcd wall | ratio | wasmon CPU | pmcd CPU | ratio | RESULT bytes wasmon / pmcd |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (what, ids) in [
        ("linux (domain 60)", &linux),
        ("proc.* (all processes)", &proc),
        ("proc.* but proc.smaps.* (all processes)", &no_smaps),
    ] {
        let req = fetch_pdu(ids);
        // Interleaved, one fetch of each server in turn, so that a change of the host's load
        // weighs on both alike; each server's CPU is its own process tree's.
        let (mut cw, mut cp) = (Client::connect(wasmon.pcp), Client::connect(pmcd.port));
        let (mut bw, mut bp) = (Vec::new(), Vec::new());
        let (wb, pb) = (cw.fetch(&req, &mut bw), cp.fetch(&req, &mut bp));
        let (w0, p0) = (
            tree_cpu_ticks(wasmon.child.id()),
            tree_cpu_ticks(pmcd.child.id()),
        );
        let (mut walls_w, mut walls_p) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let t = Instant::now();
            cw.fetch(&req, &mut bw);
            walls_w.push(t.elapsed());
            let t = Instant::now();
            cp.fetch(&req, &mut bp);
            walls_p.push(t.elapsed());
        }
        let per = |ticks: u64| ticks as f64 / ticks_per_sec() / n as f64;
        let wc = per(tree_cpu_ticks(wasmon.child.id()) - w0);
        let pc = per(tree_cpu_ticks(pmcd.child.id()) - p0);
        let (ww, pw) = (median(walls_w), median(walls_p));
        println!(
            "| {what} | {} | {:.2} ms | {:.2} ms | {:.2}x | {:.2} ms | {:.2} ms | {:.2}x | {wb} / {pb} |",
            ids.len(),
            ww.as_secs_f64() * 1e3,
            pw.as_secs_f64() * 1e3,
            ww.as_secs_f64() / pw.as_secs_f64(),
            wc * 1e3,
            pc * 1e3,
            wc / pc.max(1e-9),
        );
    }
}

fn scrape(n: usize) {
    let Some((mut child, port)) = node_exporter(None) else {
        return;
    };
    let families = {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text.lines().filter(|l| l.starts_with("# TYPE")).count()
    };
    let (wall, cpu) = measure(child.id(), n, || {
        scrape_once(port);
    });
    println!(
        "\n| node_exporter (default collectors, {families} families) | wall {:.2} ms | CPU {:.2} ms per scrape |",
        wall.as_secs_f64() * 1e3,
        cpu * 1e3
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// This host's /proc and /sys files the agent reads, with the per-CPU ones made for `ncpu`.
fn many_cpu_root(ncpu: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let copy = |rel: &str| {
        if let Ok(text) = std::fs::read(format!("/{rel}")) {
            let to = dir.path().join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(to, text).unwrap();
        }
    };
    for rel in [
        "proc/meminfo",
        "proc/vmstat",
        "proc/loadavg",
        "proc/uptime",
        "proc/net/dev",
        "proc/net/snmp",
        "proc/net/snmp6",
        "proc/net/netstat",
        "proc/net/sockstat",
        "proc/net/sockstat6",
        "proc/diskstats",
        "proc/partitions",
        "proc/mounts",
        "proc/swaps",
        "proc/zoneinfo",
        "proc/buddyinfo",
        "proc/pressure/cpu",
        "proc/pressure/memory",
        "proc/pressure/io",
        "proc/sys/fs/file-nr",
        "proc/sys/fs/inode-state",
        "proc/sys/fs/dentry-state",
        "proc/sys/kernel/random/entropy_avail",
    ] {
        copy(rel);
    }
    let w = |rel: &str, text: String| {
        let to = dir.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, text).unwrap();
    };
    for (rel, text) in cpu_files(ncpu) {
        w(rel, text);
    }
    dir
}

fn cpus(n: usize) {
    let ids: Vec<_> = table().metrics.iter().map(|m| m.pmid()).collect();
    println!(
        "\n| CPUs | linux agent CPU per fetch of all {} metrics | values |",
        ids.len()
    );
    println!("|---|---|---|");
    for ncpu in [2, 64, 256, 1024] {
        let root = many_cpu_root(ncpu);
        let mut agent = LinuxAgent::with_root(root.path());
        let values: usize = agent
            .fetch(&ids)
            .iter()
            .map(|(_, r)| r.as_ref().map_or(0, |v| v.len()))
            .sum();
        let rounds = (n * 4 / ncpu.max(8)).max(5);
        let mut times = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = thread_cpu();
            std::hint::black_box(agent.fetch(&ids));
            times.push(thread_cpu() - t);
        }
        println!(
            "| {ncpu} | {:.2} ms | {values} |",
            median(times).as_secs_f64() * 1e3
        );
    }
}

/// This process's CPU time (all threads).
fn process_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn threads(n: usize) {
    let mut ids = Vec::new();
    leaves(&mut ProcAgent::with_threads("/", 1), "proc", &mut ids);
    let procs = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                })
                .count()
        })
        .unwrap_or(0);
    println!(
        "\n| proc agent threads | wall per fetch of all {} proc.* metrics ({procs} processes) | CPU per fetch |",
        ids.len()
    );
    println!("|---|---|---|");
    let rounds = (n / 2).max(10);
    // Interleaved rounds, so that a change of the host's load weighs on every setting alike.
    let mut agents: Vec<(usize, ProcAgent, Vec<Duration>, Duration)> = [1, 2, 4]
        .into_iter()
        .map(|t| {
            (
                t,
                ProcAgent::with_threads("/", t),
                Vec::new(),
                Duration::ZERO,
            )
        })
        .collect();
    for (_, a, _, _) in &mut agents {
        std::hint::black_box(a.fetch(&ids));
    }
    for _ in 0..rounds {
        for (_, a, walls, cpu) in &mut agents {
            let (t, c) = (Instant::now(), process_cpu());
            std::hint::black_box(a.fetch(&ids));
            walls.push(t.elapsed());
            *cpu += process_cpu() - c;
        }
    }
    for (t, _, walls, cpu) in agents {
        println!(
            "| {t} | {:.2} ms | {:.2} ms |",
            median(walls).as_secs_f64() * 1e3,
            cpu.as_secs_f64() * 1e3 / rounds as f64
        );
    }
}

fn main() {
    // criterion's harness flags (`--bench`) are ignored.
    let n = rounds();
    match std::env::var("COLLECT_ONLY").as_deref() {
        Ok("threads") => threads(n),
        Ok("poll") => poll(),
        Ok("fetch") => fetches(n),
        _ => {
            fetches(n);
            threads(n);
            scrape(n);
            cpus(n);
            poll();
        }
    }
}
