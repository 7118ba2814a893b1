//! What a pmcd answers, request by request: the namespace PDUs from the PMNS (dynamic
//! subtrees asked of their agents by the [`Source`]), descriptors, instances, help text and
//! fetches with the client's profile applied, plus pmcd's own `pmcd.*` metrics.
//!
//! Owns the answers and the state they need (instance numbers per indom, per-connection
//! profiles); knows no sockets (`server.rs`) and no bytes beyond calling `pdu.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::pdu::{self, Desc, Profile, Request, Value, ValueSet};
use super::pmcd::{self, PMCD_DOMAIN, PMCD_ROOT, PmcdInfo};
use super::units::{parse_units, sem_code, to_value, type_code};
use super::wire::{IN_NULL, NULL_ID, errors};
use crate::namespace::{Child, LabelsOf, MetricDesc, NsError, Pmid, Traversal, ValueType, Values};

/// What the server needs of the metrics behind it: the namespace with its agents. The daemon
/// implements it over its agents; each call locks an agent for that call only.
pub trait Source: Send + Sync + 'static {
    fn lookup(&self, name: &str) -> Result<Pmid, NsError>;
    fn names_of(&self, id: Pmid) -> Result<Vec<String>, NsError>;
    fn children(&self, name: &str) -> Result<Vec<Child>, NsError>;
    fn traverse(&self, prefix: &str) -> Result<Traversal, NsError>;
    fn describe(&self, id: Pmid) -> Result<MetricDesc, NsError>;
    /// A fixed instance number of the agent for `domain`, when it has one.
    fn instance_id(&self, domain: u32, indom: u32, name: &str) -> Option<u32>;
    /// Every instance name of an indom, when its agent lists them itself.
    fn instances(&self, _domain: u32, _indom: u32) -> Option<Vec<String>> {
        None
    }
    /// One answer per id, in order.
    fn fetch(&self, ids: &[Pmid]) -> Vec<Result<Values, NsError>>;
    /// How many agents answer (`pmcd.numagents`).
    fn agent_count(&self) -> u32;
    /// The name in the domain label of the agent for `domain`; `None`: no agent has it.
    fn agent_name(&self, domain: u32) -> Option<String>;
    /// Labels the agent for `domain` states for a metric, an indom or an instance.
    fn labels(&self, domain: u32, of: LabelsOf) -> Vec<(String, serde_json::Value)>;
}

/// Most instance domains the server numbers instances for; past it, instances of new indoms
/// are not served (a misbehaving agent cannot grow the tables without bound).
pub const MAX_INDOMS: usize = 4096;
/// Most instances numbered per indom (PCP's own PMDAs cap theirs similarly); numbers are
/// never reused while the server runs, so a client's instance keeps its number.
pub const MAX_INSTANCES: usize = 1 << 16;
/// Most PROFILE contexts one connection may hold (pmcd keys profiles by context too; a real
/// client uses one or a few).
pub const MAX_CONTEXTS: usize = 64;
/// Most descriptors one connection keeps between fetches.
const MAX_CACHED_DESCS: usize = 1 << 16;
/// Most names one PMNS_NAMES may ask for; the 64 KiB PDU limit allows about 16,000.
pub const MAX_NAMES: usize = 1 << 14;

/// Instance numbers of one indom, in the order first seen.
#[derive(Default)]
struct Indom {
    by_name: HashMap<String, i32>,
    /// The numbers taken (by the agent's fixed numbers and ours).
    used: std::collections::HashSet<i32>,
    next: i32,
    /// Metrics of this indom, first described first: what INSTANCE_REQ fetches to
    /// enumerate it. Several, since some metrics of an indom have no values on a host (the
    /// first one with values answers).
    metrics: Vec<Pmid>,
}

/// Metrics remembered per indom to enumerate it with (pmdalinux's CPU indom has a dozen
/// /proc/cpuinfo metrics a VM may leave without values, described before the CPU times).
const METRICS_PER_INDOM: usize = 64;

/// State shared by every connection of one server.
pub struct Shared {
    source: Box<dyn Source>,
    indoms: Mutex<HashMap<u32, Indom>>,
    pub clients: AtomicU32,
    hostname: String,
    timezone: String,
    zoneinfo: Option<String>,
}

impl Shared {
    pub fn new(source: Box<dyn Source>, hostname: String) -> Shared {
        Shared {
            source,
            indoms: Mutex::new(HashMap::new()),
            clients: AtomicU32::new(0),
            hostname,
            timezone: pmcd::timezone(),
            zoneinfo: pmcd::zoneinfo(),
        }
    }

    fn info(&self) -> PmcdInfo {
        PmcdInfo {
            hostname: self.hostname.clone(),
            timezone: self.timezone.clone(),
            zoneinfo: self.zoneinfo.clone(),
            numclients: self.clients.load(Ordering::Relaxed),
            numagents: self.source.agent_count() + 1,
        }
    }

    /// The numbers of instance names of `indom` (raw pmInDom), assigning the next free one (or
    /// the agent's own) to a name seen for the first time; `None` past the tables' bounds.
    /// The agent is asked for its numbers outside the tables' lock: a busy agent holds up
    /// only its own metrics.
    fn instances(&self, indom: u32, names: &[&str]) -> Vec<Option<i32>> {
        let lock = || crate::util::lock(&self.indoms);
        let new: Vec<&str> = {
            let all = lock();
            match all.get(&indom) {
                Some(t) => names
                    .iter()
                    .copied()
                    .filter(|n| !t.by_name.contains_key(*n))
                    .collect(),
                None => names.to_vec(),
            }
        };
        let fixed: Vec<Option<i32>> = new
            .iter()
            .map(|n| {
                self.source
                    .instance_id(indom >> 22, indom & 0x3f_ffff, n)
                    .and_then(|i| i32::try_from(i).ok())
            })
            .collect();
        let mut all = lock();
        if !all.contains_key(&indom) && all.len() >= MAX_INDOMS {
            return vec![None; names.len()];
        }
        let t = all.entry(indom).or_default();
        for (name, fixed) in new.into_iter().zip(fixed) {
            if t.by_name.contains_key(name) || t.by_name.len() >= MAX_INSTANCES {
                continue;
            }
            let id = match fixed {
                Some(i) => i,
                None => {
                    // Skip numbers an agent's fixed ones took.
                    while t.used.contains(&t.next) {
                        t.next += 1;
                    }
                    t.next
                }
            };
            t.used.insert(id);
            t.by_name.insert(name.to_string(), id);
        }
        names.iter().map(|n| t.by_name.get(*n).copied()).collect()
    }

    fn remember_indom(&self, indom: u32, metric: Pmid) {
        let mut all = crate::util::lock(&self.indoms);
        if !all.contains_key(&indom) && all.len() >= MAX_INDOMS {
            return;
        }
        let known = &mut all.entry(indom).or_default().metrics;
        if known.len() < METRICS_PER_INDOM && !known.contains(&metric) {
            known.push(metric);
        }
    }

    fn indom_metrics(&self, indom: u32) -> Vec<Pmid> {
        let all = crate::util::lock(&self.indoms);
        all.get(&indom)
            .map(|i| i.metrics.clone())
            .unwrap_or_default()
    }
}

/// A descriptor and what a fetch needs of it.
#[derive(Clone, Copy)]
struct Known {
    desc: Desc,
    ty: ValueType,
}

/// A label set as built: (instance, (name, JSON value) pairs, the flags of its labels).
type OwnedLabelSet = (i32, Vec<(String, String)>, u8);

/// The context labels pmcd gives (libpcp's `local_host_labels`): `hostname`, `domainname`
/// (`getdomainname`, `localdomain` when unset) and `machineid` (`/etc/machine-id`,
/// `localmachine` when absent), as (name, JSON value).
fn context_labels(hostname: &str) -> Vec<(String, String)> {
    let json = |v: &str| serde_json::Value::String(v.to_string()).to_string();
    let domain = std::fs::read_to_string("/proc/sys/kernel/domainname")
        .ok()
        .map(|d| d.trim().to_string())
        .filter(|d| !d.is_empty() && d != "(none)")
        .unwrap_or_else(|| "localdomain".into());
    let machine = std::fs::read_to_string("/etc/machine-id")
        .ok()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "localmachine".into());
    vec![
        ("hostname".into(), json(hostname)),
        ("domainname".into(), json(&domain)),
        ("machineid".into(), json(&machine)),
    ]
}

/// An agent's value in its metric's PCP type; one of the wrong kind (text for a number, a
/// number for text) is left out, and said at debug level: the agent is at fault, not the
/// client.
fn conform(id: Pmid, ty: ValueType, v: crate::namespace::Value) -> Option<Value> {
    let text = matches!(v, crate::namespace::Value::Text(_));
    let out = to_value(ty, v);
    if out.is_none() {
        tracing::debug!(pmid = %id, ?ty, text, "PCP fetch: a value of the wrong kind, left out");
    }
    out
}

/// One client connection's state.
pub struct Session {
    shared: Arc<Shared>,
    profiles: HashMap<u32, Profile>,
    descs: HashMap<Pmid, Known>,
}

impl Session {
    pub fn new(shared: Arc<Shared>) -> Session {
        Session {
            shared,
            profiles: HashMap::new(),
            descs: HashMap::new(),
        }
    }

    /// Drops the descriptors kept for fetches (the agents behind the source changed).
    pub fn forget(&mut self) {
        self.descs.clear();
    }

    fn src(&self) -> &dyn Source {
        &*self.shared.source
    }

    /// The reply to one request; `None` where PCP sends none (PROFILE, CREDS, ERROR).
    pub fn answer(&mut self, req: Request) -> Option<Vec<u8>> {
        Some(match req {
            Request::Creds(_) | Request::Error(_) => return None,
            Request::Profile(p) => {
                if self.profiles.len() < MAX_CONTEXTS || self.profiles.contains_key(&p.ctx) {
                    self.profiles.insert(p.ctx, p);
                }
                return None;
            }
            Request::Names(names) => self.lookup_names(&names),
            Request::Ids(ids) => match ids.as_slice() {
                [id] => match self.names_of(Pmid::from_raw(*id)) {
                    Ok(n) => pdu::names(&n, None),
                    Err(e) => pdu::error(e.code()),
                },
                _ => pdu::error(errors::PMID),
            },
            Request::Child { name, status } => match self.children(&name) {
                Ok(kids) => {
                    let names: Vec<&str> = kids.iter().map(|c| c.name.as_str()).collect();
                    let leaf: Vec<bool> = kids.iter().map(|c| c.leaf).collect();
                    pdu::names(&names, status.then_some(leaf.as_slice()))
                }
                Err(e) => pdu::error(e.code()),
            },
            Request::Traverse(prefix) => match self.traverse(&prefix) {
                Ok(names) if !names.is_empty() => pdu::names(&names, None),
                Ok(_) => pdu::error(NsError::UnknownName.code()),
                Err(e) => pdu::error(e.code()),
            },
            Request::DescReq(id) => match self.desc(Pmid::from_raw(id)) {
                Ok(k) => pdu::desc(&k.desc),
                Err(code) => pdu::error(code),
            },
            Request::DescIds(ids) => self.descs(&ids),
            Request::LabelReq { ident, kind } => self.labels(ident, kind),
            Request::InstanceReq { indom, inst, name } => self.instances(indom, inst, name),
            Request::Fetch { ctx, ids, highres } => self.fetch(ctx, &ids, highres),
            Request::TextReq { ident, kind } => self.text(ident, kind),
            Request::Store => pdu::error(errors::PERMISSION),
        })
    }

    fn lookup(&self, name: &str) -> Result<Pmid, NsError> {
        if name == PMCD_ROOT {
            return Err(NsError::NonLeaf);
        }
        if name.starts_with("pmcd.") {
            return pmcd::lookup(name).ok_or(NsError::UnknownName);
        }
        self.src().lookup(name)
    }

    /// pmcd's rule: one name that fails is an ERROR; of several, misses are `PM_ID_NULL`.
    fn lookup_names(&self, names: &[String]) -> Vec<u8> {
        if names.len() > MAX_NAMES {
            return pdu::error(errors::TOOBIG);
        }
        if let [one] = names {
            return match self.lookup(one) {
                Ok(id) => pdu::ids(1, &[id.to_raw()]),
                Err(e) => pdu::error(e.code()),
            };
        }
        let ids: Vec<u32> = names
            .iter()
            .map(|n| self.lookup(n).map_or(NULL_ID, |id| id.to_raw()))
            .collect();
        let found = ids.iter().filter(|&&i| i != NULL_ID).count();
        pdu::ids(found as i32, &ids)
    }

    fn names_of(&self, id: Pmid) -> Result<Vec<String>, NsError> {
        if id.domain == PMCD_DOMAIN {
            return pmcd::name_of(id)
                .map(|n| vec![n.to_string()])
                .ok_or(NsError::UnknownPmid);
        }
        self.src().names_of(id)
    }

    fn children(&self, name: &str) -> Result<Vec<Child>, NsError> {
        if name == PMCD_ROOT {
            return Ok(pmcd::names()
                .map(|n| Child {
                    name: n[PMCD_ROOT.len() + 1..].to_string(),
                    leaf: true,
                })
                .collect());
        }
        if name.starts_with("pmcd.") {
            return match pmcd::lookup(name) {
                Some(_) => Ok(Vec::new()),
                None => Err(NsError::UnknownName),
            };
        }
        let mut kids = self.src().children(name)?;
        if name.is_empty() && !kids.iter().any(|c| c.name == PMCD_ROOT) {
            kids.push(Child {
                name: PMCD_ROOT.into(),
                leaf: false,
            });
        }
        Ok(kids)
    }

    fn traverse(&self, prefix: &str) -> Result<Vec<String>, NsError> {
        if prefix == PMCD_ROOT || prefix.starts_with("pmcd.") {
            let names: Vec<String> = pmcd::names()
                .filter(|n| *n == prefix || n.starts_with(&format!("{prefix}.")))
                .map(str::to_string)
                .collect();
            return if names.is_empty() {
                Err(NsError::UnknownName)
            } else {
                Ok(names)
            };
        }
        let t = self.src().traverse(prefix)?;
        for (root, e) in &t.failed {
            tracing::debug!(root, error = %e, "PCP traverse: a dynamic subtree's agent failed");
        }
        let mut names = t.names;
        if prefix.is_empty() {
            names.extend(pmcd::names().map(str::to_string));
        }
        Ok(names)
    }

    /// The descriptor of `id` (kept for later fetches), or a PCP error code.
    fn desc(&mut self, id: Pmid) -> Result<Known, i32> {
        if let Some(k) = self.descs.get(&id) {
            return Ok(*k);
        }
        let k = if id.domain == PMCD_DOMAIN {
            let desc = pmcd::desc(id).ok_or(errors::PMID)?;
            let ty = if desc.ty == 6 {
                ValueType::String
            } else {
                ValueType::U64
            };
            Known { desc, ty }
        } else {
            if id.is_dynamic_root() || !id.is_valid() {
                return Err(errors::PMID);
            }
            let d = self.src().describe(id).map_err(|e| e.code())?;
            let ty = d.value_type;
            let indom = match d.indom {
                Some(serial) => {
                    let raw = (id.domain << 22) | (serial & 0x3f_ffff);
                    self.shared.remember_indom(raw, id);
                    raw
                }
                None => NULL_ID,
            };
            let units = parse_units(&d.units).unwrap_or_else(|| {
                tracing::debug!(pmid = %id, units = d.units, "units PCP cannot express: none");
                0
            });
            Known {
                desc: Desc {
                    pmid: id.to_raw(),
                    ty: type_code(ty),
                    indom,
                    sem: sem_code(d.semantics),
                    units,
                },
                ty,
            }
        };
        if self.descs.len() >= MAX_CACHED_DESCS {
            self.descs.clear();
        }
        self.descs.insert(id, k);
        Ok(k)
    }

    /// Values of one metric as (instance number, name, value), or a PCP error code.
    fn values_of(
        &mut self,
        id: Pmid,
        values: Result<Values, NsError>,
    ) -> Result<Vec<(i32, String, Value)>, i32> {
        let k = self.desc(id)?;
        let values = values.map_err(|e| e.code())?;
        if k.desc.indom == NULL_ID {
            return Ok(values
                .into_iter()
                .take(1)
                .filter_map(|(_, v)| Some((IN_NULL, String::new(), conform(id, k.ty, v)?)))
                .collect());
        }
        let names: Vec<&str> = values.iter().map(|(n, _)| n.as_str()).collect();
        let ids = self.shared.instances(k.desc.indom, &names);
        Ok(values
            .into_iter()
            .zip(ids)
            .filter_map(|((name, v), inst)| Some((inst?, name, conform(id, k.ty, v)?)))
            .collect())
    }

    fn fetch(&mut self, ctx: u32, raw: &[u32], highres: bool) -> Vec<u8> {
        let ids: Vec<Pmid> = raw.iter().map(|&r| Pmid::from_raw(r)).collect();
        // One source call for every non-pmcd metric: the agents batch per domain.
        let want: Vec<Pmid> = ids
            .iter()
            .copied()
            .filter(|id| id.domain != PMCD_DOMAIN && id.is_valid() && !id.is_dynamic_root())
            .collect();
        let mut fetched = self.src().fetch(&want).into_iter();
        let info = ids
            .iter()
            .any(|id| id.domain == PMCD_DOMAIN)
            .then(|| self.shared.info());
        let profile = self.profiles.get(&ctx).cloned();
        let mut sets = Vec::with_capacity(ids.len());
        for &id in &ids {
            let values = if id.domain == PMCD_DOMAIN {
                match info.as_ref().and_then(|i| pmcd::value(id, i)) {
                    Some(v) => Ok(vec![(IN_NULL, v)]),
                    None if pmcd::name_of(id).is_some() => Ok(Vec::new()),
                    None => Err(errors::PMID),
                }
            } else if !id.is_valid() || id.is_dynamic_root() {
                Err(errors::PMID)
            } else {
                let got = fetched.next().unwrap_or(Err(NsError::NoAgent));
                self.values_of(id, got).map(|v| {
                    let indom = self.descs.get(&id).map_or(NULL_ID, |k| k.desc.indom);
                    v.into_iter()
                        .filter(|(inst, _, _)| {
                            indom == NULL_ID
                                || profile.as_ref().is_none_or(|p| p.includes(indom, *inst))
                        })
                        .map(|(inst, _, v)| (inst, v))
                        .collect()
                })
            };
            sets.push(ValueSet {
                pmid: id.to_raw(),
                values,
            });
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        if highres {
            pdu::highres_result(now.as_secs() as i64, i64::from(now.subsec_nanos()), &sets)
        } else {
            pdu::result(now.as_secs() as i32, now.subsec_micros() as i32, &sets)
        }
    }

    /// DESC_IDS: every descriptor in one reply (`PM_ID_NULL` for the ones that failed); when
    /// all fail, the first failure's code, as a lone DESC_REQ would get.
    fn descs(&mut self, ids: &[u32]) -> Vec<u8> {
        let mut first_err = None;
        let descs: Vec<Desc> = ids
            .iter()
            .map(|&raw| match self.desc(Pmid::from_raw(raw)) {
                Ok(k) => k.desc,
                Err(code) => {
                    first_err.get_or_insert(code);
                    Desc {
                        pmid: NULL_ID,
                        ty: 0,
                        indom: NULL_ID,
                        sem: 0,
                        units: 0,
                    }
                }
            })
            .collect();
        match first_err {
            Some(code) if descs.iter().all(|d| d.pmid == NULL_ID) => pdu::error(code),
            _ if descs.is_empty() => pdu::error(errors::PMID),
            _ => pdu::descs(&descs),
        }
    }

    /// LABEL_REQ, as pmcd and libpcp_pmda answer it: the context's `hostname`, `domainname`
    /// and `machineid`; a domain's `agent`; the labels an agent states for a metric, an indom
    /// and each of its instances (one set per instance); none of clusters. Names are
    /// sorted within a set, as libpcp sorts them.
    fn labels(&mut self, ident: u32, kind: u32) -> Vec<u8> {
        use super::wire::labels::{CLUSTER, CONTEXT, DOMAIN, INDOM, INSTANCES, ITEM};
        let json = |v: &str| serde_json::Value::String(v.to_string()).to_string();
        let sets: Vec<OwnedLabelSet> = match kind & 0x3f {
            CONTEXT => vec![(
                IN_NULL,
                context_labels(&self.shared.hostname),
                CONTEXT as u8,
            )],
            DOMAIN => {
                let name = if ident == PMCD_DOMAIN {
                    Some("pmcd".to_string())
                } else {
                    self.src().agent_name(ident)
                };
                match name {
                    Some(n) => vec![(IN_NULL, vec![("agent".into(), json(&n))], DOMAIN as u8)],
                    None => return pdu::error(errors::NOAGENT),
                }
            }
            INDOM | ITEM => {
                let (domain, of) = if kind & 0x3f == INDOM {
                    (ident >> 22, LabelsOf::Indom(ident & 0x3f_ffff))
                } else {
                    let id = Pmid::from_raw(ident);
                    (id.domain, LabelsOf::Item(id))
                };
                let own = self.src().labels(domain, of);
                let own: Vec<(String, String)> =
                    own.into_iter().map(|(n, v)| (n, v.to_string())).collect();
                if own.is_empty() {
                    vec![]
                } else {
                    vec![(IN_NULL, own, (kind & 0x3f) as u8)]
                }
            }
            INSTANCES => {
                let (domain, serial) = (ident >> 22, ident & 0x3f_ffff);
                let all = match self.indom_instances(ident) {
                    Ok(v) => v,
                    Err(code) => return pdu::error(code),
                };
                all.iter()
                    .map(|(inst, name, _)| {
                        let own = self.src().labels(domain, LabelsOf::Instance(serial, name));
                        let own = own.into_iter().map(|(n, v)| (n, v.to_string())).collect();
                        (*inst, own, INSTANCES as u8)
                    })
                    .collect()
            }
            CLUSTER => vec![],
            _ => return pdu::error(errors::TYPE),
        };
        let sets: Vec<pdu::LabelSet> = sets
            .iter()
            .map(|(inst, labels, flags)| {
                let mut labels: Vec<(&str, String, u8)> = labels
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.clone(), *flags))
                    .collect();
                labels.sort_by(|a, b| a.0.cmp(b.0));
                pdu::LabelSet {
                    inst: *inst,
                    labels,
                }
            })
            .collect();
        pdu::label(ident, kind, &sets)
    }

    /// The instances of `indom` now, as (number, name, value): those of the values of its
    /// metrics (indoms are learnt from descriptors), or a PCP error code.
    fn indom_instances(&mut self, indom: u32) -> Result<Vec<(i32, String, Value)>, i32> {
        // The agent's own list first: a metric of the indom may lack values for some.
        if let Some(names) = self.src().instances(indom >> 22, indom & 0x3f_ffff) {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let ids = self.shared.instances(indom, &refs);
            return Ok(names
                .into_iter()
                .zip(ids)
                .filter_map(|(name, id)| Some((id?, name, Value::U32(0))))
                .collect());
        }
        let metrics = self.shared.indom_metrics(indom);
        // One fetch of them all (an agent reads each file once).
        let got = self.src().fetch(&metrics);
        let mut answer: Result<Vec<(i32, String, Value)>, i32> = Err(errors::INDOM);
        // The union over its metrics: an instance may have values for some only (pmdalinux's
        // per-node zoneinfo entries have none of the per-zone watermarks).
        for (metric, values) in metrics.into_iter().zip(got) {
            match (&mut answer, self.values_of(metric, values)) {
                (Ok(all), Ok(more)) => {
                    for v in more {
                        if !all.iter().any(|(i, _, _)| *i == v.0) {
                            all.push(v);
                        }
                    }
                }
                (a @ Err(_), b) => *a = b,
                (Ok(_), Err(_)) => {}
            }
        }
        answer
    }

    /// INSTANCE_REQ's three modes: every instance, one by name, one by number.
    fn instances(&mut self, indom: u32, inst: i32, name: Option<String>) -> Vec<u8> {
        let all = match self.indom_instances(indom) {
            Ok(v) => v,
            Err(code) => return pdu::error(code),
        };
        match (inst, name) {
            (IN_NULL, None) => {
                let items: Vec<(i32, Option<&str>)> =
                    all.iter().map(|(i, n, _)| (*i, Some(n.as_str()))).collect();
                pdu::instance(indom, &items)
            }
            (_, Some(want)) => {
                // As pmdaInstance matches: the whole name, or up to the first space.
                let first = |s: &str| s.split(' ').next().unwrap_or("").to_string();
                let hit = all
                    .iter()
                    .find(|(_, n, _)| *n == want)
                    .or_else(|| all.iter().find(|(_, n, _)| first(n) == first(&want)));
                match hit {
                    Some((i, _, _)) => pdu::instance(indom, &[(*i, None)]),
                    None => pdu::error(errors::INST),
                }
            }
            (want, None) => match all.iter().find(|(i, _, _)| *i == want) {
                Some((_, n, _)) => pdu::instance(indom, &[(IN_NULL, Some(n.as_str()))]),
                None => pdu::error(errors::INST),
            },
        }
    }

    /// TEXT_REQ: an agent's help for a metric (one line is all agents have, so it answers both
    /// the one-line and the long request); none for indoms.
    fn text(&mut self, ident: u32, kind: u32) -> Vec<u8> {
        const PMID: u32 = 4;
        if kind & PMID == 0 {
            return pdu::error(errors::TEXT);
        }
        let id = Pmid::from_raw(ident);
        let help = if id.domain == PMCD_DOMAIN {
            pmcd::help(id).map(str::to_string)
        } else if id.is_valid() && !id.is_dynamic_root() {
            self.src().describe(id).ok().map(|d| d.help)
        } else {
            None
        };
        match help {
            Some(h) if !h.is_empty() => pdu::text(ident, &h),
            _ => pdu::error(errors::TEXT),
        }
    }
}
