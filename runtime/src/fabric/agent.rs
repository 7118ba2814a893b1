//! One fabric agent: opens its counter source, connects to NATS, joins the ownership
//! buckets and runs the epoch loop — renew the lease, find lapsed leases, discover and claim
//! nodes, read and process the owned ports, hand samples to the pipeline, traps to the
//! notifier, and data and traps up the tree. [`FabricHandle`] is what the HTTP API and the
//! command handler see of a running agent. Background tasks end with the shutdown token.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::config::FabricConfig;
use super::counters::{Class, CounterDesc};
use super::engine::{Engine, Output};
use super::epoch::{Epoch, Work};
use super::handle::{FabricHandle, trap_metric};
use super::ownership::{self, Topology};
use super::pacer::{Pacer, open_source, topology, w_epoch};
use super::wire::MISSING_LISTED;
use crate::notify::{Handle, Notifier, Selector, ThresholdSpec};
use crate::sample::Sample;

/// Epochs of histograms kept for `histogram` commands.
const HISTORY: usize = 64;
/// Sample batches waiting for the pipeline; beyond it batches are dropped (and counted).
const PIPELINE_QUEUE: usize = 64;
/// How long an epoch waits for the view's refresh before it goes on with the view it has: a
/// refresh takes milliseconds on a healthy cluster, and while a bucket's stream elects a
/// leader (4-9 s on nats-server) it answers nothing, which must not stop the counting.
const VIEW_WAIT: Duration = Duration::from_millis(100);
/// How often a start asks NATS and the buckets again while they do not answer: a server
/// restarting comes back within seconds, and asking faster would only load it.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// A node this agent took from another by an update, not counted until its take is settled:
/// fenced (see `ownership::fence`), and, when its owner was alive, released by that owner
/// (its lease says its view holds the take) or a view-staleness limit after the take (the
/// owner may count it for that long with a view from before the take).
struct Pending {
    since: Instant,
    /// The live owner it was taken from.
    from_live: Option<String>,
    /// The take's revision.
    revision: u64,
    fenced: bool,
    released: bool,
}

/// The notifier thresholds mirroring the trap thresholds (removed when replaced or dropped).
struct TrapThresholds {
    notifier: Arc<Notifier>,
    handles: Vec<Handle>,
}

impl TrapThresholds {
    fn register(
        notifier: &Arc<Notifier>,
        subscriber: &str,
        schema: &[CounterDesc],
        trap: &[u64],
    ) -> anyhow::Result<TrapThresholds> {
        let mut t = TrapThresholds {
            notifier: notifier.clone(),
            handles: Vec::new(),
        };
        for (c, &thr) in schema.iter().zip(trap) {
            if c.class == Class::Error && thr > 0 {
                let spec = ThresholdSpec::rising(Selector::any(trap_metric(c.name)), thr as f64);
                t.handles.push(notifier.add(subscriber, spec)?);
            }
        }
        Ok(t)
    }
}

impl TrapThresholds {
    fn remove(&mut self) {
        for h in self.handles.drain(..) {
            let _ = self.notifier.remove(h, None);
        }
    }
}

impl Drop for TrapThresholds {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Connects to NATS and opens the ownership buckets, retrying each [`RETRY_EVERY`] until both
/// answer (reporting to `health` meanwhile); `None` once `shutdown` is cancelled.
async fn connect(
    cfg: &FabricConfig,
    health: &crate::supervise::Health,
    shutdown: &CancellationToken,
) -> Option<(async_nats::Client, ownership::Buckets)> {
    let client = until_ok(health, shutdown, "cannot reach NATS", || async {
        cfg.connection().connect(std::path::Path::new("")).await
    })
    .await?;
    let js = async_nats::jetstream::new(client.clone());
    let buckets = until_ok(health, shutdown, "JetStream buckets not ready", || async {
        ownership::open_buckets(&js, &cfg.name, cfg.lease, cfg.replicas)
            .await
            .map_err(|e| format!("{e:#}"))
    })
    .await?;
    Some((client, buckets))
}

/// `attempt` each [`RETRY_EVERY`] until it succeeds, each failure reported to `health` after
/// `what`; `None` once `shutdown` is cancelled.
async fn until_ok<T, E: std::fmt::Display, F: Future<Output = Result<T, E>>>(
    health: &crate::supervise::Health,
    shutdown: &CancellationToken,
    what: &str,
    mut attempt: impl FnMut() -> F,
) -> Option<T> {
    loop {
        match attempt().await {
            Ok(v) => return Some(v),
            Err(e) => health.failing(&format!("{what}: {e}")),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(RETRY_EVERY) => {}
        }
    }
}

/// Run one agent until `shutdown`. `deliver` gets the samples for the pipeline (on a thread
/// of its own: it may block).
pub async fn run_agent(
    handle: Arc<FabricHandle>,
    notifier: Arc<Notifier>,
    deliver: Box<dyn FnMut(Vec<Sample>) + Send>,
    shutdown: CancellationToken,
    health: crate::supervise::Health,
) -> anyhow::Result<()> {
    // The watchers and the tree this run starts end with it (a restarted agent starts its
    // own): the guard cancels them when the run returns or panics.
    let shutdown = shutdown.child_token();
    let _helpers = shutdown.clone().drop_guard();
    let Some(mut agent) = Agent::start(handle, notifier, deliver, &shutdown, &health).await? else {
        return Ok(());
    };
    while agent.pacer.next_epoch(agent.last_epoch, &shutdown).await {
        agent.epoch().await?;
        agent.renew_lease().await?;
    }
    Ok(())
}

/// A running agent's state between epochs. Its `Work` is not `Sync`: the steps that wait
/// take `&mut self`, so an agent's future stays `Send`.
struct Agent {
    handle: Arc<FabricHandle>,
    notifier: Arc<Notifier>,
    cfg: FabricConfig,
    me: String,
    schema: Vec<CounterDesc>,
    /// The trap and change thresholds: the configuration's and those commands added.
    trap_cfg: (BTreeMap<String, u64>, BTreeMap<String, u64>),
    notify_thr: TrapThresholds,
    /// Samples for the pipeline's thread.
    tx: crossbeam_channel::Sender<Vec<Sample>>,
    buckets: ownership::Buckets,
    /// KV operations must not hold an epoch up for long while the server is away.
    kv_timeout: Duration,
    pacer: Pacer,
    /// The source and engine, away on a blocking thread while they read.
    work: Option<Work>,
    last_epoch: u64,
    /// Since when the lease has been renewed without a miss.
    healthy_since: Option<Instant>,
    renewed: Option<Instant>,
    /// Node index by name, in the source's topology.
    ids: HashMap<String, usize>,
    /// The view's refresh, running beside the epochs.
    refreshing: Option<tokio::task::JoinHandle<Result<(), String>>>,
    /// The lease's renewal in flight: its result, and when it was sent.
    renewing: Option<(tokio::task::JoinHandle<Result<(), String>>, Instant)>,
    /// Nodes taken, not counted yet.
    pending: HashMap<String, Pending>,
}

impl Agent {
    /// Step 1: opens the source, sets the thresholds up, starts the pipeline's thread, connects to
    /// NATS (retrying until it answers), and starts the ownership watchers and the tree. `None`
    /// when `shutdown` came first.
    async fn start(
        handle: Arc<FabricHandle>,
        notifier: Arc<Notifier>,
        mut deliver: Box<dyn FnMut(Vec<Sample>) + Send>,
        shutdown: &CancellationToken,
        health: &crate::supervise::Health,
    ) -> anyhow::Result<Option<Agent>> {
        let cfg = handle.cfg.clone();
        cfg.check().map_err(anyhow::Error::msg)?;
        let me = handle.me.clone();
        let (source, pacer) = open_source(&cfg)?;
        let schema = source.schema().to_vec();
        let _ = handle.schema.set(schema.clone());
        let thresholds = cfg.thresholds(&schema).map_err(anyhow::Error::msg)?;
        let notify_thr =
            TrapThresholds::register(&notifier, &cfg.subscriber, &schema, &thresholds.trap)?;
        let engine = Engine::new(&schema, thresholds, source.can_clear());

        let (tx, rx) = crossbeam_channel::bounded::<Vec<Sample>>(PIPELINE_QUEUE);
        std::thread::Builder::new()
            .name("fabric-samples".into())
            .spawn(move || {
                for batch in rx {
                    deliver(batch);
                }
            })?;

        let Some((client, buckets)) = connect(&cfg, health, shutdown).await else {
            return Ok(None);
        };
        let _ = handle.client.set(client.clone());
        let _ = handle.buckets.set(buckets.clone());
        let version = client.server_info().version;
        let replicas = buckets.owners.stream.cached_info().config.num_replicas;
        if replicas > 1 && crate::nats::jetstream::cas_safe(&version) == Some(false) {
            tracing::warn!(
                server = %version,
                replicas,
                "fabric: nats-server {version} on a cluster: two updates naming the same revision \
                 can both succeed before 2.9.21; every take is fenced, so one agent keeps the node, \
                 but run 2.9.21 or later"
            );
        }
        super::tree::spawn(
            handle.clone(),
            notifier.clone(),
            tx.clone(),
            shutdown.clone(),
        )
        .await?;
        tracing::info!(agent = %me, parent = %cfg.parent, fabric = %cfg.name, "fabric agent running");
        health.working();
        Ok(Some(Agent {
            kv_timeout: cfg
                .epoch
                .min(cfg.lease / 2)
                .clamp(Duration::from_millis(200), Duration::from_secs(2)),
            trap_cfg: (cfg.traps.clone(), cfg.change.clone()),
            handle,
            notifier,
            cfg,
            me,
            schema,
            notify_thr,
            tx,
            buckets,
            pacer,
            work: Some(Work {
                source,
                engine,
                out: Output::default(),
            }),
            last_epoch: 0,
            healthy_since: None,
            renewed: None,
            ids: HashMap::new(),
            refreshing: None,
            renewing: None,
            pending: HashMap::new(),
        }))
    }

    /// One epoch: the topology, discovery, the owned ports read and processed, the results
    /// published. An epoch this agent cannot be sure of what it owns is skipped.
    async fn epoch(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        self.renewal_done().await;
        if self.refreshing.is_none() {
            let (b, view, t, lease) = (
                self.buckets.clone(),
                self.handle.view.clone(),
                self.kv_timeout,
                self.cfg.lease,
            );
            self.refreshing = Some(tokio::spawn(async move {
                ownership::refresh(&b, &view, t, lease).await
            }));
        }
        let lease_fresh = self.renewed.is_some_and(|t| t.elapsed() < self.cfg.lease);
        let (mut w, topo) = self.topology().await?;
        if !self.discover(&topo, lease_fresh).await {
            // Not sure what is ours: skip the epoch (the next rates span the gap).
            self.work = Some(w);
            self.last_epoch = w_epoch(&self.pacer, self.last_epoch);
            return Ok(());
        }
        let owned = self.owned();
        let missing_nodes: Vec<String> = owned
            .iter()
            .filter(|&&n| !topo.present[n])
            .map(|&n| topo.names[n].clone())
            .collect();
        self.apply_thresholds(&mut w)?;
        // Step 6: the owned ports read and processed, cleared first when a command asked.
        let fresh = self.handle.clear.swap(false, Relaxed);
        let ports: Vec<u32> = owned
            .iter()
            .flat_map(|&n| w.source.node_ports(n).map(|x| x as u32))
            .collect();
        let me = self.me.clone();
        let (w, result) = tokio::task::spawn_blocking(move || {
            let r = w.run(&me, ports, fresh);
            (w, r)
        })
        .await?;
        self.work = Some(w);
        let ep = match result {
            Ok(ep) => ep,
            Err(e) => {
                tracing::warn!(error = %e, "fabric: reading counters failed");
                self.last_epoch = w_epoch(&self.pacer, self.last_epoch);
                return Ok(());
            }
        };
        self.last_epoch = match &self.pacer {
            Pacer::Sim(_) => ep.epoch,
            Pacer::Timer(_) => self.last_epoch + 1,
        };
        self.publish(ep, owned.len(), missing_nodes, started).await;
        Ok(())
    }

    /// Step 2: the topology as the source sees it now (read on a blocking thread), and the node
    /// indices by name renewed when it changed size.
    async fn topology(&mut self) -> anyhow::Result<(Work, Topology)> {
        let mut w = self.work.take().expect("work is put back every epoch");
        let (w, topo) = tokio::task::spawn_blocking(move || {
            w.source.refresh();
            let t = topology(&*w.source);
            (w, t)
        })
        .await?;
        if self.ids.len() != topo.names.len() {
            self.ids = topo
                .names
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), i))
                .collect();
        }
        Ok((w, topo))
    }

    /// Steps 3 and 4: lapsed leases (judged only after a lease period of our own good health) and
    /// discovery; whether this epoch may count (the lease, the owners and the view current).
    async fn discover(&mut self, topo: &Topology, lease_fresh: bool) -> bool {
        // The refresh started this epoch, waited for briefly.
        let mut refreshed = false;
        if let Some(mut task) = self.refreshing.take() {
            match tokio::time::timeout(VIEW_WAIT, &mut task).await {
                Ok(Ok(Ok(()))) => refreshed = true,
                Ok(Ok(Err(e))) => tracing::debug!(error = %e, "fabric: view not refreshed"),
                Ok(Err(e)) => tracing::warn!(error = %e, "fabric: the view's refresh failed"),
                Err(_) => self.refreshing = Some(task),
            }
        }
        let stale = self.stale_limit();
        let (handle, cfg, me) = (&self.handle, &self.cfg, &self.me);
        let view_ok = {
            let v = crate::util::lock(&handle.view);
            v.owners_checked.is_some_and(|t| t.elapsed() < stale)
        };
        let judging = refreshed && self.healthy_since.is_some_and(|t| t.elapsed() >= cfg.lease);
        let lapsed = if judging {
            ownership::lapsed(&self.buckets, &handle.view, me, cfg.lease, self.kv_timeout).await
        } else {
            HashSet::new()
        };
        let may_count = lease_fresh && view_ok;
        if !may_count {
            tracing::info!(lease_fresh, view_ok, "fabric: not counting this epoch");
            return false;
        }
        let attach: Vec<usize> = if cfg.attach.is_empty() {
            (0..topo.names.len()).collect()
        } else {
            cfg.attach
                .iter()
                .filter_map(|n| self.ids.get(n).copied())
                .collect()
        };
        let d = ownership::discover(
            &self.buckets,
            &handle.view,
            topo,
            &attach,
            me,
            &lapsed,
            self.kv_timeout,
        )
        .await;
        if d.claimed > 0 || d.errors > 0 {
            tracing::info!(claimed = d.claimed, lost = d.lost_races, errors = d.errors, lapsed = ?lapsed, "fabric: discovery");
        }
        let now = Instant::now();
        for t in d.taken {
            self.pending.insert(
                t.node,
                Pending {
                    since: now,
                    from_live: t.from_live,
                    revision: t.revision,
                    fenced: false,
                    released: false,
                },
            );
        }
        if self.pending.values().any(|p| !p.fenced) {
            match ownership::fence(&self.buckets, &self.handle.view, self.kv_timeout).await {
                Ok(()) => self.pending.values_mut().for_each(|p| p.fenced = true),
                Err(e) => tracing::warn!(error = %e, "fabric: takes not fenced yet"),
            }
        }
        self.released().await;
        true
    }

    /// Takes from live owners that those owners have let go of: the owner's lease, read from
    /// the leases stream's leader, says its view held the take when it chose the nodes of an
    /// epoch this agent has reached (a simulated fabric's epochs are the same for every agent;
    /// a timer's are not, but the lease was written after that choice, and this agent counts
    /// only after reading it). A new owner's first reading is a baseline, one more epoch of
    /// margin. Without it the take waits out the view-staleness limit (half a lease).
    async fn released(&mut self) {
        let mut owners: BTreeMap<String, u64> = BTreeMap::new();
        for p in self.pending.values().filter(|p| p.fenced && !p.released) {
            if let Some(from) = &p.from_live {
                let r = owners.entry(from.clone()).or_default();
                *r = (*r).max(p.revision);
            }
        }
        for (owner, _) in owners {
            let got = tokio::time::timeout(
                self.kv_timeout,
                crate::nats::jetstream::latest_entry(&self.buckets.leases, &owner),
            )
            .await;
            let Ok(Ok(Some(e))) = got else { continue };
            let Ok(lease) = serde_json::from_slice::<super::wire::Lease>(&e.value) else {
                continue;
            };
            let reached = match &self.pacer {
                Pacer::Sim(f) => f.epoch() >= lease.epoch,
                Pacer::Timer(_) => true,
            };
            if !reached {
                continue;
            }
            for p in self.pending.values_mut() {
                if p.fenced
                    && p.from_live.as_ref() == Some(&owner)
                    && p.revision <= lease.owners_rev
                {
                    p.released = true;
                }
            }
        }
    }

    /// How old the view may be while this agent counts: half a lease. A node taken from a
    /// live owner is counted by its taker only this long after the take, by when the owner
    /// has seen the take or stopped counting.
    fn stale_limit(&self) -> Duration {
        self.cfg.lease / 2
    }

    /// Step 5: the nodes this agent owns and may count (takes settled), by index, ascending.
    fn owned(&mut self) -> Vec<usize> {
        let stale = self.stale_limit();
        let (mut owned, rev): (Vec<usize>, u64) = {
            let v = crate::util::lock(&self.handle.view);
            let me = &self.me;
            self.pending.retain(|n, p| {
                let mine = v.owners.get(n).is_some_and(|r| &r.owner.agent == me);
                let settled =
                    p.fenced && (p.from_live.is_none() || p.released || p.since.elapsed() >= stale);
                mine && !settled
            });
            let owned = v
                .owners
                .iter()
                .filter(|(n, r)| r.owner.agent == self.me && !self.pending.contains_key(*n))
                .filter_map(|(n, _)| self.ids.get(n).copied())
                .collect();
            (owned, v.owners_rev)
        };
        // What the lease says with this epoch: nodes taken at or before `rev` are not counted
        // here from this epoch on (see `released`).
        crate::util::lock(&self.handle.status).owners_rev = rev;
        owned.sort_unstable();
        owned
    }

    /// Thresholds a command asked for, added to the ones in force: the engine's and the
    /// notifier's mirrors replaced (refused ones logged, the old ones kept).
    fn apply_thresholds(&mut self, w: &mut Work) -> anyhow::Result<()> {
        let Some((traps, change)) = crate::util::lock(&self.handle.new_thresholds).take() else {
            return Ok(());
        };
        self.trap_cfg.0.extend(traps);
        self.trap_cfg.1.extend(change);
        let c = FabricConfig {
            traps: self.trap_cfg.0.clone(),
            change: self.trap_cfg.1.clone(),
            ..self.cfg.clone()
        };
        match c.thresholds(&self.schema) {
            Ok(t) => {
                // The old mirrors go before the new ones are added (same names).
                self.notify_thr.remove();
                self.notify_thr = TrapThresholds::register(
                    &self.notifier,
                    &self.cfg.subscriber,
                    &self.schema,
                    &t.trap,
                )?;
                w.engine.set_thresholds(t);
            }
            Err(e) => tracing::warn!(error = %e, "fabric: thresholds refused"),
        }
        Ok(())
    }

    /// Step 7: results, histograms kept, traps and data up the tree, samples to the pipeline, and
    /// the status `fabric status` shows.
    async fn publish(
        &mut self,
        ep: Epoch,
        nodes: usize,
        missing_nodes: Vec<String>,
        started: Instant,
    ) {
        let handle = &self.handle;
        let epoch_no = if ep.epoch > 0 {
            ep.epoch
        } else {
            self.last_epoch
        };
        {
            let mut h = crate::util::lock(&handle.hist);
            if h.len() >= HISTORY {
                h.pop_front();
            }
            h.push_back((epoch_no, ep.hist));
        }
        super::tree::publish_epoch(
            handle,
            &self.notifier,
            &self.tx,
            epoch_no,
            ep.ts_ns,
            ep.entries,
            ep.traps,
        )
        .await;
        let lag_ms = (crate::procfs::now_ns() - ep.ts_ns) as f64 / 1e6;
        {
            let mut s = crate::util::lock(&handle.status);
            s.epoch = epoch_no;
            s.epoch_ms = started.elapsed().as_secs_f64() * 1e3;
            s.lag_ms = lag_ms;
            s.nodes = nodes as u32;
            s.ports = ep.ports;
            s.ports_missing = ep.missing;
            s.missing_nodes = missing_nodes.into_iter().take(MISSING_LISTED).collect();
        }
        tracing::debug!(
            epoch = epoch_no,
            read = ep.read,
            missing = ep.missing,
            nodes,
            "fabric epoch"
        );
    }

    /// Step 8: the lease, renewed with this epoch's status (what `fabric status` shows), in the
    /// background (a renewal still in flight is not doubled).
    async fn renew_lease(&mut self) -> anyhow::Result<()> {
        self.renewal_done().await;
        if self.renewing.is_some() {
            return Ok(());
        }
        let lease_value = {
            let mut s = crate::util::lock(&self.handle.status);
            s.ts_ns = crate::procfs::now_ns();
            serde_json::to_vec(&*s)?
        };
        let (leases, me, t) = (
            self.buckets.leases.clone(),
            self.me.clone(),
            self.kv_timeout,
        );
        let task = tokio::spawn(async move {
            match tokio::time::timeout(t, leases.put(&me, lease_value.into())).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {t:?}")),
            }
        });
        // The lease counts from when it was sent: whoever judges it saw it later.
        self.renewing = Some((task, Instant::now()));
        Ok(())
    }

    /// The renewal in flight, if it has finished: the lease fresh from its sending, or this
    /// agent not healthy.
    async fn renewal_done(&mut self) {
        if !self.renewing.as_ref().is_some_and(|(t, _)| t.is_finished()) {
            return;
        }
        let Some((task, sent)) = self.renewing.take() else {
            return;
        };
        let why = match task.await {
            Ok(Ok(())) => {
                self.renewed = Some(sent);
                self.healthy_since.get_or_insert(sent);
                return;
            }
            Ok(Err(e)) => e,
            Err(e) => e.to_string(),
        };
        self.healthy_since = None;
        tracing::warn!(error = %why, "fabric: lease not renewed");
    }
}
