//! Who owns which node, over a JetStream key-value store: one lease key per agent (the
//! lease bucket's `max_age` is the lease; renewed every epoch) and one owner key per node
//! (created if absent, changed only by a revision-checked update). Both buckets are watched
//! into a local view; lapsed leases are found by polling (nats-server 2.9 sends no event
//! when a key expires): a lease not renewed for a lease period is confirmed with a direct
//! get before its nodes are taken. Discovery walks the topology breadth-first from the
//! agent's attachment points with hop counts; the closer agent wins a contested node, ties
//! go to the smaller agent id. Owns the views and the claim logic; no counters.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::wire::{Lease, Owner, leases_bucket, owners_bucket};

/// KV operations in flight at once while claiming (a BFS level at a time).
const CLAIMS_IN_FLIGHT: usize = 64;
/// Claims per epoch at most, so one epoch of a huge fresh fabric stays bounded (the rest
/// follow in the next epochs; ~6.6k puts/s per server).
pub const MAX_CLAIMS_PER_EPOCH: usize = 4096;
/// Pause before a watch that ended (server restart) is started again.
const REWATCH_PAUSE: Duration = Duration::from_millis(250);

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
        leases: crate::nats::open_kv_bucket(js, &leases_bucket(name), lease, replicas).await?,
        owners: crate::nats::open_kv_bucket(js, &owners_bucket(name), Duration::ZERO, replicas)
            .await?,
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
}

/// The local view of both buckets.
#[derive(Default)]
pub struct View {
    pub owners: HashMap<String, OwnerRec>,
    pub leases: HashMap<String, LeaseRec>,
    pub owners_current: bool,
    pub leases_current: bool,
    /// The newest owner revision the watch delivered: the view holds every change up to it.
    pub owners_rev: u64,
}

pub type SharedView = Arc<Mutex<View>>;

/// Keep `view` in step with both buckets until `shutdown`; watches that end are restarted
/// (their part of the view is rebuilt from scratch and marked not current meanwhile).
pub fn spawn_watchers(b: &Buckets, view: SharedView, shutdown: CancellationToken) {
    for owners in [true, false] {
        let store = if owners {
            b.owners.clone()
        } else {
            b.leases.clone()
        };
        let (view, token) = (view.clone(), shutdown.clone());
        tokio::spawn(async move {
            loop {
                watch_once(&store, &view, owners, &token).await;
                {
                    let mut v = crate::util::lock(&view);
                    if owners {
                        v.owners_current = false;
                    } else {
                        v.leases_current = false;
                    }
                }
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(REWATCH_PAUSE) => {}
                }
            }
        });
    }
}

async fn watch_once(store: &kv::Store, view: &SharedView, owners: bool, token: &CancellationToken) {
    let mut w = match store.watch_with_history(">").await {
        Ok(w) => w,
        Err(e) => {
            tracing::debug!(error = %e, "fabric: watch failed; retrying");
            return;
        }
    };
    let empty = match store.status().await {
        Ok(s) => s.values() == 0,
        Err(_) => false,
    };
    {
        let mut v = crate::util::lock(view);
        if owners {
            v.owners.clear();
            v.owners_rev = 0;
            v.owners_current = empty;
        } else {
            v.leases.clear();
            v.leases_current = empty;
        }
    }
    loop {
        let next = tokio::select! {
            _ = token.cancelled() => return,
            n = w.next() => n,
        };
        let Some(Ok(e)) = next else {
            return;
        };
        let mut v = crate::util::lock(view);
        let put = e.operation == kv::Operation::Put;
        if owners {
            // Never older over newer: a claim this agent recorded itself may be ahead of
            // the watch.
            let newer = v
                .owners
                .get(&e.key)
                .is_none_or(|r| r.revision <= e.revision);
            match (put, serde_json::from_slice::<Owner>(&e.value)) {
                _ if !newer => {}
                (true, Ok(owner)) => {
                    v.owners.insert(
                        e.key.clone(),
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
            v.owners_rev = v.owners_rev.max(e.revision);
            if e.delta == 0 {
                v.owners_current = true;
            }
        } else {
            match (put, serde_json::from_slice::<Lease>(&e.value)) {
                (true, Ok(lease)) => {
                    v.leases.insert(
                        e.key.clone(),
                        LeaseRec {
                            lease,
                            revision: e.revision,
                            seen: Instant::now(),
                        },
                    );
                }
                _ => {
                    v.leases.remove(&e.key);
                }
            }
            if e.delta == 0 {
                v.leases_current = true;
            }
        }
    }
}

/// Whether the view holds every owner change the bucket held when asked (its last sequence):
/// a watch that fell behind (a reconnect, a slow consumer) must catch up before this agent
/// counts again, or it could count a node another agent took meanwhile.
pub async fn owners_fresh(b: &Buckets, view: &SharedView, timeout: Duration) -> bool {
    let last = match tokio::time::timeout(timeout, b.owners.status()).await {
        Ok(Ok(s)) => s.info.state.last_sequence,
        _ => return false,
    };
    let v = crate::util::lock(view);
    v.owners_current && v.owners_rev >= last
}

/// Agents whose lease lapsed: not renewed (as this agent saw it) for more than `lease`, and
/// confirmed by a direct get (gone, or still at the revision seen). Call only while this
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
        let got = tokio::time::timeout(timeout, b.leases.entry(agent.as_str())).await;
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
        let decisions: Vec<(usize, Decision)> = {
            let v = crate::util::lock(view);
            level
                .iter()
                .map(|&n| (n, decide(me, hops, v.owners.get(&topo.names[n]), lapsed)))
                .collect()
        };
        let mut mine: Vec<usize> = Vec::new();
        let mut ops = Vec::new();
        for (n, d) in decisions {
            match d {
                Decision::Mine => mine.push(n),
                Decision::Theirs => {}
                d if budget > 0 => {
                    budget -= 1;
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
        let results: Vec<(usize, Result<Option<u64>, String>)> =
            futures_util::stream::iter(ops.into_iter().map(|(n, d)| {
                let value = serde_json::to_vec(&owner(hops)).unwrap_or_default();
                let key = topo.names[n].clone();
                let store = b.owners.clone();
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
                    (n, r)
                }
            }))
            .buffer_unordered(CLAIMS_IN_FLIGHT)
            .collect()
            .await;
        {
            let mut v = crate::util::lock(view);
            for (n, r) in results {
                match r {
                    Ok(Some(rev)) => {
                        out.claimed += 1;
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
