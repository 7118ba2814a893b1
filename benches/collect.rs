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
//!   once and their CPU is counted over the same window. Also, in this process: the linux
//!   agent's CPU per fetch of the poll set, and the process reader's CPU per pass.
//!
//! `cargo bench -p wasmon-benches --bench collect` (builds `target/release/wasmon` unless
//! `WASMON_BIN` is set); `COLLECT_ROUNDS` fetches per server (default 200); `COLLECT_ONLY=threads`
//! or `COLLECT_ONLY=poll` runs one section alone; `COLLECT_POLL_SECS` is the `poll` window
//! (default 60 s, after a 15 s warm-up) and `COLLECT_POLL_CPUS` its CPU counts (default
//! `host,64,256,1024`); `WASMON_BIN_BEFORE` runs a second daemon binary beside it in `poll`
//! (a change's before and after in one run).

#[path = "pcp_wire.rs"]
mod pcp_wire;
#[path = "release.rs"]
mod release;

#[path = "thread_cpu.rs"]
mod thread_cpu;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use thread_cpu::thread_cpu;

use pcp_wire::{Client, free_port, pdu, pmcd_env, pmcd_with, pmids, pminfo};
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

/// The release daemon started in `dir` on `config` (written there as wasmon.toml).
fn spawn_daemon(dir: &std::path::Path, config: &str) -> Child {
    spawn_daemon_of(&release::binary(), dir, config)
}

/// The daemon binary `bin` started in `dir` on `config`.
fn spawn_daemon_of(bin: &std::path::Path, dir: &std::path::Path, config: &str) -> Child {
    std::fs::write(dir.join("wasmon.toml"), config).unwrap();
    Command::new(bin)
        .args(["run", "--config", "wasmon.toml"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
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

/// The per-CPU files of a host with `ncpu` CPUs: /proc/stat, interrupts (40 device lines and
/// the architecture's rows), softirqs, and cpuinfo (this host's first CPU repeated).
fn cpu_files(ncpu: usize) -> Vec<(&'static str, String)> {
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

/// Links every entry of the directory `from` into `to` (made), but those in `skip`.
fn link_entries(from: &str, to: &std::path::Path, skip: &[&str]) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let name = e.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        let _ = std::os::unix::fs::symlink(e.path(), to.join(&name));
    }
}

/// A live root faking `ncpu` CPUs for the `poll` section: ROOT/proc's entries are links to
/// this host's (counters move as they do here) but the per-CPU files of [`cpu_files`];
/// ROOT/sys links to /sys but `devices/system/cpu`, which holds `ncpu` copies of this host's
/// `cpu0` files (topology, cache, ...) and `online`/`possible`/`present` for `ncpu` CPUs, and
/// `devices/system/node/node0`, whose `cpuN` links name the `ncpu` CPUs.
fn live_cpu_root(ncpu: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let made: Vec<(&str, String)> = cpu_files(ncpu);
    let skip: Vec<&str> = made
        .iter()
        .map(|(rel, _)| rel.trim_start_matches("proc/"))
        .collect();
    link_entries("/proc", &root.join("proc"), &skip);
    for (rel, text) in &made {
        std::fs::write(root.join(rel), text).unwrap();
    }
    link_entries("/sys", &root.join("sys"), &["devices"]);
    link_entries("/sys/devices", &root.join("sys/devices"), &["system"]);
    link_entries(
        "/sys/devices/system",
        &root.join("sys/devices/system"),
        &["cpu", "node"],
    );
    // NUMA node0 holds the `ncpu` CPUs (pmdalinux learns its CPUs from `node*/cpuN`, as does
    // the linux agent's `hinv.map.cpu_node`): links to the faked `cpuN` directories below.
    let nodes = root.join("sys/devices/system/node");
    link_entries("/sys/devices/system/node", &nodes, &["node0"]);
    let node0 = nodes.join("node0");
    let host_cpus: Vec<String> = std::fs::read_dir("/sys/devices/system/node/node0")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            n.strip_prefix("cpu")
                .is_some_and(|c| c.parse::<u32>().is_ok())
        })
        .collect();
    let mut node0_skip: Vec<&str> = host_cpus.iter().map(String::as_str).collect();
    node0_skip.push("cpulist");
    link_entries("/sys/devices/system/node/node0", &node0, &node0_skip);
    std::fs::write(node0.join("cpulist"), format!("0-{}\n", ncpu - 1)).unwrap();
    for c in 0..ncpu {
        let _ =
            std::os::unix::fs::symlink(format!("../../cpu/cpu{c}"), node0.join(format!("cpu{c}")));
    }
    let cpu = root.join("sys/devices/system/cpu");
    link_entries(
        "/sys/devices/system/cpu",
        &cpu,
        &["online", "possible", "present"],
    );
    let range = format!("0-{}\n", ncpu - 1);
    for f in ["online", "possible", "present"] {
        std::fs::write(cpu.join(f), &range).unwrap();
    }
    // cpu0's readable regular files, by path below cpu0 (links such as `subsystem` left out).
    fn files(dir: &std::path::Path, rel: &std::path::Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let Ok(t) = e.file_type() else { continue };
            let r = rel.join(e.file_name());
            if t.is_dir() {
                files(&e.path(), &r, out);
            } else if t.is_file()
                && let Ok(b) = std::fs::read(e.path())
            {
                out.push((r, b));
            }
        }
    }
    let mut cpu0 = Vec::new();
    files(
        std::path::Path::new("/sys/devices/system/cpu/cpu0"),
        std::path::Path::new(""),
        &mut cpu0,
    );
    for c in 0..ncpu {
        let d = cpu.join(format!("cpu{c}"));
        let _ = std::fs::remove_file(&d); // this host's own cpuN link
        for (rel, bytes) in &cpu0 {
            let to = d.join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::write(to, bytes).unwrap();
        }
    }
    dir
}

/// The default config's `[[agent]]` table of the native linux agent.
fn default_linux_agent(cfg: &toml::Table) -> &toml::Table {
    cfg["agent"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_table())
        .find(|a| a.get("native").and_then(|n| n.as_str()) == Some("linux"))
        .expect("the default config has a native linux agent")
}

/// What the default config polls from the linux agent: its `poll-names` and every feed's.
fn default_poll_names(cfg: &toml::Table) -> Vec<String> {
    let a = default_linux_agent(cfg);
    let strings = |v: &toml::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect()
    };
    let mut names = strings(&a["poll-names"]);
    for f in a
        .get("feed")
        .and_then(|f| f.as_array())
        .into_iter()
        .flatten()
    {
        names.extend(strings(&f["names"]));
    }
    names.sort();
    names.dedup();
    names
}

/// The daemon `bin` on the embedded default config, only its ports and data directory
/// changed (and the linux agent's `root` when given).
fn default_daemon(
    bin: &std::path::Path,
    cfg: &toml::Table,
    root: Option<&std::path::Path>,
) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let (http, pcp) = (free_port(), free_port());
    let mut cfg = cfg.clone();
    let daemon = cfg["daemon"].as_table_mut().unwrap();
    daemon.insert("listen".into(), format!("127.0.0.1:{http}").into());
    daemon.insert("data-dir".into(), "data".into());
    cfg["pcp"]
        .as_table_mut()
        .unwrap()
        .insert("listen".into(), format!("127.0.0.1:{pcp}").into());
    if let Some(root) = root {
        for a in cfg["agent"].as_array_mut().unwrap() {
            let a = a.as_table_mut().unwrap();
            if a.get("native").and_then(|n| n.as_str()) == Some("linux") {
                a.insert("root".into(), root.to_string_lossy().into_owned().into());
            }
        }
    }
    let child = spawn_daemon_of(bin, dir.path(), &toml::to_string(&cfg).unwrap());
    let mut d = Daemon {
        child,
        pcp,
        _dir: dir,
    };
    for _ in 0..600 {
        assert!(
            d.child.try_wait().unwrap().is_none(),
            "the daemon refused the default config"
        );
        if pminfo(pcp, &["hinv.ncpu"]) {
            return d;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the daemon did not answer on its PCP port {pcp}");
}

/// The embedded default config of the daemon binary `bin` (`wasmon config default`).
fn own_default(bin: &std::path::Path) -> toml::Table {
    let out = Command::new(bin)
        .args(["config", "default"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} config default failed",
        bin.display()
    );
    String::from_utf8(out.stdout).unwrap().parse().unwrap()
}

/// node_exporter with its default collectors (on `root`'s proc and sys when given); `None`
/// when it is not installed or does not answer.
fn node_exporter(root: Option<&std::path::Path>) -> Option<(Child, u16)> {
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
fn scrape_once(port: u16) -> Option<usize> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut body = Vec::new();
    s.read_to_end(&mut body).ok()?;
    Some(body.len())
}

/// The PMIDs below (or at) each name in this agent's namespace.
fn agent_pmids(agent: &mut dyn Agent, names: &[String]) -> Vec<Pmid> {
    let mut ids = Vec::new();
    for n in names {
        match agent.lookup_name(n) {
            Ok(id) => ids.push(id),
            Err(_) => leaves(agent, n, &mut ids),
        }
    }
    ids
}

/// pmdaproc's metrics for what the process reader reads every 5 s with the default
/// `[procfs]` (fields `cpu` and `mem`, and the blocked-thread detector's state and schedstat
/// of every thread): `stat`'s times, sizes, faults, thread count, state and start, and
/// `schedstat`, of every process and thread (pmdaproc started with `-L`: threads in its
/// instance domain).
const PROC_POLL_NAMES: &[&str] = &[
    "proc.psinfo.utime",
    "proc.psinfo.stime",
    "proc.psinfo.start_time",
    "proc.psinfo.vsize",
    "proc.psinfo.rss",
    "proc.psinfo.maj_flt",
    "proc.psinfo.threads",
    "proc.psinfo.sname",
    "proc.schedstat.cpu_time",
    "proc.schedstat.run_delay",
];

fn poll() {
    let cfg: toml::Table = wasmon::config::DEFAULT.parse().unwrap();
    let names = default_poll_names(&cfg);
    let interval =
        wasmon::duration::parse(default_linux_agent(&cfg)["poll-interval"].as_str().unwrap())
            .unwrap();
    let proc_interval = cfg
        .get("procfs")
        .and_then(|p| p.get("interval"))
        .and_then(|i| i.as_str())
        .map_or(Duration::from_secs(5), |i| {
            wasmon::duration::parse(i).unwrap()
        });
    let window = release::secs_env("COLLECT_POLL_SECS", 60);
    let warmup = release::secs_env("COLLECT_POLL_WARMUP", 65);
    // pmcd with only the two PMDAs (and its own), pmdaproc answering per-process values to a
    // TCP client (-A) and listing threads (-L).
    let conf: String = std::fs::read_to_string("/etc/pcp/pmcd/pmcd.conf")
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            let w = l.split_whitespace().next().unwrap_or("");
            !matches!(w, "root" | "xfs" | "pmproxy" | "mmv" | "jbd2" | "kvm")
        })
        .map(|l| {
            if l.ends_with("pmdaproc -d 3") {
                format!("{l} -A -L\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let counts = std::env::var("COLLECT_POLL_CPUS").unwrap_or("host,64,256,1024".into());
    // `WASMON_BIN_BEFORE`: another build run beside it on the same config (a change's before).
    let bin = release::binary();
    let before_bin = std::env::var_os("WASMON_BIN_BEFORE").map(PathBuf::from);
    println!(
        "\n`poll`: the default config's polling ({} linux names every {}s, the process reader \
         every {}s), CPU per {}s interval over {}s, warm-up {}s",
        names.len(),
        interval.as_secs(),
        proc_interval.as_secs(),
        interval.as_secs(),
        window.as_secs(),
        warmup.as_secs()
    );
    println!(
        "\n| CPUs | linux values | CPUs pmcd sees | wasmon before (WASMON_BIN_BEFORE) | wasmon (default config) | \
         pmcd + pmdalinux + pmdaproc | node_exporter | wasmon / pmcd | wasmon / node_exporter | \
         linux agent CPU per poll (in this process) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for count in counts.split(',') {
        let root = match count.trim() {
            "host" => None,
            n => Some(live_cpu_root(
                n.parse().expect("COLLECT_POLL_CPUS: host or a number"),
            )),
        };
        let root_path = root.as_ref().map(|r| r.path());
        let statspath = root_path.map(|p| p.to_string_lossy().into_owned());
        let env: Vec<(&str, &str)> = statspath
            .as_deref()
            .map(|p| ("LINUX_STATSPATH", p))
            .into_iter()
            .collect();
        let Some(pmcd) = pmcd_env(Some(&conf), &env) else {
            eprintln!("collect: no reference pmcd: no poll figures");
            return;
        };
        let wasmon = default_daemon(&bin, &cfg, root_path);
        let before = before_bin
            .as_deref()
            .map(|b| default_daemon(b, &own_default(b), root_path));
        let ne = node_exporter(root_path);
        // pmcd's PMIDs for the same names (non-leaf names expanded as the daemon expands them).
        let mut linux_ids = Vec::new();
        for n in &names {
            linux_ids.extend(pmids(pmcd.port, n));
        }
        let mut proc_ids = Vec::new();
        for n in PROC_POLL_NAMES {
            proc_ids.extend(pmids(pmcd.port, n));
        }
        let (linux_req, proc_req) = (fetch_pdu(&linux_ids), fetch_pdu(&proc_ids));
        // The CPUs pmdalinux sees (`kernel.percpu.cpu.user`'s instances): N on a faked root
        // only when its NUMA nodes name N CPUs, as they do above.
        let pmcd_cpus = Command::new("pmprobe")
            .args([
                "-h",
                &format!("localhost:{}", pmcd.port),
                "kernel.percpu.cpu.user",
            ])
            .output()
            .ok()
            .and_then(|o| {
                let out = String::from_utf8_lossy(&o.stdout).into_owned();
                out.split_whitespace().nth(1)?.parse::<i64>().ok()
            })
            .unwrap_or(-1);
        let mut client = Client::connect(pmcd.port);
        let mut buf = Vec::new();
        // The same schedule as the daemon's: the linux set and a scrape every `interval`, the
        // process set every `proc_interval`.
        let mut tick = |n: u32, client: &mut Client| {
            let at = proc_interval * n;
            if at.as_millis().is_multiple_of(interval.as_millis()) {
                client.fetch(&linux_req, &mut buf);
                if let Some((_, port)) = &ne {
                    scrape_once(*port);
                }
            }
            client.fetch(&proc_req, &mut buf);
        };
        // The schedule above for `span`.
        let mut run = |span: Duration, client: &mut Client| {
            let from = Instant::now();
            let mut k = 0;
            while proc_interval * k < span {
                tick(k, client);
                k += 1;
                std::thread::sleep(
                    (from + proc_interval * k).saturating_duration_since(Instant::now()),
                );
            }
        };
        run(warmup, &mut client);
        // A window of whole intervals holds exactly window / interval of the daemon's polls,
        // whatever their phase.
        let ticks = |pid: u32| tree_cpu_ticks(pid);
        let ne_pid = ne.as_ref().map(|(c, _)| c.id());
        let old_pid = before.as_ref().map(|d| d.child.id());
        let before = (
            ticks(wasmon.child.id()),
            ticks(pmcd.child.id()),
            ne_pid.map(ticks),
            old_pid.map(ticks),
        );
        run(window, &mut client);
        let after = (
            ticks(wasmon.child.id()),
            ticks(pmcd.child.id()),
            ne_pid.map(ticks),
            old_pid.map(ticks),
        );
        let per = |a: u64, b: u64| {
            (a - b) as f64 / ticks_per_sec() / (window.as_secs_f64() / interval.as_secs_f64()) * 1e3
        };
        let w = per(after.0, before.0);
        let p = per(after.1, before.1);
        let e = match (after.2, before.2) {
            (Some(a), Some(b)) => per(a, b),
            _ => f64::NAN,
        };
        let old = match (after.3, before.3) {
            (Some(a), Some(b)) => per(a, b),
            _ => f64::NAN,
        };
        // The linux agent's share, in this process on the same root.
        let mut agent = LinuxAgent::with_root(root_path.unwrap_or(std::path::Path::new("/")));
        let ids = agent_pmids(&mut agent, &names);
        let values: usize = agent
            .fetch(&ids)
            .iter()
            .map(|(_, r)| r.as_ref().map_or(0, |v| v.len()))
            .sum();
        let mut times = Vec::new();
        for _ in 0..20 {
            let t = thread_cpu();
            std::hint::black_box(agent.fetch(&ids));
            times.push(thread_cpu() - t);
        }
        println!(
            "| {count} | {values} | {pmcd_cpus} | {old:.1} ms | {w:.1} ms | {p:.1} ms | {e:.1} ms | {:.2}x | {:.2}x | {:.2} ms |",
            w / p,
            w / e,
            median(times).as_secs_f64() * 1e3
        );
        if let Some((mut c, _)) = ne {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    // The process reader's pass as the default `[procfs]` reads it.
    use wasmon::procfs::{Fields, ProcReader};
    let mut reader = ProcReader::new();
    let fields = Fields::CPU | Fields::MEM | Fields::STATE | Fields::SCHED;
    let mut times = Vec::new();
    let mut tasks = 0;
    for _ in 0..20 {
        let t = thread_cpu();
        let snap = reader.read_all(fields, true).unwrap();
        times.push(thread_cpu() - t);
        tasks = snap.procs.len() + snap.threads.len();
    }
    println!(
        "\nThe process reader's pass (default `[procfs]`: cpu, mem, state, schedstat, every \
         thread), in this process: {:.2} ms CPU for {tasks} processes and threads",
        median(times).as_secs_f64() * 1e3
    );
}

fn main() {
    // criterion's harness flags (`--bench`) are ignored.
    let n = rounds();
    match std::env::var("COLLECT_ONLY").as_deref() {
        Ok("threads") => threads(n),
        Ok("poll") => poll(),
        _ => {
            fetches(n);
            threads(n);
            scrape(n);
            cpus(n);
            poll();
        }
    }
}
