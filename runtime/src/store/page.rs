//! The 4 KiB pages buffers keep their samples in, carved from 2 MiB chunks that the kernel may
//! back with transparent huge pages (`madvise(MADV_HUGEPAGE)`).
//!
//! Why: each series writes to its own page, so ingest touches a different page for every
//! sample (16,896 series = 66 MB in cc-metric-store's benchmark) and with 4 KiB pages nearly
//! every write misses the dTLB. One huge-page entry covers 512 of our pages.
//!
//! Pages are never handed back to the allocator: a dropped page goes to a process-wide free
//! list that new pages come from first (the store's `Pool` sits in front of it). Owns nothing
//! else; may not touch buffers' contents beyond filling a new page with NaN.

use std::alloc::Layout;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Mutex;

/// Slots per buffer: 512 f64 = one 4 KiB page.
pub const BUFFER_CAP: usize = 512;

type Slots = [f64; BUFFER_CAP];

const PAGE_BYTES: usize = std::mem::size_of::<Slots>();
/// One x86-64 huge page.
const CHUNK_BYTES: usize = 2 << 20;
const PAGES_PER_CHUNK: usize = CHUNK_BYTES / PAGE_BYTES;

/// One page of samples, owned like a `Box<[f64; 512]>`.
pub(crate) struct Page(NonNull<Slots>);

// SAFETY: a page is handed out by `FREE` to one owner at a time and only reached through that
// owner, exactly like a `Box`.
unsafe impl Send for Page {}
unsafe impl Sync for Page {}

struct FreeList(Vec<NonNull<Slots>>);
// SAFETY: the list holds pages nobody owns; whoever pops one becomes its only owner.
unsafe impl Send for FreeList {}

static FREE: Mutex<FreeList> = Mutex::new(FreeList(Vec::new()));

impl Page {
    /// A page with every slot NaN.
    pub(crate) fn new_nan() -> Page {
        let p = {
            let mut free = crate::util::lock(&FREE);
            match free.0.pop() {
                Some(p) => p,
                None => refill(&mut free.0),
            }
        };
        let mut page = Page(p);
        page.fill(f64::NAN);
        page
    }
}

impl Page {
    /// The page's slots as a pointer the caller owns (an open buffer's full-size slots).
    pub(crate) fn into_raw(self) -> NonNull<f64> {
        let p = self.0.cast();
        std::mem::forget(self);
        p
    }

    /// A page back from [`Page::into_raw`].
    ///
    /// # Safety
    /// `p` must come from `into_raw` and not be used after this.
    pub(crate) unsafe fn from_raw(p: NonNull<f64>) -> Page {
        Page(p.cast())
    }
}

/// Allocates a chunk (through the global allocator, so it is counted like any allocation),
/// keeps its first page for the caller and puts the rest on the free list.
fn refill(free: &mut Vec<NonNull<Slots>>) -> NonNull<Slots> {
    let layout = Layout::from_size_align(CHUNK_BYTES, CHUNK_BYTES).expect("a valid layout");
    // SAFETY: the layout has a non-zero size.
    let base = unsafe { std::alloc::alloc(layout) };
    let Some(base) = NonNull::new(base) else {
        std::alloc::handle_alloc_error(layout)
    };
    #[cfg(target_os = "linux")]
    // SAFETY: advice only, on memory we own; failure (no THP support) changes nothing.
    unsafe {
        libc::madvise(base.as_ptr().cast(), CHUNK_BYTES, libc::MADV_HUGEPAGE);
    }
    free.reserve(PAGES_PER_CHUNK);
    for i in (1..PAGES_PER_CHUNK).rev() {
        // SAFETY: `i * PAGE_BYTES` stays inside the chunk, which is aligned for f64.
        free.push(unsafe { base.add(i * PAGE_BYTES) }.cast());
    }
    base.cast()
}

impl Deref for Page {
    type Target = Slots;
    #[inline(always)]
    fn deref(&self) -> &Slots {
        // SAFETY: the page is valid for its owner's lifetime and only reached through it.
        unsafe { self.0.as_ref() }
    }
}

impl DerefMut for Page {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Slots {
        // SAFETY: as in `deref`, and `&mut self` makes this the only reference.
        unsafe { self.0.as_mut() }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        crate::util::lock(&FREE).0.push(self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_distinct_nan_filled_and_reused() {
        let pages: Vec<Page> = (0..PAGES_PER_CHUNK + 3).map(|_| Page::new_nan()).collect();
        let mut addrs: Vec<usize> = pages.iter().map(|p| p.as_ptr() as usize).collect();
        addrs.sort_unstable();
        for w in addrs.windows(2) {
            assert!(w[1] - w[0] >= PAGE_BYTES, "pages overlap: {w:?}");
        }
        assert!(pages.iter().all(|p| p.iter().all(|v| v.is_nan())));
        let mut p = pages.into_iter().next().unwrap();
        p[7] = 1.0;
        let addr = p.as_ptr() as usize;
        drop(p);
        // Tests run in parallel and share the free list: the page comes back NaN-filled, to
        // this thread or another one.
        let q = Page::new_nan();
        if q.as_ptr() as usize == addr {
            assert!(q[7].is_nan());
        }
    }
}
