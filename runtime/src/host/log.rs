//! A guest's log: what it sends through the `log` import and what it writes to its stdout and
//! stderr all become `tracing` events attributed to the guest (target `wasmon::guest`), under
//! one cap of lines per call. Nothing a guest writes reaches the daemon's own stdout or
//! stderr (`wasmon transform` writes its samples to stdout).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use super::bindings::types::Level;
use super::limits::{MAX_LOG_LINE_BYTES, MAX_LOG_LINES_PER_CALL};
use super::stats::GuestStats;

/// The log of one guest instance, shared by its `log` import and its output streams.
pub(crate) struct GuestLog {
    guest: Arc<str>,
    stats: Arc<GuestStats>,
    /// Lines emitted during the current call.
    lines: AtomicU32,
}

impl GuestLog {
    pub(crate) fn new(guest: Arc<str>, stats: Arc<GuestStats>) -> Arc<GuestLog> {
        Arc::new(GuestLog {
            guest,
            stats,
            lines: AtomicU32::new(0),
        })
    }

    /// A call starts: its cap of lines starts afresh.
    pub(crate) fn begin_call(&self) {
        self.lines.store(0, Ordering::Relaxed);
    }

    /// One line, cut at [`MAX_LOG_LINE_BYTES`]; dropped and counted past the call's cap.
    pub(crate) fn line(&self, level: Level, message: &str) {
        if self.lines.fetch_add(1, Ordering::Relaxed) >= MAX_LOG_LINES_PER_CALL {
            self.stats.log_lines_dropped.inc();
            return;
        }
        let cut = if message.len() > MAX_LOG_LINE_BYTES {
            let mut at = MAX_LOG_LINE_BYTES;
            while !message.is_char_boundary(at) {
                at -= 1;
            }
            at
        } else {
            message.len()
        };
        let (message, more) = (
            &message[..cut],
            if cut < message.len() { "..." } else { "" },
        );
        let guest = &*self.guest;
        match level {
            Level::Trace => tracing::trace!(target: "wasmon::guest", guest, "{message}{more}"),
            Level::Debug => tracing::debug!(target: "wasmon::guest", guest, "{message}{more}"),
            Level::Info => tracing::info!(target: "wasmon::guest", guest, "{message}{more}"),
            Level::Warn => tracing::warn!(target: "wasmon::guest", guest, "{message}{more}"),
            Level::Error => tracing::error!(target: "wasmon::guest", guest, "{message}{more}"),
        }
    }
}

/// A guest's stdout (lines logged at info) or stderr (at warn), given to its WASI context.
pub(crate) struct GuestOutput {
    log: Arc<GuestLog>,
    level: Level,
}

impl GuestOutput {
    pub(crate) fn stdout(log: &Arc<GuestLog>) -> GuestOutput {
        GuestOutput {
            log: log.clone(),
            level: Level::Info,
        }
    }

    pub(crate) fn stderr(log: &Arc<GuestLog>) -> GuestOutput {
        GuestOutput {
            log: log.clone(),
            level: Level::Warn,
        }
    }

    fn writer(&self) -> LineWriter {
        LineWriter {
            log: self.log.clone(),
            level: self.level,
            pending: Vec::new(),
        }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.writer())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.writer())
    }
}

/// Splits what a guest writes into lines. A line longer than the cap is logged in pieces as
/// it arrives, so a guest writing without newlines holds no more than one line's bytes.
struct LineWriter {
    log: Arc<GuestLog>,
    level: Level,
    pending: Vec<u8>,
}

impl LineWriter {
    fn take(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let room = MAX_LOG_LINE_BYTES - self.pending.len();
            match memchr::memchr(b'\n', &bytes[..bytes.len().min(room)]) {
                Some(i) => {
                    self.pending.extend_from_slice(&bytes[..i]);
                    self.emit();
                    bytes = &bytes[i + 1..];
                }
                None if bytes.len() >= room => {
                    self.pending.extend_from_slice(&bytes[..room]);
                    self.emit();
                    bytes = &bytes[room..];
                }
                None => {
                    self.pending.extend_from_slice(bytes);
                    bytes = &[];
                }
            }
        }
    }

    fn emit(&mut self) {
        let line = String::from_utf8_lossy(&self.pending);
        self.log.line(self.level, line.trim_end_matches('\r'));
        self.pending.clear();
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            self.emit();
        }
    }
}

/// Bytes one write may carry: what `check_write` grants.
const WRITE_PERMIT: usize = 64 << 10;

#[wasmtime_wasi::async_trait]
impl Pollable for LineWriter {
    async fn ready(&mut self) {}
}

impl OutputStream for LineWriter {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.take(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

impl AsyncWrite for LineWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut().take(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
