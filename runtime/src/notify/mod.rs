//! `runtime::notify` — the generic threshold notifier (after QNX's generic notifier).
//!
//! Owns thresholds (resource, value, direction, optional hysteresis), their 32-bit handles,
//! per-instance and global ("every instance of a metric") thresholds, edge-triggered evaluation
//! of incoming samples, and delivery to subscribers (bounded queues read as HTTP streams by
//! `api::notify`), to the log, and to pluggable sinks (NATS via `ChannelSink` + `forward`).
//! It does not read /proc, store samples or serve HTTP: the pipeline calls `Notifier::observe`,
//! `procfs` detectors register thresholds like any client, `api::notify` exposes the operations.
//!
//! Semantics: a threshold is armed when added. It fires when a sample lands on its far side
//! (rising: `value >= N`; falling: `value < N`) while armed, and disarms; it re-arms when a
//! sample is back on the near side by at least the hysteresis. Each (threshold, instance) pair
//! has its own arm state, so one global threshold serves every instance. NaN samples are ignored.

mod index;
mod nats;
mod subscriber;
mod types;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use serde::{Deserialize, Serialize};

use index::{Index, Threshold};
pub use nats::{NatsSinkConfig, NatsSinkError, run_nats_sink};
pub use subscriber::{
    ChannelSink, Event, NotificationSink, Subscriber, SubscriberStats, WatchGuard, forward,
    subject_for,
};
pub use types::{
    ANY_INSTANCE, CurrentValue, Direction, Handle, Notification, NotifyError, SampleRef, Selector,
    ThresholdInfo, ThresholdSpec,
};

/// The `[notify]` section of the daemon's config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct NotifierConfig {
    /// Notifications buffered per subscriber before further ones are dropped (and counted).
    pub queue_capacity: usize,
    /// Also log every notification (target `wasmon::notify`, level INFO).
    pub log: bool,
    /// Also publish every notification on NATS (`[notify.nats]`).
    pub nats: Option<nats::NatsSinkConfig>,
}

impl Default for NotifierConfig {
    fn default() -> Self {
        NotifierConfig {
            queue_capacity: 1024,
            log: true,
            nats: None,
        }
    }
}

/// Everything about thresholds that is not on the hot path; one mutex serialises
/// add/remove so the shards are always updated in the same order.
#[derive(Default)]
struct Registry {
    /// Last handle given out; the next search starts after it.
    last: u32,
    by_handle: HashMap<u32, Arc<Threshold>>,
    /// Handles per metric (global and per-instance), for listing and to know when a metric has
    /// no thresholds left.
    by_metric: HashMap<Arc<str>, BTreeSet<u32>>,
}

/// The notifier. `Sync`: share it as `Arc<Notifier>` between the pipeline, detectors and API.
pub struct Notifier {
    cfg: NotifierConfig,
    index: Index,
    registry: Mutex<Registry>,
    subscribers: RwLock<HashMap<Arc<str>, Arc<Subscriber>>>,
    sinks: RwLock<Vec<Arc<dyn NotificationSink>>>,
}

impl Default for Notifier {
    fn default() -> Self {
        Notifier::new(NotifierConfig::default())
    }
}

/// For tests: a notifier with queues of `queue_capacity` and no log lines.
#[cfg(test)]
impl Notifier {
    pub(crate) fn quiet(queue_capacity: usize) -> Notifier {
        Notifier::new(NotifierConfig {
            queue_capacity,
            log: false,
            ..Default::default()
        })
    }
}

impl Notifier {
    pub fn new(cfg: NotifierConfig) -> Self {
        Notifier {
            cfg,
            index: Index::new(),
            registry: Mutex::new(Registry::default()),
            subscribers: RwLock::new(HashMap::new()),
            sinks: RwLock::new(Vec::new()),
        }
    }

    pub fn config(&self) -> &NotifierConfig {
        &self.cfg
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        crate::util::lock(&self.registry)
    }

    /// Ingest one sample: update the resource's current value (if any threshold covers it) and
    /// deliver a notification for every threshold it crosses. Never blocks on subscribers; does
    /// not allocate unless a threshold fires or a global threshold sees a new instance.
    #[inline]
    pub fn observe(&self, metric: &str, instance: &str, value: f64, ts_ns: i64) {
        self.index
            .observe(metric, instance, value, ts_ns, |t, inst| {
                self.fire(t, inst, value, ts_ns)
            });
    }

    /// `observe` for a batch of samples.
    pub fn observe_batch<'a>(&self, samples: impl IntoIterator<Item = SampleRef<'a>>) {
        for s in samples {
            self.observe(s.metric, s.instance, s.value, s.ts_ns);
        }
    }

    #[cold]
    fn fire(&self, t: &Threshold, instance: &Arc<str>, value: f64, ts_ns: i64) {
        let n = Notification {
            handle: t.handle,
            owner: Arc::clone(t.owner.name()),
            metric: Arc::clone(&t.metric),
            instance: Arc::clone(instance),
            value,
            threshold: t.value,
            direction: t.direction,
            ts_ns,
        };
        if self.cfg.log {
            tracing::info!(
                target: "wasmon::notify",
                handle = n.handle.0, owner = %n.owner, metric = %n.metric, instance = %n.instance,
                value, threshold = t.value, direction = %t.direction, ts_ns,
                "threshold crossed"
            );
        }
        for sink in crate::util::read(&self.sinks).iter() {
            sink.deliver(&n);
        }
        t.owner.push(n);
    }

    /// Add a threshold owned by `owner` (a subscriber name chosen by the client).
    pub fn add(&self, owner: &str, spec: ThresholdSpec) -> Result<Handle, NotifyError> {
        if spec.selector.metric.is_empty() {
            return Err(NotifyError::Invalid("empty metric name"));
        }
        if owner.is_empty() {
            return Err(NotifyError::Invalid("empty subscriber name"));
        }
        if !spec.value.is_finite() {
            return Err(NotifyError::Invalid("threshold value must be finite"));
        }
        if !(spec.hysteresis.is_finite() && spec.hysteresis >= 0.0) {
            return Err(NotifyError::Invalid("hysteresis must be finite and >= 0"));
        }
        let owner = self.subscriber(owner);
        let mut reg = self.registry();
        let handle = Self::next_handle(&mut reg)?;
        let metric: Arc<str> = match reg.by_metric.get_key_value(spec.selector.metric.as_str()) {
            Some((k, _)) => Arc::clone(k),
            None => Arc::from(spec.selector.metric.as_str()),
        };
        let t = Arc::new(Threshold {
            handle,
            owner,
            metric: Arc::clone(&metric),
            instance: spec.selector.instance.as_deref().map(Arc::from),
            value: spec.value,
            direction: spec.direction,
            hysteresis: spec.hysteresis,
        });
        match &t.instance {
            None => self.index.add_global(&t),
            Some(i) => self.index.add_local(&t, i),
        }
        reg.by_metric.entry(metric).or_default().insert(handle.0);
        reg.by_handle.insert(handle.0, t);
        Ok(handle)
    }

    fn next_handle(reg: &mut Registry) -> Result<Handle, NotifyError> {
        if reg.by_handle.len() >= u32::MAX as usize {
            return Err(NotifyError::HandlesExhausted);
        }
        // Monotonic so a deleted handle is not reused soon; skips 0 and live handles on wrap.
        loop {
            reg.last = reg.last.wrapping_add(1);
            if reg.last != 0 && !reg.by_handle.contains_key(&reg.last) {
                return Ok(Handle(reg.last));
            }
        }
    }

    /// Delete a threshold. With `owner`, only its owner may delete it.
    pub fn remove(
        &self,
        handle: Handle,
        owner: Option<&str>,
    ) -> Result<ThresholdInfo, NotifyError> {
        let mut reg = self.registry();
        let t = reg
            .by_handle
            .get(&handle.0)
            .ok_or(NotifyError::UnknownHandle(handle))?;
        if let Some(caller) = owner
            && caller != &**t.owner.name()
        {
            return Err(NotifyError::NotOwner {
                handle,
                owner: t.owner.name().to_string(),
                caller: caller.to_string(),
            });
        }
        let t = reg
            .by_handle
            .remove(&handle.0)
            .expect("present: checked above");
        self.unindex(&mut reg, &t);
        Ok(info(&t))
    }

    fn unindex(&self, reg: &mut Registry, t: &Threshold) {
        match &t.instance {
            None => self.index.remove_global(t),
            Some(i) => self.index.remove_local(t, i),
        }
        if let Some(set) = reg.by_metric.get_mut(&*t.metric) {
            set.remove(&t.handle.0);
            if set.is_empty() {
                reg.by_metric.remove(&*t.metric);
                self.index.drop_metric(&t.metric);
            }
        }
    }

    /// Delete every threshold owned by `owner`; returns them.
    pub fn remove_all(&self, owner: &str) -> Vec<ThresholdInfo> {
        let mut reg = self.registry();
        let mine: Vec<u32> = reg
            .by_handle
            .iter()
            .filter(|(_, t)| &**t.owner.name() == owner)
            .map(|(h, _)| *h)
            .collect();
        let mut out = Vec::with_capacity(mine.len());
        for h in mine {
            if let Some(t) = reg.by_handle.remove(&h) {
                self.unindex(&mut reg, &t);
                out.push(info(&t));
            }
        }
        out.sort_by_key(|i| i.handle);
        out
    }

    /// The threshold a handle names.
    pub fn get(&self, handle: Handle) -> Option<ThresholdInfo> {
        self.registry().by_handle.get(&handle.0).map(|t| info(t))
    }

    /// Thresholds on a resource, whoever owns them. With an instance: that instance's own
    /// thresholds and the metric's global ones (all of which apply to it). Without: every
    /// threshold on the metric.
    pub fn list(&self, metric: &str, instance: Option<&str>) -> Vec<ThresholdInfo> {
        let instance = instance.filter(|i| *i != ANY_INSTANCE);
        let reg = self.registry();
        let Some(set) = reg.by_metric.get(metric) else {
            return Vec::new();
        };
        set.iter()
            .filter_map(|h| reg.by_handle.get(h))
            .filter(|t| match (instance, &t.instance) {
                (None, _) | (_, None) => true,
                (Some(want), Some(have)) => want == &**have,
            })
            .map(|t| info(t))
            .collect()
    }

    /// Every threshold, by handle (`wasmon notify ls` with nothing named).
    pub fn list_all(&self) -> Vec<ThresholdInfo> {
        let reg = self.registry();
        let mut out: Vec<_> = reg.by_handle.values().map(|t| info(t)).collect();
        out.sort_by_key(|i| i.handle);
        out
    }

    /// Thresholds owned by one subscriber.
    pub fn list_owner(&self, owner: &str) -> Vec<ThresholdInfo> {
        let reg = self.registry();
        let mut out: Vec<_> = reg
            .by_handle
            .values()
            .filter(|t| &**t.owner.name() == owner)
            .map(|t| info(t))
            .collect();
        out.sort_by_key(|i| i.handle);
        out
    }

    /// Last value seen for a resource. Values are tracked for instances covered by a threshold
    /// (their own, or a global one on the metric); `None` otherwise or before the first sample.
    pub fn value(&self, metric: &str, instance: &str) -> Option<CurrentValue> {
        self.index.value(metric, instance)
    }

    /// Forget an instance that went away (e.g. an exited pid) so a reused name starts armed
    /// and memory does not grow with churn.
    pub fn forget_instance(&self, metric: &str, instance: &str) -> bool {
        self.index.forget(metric, instance)
    }

    /// Forget instances not covered by their own threshold whose last sample is older than
    /// `cutoff_ts_ns`. Returns how many were forgotten.
    pub fn expire_older_than(&self, cutoff_ts_ns: i64) -> usize {
        self.index.expire(cutoff_ts_ns)
    }

    /// Number of thresholds registered.
    pub fn threshold_count(&self) -> usize {
        self.registry().by_handle.len()
    }

    /// Number of (metric, instance) entries tracked.
    pub fn tracked_instances(&self) -> usize {
        self.index.instance_count()
    }

    /// The subscriber with this name, created on first use.
    pub fn subscriber(&self, name: &str) -> Arc<Subscriber> {
        if let Some(s) = crate::util::read(&self.subscribers).get(name) {
            return Arc::clone(s);
        }
        let mut subs = crate::util::write(&self.subscribers);
        let s = subs.entry(Arc::from(name)).or_insert_with_key(|k| {
            Arc::new(Subscriber::new(Arc::clone(k), self.cfg.queue_capacity))
        });
        Arc::clone(s)
    }

    /// The subscriber if it exists (it exists once it added a threshold or was watched).
    pub fn find_subscriber(&self, name: &str) -> Option<Arc<Subscriber>> {
        crate::util::read(&self.subscribers).get(name).cloned()
    }

    /// Names of the known subscribers.
    pub fn subscriber_names(&self) -> Vec<String> {
        let subs = crate::util::read(&self.subscribers);
        let mut v: Vec<String> = subs.keys().map(|k| k.to_string()).collect();
        v.sort();
        v
    }

    /// Send every notification (of all owners) to `sink` as well.
    pub fn add_sink(&self, sink: Arc<dyn NotificationSink>) {
        crate::util::write(&self.sinks).push(sink);
    }
}

fn info(t: &Threshold) -> ThresholdInfo {
    ThresholdInfo {
        handle: t.handle,
        owner: t.owner.name().to_string(),
        metric: t.metric.to_string(),
        instance: t.instance.as_ref().map(|i| i.to_string()),
        value: t.value,
        direction: t.direction,
        hysteresis: t.hysteresis,
    }
}
