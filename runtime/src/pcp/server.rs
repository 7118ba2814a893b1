//! The TCP side of a pmcd-compatible port: accept, the handshake as pmcd 6.0.3 does it, then
//! one request at a time per connection. Bounded everywhere a client could make it grow:
//! connections, PDU size, time to send a PDU's body or take a reply, requests in flight.
//! A reply is built in full (agents locked one call at a time, then released) before a byte
//! is written, so a client that does not read holds no agent: only its own connection, until
//! the write times out.
//!
//! Owns the sockets; answers come from `serve.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::pdu::{self, Request};
use super::serve::{Session, Shared};
use super::wire::{HEADER, Header, MAX_CLIENT_PDU, PduError, errors};

/// Most clients served at once; the next gets pmcd's "connection limit" error (pmcd's own
/// limit is the process's file descriptors; this one keeps the daemon's memory flat: each
/// connection holds at most one 64 KiB PDU).
pub const MAX_CLIENTS: usize = 128;
/// Most requests answered at once, over all connections: answers run on blocking threads
/// (agents are synchronous) and a burst of clients must not take them all.
pub const MAX_IN_FLIGHT: usize = 8;
/// Time a client has to send the rest of a PDU once its header arrived, and to take a reply
/// (PCP's own clients wait 10 s for pmcd: `PMCD_REQUEST_TIMEOUT`).
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// The handshake's challenge: PDU version 2, "licensed", and the feature bits pmcd 6.0.3
/// advertises: LABELS (0x200: clients then ask LABEL_REQ), HIGHRES (0x400: HIGHRES_FETCH,
/// nanosecond timestamps) and DESCS (0x800: one DESC_IDS for many descriptors). Without them
/// ([`MINIMAL_CHALLENGE`]) PCP 6 clients fall back to FETCH and one DESC_REQ per metric.
pub const CHALLENGE: u32 = 0x0201_0000 | FEATURE_LABELS | FEATURE_HIGHRES | FEATURE_DESCS;
pub const MINIMAL_CHALLENGE: u32 = 0x0201_0000;
pub const FEATURE_LABELS: u32 = 0x200;
pub const FEATURE_HIGHRES: u32 = 0x400;
pub const FEATURE_DESCS: u32 = 0x800;

/// Serves PCP clients on `listener` until `shutdown`.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, shutdown: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CLIENTS));
    let work = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    loop {
        let (mut stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "PCP port: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "PCP port: connection limit reached");
            let _ = tokio::time::timeout(
                IO_TIMEOUT,
                stream.write_all(&pdu::xerror(errors::CONNLIMIT, CHALLENGE)),
            )
            .await;
            continue;
        };
        let (shared, work, token) = (shared.clone(), work.clone(), shutdown.clone());
        tokio::spawn(async move {
            shared.clients.fetch_add(1, Ordering::Relaxed);
            tokio::select! {
                _ = token.cancelled() => {}
                r = connection(&mut stream, shared.clone(), work) => {
                    if let Err(e) = r {
                        tracing::debug!(%peer, error = %e, "PCP client closed");
                    }
                }
            }
            shared.clients.fetch_sub(1, Ordering::Relaxed);
            drop(slot);
        });
    }
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum ConnError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("timed out")]
    Timeout,
    #[error(transparent)]
    Pdu(#[from] PduError),
    #[error("first PDU is not CREDS")]
    NoCreds,
}

async fn write(stream: &mut TcpStream, bytes: &[u8]) -> Result<(), ConnError> {
    tokio::time::timeout(IO_TIMEOUT, stream.write_all(bytes))
        .await
        .map_err(|_| ConnError::Timeout)??;
    Ok(())
}

/// Reads one PDU: the header whenever it comes (clients idle between fetches), the body
/// within [`IO_TIMEOUT`]. `Ok(None)` at a clean end of stream.
async fn read_pdu(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Option<()>, ConnError> {
    let mut head = [0u8; HEADER];
    let read = stream.read_exact(&mut head).await.map(drop);
    if Header::start::<ConnError>(read, &head, MAX_CLIENT_PDU, buf)?.is_none() {
        return Ok(None);
    }
    tokio::time::timeout(IO_TIMEOUT, stream.read_exact(&mut buf[HEADER..]))
        .await
        .map_err(|_| ConnError::Timeout)??;
    Ok(Some(()))
}

async fn connection(
    stream: &mut TcpStream,
    shared: Arc<Shared>,
    work: Arc<Semaphore>,
) -> Result<(), ConnError> {
    write(stream, &pdu::xerror(0, CHALLENGE)).await?;
    let mut buf = Vec::new();
    let mut session = Some(Session::new(shared));
    let mut first = true;
    loop {
        match read_pdu(stream, &mut buf).await {
            Ok(Some(())) => {}
            Ok(None) => return Ok(()),
            Err(e) => {
                if let ConnError::Pdu(p) = &e {
                    let code = match p {
                        PduError::TooLong(_) => errors::TOOBIG,
                        _ => errors::IPC,
                    };
                    let _ = write(stream, &pdu::error(code)).await;
                }
                return Err(e);
            }
        }
        let req = match pdu::decode(&buf) {
            Ok(r) => r,
            Err(e) => {
                let _ = write(stream, &pdu::error(errors::IPC)).await;
                return Err(e.into());
            }
        };
        if first && !matches!(req, Request::Creds(_)) {
            return Err(ConnError::NoCreds);
        }
        first = false;
        // The answer may lock agents: on a blocking thread, one of MAX_IN_FLIGHT.
        let permit = work.clone().acquire_owned().await.expect("never closed");
        let mut s = session.take().expect("one request at a time");
        let (s, reply) = tokio::task::spawn_blocking(move || {
            let reply = s.answer(req);
            drop(permit);
            (s, reply)
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        session = Some(s);
        if let Some(reply) = reply {
            write(stream, &reply).await?;
        }
        // A large reply's buffer is not kept for an idle connection.
        if buf.capacity() > 4096 {
            buf = Vec::new();
        }
    }
}
