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
use super::limits::MAX_OUTPUT_STRING_BYTES;
use super::state::State;
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
        let batch = encode(input);
        let max = self.image().config.max_output_samples;
        let out = self.call(
            |b, store| b.wasmon_collector_transform().call_handle(store, &batch),
            |b| check(b, max),
        )?;
        Ok(decode(out))
    }

    /// Asks the guest for what it has cached.
    pub fn flush(&mut self) -> Result<Vec<Sample>, CallError> {
        let max = self.image().config.max_output_samples;
        let out = self.call(
            |b, store| b.wasmon_collector_transform().call_flush(store),
            |b| check(b, max),
        )?;
        Ok(decode(out))
    }
}

/// Interns a batch's strings: each distinct text is sent once.
pub fn encode(samples: &[Sample]) -> wit::Batch {
    let mut strings = Interner::default();
    let mut metadata: Vec<wit::MetadataSet> = Vec::new();
    let mut meta_ids: FastMap<*const (Arc<str>, Arc<str>), u32> = FastMap::default();
    let mut empty_set: Option<u32> = None;
    let mut out = Vec::with_capacity(samples.len());
    for s in samples {
        let ptr = s.metadata.0.as_ptr();
        let meta = match meta_ids.get(&ptr) {
            Some(&i) => i,
            // Every empty set is the same set, whatever allocation it sits in.
            None if s.metadata.0.is_empty() => *empty_set.get_or_insert_with(|| {
                metadata.push(Vec::new());
                metadata.len() as u32 - 1
            }),
            None => {
                let set = s
                    .metadata
                    .0
                    .iter()
                    .map(|(k, v)| (strings.id(k), strings.id(v)))
                    .collect();
                metadata.push(set);
                let i = metadata.len() as u32 - 1;
                meta_ids.insert(ptr, i);
                i
            }
        };
        out.push(wit::Sample {
            name: strings.id(&s.name),
            resource: strings.id(&s.resource),
            unit: strings.id(&s.unit),
            kind: match s.kind {
                Kind::Gauge => wit::SampleKind::Gauge,
                Kind::Delta => wit::SampleKind::Delta,
                Kind::Cumulative => wit::SampleKind::Cumulative,
            },
            value: s.value,
            timestamp_ns: s.timestamp_ns,
            metadata: meta,
        });
    }
    wit::Batch {
        strings: strings.strings,
        metadata,
        samples: out,
    }
}

/// Interning is on the hot path of every guest call: a fast non-cryptographic hasher (the
/// keys are our own pointers and strings, not attacker-chosen bucket floods of note).
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// Interns by text: one fast hash of a short string beats a pointer map that misses
/// whenever a source built its strings one sample at a time (JSON input does).
#[derive(Default)]
struct Interner<'a> {
    strings: Vec<String>,
    by_text: FastMap<&'a str, u32>,
}

impl<'a> Interner<'a> {
    fn id(&mut self, s: &'a Arc<str>) -> u32 {
        let next = self.strings.len() as u32;
        let i = *self.by_text.entry(&**s).or_insert(next);
        if i == next {
            self.strings.push(s.to_string());
        }
        i
    }
}

/// Refuses an output that is too large or refers to strings or metadata it does not carry.
fn check(b: &wit::Batch, max_samples: usize) -> Result<(), String> {
    if b.samples.len() > max_samples {
        return Err(format!(
            "{} samples returned, the cap is {max_samples}",
            b.samples.len()
        ));
    }
    let bytes: usize = b.strings.iter().map(|s| s.len()).sum();
    if bytes > MAX_OUTPUT_STRING_BYTES {
        return Err(format!(
            "{bytes} bytes of strings returned, the cap is {MAX_OUTPUT_STRING_BYTES}"
        ));
    }
    let n = b.strings.len() as u32;
    let m = b.metadata.len() as u32;
    if let Some(set) = b
        .metadata
        .iter()
        .find(|set| set.iter().any(|(k, v)| *k >= n || *v >= n))
    {
        return Err(format!(
            "a metadata set refers past the {n} strings of the batch: {set:?}"
        ));
    }
    for (i, s) in b.samples.iter().enumerate() {
        if s.name >= n || s.resource >= n || s.unit >= n {
            return Err(format!(
                "sample {i} refers to a string past the {n} strings of the batch"
            ));
        }
        if s.metadata >= m && !(m == 0 && s.metadata == 0) {
            return Err(format!(
                "sample {i} refers to metadata set {} of {m}",
                s.metadata
            ));
        }
    }
    Ok(())
}

/// Turns a checked batch into samples, allocating each distinct string once.
fn decode(b: wit::Batch) -> Vec<Sample> {
    let strings: Vec<Arc<str>> = b.strings.into_iter().map(Arc::from).collect();
    let metadata: Vec<Metadata> = b
        .metadata
        .into_iter()
        .map(|set| {
            Metadata::new(
                set.into_iter()
                    .map(|(k, v)| (strings[k as usize].clone(), strings[v as usize].clone()))
                    .collect(),
            )
        })
        .collect();
    b.samples
        .into_iter()
        .map(|s| Sample {
            name: strings[s.name as usize].clone(),
            resource: strings[s.resource as usize].clone(),
            unit: strings[s.unit as usize].clone(),
            kind: match s.kind {
                wit::SampleKind::Gauge => Kind::Gauge,
                wit::SampleKind::Delta => Kind::Delta,
                wit::SampleKind::Cumulative => Kind::Cumulative,
            },
            value: s.value,
            timestamp_ns: s.timestamp_ns,
            metadata: metadata
                .get(s.metadata as usize)
                .cloned()
                .unwrap_or_default(),
        })
        .collect()
}
