//! The agent's place in the tree: what it sends up (data batches, traps), what it relays
//! from its children (unchanged, to its parent; the master keeps them: traps to its notifier,
//! data to its pipeline), and commands: run locally, fanned out to the children (agents
//! whose lease names this one as parent) as NATS requests, replies merged on the way up.
//! Also the status and owner queries, answered from the buckets.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::counters::find;
use super::handle::{FabricHandle, notify_trap};
use super::ownership::Buckets;
use super::wire::{
    Command, DataBatch, DataEntry, Envelope, Lease, Owner, Reply, TrapMsg, cmd_subject, prefix,
    up_subject,
};
use crate::notify::Notifier;
use crate::sample::Sample;

/// Share of a command's time budget a child gets (the rest is for merging and replying).
const CHILD_SHARE: f64 = 0.75;
/// A command's budget when the caller names none.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// Samples of a data batch (rates only; unknowable ones are left out).
fn samples(entries: &[DataEntry], ts_ns: i64) -> Vec<Sample> {
    entries
        .iter()
        .filter_map(|e| {
            let rate = e.rate?;
            let mut s = Sample::new(&format!("fabric.{}", e.counter), &e.resource, rate, ts_ns);
            s.unit = if e.counter.ends_with("_data") || e.counter.ends_with("bytes") {
                "B/s"
            } else {
                "/s"
            }
            .into();
            Some(s)
        })
        .collect()
}

fn to_pipeline(h: &FabricHandle, tx: &crossbeam_channel::Sender<Vec<Sample>>, batch: Vec<Sample>) {
    if batch.is_empty() || h.cfg.pipeline.is_none() {
        return;
    }
    if tx.try_send(batch).is_err() {
        h.samples_dropped.fetch_add(1, Relaxed);
    }
}

async fn publish_up(h: &FabricHandle, kind: &str, payload: Vec<u8>) {
    let (Some(client), false) = (h.client(), h.cfg.parent.is_empty()) else {
        return;
    };
    let n = payload.len() as u64;
    let subject = up_subject(&h.cfg.name, &h.cfg.parent, kind);
    match tokio::time::timeout(
        Duration::from_secs(1),
        client.publish(subject, payload.into()),
    )
    .await
    {
        Ok(Ok(())) => {
            h.bytes_up.fetch_add(n, Relaxed);
            h.msgs_up.fetch_add(1, Relaxed);
        }
        _ => tracing::debug!(kind, "fabric: could not publish up the tree"),
    }
}

/// An epoch's results: samples to the pipeline, traps to the notifier (and, for the
/// master, to its list), data and traps to the parent.
pub(super) async fn publish_epoch(
    h: &Arc<FabricHandle>,
    notifier: &Notifier,
    tx: &crossbeam_channel::Sender<Vec<Sample>>,
    epoch: u64,
    ts_ns: i64,
    entries: Vec<DataEntry>,
    traps: Vec<TrapMsg>,
) {
    to_pipeline(h, tx, samples(&entries, ts_ns));
    for t in &traps {
        notify_trap(notifier, t);
        h.push_trap(t.clone());
    }
    if h.cfg.parent.is_empty() {
        return;
    }
    if !traps.is_empty()
        && let Ok(payload) = serde_json::to_vec(&traps)
    {
        publish_up(h, "trap", payload).await;
    }
    if !entries.is_empty() {
        let batch = DataBatch {
            agent: h.me.clone(),
            epoch,
            ts_ns,
            entries,
        };
        for m in batch.encode() {
            publish_up(h, "data", m).await;
        }
    }
}

/// Start the relay and the command service.
pub(super) async fn spawn(
    h: Arc<FabricHandle>,
    notifier: Arc<Notifier>,
    tx: crossbeam_channel::Sender<Vec<Sample>>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let client = h
        .client()
        .expect("connected before the tree starts")
        .clone();
    let mut up = client
        .subscribe(format!("{}.up.{}.*", prefix(&h.cfg.name), h.me))
        .await?;
    let mut cmds = client.subscribe(cmd_subject(&h.cfg.name, &h.me)).await?;
    {
        let (h, token) = (h.clone(), shutdown.clone());
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    _ = token.cancelled() => return,
                    m = up.next() => match m { Some(m) => m, None => return },
                };
                let kind = msg.subject.rsplit('.').next().unwrap_or("").to_string();
                if !h.cfg.parent.is_empty() {
                    publish_up(&h, &kind, msg.payload.to_vec()).await;
                    continue;
                }
                match kind.as_str() {
                    "trap" => match serde_json::from_slice::<Vec<TrapMsg>>(&msg.payload) {
                        Ok(traps) => {
                            for t in traps {
                                notify_trap(&notifier, &t);
                                h.push_trap(t);
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "fabric: bad trap message"),
                    },
                    "data" => match DataBatch::decode(&msg.payload) {
                        Ok(b) => to_pipeline(&h, &tx, samples(&b.entries, b.ts_ns)),
                        Err(e) => tracing::warn!(error = %e, "fabric: bad data batch"),
                    },
                    other => tracing::debug!(kind = other, "fabric: unknown message kind"),
                }
            }
        });
    }
    tokio::spawn(async move {
        loop {
            let msg = tokio::select! {
                _ = shutdown.cancelled() => return,
                m = cmds.next() => match m { Some(m) => m, None => return },
            };
            let (h, client) = (h.clone(), client.clone());
            tokio::spawn(async move {
                let reply = match serde_json::from_slice::<Envelope>(&msg.payload) {
                    Ok(env) => run_command(&h, env).await,
                    Err(e) => Reply {
                        errors: vec![format!("bad command: {e}")],
                        ..Reply::default()
                    },
                };
                if let (Some(to), Ok(body)) = (msg.reply, serde_json::to_vec(&reply)) {
                    let _ = client.publish(to, body.into()).await;
                }
            });
        }
    });
    Ok(())
}

/// This agent's part of a command.
fn local(h: &FabricHandle, cmd: &Command) -> Reply {
    let mut r = Reply::default();
    let schema = h.schema().unwrap_or_default();
    match cmd {
        Command::Histogram { counter, epoch } => {
            let Some(c) = find(schema, counter) else {
                r.errors.push(format!("{}: no counter {counter:?}", h.me));
                return r;
            };
            let hist = crate::util::lock(&h.hist);
            r.epoch = *epoch;
            match hist.iter().find(|(e, _)| Some(*e) == *epoch) {
                Some((_, hs)) => {
                    r.agents.push(h.me.clone());
                    r.histogram = Some(hs[c].to_wire());
                    r.ports = hs[c].total();
                }
                None => r.missing.push(h.me.clone()),
            }
        }
        Command::Clear => {
            h.clear.store(true, Relaxed);
            r.agents.push(h.me.clone());
            r.ports = u64::from(h.lease().ports);
        }
        Command::SetThresholds { traps, change } => {
            for name in traps.keys().chain(change.keys()) {
                if find(schema, name).is_none() {
                    r.errors.push(format!("{}: no counter {name:?}", h.me));
                }
            }
            if r.errors.is_empty() {
                *crate::util::lock(&h.new_thresholds) = Some((traps.clone(), change.clone()));
                r.agents.push(h.me.clone());
                r.ports = u64::from(h.lease().ports);
            }
        }
    }
    r
}

/// Run a command here and below: children get it with a share of the time budget.
async fn run_command(h: &FabricHandle, mut env: Envelope) -> Reply {
    if let Command::Histogram { epoch, .. } = &mut env.cmd
        && epoch.is_none()
    {
        // The epoch before this agent's latest: every agent should have it by now.
        let latest = crate::util::lock(&h.hist).back().map(|(e, _)| *e);
        *epoch = latest.map(|e| e.saturating_sub(1));
    }
    let mut reply = local(h, &env.cmd);
    let children: Vec<String> = {
        let v = crate::util::lock(&h.view);
        let mut c: Vec<String> = v
            .leases
            .iter()
            .filter(|(a, r)| {
                r.lease.parent.as_deref() == Some(h.me.as_str())
                    && a.as_str() != h.me
                    && r.seen.elapsed() <= h.cfg.lease
            })
            .map(|(a, _)| a.clone())
            .collect();
        c.sort();
        c
    };
    let Some(client) = h.client() else {
        return reply;
    };
    let budget = Duration::from_millis((env.timeout_ms as f64 * CHILD_SHARE) as u64);
    let child_env = Envelope {
        cmd: env.cmd.clone(),
        timeout_ms: budget.as_millis() as u64,
    };
    let body = serde_json::to_vec(&child_env).unwrap_or_default();
    let asks = children.into_iter().map(|child| {
        let (client, body) = (client.clone(), body.clone());
        let subject = cmd_subject(&h.cfg.name, &child);
        async move {
            let r = tokio::time::timeout(budget, client.request(subject, body.into())).await;
            match r {
                Ok(Ok(m)) => serde_json::from_slice::<Reply>(&m.payload)
                    .map_err(|e| format!("{child}: bad reply: {e}")),
                _ => Err(child),
            }
        }
    });
    let results: Vec<_> = futures_util::future::join_all(asks).await;
    for r in results {
        match r {
            Ok(child) => reply.merge(child),
            Err(who) => reply.missing.push(who),
        }
    }
    reply
}

/// Send a command to `agent` (the master for the whole fabric) and wait for the merged reply.
pub async fn command(
    client: &async_nats::Client,
    name: &str,
    agent: &str,
    cmd: Command,
    timeout: Duration,
) -> anyhow::Result<Reply> {
    let env = Envelope {
        cmd,
        timeout_ms: timeout.as_millis() as u64,
    };
    let body = serde_json::to_vec(&env)?;
    let msg = tokio::time::timeout(
        timeout + Duration::from_millis(500),
        client.request(cmd_subject(name, agent), body.into()),
    )
    .await
    .map_err(|_| anyhow::anyhow!("agent {agent} did not answer within {timeout:?}"))?
    .map_err(|e| anyhow::anyhow!("asking agent {agent}: {e}"))?;
    Ok(serde_json::from_slice(&msg.payload)?)
}

/// One agent as `wasmon fabric status` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AgentStatus {
    #[serde(flatten)]
    pub lease: Lease,
    /// Time since the agent last renewed its lease.
    pub lease_age_ms: f64,
}

/// Every agent with a lease in the bucket (lapsed ones have none), sorted by id; read from the
/// stream's leader without a consumer (see `crate::nats::jetstream::latest`).
pub async fn status(b: &Buckets) -> anyhow::Result<Vec<AgentStatus>> {
    let entries = crate::nats::jetstream::latest(&b.leases)
        .await
        .map_err(|e| anyhow::anyhow!("listing leases: {e:#}"))?;
    let now = crate::procfs::now_ns();
    let mut out: Vec<AgentStatus> = entries
        .into_iter()
        .filter(|e| e.operation == async_nats::jetstream::kv::Operation::Put)
        .filter_map(|e| serde_json::from_slice::<Lease>(&e.value).ok())
        .map(|lease| AgentStatus {
            lease_age_ms: (now - lease.ts_ns) as f64 / 1e6,
            lease,
        })
        .collect();
    out.sort_by(|a, b| a.lease.agent.cmp(&b.lease.agent));
    Ok(out)
}

/// Who monitors a node: the owner value and its revision, if anyone does (from the stream's
/// leader).
pub async fn owner(b: &Buckets, node: &str) -> anyhow::Result<Option<(Owner, u64)>> {
    match crate::nats::jetstream::latest_entry(&b.owners, node).await {
        Ok(Some(e)) if e.operation == async_nats::jetstream::kv::Operation::Put => {
            Ok(Some((serde_json::from_slice(&e.value)?, e.revision)))
        }
        Ok(_) => Ok(None),
        Err(e) => anyhow::bail!("reading the owner of {node}: {e:#}"),
    }
}

/// The master: the live agent without a parent.
pub async fn master(b: &Buckets) -> anyhow::Result<String> {
    status(b)
        .await?
        .into_iter()
        .find(|a| a.lease.parent.is_none())
        .map(|a| a.lease.agent)
        .ok_or_else(|| anyhow::anyhow!("no master agent has a lease in the bucket"))
}
