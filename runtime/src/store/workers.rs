//! Background workers: the compaction pass (every `COMPACT_EVERY`: encoding off the write
//! path), retention (free buffers older than `retention-in-memory`, every half
//! retention period, pages go back to the pool), periodic checkpoints (snapshot + WAL
//! truncation + archiving) and a final checkpoint when shutdown is requested.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{COMPACT_EVERY, Store};

/// Runs until `shutdown` is cancelled, then writes a final snapshot and returns.
pub async fn run_workers(store: Arc<Store>, shutdown: CancellationToken) {
    let cfg = store.config().clone();
    let retention = cfg.retention_in_memory;
    let mut retention_tick = ticker((retention / 2).max(Duration::from_secs(1)));
    let mut compact_tick = ticker(COMPACT_EVERY);
    let mut checkpoint_tick = ticker(cfg.checkpoint_interval.max(Duration::from_secs(1)));
    let persistent = store.data_dir().is_some();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = retention_tick.tick(), if !retention.is_zero() => {
                let cutoff = chrono::Utc::now().timestamp() - retention.as_secs() as i64;
                let s = store.clone();
                let freed = tokio::task::spawn_blocking(move || s.free(&[], cutoff)).await;
                tracing::debug!(?freed, cutoff, "retention pass");
            }
            _ = compact_tick.tick() => {
                let now = chrono::Utc::now().timestamp();
                let s = store.clone();
                let t = std::time::Instant::now();
                let series = tokio::task::spawn_blocking(move || s.compact(now)).await;
                tracing::debug!(?series, took = ?t.elapsed(), "compaction pass");
            }
            _ = checkpoint_tick.tick(), if persistent => {
                match store.checkpoint().await {
                    Ok(p) => tracing::info!(path = %p.display(), "checkpoint written"),
                    Err(e) => tracing::warn!(error = %e, "checkpoint failed"),
                }
            }
        }
    }
    if persistent {
        match store.checkpoint().await {
            Ok(p) => tracing::info!(path = %p.display(), "final checkpoint written"),
            Err(e) => tracing::error!(error = %e, "final checkpoint failed"),
        }
    }
}

fn ticker(period: Duration) -> tokio::time::Interval {
    // The first tick of an interval fires at once; start one period later instead.
    let mut i = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}
