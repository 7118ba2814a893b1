//! Buffer chains: one per (level, metric). A chain is a time-ordered list of 512-slot buffers
//! on one time grid per chain: steps of the metric's frequency starting at the chain's first
//! write (cc-metric-store's `start` rule: a 60 s metric first written at 1000 has slots at
//! 1000, 1060, ...). Buffers sit at multiples of 512 slots of that grid. The newest (open)
//! buffer is raw f64 and grows with its samples (4 slots, doubling up to a 4 KiB page), so a
//! short or sparse series pays for what it holds; a buffer that closes (the next write lands
//! in a later block) is encoded by `codec` (constant, dictionary, decimal or raw) and read back
//! by decoding. Also owns the page pool that new full-size buffers draw from, and the
//! late-sample rule (a write older than the chain goes into the buffer its time belongs to,
//! unless it is older than retention; a closed buffer it lands in is decoded to a raw page
//! and encoded again when the chain next closes a buffer).

use std::ptr::NonNull;
use std::sync::Mutex;

use super::StoreError;
use super::codec;

pub use super::page::BUFFER_CAP;
const CAP: i64 = BUFFER_CAP as i64;

pub(crate) use super::page::Page;

/// Slots of a new open buffer: most series are written every step, so it doubles soon, but a
/// series written once or a few times costs 32 bytes, not a page.
const MIN_SLOTS: usize = 4;

/// Storage slots of an open buffer holding `len` slots (from its first written one).
#[inline(always)]
fn cap_for(len: usize) -> usize {
    len.next_power_of_two().clamp(MIN_SLOTS, BUFFER_CAP)
}

/// Recycles pages released by retention/free so steady-state ingest does not hit the allocator.
/// It also carries the retention period (every write already takes the pool, and only the
/// rare write older than a whole chain asks for it, then it reads the clock) and the
/// per-metric precision closed buffers are rounded to.
pub(crate) struct Pool {
    free: Mutex<Vec<Page>>,
    max: usize,
    /// Seconds a sample stays in memory; 0 keeps everything (no retention pass runs).
    retention: i64,
    /// Significant digits kept per metric id (0 = lossless); ids past the end are lossless.
    precision: Box<[u8]>,
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
            precision: Box::default(),
        }
    }

    /// Sets the significant digits per metric id (the registry's ids of configured metrics).
    pub(crate) fn with_precision(mut self, digits: Vec<u8>) -> Pool {
        self.precision = digits.into_boxed_slice();
        self
    }

    fn precision(&self, id: u32) -> u32 {
        self.precision.get(id as usize).copied().unwrap_or(0) as u32
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

/// The open buffer: slots `block*512 + lo .. block*512 + hi` written (gaps NaN), kept raw from
/// `lo` on in `cap_for(hi - lo)` slots (a pool page at full size, else a heap array); slots
/// past `hi - lo` are NaN. 16 bytes: an `i32` block covers slots up to ±2^40, i.e. ±35,000
/// years at a 1 s step.
pub(crate) struct Buf {
    data: NonNull<f64>,
    pub(crate) block: i32,
    pub(crate) lo: u16,
    pub(crate) hi: u16,
}

// SAFETY: a `Buf` owns its slots exactly like a `Box<[f64]>` (or a `Page`) would.
unsafe impl Send for Buf {}
unsafe impl Sync for Buf {}

/// Heap slots of `cap` (< 512) NaN.
fn alloc_small(cap: usize) -> NonNull<f64> {
    let b: Box<[f64]> = vec![f64::NAN; cap].into_boxed_slice();
    // SAFETY: a Box's pointer is never null.
    unsafe { NonNull::new_unchecked(Box::into_raw(b).cast::<f64>()) }
}

fn alloc_slots(cap: usize, pool: &Pool) -> NonNull<f64> {
    if cap == BUFFER_CAP {
        pool.get().into_raw()
    } else {
        alloc_small(cap)
    }
}

impl Buf {
    pub(crate) fn first_slot(&self) -> i64 {
        self.block as i64 * CAP + self.lo as i64
    }
    pub(crate) fn end_slot(&self) -> i64 {
        self.block as i64 * CAP + self.hi as i64
    }

    fn cap(&self) -> usize {
        cap_for((self.hi - self.lo) as usize)
    }

    /// The written slots `lo..hi`.
    #[inline(always)]
    pub(crate) fn values(&self) -> &[f64] {
        // SAFETY: `data` holds `cap() >= hi - lo` initialised slots owned by `self`.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), (self.hi - self.lo) as usize) }
    }

    #[inline(always)]
    fn slots_mut(&mut self) -> &mut [f64] {
        // SAFETY: as in `values`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), self.cap()) }
    }

    fn new(block: i32, slot: i64, value: f64, pool: &Pool) -> Buf {
        let off = slot.rem_euclid(CAP) as u16;
        let mut b = Buf {
            data: alloc_slots(MIN_SLOTS, pool),
            block,
            lo: off,
            hi: off + 1,
        };
        b.slots_mut()[0] = value;
        b
    }

    /// An open buffer holding `values` from slot offset `lo` (a restored head).
    pub(crate) fn from_values(block: i32, lo: u16, values: &[f64], pool: &Pool) -> Buf {
        let n = values.len();
        let mut b = Buf {
            data: alloc_slots(cap_for(n), pool),
            block,
            lo,
            hi: lo + n as u16,
        };
        b.slots_mut()[..n].copy_from_slice(values);
        b
    }

    /// Writes the slot after `hi` (the append fast path).
    #[inline(always)]
    fn push(&mut self, value: f64, pool: &Pool) {
        let len = (self.hi - self.lo) as usize;
        if len == cap_for(len) {
            self.regrow(self.lo, len + 1, pool);
        }
        // SAFETY: `len < cap()` after the growth above.
        unsafe { *self.data.as_ptr().add(len) = value };
        self.hi += 1;
    }

    /// Overwrites the newest slot.
    #[inline(always)]
    fn set_last(&mut self, value: f64) {
        let len = (self.hi - self.lo) as usize;
        // SAFETY: `len >= 1`: a buffer always holds its first write.
        unsafe { *self.data.as_ptr().add(len - 1) = value };
    }

    /// Moves the slots to storage for `len` slots starting at offset `lo` (`lo <= self.lo`).
    #[cold]
    #[inline(never)]
    fn regrow(&mut self, lo: u16, len: usize, pool: &Pool) {
        let (old_cap, new_cap) = (self.cap(), cap_for(len));
        let shift = (self.lo - lo) as usize;
        if new_cap == old_cap && shift == 0 {
            return;
        }
        let data = alloc_slots(new_cap, pool);
        let n = (self.hi - self.lo) as usize;
        // SAFETY: both regions are valid and distinct; `shift + n <= len <= new_cap`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data.as_ptr(), data.as_ptr().add(shift), n);
        }
        let old = std::mem::replace(&mut self.data, data);
        free_slots(old, old_cap, Some(pool));
        self.lo = lo;
    }

    /// Writes slot offset `off` of this buffer's block.
    #[inline]
    fn set(&mut self, off: usize, value: f64, pool: &Pool) {
        let o = off as u16;
        if o < self.lo {
            let len = (self.hi - o) as usize;
            self.regrow(o, len, pool);
        } else if o >= self.hi {
            let len = (o + 1 - self.lo) as usize;
            if len > self.cap() {
                self.regrow(self.lo, len, pool);
            }
            self.hi = o + 1;
        }
        let lo = self.lo as usize;
        self.slots_mut()[off - lo] = value;
    }

    /// Gives the slots back (a page to the pool if there is one).
    fn release(self, pool: Option<&Pool>) {
        let me = std::mem::ManuallyDrop::new(self);
        free_slots(me.data, me.cap(), pool);
    }

    /// Encodes the buffer for closing (values rounded to `digits` significant digits if set).
    fn encode(&self, digits: u32) -> Box<[u8]> {
        let mut out = Vec::with_capacity(64);
        if digits == 0 {
            codec::encode(self.values(), &mut out);
        } else {
            let mut v = [0f64; BUFFER_CAP];
            let n = self.values().len();
            for (d, s) in v.iter_mut().zip(self.values()) {
                *d = codec::round_to_digits(*s, digits);
            }
            codec::encode(&v[..n], &mut out);
        }
        out.into_boxed_slice()
    }

    /// Heap bytes of the slots.
    fn heap_bytes(&self) -> usize {
        self.cap() * 8
    }
}

fn free_slots(data: NonNull<f64>, cap: usize, pool: Option<&Pool>) {
    if cap == BUFFER_CAP {
        // SAFETY: full-size slots are always a page (`alloc_slots`).
        let page = unsafe { Page::from_raw(data) };
        match pool {
            Some(p) => p.put(page),
            None => drop(page),
        }
    } else {
        // SAFETY: smaller slots are always a boxed slice of exactly `cap` (`alloc_small`).
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(data.as_ptr(), cap)) });
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        free_slots(self.data, self.cap(), None);
    }
}

/// A closed buffer: encoded, or (after a late write landed in it) a raw page until the chain
/// encodes it again.
pub(crate) struct Closed {
    pub(crate) block: i32,
    pub(crate) lo: u16,
    pub(crate) hi: u16,
    form: Form,
}

enum Form {
    Packed(Box<[u8]>),
    /// Slot offset `o` at index `o`.
    Raw(Page),
}

impl Closed {
    fn first_slot(&self) -> i64 {
        self.block as i64 * CAP + self.lo as i64
    }
    fn end_slot(&self) -> i64 {
        self.block as i64 * CAP + self.hi as i64
    }

    /// A closed buffer from its encoded values (a restored snapshot); `None` if they do not
    /// decode to `hi - lo` slots.
    pub(crate) fn from_encoded(block: i32, lo: u16, hi: u16, bytes: &[u8]) -> Option<Closed> {
        if lo >= hi || hi as usize > BUFFER_CAP {
            return None;
        }
        let mut tmp = [0f64; BUFFER_CAP];
        codec::decode(bytes, &mut tmp[..(hi - lo) as usize]).ok()?;
        Some(Closed {
            block,
            lo,
            hi,
            form: Form::Packed(bytes.into()),
        })
    }

    /// The encoded values (encoding a raw one now).
    pub(crate) fn encoded(&self) -> std::borrow::Cow<'_, [u8]> {
        match &self.form {
            Form::Packed(b) => std::borrow::Cow::Borrowed(b),
            Form::Raw(p) => {
                let mut out = Vec::new();
                codec::encode(&p[self.lo as usize..self.hi as usize], &mut out);
                std::borrow::Cow::Owned(out)
            }
        }
    }

    /// Decodes into a raw page so a late write can land in it.
    fn open(&mut self, pool: &Pool) -> &mut Page {
        if let Form::Packed(b) = &self.form {
            let mut page = pool.get();
            let (lo, hi) = (self.lo as usize, self.hi as usize);
            // Bytes this chain encoded itself; a failure would be a codec bug, and the
            // slots then read as gaps rather than as wrong values.
            if codec::decode(b, &mut page[lo..hi]).is_err() {
                page[lo..hi].fill(f64::NAN);
            }
            self.form = Form::Raw(page);
        }
        match &mut self.form {
            Form::Raw(p) => p,
            Form::Packed(_) => unreachable!("opened above"),
        }
    }

    fn set(&mut self, off: usize, value: f64, pool: &Pool) {
        self.open(pool)[off] = value;
        let o = off as u16;
        self.lo = self.lo.min(o);
        self.hi = self.hi.max(o + 1);
    }

    /// Encodes a raw (late-written) buffer again.
    fn seal(&mut self, digits: u32, pool: &Pool) {
        if let Form::Raw(p) = &self.form {
            let mut out = Vec::new();
            let v = &p[self.lo as usize..self.hi as usize];
            if digits == 0 {
                codec::encode(v, &mut out);
            } else {
                let r: Vec<f64> = v
                    .iter()
                    .map(|x| codec::round_to_digits(*x, digits))
                    .collect();
                codec::encode(&r, &mut out);
            }
            if let Form::Raw(p) = std::mem::replace(&mut self.form, Form::Packed(out.into())) {
                pool.put(p);
            }
        }
    }

    fn release(self, pool: &Pool) {
        if let Form::Raw(p) = self.form {
            pool.put(p);
        }
    }

    fn heap_bytes(&self) -> usize {
        match &self.form {
            Form::Packed(b) => b.len(),
            Form::Raw(_) => BUFFER_CAP * 8,
        }
    }

    /// Hands the slots `k - bstart .. end - bstart` (inside `lo..hi`) to `data`, or the
    /// constant to `fill` when the buffer is one value without gaps.
    #[inline]
    fn visit_range(
        &self,
        a: usize,
        b: usize,
        out: &mut [f64],
        data: &mut impl FnMut(&mut [f64], &[f64]),
        fill: &mut impl FnMut(&mut [f64], f64),
        copy: bool,
    ) {
        match &self.form {
            Form::Raw(p) => data(out, &p[a..b]),
            Form::Packed(bytes) => {
                if let Some(v) = codec::constant(bytes) {
                    return fill(out, v);
                }
                let (lo, hi) = (self.lo as usize, self.hi as usize);
                if copy && (a, b) == (lo, hi) {
                    // The whole buffer into the answer: no copy through a scratch array.
                    if codec::decode(bytes, out).is_err() {
                        out.fill(f64::NAN);
                    }
                    return;
                }
                let mut tmp = [0f64; BUFFER_CAP];
                // The chain's own bytes; see `open`.
                if codec::decode(bytes, &mut tmp[..hi - lo]).is_err() {
                    return fill(out, f64::NAN);
                }
                data(out, &tmp[a - lo..b - lo]);
            }
        }
    }
}

/// Where a buffer lies: what [`Chain::bufs`] hands out for both kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) block: i32,
    pub(crate) lo: u16,
    pub(crate) hi: u16,
}

/// All buffers of one series: the open one (`head`) inline, so the hot write path touches the
/// level's slot and the data only; closed (`older`) buffers oldest first, in an exactly sized
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
    older: Box<[Closed]>,
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

fn insert(older: &mut Box<[Closed]>, i: usize, b: Closed) {
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

    /// A chain from restored buffers (ascending blocks, the head's after every closed one);
    /// `None` if the step or phase is out of range or the blocks are out of order.
    pub(crate) fn from_parts(
        id: u32,
        freq: u16,
        phase: u16,
        older: Vec<Closed>,
        head: Buf,
    ) -> Option<Chain> {
        if freq == 0 || phase >= freq {
            return None;
        }
        let ordered = older.windows(2).all(|w| w[0].block < w[1].block)
            && older.last().is_none_or(|b| b.block < head.block);
        if !ordered {
            return None;
        }
        Some(Chain {
            id,
            freq,
            phase,
            head,
            older: older.into_boxed_slice(),
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

    /// Where the buffers lie, oldest first.
    pub(crate) fn bufs(&self) -> impl Iterator<Item = Span> + '_ {
        self.older
            .iter()
            .map(|b| Span {
                block: b.block,
                lo: b.lo,
                hi: b.hi,
            })
            .chain(std::iter::once(Span {
                block: self.head.block,
                lo: self.head.lo,
                hi: self.head.hi,
            }))
    }

    /// The closed buffers, oldest first, and the open one.
    pub(crate) fn parts(&self) -> (&[Closed], &Buf) {
        (&self.older, &self.head)
    }

    pub(crate) fn buffer_count(&self) -> usize {
        self.older.len() + 1
    }

    /// Heap bytes this chain holds beyond its own 40: slots, encoded buffers, the slice of
    /// closed buffers.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.head.heap_bytes()
            + self.older.len() * std::mem::size_of::<Closed>()
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
                h.push(value, pool);
                return Ok(());
            }
        }
        // Anywhere else in the head buffer (an overwrite or a gap) is still common enough to
        // stay inline.
        let slot = slot_of(ts, freq, phase);
        if slot.div_euclid(CAP) == h.block as i64 {
            h.set(slot.rem_euclid(CAP) as usize, value, pool);
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
                let mut page = pool.get();
                page[off] = value;
                let b = Closed {
                    block,
                    lo: off as u16,
                    hi: off as u16 + 1,
                    form: Form::Raw(page),
                };
                insert(&mut self.older, i, b);
            }
        }
        Ok(())
    }

    /// Closes the head (encoding it) and makes `next` the open buffer; closed buffers a late
    /// write had opened are encoded again at the same time.
    fn close_head(&mut self, next: Buf, pool: &Pool) {
        let digits = pool.precision(self.id);
        let old = std::mem::replace(&mut self.head, next);
        let closed = Closed {
            block: old.block,
            lo: old.lo,
            hi: old.hi,
            form: Form::Packed(old.encode(digits)),
        };
        old.release(Some(pool));
        let mut v = std::mem::take(&mut self.older).into_vec();
        for b in &mut v {
            b.seal(digits, pool);
        }
        v.reserve_exact(1);
        v.push(closed);
        self.older = v.into_boxed_slice();
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

    /// Adds slots `k0..k1` into `out`; slots without data make the sum NaN.
    pub(crate) fn add_into(&self, k0: i64, k1: i64, out: &mut [f64]) {
        self.visit(
            k0,
            k1,
            out,
            |o, s| o.iter_mut().zip(s).for_each(|(a, b)| *a += *b),
            |o, v| o.iter_mut().for_each(|a| *a += v),
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
        if k < k1 && h.end_slot() > k {
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
            let mut v = std::mem::take(&mut self.older).into_vec();
            for b in v.drain(..n) {
                b.release(pool);
            }
            self.older = v.into_boxed_slice();
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

    /// The head's written slots, newest first, with their slot numbers (NaN skipped).
    fn head_written(&self) -> impl Iterator<Item = (i64, f64)> + '_ {
        let b = &self.head;
        let first = b.first_slot();
        b.values()
            .iter()
            .enumerate()
            .rev()
            .map(move |(i, v)| (first + i as i64, *v))
            .filter(|(_, v)| !v.is_nan())
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
    pub(crate) fn release(self, pool: &Pool) -> usize {
        let n = self.buffer_count();
        for b in self.older.into_vec() {
            b.release(pool);
        }
        self.head.release(Some(pool));
        n
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
        // Closed buffers are encoded: freeing them returns no page.
        assert_eq!(pool.len(), 0);
        assert_eq!(c.free_before(i64::MAX, &pool), (3, true));
        assert_eq!(c.release(&pool), 1);
        // Only block 5 (a late write's raw page, not yet encoded) held a page; the head holds
        // one value in a small array.
        assert_eq!(pool.len(), 1);
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

    fn same(a: f64, b: f64) -> bool {
        (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
    }

    #[test]
    fn open_buffer_grows_with_its_samples() {
        let pool = Pool::new(8);
        let mut c = Chain::new(0, 10, 0, 1.0, &pool).unwrap();
        assert_eq!(c.heap_bytes(), MIN_SLOTS * 8);
        for i in 1..5 {
            c.write(i * 10, i as f64, &pool).unwrap();
        }
        assert_eq!(c.heap_bytes(), 8 * 8);
        for i in 5..300 {
            c.write(i * 10, i as f64, &pool).unwrap();
        }
        assert_eq!(c.heap_bytes(), BUFFER_CAP * 8);
        // A write before the first slot of the open buffer moves its storage down.
        let mut c = Chain::new(0, 1, 100, 1.0, &pool).unwrap();
        c.write(101, 2.0, &pool).unwrap();
        c.write(90, 3.0, &pool).unwrap();
        let mut out = vec![0.0; 12];
        c.copy_into(90, 102, &mut out);
        assert_eq!((out[0], out[10], out[11]), (3.0, 1.0, 2.0));
        assert!(out[1..10].iter().all(|v| v.is_nan()));
        assert_eq!(c.heap_bytes(), 16 * 8);
    }

    #[test]
    fn closed_buffers_are_encoded_and_read_back_exactly() {
        let pool = Pool::new(8);
        let n = 3 * BUFFER_CAP as i64 + 17;
        let value = |i: i64| match i % 97 {
            5 => f64::NAN,
            6 => -0.0,
            7 => f64::INFINITY,
            _ if (600..700).contains(&i) => f64::NAN,
            _ if i < 512 => 7.0,
            _ => 20.0 + (i % 50) as f64 / 100.0,
        };
        let mut c = Chain::new(0, 1, 0, value(0), &pool).unwrap();
        for i in 1..n {
            c.write(i, value(i), &pool).unwrap();
        }
        assert_eq!(c.buffer_count(), 4);
        // Far below 8 bytes a value: the first block is nearly constant, the rest two-decimal.
        assert!(c.heap_bytes() < 3 * 512 * 2 + 512, "{}", c.heap_bytes());
        let mut out = vec![0.0; n as usize + 10];
        c.copy_into(-5, n + 5, &mut out);
        for i in -5..n + 5 {
            let want = if (0..n).contains(&i) {
                value(i)
            } else {
                f64::NAN
            };
            assert!(same(out[(i + 5) as usize], want), "slot {i}");
        }
        // Ranges starting and ending inside closed buffers.
        let mut part = vec![0.0; 300];
        c.copy_into(400, 700, &mut part);
        assert!((0..300).all(|j| same(part[j], value(400 + j as i64))));
        let mut sum = vec![1.0; 300];
        c.add_into(400, 700, &mut sum);
        assert!((0..300).all(|j| same(sum[j], 1.0 + value(400 + j as i64))));
    }

    #[test]
    fn a_constant_block_adds_without_decoding() {
        let pool = Pool::new(8);
        let mut c = Chain::new(0, 1, 0, 2.5, &pool).unwrap();
        for i in 1..(BUFFER_CAP as i64 + 1) {
            c.write(i, 2.5, &pool).unwrap();
        }
        let (older, _) = c.parts();
        assert!(matches!(&older[0].form, Form::Packed(b) if codec::constant(b) == Some(2.5)));
        let mut out = vec![1.0; 10];
        c.add_into(100, 110, &mut out);
        assert!(out.iter().all(|v| *v == 3.5));
    }

    #[test]
    fn a_late_write_into_a_closed_buffer_lands_and_is_encoded_again() {
        let pool = Pool::new(8);
        let mut c = Chain::new(0, 1, 0, 0.5, &pool).unwrap();
        for i in 1..1100 {
            c.write(i, i as f64 / 2.0, &pool).unwrap();
        }
        let before = c.heap_bytes();
        c.write(10, -1.25, &pool).unwrap();
        c.write(700, 99.0, &pool).unwrap();
        assert!(c.heap_bytes() > before, "the block is open (raw) now");
        let mut out = vec![0.0; 1100];
        c.copy_into(0, 1100, &mut out);
        assert_eq!(
            (out[10], out[700], out[11], out[701]),
            (-1.25, 99.0, 5.5, 350.5)
        );
        // The next buffer to close encodes the written-to ones again.
        for i in 1100..1600 {
            c.write(i, i as f64 / 2.0, &pool).unwrap();
        }
        assert!(
            c.heap_bytes() < before + 2 * 4096,
            "{} vs {before}",
            c.heap_bytes()
        );
        let (older, _) = c.parts();
        assert!(older.iter().all(|b| matches!(b.form, Form::Packed(_))));
        c.copy_into(0, 1100, &mut out);
        assert_eq!(
            (out[10], out[700], out[11], out[701]),
            (-1.25, 99.0, 5.5, 350.5)
        );
    }

    #[test]
    fn precision_rounds_closed_buffers_only() {
        let pool = Pool::new(8).with_precision(vec![3]);
        let value = |i: i64| 1000.0 / (7.0 + i as f64 * 0.001);
        let mut c = Chain::new(0, 1, 0, value(0), &pool).unwrap();
        for i in 1..600 {
            c.write(i, value(i), &pool).unwrap();
        }
        let mut out = vec![0.0; 600];
        c.copy_into(0, 600, &mut out);
        // The closed buffer holds three significant digits; the open one every bit.
        assert_eq!(out[0], 143.0);
        assert_eq!(out[511], codec::round_to_digits(value(511), 3));
        assert_eq!(out[512].to_bits(), value(512).to_bits());
        assert!(c.heap_bytes() < 512 + 128 * 8 + 64, "{}", c.heap_bytes());
        // Another metric id is lossless.
        let mut c = Chain::new(1, 1, 0, value(0), &pool).unwrap();
        for i in 1..600 {
            c.write(i, value(i), &pool).unwrap();
        }
        c.copy_into(0, 600, &mut out);
        assert!((0..600).all(|i| out[i].to_bits() == value(i as i64).to_bits()));
    }
}
