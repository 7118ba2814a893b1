//! Test support shared by the parts' unit tests: a real `nats-server` (Debian's package,
//! installed when missing) on a free loopback port, stopped when dropped; a task stopped
//! through its cancellation token; an in-memory store for samples a minute apart.

use std::process::{Child, Command, Stdio};

pub struct NatsServer {
    child: Child,
    pub address: String,
}

fn binary() -> Option<&'static str> {
    ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

/// Cancels `token` and waits (10 s at most) for `task` to end without error.
pub async fn stop<E: std::fmt::Debug>(
    token: &tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<Result<(), E>>,
) {
    token.cancel();
    tokio::time::timeout(std::time::Duration::from_secs(10), task)
        .await
        .expect("the task ends once cancelled")
        .expect("the task did not panic")
        .expect("the task ends without error");
}

/// An in-memory store whose unnamed metrics take a 60 s step: the tests' samples are a minute
/// apart.
pub fn minute_store() -> crate::store::Store {
    crate::store::Store::new(crate::store::StoreConfig {
        default_frequency: 60,
        ..Default::default()
    })
}

/// A loopback port nothing listens on (at the time of asking).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl NatsServer {
    pub fn start() -> NatsServer {
        if binary().is_none() {
            apt_install("nats-server");
        }
        let bin = binary().expect(
            "these tests need Debian's nats-server, and `apt-get install -y nats-server` failed",
        );
        let port = free_port();
        let child = Command::new(bin)
            .args(["-p", &port.to_string(), "-a", "127.0.0.1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting nats-server");
        NatsServer {
            child,
            address: format!("nats://127.0.0.1:{port}"),
        }
    }
}

impl NatsServer {
    /// A client, once the server accepts connections.
    /// The server's process id (for SIGSTOP: a hung server).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub async fn client(&self) -> async_nats::Client {
        for _ in 0..200 {
            if let Ok(c) = async_nats::connect(self.address.as_str()).await {
                return c;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("nats-server at {} did not start", self.address);
    }
}

/// `apt-get install`, refreshing the package lists first if the install fails (a fresh
/// machine has none).
pub fn apt_install(package: &str) {
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", package])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !install() {
        let _ = Command::new("apt-get")
            .args(["update", "-q"])
            .stdout(Stdio::null())
            .status();
        install();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
