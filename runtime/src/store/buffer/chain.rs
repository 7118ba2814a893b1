//! A chain: all buffers of one series on one time grid, the write path (append, overwrite,
//! late samples, closing a buffer), reads of a slot range, retention. Owns the grid and the
//! order of buffers; the buffers' own forms live in `open` and `closed`.

use super::closed::Closed;
use super::older::Older;
use super::open::Buf;
use super::pieces::FREEZE;
use super::pool::Pool;
use super::{BUFFER_CAP, CAP, StoreError};

/// Where a buffer lies: what [`Chain::bufs`] hands out for both kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) block: i32,
    pub(crate) lo: u16,
    pub(crate) hi: u16,
}

/// All buffers of one series: the open one (`head`) inline, so the hot write path touches the
/// level's slot and the data only; closed (`older`) buffers oldest first, one inline or an
/// exactly sized slice (a chain gains a buffer every 512 steps; a Vec's capacity would be
/// dead weight).
/// Blocks strictly increase; gaps between blocks read as NaN. A chain always holds its head.
pub(crate) struct Chain {
    /// The metric (registry id) this series belongs to; next to `freq` so a chain is 40 bytes.
    pub(crate) id: u32,
    /// Step in seconds (1 to [`MAX_FREQUENCY`]). Stored per chain so a snapshot taken under
    /// another config still reads correctly.
    pub(crate) freq: u16,
    /// Where the grid starts within a step: slot `k` is the time `k * freq + phase`. The first
    /// write's time modulo `freq`, fixed for the chain's life (`0..freq`).
    pub(crate) phase: u16,
    head: Buf,
    older: Older,
}

/// Seconds between two background passes (`Chain::compact`, run by the store's workers).
pub const COMPACT_EVERY_SECS: i64 = 60;

/// Most raw slots the pass leaves free in the tail for the next minute's writes: a series
/// written every second would otherwise keep 61 (a 1 KiB array) between passes; past these a
/// write doubles the array (a copy of at most a few hundred bytes, twice a minute).
const MAX_ROOM: usize = 8;

/// A series not written for this long (and two of its steps) counts as no longer written: the
/// background pass freezes all its slots but the newest (a process that exited).
pub const IDLE_AFTER: i64 = 120;

/// Largest step a chain holds: its step and phase share the 32 bits a `u32` step had, which
/// keeps a chain at 40 bytes (the memory goal counts it per series). 65,535 s (18 h) steps
/// make a 512-slot buffer cover 388 days; cc-metric-store's metrics step in seconds to minutes.
pub const MAX_FREQUENCY: u64 = u16::MAX as u64;

/// A series' newest value ([`crate::store::Store::for_each_newest`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Newest {
    /// Its slot's time, seconds.
    pub ts: i64,
    pub value: f64,
    /// The series' step, seconds.
    pub step: i64,
    /// The slot written before it in the newest buffer, seconds.
    pub previous: Option<i64>,
}

/// Slot index of a timestamp on a grid starting at `phase`: timestamps are rounded to the
/// nearest step, so jitter of up to half a step either way lands in the intended slot (as
/// cc-metric-store's buffers start half a step before their first write).
#[inline]
pub(crate) fn slot_of(ts: i64, freq: i64, phase: i64) -> i64 {
    ts.saturating_sub(phase)
        .saturating_add(freq / 2)
        .div_euclid(freq)
}

/// The block of a slot, if it fits the 32-bit block index.
fn block_of(slot: i64, ts: i64) -> Result<i32, StoreError> {
    i32::try_from(slot.div_euclid(CAP)).map_err(|_| StoreError::TimestampOutOfRange { ts })
}

fn insert(older: &mut Older, i: usize, b: Closed) {
    let mut v = older.take_vec();
    v.reserve_exact(1);
    v.insert(i, b);
    *older = Older::from_vec(v);
}

impl Chain {
    /// A chain holding one value; its grid starts at `ts`.
    pub(crate) fn new(
        id: u32,
        freq: u16,
        ts: i64,
        value: f64,
        pool: &Pool,
    ) -> Result<Chain, StoreError> {
        let freq = freq.max(1);
        let phase = ts.rem_euclid(freq as i64);
        let slot = slot_of(ts, freq as i64, phase);
        Ok(Chain {
            id,
            freq,
            phase: phase as u16,
            head: Buf::new(block_of(slot, ts)?, slot, value, pool),
            older: Older::default(),
        })
    }

    /// A chain from restored buffers (ascending blocks, the head's after every closed one);
    /// `None` if the step or phase is out of range or the blocks are out of order.
    ///
    /// The open block comes as its values from slot offset `lo` (what a snapshot holds): all
    /// but the last up to [`FREEZE`] of them are frozen at once, as appends would have left it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        id: u32,
        freq: u16,
        phase: u16,
        mut older: Vec<Closed>,
        block: i32,
        lo: u16,
        values: &[f64],
        pool: &Pool,
    ) -> Option<Chain> {
        if freq == 0 || phase >= freq || values.is_empty() {
            return None;
        }
        let ordered = older.windows(2).all(|w| w[0].block < w[1].block)
            && older.last().is_none_or(|b| b.block < block);
        if !ordered {
            return None;
        }
        let tail = (values.len() - 1) % FREEZE + 1;
        let split = values.len() - tail;
        if split > 0 {
            let digits = pool.precision(id);
            older.push(Closed::frozen(block, lo, &values[..split], digits));
        }
        let head = Buf::from_values(block, lo + split as u16, &values[split..], pool);
        Some(Chain {
            id,
            freq,
            phase,
            head,
            older: Older::from_vec(older),
        })
    }

    /// The step as the i64 the arithmetic uses.
    #[inline]
    pub(crate) fn step(&self) -> i64 {
        self.freq as i64
    }

    /// Where the grid starts within a step.
    #[inline]
    pub(crate) fn phase(&self) -> i64 {
        self.phase as i64
    }

    /// The slot a timestamp lands in.
    #[inline]
    pub(crate) fn slot(&self, ts: i64) -> i64 {
        slot_of(ts, self.step(), self.phase())
    }

    /// The time of slot `k`.
    #[inline]
    pub(crate) fn time(&self, k: i64) -> i64 {
        k.saturating_mul(self.step()).saturating_add(self.phase())
    }

    /// The time of the newest slot written (or overwritten with a gap).
    pub(crate) fn newest_time(&self) -> i64 {
        self.time(self.head.end_slot() - 1)
    }

    /// The frozen part of the open block: the last of `older` when its block is the head's.
    fn frozen(&self) -> Option<&Closed> {
        self.older.last().filter(|b| b.block == self.head.block)
    }

    /// Where the buffers lie, oldest first (the open block once, frozen part and head).
    pub(crate) fn bufs(&self) -> impl Iterator<Item = Span> + '_ {
        let (closed, _) = self.parts();
        closed
            .iter()
            .map(|b| Span {
                block: b.block,
                lo: b.lo,
                hi: b.hi,
            })
            .chain(std::iter::once(Span {
                block: self.head.block,
                lo: self.frozen().map_or(self.head.lo(), |f| f.lo),
                hi: self.head.hi,
            }))
    }

    /// The closed buffers, oldest first (without the open block's frozen part), and the open
    /// one's raw tail.
    pub(crate) fn parts(&self) -> (&[Closed], &Buf) {
        let n = self.older.len() - usize::from(self.frozen().is_some());
        (&self.older[..n], &self.head)
    }

    /// The open block's slots (frozen part and raw tail) into `page` at their offsets; the
    /// offset of its first slot.
    pub(crate) fn open_values(&self, page: &mut [f64; BUFFER_CAP]) -> u16 {
        let h = &self.head;
        page[h.lo() as usize..h.hi as usize].copy_from_slice(h.values());
        match self.frozen() {
            Some(f) => {
                f.values_into(page);
                f.lo
            }
            None => h.lo(),
        }
    }

    /// Heap bytes of the closed buffers' slice alone (none for one inline).
    #[cfg(test)]
    pub(super) fn slice_bytes(&self) -> usize {
        self.older.heap_bytes()
    }

    pub(crate) fn buffer_count(&self) -> usize {
        self.parts().0.len() + 1
    }

    /// Heap bytes this chain holds beyond its own 40: slots, encoded buffers, the slice of
    /// closed buffers.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.head.heap_bytes()
            + self.older.heap_bytes()
            + self.older.iter().map(Closed::heap_bytes).sum::<usize>()
    }

    /// Writes one value into the slot its time belongs to, wherever in the chain that is (a
    /// new buffer where none covers it); overwrites an existing slot, so re-sending a sample
    /// is idempotent. Refuses only what is older than the chain and than retention.
    ///
    /// The common case, the step after the newest one (or the newest one again) landing in the
    /// head buffer, is recognised with a multiplication instead of a 64-bit division.
    #[inline]
    pub(crate) fn write(&mut self, ts: i64, value: f64, pool: &Pool) -> Result<(), StoreError> {
        let freq = self.step();
        let phase = self.phase();
        let h = &mut self.head;
        let last = h.block as i64 * CAP + h.hi as i64 - 1;
        // No overflow on this path: x is exact, and `d` is the distance from `last`'s start.
        if let Some(d) = ts
            .checked_sub(phase)
            .and_then(|t| t.checked_add(freq / 2))
            .zip(last.checked_mul(freq))
            .and_then(|(x, base)| x.checked_sub(base))
        {
            if (0..freq).contains(&d) {
                h.set_last(value);
                return Ok(());
            }
            if (freq..2 * freq).contains(&d) && (h.hi as usize) < BUFFER_CAP {
                // A plain append: encoding is the background pass's (`compact`).
                h.push(value, pool);
                return Ok(());
            }
        }
        // Anywhere else in the head buffer (an overwrite or a gap) is still common enough to
        // stay inline; below the raw tail with a frozen part, the frozen part takes it.
        let slot = slot_of(ts, freq, phase);
        if slot.div_euclid(CAP) == h.block as i64 {
            let off = slot.rem_euclid(CAP) as usize;
            let frozen = self.older.last().is_some_and(|b| b.block == h.block);
            if off >= h.lo() as usize || !frozen {
                h.set(off, value, pool);
                return Ok(());
            }
        }
        self.write_slow(ts, slot, value, pool)
    }

    #[cold]
    fn write_slow(
        &mut self,
        ts: i64,
        slot: i64,
        value: f64,
        pool: &Pool,
    ) -> Result<(), StoreError> {
        let block = block_of(slot, ts)?;
        let off = slot.rem_euclid(CAP) as usize;
        if block > self.head.block {
            self.close_head(Buf::new(block, slot, value, pool), pool);
            return Ok(());
        }
        let oldest = self
            .older
            .first()
            .map_or(self.head.first_slot(), Closed::first_slot);
        if slot < oldest {
            // Late: a backfill or a lagging forwarder. Kept unless retention already freed
            // (or is about to free) its time, which would make it a sample nobody can read.
            let horizon = pool.horizon();
            if ts < horizon {
                return Err(StoreError::TooOld {
                    ts,
                    oldest: horizon,
                });
            }
        }
        match self.older.binary_search_by_key(&block, |b| b.block) {
            Ok(i) => self.older[i].set(off, value, pool),
            // A gap inside the chain or before it: a new buffer there, blocks stay ascending.
            Err(i) => {
                let b = Closed::raw(block, off, value, pool.get());
                insert(&mut self.older, i, b);
            }
        }
        Ok(())
    }

    /// Closes the head and makes `next` the open buffer. Nothing is encoded whole here (the
    /// background pass does it): the raw tail joins the block's frozen pieces, or, if none
    /// were frozen yet, its slots become the closed buffer's raw page.
    fn close_head(&mut self, next: Buf, pool: &Pool) {
        let old = std::mem::replace(&mut self.head, next);
        let mut v = self.older.take_vec();
        let closed = match v.pop_if(|b| b.block == old.block) {
            Some(mut f) => {
                // One piece more, no merge: the next pass encodes the block whole.
                f.append(old.values(), false, pool.precision(self.id), pool);
                old.release(Some(pool));
                f
            }
            None => Closed::from_head(old),
        };
        v.reserve_exact(1);
        v.push(closed);
        self.older = Older::from_vec(v);
    }

    /// The background pass over this chain (`Store::compact`, off the write path): closed
    /// buffers still raw or in pieces are encoded as one buffer each; the open buffer's
    /// older slots are frozen into pieces of [`FREEZE`]; a series not written for
    /// [`IDLE_AFTER`] (and two steps) has every slot but its newest frozen into one piece,
    /// and its raw storage shrunk to that slot.
    pub(crate) fn compact(&mut self, now: i64, pool: &Pool) {
        let digits = pool.precision(self.id);
        let block = self.head.block;
        for b in self.older.iter_mut().filter(|b| b.block != block) {
            b.seal(digits, pool);
        }
        let newest = self.time(self.head.end_slot() - 1);
        let idle = now.saturating_sub(newest) > IDLE_AFTER.max(2 * self.step());
        let len = self.head.len();
        let k = if idle {
            len - 1
        } else {
            (len - 1) / FREEZE * FREEZE
        };
        let room = if idle {
            0
        } else {
            ((COMPACT_EVERY_SECS / self.step()) as usize + 1).min(MAX_ROOM)
        };
        let (head, older) = (&mut self.head, &mut self.older);
        let values = &head.values()[..k];
        match older.last_mut().filter(|b| b.block == block) {
            Some(f) if idle => f.append_as_one(values, digits, pool),
            Some(f) => values
                .chunks(FREEZE)
                .for_each(|c| f.append(c, true, digits, pool)),
            None if k == 0 => {}
            None => {
                let step = if idle { k } else { FREEZE };
                let mut f = Closed::frozen(block, head.lo(), &values[..step], digits);
                values[step..]
                    .chunks(FREEZE)
                    .for_each(|c| f.append(c, true, digits, pool));
                let n = older.len();
                insert(older, n, f);
            }
        }
        head.drain_front(k);
        // Room for what the series writes until the next pass, no more (a burst, or a
        // block's worth written before any pass ran, left it larger), and only within the
        // power of two the tail needs anyway: raw storage comes in powers of two, so a tail of
        // 10 with a minute's 7 slots of room took 32 slots; it takes 16, and a write past them
        // doubles it (a copy of a few slots, no encoding). Tails were 0.36 B/sample of this
        // host's hour.
        let len = head.len();
        head.fit((1usize << (len + room).ilog2()).max(len), pool);
    }

    /// First written slot and one past the last written slot.
    pub(crate) fn span(&self) -> (i64, i64) {
        let first = self
            .older
            .first()
            .map_or(self.head.first_slot(), Closed::first_slot);
        (first, self.head.end_slot())
    }

    /// Copies slots `k0..k1` into `out` (len k1-k0), NaN where nothing was written.
    pub(crate) fn copy_into(&self, k0: i64, k1: i64, out: &mut [f64]) {
        self.visit(
            k0,
            k1,
            out,
            |o, s| o.copy_from_slice(s),
            |o, v| o.fill(v),
            true,
        );
    }

    /// Adds slots `k0..k1` into `out`; slots without data make the sum NaN. `out` must hold
    /// no -0.0, as no sum started at +0.0 does (`x + y` is -0.0 only when both are): adding
    /// a zero then changes nothing (`x + -0.0` is `x` for every `x`, `x + 0.0` for every
    /// `x` but -0.0), so a run of zeros (an idle series' constant block or piece) is
    /// skipped, not added slot by slot.
    pub(crate) fn add_into(&self, k0: i64, k1: i64, out: &mut [f64]) {
        self.visit(
            k0,
            k1,
            out,
            |o, s| o.iter_mut().zip(s).for_each(|(a, b)| *a += *b),
            |o, v| {
                if v != 0.0 {
                    o.iter_mut().for_each(|a| *a += v)
                }
            },
            false,
        );
    }

    /// Walks `k0..k1` buffer by buffer, handing written pieces to `data` (or, for a constant
    /// closed buffer, its value to `fill`) and gaps to `fill` with NaN. `copy`: `data` copies,
    /// so a whole closed buffer may be decoded straight into `out`.
    fn visit(
        &self,
        k0: i64,
        k1: i64,
        out: &mut [f64],
        mut data: impl FnMut(&mut [f64], &[f64]),
        mut fill: impl FnMut(&mut [f64], f64),
        copy: bool,
    ) {
        debug_assert_eq!(out.len() as i64, k1 - k0);
        let mut k = k0;
        let first_block = k0.div_euclid(CAP);
        let start = self
            .older
            .partition_point(|b| (b.block as i64) < first_block);
        // The written part `a..b` of a buffer spanning `first..end`, after a gap from `k`.
        let clip = |k: i64, first: i64, end: i64| {
            let a = first.clamp(k, k1);
            (a, end.clamp(a, k1))
        };
        let at = |x: i64| (x - k0) as usize;
        for b in &self.older[start..] {
            if k >= k1 || b.block as i64 * CAP >= k1 {
                break;
            }
            if b.end_slot() <= k {
                continue;
            }
            let (a, e) = clip(k, b.first_slot(), b.end_slot());
            fill(&mut out[at(k)..at(a)], f64::NAN);
            let off = b.block as i64 * CAP;
            if e > a {
                b.visit_range(
                    (a - off) as usize,
                    (e - off) as usize,
                    &mut out[at(a)..at(e)],
                    &mut data,
                    &mut fill,
                    copy,
                );
            }
            k = e;
        }
        let h = &self.head;
        // Not when the range ends before the head starts (a paused series: its slots would
        // be indexed from before their start).
        if k < k1 && h.end_slot() > k && h.first_slot() < k1 {
            let (a, e) = clip(k, h.first_slot(), h.end_slot());
            fill(&mut out[at(k)..at(a)], f64::NAN);
            let first = h.first_slot();
            data(
                &mut out[at(a)..at(e)],
                &h.values()[(a - first) as usize..(e - first) as usize],
            );
            k = e;
        }
        if k < k1 {
            fill(&mut out[(k - k0) as usize..], f64::NAN);
        }
    }

    /// Releases buffers whose written data lies entirely before time `t`. Returns the count
    /// and whether the whole chain went (then it must be dropped via [`Chain::release`]).
    pub(crate) fn free_before(&mut self, t: i64, pool: &Pool) -> (usize, bool) {
        let (freq, phase) = (self.step(), self.phase());
        let old = |end: i64| (end - 1) * freq + phase < t;
        let n = self.older.partition_point(|b| old(b.end_slot()));
        if n > 0 {
            let mut v = self.older.take_vec();
            for b in v.drain(..n) {
                b.release(pool);
            }
            self.older = Older::from_vec(v);
        }
        if self.older.is_empty() && old(self.head.end_slot()) {
            // The caller releases the head with the chain.
            return (n + 1, true);
        }
        (n, false)
    }

    /// Whether every buffer (only the head remains after `free_before`) lies before `t`.
    pub(crate) fn is_expired(&self, t: i64) -> bool {
        self.older.is_empty() && self.time(self.head.end_slot() - 1) < t
    }

    /// The open block's written slots, newest first, with their slot numbers (NaN skipped).
    fn head_written(&self) -> impl Iterator<Item = (i64, f64)> + '_ {
        let b = &self.head;
        let first = b.first_slot();
        let tail = b
            .values()
            .iter()
            .enumerate()
            .rev()
            .map(move |(i, v)| (first + i as i64, *v));
        // The frozen part is decoded only when the tail has too few written slots (the tail
        // was just frozen, or holds gaps).
        let frozen = self.frozen().into_iter().flat_map(|f| {
            let mut page = Box::new([0f64; BUFFER_CAP]);
            f.values_into(&mut page);
            let base = f.block as i64 * CAP;
            (f.lo as usize..f.hi as usize)
                .rev()
                .map(move |o| (base + o as i64, page[o]))
        });
        tail.chain(frozen).filter(|(_, v)| !v.is_nan())
    }

    /// Most recent written slot's time and value (NaN slots skipped within the newest buffer).
    pub(crate) fn latest(&self) -> Option<(i64, f64)> {
        self.head_written().next().map(|(k, v)| (self.time(k), v))
    }

    /// [`Chain::latest`], with the series' step and the time of the written slot before it
    /// in the newest buffer (`None`: the newest buffer holds one value): how often the series
    /// is written, which the exposition's staleness rule needs.
    pub(crate) fn newest(&self) -> Option<Newest> {
        let mut written = self.head_written();
        let (k, value) = written.next()?;
        Some(Newest {
            ts: self.time(k),
            value,
            step: self.step(),
            previous: written.next().map(|(k, _)| self.time(k)),
        })
    }

    pub(crate) fn samples(&self) -> usize {
        self.bufs().map(|b| (b.hi - b.lo) as usize).sum()
    }

    /// Returns every page to the pool; the count of buffers.
    pub(crate) fn release(mut self, pool: &Pool) -> usize {
        let n = self.buffer_count();
        for b in self.older.take_vec() {
            b.release(pool);
        }
        self.head.release(Some(pool));
        n
    }
}
