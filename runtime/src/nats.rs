//! Connecting to a NATS server with the credentials a config section names: shared by the
//! line-protocol ingest (`api::ccms::nats`) and the notifier's sink (`notify::nats`). Owns
//! nothing but the connection step.

use std::path::{Path, PathBuf};

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
}

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
