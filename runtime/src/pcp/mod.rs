//! `runtime::pcp`: PCP's binary protocol, so PCP's own tools (pminfo, pmval, pmprobe, pmrep,
//! pmlogger, pmie) can talk to wasmon as they talk to pmcd.
//!
//! - [`wire`]: framing, codes, the length-checked reader and the writer;
//! - [`pdu`]: every PDU a server receives (decoded) and sends (encoded);
//! - [`units`]: units text to `pmUnits`, `f64` values to PCP's types;
//! - [`pmcd`]: the `pmcd.*` metrics a pmcd answers itself;
//! - [`serve`]: the answers, over a [`Source`] (the namespace and its agents);
//! - [`server`]: the TCP port, its handshake and its bounds;
//! - [`pmda`]: the same answers to a real pmcd, as a daemon PMDA on a pipe (`wasmon pmda`).
//!
//! A part of the daemon: it stands on `namespace` only and knows no HTTP and no wasm. The
//! daemon hands it a [`Source`] and a listener; it may not reach into the daemon or the API.

pub mod pdu;
pub mod pmcd;
pub mod pmda;
pub mod serve;
pub mod server;
pub mod units;
pub mod wire;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_session;

use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

pub use serve::{Session, Shared, Source};

/// pmcd's port (`SERVER_PORT`).
pub const PMCD_PORT: u16 = 44321;

/// The pmcd-compatible port (`[pcp]`); read at start only.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PcpConfig {
    /// Address PCP clients connect to (`pminfo -h HOST:PORT`; pmcd's port is 44321). None:
    /// no port. When the address is taken (by a real pmcd), the daemon logs it and runs
    /// without the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
}

/// Binds `addr` and serves PCP clients from `source` until `shutdown`. `Ok(None)` when the
/// address is in use (logged once here: a real pmcd holds it, and the daemon runs without
/// its port); other bind errors are the caller's.
pub async fn start(
    addr: SocketAddr,
    source: Box<dyn Source>,
    hostname: String,
    shutdown: CancellationToken,
) -> std::io::Result<Option<SocketAddr>> {
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            tracing::warn!(%addr, "PCP port in use (a pmcd runs?): running without it");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let local = listener.local_addr()?;
    tracing::info!(addr = %local, "PCP port listening");
    let shared = Arc::new(Shared::new(source, hostname));
    tokio::spawn(server::serve(listener, shared, shutdown));
    Ok(Some(local))
}
