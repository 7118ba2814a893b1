//! One NATS connection config for every part that talks to NATS (the line-protocol ingest
//! `ingest::nats`, the notifier's sink `notify::nats`, the fabric agents, the fleet and the
//! forwarding sinks): the servers (one URL, or a cluster's seeds as a TOML list or a
//! comma-separated string), user and password, token, credentials file, TLS CA and client
//! certificate, under the same field names in every section; and the JetStream streams
//! wasmon creates, with their replicas (`jetstream`: streams, buckets, reads from a stream's
//! leader). Owns nothing but these steps.
//!
//! The client is handed every seed: it connects to whichever answers first (in random order,
//! so a fleet spreads over the cluster), learns the cluster's other servers from it, and fails
//! over to any of them when its server goes away.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::ServerAddr;
use serde::Deserialize;

pub mod jetstream;
pub mod placement;

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connecting to {address}: {source}")]
    Connect {
        address: String,
        source: async_nats::ConnectError,
    },
    #[error("reading credentials {path}: {source}")]
    Credentials {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{field}: {problem}")]
    File {
        field: &'static str,
        problem: String,
    },
}

/// A connection attempt that takes longer is a failure (retried by whoever asked).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the client pings its server: after three unanswered pings it drops the
/// connection and fails over, so a hung server (stopped, not dead: its sockets stay open) is
/// left within about 3 s. One ping and pong a second per connection is ~16,000 a second per
/// server for 48,000 nodes on a 3-server cluster: noise beside their samples.
pub const PING_INTERVAL: Duration = Duration::from_secs(1);

/// How often [`hung`] asks the connected server for a sign of life. The client's own pings
/// cannot tell: async-nats 0.42 restarts its ping timer at every command the client sends, so
/// a client that publishes or fetches more often than its ping interval (a central consumer
/// retrying a fetch every 100 ms-1 s, a sink re-publishing every 250 ms) never pings and
/// never notices a hung server.
pub const PROBE_EVERY: Duration = Duration::from_millis(500);
/// How long a probe may go unanswered: a live server answers it itself within milliseconds
/// ("no responders"), whatever the cluster is doing; 1 s leaves room for a loaded machine.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Unanswered probes in a row that make the server hung: one lost to a pause is not enough,
/// two bound the detection to ~2.5 s (two timeouts and a pause).
pub const PROBES_FAILED: u32 = 2;
/// How long a new connection's server may leave the probes unanswered before it is given up:
/// the client may still be connecting (every server down), and a connection made anew every
/// few seconds would leave its predecessors connecting in the background.
pub const FIRST_ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// The subject of the probe: nobody subscribes to it, so the client's own server answers "no
/// responders" (its interest table includes the routes'), without asking the cluster.
const PROBE_SUBJECT: &str = "_wasmon.probe.none";

/// JetStream keeps at most 5 replicas of a stream (an odd number survives the loss of a
/// minority of the cluster's servers).
pub const MAX_REPLICAS: usize = 5;

/// Seeds one field may list: a cluster has 3 or 5 servers, a super-cluster a few more seeds;
/// a list longer than this is a mistake (or hostile), not a topology.
pub const MAX_SERVERS: usize = 64;

/// Credentials and TLS of a NATS connection: the same fields in every section that talks to
/// NATS (declared into each by [`section!`]) and the same flags on `wasmon fleet`.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct Auth {
    /// NATS user name (with the password).
    #[arg(long, requires = "password")]
    pub username: Option<String>,
    #[arg(long, requires = "username")]
    pub password: Option<String>,
    /// A file holding a NATS token (an `http` sink's: a bearer token).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// A NATS credentials file (JWT + nkey seed).
    #[arg(long)]
    pub creds_file: Option<PathBuf>,
    /// PEM CA(s) the server's certificate must chain to, instead of the system's roots.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// PEM client certificate and its key, for servers that require one.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// No credentials, no TLS files.
static NO_AUTH: Auth = Auth {
    username: None,
    password: None,
    token_file: None,
    creds_file: None,
    tls_ca: None,
    tls_cert: None,
    tls_key: None,
};

impl Auth {
    /// The files it names, under their field names.
    pub fn files(&self) -> [(&'static str, Option<&Path>); 5] {
        [
            ("token-file", self.token_file.as_deref()),
            ("creds-file", self.creds_file.as_deref()),
            ("tls-ca", self.tls_ca.as_deref()),
            ("tls-cert", self.tls_cert.as_deref()),
            ("tls-key", self.tls_key.as_deref()),
        ]
    }

    /// User and password go together, so do the client certificate and its key; with `base`
    /// (the directory relative file names start from), the files exist. Errors name the field.
    pub fn check(&self, base: Option<&Path>) -> Result<(), (&'static str, String)> {
        if self.username.is_some() != self.password.is_some() {
            return Err(("username", "username and password go together".into()));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(("tls-cert", "tls-cert and tls-key go together".into()));
        }
        if let Some(base) = base {
            for (field, file) in self.files() {
                if let Some(f) = file {
                    let path = base.join(f);
                    std::fs::metadata(&path)
                        .map_err(|e| (field, format!("{}: {e}", path.display())))?;
                }
            }
        }
        Ok(())
    }
}

/// Declares a config section that talks to NATS (see [`crate::flat::section!`]): the struct
/// as written plus `auth` ([`Auth`]), whose keys the config file spells flat beside the
/// section's own (`username = ...`, `tls-ca = ...`), and `connection()`, the [`Connection`]
/// of the servers field named in the header.
macro_rules! section {
    (
        $(#[doc = $doc:literal])*
        #[derive($($derive:path),* $(,)?)]
        #[serde($($container:tt)*)]
        pub struct $name:ident as $flat:ident (servers: $servers:ident, $url_field:literal) {
            $($body:tt)*
        }
    ) => {
        $crate::flat::section! {
            group auth: $crate::nats::Auth {
                #[serde(default, skip_serializing_if = "Option::is_none")]
                username: Option<String>,
                #[serde(default, skip_serializing_if = "Option::is_none")]
                password: Option<String>,
                #[serde(default, skip_serializing_if = "Option::is_none")]
                token_file: Option<std::path::PathBuf>,
                // `creds-file-path`: cc-metric-store's spelling.
                #[serde(default, alias = "creds-file-path", skip_serializing_if = "Option::is_none")]
                creds_file: Option<std::path::PathBuf>,
                #[serde(default, skip_serializing_if = "Option::is_none")]
                tls_ca: Option<std::path::PathBuf>,
                #[serde(default, skip_serializing_if = "Option::is_none")]
                tls_cert: Option<std::path::PathBuf>,
                #[serde(default, skip_serializing_if = "Option::is_none")]
                tls_key: Option<std::path::PathBuf>,
            }
            $(#[doc = $doc])*
            #[derive($($derive),*)]
            #[serde($($container)*)]
            pub struct $name as $flat {
                $($body)*
            }
        }

        impl $name {
            /// The NATS connection this section describes.
            pub fn connection(&self) -> $crate::nats::Connection<'_> {
                $crate::nats::Connection {
                    url_field: $url_field,
                    servers: &self.$servers,
                    auth: &self.auth,
                }
            }
        }
    };
}
pub(crate) use section;

/// One section's NATS connection: its servers and [`Auth`] (`url_field` is the section's name
/// for its servers: `address`, `url`, `nats`).
#[derive(Debug, Clone, Copy)]
pub struct Connection<'a> {
    /// The section and its servers' field, for errors (`"nats.address"`, `"fleet.nats"`).
    pub url_field: &'a str,
    /// One URL, or several separated by commas (a list in TOML is joined so).
    pub servers: &'a str,
    pub auth: &'a Auth,
}

impl Default for Connection<'_> {
    fn default() -> Self {
        Connection {
            url_field: "",
            servers: "",
            auth: &NO_AUTH,
        }
    }
}

/// A field and what is wrong with it.
pub type FieldError = (String, String);

/// Parses a servers field: comma-separated `nats://` or `tls://` URLs with a host, each
/// with a port NATS could listen on; errors name the entry.
pub fn parse_servers(s: &str) -> Result<Vec<ServerAddr>, String> {
    let entries: Vec<&str> = s.split(',').map(str::trim).collect();
    if entries.iter().all(|e| e.is_empty()) {
        return Err("no server given (one URL, or a list of the cluster's servers)".into());
    }
    if entries.len() > MAX_SERVERS {
        return Err(format!(
            "{} servers: at most {MAX_SERVERS} seeds",
            entries.len()
        ));
    }
    let n = entries.len();
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let at = |p: String| {
                if n == 1 {
                    format!("{e:?}: {p}")
                } else {
                    format!("server {} of {n} ({e:?}): {p}", i + 1)
                }
            };
            if e.is_empty() {
                return Err(at("is empty".into()));
            }
            let url = reqwest::Url::parse(e).map_err(|x| at(format!("does not parse: {x}")))?;
            if !matches!(url.scheme(), "nats" | "tls") {
                return Err(at(
                    "a NATS server's URL starts with nats:// or tls://".into()
                ));
            }
            if url.host_str().is_none_or(str::is_empty) {
                return Err(at("has no host".into()));
            }
            if url.port() == Some(0) {
                return Err(at("port 0 is no server's".into()));
            }
            ServerAddr::from_url(url).map_err(|x| at(x.to_string()))
        })
        .collect()
}

/// Deserializes a servers field: a string (comma-separated URLs) or a list of strings, kept
/// as one comma-separated string (what [`parse_servers`] reads).
pub fn servers<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        One(String),
        List(Vec<String>),
    }
    match Raw::deserialize(d)? {
        Raw::One(s) => Ok(s),
        Raw::List(v) if v.is_empty() => Err(serde::de::Error::custom(
            "an empty list of servers: give at least one URL",
        )),
        Raw::List(v) => Ok(v.join(", ")),
    }
}

/// Checks a `replicas` setting (1 to [`MAX_REPLICAS`]).
pub fn check_replicas(n: usize) -> Result<(), String> {
    if n == 0 || n > MAX_REPLICAS {
        return Err(format!(
            "{n}: from 1 to {MAX_REPLICAS} (JetStream's limit; 3 on a 3-server cluster)"
        ));
    }
    Ok(())
}

impl Connection<'_> {
    fn field(&self, name: &str) -> String {
        match self.url_field.rsplit_once('.') {
            Some((section, _)) => format!("{section}.{name}"),
            None => name.to_string(),
        }
    }

    /// The servers, parsed.
    pub fn addresses(&self) -> Result<Vec<ServerAddr>, FieldError> {
        parse_servers(self.servers).map_err(|p| (self.url_field.to_string(), p))
    }

    /// Checks what the runtime will need: the servers parse, and what [`Auth::check`] checks.
    pub fn check(&self, base: Option<&Path>) -> Result<(), FieldError> {
        self.addresses()?;
        self.auth.check(base).map_err(|(f, p)| (self.field(f), p))
    }

    /// Connect options from the token, credentials and TLS files under `base` and the user
    /// and password; a `tls://` URL, a CA or a client certificate requires TLS. Errors name
    /// the field whose file is missing or unreadable.
    pub async fn options(&self, base: &Path) -> Result<async_nats::ConnectOptions, ConnectError> {
        let read = |field: &'static str, f: &Path| {
            let path = base.join(f);
            std::fs::read(&path).map_err(|e| ConnectError::File {
                field,
                problem: format!("{}: {e}", path.display()),
            })
        };
        let mut opts = async_nats::ConnectOptions::new()
            .connection_timeout(CONNECT_TIMEOUT)
            .ping_interval(PING_INTERVAL)
            .name(concat!("wasmon/", env!("CARGO_PKG_VERSION")));
        let a = self.auth;
        if let (Some(u), Some(p)) = (&a.username, &a.password) {
            opts = opts.user_and_password(u.clone(), p.clone());
        }
        if let Some(f) = &a.token_file {
            let token = String::from_utf8_lossy(&read("token-file", f)?)
                .trim()
                .to_string();
            opts = opts.token(token);
        }
        if let Some(f) = &a.creds_file {
            read("creds-file", f)?;
            let path = base.join(f);
            opts = opts
                .credentials_file(&path)
                .await
                .map_err(|source| ConnectError::Credentials { path, source })?;
        }
        if let Some(ca) = &a.tls_ca {
            read("tls-ca", ca)?;
            opts = opts.add_root_certificates(base.join(ca)).require_tls(true);
        }
        if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
            read("tls-cert", cert)?;
            read("tls-key", key)?;
            opts = opts
                .add_client_certificate(base.join(cert), base.join(key))
                .require_tls(true);
        }
        if self
            .servers
            .split(',')
            .any(|s| s.trim().starts_with("tls://"))
        {
            opts = opts.require_tls(true);
        }
        Ok(opts)
    }

    /// Connects with `opts` to the first seed that answers (each is tried once, unless the
    /// options retry the first connection).
    pub async fn connect_with(
        &self,
        opts: async_nats::ConnectOptions,
    ) -> Result<async_nats::Client, ConnectError> {
        self.connect_to(opts, self.seeds()?).await
    }

    /// The servers, parsed, or why they do not parse as a connection's error.
    fn seeds(&self) -> Result<Vec<ServerAddr>, ConnectError> {
        self.addresses()
            .map_err(|(field, problem)| ConnectError::File {
                field: "servers",
                problem: format!("{field}: {problem}"),
            })
    }

    /// Connects with `opts` to `addrs` (the one place a connection is made).
    async fn connect_to(
        &self,
        opts: async_nats::ConnectOptions,
        addrs: Vec<ServerAddr>,
    ) -> Result<async_nats::Client, ConnectError> {
        opts.connect(addrs)
            .await
            .map_err(|source| ConnectError::Connect {
                address: self.servers.to_string(),
                source,
            })
    }

    /// Connects with `opts` after `hung` gave up on a server: the seeds and the servers the
    /// cluster had told of, in a random order except that the hung one is tried last, and in
    /// that order on reconnects too (async-nats 0.42 waits for a server's INFO without a time
    /// limit, so an attempt that reaches a hung server hangs with it). `None`: [`Self::connect_with`].
    pub async fn connect_avoiding(
        &self,
        opts: async_nats::ConnectOptions,
        hung: Option<&Hung>,
    ) -> Result<async_nats::Client, ConnectError> {
        self.connect_aiming(opts, hung, &Aim::default()).await
    }

    /// [`Self::connect_avoiding`], and aimed by the servers' names (each server's INFO is
    /// read first, [`server_names`]): `aim.prefer`'s first, `aim.shun`'s after every other,
    /// servers that did not answer their INFO after those, and the hung one last. Without a
    /// hung server or an aim: [`Self::connect_with`].
    pub async fn connect_aiming(
        &self,
        opts: async_nats::ConnectOptions,
        hung: Option<&Hung>,
        aim: &Aim,
    ) -> Result<async_nats::Client, ConnectError> {
        use rand::seq::SliceRandom;
        if hung.is_none() && aim.is_empty() {
            return self.connect_with(opts).await;
        }
        let mut addrs = self.seeds()?;
        let known = hung.iter().flat_map(|h| &h.known).chain(&aim.known);
        for url in known {
            if let Ok(a) = parse_servers(url).map(|mut v| v.remove(0))
                && !addrs.contains(&a)
                && addrs.len() < MAX_SERVERS
            {
                addrs.push(a);
            }
        }
        addrs.shuffle(&mut rand::thread_rng());
        let names = if aim.is_empty() {
            vec![None; addrs.len()]
        } else {
            server_names(&addrs).await
        };
        let hung_server = hung.map(|h| h.server.as_str()).unwrap_or_default();
        let mut ranked: Vec<(u8, ServerAddr)> = addrs
            .into_iter()
            .zip(names)
            .map(|(a, name)| {
                let rank = match name {
                    _ if same_server(&a, hung_server) => 4,
                    None if !aim.is_empty() => 3,
                    Some(n) if aim.shun.contains(&n) => 2,
                    Some(n) if aim.prefer.contains(&n) => 0,
                    _ => 1,
                };
                (rank, a)
            })
            .collect();
        ranked.sort_by_key(|(rank, _)| *rank);
        let addrs = ranked.into_iter().map(|(_, a)| a).collect();
        self.connect_to(opts.retain_servers_order(), addrs).await
    }

    /// Connects to the first seed that answers, with the files under `base`.
    pub async fn connect(&self, base: &Path) -> Result<async_nats::Client, ConnectError> {
        let opts = self.options(base).await?;
        self.connect_with(opts).await
    }
}

/// Whether `addr` is the server that said `host:port` in its INFO (a server listening on every
/// address says `0.0.0.0`: then the port alone).
fn same_server(addr: &ServerAddr, said: &str) -> bool {
    let Some((host, port)) = said.rsplit_once(':') else {
        return false;
    };
    port.parse() == Ok(addr.port())
        && (host == addr.host() || matches!(host, "0.0.0.0" | "::" | "[::]"))
}

/// Where a new connection should go, by the names servers give themselves (`server_name`,
/// `-n`): a hedge's way connects to a server that leads part of its own stream's way and
/// never to one that leads part of the other's, so that one hung server holds up one way only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Aim {
    /// Tried first.
    pub prefer: Vec<String>,
    /// Tried after every other server that answers.
    pub shun: Vec<String>,
    /// Client URLs of the cluster's servers beyond the seeds (as [`Hung::known`]).
    pub known: Vec<String>,
}

impl Aim {
    fn is_empty(&self) -> bool {
        self.prefer.is_empty() && self.shun.is_empty()
    }

    /// Whether a connection to the server named `here` should move: it is shunned, and a
    /// preferred server is not, or (nothing preferred) the cluster ([`Aim::known`]) has more
    /// servers than are shunned.
    pub fn moves_from(&self, here: &str) -> bool {
        if !self.shun.iter().any(|s| s == here) {
            return false;
        }
        if self.prefer.iter().any(|p| !self.shun.contains(p)) {
            return true;
        }
        let mut shunned = self.shun.clone();
        shunned.sort();
        shunned.dedup();
        self.prefer.is_empty() && shunned.len() < self.known.len()
    }
}

/// How long a server may take to send its INFO to [`server_names`]: a live one sends it at
/// once, a hung one never.
const INFO_TIMEOUT: Duration = Duration::from_millis(500);
/// The most of a server's INFO line [`server_names`] reads: it lists the cluster's client
/// URLs (a few hundred bytes for a 5-server cluster); a longer line is not a NATS server's.
const INFO_MAX: usize = 16 * 1024;

/// The name each server gives itself in the INFO it sends a new connection before anything
/// else (no credentials needed, before TLS), all at once; `None` for a server that does not
/// answer within [`INFO_TIMEOUT`] or whose first line is not an INFO with a name.
pub async fn server_names(addrs: &[ServerAddr]) -> Vec<Option<String>> {
    futures_util::future::join_all(addrs.iter().map(|a| async move {
        tokio::time::timeout(INFO_TIMEOUT, server_name(a.host(), a.port()))
            .await
            .ok()
            .flatten()
    }))
    .await
}

async fn server_name(host: &str, port: u16) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut sock = tokio::net::TcpStream::connect((host, port)).await.ok()?;
    let mut line = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !line.ends_with(b"\r\n") {
        let n = sock.read(&mut buf).await.ok()?;
        if n == 0 || line.len() + n > INFO_MAX {
            return None;
        }
        line.extend_from_slice(&buf[..n]);
    }
    info_name(&line)
}

/// The `server_name` of a server's INFO line (`INFO {json}\r\n`).
fn info_name(line: &[u8]) -> Option<String> {
    let json = line.strip_prefix(b"INFO ")?;
    let v: serde_json::Value = serde_json::from_slice(json.trim_ascii()).ok()?;
    v["server_name"].as_str().map(String::from)
}

/// A server [`hung`] gave up on, and the servers of its cluster the client had been told of.
#[derive(Debug, Clone, Default)]
pub struct Hung {
    /// `host:port`, as the server said in its INFO.
    pub server: String,
    /// The cluster's client URLs as the server told them (`nats://` prepended when bare).
    pub known: Vec<String>,
}

/// Whether `client`'s server answers one probe within [`PROBE_TIMEOUT`] (the server itself
/// answers it, "no responders").
pub async fn answers(client: &async_nats::Client) -> bool {
    let asked = tokio::time::timeout(
        PROBE_TIMEOUT,
        client.request(PROBE_SUBJECT, bytes::Bytes::new()),
    )
    .await;
    match asked {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => e.kind() == async_nats::RequestErrorKind::NoResponders,
        Err(_) => false,
    }
}

/// What the cluster's server `client` is connected to said of itself and of the others.
pub fn said(client: &async_nats::Client) -> Hung {
    let info = client.server_info();
    let known = info
        .connect_urls
        .iter()
        .take(MAX_SERVERS)
        .map(|u| {
            if u.contains("://") {
                u.clone()
            } else {
                format!("nats://{u}")
            }
        })
        .collect();
    Hung {
        server: format!("{}:{}", info.host, info.port),
        known,
    }
}

/// Resolves when `client`'s server has left [`PROBES_FAILED`] probes in a row unanswered
/// (a probe every [`PROBE_EVERY`]): a hung server (stopped, its sockets open), or a
/// reconnection stuck on one. The caller drops the client and connects anew with
/// [`Connection::connect_avoiding`].
pub async fn hung(client: &async_nats::Client) -> Hung {
    let mut failed = 0;
    let mut last = said(client);
    // Until the server answered once, the client may still be connecting (every server
    // down at start): it is given up only after FIRST_ANSWER_WITHIN.
    let mut answered_once = false;
    let first = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        if answers(client).await {
            failed = 0;
            answered_once = true;
            last = said(client);
            continue;
        }
        failed += 1;
        if failed >= PROBES_FAILED && (answered_once || first.elapsed() >= FIRST_ANSWER_WITHIN) {
            return last;
        }
    }
}

#[cfg(test)]
mod tests;
