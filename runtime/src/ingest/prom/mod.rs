//! Prometheus remote write into samples: 1.0 (`prometheus.WriteRequest`) and 2.0
//! (`io.prometheus.write.v2.Request`, strings interned in a `symbols` table), snappy block
//! compressed. A series' `__name__` is the sample's name, its `instance` label the resource,
//! its other labels metadata; millisecond timestamps; the stale marker is dropped. The kind:
//! cumulative for a counter (2.0 series metadata, or 1.0 metadata, which also names the
//! `_bucket`/`_count`/`_sum` series of histograms and summaries), else gauge. 1.0 senders
//! send metadata in requests of their own (Prometheus every minute), so it is remembered
//! across requests ([`Memory`]), as are the heads of series recently sent.
//! Native histograms are not taken (counted in [`PromDecoded`]); exemplars are ignored.

use std::collections::HashMap;
use std::sync::Arc;

use super::build::{Build, Limits, MAX_LABELS, Nested, ReceiveError, check_label};
use super::pb::{DecodeError, Reader, for_each_packed};
use super::recent::{Lookup, Recent};
use crate::sample::{Kind, Metadata, Name, Pair, Sample};

/// Prometheus' stale marker: a NaN with this payload ends a series; it is no value.
pub const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;

/// Most entries of a 2.0 `symbols` table: the table is indexed by every label reference, so it
/// is held whole (16 bytes an entry); a body of empty strings would otherwise cost 8 times
/// its size.
pub const MAX_SYMBOLS: usize = 1 << 20;

/// Metric families remembered across 1.0 requests: at most this many (a family is a metric
/// name; a sender minting more is minting them from data).
pub const MAX_FAMILIES: usize = 100_000;

/// Longest family name remembered (Mimir's limit on a label name): a sender's metadata may
/// name anything up to the body's size, and what is remembered stays for the daemon's life,
/// so at most `MAX_FAMILIES` x this (100 MB) whatever senders send.
pub const MAX_FAMILY_NAME: usize = 1024;

/// Bytes of series heads remembered across requests ([`Recent`]): 64 MiB holds about 400,000
/// series of a typical Prometheus, whose scrapes send the same series every interval.
pub const SERIES_MEMORY: usize = 64 << 20;

/// What a 1.0 receiver remembers across requests.
///
/// - The types of metric families senders stated in metadata, by family name: Prometheus
///   sends them apart from the samples (`metadata_config.send_interval`, 1 m), so that
///   without memory a counter would arrive as a gauge. The last statement of a family wins.
/// - The heads of series recently sent, by their labels' bytes: a sender sends the same
///   series every scrape, and a hit skips the labels' UTF-8 and label checks, the name's
///   interning and the metadata set's lookup. Heads carry a kind read from the families'
///   types, so a change of those forgets them.
pub struct Memory {
    types: std::sync::RwLock<HashMap<String, u64>>,
    series: Recent<Head>,
}

impl Default for Memory {
    fn default() -> Memory {
        Memory {
            types: Default::default(),
            series: Recent::new(SERIES_MEMORY),
        }
    }
}

impl Memory {
    fn learn(&self, stated: &HashMap<&str, u64>) {
        if stated.is_empty() {
            return;
        }
        let mut types = crate::util::write(&self.types);
        let mut changed = false;
        for (&name, &t) in stated {
            if let Some(known) = types.get_mut(name) {
                changed |= *known != t;
                *known = t;
            } else if types.len() < MAX_FAMILIES && name.len() <= MAX_FAMILY_NAME {
                types.insert(name.to_string(), t);
                changed = true;
            }
        }
        if changed {
            // While `types` is held: no request reads kinds by the old types and then keeps
            // heads made with them.
            self.series.clear();
        }
    }
}

/// What every sample of a series shares.
#[derive(Clone)]
struct Head {
    name: Name,
    resource: Arc<str>,
    metadata: Metadata,
    kind: Kind,
    unit: Name,
}

/// The protocol version a request's `Content-Type` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    /// From `Content-Type`: `application/x-protobuf` (no `proto`, or
    /// `proto=prometheus.WriteRequest`) is 1.0, `proto=io.prometheus.write.v2.Request` 2.0;
    /// another type or message is 415, as the 2.0 spec says (a sender may then fall back).
    /// A missing header is read as 1.0, as Prometheus' own receiver does.
    pub fn from_content_type(ct: Option<&str>) -> Result<Version, ReceiveError> {
        let Some(ct) = ct else { return Ok(Version::V1) };
        let mut parts = ct.split(';').map(str::trim);
        let media = parts.next().unwrap_or_default();
        if !media.eq_ignore_ascii_case("application/x-protobuf") {
            return Err(ReceiveError::Unsupported(format!(
                "Content-Type {ct:?}: remote write is application/x-protobuf"
            )));
        }
        for p in parts {
            if let Some((k, v)) = p.split_once('=')
                && k.trim().eq_ignore_ascii_case("proto")
            {
                return match v.trim().trim_matches('"') {
                    "prometheus.WriteRequest" => Ok(Version::V1),
                    "io.prometheus.write.v2.Request" => Ok(Version::V2),
                    other => Err(ReceiveError::Unsupported(format!(
                        "proto={other:?}: prometheus.WriteRequest (1.0) and \
                         io.prometheus.write.v2.Request (2.0) are taken"
                    ))),
                };
            }
        }
        Ok(Version::V1)
    }
}

/// A decoded request.
#[derive(Debug, Default)]
pub struct PromDecoded {
    pub samples: Vec<Sample>,
    /// Stale markers dropped.
    pub stale: usize,
    /// Native histogram samples not taken.
    pub histograms: usize,
    /// Exemplars ignored.
    pub exemplars: usize,
}

/// Snappy block decompression with the declared length checked first: a body of a few
/// bytes can declare gigabytes.
pub fn unsnappy(body: &[u8], max: usize) -> Result<Vec<u8>, ReceiveError> {
    let len = snap::raw::decompress_len(body)
        .map_err(|e| DecodeError::new(format!("snappy body: {e}")))?;
    if len > max {
        return Err(ReceiveError::TooLarge(format!(
            "the snappy body declares {len} bytes uncompressed, past [store] max-body-size \
             ({max} bytes)"
        )));
    }
    snap::raw::Decoder::new()
        .decompress_vec(body)
        .map_err(|e| DecodeError::new(format!("snappy body: {e}")).into())
}

/// Decodes a snappy-compressed request of `version`, on its own.
pub fn decode(body: &[u8], version: Version, limits: Limits) -> Result<PromDecoded, ReceiveError> {
    decode_with(body, version, limits, &Memory::default())
}

/// Decodes a request with what earlier 1.0 requests taught `known` (and teaches it this
/// one's).
pub fn decode_with(
    body: &[u8],
    version: Version,
    limits: Limits,
    known: &Memory,
) -> Result<PromDecoded, ReceiveError> {
    let raw = unsnappy(body, limits.max_body)?;
    match version {
        Version::V1 => decode_v1(&raw, limits, known),
        Version::V2 => decode_v2(&raw, limits),
    }
}

/// A series' labels as read: name, instance, the rest; and the previous series' rest,
/// resource and metadata, which the next series of the same host reuses.
struct Labels<'a> {
    name: Option<&'a str>,
    instance: &'a str,
    rest: Vec<(&'a str, &'a str)>,
    /// The last series' `instance` and `rest`, and what they became: consecutive series
    /// mostly differ in `__name__` alone (Prometheus sends them sorted by labels), and
    /// comparing the text is cheaper than interning it again.
    prev: Option<(&'a str, Arc<str>, Metadata)>,
    prev_rest: Vec<(&'a str, &'a str)>,
    /// Each series' labels and samples as bytes (reused: most series have one sample).
    raw: Vec<&'a [u8]>,
    samples: Vec<&'a [u8]>,
}

impl<'a> Labels<'a> {
    fn new() -> Labels<'a> {
        Labels {
            name: None,
            instance: "",
            rest: Vec::new(),
            prev: None,
            prev_rest: Vec::new(),
            raw: Vec::new(),
            samples: Vec::new(),
        }
    }

    fn clear(&mut self) {
        self.name = None;
        self.instance = "";
        self.rest.clear();
    }

    fn add(&mut self, k: &'a str, v: &'a str, i: usize) -> Result<(), DecodeError> {
        let at = |e: DecodeError| e.at("labels", Some(i));
        check_label(k, "a label name").map_err(at)?;
        check_label(v, "a label value").map_err(at)?;
        if i >= MAX_LABELS {
            return Err(DecodeError::new(format!(
                "more than {MAX_LABELS} labels in one series"
            )));
        }
        match k {
            "__name__" => self.name = Some(v),
            "instance" => self.instance = v,
            "" => return Err(at(DecodeError::new("an empty label name"))),
            _ => self.rest.push((k, v)),
        }
        Ok(())
    }

    /// The name, resource and metadata every sample of the series shares.
    fn head(
        &mut self,
        b: &mut Build<'a>,
    ) -> Result<(Name, Arc<str>, Metadata, &'a str), DecodeError> {
        let name = self
            .name
            .ok_or_else(|| DecodeError::new("no __name__ label"))?;
        let n = b.name("__name__", name).map_err(|e| e.at("labels", None))?;
        if let Some((instance, resource, metadata)) = &self.prev
            && *instance == self.instance
            && self.prev_rest == self.rest
        {
            return Ok((n, resource.clone(), metadata.clone(), name));
        }
        let pairs: Vec<Pair> = self
            .rest
            .iter()
            .map(|&(k, v)| (b.arc(k), b.arc(v)))
            .collect();
        let (resource, metadata) = (b.arc(self.instance), b.metadata(pairs));
        self.prev = Some((self.instance, resource.clone(), metadata.clone()));
        self.prev_rest.clear();
        self.prev_rest.extend_from_slice(&self.rest);
        Ok((n, resource, metadata, name))
    }
}

/// A Prometheus metric type, as both versions number it.
fn is_counter(t: u64) -> bool {
    t == 1
}

/// Histogram, gauge histogram or summary: their `_bucket`, `_count` and `_sum` series count.
fn is_aggregate(t: u64) -> bool {
    matches!(t, 3..=5)
}

/// The 1.0 metadata a request's series are read with: the request's own, then what earlier
/// requests stated.
struct Stated<'r, 'k> {
    here: HashMap<&'r str, u64>,
    known: &'k HashMap<String, u64>,
}

impl Stated<'_, '_> {
    fn get(&self, family: &str) -> Option<u64> {
        self.here
            .get(family)
            .or_else(|| self.known.get(family))
            .copied()
    }
}

/// The kind of series `name` by the 1.0 metadata of its family.
fn kind_v1(families: &Stated, name: &str) -> Kind {
    if families.get(name).is_some_and(is_counter) {
        return Kind::Cumulative;
    }
    for suffix in ["_bucket", "_count", "_sum"] {
        if let Some(base) = name.strip_suffix(suffix)
            && families.get(base).is_some_and(is_aggregate)
        {
            return Kind::Cumulative;
        }
    }
    Kind::Gauge
}

fn decode_v1(raw: &[u8], limits: Limits, known: &Memory) -> Result<PromDecoded, ReceiveError> {
    // Metadata (field 3) may come after the series: read it first.
    let mut families: HashMap<&str, u64> = HashMap::new();
    let mut r = Reader::new(raw);
    let mut mi = 0;
    while let Some((f, v)) = r.next_field()? {
        if f != 3 {
            continue;
        }
        let at = |e: DecodeError| e.at("metadata", Some(mi));
        let (mut kind, mut family) = (0, "");
        let mut m = Reader::new(v.bytes("metadata").map_err(at)?);
        while let Some((f, v)) = m.next_field().map_err(at)? {
            match f {
                1 => kind = v.varint("type").map_err(at)?,
                2 => family = v.str("metric_family_name").map_err(at)?,
                _ => {}
            }
        }
        if families.len() < limits.max_samples {
            families.insert(family, kind);
        }
        mi += 1;
    }
    known.learn(&families);
    let types = crate::util::read(&known.types);
    // A request that states metadata of its own reads kinds from it (some of it may be past
    // what is remembered): its series are decoded in full.
    let mut recent = families.is_empty().then(|| known.series.lookup());
    let families = Stated {
        here: families,
        known: &types,
    };
    let out = each_series(raw, limits, 1, |ts, labels, b, out| {
        let mut s = Series {
            labels,
            families: &families,
            recent: recent.as_mut(),
        };
        s.decode(ts, b, out)
    })?;
    // Kept while `types` is read: the heads' kinds are those types'.
    if let Some(recent) = recent {
        recent.keep();
    }
    Ok(out)
}

/// Decodes each series of `raw` (field `field`, `timeseries`) with `series`, naming a series
/// by its index in an error: the request's samples.
fn each_series<'a>(
    raw: &'a [u8],
    limits: Limits,
    field: u32,
    mut series: impl FnMut(
        &'a [u8],
        &mut Labels<'a>,
        &mut Build<'a>,
        &mut PromDecoded,
    ) -> Result<(), Nested>,
) -> Result<PromDecoded, ReceiveError> {
    let mut out = PromDecoded::default();
    let mut b = Build::new(limits, raw.len(), 32);
    let mut labels = Labels::new();
    let mut r = Reader::new(raw);
    let mut si = 0;
    while let Some((f, v)) = r.next_field()? {
        if f != field {
            continue;
        }
        let ts = v.bytes("timeseries")?;
        series(ts, &mut labels, &mut b, &mut out).map_err(|e| e.at("timeseries", Some(si)))?;
        si += 1;
    }
    out.samples = b.samples;
    Ok(out)
}

/// What a 1.0 series is read with.
struct Series<'l, 'a, 'f, 'r> {
    labels: &'l mut Labels<'a>,
    families: &'f Stated<'f, 'f>,
    recent: Option<&'l mut Lookup<'r, Head>>,
}

impl<'a> Series<'_, 'a, '_, '_> {
    /// `Err` keeps the two kinds apart: a malformed series (400) or too many samples (413).
    fn decode(
        &mut self,
        ts: &'a [u8],
        b: &mut Build<'a>,
        out: &mut PromDecoded,
    ) -> Result<(), Nested> {
        let mut raw = std::mem::take(&mut self.labels.raw);
        let mut samples = std::mem::take(&mut self.labels.samples);
        raw.clear();
        samples.clear();
        // The labels' bytes: the key of the series' head among those recently sent.
        let span = Reader::new(ts).fields_spanning(1, |f, v| {
            match f {
                1 => raw.push(
                    v.bytes("labels")
                        .map_err(|e| e.at("labels", Some(raw.len())))?,
                ),
                2 => samples.push(v.bytes("samples")?),
                3 => out.exemplars += 1,
                4 => out.histograms += 1,
                _ => {}
            }
            Ok::<_, Nested>(())
        })?;
        let key = span.bytes(ts);
        if samples.is_empty() {
            // Nothing to name: the labels are checked, no head is made.
            self.check_labels(&raw)?;
            self.labels.raw = raw;
            self.labels.samples = samples;
            return Ok(());
        }
        let known = match (key, self.recent.as_deref_mut()) {
            (Some(k), Some(recent)) => recent.get(k),
            _ => None,
        };
        let read;
        let head = match known {
            Some(h) => h,
            None => {
                self.check_labels(&raw)?;
                read = self.head(key, b)?;
                &read
            }
        };
        for (i, &s) in samples.iter().enumerate() {
            let (value, ms) = sample(s).map_err(|e| e.at("samples", Some(i)))?;
            emit(b, out, head, value, ms).map_err(|e| e.within("samples", Some(i)))?;
        }
        self.labels.raw = raw;
        self.labels.samples = samples;
        Ok(())
    }

    /// The series' labels from their bytes, checked, into `self.labels`.
    fn check_labels(&mut self, raw: &[&'a [u8]]) -> Result<(), Nested> {
        let labels = &mut *self.labels;
        labels.clear();
        for (li, &l) in raw.iter().enumerate() {
            let at = |e: DecodeError| e.at("labels", Some(li));
            let (mut k, mut val) = ("", "");
            let mut l = Reader::new(l);
            while let Some((f, v)) = l.next_field().map_err(at)? {
                match f {
                    1 => k = v.str("name").map_err(at)?,
                    2 => val = v.str("value").map_err(at)?,
                    _ => {}
                }
            }
            labels.add(k, val, li)?;
        }
        Ok(())
    }

    /// The head the checked labels make, learned under `key` (the labels' bytes).
    fn head(&mut self, key: Option<&[u8]>, b: &mut Build<'a>) -> Result<Head, Nested> {
        let (name, resource, metadata, text) = self.labels.head(b)?;
        let head = Head {
            name,
            resource,
            metadata,
            kind: kind_v1(self.families, text),
            unit: Name::EMPTY,
        };
        if let (Some(k), Some(recent)) = (key, self.recent.as_deref_mut()) {
            recent.learn(k, &head);
        }
        Ok(head)
    }
}

/// A `Sample` message: value and millisecond timestamp.
#[inline]
fn sample(s: &[u8]) -> Result<(f64, i64), DecodeError> {
    if let Some(fast) = sample_as_sent(s) {
        return Ok(fast);
    }
    let (mut value, mut ms) = (0.0, 0i64);
    let mut r = Reader::new(s);
    while let Some((f, v)) = r.next_field()? {
        match f {
            1 => value = v.double("value")?,
            2 => ms = v.varint("timestamp")? as i64,
            _ => {}
        }
    }
    Ok((value, ms))
}

/// A `Sample` as every sender writes it: the value's tag and 8 bytes, then the timestamp's
/// tag and a varint of 6 bytes (milliseconds from 1971 to 2109).
#[inline]
fn sample_as_sent(s: &[u8]) -> Option<(f64, i64)> {
    let s: &[u8; 16] = s.try_into().ok()?;
    let (value, ts) = (&s[1..9], &s[10..]);
    if s[0] != 0x09 || s[9] != 0x10 || ts[..5].iter().any(|&b| b < 0x80) || ts[5] >= 0x80 {
        return None;
    }
    let ms = ts
        .iter()
        .enumerate()
        .fold(0u64, |acc, (i, &b)| acc | u64::from(b & 0x7f) << (7 * i));
    Some((f64::from_le_bytes(value.try_into().ok()?), ms as i64))
}

#[inline]
fn emit(
    b: &mut Build,
    out: &mut PromDecoded,
    head: &Head,
    value: f64,
    ms: i64,
) -> Result<(), Nested> {
    if value.to_bits() == STALE_NAN {
        out.stale += 1;
        return Ok(());
    }
    let ns = ms
        .checked_mul(1_000_000)
        .ok_or_else(|| DecodeError::new(format!("timestamp {ms} ms is out of range")))?;
    b.push(Sample {
        name: head.name,
        resource: head.resource.clone(),
        unit: head.unit,
        kind: head.kind,
        value,
        timestamp_ns: ns,
        metadata: head.metadata.clone(),
    })?;
    Ok(())
}

fn decode_v2(raw: &[u8], limits: Limits) -> Result<PromDecoded, ReceiveError> {
    // Symbols (field 4) first: series refer to them wherever they stand.
    let mut symbols: Vec<&str> = Vec::new();
    let mut r = Reader::new(raw);
    while let Some((f, v)) = r.next_field()? {
        if f == 4 {
            if symbols.len() >= MAX_SYMBOLS {
                return Err(ReceiveError::TooLarge(format!(
                    "more than {MAX_SYMBOLS} symbols in one request"
                )));
            }
            let s = v
                .str("symbols")
                .map_err(|e| DecodeError::new(e.what).at("symbols", Some(symbols.len())))?;
            symbols.push(s);
        }
    }
    each_series(raw, limits, 5, |ts, labels, b, out| {
        series_v2(ts, &symbols, labels, b, out)
    })
}

fn series_v2<'a>(
    ts: &'a [u8],
    symbols: &[&'a str],
    labels: &mut Labels<'a>,
    b: &mut Build<'a>,
    out: &mut PromDecoded,
) -> Result<(), Nested> {
    labels.clear();
    let symbol = |i: u64| -> Result<&'a str, DecodeError> {
        symbols.get(i as usize).copied().ok_or_else(|| {
            DecodeError::new(format!(
                "symbol {i} past the table's {} entries",
                symbols.len()
            ))
        })
    };
    let mut r = Reader::new(ts);
    let mut refs = Vec::new();
    let (mut samples, mut kind, mut unit) = (Vec::new(), Kind::Gauge, "");
    while let Some((f, v)) = r.next_field()? {
        match f {
            1 => for_each_packed(v, "labels_refs", false, |x| {
                if refs.len() >= 2 * MAX_LABELS {
                    return Err(DecodeError::new(format!(
                        "more than {MAX_LABELS} labels in one series"
                    )));
                }
                refs.push(x);
                Ok(())
            })?,
            2 => samples.push(v.bytes("samples")?),
            3 => out.histograms += 1,
            4 => out.exemplars += 1,
            5 => {
                let at = |e: DecodeError| e.at("metadata", None);
                let mut m = Reader::new(v.bytes("metadata")?);
                while let Some((f, v)) = m.next_field().map_err(at)? {
                    match f {
                        1 if is_counter(v.varint("type").map_err(at)?) => kind = Kind::Cumulative,
                        4 => unit = symbol(v.varint("unit_ref").map_err(at)?).map_err(at)?,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if refs.len() % 2 != 0 {
        return Err(
            DecodeError::new(format!("an odd number ({}) of references", refs.len()))
                .at("labels_refs", None)
                .into(),
        );
    }
    for (i, pair) in refs.chunks_exact(2).enumerate() {
        let at = |e: DecodeError| e.at("labels_refs", Some(2 * i));
        labels.add(
            symbol(pair[0]).map_err(at)?,
            symbol(pair[1]).map_err(at)?,
            i,
        )?;
    }
    if samples.is_empty() {
        return Ok(());
    }
    let (name, resource, metadata, _) = labels.head(b)?;
    let unit = b.name("unit", unit).map_err(|e| e.at("metadata", None))?;
    let head = Head {
        name,
        resource,
        metadata,
        kind,
        unit,
    };
    for (i, s) in samples.into_iter().enumerate() {
        let (value, ms) = sample(s).map_err(|e| e.at("samples", Some(i)))?;
        emit(b, out, &head, value, ms).map_err(|e| e.within("samples", Some(i)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
