//! Buffer chains: one per (level, metric). A chain is a time-ordered list of 512-slot buffers
//! on one time grid per chain: steps of the metric's frequency starting at the chain's first
//! write (cc-metric-store's `start` rule: a 60 s metric first written at 1000 has slots at
//! 1000, 1060, ...). Buffers sit at multiples of 512 slots of that grid. A write only appends
//! to (or overwrites in) the newest block's raw slots (`open`); encoding is the background
//! pass's (`Chain::compact`, every minute): it encodes closed blocks whole with `codec`
//! (constant, dictionary, decimal or raw), freezes the open block's older slots into encoded
//! pieces (`pieces`), so a short or sparse series pays a few bytes a value even if it never
//! fills a block, and freezes a series no longer written whole. Also owns the page pool, and
//! the late-sample rule (a write older than the chain goes into the buffer its time belongs
//! to, unless it is older than retention; a closed buffer or frozen part it lands in is
//! decoded to a raw page and encoded again by the next pass).
//!
//! Split by role: `pool` (page recycling, retention horizon, precision), `pieces` (the frozen
//! part's byte format), `open` (the raw tail), `form` (a closed buffer's contents in one
//! tagged word), `closed` (encoded closed buffers and the frozen part), `older` (a chain's
//! closed buffers, one of them inline), `chain` (the grid and
//! the write and read paths over them); each imports only the ones before it.
mod chain;
mod closed;
mod form;
mod older;
mod open;
mod pieces;
mod pool;

use super::StoreError;
use super::codec;
pub use super::page::BUFFER_CAP;
pub(crate) use super::page::Page;

/// `BUFFER_CAP` as the slot arithmetic's type.
const CAP: i64 = BUFFER_CAP as i64;

pub(crate) use chain::{Chain, slot_of};
pub use chain::{IDLE_AFTER, MAX_FREQUENCY, Newest};
pub(crate) use closed::Closed;
pub(crate) use pool::Pool;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_bytes;
