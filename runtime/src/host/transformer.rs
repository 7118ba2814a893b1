//! The transformer world on the host side: batches of [`Sample`]s to and from the interned
//! boundary form, and `handle` / `flush` calls through the sandbox.

use std::collections::HashMap;
use std::sync::Arc;

use super::bindings::transformer::{Transformer, TransformerPre};
use super::bindings::types as wit;
use super::guest::{CallError, Instance, Live, in_guest};
use super::strings::StringTable;
use crate::sample::{Kind, Metadata, Pair, Sample};

/// Marker for the `transformer` world.
pub struct TransformerWorld;

world!(
    TransformerWorld,
    TransformerPre,
    Transformer,
    "transformer",
    transformer_linker,
    wasmon_collector_transform
);

/// A running transformer guest.
pub type TransformerInstance = Instance<TransformerWorld>;

impl Instance<TransformerWorld> {
    /// Passes a batch through the guest. After a failure, [`Instance::take_discarded`] tells
    /// how many samples the thrown-away instance had cached.
    pub fn handle(&mut self, input: &[Sample]) -> Result<Vec<Sample>, CallError> {
        let max = self.image().config.max_output_samples;
        let out = self
            .call(
                async |live: &mut Live<TransformerWorld>| {
                    let batch = encode(input, &mut live.store.data_mut().strings);
                    let iface = live.bindings.wasmon_collector_transform();
                    let out = in_guest(&mut live.store, async |s| {
                        iface.call_handle(s, &batch).await
                    })
                    .await?;
                    Ok(decode(out, &mut live.store.data_mut().strings, max))
                },
                checked,
            )
            .map(Result::unwrap_or_default)?;
        self.account(input.len(), out.len());
        Ok(out)
    }

    /// Asks the guest for what it has cached.
    pub fn flush(&mut self) -> Result<Vec<Sample>, CallError> {
        let max = self.image().config.max_output_samples;
        let out = self
            .call(
                async |live: &mut Live<TransformerWorld>| {
                    let iface = live.bindings.wasmon_collector_transform();
                    let out =
                        in_guest(&mut live.store, async |s| iface.call_flush(s).await).await?;
                    Ok(decode(out, &mut live.store.data_mut().strings, max))
                },
                checked,
            )
            .map(Result::unwrap_or_default)?;
        self.flushed();
        Ok(out)
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
/// strings the guest has not seen yet travel, in `new-strings`). Each column is built in one
/// pass into a vector of known length.
pub fn encode(samples: &[Sample], table: &mut StringTable) -> wit::Batch {
    let reset = table.begin_send();
    let mut new = Vec::new();
    let mut sets = MetadataSets::default();
    let mut ids = Vec::with_capacity(4 * samples.len());
    for s in samples {
        let (n, r, u) = (
            table.name_id(s.name, &mut new),
            table.id(&s.resource, &mut new),
            table.name_id(s.unit, &mut new),
        );
        let m = sets.id(s.metadata.pairs(), table, &mut new);
        ids.extend_from_slice(&[n, r, u, m]);
    }
    wit::Batch {
        reset,
        new_strings: new,
        metadata: sets.sets,
        ids,
        kinds: samples.iter().map(|s| wit_kind(s.kind)).collect(),
        values: samples.iter().map(|s| s.value).collect(),
        timestamps_ns: samples.iter().map(|s| s.timestamp_ns).collect(),
    }
}

/// A batch's metadata sets: samples that share a set's allocation share its entry, and every
/// empty set is the same set.
#[derive(Default)]
struct MetadataSets {
    sets: Vec<wit::MetadataSet>,
    by_addr: FastMap<*const (Arc<str>, Arc<str>), u32>,
    empty: Option<u32>,
}

impl MetadataSets {
    /// The index of `pairs`' set, added if new.
    fn id(&mut self, pairs: &[Pair], table: &mut StringTable, new: &mut Vec<String>) -> u32 {
        let sets = &mut self.sets;
        if pairs.is_empty() {
            return *self.empty.get_or_insert_with(|| {
                sets.push(Vec::new());
                sets.len() as u32 - 1
            });
        }
        *self.by_addr.entry(pairs.as_ptr()).or_insert_with(|| {
            let set = pairs
                .iter()
                .map(|(k, v)| (table.id(k, new), table.id(v, new)))
                .collect();
            sets.push(set);
            sets.len() as u32 - 1
        })
    }
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
    let lens = [b.ids.len(), b.kinds.len(), b.timestamps_ns.len()];
    if lens != [4 * n, n, n] {
        return Err(format!(
            "the batch's columns have different lengths: {n} values, {} ids (4 a sample), \
             {} kinds, {} timestamps",
            lens[0], lens[1], lens[2]
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
    let column = |k: usize| b.ids.iter().skip(k).step_by(4).copied();
    table.intern_names(column(0))?;
    table.check(column(1))?;
    table.intern_names(column(2))?;
    if let Some((i, id)) = column(3)
        .enumerate()
        .find(|&(_, id)| id as usize >= metadata.len())
    {
        let known = metadata.len();
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
    let rows = b.ids.chunks_exact(4).zip(&b.kinds);
    let out = rows
        .zip(&b.values)
        .zip(&b.timestamps_ns)
        .map(|(((row, &k), &value), &timestamp_ns)| Sample {
            name: names[row[0] as usize].unwrap_or_default(),
            resource: strings[row[1] as usize].clone(),
            unit: names[row[2] as usize].unwrap_or_default(),
            kind: kind_of(k),
            value,
            timestamp_ns,
            metadata: metadata[row[3] as usize].clone(),
        })
        .collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Name;

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
        let e = refuse(&|b| b.ids[4] = 99, 10);
        assert_eq!(e, "sample 1 refers to string 99 of 7");
        let e = refuse(&|b| b.ids[1] = 7, 10);
        assert_eq!(e, "sample 0 refers to string 7 of 7");
        let e = refuse(&|b| b.ids[3] = 2, 10);
        assert_eq!(e, "sample 0 refers to metadata set 2 of 2");
        let e = refuse(&|b| b.ids.truncate(7), 10);
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
        out.ids[0] = 7;
        out.ids[1] = 8;
        let got = decode(out, &mut table, 10).unwrap();
        assert_eq!(got[0].name, Name::new("util"));
        assert_eq!(&*got[0].resource, "node7");
        // The host's next batch refers to them by id.
        let again = encode(&got, &mut table);
        assert!(again.new_strings.is_empty(), "{:?}", again.new_strings);
        assert_eq!(again.ids[..2], [7, 8]);
    }
}
