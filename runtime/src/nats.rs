//! One NATS connection config for every part that talks to NATS (the line-protocol ingest
//! `ingest::nats`, the notifier's sink `notify::nats`, the fabric agents, the fleet and the
//! forwarding sinks): the servers (one URL, or a cluster's seeds as a TOML list or a
//! comma-separated string), user and password, token, credentials file, TLS CA and client
//! certificate, under the same field names in every section; and the JetStream streams
//! wasmon creates, with their replicas. Owns nothing but these steps.
//!
//! The client is handed every seed: it connects to whichever answers first (in random order,
//! so a fleet spreads over the cluster), learns the cluster's other servers from it, and fails
//! over to any of them when its server goes away.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_nats::ServerAddr;
use serde::Deserialize;

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

/// JetStream keeps at most 5 replicas of a stream (an odd number survives the loss of a
/// minority of the cluster's servers).
pub const MAX_REPLICAS: usize = 5;

/// Seeds one field may list: a cluster has 3 or 5 servers, a super-cluster a few more seeds;
/// a list longer than this is a mistake (or hostile), not a topology.
pub const MAX_SERVERS: usize = 64;

/// How long looking a stream up may take before it is retried: a stream whose leader is being
/// elected does not answer, and the default request timeout (5 s) would stall delivery that
/// long after the cluster can take writes again.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(1);

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
        let addrs = self
            .addresses()
            .map_err(|(field, problem)| ConnectError::File {
                field: "servers",
                problem: format!("{field}: {problem}"),
            })?;
        opts.connect(addrs)
            .await
            .map_err(|source| ConnectError::Connect {
                address: self.servers.to_string(),
                source,
            })
    }

    /// Connects to the first seed that answers, with the files under `base`.
    pub async fn connect(&self, base: &Path) -> Result<async_nats::Client, ConnectError> {
        let opts = self.options(base).await?;
        self.connect_with(opts).await
    }
}

/// What a stream created by wasmon keeps: long enough for a replica that was down for days to
/// catch up, bounded so that a stream nobody consumes does not fill the server's disk.
pub const STREAM_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The stream `name`, created with `subjects`, the de-duplication window `window` and
/// `replicas` (1 when not set) when it does not exist. An existing stream is used as it is,
/// unless `replicas` was set and the stream has another number: that is an error naming both
/// (the stream is not silently used with fewer copies than asked for). The forwarding sink and
/// the receiving ingest both call it, so either may start first.
pub async fn stream_for(
    js: &async_nats::jetstream::Context,
    name: &str,
    subjects: &[String],
    window: Duration,
    replicas: Option<usize>,
) -> Result<async_nats::jetstream::stream::Stream, String> {
    use async_nats::jetstream::stream;
    let mut quick = js.clone();
    quick.set_timeout(LOOKUP_TIMEOUT);
    let found = match quick.get_stream(name).await {
        Ok(s) => s,
        Err(_) => {
            let subject = subjects.join(", ");
            let n = replicas.unwrap_or(1);
            // Finds a stream the quick look-up missed (a leader being elected) as well.
            js.get_or_create_stream(stream::Config {
                name: name.to_string(),
                subjects: subjects.to_vec(),
                duplicate_window: window,
                max_age: STREAM_MAX_AGE,
                storage: stream::StorageType::File,
                num_replicas: n,
                ..Default::default()
            })
            .await
            .map_err(|e| {
                format!("creating stream {name:?} on {subject:?} with {n} replica(s): {e}")
            })?
        }
    };
    let have = found.cached_info().config.num_replicas.max(1);
    if let Some(want) = replicas
        && have != want
    {
        return Err(format!(
            "stream {name:?} has {have} replica(s) and replicas = {want} asks for {want}: \
             change the stream (`nats stream edit {name} --replicas {want}`) or the setting"
        ));
    }
    Ok(found)
}

/// Checks the replicas of an existing stream (a key-value bucket's is `KV_BUCKET`, an object
/// store's `OBJ_BUCKET`) against a setting; `None` checks nothing.
pub async fn check_stream_replicas(
    js: &async_nats::jetstream::Context,
    stream: &str,
    want: Option<usize>,
) -> Result<(), String> {
    let Some(want) = want else { return Ok(()) };
    let mut s = js
        .get_stream(stream)
        .await
        .map_err(|e| format!("looking up stream {stream:?}: {e}"))?;
    let have = s
        .info()
        .await
        .map_err(|e| format!("looking up stream {stream:?}: {e}"))?
        .config
        .num_replicas
        .max(1);
    if have != want {
        return Err(format!(
            "stream {stream:?} has {have} replica(s) and replicas = {want} asks for {want}: \
             change the stream (`nats stream edit {stream} --replicas {want}`) or the setting"
        ));
    }
    Ok(())
}

/// Opens key-value bucket `bucket`, creating it when absent (file storage, one value per key,
/// values expiring after `max_age`, none when zero) with `want` replicas (1 when not set); an
/// existing bucket with another number than `want` is an error naming both.
pub async fn open_kv_bucket(
    js: &async_nats::jetstream::Context,
    bucket: &str,
    max_age: Duration,
    want: Option<usize>,
) -> anyhow::Result<async_nats::jetstream::kv::Store> {
    let stream = format!("KV_{bucket}");
    if let Ok(s) = js.get_key_value(bucket).await {
        check_stream_replicas(js, &stream, want)
            .await
            .map_err(anyhow::Error::msg)?;
        return Ok(s);
    }
    let replicas = want.unwrap_or(1);
    // Laid out as JetStream's key-value convention has it; not `create_key_value`, which in
    // async-nats 0.42 first asks for the account info and cannot parse nats-server 2.9's
    // answer.
    use async_nats::jetstream::stream::{Config, DiscardPolicy, StorageType};
    let created = js
        .create_stream(Config {
            name: stream.clone(),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            max_age,
            max_messages: -1,
            max_bytes: -1,
            max_consumers: -1,
            max_message_size: -1,
            discard: DiscardPolicy::New,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            storage: StorageType::File,
            num_replicas: replicas,
            // Must not exceed max_age; 2 minutes is the server's default otherwise.
            duplicate_window: if max_age.is_zero() {
                KV_DUPLICATE_WINDOW
            } else {
                max_age.min(KV_DUPLICATE_WINDOW)
            },
            ..Default::default()
        })
        .await;
    // Another daemon may have created it meanwhile: the creation's error counts only when
    // the bucket is not there after all.
    let s = js.get_key_value(bucket).await.map_err(|e| match created {
        Err(c) => anyhow::anyhow!("creating bucket {bucket} with {replicas} replica(s): {c}"),
        Ok(_) => anyhow::anyhow!("opening bucket {bucket}: {e}"),
    })?;
    // Another daemon may have created it with another number meanwhile.
    check_stream_replicas(js, &stream, want)
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(s)
}

/// The server's default duplicate window, which a bucket's may not exceed its max age.
const KV_DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// Keys (or objects) one listing returns at most: a fleet has a few guests times a few
/// groups and a health entry per daemon and guest, a fabric an owner per node (48,000 for the
/// OpenFabrics RFC's) and a lease per agent; more is a bucket filled by someone else.
const MAX_LISTED: usize = 1_000_000;

/// Reads of one listing in flight at once (each a request to the stream's leader).
const READS_IN_FLIGHT: usize = 64;

/// The subjects under `filter` that hold a message, read from the stream's info. No consumer
/// is created: nats-server 2.9.10, with one server of a cluster down, places some ephemeral
/// consumers on that server and never answers their creation (a `wasmon fleet status` then
/// timed out on every try for as long as the server was away).
pub async fn subjects(
    stream: &async_nats::jetstream::stream::Stream,
    filter: &str,
) -> anyhow::Result<Vec<String>> {
    use futures_util::TryStreamExt;
    let mut info = stream
        .info_with_subjects(filter)
        .await
        .map_err(|e| anyhow::anyhow!("listing {filter}: {e}"))?;
    let mut out = Vec::new();
    while let Some((subject, _)) = info
        .try_next()
        .await
        .map_err(|e| anyhow::anyhow!("listing {filter}: {e}"))?
    {
        if out.len() == MAX_LISTED {
            anyhow::bail!("listing {filter}: more than {MAX_LISTED} subjects");
        }
        out.push(subject);
    }
    out.sort();
    Ok(out)
}

/// One key's latest entry, as the stream's leader has it.
#[derive(Clone, Debug)]
pub struct Latest {
    pub key: String,
    pub revision: u64,
    pub operation: async_nats::jetstream::kv::Operation,
    pub value: Vec<u8>,
}

fn latest_of(prefix: &str, m: async_nats::jetstream::message::StreamMessage) -> Option<Latest> {
    use async_nats::jetstream::kv::Operation;
    let key = m.subject.as_str().strip_prefix(prefix)?.to_string();
    let operation = match m.headers.get("KV-Operation").map(|v| v.as_str()) {
        Some("DEL") => Operation::Delete,
        Some("PURGE") => Operation::Purge,
        _ => Operation::Put,
    };
    Some(Latest {
        key,
        revision: m.sequence,
        operation,
        value: m.payload.to_vec(),
    })
}

/// Every key's latest entry (deletions included), without a consumer (see [`subjects`]),
/// read from the stream's leader, not with a direct get: with `allow_direct` any replica
/// answers, and one that was down answered an old value after it came back (2.9.10). A key
/// that cannot be read fails the whole listing; one gone meanwhile (expired) is left out.
pub async fn latest(store: &async_nats::jetstream::kv::Store) -> anyhow::Result<Vec<Latest>> {
    use async_nats::jetstream::stream::LastRawMessageErrorKind;
    let prefix = format!("$KV.{}.", store.name);
    let keys = subjects(&store.stream, &format!("{prefix}>"))
        .await
        .map_err(|e| anyhow::anyhow!("listing keys: {e}"))?;
    read_in_flight(keys, |subject| {
        let prefix = &prefix;
        async move {
            match store.stream.get_last_raw_message_by_subject(&subject).await {
                Ok(m) => Ok(latest_of(prefix, m)),
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
                Err(e) => Err(anyhow::anyhow!("reading {subject}: {e}")),
            }
        }
    })
    .await
}

/// Runs `read` over `items`, [`READS_IN_FLIGHT`] at a time, and keeps the entries found, in
/// the items' order; the first failed read fails the whole.
async fn read_in_flight<T, F, Fut>(
    items: impl IntoIterator<Item = T>,
    read: F,
) -> anyhow::Result<Vec<Latest>>
where
    F: FnMut(T) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<Latest>>>,
{
    use futures_util::StreamExt;
    let reads: Vec<anyhow::Result<Option<Latest>>> = futures_util::stream::iter(items)
        .map(read)
        .buffered(READS_IN_FLIGHT)
        .collect()
        .await;
    let mut out = Vec::new();
    for r in reads {
        out.extend(r?);
    }
    Ok(out)
}

/// The latest entry of one key, read from the stream's leader (see [`latest`]); `None` when
/// the bucket holds nothing under it (never written, or expired).
pub async fn latest_entry(
    store: &async_nats::jetstream::kv::Store,
    key: &str,
) -> anyhow::Result<Option<Latest>> {
    use async_nats::jetstream::stream::LastRawMessageErrorKind;
    let prefix = format!("$KV.{}.", store.name);
    match store
        .stream
        .get_last_raw_message_by_subject(&format!("{prefix}{key}"))
        .await
    {
        Ok(m) => Ok(latest_of(&prefix, m)),
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("reading {key}: {e}")),
    }
}

/// The entries written to a bucket after sequence `after` up to `last`, oldest first, from the
/// stream's leader (each sequence asked for, [`READS_IN_FLIGHT`] at a time); entries another
/// write replaced since are not there any more (their key's newer entry is).
pub async fn changes_since(
    store: &async_nats::jetstream::kv::Store,
    after: u64,
    last: u64,
) -> anyhow::Result<Vec<Latest>> {
    use async_nats::jetstream::stream::RawMessageErrorKind;
    let prefix = format!("$KV.{}.", store.name);
    read_in_flight(after.saturating_add(1)..=last, |seq| {
        let prefix = &prefix;
        async move {
            match store.stream.get_raw_message(seq).await {
                Ok(m) => Ok(latest_of(prefix, m)),
                Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => Ok(None),
                Err(e) => Err(anyhow::anyhow!("reading sequence {seq}: {e}")),
            }
        }
    })
    .await
}

/// The first nats-server release whose key-value compare-and-set holds on a cluster: before
/// it, a clustered stream checked an update's expected revision only when the update arrived
/// at the leader, not when it was applied, so two updates naming the same revision that
/// arrived before either was applied both succeeded (nats-server commit 244dda8, "Fix bug that
/// would race around check for last sequence per subject", released in 2.9.21).
pub const CAS_SAFE_SINCE: (u64, u64, u64) = (2, 9, 21);

/// Whether a server's version (`2.9.10`, `v2.15.1`, `2.11.0-RC.1`) has compare-and-set that
/// holds on a cluster; `None` when it does not parse.
pub fn cas_safe(version: &str) -> Option<bool> {
    let v = version.trim().trim_start_matches('v');
    let core = v.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
    Some((major, minor, patch) >= CAS_SAFE_SINCE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_parse_as_a_list_and_errors_name_the_entry() {
        let two = parse_servers("nats://a:4222, tls://b:4223").unwrap();
        assert_eq!(two.len(), 2);
        assert!(two[1].tls_required());
        assert_eq!(parse_servers("nats://a").unwrap().len(), 1);
        for (text, names) in [
            ("", "no server given"),
            (" , ", "no server given"),
            (
                "nats://a:4222,,nats://b:4222",
                "server 2 of 3 (\"\"): is empty",
            ),
            (
                "nats://a:4222,nats://b:99999",
                "server 2 of 2 (\"nats://b:99999\")",
            ),
            ("http://a:4222", "nats:// or tls://"),
            ("nats://a:4222,b:4222", "server 2 of 2"),
            ("nats://:4222", "\"nats://:4222\""),
        ] {
            let e = parse_servers(text).unwrap_err();
            assert!(e.contains(names), "{text:?}: {e}");
        }
        let many = vec!["nats://a:1"; MAX_SERVERS + 1].join(",");
        assert!(parse_servers(&many).unwrap_err().contains("at most"));
    }

    #[test]
    fn compare_and_set_holds_from_2_9_21() {
        for (v, safe) in [
            ("2.9.10", Some(false)),
            ("v2.9.20", Some(false)),
            ("2.9.21", Some(true)),
            ("2.10.0", Some(true)),
            ("v2.15.1", Some(true)),
            ("2.11.0-RC.1", Some(true)),
            ("3.0.0", Some(true)),
            ("1.4.1", Some(false)),
            ("", None),
            ("two", None),
            ("2.9", None),
        ] {
            assert_eq!(cas_safe(v), safe, "{v:?}");
        }
    }

    #[test]
    fn a_servers_field_takes_a_string_or_a_list() {
        #[derive(Deserialize)]
        struct S {
            #[serde(deserialize_with = "servers")]
            url: String,
        }
        let s: S = toml::from_str("url = ['nats://a:1', 'nats://b:2']").unwrap();
        assert_eq!(s.url, "nats://a:1, nats://b:2");
        let s: S = toml::from_str("url = 'nats://a:1,nats://b:2'").unwrap();
        assert_eq!(parse_servers(&s.url).unwrap().len(), 2);
        assert!(
            toml::from_str::<S>("url = []")
                .err()
                .unwrap()
                .to_string()
                .contains("empty list of servers")
        );
    }

    #[test]
    fn connection_check_names_the_field() {
        let c = Connection {
            url_field: "fleet.nats",
            servers: "nats://a:1,nats://b:x",
            ..Default::default()
        };
        let (f, p) = c.check(None).unwrap_err();
        assert_eq!(f, "fleet.nats");
        assert!(p.contains("server 2 of 2"), "{p}");
        let c = Connection {
            url_field: "fleet.nats",
            servers: "nats://a:1",
            auth: &Auth {
                username: Some("u".into()),
                ..Auth::default()
            },
        };
        assert_eq!(c.check(None).unwrap_err().0, "fleet.username");
        let dir = tempfile::tempdir().unwrap();
        let c = Connection {
            url_field: "nats.address",
            servers: "nats://a:1",
            auth: &Auth {
                tls_ca: Some("missing.pem".into()),
                ..Auth::default()
            },
        };
        assert_eq!(c.check(Some(dir.path())).unwrap_err().0, "nats.tls-ca");
        assert!(check_replicas(0).is_err() && check_replicas(6).is_err());
        assert!(check_replicas(3).is_ok());
    }

    /// A daemon whose first seed is down at start connects through another.
    #[tokio::test]
    async fn connects_through_a_seed_that_answers() {
        let server = crate::testutil::NatsServer::start();
        let _ = server.client().await;
        let dead = format!("nats://127.0.0.1:{}", crate::testutil::free_port());
        let servers = format!("{dead}, {}", server.address);
        let c = Connection {
            url_field: "nats.address",
            servers: &servers,
            ..Default::default()
        };
        for _ in 0..4 {
            let client = tokio::time::timeout(Duration::from_secs(10), c.connect(Path::new("")))
                .await
                .expect("connected in time")
                .expect("connected through the live seed");
            assert_eq!(
                client.connection_state(),
                async_nats::connection::State::Connected
            );
        }
        let only_dead = Connection {
            url_field: "nats.address",
            servers: &dead,
            ..Default::default()
        };
        assert!(matches!(
            only_dead.connect(Path::new("")).await,
            Err(ConnectError::Connect { .. })
        ));
    }
}
