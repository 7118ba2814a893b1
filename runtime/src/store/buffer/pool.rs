//! The page pool buffers draw full-size slots from, with the two settings every write already
//! has at hand through it: the retention horizon (for late writes) and each metric's precision
//! (for closing buffers). Owns no buffer; may not look inside pages beyond resetting them.

use std::sync::Mutex;

use super::Page;

/// Recycles pages released by retention/free so steady-state ingest does not hit the allocator.
/// It also carries the retention period (every write already takes the pool, and only the
/// rare write older than a whole chain asks for it, then it reads the clock) and the
/// per-metric precision closed buffers are rounded to.
pub(crate) struct Pool {
    free: Mutex<Vec<Page>>,
    max: usize,
    /// Seconds a sample stays in memory; 0 keeps everything (no retention pass runs).
    retention: i64,
    /// Significant digits kept per metric id (0 = lossless); ids past the end are lossless.
    precision: Box<[u8]>,
}

impl Pool {
    /// A pool without retention (tests: nothing is too old).
    #[cfg(test)]
    pub(crate) fn new(max: usize) -> Pool {
        Pool::with_retention(max, 0)
    }

    pub(crate) fn with_retention(max: usize, retention_secs: u64) -> Pool {
        Pool {
            free: Mutex::new(Vec::new()),
            max,
            retention: i64::try_from(retention_secs).unwrap_or(i64::MAX),
            precision: Box::default(),
        }
    }

    /// Sets the significant digits per metric id (the registry's ids of configured metrics).
    pub(crate) fn with_precision(mut self, digits: Vec<u8>) -> Pool {
        self.precision = digits.into_boxed_slice();
        self
    }

    pub(super) fn precision(&self, id: u32) -> u32 {
        self.precision.get(id as usize).copied().unwrap_or(0) as u32
    }

    /// The oldest time a late write may still have: what retention has not freed yet.
    pub(super) fn horizon(&self) -> i64 {
        if self.retention == 0 {
            return i64::MIN;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        now.saturating_sub(self.retention)
    }

    /// A page with every slot NaN.
    pub(crate) fn get(&self) -> Page {
        let reused = crate::util::lock(&self.free).pop();
        match reused {
            Some(mut p) => {
                p.fill(f64::NAN);
                p
            }
            None => Page::new_nan(),
        }
    }

    pub(crate) fn put(&self, p: Page) {
        let mut free = crate::util::lock(&self.free);
        if free.len() < self.max {
            free.push(p);
        }
    }

    pub(crate) fn len(&self) -> usize {
        crate::util::lock(&self.free).len()
    }
}
