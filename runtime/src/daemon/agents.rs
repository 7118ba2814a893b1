//! The daemon's agents and the namespace in front of them: WASM agents wrapped as
//! [`namespace::Agent`]s (a failed guest call answers PCP's "no agent" for that call only, and
//! the next call gets a fresh instance; for a while after a swap, the previous version answers
//! the calls the new one fails), native agents, and the operations the HTTP API and the
//! offline CLI share: lookup, names-of, children, traverse, fetch by name.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::host::AgentInstance;
use crate::host::agent_types as wit;
use crate::namespace::{
    Agent, Child, Delegates, LabelsOf, MetricDesc, Namespace, NsError, Pmid, Semantics, Traversal,
    Value, ValueType, Values,
};
use crate::sample::{Kind, Metadata, Name, Sample};

/// A WASM agent seen through the namespace's [`Agent`] contract.
pub struct GuestAgent(pub AgentInstance);

fn to_wit(p: Pmid) -> wit::Pmid {
    wit::Pmid {
        domain: p.domain,
        cluster: p.cluster,
        item: p.item,
    }
}

fn from_wit(p: wit::Pmid) -> Pmid {
    Pmid {
        domain: p.domain,
        cluster: p.cluster,
        item: p.item,
    }
}

fn ns_error(e: wit::NsError) -> NsError {
    match e {
        wit::NsError::UnknownName => NsError::UnknownName,
        wit::NsError::NonLeaf => NsError::NonLeaf,
        wit::NsError::UnknownPmid => NsError::UnknownPmid,
        wit::NsError::Other(s) => NsError::Other(s),
    }
}

impl GuestAgent {
    /// A failed call (already logged and counted by the host) is PCP's "no agent".
    fn answer<T, U>(
        r: Result<Result<T, wit::NsError>, crate::host::CallError>,
        f: impl FnOnce(T) -> U,
    ) -> Result<U, NsError> {
        match r {
            Ok(Ok(v)) => Ok(f(v)),
            Ok(Err(e)) => Err(ns_error(e)),
            Err(_) => Err(NsError::NoAgent),
        }
    }
}

impl Agent for GuestAgent {
    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        Self::answer(self.0.lookup_name(name), from_wit)
    }

    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        Self::answer(self.0.names_of(to_wit(id)), |v| v)
    }

    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        Self::answer(self.0.children(name), |v| {
            v.into_iter()
                .map(|c| Child {
                    name: c.name,
                    leaf: c.leaf,
                })
                .collect()
        })
    }

    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        Self::answer(self.0.describe(to_wit(id)), |d| MetricDesc {
            id: from_wit(d.id),
            semantics: match d.semantics {
                wit::Semantics::Counter => Semantics::Counter,
                wit::Semantics::Instant => Semantics::Instant,
                wit::Semantics::Discrete => Semantics::Discrete,
            },
            units: d.units,
            indom: d.indom,
            help: d.help,
            value_type: match d.value_type {
                wit::ValueType::Int32 => ValueType::I32,
                wit::ValueType::Uint32 => ValueType::U32,
                wit::ValueType::Int64 => ValueType::I64,
                wit::ValueType::Uint64 => ValueType::U64,
                wit::ValueType::Float => ValueType::Float,
                wit::ValueType::Double => ValueType::Double,
                wit::ValueType::Text => ValueType::String,
            },
        })
    }

    fn release(&mut self) {
        self.0.release();
    }

    fn label_name(&self) -> Option<String> {
        Some(self.0.name().to_string())
    }

    fn fetch(&mut self, ids: &[Pmid]) -> Vec<(Pmid, Result<Values, NsError>)> {
        let wids: Vec<wit::Pmid> = ids.iter().map(|&p| to_wit(p)).collect();
        match self.0.fetch_raw(&wids) {
            Ok(fetched) => ids
                .iter()
                .zip(fetched.map(|instance, atom| (instance, value(atom))))
                .map(|(&id, values)| (id, values.map_err(ns_error)))
                .collect(),
            Err(_) => ids.iter().map(|&id| (id, Err(NsError::NoAgent))).collect(),
        }
    }
}

fn value(a: wit::Atom) -> Value {
    match a {
        wit::Atom::Int(i) => Value::Int(i),
        wit::Atom::Uint(u) => Value::Uint(u),
        wit::Atom::Real(f) => Value::Real(f),
        wit::Atom::Text(t) => Value::Text(t),
    }
}

/// The values of one metric, as `wasmon fetch` and `/api/fetch` report them.
#[derive(Debug, Clone, Serialize)]
pub struct Fetched {
    pub name: String,
    pub pmid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semantics: Option<Semantics>,
    pub units: String,
    /// (instance, value); the instance is empty for a singular metric.
    pub values: Values,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How long after a swap the agent's previous version answers the calls the new one fails
/// (traps, deadline, quarantine): as long as the fleet's default rollback window, in which a
/// quarantine still rolls the new version back, so no fetch in that window is answered with
/// an error the previous version would not have given. After it, the new version stands alone
/// and the previous instance's memory is freed at the next swap.
const HANDOVER: Duration = Duration::from_secs(120);

type Locked = Arc<Mutex<Box<dyn Agent>>>;

/// One agent behind a lock of its own: guest instances take one call at a time, and a slow or
/// stuck agent holds up only the queries of its own domain (each of its calls ends at its
/// deadline). A query locks an agent for one call at a time, never two agents at once, so
/// queries cannot deadlock on each other (the previous version is asked only after the new
/// one's lock is released).
#[derive(Clone)]
pub struct SharedAgent {
    agent: Locked,
    /// The agent's label name, read once at construction: it never changes, and asking the
    /// agent would wait for a call in progress (a reload must not, nor PCP's label requests).
    name: Option<String>,
    /// Set by this version's first call that did not fail: a swap away from a version that
    /// never answered hands over to the version before it instead.
    answered: Arc<AtomicBool>,
    /// The version this one replaced, and until when it stands in.
    previous: Option<(Locked, Instant)>,
    /// Set when the previous version first answered for this one (logged once).
    stood_in: Arc<AtomicBool>,
}

fn lock(a: &Locked) -> std::sync::MutexGuard<'_, Box<dyn Agent>> {
    // A panic in an agent call leaves the agent usable: its next call gets a fresh instance.
    crate::util::lock(a)
}

/// A call that failed as a whole: the guest trapped, hit its deadline or is quarantined.
fn failed<T>(r: &Result<T, NsError>) -> bool {
    matches!(r, Err(NsError::NoAgent))
}

impl SharedAgent {
    pub fn new(agent: Box<dyn Agent>) -> SharedAgent {
        SharedAgent {
            name: agent.label_name(),
            agent: Arc::new(Mutex::new(agent)),
            answered: Arc::new(AtomicBool::new(false)),
            previous: None,
            stood_in: Arc::new(AtomicBool::new(false)),
        }
    }

    /// `agent` as the next version of `old` (the same `[[agent]]` entry): `old`, or the
    /// version `old` was standing in for when `old` never answered, covers its failures for
    /// [`HANDOVER`].
    fn succeeding(agent: Box<dyn Agent>, old: &SharedAgent) -> SharedAgent {
        let mut next = SharedAgent::new(agent);
        let now = Instant::now();
        if next.name.is_some() && next.name == old.name {
            let good = match &old.previous {
                Some((p, until)) if !old.answered.load(Ordering::Relaxed) && now < *until => {
                    p.clone()
                }
                _ => old.agent.clone(),
            };
            next.previous = Some((good, now + HANDOVER));
        }
        next
    }

    /// `f` on this version; when that failed, on the previous one while it stands in.
    fn call<T>(&self, f: impl Fn(&mut dyn Agent) -> T, failed: impl Fn(&T) -> bool) -> T {
        let r = f(lock(&self.agent).as_mut());
        if !failed(&r) {
            self.answered.store(true, Ordering::Relaxed);
            return r;
        }
        match &self.previous {
            Some((p, until)) if Instant::now() < *until => {
                if !self.stood_in.swap(true, Ordering::Relaxed) {
                    let name = self.name.as_deref().unwrap_or_default();
                    tracing::warn!(
                        "agent {name}: a call of its new version failed; the previous version \
                         answers such calls for {}s after the swap",
                        HANDOVER.as_secs()
                    );
                }
                f(lock(p).as_mut())
            }
            _ => r,
        }
    }
}

impl Agent for SharedAgent {
    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        self.call(|a| a.lookup_name(name), failed)
    }
    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        self.call(|a| a.names_of(id), failed)
    }
    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        self.call(|a| a.children(name), failed)
    }
    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        self.call(|a| a.describe(id), failed)
    }
    fn fetch(&mut self, ids: &[Pmid]) -> Vec<(Pmid, Result<Values, NsError>)> {
        self.call(
            |a| a.fetch(ids),
            |r| !r.is_empty() && r.iter().all(|(_, v)| failed(v)),
        )
    }
    fn release(&mut self) {
        lock(&self.agent).release()
    }
    fn label_name(&self) -> Option<String> {
        self.name.clone()
    }
    fn labels(&mut self, of: LabelsOf) -> Vec<(String, serde_json::Value)> {
        lock(&self.agent).labels(of)
    }
    fn instance_id(&mut self, indom: u32, name: &str) -> Option<u32> {
        // `None` is an answer here (a guest has no instance ids of its own), not a failure.
        lock(&self.agent).instance_id(indom, name)
    }
    fn instances(&mut self, indom: u32) -> Option<Vec<String>> {
        lock(&self.agent).instances(indom)
    }
}

/// The agents a query sees: a snapshot of the running set (cloning it clones handles).
type Agents = BTreeMap<u32, SharedAgent>;

impl Delegates for Agents {
    fn agent(&mut self, domain: u32) -> Option<&mut dyn Agent> {
        Some(self.get_mut(&domain)? as &mut dyn Agent)
    }
}

/// A namespace and the agents behind it.
pub struct AgentSet {
    ns: RwLock<Arc<Namespace>>,
    agents: RwLock<Agents>,
    /// PCP's PMNS_LOCAL: dynamic subtrees are not delegated (names under them give the
    /// dynamic root's PMID). The daemon is always delegated (PMNS_REMOTE).
    local: bool,
}

impl AgentSet {
    pub fn new(ns: Namespace, agents: BTreeMap<u32, Box<dyn Agent>>) -> AgentSet {
        AgentSet {
            ns: RwLock::new(Arc::new(ns)),
            agents: RwLock::new(
                agents
                    .into_iter()
                    .map(|(d, a)| (d, SharedAgent::new(a)))
                    .collect(),
            ),
            local: false,
        }
    }

    /// A namespace with no agents behind it, queried in PCP's local mode.
    pub fn local(ns: Namespace) -> AgentSet {
        AgentSet {
            local: true,
            ..AgentSet::new(ns, BTreeMap::new())
        }
    }

    /// Replaces the namespace and the agents (a reload). `None` keeps the agent running for
    /// that domain now, with its state. A new version of a running agent takes over with the
    /// old one standing in for its failed calls ([`HANDOVER`]). Never waits for a running call.
    pub fn replace(&self, ns: Namespace, agents: BTreeMap<u32, Option<Box<dyn Agent>>>) {
        let mut running = crate::util::write(&self.agents);
        let mut old = std::mem::take(&mut *running);
        *running = agents
            .into_iter()
            .filter_map(|(d, a)| {
                let old = old.remove(&d);
                let agent = match (a, old) {
                    (Some(a), Some(old)) => SharedAgent::succeeding(a, &old),
                    (Some(a), None) => SharedAgent::new(a),
                    (None, old) => old?,
                };
                Some((d, agent))
            })
            .collect();
        *crate::util::write(&self.ns) = Arc::new(ns);
    }

    /// Ends every agent's quarantine (the operator asked).
    pub fn release(&self) {
        for a in crate::util::read(&self.agents).values() {
            lock(&a.agent).release();
        }
    }

    /// Runs `f` with the namespace and a snapshot of the agents.
    fn with<R>(&self, f: impl FnOnce(&Namespace, &mut dyn Delegates) -> R) -> R {
        let ns = crate::util::read(&self.ns).clone();
        let mut agents = crate::util::read(&self.agents).clone();
        f(&ns, &mut agents)
    }

    /// The delegates for a query: none in local mode.
    fn mode<'a>(&self, d: &'a mut dyn Delegates) -> Option<&'a mut dyn Delegates> {
        (!self.local).then_some(d)
    }

    pub fn lookup(&self, name: &str) -> Result<Pmid, NsError> {
        self.with(|ns, d| ns.lookup(name, self.mode(d)))
    }

    pub fn names_of(&self, id: Pmid) -> Result<Vec<String>, NsError> {
        self.with(|ns, d| ns.names_of(id, self.mode(d)))
    }

    pub fn children(&self, name: &str) -> Result<Vec<Child>, NsError> {
        self.with(|ns, d| ns.children(name, self.mode(d)))
    }

    pub fn traverse(&self, prefix: &str) -> Result<Traversal, NsError> {
        self.with(|ns, d| ns.traverse(prefix, self.mode(d)))
    }

    /// How many agents run.
    pub fn agent_count(&self) -> usize {
        crate::util::read(&self.agents).len()
    }

    /// The agent for `domain`, if one runs (a handle: calls lock it one at a time).
    pub fn agent(&self, domain: u32) -> Option<SharedAgent> {
        crate::util::read(&self.agents).get(&domain).cloned()
    }

    /// Fetches PMIDs, one agent call per domain; one answer per id, in order.
    pub fn fetch_ids(&self, ids: &[Pmid]) -> Vec<Result<Values, NsError>> {
        let mut out: Vec<Result<Values, NsError>> = vec![Err(NsError::NoAgent); ids.len()];
        let mut by_domain: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, id) in ids.iter().enumerate() {
            by_domain.entry(id.domain).or_default().push(i);
        }
        for (domain, at) in by_domain {
            let Some(mut agent) = self.agent(domain) else {
                continue;
            };
            let want: Vec<Pmid> = at.iter().map(|&i| ids[i]).collect();
            for (i, (_, values)) in at.into_iter().zip(agent.fetch(&want)) {
                out[i] = values;
            }
        }
        out
    }

    /// Fetches every leaf named or below a named non-leaf, one agent call per domain.
    pub fn fetch(&self, names: &[String]) -> Vec<Fetched> {
        self.with(|ns, d| {
            let mut out: Vec<Fetched> = Vec::new();
            let mut wanted: Vec<(usize, Pmid)> = Vec::new();
            for name in names {
                let leaves = match ns.lookup(name, self.mode(d)) {
                    Ok(id) => vec![(name.clone(), Ok(id))],
                    Err(NsError::NonLeaf) => match ns.traverse(name, self.mode(d)) {
                        Ok(t) => t
                            .names
                            .into_iter()
                            .map(|n| {
                                let id = ns.lookup(&n, self.mode(d));
                                (n, id)
                            })
                            .chain(t.failed.into_iter().map(|(n, e)| (n, Err(e))))
                            .collect(),
                        Err(e) => vec![(name.clone(), Err(e))],
                    },
                    Err(e) => vec![(name.clone(), Err(e))],
                };
                for (leaf, id) in leaves {
                    let mut f = Fetched {
                        name: leaf,
                        pmid: String::new(),
                        semantics: None,
                        units: String::new(),
                        values: Vec::new(),
                        error: None,
                    };
                    match id {
                        Ok(id) => {
                            f.pmid = id.to_string();
                            wanted.push((out.len(), id));
                        }
                        Err(e) => f.error = Some(e.to_string()),
                    }
                    out.push(f);
                }
            }
            let mut by_domain: BTreeMap<u32, Vec<(usize, Pmid)>> = BTreeMap::new();
            for (i, id) in wanted {
                by_domain.entry(id.domain).or_default().push((i, id));
            }
            for (domain, items) in by_domain {
                let Some(agent) = d.agent(domain) else {
                    for (i, _) in items {
                        out[i].error = Some(NsError::NoAgent.to_string());
                    }
                    continue;
                };
                let ids: Vec<Pmid> = items.iter().map(|(_, id)| *id).collect();
                let results = agent.fetch(&ids);
                for ((i, id), (_, values)) in items.into_iter().zip(results) {
                    if let Ok(desc) = agent.describe(id) {
                        out[i].semantics = Some(desc.semantics);
                        out[i].units = desc.units;
                    }
                    match values {
                        Ok(v) => out[i].values = v,
                        Err(e) => out[i].error = Some(e.to_string()),
                    }
                }
            }
            out
        })
    }
}

/// Turns fetched values into samples: name = metric name, resource = instance, metadata =
/// pmid, semantics and units; counters are cumulative, the rest gauges. Keeps each metric's
/// metadata and each instance's resource from one poll to the next, so that a poll's samples
/// carry the same sets and resources as the last one's: the store sink then finds their level
/// by address (a per-CPU metric at 1,024 CPUs is 1,024 samples a poll, and resolving each one's
/// level again cost more than storing it).
#[derive(Default)]
pub struct SampleMaker {
    metrics: std::collections::HashMap<String, MetricSamples, foldhash::fast::FixedState>,
    resources: crate::sample::Resources,
}

/// What every sample of one metric shares.
struct MetricSamples {
    pmid: String,
    units: String,
    semantics: Semantics,
    name: Name,
    unit: Name,
    kind: Kind,
    metadata: Metadata,
}

impl MetricSamples {
    fn new(f: &Fetched, semantics: Semantics) -> MetricSamples {
        let kind = if semantics == Semantics::Counter {
            Kind::Cumulative
        } else {
            Kind::Gauge
        };
        let sem: &str = match semantics {
            Semantics::Counter => "counter",
            Semantics::Instant => "instant",
            Semantics::Discrete => "discrete",
        };
        MetricSamples {
            pmid: f.pmid.clone(),
            units: f.units.clone(),
            semantics,
            name: Name::new(&f.name),
            unit: Name::new(&f.units),
            kind,
            metadata: Metadata::new(vec![
                ("pmid".into(), f.pmid.as_str().into()),
                ("semantics".into(), sem.into()),
                ("units".into(), f.units.as_str().into()),
            ]),
        }
    }
}

impl SampleMaker {
    /// Metrics whose shared parts are kept: far above any agent's names (PCP's linux PMDA has
    /// 1,340); past it the table starts over.
    const MAX_METRICS: usize = 1 << 14;

    /// The samples of `fetched` at `timestamp_ns`; call [`SampleMaker::next_poll`] after each
    /// poll's last call.
    pub fn samples<'a>(
        &mut self,
        fetched: impl IntoIterator<Item = &'a Fetched>,
        timestamp_ns: i64,
    ) -> Vec<Sample> {
        let mut out = Vec::new();
        for f in fetched.into_iter().filter(|f| f.error.is_none()) {
            let semantics = f.semantics.unwrap_or(Semantics::Instant);
            let kept = self.metrics.get(f.name.as_str()).is_some_and(|m| {
                m.semantics == semantics && m.pmid == f.pmid && m.units == f.units
            });
            if !kept {
                if self.metrics.len() >= Self::MAX_METRICS {
                    self.metrics.clear();
                }
                self.metrics
                    .insert(f.name.clone(), MetricSamples::new(f, semantics));
            }
            let Some(m) = self.metrics.get(f.name.as_str()) else {
                continue;
            };
            // Text values have no place among numbers: PCP clients get them, samples do not.
            for (inst, value) in f.values.iter().filter_map(|(i, v)| Some((i, v.as_f64()?))) {
                out.push(Sample {
                    name: m.name,
                    resource: self.resources.get(inst),
                    unit: m.unit,
                    kind: m.kind,
                    value,
                    timestamp_ns,
                    metadata: m.metadata.clone(),
                });
            }
        }
        out
    }

    /// Ends a poll: instances it did not report are let go after the next one.
    pub fn next_poll(&mut self) {
        self.resources.next_poll();
    }
}

/// A native agent by its config name, reading under `root`, with the pmns text of its names.
/// `None` for a name no native agent has (`config check` refuses those first).
pub fn native_agent(
    name: &str,
    root: &std::path::Path,
    devices: &crate::linux::Devices,
) -> Option<(String, Box<dyn Agent>)> {
    match name {
        "linux" => Some((
            crate::linux::LinuxAgent::pmns(),
            Box::new(crate::linux::LinuxAgent::with_options(
                crate::linux::Root::new(root),
                devices.clone(),
            )),
        )),
        "proc" => Some((
            crate::procfs::agent::PROC_PMNS.to_string(),
            Box::new(crate::procfs::agent::ProcAgent::with_root(root)),
        )),
        _ => None,
    }
}
