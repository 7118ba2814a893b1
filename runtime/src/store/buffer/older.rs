//! A chain's closed buffers (oldest first) in the 16 bytes a `Box<[Closed]>` takes, holding a
//! single one inline: most series hold exactly one (a short series' frozen part, or the
//! exited process' whole history), and its own 16-byte allocation was 0.65 B/sample of this
//! host's hour (25,650 of its 27,615 series had stopped, each with one frozen part). Owns
//! that representation only; may not look inside a `Closed`.

use std::mem::ManuallyDrop;

use super::closed::Closed;

/// Set in the first word when it is the pointer of a heap slice (two or more buffers): a
/// `Closed` starts with its contents' pointer (`repr(C)`), whose allocations are all aligned
/// to 8 or more (`form`), so this bit of an inline one is always clear.
const MANY: usize = 4;

/// A slice on the heap: its pointer (with [`MANY`] set) and its length (at least 2).
#[derive(Clone, Copy)]
#[repr(C)]
struct Heap {
    ptr: *mut Closed,
    len: usize,
}

/// None (a null first word), one inline, or a heap slice of two or more.
#[repr(C)]
pub(crate) union Older {
    one: ManuallyDrop<Closed>,
    heap: Heap,
}

// SAFETY: owned like a `Box<[Closed]>`.
unsafe impl Send for Older {}
unsafe impl Sync for Older {}

const _: () = assert!(std::mem::size_of::<Older>() == 16);
const _: () = assert!(std::mem::align_of::<Closed>() >= 8);

impl Default for Older {
    fn default() -> Self {
        Older {
            heap: Heap {
                ptr: std::ptr::null_mut(),
                len: 0,
            },
        }
    }
}

impl Older {
    /// The first word, whatever the variant (a `Closed`'s first field is a pointer too).
    #[inline(always)]
    fn word(&self) -> *mut Closed {
        // SAFETY: both variants start with a pointer-sized, pointer-typed word.
        unsafe { self.heap.ptr }
    }

    #[inline(always)]
    fn heap(&self) -> Option<Heap> {
        if self.word().addr() & MANY == 0 {
            return None;
        }
        // SAFETY: the tag says the heap variant is the one stored.
        Some(unsafe { self.heap })
    }

    /// The buffers as a slice.
    #[inline(always)]
    pub(crate) fn as_slice(&self) -> &[Closed] {
        let w = self.word();
        if w.is_null() {
            return &[];
        }
        match self.heap() {
            // SAFETY: a heap variant is a boxed slice of `len` (`from_vec`), owned by `self`.
            Some(h) => unsafe { std::slice::from_raw_parts(h.ptr.map_addr(|a| a & !MANY), h.len) },
            // SAFETY: a non-null word without the tag is the inline variant.
            None => std::slice::from_ref(unsafe { &*self.one }),
        }
    }

    #[inline(always)]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [Closed] {
        let w = self.word();
        if w.is_null() {
            return &mut [];
        }
        match self.heap() {
            // SAFETY: as in `as_slice`; `&mut self` makes this the only reference.
            Some(h) => unsafe {
                std::slice::from_raw_parts_mut(h.ptr.map_addr(|a| a & !MANY), h.len)
            },
            // SAFETY: as in `as_slice`.
            None => std::slice::from_mut(unsafe { &mut *self.one }),
        }
    }

    /// The buffers as a Vec (to change them; [`Older::from_vec`] puts them back).
    pub(crate) fn take_vec(&mut self) -> Vec<Closed> {
        let me = std::mem::take(self);
        let me = ManuallyDrop::new(me);
        if me.word().is_null() {
            return Vec::new();
        }
        match me.heap() {
            // SAFETY: the boxed slice `from_vec` leaked; `me` is never dropped.
            Some(h) => unsafe {
                let p = h.ptr.map_addr(|a| a & !MANY);
                Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, h.len)).into_vec()
            },
            // SAFETY: the inline variant, moved out once; `me` is never dropped.
            None => vec![unsafe { std::ptr::read(&*me.one) }],
        }
    }

    /// `v` in the smallest form: nothing, one inline, or an exactly sized heap slice.
    pub(crate) fn from_vec(mut v: Vec<Closed>) -> Older {
        match v.len() {
            0 => Older::default(),
            1 => Older {
                one: ManuallyDrop::new(v.pop().expect("one")),
            },
            len => {
                let p = Box::into_raw(v.into_boxed_slice()).cast::<Closed>();
                debug_assert_eq!(p.addr() & MANY, 0, "a slice of 8-aligned buffers");
                Older {
                    heap: Heap {
                        ptr: p.map_addr(|a| a | MANY),
                        len,
                    },
                }
            }
        }
    }

    /// Heap bytes of the slice itself (none for zero or one buffer).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.heap()
            .map_or(0, |h| h.len * std::mem::size_of::<Closed>())
    }
}

impl std::ops::Deref for Older {
    type Target = [Closed];
    #[inline(always)]
    fn deref(&self) -> &[Closed] {
        self.as_slice()
    }
}

impl std::ops::DerefMut for Older {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [Closed] {
        self.as_mut_slice()
    }
}

impl Drop for Older {
    fn drop(&mut self) {
        drop(self.take_vec());
    }
}
