//! What a guest's `Store` holds: its WASI context (built from its grants), the read-only
//! grants' directories for the `files` interface, its resource limits, and the per-call
//! accounting behind the `host` interface.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings::transformer::wasmon::collector::host;
use super::bindings::types::{self, Level};
use super::limits::Limiter;
use super::limits::MAX_HANDLES;
use super::log::{GuestLog, GuestOutput};
use super::stats::GuestStats;

/// A directory whose files a guest may map read-only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MappedDir {
    /// The name the guest uses for it.
    pub name: String,
    /// The directory on the host.
    pub host: PathBuf,
}

/// Capabilities a guest gets beyond computing: none unless its config grants them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Grants {
    /// Host directories the guest may open, each at a path of the guest's choosing.
    #[serde(default)]
    pub dirs: Vec<DirGrant>,
    /// Socket addresses (`ip:port`) the guest may connect or bind to over TCP/UDP.
    #[serde(default)]
    pub network: Vec<SocketAddr>,
    /// Environment variables the guest sees.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Directories whose files an agent may map read-only (the `mapped` interface).
    #[serde(default)]
    pub mapped: Vec<MappedDir>,
}

/// One preopened directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DirGrant {
    /// The directory on the host.
    pub host: PathBuf,
    /// Where the guest sees it (e.g. `/data`).
    pub guest: String,
    /// Read-only unless this is false.
    #[serde(default = "yes")]
    pub read_only: bool,
}

fn yes() -> bool {
    true
}

impl Grants {
    fn wasi(&self, log: &Arc<GuestLog>) -> Result<WasiCtx> {
        let mut b = WasiCtxBuilder::new();
        // What a guest prints (panics included) goes to its log, attributed and capped.
        b.stdout(GuestOutput::stdout(log));
        b.stderr(GuestOutput::stderr(log));
        for d in &self.dirs {
            let perms = if d.read_only {
                FsPerms::ReadOnly
            } else {
                FsPerms::ReadWrite
            };
            b.preopened_dir(&d.host, &d.guest, perms)
                .map_err(anyhow::Error::from)
                .with_context(|| format!("granting directory {}", d.host.display()))?;
        }
        for (k, v) in &self.env {
            b.env(k, v);
        }
        if !self.network.is_empty() {
            let allowed: Arc<[SocketAddr]> = self.network.clone().into();
            b.socket_addr_check(move |addr, _use| {
                let ok = allowed.contains(&addr);
                Box::pin(async move { ok })
            });
            b.allow_tcp(true).allow_udp(true);
        } else {
            b.allow_tcp(false).allow_udp(false);
        }
        b.allow_ip_name_lookup(false);
        Ok(b.build())
    }
}

/// One read-only grant for the `files` interface: where the guest sees it, as path
/// components, and its directory.
pub(crate) struct Root {
    pub(super) guest: Vec<String>,
    pub(super) dir: OwnedFd,
}

/// The roots of `grants`' read-only directories, each opened once per instance (`O_PATH`: a
/// handle to walk from, not readable itself).
pub(crate) fn roots(grants: &[DirGrant]) -> Result<Vec<Root>> {
    grants
        .iter()
        .filter(|g| g.read_only)
        .map(|g| {
            let dir = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                .open(&g.host)
                .with_context(|| format!("granting directory {}", g.host.display()))?;
            Ok(Root {
                guest: components(&g.guest).map(str::to_string).collect(),
                dir: dir.into(),
            })
        })
        .collect()
}

/// A path's components, without empty ones and `.` (`/sys//class/./net` is `sys class net`).
pub(super) fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|c| !c.is_empty() && *c != ".")
}

/// The data of one guest instance's `Store`.
pub struct State {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) grants: Grants,
    pub(crate) limiter: Limiter,
    log: Arc<GuestLog>,
    /// Files open through the `mapped` interface.
    pub(crate) mapped_open: usize,
    /// The deadline of each call into this guest, and the epoch ticks it is measured in.
    pub(crate) deadline: std::time::Duration,
    pub(crate) clock: Arc<super::clock::Clock>,
    /// The string table shared with this instance (transformers).
    pub(crate) strings: super::strings::StringTable,
    /// The read-only directory grants' roots, for the `files` interface.
    pub(crate) read_roots: Vec<Root>,
}

impl State {
    pub(crate) fn new(
        guest: Arc<str>,
        grants: &Grants,
        limiter: Limiter,
        (deadline, clock): (std::time::Duration, Arc<super::clock::Clock>),
        stats: Arc<GuestStats>,
    ) -> Result<State> {
        let log = GuestLog::new(guest, stats);
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HANDLES);
        Ok(State {
            wasi: grants.wasi(&log)?,
            table,
            grants: grants.clone(),
            limiter,
            log,
            mapped_open: 0,
            deadline,
            clock,
            strings: Default::default(),
            read_roots: roots(&grants.dirs)?,
        })
    }

    /// A call starts: per-call caps start afresh.
    pub(crate) fn begin_call(&mut self) {
        self.log.begin_call();
        self.limiter.refused = false;
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for State {}

impl host::Host for State {
    fn log(&mut self, level: Level, message: String) {
        self.log.line(level, &message);
    }
}
