//! The transformer world on the host side: batches of [`Sample`]s to and from the interned
//! boundary form, and `handle` / `flush` calls through the sandbox.

use std::collections::HashMap;
use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::Component;

use super::bindings::transformer::{Transformer, TransformerPre};
use super::bindings::types as wit;
use super::engine::Runtime;
use super::guest::{CallError, Instance, World};
use super::state::State;
use super::strings::StringTable;
use crate::pipeline::{Kind, Metadata, Sample};

/// Marker for the `transformer` world.
pub struct TransformerWorld;

impl World for TransformerWorld {
    type Pre = TransformerPre<State>;
    type Bindings = Transformer;
    const NAME: &'static str = "transformer";

    fn pre(rt: &Runtime, component: &Component) -> wasmtime::Result<Self::Pre> {
        TransformerPre::new(rt.transformer_linker().instantiate_pre(component)?)
    }

    fn instantiate(pre: &Self::Pre, store: &mut Store<State>) -> wasmtime::Result<Self::Bindings> {
        pre.instantiate(store)
    }

    fn configure(
        b: &Self::Bindings,
        store: &mut Store<State>,
        params: &str,
    ) -> wasmtime::Result<Result<(), String>> {
        b.wasmon_collector_transform().call_configure(store, params)
    }
}

/// A running transformer guest.
pub type TransformerInstance = Instance<TransformerWorld>;

impl Instance<TransformerWorld> {
    /// Passes a batch through the guest.
    pub fn handle(&mut self, input: &[Sample]) -> Result<Vec<Sample>, CallError> {
        let max = self.image().config.max_output_samples;
        self.call(
            |b, store| {
                let batch = encode(input, &mut store.data_mut().strings);
                let out = b
                    .wasmon_collector_transform()
                    .call_handle(&mut *store, &batch)?;
                Ok(decode(out, &mut store.data_mut().strings, max))
            },
            checked,
        )
        .map(Result::unwrap_or_default)
    }

    /// Asks the guest for what it has cached.
    pub fn flush(&mut self) -> Result<Vec<Sample>, CallError> {
        let max = self.image().config.max_output_samples;
        self.call(
            |b, store| {
                let out = b.wasmon_collector_transform().call_flush(&mut *store)?;
                Ok(decode(out, &mut store.data_mut().strings, max))
            },
            checked,
        )
        .map(Result::unwrap_or_default)
    }
}

/// A refused output fails the call (and discards the instance, whose string table can no
/// longer be trusted).
fn checked(r: &Result<Vec<Sample>, String>) -> Result<(), String> {
    r.as_ref().map(|_| ()).map_err(Clone::clone)
}

/// A kind as the batch's `kinds` column carries it: the `sample-kind` enum's discriminant.
fn wit_kind(k: Kind) -> u8 {
    (match k {
        Kind::Gauge => wit::SampleKind::Gauge,
        Kind::Delta => wit::SampleKind::Delta,
        Kind::Cumulative => wit::SampleKind::Cumulative,
    }) as u8
}

/// The kind of a `kinds` entry, checked beforehand to be below [`KINDS`].
fn kind_of(k: u8) -> Kind {
    match k {
        0 => Kind::Gauge,
        1 => Kind::Delta,
        _ => Kind::Cumulative,
    }
}

/// Values of the `sample-kind` enum.
const KINDS: u8 = 3;

/// Interning is on the hot path of every guest call: a fast non-cryptographic hasher.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// A batch for the guest: column-wise, strings as ids of the instance's string table (only
/// strings the guest has not seen yet travel, in `new-strings`). Built one column at a time:
/// each pass is a tight loop into a vector of known length, without a capacity check per push.
pub fn encode(samples: &[Sample], table: &mut StringTable) -> wit::Batch {
    let reset = table.begin_send();
    let mut new = Vec::new();
    let names = samples
        .iter()
        .map(|s| table.name_id(s.name, &mut new))
        .collect();
    let resources = samples
        .iter()
        .map(|s| table.id(&s.resource, &mut new))
        .collect();
    let units = samples
        .iter()
        .map(|s| table.name_id(s.unit, &mut new))
        .collect();
    let (metadata, metadata_ids) = encode_metadata(samples, table, &mut new);
    wit::Batch {
        reset,
        new_strings: new,
        metadata,
        names,
        resources,
        units,
        kinds: samples.iter().map(|s| wit_kind(s.kind)).collect(),
        values: samples.iter().map(|s| s.value).collect(),
        timestamps_ns: samples.iter().map(|s| s.timestamp_ns).collect(),
        metadata_ids,
    }
}

/// The batch's metadata sets and each sample's set: samples that share a set's allocation
/// share its entry, and every empty set is the same set.
fn encode_metadata(
    samples: &[Sample],
    table: &mut StringTable,
    new: &mut Vec<String>,
) -> (Vec<wit::MetadataSet>, Vec<u32>) {
    let mut sets: Vec<wit::MetadataSet> = Vec::new();
    let mut by_addr: FastMap<*const (Arc<str>, Arc<str>), u32> = FastMap::default();
    let mut empty: Option<u32> = None;
    let ids = samples
        .iter()
        .map(|s| {
            let pairs = s.metadata.pairs();
            if pairs.is_empty() {
                return *empty.get_or_insert_with(|| {
                    sets.push(Vec::new());
                    sets.len() as u32 - 1
                });
            }
            *by_addr.entry(pairs.as_ptr()).or_insert_with(|| {
                let set = pairs
                    .iter()
                    .map(|(k, v)| (table.id(k, new), table.id(v, new)))
                    .collect();
                sets.push(set);
                sets.len() as u32 - 1
            })
        })
        .collect();
    (sets, ids)
}

/// Samples from a guest's batch; refuses one that is too large, whose columns disagree, or
/// that refers to strings or metadata it does not have.
fn decode(
    b: wit::Batch,
    table: &mut StringTable,
    max_samples: usize,
) -> Result<Vec<Sample>, String> {
    let n = b.values.len();
    if n > max_samples {
        return Err(format!("{n} samples returned, the cap is {max_samples}"));
    }
    let lens = [
        b.names.len(),
        b.resources.len(),
        b.units.len(),
        b.kinds.len(),
        b.timestamps_ns.len(),
        b.metadata_ids.len(),
    ];
    if lens.iter().any(|&l| l != n) {
        return Err(format!(
            "the batch's columns have different lengths: {n} values, others {lens:?}"
        ));
    }
    if b.reset {
        return Err("a guest may not reset the string table".into());
    }
    table.receive(b.new_strings)?;
    let metadata: Vec<Metadata> = b
        .metadata
        .into_iter()
        .map(|set| {
            set.into_iter()
                .map(|(k, v)| Ok((table.get(k)?.clone(), table.get(v)?.clone())))
                .collect::<Result<Vec<_>, String>>()
                .map(Metadata::new)
        })
        .collect::<Result<_, _>>()?;
    // Ids are checked once, column by column, so that building the samples cannot fail.
    table.intern_names(&b.names)?;
    table.intern_names(&b.units)?;
    table.check(&b.resources)?;
    if let Some(i) = b
        .metadata_ids
        .iter()
        .position(|&id| id as usize >= metadata.len())
    {
        let (id, known) = (b.metadata_ids[i], metadata.len());
        return Err(format!("sample {i} refers to metadata set {id} of {known}"));
    }
    if let Some(i) = b.kinds.iter().position(|&k| k >= KINDS) {
        return Err(format!(
            "sample {i} has kind {}, not a sample-kind",
            b.kinds[i]
        ));
    }
    let (strings, names) = (table.all(), table.names());
    // Zipped columns of one length: one loop without per-column bounds checks.
    let ids = b.names.iter().zip(&b.resources).zip(&b.units);
    let columns = ids.zip(&b.kinds).zip(&b.values).zip(&b.timestamps_ns);
    let out = columns
        .zip(&b.metadata_ids)
        .map(
            |((((((&n, &r), &u), &k), &value), &timestamp_ns), &m)| Sample {
                name: names[n as usize].unwrap_or_default(),
                resource: strings[r as usize].clone(),
                unit: names[u as usize].unwrap_or_default(),
                kind: kind_of(k),
                value,
                timestamp_ns,
                metadata: metadata[m as usize].clone(),
            },
        )
        .collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::Name;

    fn samples() -> Vec<Sample> {
        let r: Arc<str> = "host1".into();
        let meta = Metadata::new(vec![("k".into(), "v".into())]);
        vec![
            Sample {
                unit: Name::new("%"),
                resource: r.clone(),
                ..Sample::new("cpu", "", 1.0, 10)
            },
            Sample {
                kind: Kind::Cumulative,
                resource: r,
                metadata: meta,
                ..Sample::new("mem", "", 2.0, 20)
            },
        ]
    }

    /// What a guest that echoes its input returns: the same ids, nothing new.
    fn echo(b: &wit::Batch) -> wit::Batch {
        wit::Batch {
            reset: false,
            new_strings: Vec::new(),
            ..b.clone()
        }
    }

    #[test]
    fn a_batch_round_trips_and_names_come_back_interned() {
        let mut table = StringTable::default();
        let input = samples();
        let b = encode(&input, &mut table);
        // Strings travel once: "cpu", "host1", "%", "mem", "", "k", "v".
        assert_eq!(b.new_strings.len(), 7, "{:?}", b.new_strings);
        assert_eq!(b.kinds, [0, 2]);
        assert_eq!(b.metadata.len(), 2);
        let out = decode(echo(&b), &mut table, 10).unwrap();
        assert_eq!(out, input);
        assert_eq!(out[0].name, Name::new("cpu"));
        // A second batch sends no string again.
        assert!(encode(&input, &mut table).new_strings.is_empty());
    }

    #[test]
    fn a_bad_batch_is_refused_with_what_is_wrong() {
        let mut table = StringTable::default();
        let b = encode(&samples(), &mut table);
        let refuse = |f: &dyn Fn(&mut wit::Batch), max: usize| {
            let mut bad = echo(&b);
            f(&mut bad);
            decode(bad, &mut table.clone(), max).unwrap_err()
        };
        assert_eq!(refuse(&|_| {}, 1), "2 samples returned, the cap is 1");
        let e = refuse(&|b| b.kinds[1] = 3, 10);
        assert_eq!(e, "sample 1 has kind 3, not a sample-kind");
        let e = refuse(&|b| b.names[1] = 99, 10);
        assert_eq!(e, "sample 1 refers to string 99 of 7");
        let e = refuse(&|b| b.resources[0] = 7, 10);
        assert_eq!(e, "sample 0 refers to string 7 of 7");
        let e = refuse(&|b| b.metadata_ids[0] = 2, 10);
        assert_eq!(e, "sample 0 refers to metadata set 2 of 2");
        let e = refuse(&|b| b.units.truncate(1), 10);
        assert!(
            e.starts_with("the batch's columns have different lengths"),
            "{e}"
        );
        let e = refuse(&|b| b.reset = true, 10);
        assert_eq!(e, "a guest may not reset the string table");
        let e = refuse(&|b| b.metadata[1] = vec![(0, 42)], 10);
        assert!(e.contains("string id 42"), "{e}");
    }

    #[test]
    fn strings_a_guest_sends_become_names_and_resources() {
        let mut table = StringTable::default();
        let b = encode(&samples(), &mut table);
        let mut out = echo(&b);
        out.new_strings = vec!["util".into(), "node7".into()];
        out.names[0] = 7;
        out.resources[0] = 8;
        let got = decode(out, &mut table, 10).unwrap();
        assert_eq!(got[0].name, Name::new("util"));
        assert_eq!(&*got[0].resource, "node7");
        // The host's next batch refers to them by id.
        let again = encode(&got, &mut table);
        assert!(again.new_strings.is_empty(), "{:?}", again.new_strings);
        assert_eq!((again.names[0], again.resources[0]), (7, 8));
    }
}
