//! The open buffer of a chain: raw f64 slots, appended to on the write path and nothing else
//! (no encoding there), growing by doubling up to a 4 KiB page; the background pass
//! (`Chain::compact`) moves its older slots into encoded pieces and keeps the allocation for
//! the next ones. Owns the slots' allocation; may not touch closed buffers or the chain's grid.

use std::ptr::NonNull;

use super::pool::Pool;
use super::{BUFFER_CAP, CAP, Page};

/// Slots of a new open buffer: most series are written every step, so it doubles soon, but a
/// series written once or a few times costs 32 bytes, not a page.
pub(super) const MIN_SLOTS: usize = 4;

/// `lo_cap`'s bits holding the first slot's offset (0..512); the top four hold log2 of the
/// storage slots (1..=512).
const LO_MASK: u16 = 0x3ff;
const CAP_SHIFT: u32 = 12;

/// The open buffer: slots `block*512 + lo .. block*512 + hi` written (gaps NaN), kept raw from
/// `lo` on in `cap` slots (a pool page at full size, one slot in the buffer itself, else a
/// heap array: a series no longer written keeps its newest value without an allocation). The capacity is
/// stored (not derived from the length), so the pass that freezes the older slots keeps the
/// allocation and the next appends do not grow it again. 16 bytes: an `i32` block covers
/// slots up to ±2^40, i.e. ±35,000 years at a 1 s step.
pub(crate) struct Buf {
    data: Slots,
    pub(crate) block: i32,
    /// The first slot's offset and log2 of the capacity (see `LO_MASK`).
    lo_cap: u16,
    pub(crate) hi: u16,
}

/// Where the slots are: a heap array or a page (`cap` > 1), or the one slot itself.
#[derive(Clone, Copy)]
union Slots {
    heap: NonNull<f64>,
    one: f64,
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

fn alloc_slots(cap: usize, pool: &Pool) -> Slots {
    match cap {
        1 => Slots { one: f64::NAN },
        BUFFER_CAP => Slots {
            heap: pool.get().into_raw(),
        },
        _ => Slots {
            heap: alloc_small(cap),
        },
    }
}

/// Storage slots for `len` slots: the next power of two, at most a page.
#[inline]
fn cap_for(len: usize, min: usize) -> usize {
    len.max(min).next_power_of_two().min(BUFFER_CAP)
}

impl Buf {
    fn make(data: Slots, block: i32, lo: u16, hi: u16, cap: usize) -> Buf {
        debug_assert!(cap.is_power_of_two() && cap <= BUFFER_CAP && lo as usize <= BUFFER_CAP);
        Buf {
            data,
            block,
            lo_cap: lo | (cap.trailing_zeros() as u16) << CAP_SHIFT,
            hi,
        }
    }

    /// The first written slot's offset in the block.
    #[inline(always)]
    pub(crate) fn lo(&self) -> u16 {
        self.lo_cap & LO_MASK
    }

    #[inline(always)]
    fn cap(&self) -> usize {
        1 << (self.lo_cap >> CAP_SHIFT)
    }

    #[inline(always)]
    fn set_lo(&mut self, lo: u16) {
        self.lo_cap = (self.lo_cap & !LO_MASK) | lo;
    }

    pub(crate) fn first_slot(&self) -> i64 {
        self.block as i64 * CAP + self.lo() as i64
    }
    pub(crate) fn end_slot(&self) -> i64 {
        self.block as i64 * CAP + self.hi as i64
    }

    /// Slots held (written or gaps between them).
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        (self.hi - self.lo()) as usize
    }

    /// The first slot.
    #[inline(always)]
    fn base(&self) -> *const f64 {
        if self.cap() == 1 {
            &raw const self.data.one
        } else {
            // SAFETY: with more than one slot, `data` is a heap array or page (`alloc_slots`).
            unsafe { self.data.heap.as_ptr() }
        }
    }

    #[inline(always)]
    fn base_mut(&mut self) -> *mut f64 {
        if self.cap() == 1 {
            &raw mut self.data.one
        } else {
            // SAFETY: as in `base`.
            unsafe { self.data.heap.as_ptr() }
        }
    }

    /// The written slots `lo..hi`.
    #[inline(always)]
    pub(crate) fn values(&self) -> &[f64] {
        // SAFETY: `base` holds `cap() >= hi - lo` initialised slots owned by `self`.
        unsafe { std::slice::from_raw_parts(self.base(), self.len()) }
    }

    #[inline(always)]
    fn slots_mut(&mut self) -> &mut [f64] {
        // SAFETY: as in `values`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.base_mut(), self.cap()) }
    }

    pub(super) fn new(block: i32, slot: i64, value: f64, pool: &Pool) -> Buf {
        let off = slot.rem_euclid(CAP) as u16;
        let mut b = Buf::make(alloc_slots(MIN_SLOTS, pool), block, off, off + 1, MIN_SLOTS);
        b.slots_mut()[0] = value;
        b
    }

    /// An open buffer holding `values` from slot offset `lo` (a restored head).
    pub(super) fn from_values(block: i32, lo: u16, values: &[f64], pool: &Pool) -> Buf {
        let n = values.len();
        let cap = cap_for(n, MIN_SLOTS);
        let mut b = Buf::make(alloc_slots(cap, pool), block, lo, lo + n as u16, cap);
        b.slots_mut()[..n].copy_from_slice(values);
        b
    }

    /// Writes the slot after `hi` (the append fast path).
    #[inline(always)]
    pub(super) fn push(&mut self, value: f64, pool: &Pool) {
        let len = self.len();
        if len == self.cap() {
            self.regrow(self.lo(), len + 1, pool);
        }
        // SAFETY: `len < cap()` after the growth above.
        unsafe { *self.base_mut().add(len) = value };
        self.hi += 1;
    }

    /// Overwrites the newest slot.
    #[inline(always)]
    pub(super) fn set_last(&mut self, value: f64) {
        let len = self.len();
        // SAFETY: `len >= 1`: a buffer always holds at least its newest write.
        unsafe { *self.base_mut().add(len - 1) = value };
    }

    /// Moves the slots to storage for `len` slots starting at offset `lo` (`lo <= self.lo`).
    #[cold]
    #[inline(never)]
    fn regrow(&mut self, lo: u16, len: usize, pool: &Pool) {
        let old_cap = self.cap();
        let new_cap = cap_for(len, old_cap);
        let shift = (self.lo() - lo) as usize;
        if new_cap == old_cap && shift == 0 {
            return;
        }
        self.move_to(lo, shift, new_cap, pool);
    }

    /// Moves the slots into a new allocation of `cap`, `shift` slots later, from offset `lo`.
    fn move_to(&mut self, lo: u16, shift: usize, cap: usize, pool: &Pool) {
        let (old_cap, n) = (self.cap(), self.len());
        let mut data = alloc_slots(cap, pool);
        let to = if cap == 1 {
            &raw mut data.one
        } else {
            // SAFETY: more than one slot: a heap array or page.
            unsafe { data.heap.as_ptr() }
        };
        // SAFETY: both regions are valid and distinct; `shift + n <= cap`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base(), to.add(shift), n);
        }
        let old = std::mem::replace(&mut self.data, data);
        free_slots(old, old_cap, Some(pool));
        self.lo_cap = lo | (cap.trailing_zeros() as u16) << CAP_SHIFT;
    }

    /// Writes slot offset `off` of this buffer's block.
    #[inline]
    pub(super) fn set(&mut self, off: usize, value: f64, pool: &Pool) {
        let o = off as u16;
        if o < self.lo() {
            let len = (self.hi - o) as usize;
            self.regrow(o, len, pool);
        } else if o >= self.hi {
            let len = (o + 1 - self.lo()) as usize;
            if len > self.cap() {
                self.regrow(self.lo(), len, pool);
            }
            self.hi = o + 1;
        }
        let lo = self.lo() as usize;
        self.slots_mut()[off - lo] = value;
    }

    /// Drops the first `k` slots (frozen by the caller), keeping the allocation: the rest
    /// move to its start. Leaves at least one slot.
    pub(super) fn drain_front(&mut self, k: usize) {
        let n = self.len();
        let k = k.min(n.saturating_sub(1));
        if k == 0 {
            return;
        }
        let s = self.slots_mut();
        s.copy_within(k..n, 0);
        s[n - k..n].fill(f64::NAN);
        self.set_lo(self.lo() + k as u16);
    }

    /// Moves the slots into smaller storage if `want` slots (at least those held) fit in it.
    pub(super) fn fit(&mut self, want: usize, pool: &Pool) {
        let cap = cap_for(want.max(self.len()), 1);
        if cap < self.cap() {
            self.move_to(self.lo(), 0, cap, pool);
        }
    }

    /// Gives the slots back (a page to the pool if there is one).
    pub(super) fn release(self, pool: Option<&Pool>) {
        let me = std::mem::ManuallyDrop::new(self);
        free_slots(me.data, me.cap(), pool);
    }

    /// Heap bytes of the slots (none for one slot).
    pub(super) fn heap_bytes(&self) -> usize {
        match self.cap() {
            1 => 0,
            cap => cap * 8,
        }
    }
}

fn free_slots(data: Slots, cap: usize, pool: Option<&Pool>) {
    match cap {
        1 => {}
        BUFFER_CAP => {
            // SAFETY: full-size slots are always a page (`alloc_slots`).
            let page = unsafe { Page::from_raw(data.heap) };
            match pool {
                Some(p) => p.put(page),
                None => drop(page),
            }
        }
        _ => {
            // SAFETY: other slots are a boxed slice of exactly `cap` (`alloc_small`).
            let p = unsafe { data.heap.as_ptr() };
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, cap)) });
        }
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        free_slots(self.data, self.cap(), None);
    }
}
