//! Where a fabric agent's counters come from and when its epochs start: the counter source
//! its config names (a simulated fabric, or sysfs' net or InfiniBand tree), the topology read
//! from it, and the pacer (the simulated fabric's own epoch counter, or a timer).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::config::{FabricConfig, SourceKind};
use super::ownership::Topology;
use super::sim::{SimFabric, SimSource};
use super::source::CounterSource;
use super::sysfs::{SysfsKind, SysfsSource};

/// How often a simulated fabric's epoch counter is looked at.
const SIM_POLL: Duration = Duration::from_millis(5);

/// Paces epochs: a simulated fabric's own counter, or a timer.
pub(super) enum Pacer {
    Sim(Arc<SimFabric>),
    Timer(tokio::time::Interval),
}

impl Pacer {
    /// Waits for the next epoch after `last`; `false` once `shutdown` is cancelled.
    pub(super) async fn next_epoch(&mut self, last: u64, shutdown: &CancellationToken) -> bool {
        match self {
            Pacer::Sim(f) => loop {
                if shutdown.is_cancelled() {
                    return false;
                }
                if f.epoch() > last {
                    return true;
                }
                tokio::time::sleep(SIM_POLL).await;
            },
            Pacer::Timer(iv) => tokio::select! {
                _ = shutdown.cancelled() => false,
                _ = iv.tick() => true,
            },
        }
    }
}

/// Opens the counter source `cfg` names and the pacer of its epochs.
pub(super) fn open_source(cfg: &FabricConfig) -> anyhow::Result<(Box<dyn CounterSource>, Pacer)> {
    let host = crate::util::hostname();
    Ok(match cfg.source {
        SourceKind::Simulated => {
            let path = cfg.path.as_deref().context("fabric.path")?;
            let f = Arc::new(
                SimFabric::open(path)
                    .with_context(|| format!("opening the simulated fabric {}", path.display()))?,
            );
            (Box::new(SimSource::new(f.clone())), Pacer::Sim(f))
        }
        kind @ (SourceKind::Net | SourceKind::Infiniband) => {
            let (k, default) = match kind {
                SourceKind::Net => (SysfsKind::Net, "/sys/class/net"),
                _ => (SysfsKind::Infiniband, "/sys/class/infiniband"),
            };
            let root = cfg
                .path
                .clone()
                .unwrap_or_else(|| std::path::PathBuf::from(default));
            let src = SysfsSource::open(k, &root, &host)
                .with_context(|| format!("opening {}", root.display()))?;
            let mut iv = tokio::time::interval(cfg.epoch);
            iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            (Box::new(src), Pacer::Timer(iv))
        }
    })
}

/// The source's nodes, their presence and their (sorted, unique) neighbours.
pub(super) fn topology(src: &dyn CounterSource) -> Topology {
    let n = src.node_count();
    let mut t = Topology {
        names: Vec::with_capacity(n),
        adj: Vec::with_capacity(n),
        present: Vec::with_capacity(n),
    };
    let mut nb = Vec::new();
    for i in 0..n {
        t.names.push(src.node_name(i).to_string());
        t.present.push(src.present(i));
        nb.clear();
        src.neighbors(i, &mut nb);
        nb.sort_unstable();
        nb.dedup();
        t.adj.push(nb.iter().map(|&x| x as u32).collect());
    }
    t
}

/// The epoch just consumed, for a loop that skips it.
pub(super) fn w_epoch(p: &Pacer, last: u64) -> u64 {
    match p {
        Pacer::Sim(f) => f.epoch(),
        Pacer::Timer(_) => last + 1,
    }
}
