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
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: access to `data` is serialised by `locked` (acquire on lock, release on unlock), so
// sharing the lock between threads is sound whenever the data may move between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    pub(crate) fn new(data: T) -> SpinLock<T> {
        SpinLock {
            locked: AtomicBool::new(false),
            data: UnsafeCell::new(data),
        }
    }

    #[inline(always)]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            // Wait reading (no cache-line ping-pong), then try again.
            while self.locked.load(Ordering::Relaxed) {
                if spins < 64 {
                    std::hint::spin_loop();
                    spins += 1;
                } else {
                    std::thread::yield_now();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

impl<T: Default> Default for SpinLock<T> {
    fn default() -> Self {
        SpinLock::new(T::default())
    }
}

pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this thread holds the lock, and `&mut self`
        // makes this the only reference through it.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excludes_concurrent_writers() {
        let l = std::sync::Arc::new(SpinLock::new((0u64, 0u64)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..50_000 {
                        let mut g = l.lock();
                        // Two fields updated non-atomically: a torn pair would show.
                        g.0 += 1;
                        g.1 = g.0 * 2;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let g = l.lock();
        assert_eq!(*g, (200_000, 400_000));
    }
}
