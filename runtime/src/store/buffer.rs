//! Buffer chains: one per (level, metric). A chain is a time-ordered list of fixed 512-slot
//! pages of f64 (exactly 4 KiB each), aligned to the metric's frequency on an absolute grid, so
//! every series of a metric shares slot boundaries and children can be combined without
//! re-alignment. Also owns the page pool that retention refills and new buffers draw from.

use std::sync::Mutex;

use super::StoreError;

/// Slots per buffer: 512 f64 = one 4 KiB page.
pub const BUFFER_CAP: usize = 512;
const CAP: i64 = BUFFER_CAP as i64;

/// One page of samples. Unwritten slots hold NaN.
pub(crate) type Page = Box<[f64; BUFFER_CAP]>;

/// Recycles pages released by retention/free so steady-state ingest does not hit the allocator.
pub(crate) struct Pool {
    free: Mutex<Vec<Page>>,
    max: usize,
}

impl Pool {
    pub(crate) fn new(max: usize) -> Pool {
        Pool {
            free: Mutex::new(Vec::new()),
            max,
        }
    }

    /// A page with every slot NaN.
    pub(crate) fn get(&self) -> Page {
        let reused = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match reused {
            Some(mut p) => {
                p.fill(f64::NAN);
                p
            }
            None => {
                // Allocate directly on the heap: a 4 KiB stack temporary would be copied.
                let v: Box<[f64]> = vec![f64::NAN; BUFFER_CAP].into_boxed_slice();
                v.try_into().expect("length is BUFFER_CAP")
            }
        }
    }

    pub(crate) fn put(&self, p: Page) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < self.max {
            free.push(p);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// A page plus its position: slots `block*512 .. block*512+512`; `lo..hi` is the written span.
pub(crate) struct Buf {
    pub(crate) block: i64,
    pub(crate) lo: u16,
    pub(crate) hi: u16,
    pub(crate) data: Page,
}

impl Buf {
    pub(crate) fn first_slot(&self) -> i64 {
        self.block * CAP + self.lo as i64
    }
    pub(crate) fn end_slot(&self) -> i64 {
        self.block * CAP + self.hi as i64
    }
}

/// All buffers of one series: the newest (`head`) inline, so the hot write path touches the
/// level's slot and the data page only; `older` buffers oldest first. Blocks strictly increase;
/// gaps between blocks read as NaN. A chain always holds at least its head.
pub(crate) struct Chain {
    /// Step in seconds. Stored per chain so a snapshot taken under another config still reads
    /// correctly (and is reported as misaligned if combined with differently-stepped series).
    pub(crate) freq: i64,
    head: Buf,
    older: Vec<Buf>,
}

/// Slot index of a timestamp: timestamps are rounded to the nearest multiple of `freq`, so
/// jitter of up to half a step either way lands in the intended slot.
#[inline]
pub(crate) fn slot_of(ts: i64, freq: i64) -> i64 {
    ts.saturating_add(freq / 2).div_euclid(freq)
}

impl Chain {
    /// A chain holding one value.
    pub(crate) fn new(freq: i64, ts: i64, value: f64, pool: &Pool) -> Chain {
        let slot = slot_of(ts, freq);
        Chain {
            freq,
            head: Buf::new(slot, value, pool),
            older: Vec::new(),
        }
    }

    /// A chain from restored buffers (ascending blocks); `None` if there are none.
    pub(crate) fn from_bufs(freq: i64, mut bufs: Vec<Buf>) -> Option<Chain> {
        let head = bufs.pop()?;
        bufs.shrink_to_fit();
        Some(Chain {
            freq,
            head,
            older: bufs,
        })
    }

    /// Buffers oldest first.
    pub(crate) fn bufs(&self) -> impl Iterator<Item = &Buf> {
        self.older.iter().chain(std::iter::once(&self.head))
    }

    pub(crate) fn buffer_count(&self) -> usize {
        self.older.len() + 1
    }

    /// Writes one value; overwrites an existing slot; rejects slots older than the oldest buffer.
    #[inline]
    pub(crate) fn write(&mut self, ts: i64, value: f64, pool: &Pool) -> Result<(), StoreError> {
        let slot = slot_of(ts, self.freq);
        let block = slot.div_euclid(CAP);
        let off = slot.rem_euclid(CAP) as usize;
        if block == self.head.block {
            set(&mut self.head, off, value);
            return Ok(());
        }
        self.write_slow(ts, block, off, value, pool)
    }

    #[cold]
    fn write_slow(
        &mut self,
        ts: i64,
        block: i64,
        off: usize,
        value: f64,
        pool: &Pool,
    ) -> Result<(), StoreError> {
        let slot = block * CAP + off as i64;
        if block > self.head.block {
            let old = std::mem::replace(&mut self.head, Buf::new(slot, value, pool));
            // Grow by one: chains are long-lived and a doubling Vec would waste headers.
            self.older.reserve_exact(1);
            self.older.push(old);
            return Ok(());
        }
        let oldest = self.older.first().map_or(self.head.block, |b| b.block);
        if block < oldest {
            return Err(StoreError::TooOld {
                ts,
                oldest: oldest * CAP * self.freq,
            });
        }
        match self.older.binary_search_by_key(&block, |b| b.block) {
            Ok(i) => set(&mut self.older[i], off, value),
            Err(i) => {
                // A gap inside the chain: fill it with a new page.
                self.older.reserve_exact(1);
                self.older.insert(i, Buf::new(slot, value, pool));
            }
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
        let start = self.older.partition_point(|b| b.block < first_block);
        for b in self.older[start..]
            .iter()
            .chain(std::iter::once(&self.head))
        {
            if k >= k1 {
                break;
            }
            let bstart = b.block * CAP;
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
        let old = |b: &Buf| (b.end_slot() - 1) * self.freq < t;
        let n = self.older.partition_point(old);
        for b in self.older.drain(..n) {
            pool.put(b.data);
        }
        if n > 0 {
            self.older.shrink_to_fit();
        }
        if self.older.is_empty() && old(&self.head) {
            // The caller releases the head with the chain.
            return (n + 1, true);
        }
        (n, false)
    }

    /// Most recent written slot's time and value (NaN slots skipped within the newest buffer).
    pub(crate) fn latest(&self) -> Option<(i64, f64)> {
        let b = &self.head;
        (b.lo..b.hi)
            .rev()
            .map(|o| (b.block * CAP + o as i64, b.data[o as usize]))
            .find(|(_, v)| !v.is_nan())
            .map(|(k, v)| (k * self.freq, v))
    }

    pub(crate) fn samples(&self) -> usize {
        self.bufs().map(|b| (b.hi - b.lo) as usize).sum()
    }

    /// Returns every page to the pool; the count of buffers.
    pub(crate) fn release(self, pool: &Pool) -> usize {
        let n = self.buffer_count();
        for b in self.older {
            pool.put(b.data);
        }
        pool.put(self.head.data);
        n
    }
}

impl Buf {
    fn new(slot: i64, value: f64, pool: &Pool) -> Buf {
        let off = slot.rem_euclid(CAP) as usize;
        let mut b = Buf {
            block: slot.div_euclid(CAP),
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
        let mut c = Chain::new(10, 100, 1.0, &pool);
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
        let pool = Pool::new(8);
        let mut c = Chain::new(1, 0, 0.0, &pool);
        for t in 1..1100 {
            c.write(t, t as f64, &pool).unwrap();
        }
        assert_eq!(c.buffer_count(), 3);
        // Far jump leaves a gap of blocks; a write into the gap creates a page there.
        c.write(5000, 5.0, &pool).unwrap();
        c.write(3000, 3.0, &pool).unwrap();
        let blocks: Vec<i64> = c.bufs().map(|b| b.block).collect();
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
    fn pool_pages_are_reset() {
        let pool = Pool::new(1);
        let mut p = pool.get();
        p[7] = 1.0;
        pool.put(p);
        let q = pool.get();
        assert!(q.iter().all(|v| v.is_nan()));
    }
}
