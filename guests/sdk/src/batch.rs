//! Batches across the boundary, for every world that takes or returns them: the guest's half
//! of the string table (protocol: `wit/types.wit`), decoding the host's batches into
//! [`Sample`]s and encoding samples back. One table per instance: a component is one world.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::transformer::bindings::wasmon::collector::types as wit;
use crate::{Kind, Metadata, Sample, Str};

/// The guest's half of the string table it shares with the host (protocol: `wit/types.wit`).
pub(crate) struct StringTable {
    by_id: Vec<Str>,
    by_text: FastMap<Str, u32>,
    /// Output strings are nearly always the very `Rc`s decoding handed out: a direct-mapped
    /// cache of table entries by address finds them without hashing (fixed size: it cannot
    /// grow; only [`Self::append`] fills it, with addresses of `by_id`'s own `Rc`s).
    by_ptr: Box<[(usize, u32)]>,
    /// What an unknown id reads as.
    empty: Str,
    /// The empty metadata set most batches carry, allocated once.
    no_metadata: Metadata,
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
            empty: Str::from(""),
            no_metadata: Metadata::default(),
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
        self.by_id.get(id as usize).unwrap_or(&self.empty).clone()
    }

    /// The id of `s`; a string the host has not seen is appended and goes in `new`.
    #[inline]
    fn id(&mut self, s: &Str, new: &mut Vec<String>) -> u32 {
        // The cache only holds addresses of the table's own `Rc`s, which live as long as the
        // table: a string at a cached address is that very allocation.
        let (ptr, i) = self.by_ptr[slot(s)];
        if ptr == s.as_ptr() as usize {
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

/// A `kinds` entry (the `sample-kind` enum's discriminant); the host sends no other values.
fn kind(k: u8) -> Kind {
    match k {
        1 => Kind::Delta,
        2 => Kind::Cumulative,
        _ => Kind::Gauge,
    }
}

/// Takes in the host's batch: its new strings join the table (each allocated once per
/// instance), and its metadata sets are decoded (each once per batch).
fn receive(t: &mut StringTable, batch: &mut wit::Batch) -> Vec<Metadata> {
    if batch.reset {
        *t = StringTable::default();
    }
    for s in std::mem::take(&mut batch.new_strings) {
        t.append(crate::sample::from_host(s));
    }
    std::mem::take(&mut batch.metadata)
        .into_iter()
        .map(|set| match set.is_empty() {
            true => t.no_metadata.clone(),
            false => Metadata::new(set.into_iter().map(|(k, v)| (t.get(k), t.get(v))).collect()),
        })
        .collect()
}

/// The batch's samples, each decoded when it is reached: the transformer's loop consumes
/// them one by one, with no vector of them in between (that vector, written and read back,
/// was a tenth of a 512-sample `arithmetic` call).
pub(crate) fn samples<'t>(
    t: &'t StringTable,
    batch: &'t wit::Batch,
    metadata: &'t [Metadata],
) -> impl ExactSizeIterator<Item = Sample> + 't {
    // The host sends columns of one length; zipping them needs no bounds checks (and
    // would stop at the shortest rather than trap).
    let rows = batch
        .ids
        .chunks_exact(4)
        .zip(&batch.kinds)
        .zip(&batch.values);
    rows.zip(&batch.timestamps_ns)
        .map(|(((row, &k), &value), &timestamp_ns)| Sample {
            name: t.get(row[0]),
            resource: t.get(row[1]),
            unit: t.get(row[2]),
            kind: kind(k),
            value,
            timestamp_ns,
            metadata: metadata.get(row[3] as usize).cloned().unwrap_or_default(),
        })
}

/// Takes in the host's `batch` and calls `f` with what [`samples`] iterates over. The table
/// stays borrowed while `f` runs (a transformer's `handle`, an exporter's `encode`); it is
/// written only here and by [`encode`], which the SDK calls outside of them.
pub(crate) fn with_input<R>(
    batch: &mut wit::Batch,
    f: impl FnOnce(&StringTable, &wit::Batch, &[Metadata]) -> R,
) -> R {
    STRINGS.with(|t| {
        let mut t = t.borrow_mut();
        let metadata = receive(&mut t, batch);
        f(&t, batch, &metadata)
    })
}

/// Decodes the host's batch into samples.
pub fn decode(mut batch: wit::Batch) -> Vec<Sample> {
    with_input(&mut batch, |t, b, m| samples(t, b, m).collect())
}

/// Encodes samples for the host: column-wise, strings as table ids, new ones sent once. One
/// column at a time: each pass is a tight loop into a vector of known length.
pub fn encode(samples: Vec<Sample>) -> wit::Batch {
    STRINGS.with(|t| {
        let mut t = t.borrow_mut();
        let mut new = Vec::new();
        let mut metadata: Vec<wit::MetadataSet> = Vec::new();
        let mut by_addr: FastMap<*const (Str, Str), u32> = FastMap::default();
        let mut empty: Option<u32> = None;
        // One pass, a sample's four ids appended at once (no zeroed vector to fill in: in
        // a guest, zeroing is a call out of the sandbox).
        let mut ids = Vec::with_capacity(4 * samples.len());
        for x in &samples {
            let pairs = &x.metadata.0;
            let m = if pairs.is_empty() {
                // Every empty set is the same set.
                *empty.get_or_insert_with(|| {
                    metadata.push(Vec::new());
                    metadata.len() as u32 - 1
                })
            } else {
                *by_addr.entry(pairs.as_ptr()).or_insert_with(|| {
                    let set = pairs
                        .iter()
                        .map(|(k, v)| (t.id(k, &mut new), t.id(v, &mut new)))
                        .collect();
                    metadata.push(set);
                    metadata.len() as u32 - 1
                })
            };
            let (n, r, u) = (
                t.id(&x.name, &mut new),
                t.id(&x.resource, &mut new),
                t.id(&x.unit, &mut new),
            );
            ids.extend_from_slice(&[n, r, u, m]);
        }
        wit::Batch {
            reset: false,
            new_strings: new,
            metadata,
            ids,
            kinds: samples.iter().map(|x| kind_id(x.kind)).collect(),
            values: samples.iter().map(|x| x.value).collect(),
            timestamps_ns: samples.iter().map(|x| x.timestamp_ns).collect(),
        }
    })
}

fn kind_id(k: Kind) -> u8 {
    (match k {
        Kind::Gauge => wit::SampleKind::Gauge,
        Kind::Delta => wit::SampleKind::Delta,
        Kind::Cumulative => wit::SampleKind::Cumulative,
    }) as u8
}

type FastMap<K, V> = HashMap<K, V, crate::hash::FxBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn batch(new_strings: &[&str], names: Vec<u32>) -> wit::Batch {
        let n = names.len();
        wit::Batch {
            reset: false,
            new_strings: new_strings.iter().map(|s| s.to_string()).collect(),
            metadata: vec![Vec::new()],
            // Each string is the sample's name, resource and unit.
            ids: names.iter().flat_map(|&s| [s, s, s, 0]).collect(),
            kinds: vec![wit::SampleKind::Gauge as u8; n],
            values: vec![1.0; n],
            timestamps_ns: vec![0; n],
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
        assert_eq!(out.ids, vec![0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0]);
    }
}
