//! What the bundled guest agents cost a node: daemons that poll just them every 10 s (as the
//! default config does), side by side in one run, and the process CPU (utime + stime) each
//! spends over a window after a warm-up, against an idle daemon with no agent (issue 30).
//!
//! The agents read this machine's /proc and /sys where it has the hardware (`cpusys`) and the
//! tests' captured trees where it does not (`infiniband`, `denki`, `hwmon`, `lustre`; the
//! nfsclient mountstats and slurm cgroup fixtures), each polled for every metric it has.
//!
//! `AGENTS_CPU=LABEL=WASMON[:GUESTS_DIR],...` names the daemon binaries (e.g. before and after
//! a change; default: this workspace's release binary), each with the directory holding its
//! `nfsclient.wasm` and `slurm.wasm` (built by the kit from the same sources; without one,
//! those two agents are left out); `AGENTS_CPU_SECS` the window (default 300).
//! `cargo bench -p wasmon-benches --bench agents_cpu`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/all/guest_agents/trees.rs"]
#[allow(dead_code)]
mod trees;

/// The poll interval of the default config's agents.
const INTERVAL: &str = "10s";
/// Long enough for a daemon's start (compiling the 18 MB Python component takes ~20 s of
/// CPU) and every agent's first poll (a Python agent's instance starts CPython).
const WARM_UP: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// One `[[agent]]` polling everything it has into the `host` pipeline.
fn agent(name: &str, grants: &[(&Path, &str)], extra: &str) -> String {
    let dirs: Vec<String> = grants
        .iter()
        .map(|(host, guest)| {
            format!(
                "{{ host = {:?}, guest = {guest:?} }}",
                host.display().to_string()
            )
        })
        .collect();
    format!(
        "[[agent]]\nname = {name:?}\nguest = {name:?}\npoll-interval = {INTERVAL:?}\npipeline = \"host\"\n\
         grants = {{ dirs = [{}] }}\n{extra}\n",
        dirs.join(", ")
    )
}

/// The config of one daemon in `dir`: every bundled agent, or none (`idle`).
fn config(dir: &Path, trees: &Path, guests: Option<&Path>, idle: bool) -> PathBuf {
    let mut toml = format!(
        "[daemon]\ndata-dir = {:?}\nguests-dir = {:?}\n\n[[pipeline]]\nname = \"host\"\nsinks = [\"store\"]\n\n",
        dir.join("data").display().to_string(),
        guests.map(|g| g.display().to_string()).unwrap_or_default(),
    );
    if !idle {
        let sys = trees.join("sys");
        let proc_tree = trees.join("proc");
        toml += &agent("infiniband", &[(&sys, "/sys")], "");
        toml += &agent("denki", &[(&sys, "/sys")], "");
        toml += &agent("hwmon", &[(&sys, "/sys")], "");
        toml += &agent("lustre", &[(&proc_tree, "/proc"), (&sys, "/sys")], "");
        toml += &agent(
            "cpusys",
            &[(Path::new("/proc"), "/proc"), (Path::new("/sys"), "/sys")],
            "",
        );
        if guests.is_some() {
            toml += &agent(
                "nfsclient",
                &[(&repo().join("tests/fixtures/nfsclient/mixed"), "/proc/self")],
                "",
            );
            toml += &agent(
                "slurm",
                &[(&repo().join("tests/fixtures/slurm/node"), "/sys/fs/cgroup")],
                "deadline = \"2s\"\nmemory = \"256MiB\"",
            );
        }
    }
    let path = dir.join("wasmon.toml");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(&path, toml).unwrap();
    path
}

/// utime + stime of process `pid` so far (its threads, live and exited), in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after `) `.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

struct Daemon {
    label: String,
    child: Child,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(label: &str, bin: &Path, config: &Path, log: &Path) -> Daemon {
    let child = Command::new(bin)
        .args(["run", "--config"])
        .arg(config)
        // Any free port: nothing here talks to the daemons.
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    Daemon {
        label: label.to_string(),
        child,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let spec = std::env::var("AGENTS_CPU")
        .unwrap_or_else(|_| format!("this={}", repo().join("target/release/wasmon").display()));
    let secs: u64 = std::env::var("AGENTS_CPU_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let work = tempfile::tempdir().unwrap();
    let trees = work.path().join("trees");
    trees::infiniband(&trees);
    trees::powercap(&trees);
    trees::hwmon(&trees);
    trees::lustre_procfs(&trees);
    let mut daemons = Vec::new();
    let mut first_bin = None;
    for item in spec.split(',') {
        let (label, rest) = item.split_once('=').expect("LABEL=WASMON[:GUESTS_DIR]");
        let (bin, guests) = match rest.split_once(':') {
            Some((b, g)) => (PathBuf::from(b), Some(PathBuf::from(g))),
            None => (PathBuf::from(rest), None),
        };
        let dir = work.path().join(label);
        let cfg = config(&dir, &trees, guests.as_deref(), false);
        daemons.push(start(label, &bin, &cfg, &dir.join("stderr")));
        first_bin.get_or_insert(bin);
    }
    let idle_dir = work.path().join("idle");
    let cfg = config(&idle_dir, &trees, None, true);
    daemons.push(start(
        "idle (no agent)",
        first_bin.as_deref().unwrap(),
        &cfg,
        &idle_dir.join("stderr"),
    ));
    std::thread::sleep(WARM_UP);
    let t0 = Instant::now();
    let before: Vec<u64> = daemons.iter().map(|d| cpu_ticks(d.child.id())).collect();
    std::thread::sleep(Duration::from_secs(secs));
    let elapsed = t0.elapsed().as_secs_f64();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    println!(
        "process CPU over {elapsed:.0} s ({:.0} polls of each agent at {INTERVAL}):",
        elapsed / 10.0
    );
    for (d, t0) in daemons.iter().zip(before) {
        let ms = (cpu_ticks(d.child.id()) - t0) as f64 * 1000.0 / hz;
        println!(
            "  {:<18} {ms:>8.0} ms  = {:>6.2} ms per 10 s  = {:.4} % of one CPU",
            d.label,
            ms * 10.0 / elapsed,
            ms / elapsed / 10.0
        );
    }
    for d in &daemons {
        let log = work
            .path()
            .join(d.label.split(' ').next().unwrap())
            .join("stderr");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let bad = text
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .take(5)
            .collect::<Vec<_>>();
        if !bad.is_empty() {
            println!("  {} logged:\n    {}", d.label, bad.join("\n    "));
        }
    }
}
