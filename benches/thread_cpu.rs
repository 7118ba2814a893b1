//! The calling thread's CPU time, for benches that state CPU per interval beside wall time
//! (`collect`, `clustercockpit`).

use std::time::Duration;

/// CPU time this thread has used so far.
pub fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
