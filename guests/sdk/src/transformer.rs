//! The `transformer` world: WIT bindings, and the adapter that turns the interned batches of
//! the boundary into [`Sample`]s for a [`Transformer`] and back.

use std::cell::RefCell;
use std::collections::HashMap;

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

/// Decodes a boundary batch: each distinct string and metadata set is allocated once.
pub fn decode(batch: wit::Batch) -> Vec<Sample> {
    let strings: Vec<Str> = batch.strings.into_iter().map(Str::from).collect();
    let empty: Str = Str::from("");
    let s = |i: u32| {
        strings
            .get(i as usize)
            .cloned()
            .unwrap_or_else(|| empty.clone())
    };
    let metadata: Vec<Metadata> = batch
        .metadata
        .into_iter()
        .map(|set| Metadata::new(set.into_iter().map(|(k, v)| (s(k), s(v))).collect()))
        .collect();
    batch
        .samples
        .into_iter()
        .map(|x| Sample {
            name: s(x.name),
            resource: s(x.resource),
            unit: s(x.unit),
            kind: match x.kind {
                wit::SampleKind::Gauge => Kind::Gauge,
                wit::SampleKind::Delta => Kind::Delta,
                wit::SampleKind::Cumulative => Kind::Cumulative,
            },
            value: x.value,
            timestamp_ns: x.timestamp_ns,
            metadata: metadata
                .get(x.metadata as usize)
                .cloned()
                .unwrap_or_default(),
        })
        .collect()
}

/// Encodes samples into a boundary batch, interning strings and metadata sets. Interning is
/// by pointer first (samples that share an `Rc` share an entry without hashing the text).
pub fn encode(samples: Vec<Sample>) -> wit::Batch {
    #[derive(Default)]
    struct Interner {
        strings: Vec<String>,
        by_ptr: FastMap<*const u8, u32>,
        by_text: FastMap<Str, u32>,
    }
    impl Interner {
        fn id(&mut self, s: &Str) -> u32 {
            let ptr = s.as_ptr();
            if let Some(&i) = self.by_ptr.get(&ptr) {
                return i;
            }
            let next = self.strings.len() as u32;
            let i = *self.by_text.entry(s.clone()).or_insert_with(|| {
                self.strings.push(s.to_string());
                next
            });
            self.by_ptr.insert(ptr, i);
            i
        }
    }
    let mut strings = Interner::default();
    let mut metadata: Vec<wit::MetadataSet> = Vec::new();
    let mut meta_ids: FastMap<*const (Str, Str), u32> = FastMap::default();
    let mut empty_set: Option<u32> = None;
    let mut out = Vec::with_capacity(samples.len());
    for x in &samples {
        let meta_ptr = x.metadata.0.as_ptr();
        let metadata_id = match meta_ids.get(&meta_ptr) {
            Some(&i) => i,
            // Every empty set is the same set, whatever allocation it sits in.
            None if x.metadata.0.is_empty() => *empty_set.get_or_insert_with(|| {
                metadata.push(Vec::new());
                metadata.len() as u32 - 1
            }),
            None => {
                let set = x
                    .metadata
                    .0
                    .iter()
                    .map(|(k, v)| (strings.id(k), strings.id(v)))
                    .collect();
                metadata.push(set);
                let i = metadata.len() as u32 - 1;
                meta_ids.insert(meta_ptr, i);
                i
            }
        };
        out.push(wit::Sample {
            name: strings.id(&x.name),
            resource: strings.id(&x.resource),
            unit: strings.id(&x.unit),
            kind: match x.kind {
                Kind::Gauge => wit::SampleKind::Gauge,
                Kind::Delta => wit::SampleKind::Delta,
                Kind::Cumulative => wit::SampleKind::Cumulative,
            },
            value: x.value,
            timestamp_ns: x.timestamp_ns,
            metadata: metadata_id,
        });
    }
    wit::Batch {
        strings: strings.strings,
        metadata,
        samples: out,
    }
}

/// FxHash (rustc's hasher): interning pointers and short names needs speed, not SipHash's
/// flood resistance, and the guest should not pull in a hashing crate for it.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut v = [0u8; 8];
            v[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(v));
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

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
