//! Delivery side of the notifier: one bounded queue per subscriber (drop-newest, drops counted
//! exactly and reported in order inside the stream), and the `NotificationSink` trait through
//! which other transports (NATS) are plugged in. Owns no thresholds; never blocks the caller of
//! `push`, which is the ingest thread.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, mpsc};

use super::types::{Notification, NotifyError};

/// What a subscriber's stream yields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// A threshold crossing.
    Notification(Notification),
    /// `count` notifications were dropped at this point of the stream because the queue was full.
    Dropped { count: u64 },
}

/// Counters of one subscriber. Invariant once the queue is drained:
/// `sent == delivered + dropped`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriberStats {
    /// Notifications produced for this subscriber.
    pub sent: u64,
    /// Notifications handed to a consumer.
    pub delivered: u64,
    /// Notifications dropped because the queue was full.
    pub dropped: u64,
    /// Notifications waiting in the queue now.
    pub queued: u64,
}

struct Queued {
    /// Drops that happened just before this item was enqueued; reported before it.
    dropped_before: u64,
    n: Notification,
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<Queued>,
    /// Drops not yet attached to a queued item (the tail of the stream).
    overflow: u64,
}

/// A named receiver of notifications with a bounded queue.
pub struct Subscriber {
    name: Arc<str>,
    capacity: usize,
    state: Mutex<QueueState>,
    wake: Notify,
    sent: AtomicU64,
    delivered: AtomicU64,
    dropped: AtomicU64,
    watched: AtomicBool,
    /// Milliseconds; 0 = no batching.
    batch_window_ms: AtomicU64,
}

impl Subscriber {
    pub(crate) fn new(name: Arc<str>, capacity: usize) -> Self {
        Subscriber {
            name,
            capacity: capacity.max(1),
            state: Mutex::new(QueueState::default()),
            wake: Notify::new(),
            sent: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            watched: AtomicBool::new(false),
            batch_window_ms: AtomicU64::new(0),
        }
    }

    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // A panic while holding this lock cannot leave the queue inconsistent (every mutation is
        // a single push/pop), so a poisoned lock is still usable.
        crate::util::lock(&self.state)
    }

    /// Enqueue without blocking; when full, drop `n` and count it.
    pub(crate) fn push(&self, n: Notification) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        {
            let mut st = self.lock();
            if st.items.len() >= self.capacity {
                st.overflow += 1;
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let dropped_before = std::mem::take(&mut st.overflow);
            st.items.push_back(Queued { dropped_before, n });
        }
        self.wake.notify_one();
    }

    /// The next event if one is ready.
    pub fn try_recv(&self) -> Option<Event> {
        let mut st = self.lock();
        if let Some(front) = st.items.front_mut() {
            if front.dropped_before > 0 {
                let count = std::mem::take(&mut front.dropped_before);
                return Some(Event::Dropped { count });
            }
            let q = st.items.pop_front()?;
            self.delivered.fetch_add(1, Ordering::Relaxed);
            return Some(Event::Notification(q.n));
        }
        if st.overflow > 0 {
            let count = std::mem::take(&mut st.overflow);
            return Some(Event::Dropped { count });
        }
        None
    }

    /// Wait for the next event.
    pub async fn recv(&self) -> Event {
        loop {
            // Created before the check so a push between the check and the await is not lost
            // (notify_one also stores a permit when nobody waits).
            let notified = self.wake.notified();
            if let Some(ev) = self.try_recv() {
                return ev;
            }
            notified.await;
        }
    }

    /// Wait for at least one event, then, if a batch window is set, keep collecting for that
    /// window (a burst of alarms arrives as one batch); at most `max` events.
    pub async fn recv_batch(&self, max: usize) -> Vec<Event> {
        let first = self.recv().await;
        let mut out = vec![first];
        if let Some(window) = self.batch_window() {
            tokio::time::sleep(window).await;
        }
        while out.len() < max.max(1) {
            match self.try_recv() {
                Some(ev) => out.push(ev),
                None => break,
            }
        }
        out
    }

    /// Collect notifications that arrive within `window` of the first one into one batch
    /// (`None`: deliver each as it comes).
    pub fn set_batch_window(&self, window: Option<Duration>) {
        let ms = window.map_or(0, |w| (w.as_millis() as u64).max(1));
        self.batch_window_ms.store(ms, Ordering::Relaxed);
    }

    pub fn batch_window(&self) -> Option<Duration> {
        match self.batch_window_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    pub fn stats(&self) -> SubscriberStats {
        let queued = self.lock().items.len() as u64;
        SubscriberStats {
            sent: self.sent.load(Ordering::Relaxed),
            delivered: self.delivered.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            queued,
        }
    }

    /// Claim the subscriber's stream; one consumer at a time, so two streams never split one
    /// subscriber's notifications between them. Released when the guard drops.
    pub fn attach(self: &Arc<Self>) -> Result<WatchGuard, NotifyError> {
        if self.watched.swap(true, Ordering::AcqRel) {
            return Err(NotifyError::AlreadyWatched(self.name.to_string()));
        }
        Ok(WatchGuard {
            sub: Arc::clone(self),
        })
    }
}

/// Exclusive consumer access to one subscriber; see `Subscriber::attach`.
pub struct WatchGuard {
    sub: Arc<Subscriber>,
}

impl WatchGuard {
    pub fn subscriber(&self) -> &Arc<Subscriber> {
        &self.sub
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.sub.watched.store(false, Ordering::Release);
    }
}

/// A transport that receives every notification (all owners), e.g. a NATS publisher.
/// `deliver` runs on the ingest thread: it must not block or do I/O; hand off to a task.
pub trait NotificationSink: Send + Sync + 'static {
    fn deliver(&self, n: &Notification);
}

/// A sink that hands notifications to an async task over a bounded channel, dropping (and
/// counting) when the task falls behind. The receiving end is where the lead plugs in
/// `async-nats`: see `forward` below.
pub struct ChannelSink {
    tx: mpsc::Sender<Notification>,
    dropped: AtomicU64,
}

impl ChannelSink {
    pub fn new(capacity: usize) -> (Arc<Self>, mpsc::Receiver<Notification>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (
            Arc::new(ChannelSink {
                tx,
                dropped: AtomicU64::new(0),
            }),
            rx,
        )
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl NotificationSink for ChannelSink {
    fn deliver(&self, n: &Notification) {
        if self.tx.try_send(n.clone()).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// NATS subject for a notification: `{prefix}.{owner}`, with characters that NATS treats
/// specially in a token (`.`, `*`, `>`, whitespace) replaced by `_`.
pub fn subject_for(prefix: &str, n: &Notification) -> String {
    let mut s = String::with_capacity(prefix.len() + 1 + n.owner.len());
    s.push_str(prefix);
    s.push('.');
    s.extend(n.owner.chars().map(|c| match c {
        '.' | '*' | '>' => '_',
        c if c.is_whitespace() => '_',
        c => c,
    }));
    s
}

/// Drain a `ChannelSink` receiver into a publisher until the channel closes or `shutdown` fires.
/// `publish(subject, json_payload)` is e.g. `|s, p| client.publish(s, p.into())` with an
/// `async_nats::Client`; a failed publish is logged and the notification dropped.
pub async fn forward<F, Fut, E>(
    mut rx: mpsc::Receiver<Notification>,
    subject_prefix: String,
    shutdown: tokio_util::sync::CancellationToken,
    mut publish: F,
) where
    F: FnMut(String, Vec<u8>) -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    loop {
        let n = tokio::select! {
            _ = shutdown.cancelled() => return,
            n = rx.recv() => match n { Some(n) => n, None => return },
        };
        let payload = match serde_json::to_vec(&n) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "notification not serialisable");
                continue;
            }
        };
        if let Err(e) = publish(subject_for(&subject_prefix, &n), payload).await {
            tracing::warn!(error = %e, handle = n.handle.0, "publishing notification failed");
        }
    }
}
