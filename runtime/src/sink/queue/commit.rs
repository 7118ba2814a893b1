//! The group commit: what makes pushes durable and acks persistent, and what deletes segments.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::running::{Inner, lock, now_ns};
use super::segment::{remove_segment, sync_dir};
use super::{QueueError, io_err};

/// With `fsync_interval` zero, pushes fsync themselves; the ledger still needs a commit now and
/// then, and this is how often.
const LEDGER_ONLY_INTERVAL: Duration = Duration::from_millis(100);
/// A commit that keeps failing is logged at most this often.
const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(60);

impl Inner {
    pub(super) fn sync_loop(&self) {
        let mut last_log = None::<Instant>;
        let mut s = lock(&self.state);
        while !self.stop.load(Ordering::SeqCst) {
            let interval = match s.cfg.fsync_interval {
                d if d.is_zero() => LEDGER_ONLY_INTERVAL,
                d => d,
            };
            s = self
                .wake
                .wait_timeout(s, interval)
                .map_or_else(|p| p.into_inner().0, |r| r.0);
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            drop(s);
            // A failing disk fails every interval: one line when it starts, one a minute while
            // it lasts (the error is in `stats().last_sync_error` throughout), one when it ends.
            match self.commit(false) {
                Err(e) if last_log.is_none_or(|t| t.elapsed() >= FAILURE_LOG_INTERVAL) => {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "queue commit failed, retried at every interval");
                    last_log = Some(Instant::now());
                }
                Err(_) => {}
                Ok(()) if last_log.take().is_some() => {
                    tracing::info!(dir = %self.dir.display(), "queue commits again");
                }
                Ok(()) => {}
            }
            s = lock(&self.state);
        }
    }

    /// The group commit: fdatasync what was written, fsync the directory if it changed, write
    /// the ledger, then delete the segments wholly below the cursor just made durable.
    pub(super) fn commit(&self, clean: bool) -> Result<(), QueueError> {
        let mut ledger = lock(&self.commit);
        let (files, dir_dirty, mut state, keep_from) = {
            let mut s = lock(&self.state);
            s.enforce(now_ns());
            let mut files = std::mem::take(&mut s.unsynced);
            if s.dirty
                && let Some((_, g)) = s.segs.last_key_value()
            {
                files.push((g.path.clone(), Arc::clone(&g.file)));
            }
            s.dirty = false;
            let dir_dirty = std::mem::replace(&mut s.dir_dirty, false);
            // Records pushed after this snapshot land in the active segment or later ones, so
            // only segments below both the front's and the active one are wholly below the cursor.
            let active = s.segs.last_key_value().map_or(0, |(k, _)| *k);
            let keep_from = s.index.front().map_or(active, |e| e.seg.min(active));
            (files, dir_dirty, s.index.ledger_state(), keep_from)
        };
        state.clean = clean;
        // The data first, but the ledger even if that failed: the cursor does not depend on
        // unsynced records being durable (those below it are removed anyway), and on a full
        // disk (fdatasync's ENOSPC) removal must go on freeing space.
        let data = self.sync_data(&files, dir_dirty);
        let ledger_res = ledger.commit(&state);
        let mut s = lock(&self.state);
        if let Err(e) = &data {
            // Put the work back for the next attempt.
            s.unsynced.extend(files);
            s.dirty = true;
            s.dir_dirty |= dir_dirty;
            s.last_sync_error = Some(e.to_string());
        }
        if let Err(e) = ledger_res {
            s.last_sync_error = Some(e.to_string());
            return Err(e);
        }
        if data.is_ok() {
            s.last_sync_error = None;
        }
        let doomed: Vec<u64> = s.segs.range(..keep_from).map(|(k, _)| *k).collect();
        let paths: Vec<PathBuf> = doomed
            .iter()
            .filter_map(|k| s.segs.remove(k))
            .map(|g| g.path)
            .collect();
        drop(s);
        if !paths.is_empty() {
            for p in &paths {
                remove_segment(p);
            }
            // Not needed for correctness (a leftover segment below the cursor is skipped at
            // open), but it makes the freed space stay freed after a crash.
            let _ = sync_dir(&self.dir);
        }
        data
    }

    fn sync_data(&self, files: &[(PathBuf, Arc<File>)], dir_dirty: bool) -> Result<(), QueueError> {
        for (path, f) in files {
            f.sync_data()
                .map_err(|e| io_err("fsync segment", path, e))?;
        }
        if dir_dirty {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}
