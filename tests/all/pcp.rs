//! PCP's own tools (Debian's pcp 6.0.3, unchanged, installed by the test when missing)
//! against wasmon's pmcd-compatible port, side by side with a reference pmcd and PCP's own
//! linux PMDA on the same machine: descriptors and instances, the seed's dynamic names over
//! the wire, pmval/pmprobe/pmrep, pmlogger into an archive pmval reads back, pmie, and
//! hostile clients.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::common::{DaemonProcess, free_port};

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
        let port = free_port();
        let mut cmd = Command::new("/usr/lib/pcp/bin/pmcd");
        cmd.args(["-f", "-p", &port.to_string(), "-l"])
            .arg(run.join("pmcd.log"))
            .env("PCP_RUN_DIR", &run)
            // Its PMDAs write their logs into its working directory.
            .current_dir(&run)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe and touches nothing of the parent's.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        // Spawned from a thread that lives as long as the test binary: PR_SET_PDEATHSIG fires
        // when the spawning *thread* ends, and a test's thread ends with its test.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            tx.send(cmd.spawn().expect("starting the reference pmcd"))
                .unwrap();
            loop {
                std::thread::park();
            }
        });
        let child = rx.recv().unwrap();
        wait_until(&format!("the reference pmcd on {port}"), || {
            pcp_tool("pminfo", port, &["pmcd.version"]).status.success()
        });
        (port, Mutex::new(child))
    })
    .0
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

/// wasmon with the linux, foo and mmv agents and its PCP port on a free port.
struct Wasmon {
    daemon: DaemonProcess,
    pcp: u16,
    _dir: tempfile::TempDir,
}

fn wasmon(mmv_dir: &Path) -> Wasmon {
    ensure_pcp();
    let dir = tempfile::tempdir().unwrap();
    let pcp = free_port();
    let config = dir.path().join("wasmon.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[daemon]
data-dir = "data"
[procfs]
enabled = false

[[agent]]
name = "linux"
native = "linux"

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

[pcp]
listen = "127.0.0.1:{pcp}"
"#,
            mmv_dir.display()
        ),
    )
    .unwrap();
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

/// (metric, instance names) from `pminfo -f`; `None` where the server has no values (PCP's
/// linux PMDA has none for some of its metrics, mem.util.shared for one).
fn instance_names(text: &str) -> Vec<(String, Option<Vec<String>>)> {
    let mut out: Vec<(String, Option<Vec<String>>)> = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("No value") {
            if let Some(last) = out.last_mut() {
                last.1 = None;
            }
        } else if !line.starts_with(' ') && !line.is_empty() {
            out.push((line.trim().to_string(), Some(Vec::new())));
        } else if let Some(rest) = line.trim().strip_prefix("inst [")
            && let Some((_, name)) = rest.split_once(" or \"")
            && let Some((name, _)) = name.split_once("\"]")
            && let Some(Some(names)) = out.last_mut().map(|l| &mut l.1)
        {
            names.push(name.to_string());
        }
    }
    for names in out.iter_mut().filter_map(|(_, n)| n.as_mut()) {
        names.sort();
    }
    out
}

#[test]
fn linux_agent_matches_pcps_linux_pmda_descriptors_and_instances() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    let names = linux_names(w.pcp);
    let args: Vec<&str> = ["-m", "-d"]
        .into_iter()
        .chain(names.iter().map(String::as_str))
        .collect();
    let ours = desc_blocks(&ok("pminfo", w.pcp, &args));
    let theirs = desc_blocks(&ok("pminfo", pmcd, &args));
    assert_eq!(ours.len(), names.len());
    // PMID, type, indom, semantics and units, as pminfo prints them, metric by metric.
    for ((name, a), (_, b)) in ours.iter().zip(&theirs) {
        assert_eq!(a, b, "{name}: wasmon (left) vs pmcd's linux PMDA (right)");
    }
    assert_eq!(ours.len(), theirs.len());

    let mut fargs = vec!["-f"];
    fargs.extend(names.iter().map(String::as_str));
    let ours = instance_names(&ok("pminfo", w.pcp, &fargs));
    let theirs = instance_names(&ok("pminfo", pmcd, &fargs));
    assert_eq!(ours.len(), names.len());
    let mut with_instances = 0;
    for ((name, a), (b_name, b)) in ours.iter().zip(&theirs) {
        assert_eq!(name, b_name);
        let a = a
            .as_ref()
            .unwrap_or_else(|| panic!("wasmon has no values for {name}"));
        // Where both have the metric.
        if let Some(b) = b {
            assert_eq!(
                a, b,
                "{name}: instance names, wasmon (left) vs pmcd (right)"
            );
            with_instances += usize::from(!a.is_empty());
        }
    }
    assert!(with_instances >= 3, "{ours:?}");
    drop(w.daemon);
}

#[test]
fn dynamic_names_over_the_wire_as_the_seed_says() {
    let w = wasmon(&no_mmv());
    // The daemon's own traverse (HTTP) is what pminfo must list.
    let v: serde_json::Value = w
        .daemon
        .get("/api/ns/traverse?prefix=foo")
        .unwrap()
        .json()
        .unwrap();
    let expected: Vec<String> = v["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    let listed: Vec<String> = ok("pminfo", w.pcp, &["foo"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(listed, expected);
    for name in ["foo.count.ops", "foo.count.errs", "foo.count.numcount"] {
        assert!(listed.iter().any(|n| n == name), "{listed:?}");
    }
    // The seed's PMIDs: foo.count.ops is 44.1.0, by name and (pmNameAll) back.
    assert_eq!(
        ok("pminfo", w.pcp, &["-m", "foo.count.ops"]).trim(),
        "foo.count.ops PMID: 44.1.0"
    );
    let m = ok("pminfo", w.pcp, &["-M", "foo.count.ops"]);
    assert!(m.starts_with("foo.count.ops PMID: 44.1.0 = "), "{m}");
    // One-line help of each dynamic metric, from the guest.
    let t = ok("pminfo", w.pcp, &["-t", "foo.count"]);
    assert_eq!(t.lines().count(), 3, "{t}");
    assert!(
        t.lines()
            .all(|l| l.starts_with("foo.count.") && l.contains(" [")),
        "{t}"
    );
    // Unknown names: below the dynamic root (the agent says so) and outside it.
    for name in ["foo.count.nosuch", "nosuch.metric"] {
        let o = pcp_tool("pminfo", w.pcp, &["-m", name]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{name}: Unknown metric name")),
            "{err}"
        );
    }
    // A non-leaf: pmLookupName answers PM_ERR_NONLEAF (pmval looks names up as given).
    let o = pcp_tool("pmval", w.pcp, &["-s", "1", "foo.count"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("Metric name is not a leaf in PMNS"), "{err}");
    // Values of the dynamic metrics arrive through FETCH.
    let f = ok("pminfo", w.pcp, &["-f", "foo.count.ops"]);
    assert!(f.contains("    value "), "{f}");
}

#[test]
fn pmval_pmprobe_pmrep_agree_with_pmcd() {
    let pmcd = reference_pmcd();
    let w = wasmon(&no_mmv());
    // pmval: a sample per interval, with the instance names of the indom as columns.
    let v = ok("pmval", w.pcp, &["-s", "3", "-t", "0.2", "kernel.all.load"]);
    assert!(v.contains("host:      "), "{v}");
    let samples = v
        .lines()
        .filter(|l| l.split_whitespace().count() == 3 && l.trim().starts_with(char::is_numeric))
        .count();
    assert_eq!(samples, 3, "{v}");
    assert!(v.contains("1 minute") && v.contains("15 minute"), "{v}");
    // pmval -i: one instance through the profile.
    let one = ok(
        "pmval",
        w.pcp,
        &["-s", "1", "-i", "cpu0", "kernel.percpu.cpu.user"],
    );
    assert!(one.contains("cpu0") && !one.contains("cpu1"), "{one}");
    // pmprobe -v: a value that does not move, the same from both.
    let probe = |port| ok("pmprobe", port, &["-v", "hinv.ncpu", "mem.physmem"]);
    assert_eq!(probe(w.pcp), probe(pmcd));
    // pmrep (python3-pcp) over both.
    let rep = |port| {
        ok(
            "pmrep",
            port,
            &["-s", "1", "-t", "0.2", "-H", "hinv.ncpu", "mem.physmem"],
        )
    };
    assert_eq!(rep(w.pcp), rep(pmcd));
    // pmcd.hostname as pmcd answers it.
    let host = |port| ok("pmprobe", port, &["-v", "pmcd.hostname"]);
    assert_eq!(host(w.pcp), host(pmcd));
}

#[test]
fn pmlogger_writes_an_archive_pmval_reads_back_and_pmie_evaluates() {
    let w = wasmon(&no_mmv());
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("pmlogger.conf");
    std::fs::write(
        &conf,
        "log mandatory on 100 msec {\n  hinv.ncpu\n  kernel.all.load\n  foo.count.ops\n}\n",
    )
    .unwrap();
    let archive = dir.path().join("arch");
    let log = dir.path().join("pmlogger.log");
    let conf_s = conf.to_str().unwrap();
    let log_s = log.to_str().unwrap();
    let arch_s = archive.to_str().unwrap();
    ok(
        "pmlogger",
        w.pcp,
        &["-c", conf_s, "-s", "5", "-l", log_s, arch_s],
    );
    let ncpu = ok("pmprobe", w.pcp, &["-v", "hinv.ncpu"]);
    let ncpu = ncpu.split_whitespace().nth(2).unwrap().to_string();
    // Read back without a server.
    let back = Command::new("pmval")
        .args(["-a", arch_s, "-t", "0.1", "hinv.ncpu"])
        .output()
        .unwrap();
    let back = stdout(&back);
    let values: Vec<&str> = back
        .lines()
        .filter(|l| l.starts_with(char::is_numeric) && !l.contains("No values"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert!(
        !values.is_empty() && values.iter().all(|v| *v == ncpu),
        "{back}"
    );
    let dynamic = Command::new("pmval")
        .args(["-a", arch_s, "-t", "0.1", "foo.count.ops"])
        .output()
        .unwrap();
    assert!(
        dynamic.status.success(),
        "{}",
        String::from_utf8_lossy(&dynamic.stderr)
    );

    // pmie: a rule over a metric with instances, and an expression's value.
    let rules = dir.path().join("pmie.conf");
    std::fs::write(
        &rules,
        "ncpu = hinv.ncpu;\nloaded = some_inst kernel.all.load >= 0 -> print \"load seen\";\n",
    )
    .unwrap();
    let out = ok(
        "pmie",
        w.pcp,
        &["-c", rules.to_str().unwrap(), "-t", "0.2", "-T", "1", "-v"],
    );
    assert!(out.contains(&format!("ncpu: {ncpu}")), "{out}");
    assert!(out.contains("loaded: true"), "{out}");
}

/// A raw client: connects, reads the handshake, sends CREDS.
fn raw_client(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut hello = [0u8; 20];
    s.read_exact(&mut hello).unwrap();
    assert_eq!(&hello[..8], &[0, 0, 0, 20, 0, 0, 0x70, 0]);
    s.write_all(&pdu(0x700c, &[1, 0x0102_0000])).unwrap();
    s
}

fn pdu(ty: u32, body: &[u32]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&((12 + 4 * body.len()) as u32).to_be_bytes());
    b.extend_from_slice(&ty.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    for w in body {
        b.extend_from_slice(&w.to_be_bytes());
    }
    b
}

/// Reads until the server closes; what it sent before closing.
fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got
}

fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

#[test]
fn hostile_clients_are_refused_and_others_served() {
    let w = wasmon(&no_mmv());
    let port = w.pcp;
    let served = || ok("pminfo", port, &["-f", "hinv.ncpu"]).contains("value");
    assert!(served());
    let rss_before = rss_kb(w.daemon.child.id());

    // A 1 GB length field: ERROR PM_ERR_TOOBIG (-12444), then closed.
    let mut s = raw_client(port);
    s.write_all(&[0x40, 0, 0, 0, 0, 0, 0x70, 0x03, 0, 0, 0, 0])
        .unwrap();
    let got = until_closed(&mut s);
    assert_eq!(got, pdu(0x7000, &[(-12444i32) as u32]));

    // A million names claimed in a small PDU: PM_ERR_IPC (-12366), closed.
    let mut s = raw_client(port);
    s.write_all(&pdu(0x700e, &[0, 0, 1_000_000, 3, 0x6162_6300]))
        .unwrap();
    assert_eq!(until_closed(&mut s), pdu(0x7000, &[(-12366i32) as u32]));

    // A PDU shorter than its fields (FETCH of 2 PMIDs carrying 1): PM_ERR_IPC, closed.
    let mut s = raw_client(port);
    s.write_all(&pdu(0x7003, &[0, 0, 0, 2, 1])).unwrap();
    assert_eq!(until_closed(&mut s), pdu(0x7000, &[(-12366i32) as u32]));

    // A length below the header: closed.
    let mut s = raw_client(port);
    s.write_all(&[0, 0, 0, 4, 0, 0, 0x70, 0x03, 0, 0, 0, 0])
        .unwrap();
    assert_eq!(until_closed(&mut s), pdu(0x7000, &[(-12366i32) as u32]));

    // No CREDS first: closed without an answer.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&pdu(0x7004, &[1])).unwrap();
    assert_eq!(until_closed(&mut s).len(), 20, "only the handshake");

    // A length past the data (the rest never comes), a truncated PDU left hanging, and a
    // client that sends requests and never reads its replies: all held open while others
    // are served.
    let mut stalled = raw_client(port);
    stalled
        .write_all(&[0, 0, 0x10, 0, 0, 0, 0x70, 0x03, 0, 0, 0, 0, 1, 2])
        .unwrap();
    let mut half = raw_client(port);
    half.write_all(&[0, 0, 0]).unwrap();
    let mut deaf = raw_client(port);
    let every: Vec<u32> = [0u32, 0, 0, 1, (60 << 22) | (3 << 10)].to_vec();
    let fetch = pdu(0x7003, &every);
    deaf.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut sent = 0;
    for _ in 0..200_000 {
        if deaf.write_all(&fetch).is_err() {
            break;
        }
        sent += 1;
    }
    assert!(sent > 0);
    assert!(served(), "another client is served beside the hostile ones");
    assert!(served());

    // Memory stays flat: the hostile clients held at most a PDU each.
    let grown = rss_kb(w.daemon.child.id()).saturating_sub(rss_before);
    assert!(grown < 64 * 1024, "RSS grew by {grown} kB");
    drop((stalled, half, deaf));
}

/// Writes an MMV file with python3-pcp (PCP's own writer) and keeps it mapped until dropped;
/// the file is removed then.
struct MmvFile {
    child: std::process::Child,
    path: PathBuf,
}

const MMV_WRITER: &str = r#"
import sys
from pcp import mmv, pmapi
import cmmv
indom = mmv.mmv_indom(serial=1, shorttext="ports", helptext="ports")
indom.set_instances([mmv.mmv_instance(0, "p0"), mmv.mmv_instance(1, "p1")])
v = mmv.MemoryMappedValues(sys.argv[1], cluster=7)
v.add_indoms([indom])
def metric(name, item, ty, sem, units, indom):
    m = mmv.mmv_metric(name, item, ty, sem, units, indom, name, name)
    m.semantics = sem; m.dimension = units
    return m
v.add_metrics([
    metric("ops", 1, cmmv.MMV_TYPE_U64, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(0,0,1,0,0,0), 0),
    metric("port.bytes", 2, cmmv.MMV_TYPE_U64, cmmv.MMV_SEM_COUNTER, pmapi.pmUnits(1,0,0,0,0,0), 1),
    metric("temp", 3, cmmv.MMV_TYPE_DOUBLE, cmmv.MMV_SEM_INSTANT, pmapi.pmUnits(0,0,0,0,0,0), 0),
])
v.start()
v.lookup_add("ops", "", 41)
v.lookup_add("port.bytes", "p0", 5)
v.lookup_add("port.bytes", "p1", 7)
v.lookup_set("temp", "", 21.5)
print("ok", flush=True)
sys.stdin.read()
"#;

impl MmvFile {
    fn write(path: PathBuf) -> MmvFile {
        use std::io::BufRead;
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", MMV_WRITER])
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ok", "the MMV writer failed");
        MmvFile { child, path }
    }
}

impl Drop for MmvFile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// (metric, instance name, value) from `pminfo -f`.
fn values(text: &str) -> Vec<(String, String, f64)> {
    let mut metric = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            metric = line.trim().to_string();
        } else if let Some((head, v)) = line.trim().rsplit_once("value ") {
            let inst = head
                .split_once(" or \"")
                .and_then(|(_, n)| n.split_once("\"]"))
                .map_or(String::new(), |(n, _)| n.to_string());
            out.push((metric.clone(), inst, v.trim().parse().unwrap()));
        }
    }
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

#[test]
fn an_mmv_file_reads_the_same_through_pmcds_mmv_pmda_and_wasmons_mmv_guest() {
    let pmcd = reference_pmcd();
    let dir = PathBuf::from("/var/lib/pcp/tmp/mmv");
    std::fs::create_dir_all(&dir).unwrap();
    let name = format!("wasmontest{}", std::process::id());
    let _file = MmvFile::write(dir.join(&name));
    let w = wasmon(&dir);
    let prefix = format!("mmv.{name}");
    let fetch = |port| {
        let o = pcp_tool("pminfo", port, &["-f", &prefix]);
        o.status.success().then(|| values(&stdout(&o)))
    };
    let mut theirs = None;
    wait_until("pmcd's MMV PMDA to see the file", || {
        theirs = fetch(pmcd).filter(|v| v.len() == 4);
        theirs.is_some()
    });
    let ours = fetch(w.pcp).expect("wasmon serves the MMV file");
    // Names, instances and values agree.
    assert_eq!(ours, theirs.unwrap());
    // Semantics and units agree too (types do not yet: guests' values are doubles).
    let desc = |port| {
        let mut d: Vec<(String, String)> = desc_blocks(&ok("pminfo", port, &["-d", &prefix]))
            .into_iter()
            .map(|(name, block)| {
                let sem = block
                    .lines()
                    .find(|l| l.contains("Semantics"))
                    .unwrap_or("");
                (name, sem.to_string())
            })
            .collect();
        d.sort();
        d
    };
    assert_eq!(desc(w.pcp), desc(pmcd));
}

/// A pmcd of the test's own, with `conf` as its pmcd.conf and `pmns` as its namespace; killed
/// on drop (its pipe PMDAs see their stdin close and exit).
struct Pmcd {
    child: std::process::Child,
    port: u16,
    _run: tempfile::TempDir,
}

impl Pmcd {
    fn start(conf: &str, pmns: &str) -> Pmcd {
        ensure_pcp();
        std::fs::create_dir_all("/run/pcp").unwrap();
        let run = tempfile::tempdir().unwrap();
        std::fs::write(run.path().join("pmcd.conf"), conf).unwrap();
        std::fs::write(run.path().join("root.pmns"), pmns).unwrap();
        let port = free_port();
        let child = Command::new("/usr/lib/pcp/bin/pmcd")
            .args(["-f", "-p", &port.to_string(), "-c"])
            .arg(run.path().join("pmcd.conf"))
            .arg("-n")
            .arg(run.path().join("root.pmns"))
            .arg("-l")
            .arg(run.path().join("pmcd.log"))
            .env("PCP_RUN_DIR", run.path())
            .current_dir(run.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let p = Pmcd {
            child,
            port,
            _run: run,
        };
        wait_until(&format!("pmcd on {port}"), || {
            pcp_tool("pminfo", port, &["-f", "pmcd.numagents"])
                .status
                .success()
                || pcp_tool("pmprobe", port, &["foo.version"]).status.success()
        });
        p
    }
}

impl Drop for Pmcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const FOO_PMNS: &str =
    "root { foo }\nfoo {\n    version 44:0:1\n    count   44:*:*\n    memory  44:0:2\n}\n";

#[test]
fn wasmon_pmda_serves_the_foo_guest_under_a_real_pmcd() {
    let dir = tempfile::tempdir().unwrap();
    let foo_pmns = dir.path().join("foo.pmns");
    std::fs::write(&foo_pmns, FOO_PMNS).unwrap();
    let bar_pmns = dir.path().join("bar.pmns");
    std::fs::write(&bar_pmns, "root { bar 45:*:* }\n").unwrap();
    let wasmon = env!("CARGO_BIN_EXE_wasmon");
    // The install step the README gives: one pmcd.conf line per domain, and each of the
    // agent's top-level names a dynamic root of that domain in pmcd's namespace.
    let testing = crate::common::guest_path("testing_agent");
    let conf = format!(
        "foo\t44\tpipe\tbinary\t{wasmon} pmda --pmns {} --agent 44=foo\n\
         bar\t45\tpipe\tbinary\t{wasmon} pmda --pmns {} --agent 45={} --params 45={{\"domain\":45,\"root\":\"bar\"}}\n",
        foo_pmns.display(),
        bar_pmns.display(),
        testing.display()
    );
    let pmcd = Pmcd::start(&conf, "root {\n    foo 44:*:*\n    bar 45:*:*\n}\n");
    wait_until("the PMDAs to answer", || {
        pcp_tool("pminfo", pmcd.port, &["foo", "bar.good"])
            .status
            .success()
    });
    // Every name the agents give offline, through pmcd.
    let offline = Command::new(wasmon)
        .args(["ns", "traverse", "foo", "--pmns"])
        .arg(&foo_pmns)
        .args(["--agent", "44=foo"])
        .output()
        .unwrap();
    let expected: Vec<String> = stdout(&offline).lines().map(str::to_string).collect();
    let listed: Vec<String> = ok("pminfo", pmcd.port, &["foo"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(listed, expected);
    assert!(listed.iter().any(|n| n == "foo.count.ops"), "{listed:?}");
    assert_eq!(
        ok("pminfo", pmcd.port, &["-m", "foo.count.ops"]).trim(),
        "foo.count.ops PMID: 44.1.0"
    );
    let m = ok("pminfo", pmcd.port, &["-M", "foo.count.ops"]);
    assert!(m.starts_with("foo.count.ops PMID: 44.1.0 = "), "{m}");
    // Descriptors, help and values come from the guest through pmcd.
    let d = ok("pminfo", pmcd.port, &["-d", "-t", "-f", "foo.count.ops"]);
    assert!(
        d.contains("Semantics: counter") && d.contains("    value "),
        "{d}"
    );
    assert!(d.contains("foo.count.ops ["), "{d}");
    let v = ok("pmval", pmcd.port, &["-s", "2", "-t", "0.2", "foo.memory"]);
    assert!(v.contains("samples:   2"), "{v}");
    let o = pcp_tool("pminfo", pmcd.port, &["-m", "foo.count.nosuch"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("Unknown metric name"));

    // A guest that traps (the testing agent traps on any name with "trap" in it): that call
    // fails, the PMDA and pmcd go on, the guest's good metric and the other PMDA answer.
    let good = ok("pminfo", pmcd.port, &["-f", "bar.good"]);
    assert!(good.contains("value 42"), "{good}");
    // (Three failed guest calls: five in a row would quarantine the guest for a second.)
    {
        // pmLookupName: pmcd passes the PMDA's answer on.
        let o = pcp_tool("pmval", pmcd.port, &["-s", "1", "bar.trap"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("No PMCD agent for domain of request"), "{err}");
        // A traverse: pmcd makes an agent's failure "unknown name".
        assert!(
            !pcp_tool("pminfo", pmcd.port, &["-m", "bar.trap"])
                .status
                .success()
        );
    }
    let good = ok("pminfo", pmcd.port, &["-f", "bar.good"]);
    assert!(good.contains("value 42"), "{good}");
    assert!(ok("pminfo", pmcd.port, &["-f", "foo.count.ops"]).contains("value"));
}

#[test]
fn a_port_held_by_pmcd_is_logged_once_and_the_daemon_runs_without_it() {
    let pmcd = reference_pmcd();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("wasmon.toml");
    std::fs::write(
        &config,
        format!(
            "[daemon]\ndata-dir = \"data\"\n[procfs]\nenabled = false\n[[agent]]\nname = \"linux\"\nnative = \"linux\"\n[pcp]\nlisten = \"127.0.0.1:{pmcd}\"\n"
        ),
    )
    .unwrap();
    let d = DaemonProcess::start(&config);
    // It serves its HTTP API (start() waited for it), and pmcd still owns the port.
    assert!(d.get("/api/healthcheck").unwrap().status().is_success());
    let version = ok("pminfo", pmcd, &["-f", "pmcd.build"]);
    assert!(!version.contains("wasmon"), "{version}");
    let log = d.stderr.lock().unwrap().clone();
    assert_eq!(log.matches("PCP port in use").count(), 1, "{log}");
}

#[test]
fn a_guest_replaced_under_pmcd_answers_the_next_request() {
    let dir = tempfile::tempdir().unwrap();
    let foo_pmns = dir.path().join("foo.pmns");
    std::fs::write(&foo_pmns, FOO_PMNS).unwrap();
    let guest = dir.path().join("agent.wasm");
    std::fs::write(&guest, crate::common::guest_bytes("foo")).unwrap();
    let wasmon = env!("CARGO_BIN_EXE_wasmon");
    let params = r#"44={"domain":44,"root":"foo.count"}"#;
    // The replacement compiled once beforehand (the compile cache is shared), so the reload
    // stays well inside pmcd's 5 s per request.
    let testing = crate::common::guest_path("testing_agent");
    let warm = Command::new(wasmon)
        .args(["ns", "lookup", "foo.count.good", "--pmns"])
        .arg(&foo_pmns)
        .arg("--agent")
        .arg(format!("44={}", testing.display()))
        .args(["--params", params])
        .output()
        .unwrap();
    assert!(
        warm.status.success(),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );
    let conf = format!(
        "foo\t44\tpipe\tbinary\t{wasmon} pmda --pmns {} --agent 44={} --params {params}\n",
        foo_pmns.display(),
        guest.display()
    );
    let pmcd = Pmcd::start(&conf, "root {\n    foo 44:*:*\n}\n");
    wait_until("the PMDA to answer", || {
        pcp_tool("pminfo", pmcd.port, &["foo.count.ops"])
            .status
            .success()
    });
    assert!(ok("pminfo", pmcd.port, &["-f", "foo.count.ops"]).contains("value"));
    crate::common::replace_file(&guest, &std::fs::read(&testing).unwrap());
    // The next request is answered by the new guest.
    let good = ok("pminfo", pmcd.port, &["-f", "foo.count.good"]);
    assert!(good.contains("value 42"), "{good}");
    assert!(
        !pcp_tool("pminfo", pmcd.port, &["-m", "foo.count.ops"])
            .status
            .success()
    );
}
