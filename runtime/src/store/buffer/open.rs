//! The open buffer of a chain: raw f64 slots growing with its samples (4 slots, doubling up to
//! a 4 KiB page), and the storage behind them. Owns the slots' allocation; may not touch closed
//! buffers or the chain's grid.

use std::ptr::NonNull;

use super::pool::Pool;
use super::{BUFFER_CAP, CAP, Page, codec};

/// Slots of a new open buffer: most series are written every step, so it doubles soon, but a
/// series written once or a few times costs 32 bytes, not a page.
pub(super) const MIN_SLOTS: usize = 4;

/// Storage slots of an open buffer holding `len` slots (from its first written one).
#[inline(always)]
fn cap_for(len: usize) -> usize {
    len.next_power_of_two().clamp(MIN_SLOTS, BUFFER_CAP)
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

    pub(super) fn new(block: i32, slot: i64, value: f64, pool: &Pool) -> Buf {
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
    pub(super) fn from_values(block: i32, lo: u16, values: &[f64], pool: &Pool) -> Buf {
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
    pub(super) fn push(&mut self, value: f64, pool: &Pool) {
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
    pub(super) fn set_last(&mut self, value: f64) {
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
    pub(super) fn set(&mut self, off: usize, value: f64, pool: &Pool) {
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
    pub(super) fn release(self, pool: Option<&Pool>) {
        let me = std::mem::ManuallyDrop::new(self);
        free_slots(me.data, me.cap(), pool);
    }

    /// Encodes the buffer for closing (values rounded to `digits` significant digits if set).
    pub(super) fn encode(&self, digits: u32) -> Box<[u8]> {
        let mut out = Vec::with_capacity(64);
        codec::encode_rounded(self.values(), digits, &mut out);
        out.into_boxed_slice()
    }

    /// Heap bytes of the slots.
    pub(super) fn heap_bytes(&self) -> usize {
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
