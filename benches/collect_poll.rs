//! The `poll` section of `collect.rs`: what the embedded default config polls per 10 s
//! interval, wasmon beside pmcd with its PMDAs and beside node_exporter, on this host and on
//! live roots faking many CPUs (see `collect.rs`'s doc). Owns nothing but this section.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::common::*;
use super::pcp_wire::{Client, free_port, pmcd_env, pmids, pminfo};
use super::release;
use super::thread_cpu::thread_cpu;
use wasmon::linux::LinuxAgent;
use wasmon::namespace::{Agent, Pmid};

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

pub fn poll() {
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
    // Windows measured one after another per CPU count; each server's figure is the median.
    let rounds: usize = std::env::var("COLLECT_POLL_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|r| *r > 0)
        .unwrap_or(3);
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
         every {}s), CPU per {}s interval: the median of {rounds} windows of {}s (ns, process \
         clocks; in brackets ticks over all windows), warm-up {}s",
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
        // `rounds` windows of whole intervals, each holding exactly window / interval of the
        // daemon's polls whatever their phase; per server the median window's CPU (ns, from
        // the process clocks) and the ticks over all windows.
        let ne_pid = ne.as_ref().map(|(c, _)| c.id());
        let old_pid = before.as_ref().map(|d| d.child.id());
        let pids = [
            Some(wasmon.child.id()),
            Some(pmcd.child.id()),
            ne_pid,
            old_pid,
        ];
        let read = || pids.map(|p| p.map(tree_cpu));
        let per_interval = |v: f64| v / (window.as_secs_f64() / interval.as_secs_f64());
        let mut windows: Vec<[Option<TreeCpu>; 4]> = Vec::new();
        let first = read();
        let mut at = first;
        for _ in 0..rounds {
            run(window, &mut client);
            let now = read();
            windows.push(std::array::from_fn(|i| Some(now[i]? - at[i]?)));
            at = now;
        }
        let last = at;
        // ms per interval: the median window's ns, and the ticks over all windows.
        let figure = |i: usize| -> (f64, f64, f64) {
            let Some(ns) = windows
                .iter()
                .map(|w| w[i].map(|c| c.ns))
                .collect::<Option<Vec<u64>>>()
            else {
                return (f64::NAN, f64::NAN, f64::NAN);
            };
            let mut ns = ns;
            ns.sort();
            let med = per_interval(ns[ns.len() / 2] as f64 / 1e6);
            let all = last[i].zip(first[i]).map(|(l, f)| l - f).unwrap();
            let ticks = per_interval(all.ticks as f64 / ticks_per_sec() / rounds as f64 * 1e3);
            let live = per_interval(all.live_ns as f64 / 1e6 / rounds as f64);
            (med, ticks, live)
        };
        let (w, w_ticks, w_live) = figure(0);
        let (p, p_ticks, _) = figure(1);
        let (e, e_ticks, _) = figure(2);
        let (old, old_ticks, _) = figure(3);
        let spread = |i: usize| -> String {
            let v: Vec<String> = windows
                .iter()
                .filter_map(|w| w[i].map(|c| format!("{:.2}", per_interval(c.ns as f64 / 1e6))))
                .collect();
            v.join(" ")
        };
        eprintln!(
            "poll {count}: per window, ms per interval: wasmon [{}] pmcd [{}] node_exporter [{}] \
             before [{}]; wasmon's live threads' schedstat {w_live:.2} ms (clock over all \
             windows: the rest ran in threads that exited)",
            spread(0),
            spread(1),
            spread(2),
            spread(3)
        );
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
            "| {count} | {values} | {pmcd_cpus} | {old:.2} ms ({old_ticks:.1}) | {w:.2} ms ({w_ticks:.1}) | \
             {p:.2} ms ({p_ticks:.1}) | {e:.2} ms ({e_ticks:.1}) | {:.2}x | {:.2}x | {:.2} ms |",
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
