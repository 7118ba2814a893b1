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
//!   N CPUs): CPU per fetch of every linux metric.
//!
//! `cargo bench -p wasmon-benches --bench collect` (builds `target/release/wasmon` unless
//! `WASMON_BIN` is set); `COLLECT_ROUNDS` fetches per server (default 200); `COLLECT_ONLY=threads`
//! runs the in-process `threads` table alone.

#[path = "pcp_wire.rs"]
mod pcp_wire;
#[path = "release.rs"]
mod release;

#[path = "thread_cpu.rs"]
mod thread_cpu;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use thread_cpu::thread_cpu;

use pcp_wire::{Client, free_port, pdu, pmcd_with, pmids, pminfo};
use wasmon::linux::{LinuxAgent, table};
use wasmon::namespace::{Agent, Pmid};
use wasmon::procfs::agent::ProcAgent;

fn rounds() -> usize {
    std::env::var("COLLECT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// Clock ticks per second of /proc/PID/stat's times.
fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }) as f64
}

/// utime + stime of `pid` and every process below it, in ticks.
fn tree_cpu_ticks(pid: u32) -> u64 {
    let mut total = 0;
    let mut parents = vec![pid];
    let stats: Vec<(u32, u32, u64)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let p: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let s = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split(' ').collect();
            let ppid: u32 = f.get(1)?.parse().ok()?;
            let cpu = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            Some((p, ppid, cpu))
        })
        .collect();
    while let Some(p) = parents.pop() {
        for (q, ppid, cpu) in &stats {
            if *q == p {
                total += cpu;
            }
            if *ppid == p {
                parents.push(*q);
            }
        }
    }
    total
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Median wall time of `f` and the CPU `pid`'s tree spent per call, over `n` calls.
fn measure(pid: u32, n: usize, mut f: impl FnMut()) -> (Duration, f64) {
    f();
    let before = tree_cpu_ticks(pid);
    let mut walls = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f();
        walls.push(t.elapsed());
    }
    let ticks = tree_cpu_ticks(pid) - before;
    (median(walls), ticks as f64 / ticks_per_sec() / n as f64)
}

/// The release daemon with only its native agents and the PCP port.
struct Daemon {
    child: Child,
    pcp: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn daemon(with_proc: bool) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let (http, pcp) = (free_port(), free_port());
    let proc = if with_proc {
        "[[agent]]\nname = \"proc\"\nnative = \"proc\"\n"
    } else {
        ""
    };
    let config = format!(
        "[daemon]\ndata-dir = \"data\"\nlisten = \"127.0.0.1:{http}\"\n\
         [[agent]]\nname = \"linux\"\nnative = \"linux\"\n{proc}\
         [pcp]\nlisten = \"127.0.0.1:{pcp}\"\n"
    );
    std::fs::write(dir.path().join("wasmon.toml"), config).unwrap();
    let mut child = Command::new(release::binary())
        .args(["run", "--config", "wasmon.toml"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..300 {
        if with_proc && child.try_wait().unwrap().is_some() {
            eprintln!("collect: this daemon has no native proc agent: linux only");
            return daemon(false);
        }
        if pminfo(pcp, &["hinv.ncpu"]) {
            return Daemon {
                child,
                pcp,
                _dir: dir,
            };
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the daemon did not answer on its PCP port {pcp}");
}

fn fetch_pdu(ids: &[u32]) -> Vec<u8> {
    let mut body = vec![0u32, 0, 0, ids.len() as u32];
    body.extend(ids);
    pdu(0x7003, &body)
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
    println!(
        "| fetch | metrics | wasmon wall | pmcd wall | ratio | wasmon CPU | pmcd CPU | ratio | RESULT bytes wasmon / pmcd |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (what, ids) in [
        ("linux (domain 60)", &linux),
        ("proc.* (all processes)", &proc),
    ] {
        let req = fetch_pdu(ids);
        let mut buf = Vec::new();
        let mut run = |port: u16, pid: u32| {
            let mut c = Client::connect(port);
            let mut bytes = 0;
            let (wall, cpu) = measure(pid, n, || {
                bytes = c.fetch(&req, &mut buf);
            });
            (wall, cpu, bytes)
        };
        let (ww, wc, wb) = run(wasmon.pcp, wasmon.child.id());
        let (pw, pc, pb) = run(pmcd.port, pmcd.child.id());
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
    let bin = "/usr/bin/prometheus-node-exporter";
    if !std::path::Path::new(bin).exists() {
        eprintln!("collect: no {bin}: no node_exporter figures");
        return;
    }
    let port = free_port();
    let mut child = Command::new(bin)
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let get = || -> Option<usize> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .ok()?;
        let mut body = Vec::new();
        s.read_to_end(&mut body).ok()?;
        Some(body.len())
    };
    let mut up = false;
    for _ in 0..100 {
        if get().is_some_and(|n| n > 1000) {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if up {
        let families = {
            let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
                .unwrap();
            let mut text = String::new();
            s.read_to_string(&mut text).unwrap();
            text.lines().filter(|l| l.starts_with("# TYPE")).count()
        };
        let (wall, cpu) = measure(child.id(), n, || {
            get();
        });
        println!(
            "\n| node_exporter (default collectors, {families} families) | wall {:.2} ms | CPU {:.2} ms per scrape |",
            wall.as_secs_f64() * 1e3,
            cpu * 1e3
        );
    }
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
    let mut stat = String::from("cpu  1000 20 300 40000 50 6 7 8 9 1\n");
    for c in 0..ncpu {
        stat += &format!("cpu{c} {} 2 30 4000 5 6 7 8 9 1\n", 100 + c);
    }
    stat += "intr 123456 1 2 3\nctxt 7777\nbtime 1700000000\nprocesses 4242\nprocs_running 3\nprocs_blocked 0\n";
    w("proc/stat", stat);
    let cols = |n: usize| {
        (0..n)
            .map(|c| format!(" {:>10}", c * 3))
            .collect::<String>()
    };
    let mut intr = (0..ncpu)
        .map(|c| format!("      CPU{c}"))
        .collect::<String>()
        + "\n";
    for line in 0..40 {
        intr += &format!(
            "{line:>4}:{}   IR-PCI-MSI 5{line}-edge      dev{line}\n",
            cols(ncpu)
        );
    }
    for name in ["NMI", "LOC", "SPU", "PMI", "RES", "CAL", "TLB"] {
        intr += &format!("{name}:{}   {name} interrupts\n", cols(ncpu));
    }
    intr += "ERR:          0\nMIS:          0\n";
    w("proc/interrupts", intr);
    let mut soft = (0..ncpu).map(|c| format!("    CPU{c}")).collect::<String>() + "\n";
    for name in [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ] {
        soft += &format!("{name:>9}:{}\n", cols(ncpu));
    }
    w("proc/softirqs", soft);
    let one = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let first = one.split("\n\n").next().unwrap_or("").to_string();
    let mut cpuinfo = String::new();
    for c in 0..ncpu {
        for l in first.lines() {
            if l.starts_with("processor") {
                cpuinfo += &format!("processor\t: {c}\n");
            } else {
                cpuinfo += l;
                cpuinfo += "\n";
            }
        }
        cpuinfo += "\n";
    }
    w("proc/cpuinfo", cpuinfo);
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

/// Every leaf below `name` in an agent's namespace, as PMIDs.
fn leaves(agent: &mut dyn Agent, name: &str, out: &mut Vec<Pmid>) {
    for c in agent.children(name).unwrap_or_default() {
        let full = format!("{name}.{}", c.name);
        if c.leaf {
            out.extend(agent.lookup_name(&full));
        } else {
            leaves(agent, &full, out);
        }
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
    if std::env::var_os("COLLECT_ONLY").is_some_and(|v| v == "threads") {
        threads(n);
        return;
    }
    fetches(n);
    threads(n);
    scrape(n);
    cpus(n);
}
