//! The daemon-PMDA side of PCP's protocol: pmcd starts the PMDA with a pipe on its stdin and
//! stdout (`label domain pipe binary command` in pmcd.conf); the PMDA speaks first (CREDS),
//! pmcd answers with its own CREDS, then sends requests one at a time. The requests and the
//! replies are a pmcd's, so a [`Session`] answers them: pmcd routes to a PMDA only the
//! requests of its domain, and the names below its dynamic roots (`foo 44:*:*` in pmcd's
//! PMNS).
//!
//! Owns the pipe loop; knows nothing of how the agents were loaded.

use std::io::{Read, Write};
use std::sync::Arc;

use super::pdu::{self, Request};
use super::serve::{Session, Shared, Source};
use super::wire::{HEADER, Header, PduError};

/// Largest PDU taken from pmcd: it forwards its clients' requests (64 KiB at most) and
/// builds small ones of its own; the margin costs nothing.
pub const MAX_PMCD_PDU: usize = 1 << 20;
/// Our CREDS: `CVERSION` (1) << 24 | PDU version 2 << 16, no flags (no AUTH, no CONTAINER).
const CREDS: u32 = 0x0102_0000;

/// Why the pipe loop ended.
#[derive(Debug, thiserror::Error)]
pub enum PmdaError {
    #[error("pipe to pmcd: {0}")]
    Io(#[from] std::io::Error),
    #[error("from pmcd: {0}")]
    Pdu(#[from] PduError),
}

/// The PMDA's first PDU. pmcd waits 3 s for it, so it goes out before the agents load.
pub fn hello(out: &mut impl Write) -> std::io::Result<()> {
    out.write_all(&pdu::creds(std::process::id(), CREDS))?;
    out.flush()
}

/// Reads one PDU; `None` when pmcd closed the pipe.
fn read_pdu(input: &mut impl Read, buf: &mut Vec<u8>) -> Result<Option<()>, PmdaError> {
    let mut head = [0u8; HEADER];
    let read = input.read_exact(&mut head);
    if Header::start::<PmdaError>(read, &head, MAX_PMCD_PDU, buf)?.is_none() {
        return Ok(None);
    }
    input.read_exact(&mut buf[HEADER..])?;
    Ok(Some(()))
}

/// Answers pmcd until it closes the pipe (pmcd stopping, or removing the PMDA). A PDU that
/// does not decode is answered with `PM_ERR_IPC`, as libpcp_pmda does, and the loop goes on.
/// `reloaded` runs before each request and says whether the agents changed (the session then
/// forgets the descriptors it kept).
pub fn serve(
    mut input: impl Read,
    mut out: impl Write,
    source: Box<dyn Source>,
    hostname: String,
    reloaded: &mut dyn FnMut() -> bool,
) -> Result<(), PmdaError> {
    let mut session = Session::new(Arc::new(Shared::new(source, hostname)));
    let mut buf = Vec::new();
    while read_pdu(&mut input, &mut buf)?.is_some() {
        if reloaded() {
            session.forget();
        }
        let reply = match pdu::decode(&buf) {
            // pmcd's CREDS (its version), and its notices that a client went away.
            Ok(Request::Creds(_) | Request::Error(_)) => None,
            Ok(req) => session.answer(req),
            Err(e) => {
                tracing::warn!(error = %e, "PMDA: a PDU from pmcd did not decode");
                Some(pdu::error(super::wire::errors::IPC))
            }
        };
        if let Some(r) = reply {
            out.write_all(&r)?;
            out.flush()?;
        }
    }
    Ok(())
}
