//! The clock of every guest deadline, shared by the engine's epoch ticker (which advances it)
//! and each instance's state (which reads it while a call waits in a host function). Knows
//! nothing else of the host.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;

/// The clock of every guest deadline: the epoch ticker's count of [`EPOCH_TICK`](super::limits::EPOCH_TICK)s, which
/// advances only while some call into a guest is running (see [`Clock::running`]).
pub(crate) struct Clock {
    pub(super) ticks: AtomicU64,
    /// Calls into guests in flight; the ticker sleeps while there are none, so an idle daemon
    /// is not woken 100 times a second for nothing.
    pub(super) running: AtomicUsize,
    pub(super) stop: AtomicBool,
    /// The ticker thread, to wake it.
    pub(super) ticker: OnceLock<Thread>,
}

impl Clock {
    /// Ticks so far.
    pub(crate) fn now(&self) -> u64 {
        self.ticks.load(Ordering::Acquire)
    }

    /// Keeps the clock ticking while the guard lives: taken around every call into a guest.
    pub(crate) fn running(self: &Arc<Self>) -> Running {
        if self.running.fetch_add(1, Ordering::AcqRel) == 0
            && let Some(t) = self.ticker.get()
        {
            // An unpark before the ticker parks is kept as a token: no wakeup is lost.
            t.unpark();
        }
        Running(self.clone())
    }
}

/// See [`Clock::running`].
pub(crate) struct Running(Arc<Clock>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}
