//! Who owns which node, over a JetStream key-value store: one lease key per agent (the
//! lease bucket's `max_age` is the lease; renewed every epoch) and one owner key per node
//! (created if absent, changed only by a revision-checked update). Both buckets are read into
//! a local view by polling the streams' leaders (no consumer: nats-server 2.9.10 with a server
//! of the cluster down never answers the creation of some ephemeral consumers): the owners by
//! stream info, then the entries written since the view's sequence; the leases by which keys
//! the stream holds (one request, not a read per renewal: an agent's cost does not grow with
//! the other agents' renewals), a new agent's lease read at once and every known one again
//! once two leases old, a few per refresh. Lapsed leases are found by the
//! same polls (nats-server 2.9 sends no event when a key expires; the bucket's `max_age`
//! removes a lease not renewed for a lease period) and confirmed with a read from the leader
//! before their nodes are taken. A take
//! is fenced: a write to the owners bucket after it, and the view read up to that write,
//! settle which of two takes naming the same revision holds (both may succeed on a cluster of
//! nats-server before 2.9.21). Discovery walks the topology breadth-first from the agent's
//! attachment points with hop counts; the closer agent wins a contested node, ties go to the
//! smaller agent id. Owns the views and the claim logic; no counters.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;

use super::wire::{Lease, Owner, leases_bucket, owners_bucket};
use crate::nats::jetstream::open_kv_bucket;

/// KV operations in flight at once while claiming (a BFS level at a time).
const CLAIMS_IN_FLIGHT: usize = 64;
/// Known agents' leases read again per refresh at most, the longest unread first, each once
/// it was last read [`REREAD_AFTER_LEASES`] leases ago. The listing of keys only says an agent
/// still renews, not what its lease says: an agent restarted within a lease under another
/// parent would otherwise keep its old parent in every other view for as long as it keeps
/// renewing (its new parent never fans commands out to it). A change is seen within two
/// leases and ceil(agents / 16) epochs; an agent's reads per epoch stay bounded however large
/// the fabric.
pub const REREADS_PER_REFRESH: usize = 16;
/// How stale a known lease's value may get, in leases: the re-reads cost each agent one read
/// per other agent per two leases (at 100 agents, 30 s leases: 1.7 a second), on the scale
/// a lapsed lease is taken over in.
pub const REREAD_AFTER_LEASES: u32 = 2;
/// Claims per epoch at most, so one epoch of a huge fresh fabric stays bounded (the rest
/// follow in the next epochs; ~6.6k puts/s per server).
pub const MAX_CLAIMS_PER_EPOCH: usize = 4096;

/// The two buckets.
#[derive(Clone)]
pub struct Buckets {
    pub leases: kv::Store,
    pub owners: kv::Store,
}

/// Open the fabric's buckets, creating them if absent (file storage, one value per key; the
/// lease bucket expires values after `lease`).
pub async fn open_buckets(
    js: &jetstream::Context,
    name: &str,
    lease: Duration,
    replicas: Option<usize>,
) -> anyhow::Result<Buckets> {
    Ok(Buckets {
        leases: open_kv_bucket(js, &leases_bucket(name), lease, replicas).await?,
        owners: open_kv_bucket(js, &owners_bucket(name), Duration::ZERO, replicas).await?,
    })
}

#[derive(Clone, Debug)]
pub struct OwnerRec {
    pub owner: Owner,
    pub revision: u64,
}

#[derive(Clone, Debug)]
pub struct LeaseRec {
    pub lease: Lease,
    pub revision: u64,
    /// When this agent saw the current revision first (its own clock).
    pub seen: Instant,
    /// When this agent last read the lease's value (parent, ports) from the bucket.
    pub read: Instant,
}

/// The local view of both buckets.
#[derive(Default)]
pub struct View {
    pub owners: HashMap<String, OwnerRec>,
    pub leases: HashMap<String, LeaseRec>,
    /// The owners stream's sequence the view holds every change up to (0: not read yet).
    pub owners_rev: u64,
    /// When the last refresh that succeeded was asked for: the view held every change
    /// committed before then.
    pub owners_checked: Option<Instant>,
    pub leases_checked: Option<Instant>,
}

pub type SharedView = Arc<Mutex<View>>;

/// Sequences a refresh reads at most (in parallel; a fresh fabric's first claims are a few
/// thousand); a view further behind is read again whole (every key's latest entry).
const WALK_LIMIT: u64 = 4096;

/// How much longer than one KV operation's limit a fresh view's first read may take: it reads
/// every key (one read per node, 64 at a time), which on a busy cluster takes longer than the
/// limit, and a read cut off at the limit starts over at the next epoch and never finishes
/// (seen with 100 agents starting at once, 1 s epochs). The epochs do not wait for it.
const FIRST_READ_FACTOR: u32 = 10;

/// The owners-bucket key a fence writes (no node's name: node names never start with `_`).
pub const FENCE_KEY: &str = "_fence";

/// Brings `view` up to both buckets' state (each read from its stream's leader, within
/// `timeout`; `lease` paces the re-reading of known leases); on error the view is left as it
/// was, its `*_checked` times unchanged.
pub async fn refresh(
    b: &Buckets,
    view: &SharedView,
    timeout: Duration,
    lease: Duration,
) -> Result<(), String> {
    let (o, l) = tokio::join!(
        refresh_owners(&b.owners, view, timeout),
        refresh_leases(&b.leases, view, timeout, lease)
    );
    o.map_err(|e| format!("owners: {e}"))?;
    l.map_err(|e| format!("leases: {e}"))
}

/// Brings the view's owners up to the bucket: the stream's last sequence, then the entries
/// written since the view's (or every key's latest, when the view is new or far behind).
async fn refresh_owners(
    store: &kv::Store,
    view: &SharedView,
    timeout: Duration,
) -> Result<(), String> {
    let asked = Instant::now();
    let have = crate::util::lock(view).owners_rev;
    let work = async {
        let mut stream = store.stream.clone();
        let last = stream
            .info()
            .await
            .map_err(|e| format!("stream info: {e}"))?
            .state
            .last_sequence;
        if last == have {
            return Ok::<_, String>((last, None));
        }
        let whole = have == 0 || last < have || last - have > WALK_LIMIT;
        let entries = if whole {
            crate::nats::jetstream::latest(store).await
        } else {
            crate::nats::jetstream::changes_since(store, have, last).await
        }
        .map_err(|e| format!("{e:#}"))?;
        Ok((last, Some((whole, entries))))
    };
    // A fresh view reads every key: give it longer (it runs beside the epochs).
    let timeout = if have == 0 {
        timeout * FIRST_READ_FACTOR
    } else {
        timeout
    };
    let (last, got) = tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))??;
    let mut v = crate::util::lock(view);
    if let Some((whole, entries)) = got {
        if whole {
            // What the listing covers is replaced; claims this agent recorded meanwhile
            // (discovery runs beside a slow refresh) are newer and stay.
            v.owners.retain(|_, r| r.revision > last);
            v.owners_rev = last;
        }
        for e in entries {
            // Never older over newer: a claim this agent recorded itself may be ahead.
            if v.owners
                .get(&e.key)
                .is_some_and(|r| r.revision > e.revision)
            {
                continue;
            }
            match (e.operation, serde_json::from_slice::<Owner>(&e.value)) {
                (kv::Operation::Put, Ok(owner)) => {
                    v.owners.insert(
                        e.key,
                        OwnerRec {
                            owner,
                            revision: e.revision,
                        },
                    );
                }
                _ => {
                    v.owners.remove(&e.key);
                }
            }
        }
    }
    v.owners_rev = v.owners_rev.max(last);
    v.owners_checked = Some(asked);
    Ok(())
}

/// Brings the view's leases up to the bucket: which agents hold one (the stream's subjects,
/// one request to its leader, whatever the number of agents: a key is there while its agent
/// renews it, and expires a lease after the last renewal), each present agent's lease seen
/// now, an agent that appeared read once (its lease's value: parent, ports), one that is gone
/// removed. Reading every renewal instead costs each agent a read per agent per epoch, agents²
/// in all.
async fn refresh_leases(
    store: &kv::Store,
    view: &SharedView,
    timeout: Duration,
    lease: Duration,
) -> Result<(), String> {
    let asked = Instant::now();
    let prefix = format!("$KV.{}.", store.name);
    let work = async {
        let keys: Vec<String> =
            crate::nats::jetstream::subjects(&store.stream, &format!("{prefix}>"))
                .await
                .map_err(|e| format!("{e:#}"))?
                .into_iter()
                .filter_map(|s| s.strip_prefix(&prefix).map(String::from))
                .collect();
        // New agents, and known ones whose value was read longest ago.
        let to_read: Vec<String> = {
            let v = crate::util::lock(view);
            let stale = lease * REREAD_AFTER_LEASES;
            let mut known: Vec<(&String, Instant)> = keys
                .iter()
                .filter_map(|k| v.leases.get(k).map(|r| (k, r.read)))
                .filter(|(_, read)| read.elapsed() >= stale)
                .collect();
            known.sort_by_key(|&(_, read)| read);
            keys.iter()
                .filter(|k| !v.leases.contains_key(*k))
                .chain(known.into_iter().take(REREADS_PER_REFRESH).map(|(k, _)| k))
                .cloned()
                .collect()
        };
        let reads: Vec<anyhow::Result<Option<crate::nats::jetstream::Latest>>> =
            futures_util::stream::iter(to_read)
                .map(|key| async move { crate::nats::jetstream::latest_entry(store, &key).await })
                .buffer_unordered(CLAIMS_IN_FLIGHT)
                .collect()
                .await;
        let mut read = Vec::new();
        for r in reads {
            read.extend(r.map_err(|e| format!("{e:#}"))?);
        }
        Ok::<_, String>((keys, read))
    };
    let (keys, read) = tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))??;
    let mut v = crate::util::lock(view);
    let present: HashSet<&String> = keys.iter().collect();
    v.leases.retain(|k, _| present.contains(k));
    for r in v.leases.values_mut() {
        r.seen = asked;
    }
    for e in read {
        if let (kv::Operation::Put, Ok(lease)) =
            (e.operation, serde_json::from_slice::<Lease>(&e.value))
        {
            v.leases.insert(
                e.key,
                LeaseRec {
                    lease,
                    revision: e.revision,
                    seen: asked,
                    read: asked,
                },
            );
        }
    }
    v.leases_checked = Some(asked);
    Ok(())
}

/// Settles takes made before it: a write to the owners bucket, then the owners view read up
/// to it. Every update the leader had taken before the fence is written before it (the
/// stream applies in order), so two takes naming the same revision that both succeeded
/// (possible before nats-server 2.9.21) are both in the view after the fence, the later one
/// holding the key, and the agent whose take was overwritten sees it is not the owner.
pub async fn fence(b: &Buckets, view: &SharedView, timeout: Duration) -> Result<(), String> {
    let seq = tokio::time::timeout(timeout, b.owners.put(FENCE_KEY, Vec::new().into()))
        .await
        .map_err(|_| format!("the fence's write: no answer within {timeout:?}"))?
        .map_err(|e| format!("the fence's write: {e}"))?;
    refresh_owners(&b.owners, view, timeout).await?;
    let have = crate::util::lock(view).owners_rev;
    if have < seq {
        return Err(format!("the view reached {have}, the fence is at {seq}"));
    }
    Ok(())
}

/// Agents whose lease lapsed: not renewed (as this agent saw it) for more than `lease`, and
/// confirmed by a read from the leases stream's leader (gone, or still at the revision seen). Call only while this
/// agent has itself been healthy for a lease period (else everyone looks dead after an
/// outage).
pub async fn lapsed(
    b: &Buckets,
    view: &SharedView,
    me: &str,
    lease: Duration,
    timeout: Duration,
) -> HashSet<String> {
    let suspects: Vec<(String, Option<u64>)> = {
        let v = crate::util::lock(view);
        let mut agents: HashSet<&String> = v.owners.values().map(|o| &o.owner.agent).collect();
        agents.extend(v.leases.keys());
        agents
            .into_iter()
            .filter(|a| a.as_str() != me)
            .filter_map(|a| match v.leases.get(a) {
                None => Some((a.clone(), None)),
                Some(r) if r.seen.elapsed() > lease => Some((a.clone(), Some(r.revision))),
                Some(_) => None,
            })
            .collect()
    };
    let mut out = HashSet::new();
    for (agent, seen_rev) in suspects {
        // From the stream's leader: a replica that was away may answer an old revision.
        let got = tokio::time::timeout(
            timeout,
            crate::nats::jetstream::latest_entry(&b.leases, &agent),
        )
        .await;
        match got {
            Ok(Ok(None)) => {
                out.insert(agent);
            }
            Ok(Ok(Some(e))) if e.operation != kv::Operation::Put => {
                out.insert(agent);
            }
            Ok(Ok(Some(e))) if Some(e.revision) == seen_rev => {
                out.insert(agent);
            }
            Ok(Ok(Some(e))) => {
                // Renewed after all (the watch lags): note it.
                if let Ok(lease) = serde_json::from_slice::<Lease>(&e.value) {
                    crate::util::lock(view).leases.insert(
                        agent,
                        LeaseRec {
                            lease,
                            revision: e.revision,
                            seen: Instant::now(),
                            read: Instant::now(),
                        },
                    );
                }
            }
            // Cannot tell: assume alive.
            _ => {}
        }
    }
    out
}

/// The topology discovery walks: present nodes and their present neighbours.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    pub names: Vec<String>,
    pub adj: Vec<Vec<u32>>,
    pub present: Vec<bool>,
}

/// What to do about one node met by the walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Mine already: walk on through it.
    Mine,
    /// Nobody's: create the owner key.
    Create,
    /// Someone else's but theirs to lose (lease lapsed, or this agent is closer): update at
    /// this revision.
    Take { revision: u64 },
    /// Someone else's to keep: the walk stops here.
    Theirs,
}

/// The rule for a node at `hops` from this agent.
pub fn decide(
    me: &str,
    hops: u32,
    current: Option<&OwnerRec>,
    lapsed: &HashSet<String>,
) -> Decision {
    match current {
        None => Decision::Create,
        Some(r) if r.owner.agent == me => Decision::Mine,
        Some(r) if lapsed.contains(&r.owner.agent) => Decision::Take {
            revision: r.revision,
        },
        Some(r) if (hops, me) < (r.owner.hops, r.owner.agent.as_str()) => Decision::Take {
            revision: r.revision,
        },
        Some(_) => Decision::Theirs,
    }
}

/// What one discovery pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovery {
    pub claimed: u32,
    pub lost_races: u32,
    pub errors: u32,
    /// Nodes taken from another agent by an update (not created).
    pub taken: Vec<Taken>,
}

/// A node taken from another agent by an update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taken {
    pub node: String,
    /// The owner it was taken from when that owner was alive (taken by a closer agent), not
    /// lapsed.
    pub from_live: Option<String>,
    /// The take's revision in the owners bucket.
    pub revision: u64,
}

/// One breadth-first pass from `attach` (node ids): claims what the rules allow, walks on
/// through nodes this agent owns. KV operations of one level run concurrently.
pub async fn discover(
    b: &Buckets,
    view: &SharedView,
    topo: &Topology,
    attach: &[usize],
    me: &str,
    lapsed: &HashSet<String>,
    timeout: Duration,
) -> Discovery {
    let mut out = Discovery::default();
    let mut seen = vec![false; topo.names.len()];
    let mut level: Vec<usize> = attach
        .iter()
        .copied()
        .filter(|&n| n < topo.present.len() && topo.present[n])
        .collect();
    for &n in &level {
        seen[n] = true;
    }
    let mut hops = 0u32;
    let mut budget = MAX_CLAIMS_PER_EPOCH;
    while !level.is_empty() {
        // Each decision with the node's owner when it is alive (not lapsed).
        let decisions: Vec<(usize, Decision, Option<String>)> = {
            let v = crate::util::lock(view);
            level
                .iter()
                .map(|&n| {
                    let cur = v.owners.get(&topo.names[n]);
                    let live = cur
                        .filter(|r| !lapsed.contains(&r.owner.agent))
                        .map(|r| r.owner.agent.clone());
                    (n, decide(me, hops, cur, lapsed), live)
                })
                .collect()
        };
        let mut mine: Vec<usize> = Vec::new();
        let mut ops = Vec::new();
        let mut live_owner = HashMap::new();
        for (n, d, live) in decisions {
            match d {
                Decision::Mine => mine.push(n),
                Decision::Theirs => {}
                d if budget > 0 => {
                    budget -= 1;
                    if let Some(agent) = live {
                        live_owner.insert(n, agent);
                    }
                    ops.push((n, d));
                }
                _ => {}
            }
        }
        let owner = |h: u32| Owner {
            agent: me.to_string(),
            hops: h,
            ts_ns: crate::procfs::now_ns(),
        };
        let results: Vec<(usize, bool, Result<Option<u64>, String>)> =
            futures_util::stream::iter(ops.into_iter().map(|(n, d)| {
                let value = serde_json::to_vec(&owner(hops)).unwrap_or_default();
                let key = topo.names[n].clone();
                let store = b.owners.clone();
                let take = matches!(d, Decision::Take { .. });
                async move {
                    let r = tokio::time::timeout(timeout, async {
                        match d {
                            Decision::Create => match store.create(&key, value.into()).await {
                                Ok(rev) => Ok(Some(rev)),
                                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                                    Ok(None)
                                }
                                Err(e) => Err(e.to_string()),
                            },
                            Decision::Take { revision } => {
                                match store.update(&key, value.into(), revision).await {
                                    Ok(rev) => Ok(Some(rev)),
                                    Err(e)
                                        if e.kind() == kv::UpdateErrorKind::WrongLastRevision =>
                                    {
                                        Ok(None)
                                    }
                                    Err(e) => Err(e.to_string()),
                                }
                            }
                            _ => Ok(None),
                        }
                    })
                    .await
                    .unwrap_or_else(|_| Err("timed out".into()));
                    (n, take, r)
                }
            }))
            .buffer_unordered(CLAIMS_IN_FLIGHT)
            .collect()
            .await;
        {
            let mut v = crate::util::lock(view);
            for (n, take, r) in results {
                match r {
                    Ok(Some(rev)) => {
                        out.claimed += 1;
                        if take {
                            out.taken.push(Taken {
                                node: topo.names[n].clone(),
                                from_live: live_owner.remove(&n),
                                revision: rev,
                            });
                        }
                        // Unless the watch already brought a newer change (someone took it
                        // back meanwhile).
                        let newer = v
                            .owners
                            .get(&topo.names[n])
                            .is_none_or(|r| r.revision < rev);
                        if newer {
                            v.owners.insert(
                                topo.names[n].clone(),
                                OwnerRec {
                                    owner: owner(hops),
                                    revision: rev,
                                },
                            );
                            mine.push(n);
                        }
                    }
                    Ok(None) => out.lost_races += 1,
                    Err(e) => {
                        out.errors += 1;
                        tracing::debug!(node = %topo.names[n], error = %e, "fabric: claim failed");
                    }
                }
            }
        }
        let mut next = Vec::new();
        for n in mine {
            for &m in &topo.adj[n] {
                let m = m as usize;
                if !seen[m] && topo.present[m] {
                    seen[m] = true;
                    next.push(m);
                }
            }
        }
        level = next;
        hops += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(agent: &str, hops: u32, revision: u64) -> OwnerRec {
        OwnerRec {
            owner: Owner {
                agent: agent.into(),
                hops,
                ts_ns: 0,
            },
            revision,
        }
    }

    #[test]
    fn the_closer_agent_wins_ties_go_to_the_smaller_id() {
        let none = HashSet::new();
        assert_eq!(decide("b", 2, None, &none), Decision::Create);
        assert_eq!(decide("b", 2, Some(&rec("b", 9, 1)), &none), Decision::Mine);
        assert_eq!(
            decide("b", 2, Some(&rec("a", 3, 7)), &none),
            Decision::Take { revision: 7 }
        );
        assert_eq!(
            decide("b", 3, Some(&rec("a", 2, 7)), &none),
            Decision::Theirs
        );
        assert_eq!(
            decide("b", 2, Some(&rec("a", 2, 7)), &none),
            Decision::Theirs
        );
        assert_eq!(
            decide("a", 2, Some(&rec("b", 2, 7)), &none),
            Decision::Take { revision: 7 }
        );
        let dead: HashSet<String> = ["a".to_string()].into();
        assert_eq!(
            decide("b", 5, Some(&rec("a", 0, 7)), &dead),
            Decision::Take { revision: 7 }
        );
    }
}
