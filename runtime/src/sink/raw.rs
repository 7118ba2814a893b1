//! The records a guest sink queues: its samples whole (name, resource, unit, kind, value,
//! timestamp, metadata), because its exporter encodes them only when they are sent, so that
//! an exporter that crashes leaves its batch in the queue, never loses it. Each record is
//! self-contained: its strings once, in a table of its own, and every sample as ids into it.
//!
//! ```text
//! "WSR1" | u32 strings | (u32 len | UTF-8)*            string table
//!        | u32 sets    | (u32 pairs | (u32 k | u32 v)*)*  metadata sets (string ids)
//!        | u32 samples | (u32 name | u32 resource | u32 unit | u32 set | u8 kind | f64 value | i64 ts)*
//! ```
//! Little endian. The queue checksums each record; decoding still checks every length and
//! id, so a record from a damaged or foreign file is refused with what is wrong.

use std::collections::HashMap;
use std::sync::Arc;

use crate::sample::{Kind, Metadata, Name, Pair, Sample};

const MAGIC: &[u8; 4] = b"WSR1";
/// Bytes of one sample after the tables.
const SAMPLE_BYTES: usize = 4 * 4 + 1 + 8 + 8;

/// Encodes `samples` as one record.
pub fn encode(samples: &[Sample]) -> Vec<u8> {
    let mut strings = Interner::default();
    let mut sets: Vec<Vec<(u32, u32)>> = Vec::new();
    let mut set_of: HashMap<*const Pair, u32> = HashMap::new();
    let mut rows = Vec::with_capacity(samples.len() * SAMPLE_BYTES);
    for s in samples {
        let name = strings.id(&s.name);
        let resource = strings.id(&s.resource);
        let unit = strings.id(&s.unit);
        // Samples of one set share its allocation (the empty set is the null pointer).
        let pairs = s.metadata.pairs();
        let set = *set_of.entry(pairs.as_ptr()).or_insert_with(|| {
            sets.push(
                pairs
                    .iter()
                    .map(|(k, v)| (strings.id(k), strings.id(v)))
                    .collect(),
            );
            sets.len() as u32 - 1
        });
        for id in [name, resource, unit, set] {
            rows.extend_from_slice(&id.to_le_bytes());
        }
        rows.push(kind_byte(s.kind));
        rows.extend_from_slice(&s.value.to_le_bytes());
        rows.extend_from_slice(&s.timestamp_ns.to_le_bytes());
    }
    let mut out = Vec::with_capacity(16 + strings.bytes + rows.len());
    out.extend_from_slice(MAGIC);
    put_u32(&mut out, strings.list.len());
    for s in &strings.list {
        put_u32(&mut out, s.len());
        out.extend_from_slice(s.as_bytes());
    }
    put_u32(&mut out, sets.len());
    for set in &sets {
        put_u32(&mut out, set.len());
        for &(k, v) in set {
            put_u32(&mut out, k as usize);
            put_u32(&mut out, v as usize);
        }
    }
    put_u32(&mut out, samples.len());
    out.extend_from_slice(&rows);
    out
}

/// The samples of a record, or what is wrong with it.
pub fn decode(bytes: &[u8]) -> Result<Vec<Sample>, String> {
    let mut r = Reader(bytes);
    if r.take(4)? != MAGIC {
        return Err("not a guest sink record (no WSR1 magic)".into());
    }
    let n = r.count(4)?;
    let mut strings: Vec<Arc<str>> = Vec::with_capacity(n);
    for i in 0..n {
        let len = r.count(1)?;
        let text = std::str::from_utf8(r.take(len)?)
            .map_err(|e| format!("string {i}: invalid UTF-8: {e}"))?;
        strings.push(text.into());
    }
    let string = |id: u32| {
        strings
            .get(id as usize)
            .cloned()
            .ok_or_else(|| format!("string id {id} of {}", strings.len()))
    };
    let n = r.count(4)?;
    let mut sets = Vec::with_capacity(n);
    for _ in 0..n {
        let pairs = r.count(8)?;
        let mut set = Vec::with_capacity(pairs);
        for _ in 0..pairs {
            set.push((string(r.u32()?)?, string(r.u32()?)?));
        }
        sets.push(Metadata::new(set));
    }
    let n = r.count(SAMPLE_BYTES)?;
    // Names and units are interned once per distinct string, not once per sample.
    let mut names: HashMap<u32, Name> = HashMap::new();
    let mut name = |id: u32| -> Result<Name, String> {
        if let Some(n) = names.get(&id) {
            return Ok(*n);
        }
        let n = Name::try_new(&string(id)?).map_err(|e| e.to_string())?;
        names.insert(id, n);
        Ok(n)
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let ids = [r.u32()?, r.u32()?, r.u32()?, r.u32()?];
        let kind = match r.take(1)?[0] {
            0 => Kind::Gauge,
            1 => Kind::Delta,
            2 => Kind::Cumulative,
            k => return Err(format!("sample {i}: kind {k}")),
        };
        let value = f64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes"));
        let timestamp_ns = i64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes"));
        let metadata = sets
            .get(ids[3] as usize)
            .cloned()
            .ok_or_else(|| format!("sample {i}: metadata set {} of {}", ids[3], sets.len()))?;
        out.push(Sample {
            name: name(ids[0]).map_err(|e| format!("sample {i}: {e}"))?,
            resource: string(ids[1]).map_err(|e| format!("sample {i}: {e}"))?,
            unit: name(ids[2]).map_err(|e| format!("sample {i}: {e}"))?,
            kind,
            value,
            timestamp_ns,
            metadata,
        });
    }
    if !r.0.is_empty() {
        return Err(format!("{} bytes after the last sample", r.0.len()));
    }
    Ok(out)
}

fn kind_byte(k: Kind) -> u8 {
    match k {
        Kind::Gauge => 0,
        Kind::Delta => 1,
        Kind::Cumulative => 2,
    }
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

/// A record's strings, each once.
#[derive(Default)]
struct Interner<'a> {
    ids: HashMap<&'a str, u32>,
    list: Vec<&'a str>,
    bytes: usize,
}

impl<'a> Interner<'a> {
    fn id(&mut self, s: &'a str) -> u32 {
        *self.ids.entry(s).or_insert_with(|| {
            self.list.push(s);
            self.bytes += 4 + s.len();
            self.list.len() as u32 - 1
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!(
                "truncated: {n} bytes wanted, {} left",
                self.0.len()
            ));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    /// A count of items of at least `min_bytes` each: refused when the rest cannot hold them,
    /// so a damaged count allocates nothing.
    fn count(&mut self, min_bytes: usize) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_bytes) > self.0.len() {
            return Err(format!(
                "a count of {n} where {} bytes are left",
                self.0.len()
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Sample> {
        let meta = Metadata::new(vec![
            ("host.name".into(), "n1".into()),
            ("k".into(), "v".into()),
        ]);
        vec![
            Sample {
                unit: Name::new("B"),
                kind: Kind::Cumulative,
                metadata: meta.clone(),
                ..Sample::new("net.bytes", "eth0", 1.5e12, 1_700_000_000_123_456_789)
            },
            Sample {
                metadata: meta,
                ..Sample::new("net.bytes", "eth1", -0.0, -5)
            },
            Sample {
                kind: Kind::Delta,
                ..Sample::new("cpu", "", f64::NAN, i64::MAX)
            },
        ]
    }

    #[test]
    fn a_record_round_trips_every_field_and_stores_strings_once() {
        let input = samples();
        let bytes = encode(&input);
        let out = decode(&bytes).unwrap();
        assert_eq!(out.len(), 3);
        for (a, b) in input.iter().zip(&out) {
            assert_eq!(
                (
                    a.name,
                    &a.resource,
                    a.unit,
                    a.kind,
                    a.timestamp_ns,
                    &a.metadata
                ),
                (
                    b.name,
                    &b.resource,
                    b.unit,
                    b.kind,
                    b.timestamp_ns,
                    &b.metadata
                )
            );
            assert_eq!(a.value.to_bits(), b.value.to_bits());
        }
        assert_eq!(bytes.windows(9).filter(|w| w == b"host.name").count(), 1);
        assert!(decode(&encode(&[])).unwrap().is_empty());
    }

    #[test]
    fn a_damaged_record_is_refused_with_what_is_wrong() {
        let bytes = encode(&samples());
        for cut in [3, 9, bytes.len() - 1] {
            let e = decode(&bytes[..cut]).unwrap_err();
            assert!(
                e.contains("truncated") || e.contains("count") || e.contains("magic"),
                "{cut}: {e}"
            );
        }
        let mut huge = bytes.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            decode(&huge)
                .unwrap_err()
                .starts_with("a count of 4294967295")
        );
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(
            decode(&trailing).unwrap_err(),
            "1 bytes after the last sample"
        );
        // The last sample's kind byte is at a fixed distance from the end.
        let mut kind = bytes;
        let at = kind.len() - 17;
        kind[at] = 9;
        assert_eq!(decode(&kind).unwrap_err(), "sample 2: kind 9");
    }
}
