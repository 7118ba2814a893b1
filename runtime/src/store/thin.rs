//! A byte array behind one pointer, its length in front: 8 bytes where a `Box<[u8]>` takes 16
//! (a level's path, a closed buffer's encoded bytes: one of each per level or buffer, and the
//! memory goal counts them). Owns that allocation only.

use std::alloc::Layout;
use std::ops::Deref;
use std::ptr::NonNull;

/// Bytes before the contents: their length.
const LEN: usize = 2;

/// A byte array of at most 64 KiB (a closed buffer's codec bytes are a few KiB: 512 raw
/// values and a header; a level's path at most 32 names of 1,024 bytes with their lengths),
/// aligned to 8 (its owner keeps two tag bits in the pointer, see `buffer::form`, and a
/// chain's closed buffers a third, see `buffer::older`; the allocator hands out 16-byte
/// granules anyway).
pub(crate) struct ThinBytes(NonNull<u8>);

// SAFETY: owned like a `Box<[u8]>`.
unsafe impl Send for ThinBytes {}
unsafe impl Sync for ThinBytes {}

fn layout(len: usize) -> Layout {
    Layout::from_size_align(LEN + len, 8).expect("a small layout")
}

impl ThinBytes {
    /// A copy of `b`. Panics beyond 65,535 bytes: every caller's bytes are bounded below it.
    pub(crate) fn new(b: &[u8]) -> ThinBytes {
        let n = u16::try_from(b.len()).expect("at most 64 KiB");
        let layout = layout(b.len());
        // SAFETY: the layout has a non-zero size; both writes stay inside the allocation.
        unsafe {
            let Some(p) = NonNull::new(std::alloc::alloc(layout)) else {
                std::alloc::handle_alloc_error(layout)
            };
            p.as_ptr().cast::<[u8; LEN]>().write(n.to_le_bytes());
            std::ptr::copy_nonoverlapping(b.as_ptr(), p.as_ptr().add(LEN), b.len());
            ThinBytes(p)
        }
    }

    /// The pointer, owned by the caller until [`ThinBytes::from_raw`].
    pub(crate) fn into_raw(self) -> NonNull<u8> {
        std::mem::ManuallyDrop::new(self).0
    }

    /// # Safety
    /// `p` must come from [`ThinBytes::into_raw`], and be given back once.
    pub(crate) unsafe fn from_raw(p: NonNull<u8>) -> ThinBytes {
        ThinBytes(p)
    }

    /// The bytes at a pointer from [`ThinBytes::into_raw`].
    ///
    /// # Safety
    /// `p` must come from `into_raw` and stay owned for `'a`.
    pub(crate) unsafe fn slice<'a>(p: NonNull<u8>) -> &'a [u8] {
        // SAFETY: `new` wrote the length and that many bytes after it.
        unsafe {
            let n = u16::from_le_bytes(p.as_ptr().cast::<[u8; LEN]>().read()) as usize;
            std::slice::from_raw_parts(p.as_ptr().add(LEN), n)
        }
    }

    /// Heap bytes: the contents and their length.
    pub(crate) fn heap_bytes(&self) -> usize {
        LEN + self.len()
    }
}

impl Deref for ThinBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        // SAFETY: owned by `self`.
        unsafe { ThinBytes::slice(self.0) }
    }
}

impl Drop for ThinBytes {
    fn drop(&mut self) {
        let n = self.len();
        // SAFETY: allocated by `new` with this layout.
        unsafe { std::alloc::dealloc(self.0.as_ptr(), layout(n)) }
    }
}

impl std::fmt::Debug for ThinBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_any_bytes_up_to_its_limit() {
        for n in [0, 1, 3, 255, 4100, u16::MAX as usize] {
            let v: Vec<u8> = (0..n).map(|i| (i * 7) as u8).collect();
            let t = ThinBytes::new(&v);
            assert_eq!(&*t, &v[..]);
            assert_eq!(t.heap_bytes(), n + 2);
            let p = t.into_raw();
            assert_eq!(p.as_ptr() as usize % 8, 0);
            // SAFETY: from `into_raw`, given back once.
            let t = unsafe { ThinBytes::from_raw(p) };
            assert_eq!(&*t, &v[..]);
        }
        assert_eq!(std::mem::size_of::<ThinBytes>(), 8);
    }
}
