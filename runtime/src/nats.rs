//! Connecting to a NATS server with the credentials and TLS files a config section names, and
//! the JetStream streams wasmon creates: shared by the line-protocol ingest
//! (`ingest::nats`), the notifier's sink (`notify::nats`), the fabric agents and the
//! forwarding sinks. Owns nothing but these steps.

use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// TLS files of a NATS connection (relative to the config file's directory).
#[derive(Debug, Clone, Default)]
pub struct Tls<'a> {
    /// The CA(s) the server's certificate must chain to, instead of the system's roots.
    pub ca: Option<&'a Path>,
    /// A client certificate and its key, for servers that require one.
    pub client: Option<(&'a Path, &'a Path)>,
}

/// A connection attempt that takes longer is a failure (retried by whoever asked).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to `address`, with user and password when both are given and with a credentials
/// file (JWT + nkey seed) when one is named.
pub async fn connect(
    address: &str,
    username: Option<&str>,
    password: Option<&str>,
    creds_file: Option<&Path>,
) -> Result<async_nats::Client, ConnectError> {
    let mut opts = async_nats::ConnectOptions::new();
    if let (Some(u), Some(p)) = (username, password) {
        opts = opts.user_and_password(u.to_string(), p.to_string());
    }
    if let Some(path) = creds_file {
        opts = opts
            .credentials_file(path)
            .await
            .map_err(|source| ConnectError::Credentials {
                path: path.to_path_buf(),
                source,
            })?;
    }
    opts.connect(address)
        .await
        .map_err(|source| ConnectError::Connect {
            address: address.to_string(),
            source,
        })
}

/// Connect options from a token file, a credentials file and TLS files under `base`; a
/// `tls://` URL, a CA or a client certificate requires TLS. Errors name the field whose file
/// is missing or unreadable.
pub async fn options(
    base: &Path,
    url: &str,
    token_file: Option<&Path>,
    creds_file: Option<&Path>,
    tls: Tls<'_>,
) -> Result<async_nats::ConnectOptions, ConnectError> {
    let read = |field: &'static str, f: &Path| {
        let path = base.join(f);
        std::fs::read(&path).map_err(|e| ConnectError::File {
            field,
            problem: format!("{}: {e}", path.display()),
        })
    };
    let mut opts = async_nats::ConnectOptions::new()
        .connection_timeout(CONNECT_TIMEOUT)
        .name(concat!("wasmon/", env!("CARGO_PKG_VERSION")));
    if let Some(f) = token_file {
        let token = String::from_utf8_lossy(&read("token-file", f)?)
            .trim()
            .to_string();
        opts = opts.token(token);
    }
    if let Some(f) = creds_file {
        read("creds-file", f)?;
        let path = base.join(f);
        opts = opts
            .credentials_file(&path)
            .await
            .map_err(|source| ConnectError::Credentials { path, source })?;
    }
    if let Some(ca) = tls.ca {
        read("tls-ca", ca)?;
        opts = opts.add_root_certificates(base.join(ca)).require_tls(true);
    }
    if let Some((cert, key)) = tls.client {
        read("tls-cert", cert)?;
        read("tls-key", key)?;
        opts = opts
            .add_client_certificate(base.join(cert), base.join(key))
            .require_tls(true);
    }
    if url.starts_with("tls://") {
        opts = opts.require_tls(true);
    }
    Ok(opts)
}

/// What a stream created by wasmon keeps: long enough for a replica that was down for days to
/// catch up, bounded so that a stream nobody consumes does not fill the server's disk.
pub const STREAM_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// The stream `name`, created with `subjects` and the de-duplication window `window` when it
/// does not exist (an existing stream is used as it is). The forwarding sink and the
/// receiving ingest both call it, so either may start first.
pub async fn stream_for(
    js: &async_nats::jetstream::Context,
    name: &str,
    subjects: &[String],
    window: Duration,
) -> Result<async_nats::jetstream::stream::Stream, String> {
    use async_nats::jetstream::stream;
    if let Ok(s) = js.get_stream(name).await {
        return Ok(s);
    }
    let subject = subjects.join(", ");
    js.get_or_create_stream(stream::Config {
        name: name.to_string(),
        subjects: subjects.to_vec(),
        duplicate_window: window,
        max_age: STREAM_MAX_AGE,
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .map_err(|e| format!("creating stream {name:?} on {subject:?}: {e}"))
}
