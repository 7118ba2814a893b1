//! Buffer chains: one per (level, metric). A chain is a time-ordered list of 512-slot buffers
//! on one time grid per chain: steps of the metric's frequency starting at the chain's first
//! write (cc-metric-store's `start` rule: a 60 s metric first written at 1000 has slots at
//! 1000, 1060, ...). Buffers sit at multiples of 512 slots of that grid. The newest (open)
//! block keeps only its last up to 32 slots raw (4 slots, doubling); the slots before them are
//! frozen into encoded pieces as the series moves on (`pieces`), so a short or sparse series
//! pays a few bytes a value even if it never fills a block. A block that closes (the next
//! write lands in a later block) is encoded whole by `codec` (constant, dictionary, decimal or
//! raw) and read back by decoding. Also owns the page pool, and the late-sample rule (a write
//! older than the chain goes into the buffer its time belongs to, unless it is older than
//! retention; a closed buffer or frozen part it lands in is decoded to a raw page and encoded
//! again when the chain next closes a block).
//!
//! Split by role: `pool` (page recycling, retention horizon, precision), `pieces` (the frozen
//! part's byte format), `open` (the raw tail), `closed` (encoded closed buffers and the frozen
//! part), `chain` (the grid and the write and read paths over them); each imports only the
//! ones before it.
mod chain;
mod closed;
mod open;
mod pieces;
mod pool;

use super::StoreError;
use super::codec;
pub use super::page::BUFFER_CAP;
pub(crate) use super::page::Page;

/// `BUFFER_CAP` as the slot arithmetic's type.
const CAP: i64 = BUFFER_CAP as i64;

pub(crate) use chain::Chain;
pub use chain::{IDLE_AFTER, MAX_FREQUENCY, Newest};
pub(crate) use closed::Closed;
pub(crate) use pool::Pool;

#[cfg(test)]
mod tests;
