//! What a closed buffer holds, in one word: a pointer whose two low bits say which form it
//! points to (encoded bytes, pieces, a raw page, a closed tail), so a closed buffer's entry
//! in its chain is 16 bytes instead of 32 (a series of the host's hour holds one or two;
//! 0.86 B/sample went to these entries). Owns that representation and its allocations only;
//! may not look inside the bytes (`codec`, `pieces`) or the slots.

use std::ptr::NonNull;

use super::open::Buf;
use super::{BUFFER_CAP, Page};
use crate::store::thin::ThinBytes;

/// The tags in the pointer's low bits (every allocation here is aligned to 8 or more: the third
/// bit stays clear for `older`).
const PACKED: usize = 0;
const PIECES: usize = 1;
const RAW: usize = 2;
const TAIL: usize = 3;
const TAG: usize = 3;

/// A closed buffer's contents, borrowed.
pub(crate) enum Form<'a> {
    /// A closed block's codec bytes.
    Packed(&'a [u8]),
    /// The frozen slots `lo..hi` of the head's block, in pieces (`pieces`).
    Pieces(&'a [u8]),
    /// Slot offset `o` at index `o` (a page).
    Raw(&'a [f64; BUFFER_CAP]),
    /// The open buffer as it was when its block closed on the write path (slots `lo..hi` at
    /// indices `0..hi - lo`), until the next pass encodes it: a short series closing its
    /// first block keeps its few raw slots instead of drawing a 4 KiB page (pages drawn so
    /// stayed in the pool afterwards: 1.6 B/sample of the host's hour).
    Tail(&'a Buf),
}

/// A closed buffer's contents, owned (what [`Repr`] is made from and taken apart into).
pub(crate) enum Owned {
    Packed(Box<[u8]>),
    Pieces(Box<[u8]>),
    Raw(Page),
    Tail(Buf),
}

/// [`Owned`] in one tagged pointer.
pub(crate) struct Repr(NonNull<u8>);

// SAFETY: a `Repr` owns what it points to exactly like the `Owned` it was made from.
unsafe impl Send for Repr {}
unsafe impl Sync for Repr {}

impl Repr {
    pub(crate) fn new(o: Owned) -> Repr {
        let (p, tag) = match o {
            Owned::Packed(b) => (ThinBytes::new(&b).into_raw(), PACKED),
            Owned::Pieces(b) => (ThinBytes::new(&b).into_raw(), PIECES),
            Owned::Raw(page) => (page.into_raw().cast::<u8>(), RAW),
            Owned::Tail(t) => (NonNull::from(Box::leak(Box::new(t))).cast::<u8>(), TAIL),
        };
        debug_assert_eq!(p.as_ptr() as usize & 7, 0, "an allocation aligned to 8");
        Repr(p.map_addr(|a| a | tag))
    }

    fn tag(&self) -> usize {
        self.0.as_ptr() as usize & TAG
    }

    fn ptr(&self) -> NonNull<u8> {
        let p = self.0.as_ptr().map_addr(|a| a & !TAG);
        // SAFETY: the tag bits are set on an aligned, non-null address: clearing them gives
        // that address back.
        unsafe { NonNull::new_unchecked(p) }
    }

    /// The byte array of a `PACKED` or `PIECES` pointer.
    ///
    /// # Safety
    /// The tag must be one of those two.
    unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: such a pointer is a `ThinBytes`' (`new`), owned by `self`.
        unsafe { ThinBytes::slice(self.ptr()) }
    }

    #[inline]
    pub(crate) fn get(&self) -> Form<'_> {
        // SAFETY: each tag was set with a pointer of its kind (`new`), owned by `self`.
        unsafe {
            match self.tag() {
                PACKED => Form::Packed(self.bytes()),
                PIECES => Form::Pieces(self.bytes()),
                RAW => Form::Raw(self.ptr().cast().as_ref()),
                _ => Form::Tail(self.ptr().cast::<Buf>().as_ref()),
            }
        }
    }

    /// The raw page's slots, if that is the form.
    pub(crate) fn raw_mut(&mut self) -> Option<&mut [f64; BUFFER_CAP]> {
        // SAFETY: a `RAW` pointer is a page's (`new`); `&mut self` makes this the only
        // reference to it.
        (self.tag() == RAW).then(|| unsafe { self.ptr().cast().as_mut() })
    }

    /// The owned contents of `self`'s pointer (the allocation of bytes freed after copying
    /// them out).
    ///
    /// # Safety
    /// `self` must not be used or dropped afterwards.
    unsafe fn owned(&self) -> Owned {
        let p = self.ptr();
        // SAFETY: as in `get`; the caller gives up `self`.
        unsafe {
            match self.tag() {
                tag @ (PACKED | PIECES) => {
                    let b: Box<[u8]> = (*ThinBytes::from_raw(p)).into();
                    if tag == PACKED {
                        Owned::Packed(b)
                    } else {
                        Owned::Pieces(b)
                    }
                }
                RAW => Owned::Raw(Page::from_raw(p.cast())),
                _ => Owned::Tail(*Box::from_raw(p.cast::<Buf>().as_ptr())),
            }
        }
    }

    /// The owned contents.
    pub(crate) fn take(self) -> Owned {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again.
        unsafe { me.owned() }
    }

    /// Heap bytes: the array with its length, a page, or a tail with its slots.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self.get() {
            // A `ThinBytes`' length in front.
            Form::Packed(b) | Form::Pieces(b) => 2 + b.len(),
            Form::Raw(_) => BUFFER_CAP * 8,
            Form::Tail(t) => std::mem::size_of::<Buf>() + t.heap_bytes(),
        }
    }
}

impl Drop for Repr {
    fn drop(&mut self) {
        // SAFETY: `self` is not used after `drop`. Dropping the contents gives a page back
        // to the process-wide free list (the chain releases pages to its pool beforehand).
        drop(unsafe { self.owned() });
    }
}
