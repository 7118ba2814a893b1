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

fn wit_kind(k: Kind) -> wit::SampleKind {
    match k {
        Kind::Gauge => wit::SampleKind::Gauge,
        Kind::Delta => wit::SampleKind::Delta,
        Kind::Cumulative => wit::SampleKind::Cumulative,
    }
}

/// Interning is on the hot path of every guest call: a fast non-cryptographic hasher.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// A batch for the guest: column-wise, strings as ids of the instance's string table (only
/// strings the guest has not seen yet travel, in `new-strings`).
pub fn encode(samples: &[Sample], table: &mut StringTable) -> wit::Batch {
    let n = samples.len();
    let reset = table.begin_send();
    let mut new_strings = Vec::new();
    let mut metadata: Vec<wit::MetadataSet> = Vec::new();
    let mut meta_ids: FastMap<*const (Arc<str>, Arc<str>), u32> = FastMap::default();
    let mut empty_set: Option<u32> = None;
    let mut b = wit::Batch {
        reset,
        new_strings: Vec::new(),
        metadata: Vec::new(),
        names: Vec::with_capacity(n),
        resources: Vec::with_capacity(n),
        units: Vec::with_capacity(n),
        kinds: Vec::with_capacity(n),
        values: Vec::with_capacity(n),
        timestamps_ns: Vec::with_capacity(n),
        metadata_ids: Vec::with_capacity(n),
    };
    for s in samples {
        let pairs = s.metadata.pairs();
        let meta = if pairs.is_empty() {
            // Every empty set is the same set.
            *empty_set.get_or_insert_with(|| {
                metadata.push(Vec::new());
                metadata.len() as u32 - 1
            })
        } else if let Some(&i) = meta_ids.get(&pairs.as_ptr()) {
            i
        } else {
            let set = pairs
                .iter()
                .map(|(k, v)| (table.id(k, &mut new_strings), table.id(v, &mut new_strings)))
                .collect();
            metadata.push(set);
            let i = metadata.len() as u32 - 1;
            meta_ids.insert(pairs.as_ptr(), i);
            i
        };
        b.names.push(table.id(&s.name, &mut new_strings));
        b.resources.push(table.id(&s.resource, &mut new_strings));
        b.units.push(table.id(&s.unit, &mut new_strings));
        b.kinds.push(wit_kind(s.kind));
        b.values.push(s.value);
        b.timestamps_ns.push(s.timestamp_ns);
        b.metadata_ids.push(meta);
    }
    b.new_strings = new_strings;
    b.metadata = metadata;
    b
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
    let strings = table.all();
    for (what, ids, known) in [
        ("string", &b.names, strings.len()),
        ("string", &b.resources, strings.len()),
        ("string", &b.units, strings.len()),
        ("metadata set", &b.metadata_ids, metadata.len()),
    ] {
        if let Some(i) = ids.iter().position(|&id| id as usize >= known) {
            return Err(format!("sample {i} refers to {what} {} of {known}", ids[i]));
        }
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        out.push(Sample {
            name: strings[b.names[i] as usize].clone(),
            resource: strings[b.resources[i] as usize].clone(),
            unit: strings[b.units[i] as usize].clone(),
            kind: match b.kinds[i] {
                wit::SampleKind::Gauge => Kind::Gauge,
                wit::SampleKind::Delta => Kind::Delta,
                wit::SampleKind::Cumulative => Kind::Cumulative,
            },
            value: b.values[i],
            timestamp_ns: b.timestamps_ns[i],
            metadata: metadata[b.metadata_ids[i] as usize].clone(),
        });
    }
    Ok(out)
}
