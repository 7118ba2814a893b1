//! The lock over a level's series: a spin lock whose release is a plain store.
//!
//! Why not `std::sync::Mutex`: its unlock is an atomic swap (it must learn whether to wake a
//! sleeper), and on x86 every atomic read-modify-write waits until all earlier stores have
//! reached the cache. The store just made to a data page is usually a cache miss, so each
//! write paid the full miss latency at unlock, one write after the other. A plain-store
//! release lets that miss complete in the background while the caller goes on (parsing the
//! next lines, or fetching the next level); only the next acquisition synchronises, by when
//! the miss has mostly been served.
//!
//! Critical sections are short (a few stores; a read copies at most a few pages), so waiters
//! spin briefly, then yield. There is no poisoning (the `Mutex` it replaces was used ignoring
//! poison too): a panic inside releases the lock.

use std::cell::UnsafeCell;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// A boxed slice under a spin lock, in 16 bytes where a lock beside a `Box<[T]>` takes 24: the
/// slice's pointer, its length in the lock word's padding, and a flag for the owner (a level
/// is 32 bytes with it instead of 48; the host's hour holds 8,283 levels). The pointer is
/// also readable without the lock ([`SpinSlice::peek`]: a prefetch hint, never dereferenced),
/// so the owner need not publish it apart.
pub(crate) struct SpinSlice<T> {
    /// The slice's first element (the dangling pointer when empty); stored under the lock.
    ptr: AtomicPtr<T>,
    /// The slice's length; read and written under the lock only.
    len: UnsafeCell<u32>,
    locked: AtomicBool,
    /// The owner's flag (a level marks itself removed), readable without the lock.
    pub(crate) flag: AtomicBool,
}

// SAFETY: the slice is owned like a `Box<[T]>` and reached only under `locked` (acquire on
// lock, release on unlock); `peek` hands out an address, never a reference.
unsafe impl<T: Send> Sync for SpinSlice<T> {}
unsafe impl<T: Send> Send for SpinSlice<T> {}

impl<T> Default for SpinSlice<T> {
    fn default() -> Self {
        SpinSlice {
            ptr: AtomicPtr::new(NonNull::dangling().as_ptr()),
            len: UnsafeCell::new(0),
            locked: AtomicBool::new(false),
            flag: AtomicBool::new(false),
        }
    }
}

impl<T> SpinSlice<T> {
    /// The slice as a `Box<[T]>` for the time the lock is held; what the holder leaves in it
    /// is stored back at unlock.
    #[inline(always)]
    pub(crate) fn lock(&self) -> SliceGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spin_until_taken(&self.locked);
        }
        // SAFETY: under the lock `ptr` and `len` are the parts of a box this value owns
        // (`Default` or a guard's drop stored them).
        let b = unsafe {
            let len = *self.len.get() as usize;
            let p = self.ptr.load(Ordering::Relaxed);
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len))
        };
        SliceGuard {
            lock: self,
            slice: ManuallyDrop::new(b),
        }
    }

    /// Where the slice lives, without the lock: possibly stale, for a prefetch only.
    #[inline(always)]
    pub(crate) fn peek(&self) -> *const T {
        self.ptr.load(Ordering::Relaxed)
    }
}

impl<T> Drop for SpinSlice<T> {
    fn drop(&mut self) {
        let len = *self.len.get_mut() as usize;
        let p = *self.ptr.get_mut();
        // SAFETY: the box the last guard stored back, owned by `self` alone.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) });
    }
}

/// Spins (then yields) until `locked` is taken by this thread.
#[cold]
fn spin_until_taken(locked: &AtomicBool) {
    let mut spins = 0u32;
    loop {
        while locked.load(Ordering::Relaxed) {
            if spins < 64 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        if locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

pub(crate) struct SliceGuard<'a, T> {
    lock: &'a SpinSlice<T>,
    slice: ManuallyDrop<Box<[T]>>,
}

impl<T> Deref for SliceGuard<'_, T> {
    type Target = Box<[T]>;
    #[inline(always)]
    fn deref(&self) -> &Box<[T]> {
        &self.slice
    }
}

impl<T> DerefMut for SliceGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Box<[T]> {
        &mut self.slice
    }
}

impl<T> Drop for SliceGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: taken once, here; the guard is not used afterwards.
        let b = unsafe { ManuallyDrop::take(&mut self.slice) };
        let len = u32::try_from(b.len()).expect("a level holds fewer than 2^32 series");
        let p = Box::into_raw(b).cast::<T>();
        // SAFETY: this thread holds the lock: nobody else touches `len`.
        unsafe { *self.lock.len.get() = len };
        self.lock.ptr.store(p, Ordering::Relaxed);
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_lock_keeps_what_concurrent_holders_leave() {
        let l = std::sync::Arc::new(SpinSlice::<String>::default());
        assert_eq!(std::mem::size_of::<SpinSlice<String>>(), 16);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        let mut g = l.lock();
                        // Reallocated on every push: a torn pointer or length would show.
                        let mut v = std::mem::take(&mut *g).into_vec();
                        v.push(format!("{t}:{i}"));
                        *g = v.into_boxed_slice();
                        assert_eq!(l.peek(), l.peek());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let g = l.lock();
        assert_eq!(g.len(), 8_000);
        for t in 0..4 {
            let mine: Vec<usize> = g
                .iter()
                .filter_map(|s| s.strip_prefix(&format!("{t}:"))?.parse().ok())
                .collect();
            assert_eq!(
                mine,
                (0..2_000).collect::<Vec<_>>(),
                "thread {t}'s in order"
            );
        }
        assert_eq!(l.peek(), g.as_ptr());
    }
}
