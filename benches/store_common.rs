//! What the store benches (`store`, `store_replay`) share: a global allocator that counts live
//! heap bytes, so memory figures include every header and map, and cc-metric-store's
//! benchmark shape (per host 8 node metrics and 64 hwthreads × 4 metrics).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

pub struct Counting;
pub static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

pub const NODE_METRICS: [&str; 8] = [
    "mem_used",
    "mem_cached",
    "net_bw",
    "ib_bw",
    "nfs_read",
    "nfs_write",
    "disk_free",
    "power",
];
pub const CPU_METRICS: [&str; 4] = ["cpu_load", "cpu_user", "flops_any", "clock"];
