//! What the HTTP API, the command handler and the tree see of a running fabric agent
//! ([`FabricHandle`]): its configuration, its NATS client and buckets once connected, its view
//! of the ownership, the latest histograms and traps, and the commands waiting for the next
//! epoch. The agent's loop (`agent`) fills it; the tree (`tree`) reads it. Owns no task.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};

use super::config::FabricConfig;
use super::counters::CounterDesc;
use super::histogram::Histogram;
use super::ownership::{Buckets, SharedView, View};
use super::wire::{Lease, TrapMsg};
use crate::notify::Notifier;

/// Traps kept for `GET /api/fabric/traps`.
const TRAPS_KEPT: usize = 1024;

/// The metric a trap is delivered under in the notifier (`fabric.COUNTER`, instance
/// `NODE/PORT`, value: the increase in the epoch).
pub fn trap_metric(counter: &str) -> String {
    format!("fabric.{counter}")
}

/// Thresholds a command set, waiting for the next epoch: (trap, change), by counter name.
pub(super) type NewThresholds = (BTreeMap<String, u64>, BTreeMap<String, u64>);

/// A running agent as the API and the command handler see it.
pub struct FabricHandle {
    pub cfg: FabricConfig,
    pub me: String,
    pub(super) schema: OnceLock<Vec<CounterDesc>>,
    pub(super) client: OnceLock<async_nats::Client>,
    pub(super) buckets: OnceLock<Buckets>,
    pub(super) view: SharedView,
    pub(super) hist: Mutex<VecDeque<(u64, Vec<Histogram>)>>,
    pub(super) traps: Mutex<VecDeque<TrapMsg>>,
    /// This agent's latest lease value (what it renews).
    pub(super) status: Mutex<Lease>,
    pub(super) clear: AtomicBool,
    pub(super) new_thresholds: Mutex<Option<NewThresholds>>,
    /// Bytes and messages this agent published up the tree (own and relayed).
    pub bytes_up: AtomicU64,
    pub msgs_up: AtomicU64,
    pub samples_dropped: AtomicU64,
}

impl FabricHandle {
    pub fn new(cfg: FabricConfig) -> Arc<FabricHandle> {
        let me = cfg.agent_id();
        let parent = (!cfg.parent.is_empty()).then(|| cfg.parent.clone());
        Arc::new(FabricHandle {
            status: Mutex::new(Lease {
                agent: me.clone(),
                parent,
                ..Lease::default()
            }),
            me,
            cfg,
            schema: OnceLock::new(),
            client: OnceLock::new(),
            buckets: OnceLock::new(),
            view: Arc::new(Mutex::new(View::default())),
            hist: Mutex::new(VecDeque::new()),
            traps: Mutex::new(VecDeque::new()),
            clear: AtomicBool::new(false),
            new_thresholds: Mutex::new(None),
            bytes_up: AtomicU64::new(0),
            msgs_up: AtomicU64::new(0),
            samples_dropped: AtomicU64::new(0),
        })
    }

    pub fn schema(&self) -> Option<&[CounterDesc]> {
        self.schema.get().map(Vec::as_slice)
    }

    pub fn buckets(&self) -> Option<&Buckets> {
        self.buckets.get()
    }

    pub fn client(&self) -> Option<&async_nats::Client> {
        self.client.get()
    }

    /// The latest traps this agent saw (a master: the whole fabric's).
    pub fn recent_traps(&self) -> Vec<TrapMsg> {
        crate::util::lock(&self.traps).iter().cloned().collect()
    }

    pub fn lease(&self) -> Lease {
        crate::util::lock(&self.status).clone()
    }

    pub(super) fn push_trap(&self, t: TrapMsg) {
        let mut q = crate::util::lock(&self.traps);
        if q.len() >= TRAPS_KEPT {
            q.pop_front();
        }
        q.push_back(t);
    }
}

/// Deliver one trap to the notifier: one notification per trap (the value crosses the
/// threshold, then drops back so the next trap fires again).
pub(super) fn notify_trap(n: &Notifier, t: &TrapMsg) {
    let metric = trap_metric(&t.counter);
    let inst = format!("{}/{}", t.node, t.port);
    n.observe(&metric, &inst, t.increase as f64, t.ts_ns);
    n.observe(&metric, &inst, 0.0, t.ts_ns);
}
