//! Helpers shared by the tests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use wasmon::host::{
    DirGrant, Grants, GuestConfig, Image, Runtime, TransformerInstance, TransformerWorld,
};
use wasmon::sample::{Kind, Metadata, Sample};

/// One runtime (engine, epoch ticker) for the whole test binary, with no disk cache.
pub fn runtime() -> Arc<Runtime> {
    static RT: OnceLock<Arc<Runtime>> = OnceLock::new();
    RT.get_or_init(|| Runtime::new(None).unwrap()).clone()
}

/// The path of a guest compiled by the build (`testing`, `arithmetic`, ...).
/// A built guest: in `$WASMON_TEST_GUESTS` when set (a worktree's own guests, since every
/// worktree's build rewrites the shared target's copies), else where the build put them.
pub fn guest_path(name: &str) -> PathBuf {
    let dir = std::env::var_os("WASMON_TEST_GUESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(wasmon::BUILT_GUESTS_DIR));
    dir.join(format!("{name}.wasm"))
}

pub fn guest_bytes(name: &str) -> Vec<u8> {
    std::fs::read(guest_path(name)).unwrap_or_else(|e| panic!("guest {name}: {e}"))
}

/// Loads a built guest with `cfg` (whose params are JSON).
pub fn load_with(name: &str, cfg: GuestConfig) -> anyhow::Result<TransformerInstance> {
    let rt = runtime();
    let compiled = rt.compile(&guest_bytes(name), name)?;
    Image::<TransformerWorld>::load(&rt, &compiled, cfg)
}

pub fn load(name: &str, params: serde_json::Value) -> anyhow::Result<TransformerInstance> {
    load_with(name, GuestConfig::new(name, &params.to_string()))
}

/// A sample; `ts` in seconds.
pub fn sample(name: &str, resource: &str, value: f64, ts: f64) -> Sample {
    let mut s = Sample::new(name, resource, value, (ts * 1e9) as i64);
    s.unit = "".into();
    s
}

pub fn with_kind(mut s: Sample, kind: Kind) -> Sample {
    s.kind = kind;
    s
}

pub fn with_meta(mut s: Sample, pairs: &[(&str, &str)]) -> Sample {
    s.metadata = Metadata::new(
        pairs
            .iter()
            .map(|(k, v)| (Arc::from(*k), Arc::from(*v)))
            .collect(),
    );
    s
}

/// Grants of the directories `(host, guest)`, each read-only, and nothing else.
pub fn read_only_grants(dirs: &[(&Path, &str)]) -> Grants {
    Grants {
        dirs: dirs
            .iter()
            .map(|(host, guest)| DirGrant {
                host: host.to_path_buf(),
                guest: guest.to_string(),
                read_only: true,
            })
            .collect(),
        ..Default::default()
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The `[daemon]` table most tests' configs open with: state under the config's `data`.
/// What follows it may add to the table (`guests-dir = ...`) or open others.
pub const DAEMON: &str = "[daemon]\ndata-dir = \"data\"\n";

/// `[procfs] enabled = false`: a daemon that reads no processes (tests of other parts).
pub const NO_PROCFS: &str = "[procfs]\nenabled = false\n";

/// Writes `DIR/wasmon.toml`: [`DAEMON`], then `toml` (what the test is about).
pub fn config_file(dir: &Path, toml: &str) -> PathBuf {
    let path = dir.join("wasmon.toml");
    std::fs::write(&path, format!("{DAEMON}{toml}")).unwrap();
    path
}

/// `wasmon run --config CONFIG`, which must fail: its stderr (the reason, for the test to
/// check).
pub fn refused_start(config: &Path) -> String {
    output_err(
        Command::new(crate::common::wasmon_bin())
            .args(["run", "--config"])
            .arg(config),
    )
}

/// Runs `cmd`, which must succeed: its output.
pub fn output_ok(cmd: &mut Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `cmd`, which must fail: its stderr (the reason, for the test to check).
pub fn output_err(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(!out.status.success(), "{cmd:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Spawns `cmd` with stdin, stdout and stderr piped (for the test to feed and read).
pub fn spawn_piped(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"))
}

/// Makes `cmd`'s process die with the thread that spawns it (the test's, or the test
/// binary's), even when a failed test never stops it: a server left running would load the
/// machine for the rest of the suite.
pub fn dies_with_test(cmd: &mut Command) -> &mut Command {
    // SAFETY: prctl is async-signal-safe and touches nothing of the parent's.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd
}

/// Debian's Prometheus on `CONFIG`, its TSDB in `data`, serving on `port`; stdout discarded,
/// dying with the test ([`dies_with_test`]).
pub fn prometheus_command(config: &Path, data: &Path, port: u16) -> Command {
    let mut cmd = Command::new("/usr/bin/prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null());
    dies_with_test(&mut cmd);
    cmd
}

/// A `wasmon run` child process with its stdout lines collected.
pub struct DaemonProcess {
    pub child: std::process::Child,
    pub port: u16,
    pub stdout: crossbeam_channel::Receiver<String>,
    pub stderr: Arc<std::sync::Mutex<String>>,
}

impl DaemonProcess {
    /// Starts `wasmon run --config CONFIG --listen 127.0.0.1:PORT` and waits until it serves.
    pub fn start(config: &std::path::Path) -> DaemonProcess {
        Self::start_with(config, |_| {})
    }

    /// Writes `DIR/wasmon.toml` ([`config_file`]: [`DAEMON`] and `toml`) and starts on it.
    pub fn with_config(dir: &Path, toml: &str) -> DaemonProcess {
        Self::start(&config_file(dir, toml))
    }

    /// [`DaemonProcess::start`] with more arguments or environment set by `adjust`.
    pub fn start_with(
        config: &std::path::Path,
        adjust: impl FnOnce(&mut std::process::Command),
    ) -> DaemonProcess {
        Self::start_at(config, free_port(), adjust)
    }

    /// [`DaemonProcess::start_with`] on a given port (a daemon restarted where its clients
    /// expect it).
    pub fn start_at(
        config: &std::path::Path,
        port: u16,
        adjust: impl FnOnce(&mut std::process::Command),
    ) -> DaemonProcess {
        Self::start_probing(config, port, adjust, |d| d.get("/api/healthcheck").is_ok())
    }

    /// [`DaemonProcess::start_at`] that waits until `serving` holds instead of until plain
    /// HTTP answers (a daemon serving HTTPS, perhaps only to clients with a certificate).
    pub fn start_probing(
        config: &std::path::Path,
        port: u16,
        adjust: impl FnOnce(&mut std::process::Command),
        serving: impl Fn(&DaemonProcess) -> bool,
    ) -> DaemonProcess {
        use std::io::BufRead;
        let mut cmd = std::process::Command::new(crate::common::wasmon_bin());
        cmd.args(["run", "--config"])
            .arg(config)
            .args(["--listen", &format!("127.0.0.1:{port}")]);
        adjust(&mut cmd);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        dies_with_test(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let stderr = Arc::new(std::sync::Mutex::new(String::new()));
        let err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&line);
                sink.lock().unwrap().push('\n');
            }
        });
        let mut d = DaemonProcess {
            child,
            port,
            stdout: rx,
            stderr,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !serving(&d) {
            if let Ok(Some(status)) = d.child.try_wait() {
                panic!(
                    "wasmon exited with {status} before serving:\n{}",
                    d.stderr.lock().unwrap()
                );
            }
            assert!(
                std::time::Instant::now() < deadline,
                "wasmon did not serve in time:\n{}",
                d.stderr.lock().unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        d
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn get(&self, path: &str) -> reqwest::Result<reqwest::blocking::Response> {
        reqwest::blocking::get(self.url(path))
    }

    pub fn post(&self, path: &str, body: &str) -> reqwest::blocking::Response {
        reqwest::blocking::Client::new()
            .post(self.url(path))
            .body(body.to_string())
            .send()
            .unwrap()
    }

    /// `POST /api/admin/reload`, which must succeed: what the reload did.
    pub fn reload(&self) -> serde_json::Value {
        // A reload answers once its guests are compiled: an 18 MB Python component takes
        // more than the client's default 30 s on a loaded 2-core machine.
        let r = reqwest::blocking::Client::builder()
            .timeout(std::time::Duration::from_secs(300))
            .build()
            .unwrap()
            .post(self.url("/api/admin/reload"))
            .send()
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().unwrap()
    }

    pub fn signal(&self, sig: &str) {
        let ok = std::process::Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig} failed");
    }

    /// The next stdout line, parsed as JSON.
    pub fn next_sample(&self) -> serde_json::Value {
        let line = self
            .stdout
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| {
                panic!(
                    "no output from wasmon; stderr:\n{}",
                    self.stderr.lock().unwrap()
                )
            });
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    /// Polls `check` for up to 30 s.
    pub fn wait_for(&self, what: &str, mut check: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !check() {
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}; stderr:\n{}",
                self.stderr.lock().unwrap()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// `POST /api/pipelines/p/samples` of samples `seq` numbered `numbers` (the number is the value,
/// the resource `r{number % resources}`): a load whose samples a test counts back.
pub fn post_seq(
    client: &reqwest::blocking::Client,
    d: &DaemonProcess,
    numbers: std::ops::Range<u64>,
    resources: u64,
) -> reqwest::blocking::Response {
    let body: String = numbers
        .map(|i| {
            format!(
                "{{\"name\":\"seq\",\"resource\":\"r{}\",\"value\":{i}}}\n",
                i % resources
            )
        })
        .collect();
    client
        .post(d.url("/api/pipelines/p/samples"))
        .body(body)
        .send()
        .unwrap()
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Replaces a file atomically (as a careful deploy would: write, then rename).
pub fn replace_file(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Installs a Debian package the tests need (CI machines start without it), unless `present`.
pub fn ensure_debian_package(package: &str, present: impl Fn() -> bool) {
    if present() {
        return;
    }
    let ok = Command::new("apt-get")
        .args(apt_install(package))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok && present(),
        "this test needs the Debian package {package} (`apt-get install -y {package}` failed)"
    );
}

/// `apt-get`'s arguments to install `package`. Tests run in parallel and several install
/// packages: they wait for apt's lock rather than fail on it.
fn apt_install(package: &str) -> [&str; 6] {
    [
        "-o",
        "DPkg::Lock::Timeout=600",
        "install",
        "-y",
        "-q",
        package,
    ]
}

/// [`ensure_debian_package`] for a package whose maintainer scripts call `systemctl` (to
/// enable or start its service) and fail where systemd is not PID 1 (containers, CI): that
/// leaves dpkg half-configured and breaks every later apt-get on the machine. A `systemctl`
/// that does nothing and succeeds goes first on PATH for the install; the service is never
/// started (the test runs the binary itself).
pub fn ensure_debian_package_without_systemd(package: &str, present: impl Fn() -> bool) {
    if present() {
        return;
    }
    let shims = tempfile::tempdir().unwrap();
    let shim = shims.path().join("systemctl");
    std::fs::write(&shim, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        shims.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |args: &[&str]| {
        let (cmd, args) = args.split_first().unwrap();
        Command::new(cmd)
            .args(args)
            .env("PATH", &path)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let install: Vec<&str> = std::iter::once("apt-get")
        .chain(apt_install(package))
        .collect();
    // A dpkg left half-configured by an earlier install without the shim refuses every
    // install until it is configured: finish that first, then try again.
    let ok = run(&install) || (run(&["dpkg", "--configure", "-a"]) && run(&install));
    assert!(
        ok && present(),
        "this test needs the Debian package {package} (`apt-get install -y {package}` failed)"
    );
}

/// nats-server with JetStream, restartable on the same port and store.
pub struct NatsServer {
    child: Child,
    port: u16,
    store: PathBuf,
    args: Vec<String>,
}

impl NatsServer {
    pub fn start(port: u16, store: &Path) -> NatsServer {
        Self::start_with(port, store, &[])
    }

    /// [`NatsServer::start`] with more command-line options (`--tls ...`).
    pub fn start_with(port: u16, store: &Path, args: &[String]) -> NatsServer {
        ensure_debian_package("nats-server", || {
            Path::new("/usr/sbin/nats-server").exists()
        });
        // Its log goes beside its store (appended across restarts) and is quoted if it fails.
        std::fs::create_dir_all(store).unwrap();
        let log_path = store.join("nats-server.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap();
        let mut child = Command::new("/usr/sbin/nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store)
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        // Generous: a loaded 2-core CI machine restoring a JetStream store is slow to listen.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                panic!(
                    "nats-server on port {port} exited at start ({status}); its log ends: {tail:?}"
                );
            }
            assert!(
                Instant::now() < deadline,
                "nats-server on port {port} did not listen within 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        NatsServer {
            child,
            port,
            store: store.to_path_buf(),
            args: args.to_vec(),
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn restart(&mut self, down: Duration) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(down);
        *self = NatsServer::start_with(self.port, &self.store.clone(), &self.args.clone());
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A core NATS subscription to `subject` at `url`, in place before it returns, and its client
/// (the subscription ends with it). Both must drop within `rt` (they spawn an unsubscribe).
pub fn nats_subscribe(
    rt: &tokio::runtime::Runtime,
    url: &str,
    subject: &str,
) -> (async_nats::Client, async_nats::Subscriber) {
    rt.block_on(async {
        let c = async_nats::connect(url).await.unwrap();
        let sub = c.subscribe(subject.to_string()).await.unwrap();
        c.flush().await.unwrap();
        (c, sub)
    })
}

/// The daemon binary under test: `WASMON_TEST_BIN` when set (several worktrees sharing one
/// CARGO_TARGET_DIR overwrite each other's `target/debug/wasmon`: copy yours and point
/// here), else the one cargo built for this test.
pub fn wasmon_bin() -> String {
    std::env::var("WASMON_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_wasmon").to_string())
}
