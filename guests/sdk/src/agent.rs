//! The `agent` world: WIT bindings and the adapter from the WIT exports to an [`Agent`]. An
//! agent owns dynamic subtrees of the metric namespace (PCP's PMDA_INTERFACE_4: pmid, name and
//! children callbacks) and fetches values; names are full dotted names (`foo.count.ops`).

use crate::Params;

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "agent",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_raw",
        default_bindings_module: "wasmon_guest::agent::bindings",
        with: {
            "wasmon:collector/types@0.1.0": crate::transformer::bindings::wasmon::collector::types,
            "wasmon:collector/host@0.1.0": crate::transformer::bindings::wasmon::collector::host,
        },
    });
}

pub use crate::transformer::bindings::wasmon::collector::types::{
    Atom, Child, Column, Fetched, IndexedSet, IndexedValues, MetricDesc, NsError, Pmid, Semantics,
    Value, ValueSet, ValueType,
};

// A value from the Rust type that holds it: `Value::new("cpu0", 42u64)`, `Value::new("", 0.5)`.
macro_rules! atom_from {
    ($($t:ty => $case:ident),* $(,)?) => {$(
        impl From<$t> for Atom {
            fn from(v: $t) -> Atom {
                Atom::$case(v.into())
            }
        }
    )*};
}
atom_from!(f64 => Real, f32 => Real, u64 => Uint, u32 => Uint, i64 => Int, i32 => Int,
           String => Text, &str => Text);

impl Value {
    /// One value of `instance` (empty for a singular metric).
    pub fn new(instance: impl Into<String>, value: impl Into<Atom>) -> Value {
        Value {
            instance: instance.into(),
            value: value.into(),
        }
    }
}
/// Whole files and directory listings under read-only directory grants in one host call each
/// (what [`crate::sysfs`] reads through).
pub use bindings::wasmon::collector::files;
/// Read-only access to the files of directories the daemon's config grants (`grants.mapped`).
pub use bindings::wasmon::collector::mapped;

use bindings::exports::wasmon::collector::{metrics, namespace};

/// An agent: implement this and export it with [`crate::export_agent!`].
pub trait Agent: Sized + 'static {
    /// Builds the agent from its parameters (a JSON object); an error names the bad parameter.
    fn configure(params: &Params) -> Result<Self, String>;
    /// The PMID of a leaf name under this agent's dynamic subtrees.
    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError>;
    /// Every name of a PMID this agent knows.
    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError>;
    /// The children of a non-leaf name, with leaf status.
    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError>;
    /// Type, semantics, units and help of a metric.
    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError>;
    /// Values of many metrics; one [`ValueSet`] per id, in order.
    fn fetch(&mut self, ids: &[Pmid]) -> Vec<ValueSet>;
}

fn with_agent<T: Agent, R>(f: impl FnOnce(&mut T) -> R, unconfigured: R) -> R {
    crate::with_state(f).unwrap_or(unconfigured)
}

fn not_configured() -> NsError {
    NsError::Other("agent not configured".into())
}

/// Implements the WIT exports for `T`; used through [`crate::export_agent!`].
#[doc(hidden)]
pub struct Export<T>(std::marker::PhantomData<T>);

impl<T: Agent> metrics::Guest for Export<T> {
    fn configure(params: String) -> Result<(), String> {
        crate::set_state(T::configure(&crate::parse_params(&params)?)?);
        Ok(())
    }
    fn describe(id: Pmid) -> Result<MetricDesc, NsError> {
        with_agent::<T, _>(|t| t.describe(id), Err(not_configured()))
    }
    fn fetch(ids: Vec<Pmid>) -> Fetched {
        let fallback = ids
            .iter()
            .map(|&id| ValueSet {
                id,
                values: Err(not_configured()),
            })
            .collect();
        index(with_agent::<T, _>(|t| t.fetch(&ids), fallback))
    }
}

/// Value sets as the `metrics` interface answers them: each instance name once, values by its
/// position (the names move, nothing is copied), each set's numbers as one typed list when
/// they are all of one case.
pub fn index(sets: Vec<ValueSet>) -> Fetched {
    let mut numbers: std::collections::HashMap<String, u32, crate::hash::FxBuildHasher> =
        Default::default();
    let mut sets_out = Vec::with_capacity(sets.len());
    for set in sets {
        let values = set.values.map(|values| {
            let mut instances = Vec::with_capacity(values.len());
            let mut atoms = Vec::with_capacity(values.len());
            for v in values {
                let next = numbers.len() as u32;
                instances.push(match numbers.get(v.instance.as_str()) {
                    Some(&n) => n,
                    None => *numbers.entry(v.instance).or_insert(next),
                });
                atoms.push(v.value);
            }
            IndexedValues {
                instances,
                values: column(atoms),
            }
        });
        sets_out.push(IndexedSet { id: set.id, values });
    }
    let mut instances = vec![String::new(); numbers.len()];
    for (name, n) in numbers {
        instances[n as usize] = name;
    }
    Fetched {
        instances,
        sets: sets_out,
    }
}

/// `atoms` as one typed list when they are all integers, all unsigned or all reals (which the
/// host copies as one block), else as they are.
pub fn column(atoms: Vec<Atom>) -> Column {
    // Each arm takes the list only when every value has the first one's case.
    macro_rules! all {
        ($case:ident) => {
            if atoms.iter().all(|a| matches!(a, Atom::$case(_))) {
                return Column::$case(
                    atoms
                        .into_iter()
                        .map(|a| match a {
                            Atom::$case(x) => x,
                            _ => unreachable!("checked above"),
                        })
                        .collect(),
                );
            }
        };
    }
    match atoms.first() {
        Some(Atom::Uint(_)) => all!(Uint),
        Some(Atom::Int(_)) => all!(Int),
        Some(Atom::Real(_)) => all!(Real),
        _ => {}
    }
    Column::Atoms(atoms)
}

impl<T: Agent> namespace::Guest for Export<T> {
    fn lookup_name(name: String) -> Result<Pmid, NsError> {
        with_agent::<T, _>(|t| t.lookup_name(&name), Err(not_configured()))
    }
    fn names_of(id: Pmid) -> Result<Vec<String>, NsError> {
        with_agent::<T, _>(|t| t.names_of(id), Err(not_configured()))
    }
    fn children(name: String) -> Result<Vec<Child>, NsError> {
        with_agent::<T, _>(|t| t.children(&name), Err(not_configured()))
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

    #[test]
    fn index_sends_each_instance_name_once_and_numbers_the_values() {
        let sets = vec![
            ValueSet {
                id: id(0),
                values: Ok(vec![Value::new("sda", 1u64), Value::new("sdb", 2u64)]),
            },
            ValueSet {
                id: id(1),
                values: Err(NsError::UnknownPmid),
            },
            ValueSet {
                id: id(2),
                values: Ok(vec![Value::new("sdb", 3u64), Value::new("", 0.5)]),
            },
        ];
        let f = index(sets);
        assert_eq!(f.instances, ["sda", "sdb", ""]);
        let numbers = |i: usize| f.sets[i].values.as_ref().unwrap().instances.clone();
        assert_eq!(numbers(0), [0, 1]);
        assert_eq!(f.sets[1].values, Err(NsError::UnknownPmid));
        assert_eq!(numbers(2), [1, 2]);
        // One case: a typed list; mixed cases: each value's atom.
        assert_eq!(
            f.sets[0].values.as_ref().unwrap().values,
            Column::Uint(vec![1, 2])
        );
        assert_eq!(
            f.sets[2].values.as_ref().unwrap().values,
            Column::Atoms(vec![Atom::Uint(3), Atom::Real(0.5)])
        );
        assert_eq!(
            f.sets.iter().map(|s| s.id.item).collect::<Vec<_>>(),
            [0, 1, 2]
        );
    }

    #[test]
    fn column_takes_one_case_as_a_typed_list() {
        assert_eq!(
            column(vec![Atom::Int(-1), Atom::Int(2)]),
            Column::Int(vec![-1, 2])
        );
        assert_eq!(column(vec![Atom::Real(0.5)]), Column::Real(vec![0.5]));
        assert_eq!(column(vec![]), Column::Atoms(vec![]));
        let text = vec![Atom::Text("a".into()), Atom::Text("b".into())];
        assert_eq!(column(text.clone()), Column::Atoms(text));
        let mixed = vec![Atom::Int(1), Atom::Uint(2)];
        assert_eq!(column(mixed.clone()), Column::Atoms(mixed));
    }
}
