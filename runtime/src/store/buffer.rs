//! Buffer chains: one per (level, metric). A chain is a time-ordered list of fixed 512-slot
//! pages of f64 (exactly 4 KiB each) on one time grid per chain: steps of the metric's
//! frequency starting at the chain's first write (cc-metric-store's `start` rule: a 60 s
//! metric first written at 1000 has slots at 1000, 1060, ...). Pages sit at multiples of 512
//! slots of that grid. Also owns the page pool that retention refills and new buffers draw
//! from, and the late-sample rule (a write older than the chain goes into the buffer its time
//! belongs to, unless it is older than retention).

use std::sync::Mutex;

use super::StoreError;

pub use super::page::BUFFER_CAP;
const CAP: i64 = BUFFER_CAP as i64;

pub(crate) use super::page::Page;

/// Recycles pages released by retention/free so steady-state ingest does not hit the allocator.
/// It also carries the retention period: every write already takes the pool, and only the
/// rare write older than a whole chain asks for it (then it reads the clock).
pub(crate) struct Pool {
    free: Mutex<Vec<Page>>,
    max: usize,
    /// Seconds a sample stays in memory; 0 keeps everything (no retention pass runs).
    retention: i64,
}

impl Pool {
    /// A pool without retention (tests: nothing is too old).
    #[cfg(test)]
    pub(crate) fn new(max: usize) -> Pool {
        Pool::with_retention(max, 0)
    }

    pub(crate) fn with_retention(max: usize, retention_secs: u64) -> Pool {
        Pool {
            free: Mutex::new(Vec::new()),
            max,
            retention: i64::try_from(retention_secs).unwrap_or(i64::MAX),
        }
    }

    /// The oldest time a late write may still have: what retention has not freed yet.
    fn horizon(&self) -> i64 {
        if self.retention == 0 {
            return i64::MIN;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        now.saturating_sub(self.retention)
    }

    /// A page with every slot NaN.
    pub(crate) fn get(&self) -> Page {
        let reused = crate::util::lock(&self.free).pop();
        match reused {
            Some(mut p) => {
                p.fill(f64::NAN);
                p
            }
            None => Page::new_nan(),
        }
    }

    pub(crate) fn put(&self, p: Page) {
        let mut free = crate::util::lock(&self.free);
        if free.len() < self.max {
            free.push(p);
        }
    }

    pub(crate) fn len(&self) -> usize {
        crate::util::lock(&self.free).len()
    }
}

/// A page plus its position: slots `block*512 .. block*512+512`; `lo..hi` is the written span.
/// 16 bytes: an `i32` block covers slots up to ±2^40, i.e. ±35,000 years at a 1 s step.
pub(crate) struct Buf {
    pub(crate) data: Page,
    pub(crate) block: i32,
    pub(crate) lo: u16,
    pub(crate) hi: u16,
}

impl Buf {
    pub(crate) fn first_slot(&self) -> i64 {
        self.block as i64 * CAP + self.lo as i64
    }
    pub(crate) fn end_slot(&self) -> i64 {
        self.block as i64 * CAP + self.hi as i64
    }
}

/// All buffers of one series: the newest (`head`) inline, so the hot write path touches the
/// level's slot and the data page only; `older` buffers oldest first, in an exactly sized
/// slice (a chain gains a buffer every 512 steps; a Vec's capacity would be dead weight).
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
    older: Box<[Buf]>,
}

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

/// Appends `b` to a boxed slice (one reallocation; chains grow rarely).
fn push(older: &mut Box<[Buf]>, b: Buf) {
    insert(older, older.len(), b);
}

fn insert(older: &mut Box<[Buf]>, i: usize, b: Buf) {
    let mut v = std::mem::take(older).into_vec();
    v.reserve_exact(1);
    v.insert(i, b);
    *older = v.into_boxed_slice();
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
            older: Box::default(),
        })
    }

    /// A chain from restored buffers (ascending blocks); `None` if there are none or the
    /// step or phase is out of range.
    pub(crate) fn from_bufs(id: u32, freq: u16, phase: u16, mut bufs: Vec<Buf>) -> Option<Chain> {
        if freq == 0 || phase >= freq {
            return None;
        }
        let head = bufs.pop()?;
        Some(Chain {
            id,
            freq,
            phase,
            head,
            older: bufs.into_boxed_slice(),
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

    /// Buffers oldest first.
    pub(crate) fn bufs(&self) -> impl Iterator<Item = &Buf> {
        self.older.iter().chain(std::iter::once(&self.head))
    }

    pub(crate) fn buffer_count(&self) -> usize {
        self.older.len() + 1
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
                h.data[(h.hi - 1) as usize] = value;
                return Ok(());
            }
            if (freq..2 * freq).contains(&d) && (h.hi as usize) < BUFFER_CAP {
                h.data[h.hi as usize] = value;
                h.hi += 1;
                return Ok(());
            }
        }
        // Anywhere else in the head buffer (an overwrite or a gap) is still common enough to
        // stay inline.
        let slot = slot_of(ts, freq, phase);
        if slot.div_euclid(CAP) == h.block as i64 {
            set(h, slot.rem_euclid(CAP) as usize, value);
            return Ok(());
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
            let old = std::mem::replace(&mut self.head, Buf::new(block, slot, value, pool));
            push(&mut self.older, old);
            return Ok(());
        }
        let oldest = self.older.first().unwrap_or(&self.head).first_slot();
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
            Ok(i) => set(&mut self.older[i], off, value),
            // A gap inside the chain or before it: a new page there, blocks stay ascending.
            Err(i) => insert(&mut self.older, i, Buf::new(block, slot, value, pool)),
        }
        Ok(())
    }

    /// First written slot and one past the last written slot.
    pub(crate) fn span(&self) -> (i64, i64) {
        let first = self.older.first().unwrap_or(&self.head);
        (first.first_slot(), self.head.end_slot())
    }

    /// Copies slots `k0..k1` into `out` (len k1-k0), NaN where nothing was written.
    pub(crate) fn copy_into(&self, k0: i64, k1: i64, out: &mut [f64]) {
        self.visit(
            k0,
            k1,
            out,
            |o, s| o.copy_from_slice(s),
            |o| o.fill(f64::NAN),
        );
    }

    /// Adds slots `k0..k1` into `out`; slots without data make the sum NaN.
    pub(crate) fn add_into(&self, k0: i64, k1: i64, out: &mut [f64]) {
        self.visit(
            k0,
            k1,
            out,
            |o, s| o.iter_mut().zip(s).for_each(|(a, b)| *a += *b),
            |o| o.fill(f64::NAN),
        );
    }

    /// Walks `k0..k1` buffer by buffer, handing contiguous pieces to `data` or `gap`.
    fn visit(
        &self,
        k0: i64,
        k1: i64,
        out: &mut [f64],
        mut data: impl FnMut(&mut [f64], &[f64]),
        mut gap: impl FnMut(&mut [f64]),
    ) {
        debug_assert_eq!(out.len() as i64, k1 - k0);
        let mut k = k0;
        let first_block = k0.div_euclid(CAP);
        let start = self
            .older
            .partition_point(|b| (b.block as i64) < first_block);
        for b in self.older[start..]
            .iter()
            .chain(std::iter::once(&self.head))
        {
            if k >= k1 {
                break;
            }
            let bstart = b.block as i64 * CAP;
            if bstart >= k1 {
                break;
            }
            if bstart + CAP <= k {
                continue;
            }
            if bstart > k {
                gap(&mut out[(k - k0) as usize..(bstart - k0) as usize]);
                k = bstart;
            }
            let end = (bstart + CAP).min(k1);
            let src = &b.data[(k - bstart) as usize..(end - bstart) as usize];
            data(&mut out[(k - k0) as usize..(end - k0) as usize], src);
            k = end;
        }
        if k < k1 {
            gap(&mut out[(k - k0) as usize..]);
        }
    }

    /// Releases buffers whose written data lies entirely before time `t`. Returns the count
    /// and whether the whole chain went (then it must be dropped via [`Chain::release`]).
    pub(crate) fn free_before(&mut self, t: i64, pool: &Pool) -> (usize, bool) {
        let (freq, phase) = (self.step(), self.phase());
        let old = |b: &Buf| (b.end_slot() - 1) * freq + phase < t;
        let n = self.older.partition_point(old);
        if n > 0 {
            let mut v = std::mem::take(&mut self.older).into_vec();
            for b in v.drain(..n) {
                pool.put(b.data);
            }
            self.older = v.into_boxed_slice();
        }
        if self.older.is_empty() && old(&self.head) {
            // The caller releases the head with the chain.
            return (n + 1, true);
        }
        (n, false)
    }

    /// Whether every buffer (only the head remains after `free_before`) lies before `t`.
    pub(crate) fn is_expired(&self, t: i64) -> bool {
        self.older.is_empty() && self.time(self.head.end_slot() - 1) < t
    }

    /// Most recent written slot's time and value (NaN slots skipped within the newest buffer).
    pub(crate) fn latest(&self) -> Option<(i64, f64)> {
        let b = &self.head;
        (b.lo..b.hi)
            .rev()
            .map(|o| (b.block as i64 * CAP + o as i64, b.data[o as usize]))
            .find(|(_, v)| !v.is_nan())
            .map(|(k, v)| (self.time(k), v))
    }

    /// [`Chain::latest`], with the series' step and the time of the written slot before it
    /// in the newest buffer (`None`: the newest buffer holds one value): how often the series
    /// is written, which the exposition's staleness rule needs.
    pub(crate) fn newest(&self) -> Option<Newest> {
        let b = &self.head;
        let mut written = (b.lo..b.hi)
            .rev()
            .map(|o| (b.block as i64 * CAP + o as i64, b.data[o as usize]))
            .filter(|(_, v)| !v.is_nan());
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
    pub(crate) fn release(self, pool: &Pool) -> usize {
        let n = self.buffer_count();
        for b in self.older.into_vec() {
            pool.put(b.data);
        }
        pool.put(self.head.data);
        n
    }
}

impl Buf {
    fn new(block: i32, slot: i64, value: f64, pool: &Pool) -> Buf {
        let off = slot.rem_euclid(CAP) as usize;
        let mut b = Buf {
            block,
            lo: off as u16,
            hi: off as u16 + 1,
            data: pool.get(),
        };
        b.data[off] = value;
        b
    }
}

#[inline]
fn set(b: &mut Buf, off: usize, value: f64) {
    b.data[off] = value;
    let o = off as u16;
    if o < b.lo {
        b.lo = o;
    }
    if o >= b.hi {
        b.hi = o + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_gaps_and_overwrite() {
        let pool = Pool::new(8);
        let mut c = Chain::new(0, 10, 100, 1.0, &pool).unwrap();
        c.write(121, 3.0, &pool).unwrap(); // rounds to 120
        c.write(104, 2.0, &pool).unwrap(); // rounds to 100: overwrite
        assert_eq!(c.span(), (10, 13));
        let mut out = vec![0.0; 4];
        c.copy_into(10, 14, &mut out);
        assert_eq!(out[0], 2.0);
        assert!(out[1].is_nan());
        assert_eq!(out[2], 3.0);
        assert!(out[3].is_nan());
    }

    #[test]
    fn chain_spans_buffers_and_fills_gaps() {
        // Retention of an hour: the write at t=10 below is decades older than that.
        let pool = Pool::with_retention(8, 3600);
        let mut c = Chain::new(0, 1, 0, 0.0, &pool).unwrap();
        for t in 1..1100 {
            c.write(t, t as f64, &pool).unwrap();
        }
        assert_eq!(c.buffer_count(), 3);
        // Far jump leaves a gap of blocks; a write into the gap creates a page there.
        c.write(5000, 5.0, &pool).unwrap();
        c.write(3000, 3.0, &pool).unwrap();
        let blocks: Vec<i32> = c.bufs().map(|b| b.block).collect();
        assert_eq!(blocks, vec![0, 1, 2, 5, 9]);
        let mut out = vec![0.0; 5001];
        c.copy_into(0, 5001, &mut out);
        assert_eq!(out[1099], 1099.0);
        assert!(out[1100].is_nan());
        assert_eq!(out[3000], 3.0);
        assert_eq!(out[5000], 5.0);
        assert_eq!(c.free_before(1024, &pool), (2, false));
        assert!(matches!(
            c.write(10, 1.0, &pool),
            Err(StoreError::TooOld { .. })
        ));
        assert_eq!(pool.len(), 2);
        assert_eq!(c.free_before(i64::MAX, &pool), (3, true));
        assert_eq!(c.release(&pool), 1);
        assert_eq!(pool.len(), 5);
    }

    #[test]
    fn the_grid_starts_at_the_first_write() {
        // cc-metric-store's `start` rule: a 60 s chain first written at 1000 has slots at
        // 1000 + 60k, and a time within half a step of one lands in it.
        let pool = Pool::new(4);
        let mut c = Chain::new(0, 60, 1000, 1.0, &pool).unwrap();
        assert_eq!(c.phase(), 1000 % 60);
        assert_eq!(c.time(c.span().0), 1000);
        c.write(1089, 2.0, &pool).unwrap(); // nearer 1060 than 1120
        c.write(1090, 3.0, &pool).unwrap(); // half a step: the later slot, as cc-metric-store
        assert_eq!(c.slot(1089), c.slot(1060));
        assert_eq!(c.slot(1090), c.slot(1120));
        assert_eq!(c.latest(), Some((1120, 3.0)));
        // Negative times and a phase keep the same arithmetic.
        let c = Chain::new(0, 30, -7, 0.0, &pool).unwrap();
        assert_eq!((c.phase(), c.time(c.span().0)), (23, -7));
    }

    #[test]
    fn late_writes_go_where_their_time_belongs() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let pool = Pool::with_retention(8, 86_400);
        let t0 = now - 3600;
        let mut c = Chain::new(0, 1, t0, 0.0, &pool).unwrap();
        // 1,000 older samples in time order after the newest: every one kept, in buffers
        // created before the head, blocks ascending.
        for i in 1..=1000 {
            c.write(t0 - i, -(i as f64), &pool).unwrap();
        }
        let blocks: Vec<i32> = c.bufs().map(|b| b.block).collect();
        assert!(blocks.windows(2).all(|w| w[0] < w[1]), "{blocks:?}");
        assert_eq!(c.samples(), 1001);
        // Re-sending is idempotent: same slot, same count.
        c.write(t0 - 500, -500.0, &pool).unwrap();
        assert_eq!(c.samples(), 1001);
        let mut out = vec![0.0; 1001];
        let k0 = c.slot(t0 - 1000);
        c.copy_into(k0, k0 + 1001, &mut out);
        assert_eq!(out[0], -1000.0);
        assert_eq!(out[500], -500.0);
        assert_eq!(out[1000], 0.0);
        // Older than retention: refused.
        assert!(matches!(
            c.write(now - 86_400 - 10, 1.0, &pool),
            Err(StoreError::TooOld { .. })
        ));
        // Without retention (0 = keep everything) nothing is too old.
        let pool = Pool::new(8);
        let mut c = Chain::new(0, 10, 1_000_000, 0.0, &pool).unwrap();
        c.write(5, 1.0, &pool).unwrap();
        assert_eq!(c.buffer_count(), 2);
    }

    #[test]
    fn headers_stay_small() {
        // The memory goal (bytes per sample including headers) depends on these.
        assert_eq!(std::mem::size_of::<Buf>(), 16);
        assert_eq!(std::mem::size_of::<Chain>(), 40);
    }

    #[test]
    fn fast_path_agrees_with_division() {
        // Steps with jitter around the rounding boundary, repeats, gaps and a buffer change.
        let pool = Pool::new(8);
        for freq in [1u16, 2, 7, 60] {
            let f = freq as i64;
            let mut c = Chain::new(0, freq, 5 * f, 0.0, &pool).unwrap();
            let mut expect = std::collections::BTreeMap::new();
            expect.insert(5, 0.0);
            let mut ts = 5 * f;
            for i in 1..1500i64 {
                ts += [f, f, 0, f + f / 2, f - f / 2, 2 * f][(i % 6) as usize];
                let t = ts + [0, f / 2, -(f / 2), (f - 1) / 2][(i % 4) as usize];
                c.write(t, i as f64, &pool).unwrap();
                expect.insert(slot_of(t, f, 0), i as f64);
            }
            let (k0, k1) = c.span();
            let mut out = vec![0.0; (k1 - k0) as usize];
            c.copy_into(k0, k1, &mut out);
            for (k, v) in out.iter().enumerate() {
                match expect.get(&(k0 + k as i64)) {
                    Some(e) => assert_eq!(v, e, "freq {freq} slot {}", k0 + k as i64),
                    None => assert!(v.is_nan()),
                }
            }
        }
    }

    #[test]
    fn timestamps_beyond_the_block_range_are_refused() {
        let pool = Pool::new(1);
        let mut c = Chain::new(0, 1, 0, 0.0, &pool).unwrap();
        assert!(matches!(
            c.write(i64::MAX, 1.0, &pool),
            Err(StoreError::TimestampOutOfRange { .. })
        ));
        assert!(Chain::new(0, 1, i64::MIN, 0.0, &pool).is_err());
    }

    #[test]
    fn pool_pages_are_reset() {
        let pool = Pool::new(1);
        let mut p = pool.get();
        p[7] = 1.0;
        pool.put(p);
        let q = pool.get();
        assert!(q.iter().all(|v| v.is_nan()));
    }
}
