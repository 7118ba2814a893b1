//! What the sections of `collect.rs` share: the CPU a process tree spent (ticks and ns), medians, the
//! release daemon started on a config, the FETCH PDU, the per-CPU files of a synthesized
//! host, the leaves of a subtree and node_exporter scraped. Owns nothing but these helpers.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::pcp_wire::{free_port, pdu, pminfo};
use super::release;
use wasmon::namespace::{Agent, Pmid};

/// Clock ticks per second of /proc/PID/stat's times.
pub fn ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_CLK_TCK) }) as f64
}

/// `pid` and every process below it, each with its utime + stime in ticks.
fn tree(pid: u32) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
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
                out.push((p, *cpu));
            }
            if *ppid == p {
                parents.push(*q);
            }
        }
    }
    out
}

/// utime + stime of `pid` and every process below it, in ticks.
pub fn tree_cpu_ticks(pid: u32) -> u64 {
    tree(pid).iter().map(|(_, t)| t).sum()
}

/// The CPU a process tree has spent, read three ways at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub struct TreeCpu {
    /// Each process's CPU-time clock (`clock_getcpuclockid`), in ns: the kernel's sum of the
    /// run time of every thread, the live ones' as their `schedstat` counts it and the exited
    /// ones' as the process kept it. The figure the `poll` section reports.
    pub ns: u64,
    /// The run time of every live thread, summed from `/proc/PID/task/*/schedstat` (ns):
    /// `ns` less what threads that exited had run.
    pub live_ns: u64,
    /// utime + stime (clock ticks, 10 ms here), as before this measure.
    pub ticks: u64,
}

impl std::ops::Sub for TreeCpu {
    type Output = TreeCpu;
    fn sub(self, b: TreeCpu) -> TreeCpu {
        TreeCpu {
            ns: self.ns.saturating_sub(b.ns),
            live_ns: self.live_ns.saturating_sub(b.live_ns),
            ticks: self.ticks.saturating_sub(b.ticks),
        }
    }
}

/// The CPU time of one process's clock, in ns (0 when it is gone).
fn process_clock_ns(pid: u32) -> u64 {
    let mut id: libc::clockid_t = 0;
    // SAFETY: `id` is a valid out-pointer; a pid that is gone is an error return.
    if unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut id) } != 0 {
        return 0;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The run time (ns, schedstat's first field) of every live thread of `pid`.
fn threads_schedstat_ns(pid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    dir.flatten()
        .filter_map(|t| {
            let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            s.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

/// The CPU `pid` and every process below it have spent (pmcd with its PMDAs).
pub fn tree_cpu(pid: u32) -> TreeCpu {
    let mut cpu = TreeCpu::default();
    for (p, ticks) in tree(pid) {
        cpu.ticks += ticks;
        cpu.ns += process_clock_ns(p);
        cpu.live_ns += threads_schedstat_ns(p);
    }
    cpu
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Median wall time of `f` and the CPU `pid`'s tree spent per call, over `n` calls.
pub fn measure(pid: u32, n: usize, mut f: impl FnMut()) -> (Duration, f64) {
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
pub struct Daemon {
    pub child: Child,
    pub pcp: u16,
    pub _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The release daemon started in `dir` on `config` (written there as wasmon.toml).
pub fn spawn_daemon(dir: &std::path::Path, config: &str) -> Child {
    spawn_daemon_of(&release::binary(), dir, config)
}

/// The daemon binary `bin` started in `dir` on `config`.
pub fn spawn_daemon_of(bin: &std::path::Path, dir: &std::path::Path, config: &str) -> Child {
    std::fs::write(dir.join("wasmon.toml"), config).unwrap();
    Command::new(bin)
        .args(["run", "--config", "wasmon.toml"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

pub fn daemon(with_proc: bool) -> Daemon {
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
    let mut child = spawn_daemon(dir.path(), &config);
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

pub fn fetch_pdu(ids: &[u32]) -> Vec<u8> {
    let mut body = vec![0u32, 0, 0, ids.len() as u32];
    body.extend(ids);
    pdu(0x7003, &body)
}

/// The per-CPU files of a host with `ncpu` CPUs: /proc/stat, interrupts (40 device lines and
/// the architecture's rows), softirqs, and cpuinfo (this host's first CPU repeated).
pub fn cpu_files(ncpu: usize) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let mut stat = String::from("cpu  1000 20 300 40000 50 6 7 8 9 1\n");
    for c in 0..ncpu {
        stat += &format!("cpu{c} {} 2 30 4000 5 6 7 8 9 1\n", 100 + c);
    }
    stat += "intr 123456 1 2 3\nctxt 7777\nbtime 1700000000\nprocesses 4242\nprocs_running 3\nprocs_blocked 0\n";
    out.push(("proc/stat", stat));
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
    out.push(("proc/interrupts", intr));
    let mut soft = (0..ncpu).map(|c| format!("    CPU{c}")).collect::<String>() + "\n";
    for name in [
        "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER",
        "RCU",
    ] {
        soft += &format!("{name:>9}:{}\n", cols(ncpu));
    }
    out.push(("proc/softirqs", soft));
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
    out.push(("proc/cpuinfo", cpuinfo));
    out
}

/// Every leaf below `name` in an agent's namespace, as PMIDs.
pub fn leaves(agent: &mut dyn Agent, name: &str, out: &mut Vec<Pmid>) {
    for c in agent.children(name).unwrap_or_default() {
        let full = format!("{name}.{}", c.name);
        if c.leaf {
            out.extend(agent.lookup_name(&full));
        } else {
            leaves(agent, &full, out);
        }
    }
}

/// node_exporter with its default collectors (on `root`'s proc and sys when given); `None`
/// when it is not installed or does not answer.
pub fn node_exporter(root: Option<&std::path::Path>) -> Option<(Child, u16)> {
    let bin = "/usr/bin/prometheus-node-exporter";
    if !std::path::Path::new(bin).exists() {
        eprintln!("collect: no {bin}: no node_exporter figures");
        return None;
    }
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--web.listen-address=127.0.0.1:{port}"));
    if let Some(root) = root {
        cmd.arg(format!("--path.procfs={}", root.join("proc").display()));
        cmd.arg(format!("--path.sysfs={}", root.join("sys").display()));
    }
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    for _ in 0..100 {
        if scrape_once(port).is_some_and(|n| n > 1000) {
            return Some((child, port));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// One scrape of node_exporter's `/metrics`: the response's size.
pub fn scrape_once(port: u16) -> Option<usize> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).ok()?;
    Some(body.len())
}
