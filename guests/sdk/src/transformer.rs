//! The `transformer` world: WIT bindings, and the adapter that turns the interned batches of
//! the boundary into [`Sample`]s for a [`Transformer`] and back.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use crate::{Kind, Metadata, Sample, Str, Transformer};

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "transformer",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_raw",
        default_bindings_module: "wasmon_guest::transformer::bindings",
        additional_derives: [PartialEq],
    });
}

use bindings::exports::wasmon::collector::transform::Guest;
use bindings::wasmon::collector::types as wit;

/// The guest's half of the string table it shares with the host (protocol: `wit/types.wit`).
struct StringTable {
    by_id: Vec<Str>,
    by_text: FastMap<Str, u32>,
    /// Output strings are nearly always the very `Rc`s decoding handed out: a direct-mapped
    /// cache of table entries by address finds them without hashing (fixed size: it cannot
    /// grow, and a stale slot is caught by comparing the `Rc` itself).
    by_ptr: Box<[(usize, u32)]>,
}

const PTR_CACHE: usize = 4096;

#[inline]
fn slot(s: &Str) -> usize {
    (s.as_ptr() as usize >> 3) & (PTR_CACHE - 1)
}

impl Default for StringTable {
    fn default() -> Self {
        StringTable {
            by_id: Vec::new(),
            by_text: FastMap::default(),
            by_ptr: vec![(0, 0); PTR_CACHE].into_boxed_slice(),
        }
    }
}

impl StringTable {
    fn append(&mut self, s: Str) {
        let i = self.by_id.len() as u32;
        self.by_text.entry(s.clone()).or_insert(i);
        self.by_ptr[slot(&s)] = (s.as_ptr() as usize, i);
        self.by_id.push(s);
    }

    fn get(&self, id: u32) -> Str {
        // The host only sends ids it has defined; an unknown one reads as "".
        self.by_id
            .get(id as usize)
            .cloned()
            .unwrap_or_else(|| Str::from(""))
    }

    /// The id of `s`; a string the host has not seen is appended and goes in `new`.
    #[inline]
    fn id(&mut self, s: &Str, new: &mut Vec<String>) -> u32 {
        // A pointer match is only trusted if the entry still holds that very allocation
        // (an address can be reused after its `Rc` was freed).
        let (ptr, i) = self.by_ptr[slot(s)];
        if ptr == s.as_ptr() as usize
            && self.by_id.get(i as usize).is_some_and(|t| Rc::ptr_eq(t, s))
        {
            return i;
        }
        self.id_by_text(s, new)
    }

    /// The slow path of [`Self::id`], kept out of line so that the fast one inlines.
    #[cold]
    #[inline(never)]
    fn id_by_text(&mut self, s: &Str, new: &mut Vec<String>) -> u32 {
        // Not cached by address: a guest that builds fresh strings every batch would grow
        // the address map without bound.
        if let Some(&i) = self.by_text.get(s) {
            return i;
        }
        new.push(s.to_string());
        let i = self.by_id.len() as u32;
        self.append(s.clone());
        i
    }
}

thread_local! {
    static STRINGS: RefCell<StringTable> = RefCell::new(StringTable::default());
}

fn kind(k: wit::SampleKind) -> Kind {
    match k {
        wit::SampleKind::Gauge => Kind::Gauge,
        wit::SampleKind::Delta => Kind::Delta,
        wit::SampleKind::Cumulative => Kind::Cumulative,
    }
}

/// Decodes the host's batch: its new strings join the table (each allocated once per
/// instance), then every sample shares them.
pub fn decode(batch: wit::Batch) -> Vec<Sample> {
    STRINGS.with(|t| {
        let mut t = t.borrow_mut();
        if batch.reset {
            *t = StringTable::default();
        }
        for s in batch.new_strings {
            t.append(crate::sample::from_host(s));
        }
        let metadata: Vec<Metadata> = batch
            .metadata
            .into_iter()
            .map(|set| Metadata::new(set.into_iter().map(|(k, v)| (t.get(k), t.get(v))).collect()))
            .collect();
        // The host sends columns of one length; zipping them needs no bounds checks (and
        // would stop at the shortest rather than trap).
        let columns = batch.names.iter().zip(&batch.resources).zip(&batch.units);
        let columns = columns.zip(&batch.kinds).zip(&batch.values);
        let columns = columns.zip(&batch.timestamps_ns).zip(&batch.metadata_ids);
        columns
            .map(
                |((((((&n, &r), &u), &k), &value), &timestamp_ns), &m)| Sample {
                    name: t.get(n),
                    resource: t.get(r),
                    unit: t.get(u),
                    kind: kind(k),
                    value,
                    timestamp_ns,
                    metadata: metadata.get(m as usize).cloned().unwrap_or_default(),
                },
            )
            .collect()
    })
}

/// Encodes samples for the host: column-wise, strings as table ids, new ones sent once.
pub fn encode(samples: Vec<Sample>) -> wit::Batch {
    STRINGS.with(|t| {
        let mut t = t.borrow_mut();
        let n = samples.len();
        let mut new_strings = Vec::new();
        let mut metadata: Vec<wit::MetadataSet> = Vec::new();
        let mut meta_ids: FastMap<*const (Str, Str), u32> = FastMap::default();
        let mut empty_set: Option<u32> = None;
        let mut b = wit::Batch {
            reset: false,
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
        for x in &samples {
            let pairs = &x.metadata.0;
            let metadata_id = if pairs.is_empty() {
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
                    .map(|(k, v)| (t.id(k, &mut new_strings), t.id(v, &mut new_strings)))
                    .collect();
                metadata.push(set);
                let i = metadata.len() as u32 - 1;
                meta_ids.insert(pairs.as_ptr(), i);
                i
            };
            b.names.push(t.id(&x.name, &mut new_strings));
            b.resources.push(t.id(&x.resource, &mut new_strings));
            b.units.push(t.id(&x.unit, &mut new_strings));
            b.kinds.push(match x.kind {
                Kind::Gauge => wit::SampleKind::Gauge,
                Kind::Delta => wit::SampleKind::Delta,
                Kind::Cumulative => wit::SampleKind::Cumulative,
            });
            b.values.push(x.value);
            b.timestamps_ns.push(x.timestamp_ns);
            b.metadata_ids.push(metadata_id);
        }
        b.new_strings = new_strings;
        b.metadata = metadata;
        b
    })
}

type FastMap<K, V> = HashMap<K, V, crate::hash::FxBuildHasher>;

thread_local! {
    static STATE: RefCell<Option<Box<dyn std::any::Any>>> = const { RefCell::new(None) };
}

/// Implements the WIT `transform` export for `T`; used through [`crate::export_transformer!`].
#[doc(hidden)]
pub struct Export<T>(std::marker::PhantomData<T>);

fn with_state<T: Transformer, R>(f: impl FnOnce(&mut T) -> R) -> Option<R> {
    STATE.with(|cell| {
        cell.borrow_mut()
            .as_mut()
            .and_then(|b| b.downcast_mut::<T>())
            .map(f)
    })
}

impl<T: Transformer> Guest for Export<T> {
    fn configure(params: String) -> Result<(), String> {
        let t = T::configure(&crate::parse_params(&params)?)?;
        STATE.with(|cell| *cell.borrow_mut() = Some(Box::new(t)));
        Ok(())
    }

    fn handle(input: wit::Batch) -> wit::Batch {
        let input = decode(input);
        let mut out = Vec::new();
        if with_state::<T, _>(|t| t.handle(input, &mut out)).is_none() {
            // Not configured: the host always configures first, so this is a host bug; pass
            // nothing on rather than trap.
            crate::log::log(crate::log::Level::Error, "handle called before configure");
        }
        encode(out)
    }

    fn flush() -> wit::Batch {
        let mut out = Vec::new();
        with_state::<T, _>(|t| t.flush(&mut out));
        encode(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(new_strings: &[&str], names: Vec<u32>) -> wit::Batch {
        let n = names.len();
        wit::Batch {
            reset: false,
            new_strings: new_strings.iter().map(|s| s.to_string()).collect(),
            metadata: vec![Vec::new()],
            resources: names.clone(),
            units: names.clone(),
            names,
            kinds: vec![wit::SampleKind::Gauge; n],
            values: vec![1.0; n],
            timestamps_ns: vec![0; n],
            metadata_ids: vec![0; n],
        }
    }

    #[test]
    fn interned_strings_are_the_allocations_samples_decode_to() {
        let meter = crate::intern("memory.usage");
        let other = Str::from("memory.usage");
        let samples = decode(batch(&["memory.usage", "cpu"], vec![0, 1, 0]));
        assert!(Rc::ptr_eq(&samples[0].name, &meter));
        assert!(Rc::ptr_eq(&samples[2].resource, &meter));
        assert!(!Rc::ptr_eq(&samples[1].name, &meter));
        assert_eq!(&*samples[1].name, "cpu");
        // A string not interned still compares equal by content.
        assert!(crate::same(&samples[0].name, &other));
        // Encoding the decoded samples sends no string again: the host has them all.
        let out = encode(samples);
        assert!(out.new_strings.is_empty(), "{:?}", out.new_strings);
        assert_eq!(out.names, vec![0, 1, 0]);
    }
}
