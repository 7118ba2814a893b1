//! PCP's own tools (Debian's pcp 6.0.3, unchanged, installed by the test when missing)
//! against wasmon's pmcd-compatible port, side by side with a reference pmcd and PCP's own
//! linux PMDA on the same machine: descriptors and instances, the seed's dynamic names over
//! the wire, pmval/pmprobe/pmrep, pmlogger into an archive pmval reads back, pmie, and
//! hostile clients (`tools`, `hostile`, `mmv`); pmproxy's REST API in front of both (`proxy`);
//! and wasmon as a PMDA under a real pmcd (`pmda`). The helpers here start the servers and read the tools' output.

mod hostile;
mod linux;
mod lustre;
mod metricsets;
mod mmv;
pub(crate) mod nfsclient;
mod pmda;
mod procagent;
mod proxy;
mod reports;
mod tools;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::common::{DaemonProcess, NO_PROCFS, config_file, free_port, output_ok};

/// Installs Debian's pcp (and python3-pcp, for pmrep) once. pcp's postinst runs
/// `systemctl`, which fails where systemd is not PID 1 and leaves dpkg half-configured:
/// a `systemctl` that exits 0 goes first on the PATH apt gives dpkg (`DPkg::Path`: apt
/// replaces the caller's PATH for maintainer scripts).
fn ensure_pcp() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let installed = || {
            Path::new("/usr/lib/pcp/bin/pmcd").exists()
                && Command::new("dpkg-query")
                    .args(["-W", "-f=${Status}\\n", "pcp", "python3-pcp"])
                    .output()
                    .is_ok_and(|o| {
                        String::from_utf8_lossy(&o.stdout)
                            .lines()
                            .filter(|l| *l == "install ok installed")
                            .count()
                            == 2
                    })
        };
        if installed() {
            return;
        }
        let shim = std::env::temp_dir().join("wasmon-pcp-systemctl-shim");
        std::fs::create_dir_all(&shim).unwrap();
        let systemctl = shim.join("systemctl");
        std::fs::write(&systemctl, "#!/bin/sh\nexit 0\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!(
            "{}:{}",
            shim.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let dpkg_path = format!(
            "DPkg::Path={}:/usr/sbin:/usr/bin:/sbin:/bin",
            shim.display()
        );
        let apt = |args: &[&str]| {
            Command::new("apt-get")
                .args(["-o", "DPkg::Lock::Timeout=600", "-o", &dpkg_path])
                .args(args)
                .env("PATH", &path)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        // A half-configured pcp from an earlier attempt is finished first.
        let _ = Command::new("dpkg")
            .args(["--configure", "-a"])
            .env("PATH", &path)
            .status();
        if !apt(&["install", "-y", "-q", "pcp", "python3-pcp"]) {
            apt(&["update", "-q"]);
            apt(&["install", "-y", "-q", "pcp", "python3-pcp"]);
        }
        assert!(installed(), "this test needs Debian's pcp and python3-pcp");
    });
}

/// A reference pmcd (with PCP's linux and MMV PMDAs), one per test binary, on its own port
/// and run directory; it dies with the test binary.
fn reference_pmcd() -> u16 {
    static PMCD: OnceLock<(u16, Mutex<std::process::Child>)> = OnceLock::new();
    ensure_pcp();
    PMCD.get_or_init(|| {
        if !Path::new("/var/lib/pcp/pmns/root").exists() {
            let ok = Command::new("./Rebuild")
                .arg("-s")
                .current_dir("/var/lib/pcp/pmns")
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "/var/lib/pcp/pmns/Rebuild -s failed");
        }
        std::fs::create_dir_all("/run/pcp").unwrap();
        let run = std::env::temp_dir().join(format!("wasmon-test-pmcd-{}", std::process::id()));
        std::fs::create_dir_all(&run).unwrap();
        // Spawned from a thread that lives as long as the test binary: PR_SET_PDEATHSIG fires
        // when the spawning *thread* ends, and a test's thread ends with its test.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            tx.send(spawn_pmcd(&run, &[], true)).unwrap();
            loop {
                std::thread::park();
            }
        });
        let (child, port) = rx.recv().unwrap();
        wait_until(&format!("the reference pmcd on {port}"), || {
            pcp_tool("pminfo", port, &["pmcd.version"]).status.success()
        });
        (port, Mutex::new(child))
    })
    .0
}

/// A private pmcd running one PMDA: `conf_line` is its pmcd.conf line (name, domain, how to
/// start it), `domain` its PMNS root. Returns the pmcd (killed by the caller) and its port.
fn pmcd_with_one_pmda(
    run: &Path,
    conf_line: &str,
    name: &str,
    domain: u32,
) -> (std::process::Child, u16) {
    let conf = run.join("pmcd.conf");
    std::fs::write(&conf, format!("{conf_line}\n")).unwrap();
    let pmns = run.join("pmns");
    std::fs::write(&pmns, format!("root {{\n\t{name}\t{domain}:*:*\n}}\n")).unwrap();
    spawn_pmcd(
        run,
        &[
            "-c".as_ref(),
            conf.as_os_str(),
            "-n".as_ref(),
            pmns.as_os_str(),
        ],
        true,
    )
}

/// Starts pmcd in `run` (its log, PMDA logs and run files there) with `args`, on a free port,
/// and returns once its log says it listens on that port over IPv4: a port freed by
/// [`free_port`] may be taken by another test's server first, and pmcd then starts without
/// it (it is tried again on another port). `orphan_dies`: the child dies with its parent
/// thread.
fn spawn_pmcd(
    run: &Path,
    args: &[&std::ffi::OsStr],
    orphan_dies: bool,
) -> (std::process::Child, u16) {
    for _ in 0..5 {
        let port = free_port();
        let log = run.join("pmcd.log");
        let _ = std::fs::remove_file(&log);
        let mut cmd = Command::new("/usr/lib/pcp/bin/pmcd");
        cmd.args(["-f", "-p", &port.to_string(), "-l"])
            .arg(&log)
            .args(args)
            .env("PCP_RUN_DIR", run)
            // Its PMDAs write their logs into its working directory.
            .current_dir(run)
            .stdout(Stdio::null())
            // pmcd's pipe PMDAs inherit it: their complaints land in the run directory.
            .stderr(std::fs::File::create(run.join("stderr.log")).unwrap());
        if orphan_dies {
            crate::common::dies_with_test(&mut cmd);
        }
        let mut child = cmd.spawn().expect("starting pmcd");
        let deadline = Instant::now() + Duration::from_secs(60);
        let listening = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let inet = text
                .lines()
                .find(|l| l.contains(&format!(" {port} inet")))
                .map(|l| l.trim_start().starts_with("ok"));
            if let Some(ok) = inet {
                break ok;
            }
            if child.try_wait().ok().flatten().is_some() || Instant::now() > deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if listening {
            return (child, port);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!(
        "pmcd did not get a port in five tries; its log is in {}",
        run.display()
    );
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A PCP client against `localhost:port`. Derived metrics from the host's config are off, so
/// both servers are compared on what they serve.
fn pcp_tool(tool: &str, port: u16, args: &[&str]) -> Output {
    let host = format!("localhost:{port}");
    let mut cmd = if tool == "pmrep" {
        // pmrep runs `pmpython`, which takes the first python3 on PATH: Debian's has the
        // module.
        let mut c = Command::new("/usr/bin/python3");
        c.arg("/usr/bin/pmrep");
        c
    } else {
        Command::new(tool)
    };
    cmd.args(["-h", &host])
        .args(args)
        .env("PCP_DERIVED_CONFIG", "")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(tool: &str, port: u16, args: &[&str]) -> String {
    let o = pcp_tool(tool, port, args);
    assert!(
        o.status.success(),
        "{tool} {args:?}: {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

/// A wasmon serving PCP on `pcp`.
struct Wasmon {
    daemon: DaemonProcess,
    pcp: u16,
    _dir: tempfile::TempDir,
}

/// [`wasmon_with`] the foo and mmv agents too (mmv's files in `mmv_dir`).
fn wasmon(mmv_dir: &Path) -> Wasmon {
    wasmon_with(&format!(
        r#"
[[agent]]
name = "foo"
guest = "foo"
domain = 44
pmns = """
root {{ foo }}
foo {{
    version 44:0:1
    count   44:*:*
    memory  44:0:2
}}
"""

[[agent]]
name = "mmv"
guest = "mmv"
domain = 70
pmns = "root {{ mmv 70:*:* }}"
params = {{ dir = "mmv", root = "mmv" }}
grants = {{ mapped = [{{ name = "mmv", host = "{}" }}] }}
"#,
        mmv_dir.display()
    ))
}

/// wasmon with the native linux and proc agents, then `agents` (more `[[agent]]` tables), its
/// PCP port on a free port.
fn wasmon_with(agents: &str) -> Wasmon {
    ensure_pcp();
    let dir = tempfile::tempdir().unwrap();
    let pcp = free_port();
    let config = config_file(
        dir.path(),
        &format!(
            r#"{NO_PROCFS}
[[agent]]
name = "linux"
native = "linux"

[[agent]]
name = "proc"
native = "proc"
{agents}
[pcp]
listen = "127.0.0.1:{pcp}"
"#
        ),
    );
    let daemon = DaemonProcess::start(&config);
    Wasmon {
        daemon,
        pcp,
        _dir: dir,
    }
}

fn no_mmv() -> PathBuf {
    std::env::temp_dir()
}

/// Every leaf wasmon's linux agent serves, as PCP names them.
fn linux_names(port: u16) -> Vec<String> {
    let names: Vec<String> = ok("pminfo", port, &["hinv", "kernel", "mem", "network"])
        .lines()
        .map(str::to_string)
        .collect();
    assert!(names.len() > 30, "{names:?}");
    names
}

/// `pminfo -m -d` blocks, keyed by metric name.
fn desc_blocks(text: &str) -> Vec<(String, String)> {
    text.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| {
            let b = b.trim();
            (
                b.split_whitespace().next().unwrap().to_string(),
                b.to_string(),
            )
        })
        .collect()
}
