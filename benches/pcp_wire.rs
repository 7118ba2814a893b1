//! A PCP client for the benches (`pcp`, `collect`): the handshake and FETCH, a reference pmcd
//! of Debian's pcp on a port of its own, and PMIDs read with `pminfo -m`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A PCP client that knows the handshake and FETCH, nothing else.
pub struct Client(pub TcpStream);

impl Client {
    pub fn connect(port: u16) -> Client {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        let mut hello = [0u8; 20];
        s.read_exact(&mut hello).unwrap();
        s.write_all(&pdu(0x700c, &[1, 0x0102_0000])).unwrap();
        // pmcd wants a profile before a context's first fetch (PM_ERR_NOPROFILE otherwise):
        // context 0, every instance included. It gets no reply.
        s.write_all(&pdu(0x7002, &[0, 0, 0, 0])).unwrap();
        Client(s)
    }

    /// One FETCH; the reply's length. pmcd may first send an ERROR with a positive code (a
    /// state change: an agent added or restarted), which PCP's clients skip, as this does.
    pub fn fetch(&mut self, req: &[u8], buf: &mut Vec<u8>) -> usize {
        self.0.write_all(req).unwrap();
        loop {
            let mut head = [0u8; 12];
            self.0.read_exact(&mut head).unwrap();
            let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
            let ty = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
            buf.resize(len - 12, 0);
            self.0.read_exact(buf).unwrap();
            let code = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            if ty == 0x7000 && code > 0 {
                continue;
            }
            assert_eq!(ty, 0x7001, "a RESULT (error {code})");
            return len;
        }
    }
}

pub fn pdu(ty: u32, body: &[u32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(12 + 4 * body.len());
    b.extend_from_slice(&((12 + 4 * body.len()) as u32).to_be_bytes());
    b.extend_from_slice(&ty.to_be_bytes());
    b.extend_from_slice(&0u32.to_be_bytes());
    for w in body {
        b.extend_from_slice(&w.to_be_bytes());
    }
    b
}

/// The reference pmcd, if Debian's pcp is installed; killed on drop.
pub struct Pmcd {
    pub child: std::process::Child,
    pub port: u16,
    _run: tempfile::TempDir,
}

impl Drop for Pmcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[allow(dead_code)] // `collect` starts its own pmcd.conf
pub fn reference_pmcd() -> Option<Pmcd> {
    pmcd_with(None)
}

/// pmcd on a free port; `conf`: its pmcd.conf instead of the installed one.
#[allow(dead_code)] // not every bench that includes this file starts its own pmcd.conf
pub fn pmcd_with(conf: Option<&str>) -> Option<Pmcd> {
    pmcd_env(conf, &[])
}

/// [`pmcd_with`], with `env` added to pmcd's environment (its PMDAs inherit it: e.g.
/// pmdalinux's `LINUX_STATSPATH`, the root it reads /proc and /sys under).
#[allow(dead_code)] // only `collect` sets PMDA variables
pub fn pmcd_env(conf: Option<&str>, env: &[(&str, &str)]) -> Option<Pmcd> {
    let bin = std::path::Path::new("/usr/lib/pcp/bin/pmcd");
    if !bin.exists() || !std::path::Path::new("/var/lib/pcp/pmns/root").exists() {
        eprintln!("pcp: no reference pmcd (Debian's pcp is not installed): wasmon only");
        return None;
    }
    let _ = std::fs::create_dir_all("/run/pcp");
    let run = tempfile::tempdir().unwrap();
    let mut extra: Vec<std::path::PathBuf> = Vec::new();
    if let Some(text) = conf {
        let path = run.path().join("pmcd.conf");
        std::fs::write(&path, text).unwrap();
        extra = vec!["-c".into(), path];
    }
    let port = free_port();
    let child = Command::new(bin)
        .args(["-f", "-p", &port.to_string(), "-l"])
        .arg(run.path().join("pmcd.log"))
        .args(&extra)
        .env("PCP_RUN_DIR", run.path())
        // Start its PMDAs as its own children (not through an already running pmdaroot of
        // another pmcd), so their CPU counts as this pmcd's.
        .env("PMCD_ROOT_AGENT", "0")
        .envs(env.iter().copied())
        .current_dir(run.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let p = Pmcd {
        child,
        port,
        _run: run,
    };
    for _ in 0..600 {
        if pminfo(port, &["pmcd.version"]) {
            return Some(p);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("pcp: the reference pmcd did not start: wasmon only");
    None
}

pub fn pminfo(port: u16, args: &[&str]) -> bool {
    Command::new("pminfo")
        .args(["-h", &format!("localhost:{port}")])
        .args(args)
        .env("PCP_DERIVED_CONFIG", "")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Every PMID below `prefix`, as `pminfo -m` prints them (`name PMID: D.C.I`).
pub fn pmids(port: u16, prefix: &str) -> Vec<u32> {
    let out = Command::new("pminfo")
        .args(["-h", &format!("localhost:{port}"), "-m", prefix])
        .env("PCP_DERIVED_CONFIG", "")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split("PMID: ").nth(1))
        .map(|p| {
            let mut f = p.trim().split('.').map(|x| x.parse::<u32>().unwrap());
            let (d, c, i) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
            (d << 22) | (c << 10) | i
        })
        .collect()
}
