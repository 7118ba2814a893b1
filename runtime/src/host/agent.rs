//! The agent world on the host side: namespace callbacks and fetches through the sandbox. A
//! failed call (trap, deadline, memory) is reported as [`CallError`]; the namespace turns it
//! into PCP's "No agent for domain of request" for that call only.

use super::bindings::agent::{Agent, AgentPre};
use super::bindings::legacy_agent::{LegacyAgent, LegacyAgentPre};
use super::bindings::types as wit;
use super::guest::{CallError, Instance, Live, in_guest};
use super::state::State;

pub use wit::{
    Atom, Child, Column, Fetched as IndexedFetch, IndexedSet, IndexedValues, MetricDesc, NsError,
    Pmid, Semantics, Value, ValueSet, ValueType,
};

/// Marker for the `agent` world. It also loads components of the `legacy-agent` world (built
/// before the `metrics` export): which one a component is, is decided once, at linking.
pub struct AgentWorld;

/// A linked agent of either world.
#[derive(Clone)]
pub enum AgentLinked {
    Current(AgentPre<State>),
    Legacy(LegacyAgentPre<State>),
}

/// An instantiated agent of either world.
pub enum AgentBindings {
    Current(Agent),
    Legacy(LegacyAgent),
}

/// Calls `$call` through [`Instance::call`] (`$check` judging the answer) with `$x` bound to
/// the instance's export (`$current` of an `agent`, `$legacy` of a `legacy-agent`: the
/// generated types differ, the calls do not) and `$s` to its store, under the call deadline.
/// Where the answers' types differ too, `=> f` after an export maps its answer to one type.
macro_rules! either {
    (
        $self:ident,
        $current:ident $(=> $cf:path)? | $legacy:ident $(=> $lf:path)?,
        |$x:ident, $s:ident| $call:expr,
        $check:expr
    ) => {
        $self.call(
            async |l: &mut Live<AgentWorld>| match &l.bindings {
                AgentBindings::Current(b) => {
                    let $x = b.$current();
                    in_guest(&mut l.store, async |$s| $call.await).await$(.map($cf))?
                }
                AgentBindings::Legacy(b) => {
                    let $x = b.$legacy();
                    in_guest(&mut l.store, async |$s| $call.await).await$(.map($lf))?
                }
            },
            $check,
        )
    };
}

/// [`either`] for a namespace callback: both worlds export the same `namespace` interface.
macro_rules! namespace {
    ($self:ident, |$x:ident, $s:ident| $call:expr, $check:expr) => {
        either!(
            $self,
            wasmon_collector_namespace | wasmon_collector_namespace,
            |$x, $s| $call,
            $check
        )
    };
}

impl super::guest::World for AgentWorld {
    type Pre = AgentLinked;
    type Bindings = AgentBindings;
    const NAME: &'static str = "agent";

    fn pre(
        rt: &super::engine::Runtime,
        component: &wasmtime::component::Component,
    ) -> wasmtime::Result<AgentLinked> {
        let linked = rt.agent_linker().instantiate_pre(component)?;
        match AgentPre::new(linked.clone()) {
            Ok(p) => Ok(AgentLinked::Current(p)),
            // The current world's error names what is missing; the legacy world is the
            // fallback only for a component that exports `source` instead of `metrics`.
            Err(e) => LegacyAgentPre::new(linked)
                .map(AgentLinked::Legacy)
                .map_err(|_| e),
        }
    }

    async fn instantiate(
        pre: &AgentLinked,
        store: &mut wasmtime::Store<State>,
    ) -> wasmtime::Result<AgentBindings> {
        match pre {
            AgentLinked::Current(p) => in_guest(store, async |s| p.instantiate_async(s).await)
                .await
                .map(AgentBindings::Current),
            AgentLinked::Legacy(p) => in_guest(store, async |s| p.instantiate_async(s).await)
                .await
                .map(AgentBindings::Legacy),
        }
    }

    async fn configure(
        b: &AgentBindings,
        store: &mut wasmtime::Store<State>,
        params: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        match b {
            AgentBindings::Current(b) => {
                let m = b.wasmon_collector_metrics();
                in_guest(store, async |s| m.call_configure(s, params).await).await
            }
            AgentBindings::Legacy(b) => {
                let m = b.wasmon_collector_source();
                in_guest(store, async |s| m.call_configure(s, params).await).await
            }
        }
    }
}

/// What a fetch answered: instance numbers and the names once (`agent`), or each value with
/// its instance name (`legacy-agent`). Checked: one set per requested id, every instance
/// number names an instance.
#[derive(Debug, Clone, PartialEq)]
pub enum Fetched {
    Indexed(IndexedFetch),
    Named(Vec<ValueSet>),
}

impl Fetched {
    /// Values in all sets.
    pub fn values(&self) -> usize {
        match self {
            Fetched::Indexed(f) => f
                .sets
                .iter()
                .map(|v| v.values.as_ref().map_or(0, |v| v.instances.len()))
                .sum(),
            Fetched::Named(sets) => sets
                .iter()
                .map(|v| v.values.as_ref().map_or(0, |v| v.len()))
                .sum(),
        }
    }

    fn sets(&self) -> usize {
        match self {
            Fetched::Indexed(f) => f.sets.len(),
            Fetched::Named(sets) => sets.len(),
        }
    }

    /// Each requested metric's values in order, each built by `f` from its instance name and
    /// its atom.
    pub fn map<T>(self, mut f: impl FnMut(String, Atom) -> T) -> Vec<Result<Vec<T>, NsError>> {
        match self {
            Fetched::Indexed(IndexedFetch { instances, sets }) => sets
                .into_iter()
                .map(|set| {
                    set.values
                        .map(|v| v.values.zipped(&v.instances, &instances, &mut f))
                })
                .collect(),
            Fetched::Named(sets) => sets
                .into_iter()
                .map(|set| {
                    set.values
                        .map(|v| v.into_iter().map(|x| f(x.instance, x.value)).collect())
                })
                .collect(),
        }
    }

    /// The sets with each value carrying its instance name (the `legacy-agent` shape).
    pub fn named(self) -> Vec<ValueSet> {
        match self {
            Fetched::Named(sets) => sets,
            Fetched::Indexed(f) => {
                let ids: Vec<Pmid> = f.sets.iter().map(|s| s.id).collect();
                ids.into_iter()
                    .zip(Fetched::Indexed(f).map(|instance, value| Value { instance, value }))
                    .map(|(id, values)| ValueSet { id, values })
                    .collect()
            }
        }
    }

    /// Why the host refuses the answer to a fetch of `ids` ids.
    fn check(&self, ids: usize) -> Result<(), String> {
        if self.sets() != ids {
            return Err(format!("{} value sets returned for {ids} ids", self.sets()));
        }
        if let Fetched::Indexed(f) = self {
            cap("instances", f.instances.len())?;
            let n = f.instances.len();
            for set in &f.sets {
                let Ok(values) = &set.values else { continue };
                let id = set.id;
                let (numbers, len) = (values.instances.len(), values.values.len());
                if numbers != len {
                    return Err(format!(
                        "the values of {}.{}.{} name {numbers} instances for {len} values",
                        id.domain, id.cluster, id.item
                    ));
                }
                if let Some(bad) = values.instances.iter().find(|&&i| i as usize >= n) {
                    return Err(format!(
                        "a value of {}.{}.{} names instance {bad} of the {n} the fetch returned",
                        id.domain, id.cluster, id.item
                    ));
                }
            }
        }
        cap("values", self.values())
    }
}

impl Column {
    /// Values in the column.
    pub fn len(&self) -> usize {
        match self {
            Column::Int(v) => v.len(),
            Column::Uint(v) => v.len(),
            Column::Real(v) => v.len(),
            Column::Atoms(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values in order, value i through `f` with the name of instance `numbers[i]` (in
    /// range: checked when the answer was taken). Each case is its own loop: a boxed iterator
    /// per metric was an allocation per metric and a call per value.
    fn zipped<T>(
        self,
        numbers: &[u32],
        names: &[String],
        f: &mut impl FnMut(String, Atom) -> T,
    ) -> Vec<T> {
        fn each<T>(
            numbers: &[u32],
            atoms: impl Iterator<Item = Atom>,
            names: &[String],
            f: &mut impl FnMut(String, Atom) -> T,
        ) -> Vec<T> {
            numbers
                .iter()
                .zip(atoms)
                .map(|(&i, atom)| f(names[i as usize].clone(), atom))
                .collect()
        }
        match self {
            Column::Int(v) => each(numbers, v.into_iter().map(Atom::Int), names, f),
            Column::Uint(v) => each(numbers, v.into_iter().map(Atom::Uint), names, f),
            Column::Real(v) => each(numbers, v.into_iter().map(Atom::Real), names, f),
            Column::Atoms(v) => each(numbers, v.into_iter(), names, f),
        }
    }
}

/// A running agent guest.
pub type AgentInstance = Instance<AgentWorld>;

/// Names and lists an agent returns per call: beyond these it is misbehaving.
const MAX_NAMES: usize = 1 << 20;

fn cap(what: &str, n: usize) -> Result<(), String> {
    if n > MAX_NAMES {
        Err(format!("{n} {what} returned, the cap is {MAX_NAMES}"))
    } else {
        Ok(())
    }
}

/// The check of a namespace callback answering a list: at most [`MAX_NAMES`] of `what`.
fn listed<T>(what: &'static str) -> impl FnOnce(&Result<Vec<T>, NsError>) -> Result<(), String> {
    move |r| r.as_ref().map_or(Ok(()), |v| cap(what, v.len()))
}

impl Instance<AgentWorld> {
    pub fn lookup_name(&mut self, name: &str) -> Result<Result<Pmid, NsError>, CallError> {
        namespace!(self, |ns, s| ns.call_lookup_name(s, name), |_| Ok(()))
    }

    pub fn names_of(&mut self, id: Pmid) -> Result<Result<Vec<String>, NsError>, CallError> {
        namespace!(self, |ns, s| ns.call_names_of(s, id), listed("names"))
    }

    pub fn children(&mut self, name: &str) -> Result<Result<Vec<Child>, NsError>, CallError> {
        namespace!(self, |ns, s| ns.call_children(s, name), listed("children"))
    }

    pub fn describe(&mut self, id: Pmid) -> Result<Result<MetricDesc, NsError>, CallError> {
        either!(
            self,
            wasmon_collector_metrics | wasmon_collector_source,
            |src, s| src.call_describe(s, id),
            |_| Ok(())
        )
    }

    /// Whether the component is of the `legacy-agent` world.
    pub fn legacy(&self) -> bool {
        matches!(self.image().pre(), AgentLinked::Legacy(_))
    }

    /// [`Self::fetch_raw`] with each value carrying its instance name.
    pub fn fetch(&mut self, ids: &[Pmid]) -> Result<Vec<ValueSet>, CallError> {
        Ok(self.fetch_raw(ids)?.named())
    }

    /// One value set per id, in order; an agent that answers with another count, or with an
    /// instance number past its instances, is refused.
    pub fn fetch_raw(&mut self, ids: &[Pmid]) -> Result<Fetched, CallError> {
        either!(
            self,
            wasmon_collector_metrics => Fetched::Indexed | wasmon_collector_source => Fetched::Named,
            |m, s| m.call_fetch(s, ids),
            |r| r.check(ids.len())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(item: u32) -> Pmid {
        Pmid {
            domain: 9,
            cluster: 0,
            item,
        }
    }

    fn indexed(instances: &[&str], sets: Vec<Result<Vec<(u32, u64)>, NsError>>) -> Fetched {
        Fetched::Indexed(IndexedFetch {
            instances: instances.iter().map(|s| s.to_string()).collect(),
            sets: sets
                .into_iter()
                .enumerate()
                .map(|(i, v)| IndexedSet {
                    id: id(i as u32),
                    values: v.map(|v| IndexedValues {
                        instances: v.iter().map(|&(n, _)| n).collect(),
                        values: Column::Uint(v.iter().map(|&(_, u)| u).collect()),
                    }),
                })
                .collect(),
        })
    }

    #[test]
    fn instance_numbers_name_their_instances_and_a_bad_one_is_refused() {
        let f = indexed(
            &["sda", "sdb"],
            vec![Ok(vec![(1, 5), (0, 6)]), Err(NsError::UnknownPmid)],
        );
        assert_eq!(f.check(2), Ok(()));
        assert_eq!(
            f.check(3),
            Err("2 value sets returned for 3 ids".to_string())
        );
        let named = f.named();
        assert_eq!(named[0].values.as_ref().unwrap()[0].instance, "sdb");
        assert_eq!(named[0].values.as_ref().unwrap()[1].instance, "sda");
        assert_eq!(named[1].values, Err(NsError::UnknownPmid));

        let bad = indexed(&["sda"], vec![Ok(vec![(0, 1)]), Ok(vec![(0, 1), (1, 2)])]);
        assert_eq!(
            bad.check(2),
            Err("a value of 9.0.1 names instance 1 of the 1 the fetch returned".to_string())
        );
        assert_eq!(bad.values(), 3);

        // Instance numbers and values of another count; mixed cases keep their own.
        let mut short = indexed(&["sda"], vec![Ok(vec![(0, 1)])]);
        if let Fetched::Indexed(f) = &mut short {
            f.sets[0].values.as_mut().unwrap().values = Column::Real(vec![1.0, 2.0]);
        }
        assert_eq!(
            short.check(1),
            Err("the values of 9.0.0 name 1 instances for 2 values".to_string())
        );
        let mut mixed = indexed(&["a", "b"], vec![Ok(vec![(1, 0), (0, 0)])]);
        if let Fetched::Indexed(f) = &mut mixed {
            f.sets[0].values.as_mut().unwrap().values =
                Column::Atoms(vec![Atom::Int(-1), Atom::Text("t".into())]);
        }
        assert_eq!(mixed.check(1), Ok(()));
        let named = mixed.named();
        let values = named[0].values.as_ref().unwrap();
        assert_eq!(
            (values[0].instance.as_str(), &values[0].value),
            ("b", &Atom::Int(-1))
        );
        assert_eq!(
            (values[1].instance.as_str(), &values[1].value),
            ("a", &Atom::Text("t".into()))
        );
    }
}
