//! What a forwarding sink puts on the wire, encoded once when a batch is queued (the queue
//! holds the bytes the destination receives, so a retry re-sends them unchanged):
//! - line protocol, as cc-metric-store's `/api/write` and its NATS subscriptions read it, with
//!   the tags that put a sample at the level this node's own store uses ([`Level`]);
//! - Prometheus remote write 1.0: a `WriteRequest` protobuf, snappy block-compressed.
//!
//! A value that neither format can carry (NaN, ±∞: line protocol has no literal for them, and
//! Prometheus reads NaN as a stale marker) is left out and counted by the caller.

use std::io::Write;

use crate::sample::{Component, Level, Sample, sanitize_metric_name, split_id};

/// What the encoders need besides the samples.
pub struct Context<'a> {
    pub default_cluster: &'a str,
    pub hostname: &'a str,
}

/// A batch's encoding and what it holds.
pub struct Encoded {
    pub bytes: Vec<u8>,
    /// Samples in `bytes`.
    pub samples: u32,
    /// Samples left out because their value cannot be encoded.
    pub unencodable: u32,
    /// The oldest sample's timestamp (ns).
    pub oldest_ns: i64,
}

/// Line protocol: `name,cluster=..,hostname=..[,type=..,type-id=..[,subtype=..,stype-id=..]]
/// value=V SECONDS`. A resource-only component (`cpu0`) goes as `type=cpu,type-id=0` where it
/// ends in digits and as `type=lo` alone otherwise; both name the same level at the receiver.
pub fn line_protocol(samples: &[Sample], cx: &Context) -> Encoded {
    let mut out = Vec::with_capacity(samples.len() * 64);
    let mut enc = Encoded::empty();
    let mut num = ryu::Buffer::new();
    let mut int = itoa::Buffer::new();
    for s in samples {
        if !s.value.is_finite() {
            enc.unencodable += 1;
            continue;
        }
        enc.count(s);
        escape(&mut out, &s.name, b", ");
        let level = Level::of(s, cx.default_cluster, cx.hostname);
        tag(&mut out, "cluster", level.cluster);
        tag(&mut out, "hostname", level.host);
        match &level.component {
            Some(Component::Tagged { kind, id }) => {
                tag(&mut out, "type", kind);
                tag(&mut out, "type-id", id);
                if let Some((st, sid)) = level.sub {
                    tag(&mut out, "subtype", st);
                    tag(&mut out, "stype-id", sid);
                }
            }
            Some(Component::Resource(r)) => match split_id(r) {
                (kind, id) if !kind.is_empty() && !id.is_empty() => {
                    tag(&mut out, "type", kind);
                    tag(&mut out, "type-id", id);
                }
                _ => tag(&mut out, "type", r),
            },
            None => {}
        }
        out.extend_from_slice(b" value=");
        out.extend_from_slice(num.format_finite(s.value).as_bytes());
        out.push(b' ');
        out.extend_from_slice(
            int.format(s.timestamp_ns.div_euclid(1_000_000_000))
                .as_bytes(),
        );
        out.push(b'\n');
    }
    enc.bytes = out;
    enc
}

fn tag(out: &mut Vec<u8>, key: &str, value: &str) {
    out.push(b',');
    out.extend_from_slice(key.as_bytes());
    out.push(b'=');
    escape(out, value, b",= ");
}

/// Line protocol's escapes: a backslash before each of `special` and before a backslash
/// (receivers read `\\` as one backslash, and a lone one at the end of a name would escape the
/// separator after it); newlines, which no escape covers, become spaces (escaped) rather than
/// ending the line.
fn escape(out: &mut Vec<u8>, text: &str, special: &[u8]) {
    for &b in text.as_bytes() {
        if b == b'\\' || special.contains(&b) {
            out.push(b'\\');
            out.push(b);
        } else if b == b'\n' || b == b'\r' {
            out.extend_from_slice(b"\\ ");
        } else {
            out.push(b);
        }
    }
}

/// gzip at a fast level: line protocol of regular series compresses ~8-10x even so, and the
/// sink's thread must keep up with ingest (level 6 costs ~3x the CPU for ~10 % fewer bytes).
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 6),
        flate2::Compression::new(GZIP_LEVEL),
    );
    // Writing into a Vec cannot fail.
    let _ = z.write_all(bytes);
    z.finish().unwrap_or_default()
}

const GZIP_LEVEL: u32 = 1;

/// Prometheus remote write 1.0: one `TimeSeries` per label set, labels sorted by name,
/// `__name__` the metric's name made valid, `instance` the resource, every metadata pair a
/// label (its key made a valid label name; empty values left out, as the spec asks); samples
/// of a series in time order, timestamps in ms; snappy block format.
pub fn remote_write(samples: &[Sample]) -> Encoded {
    use std::collections::HashMap;
    let mut enc = Encoded::empty();
    let mut series: HashMap<Labels, Vec<(f64, i64)>> = HashMap::new();
    let mut order = Vec::new();
    for s in samples {
        if !s.value.is_finite() {
            enc.unencodable += 1;
            continue;
        }
        enc.count(s);
        let mut labels = vec![("__name__".to_string(), sanitize_metric_name("", &s.name))];
        if !s.resource.is_empty() {
            labels.push(("instance".into(), s.resource.to_string()));
        }
        for (k, v) in s.metadata.iter() {
            let k = label_name(k);
            if !v.is_empty() && !labels.iter().any(|(x, _)| *x == k) && !k.starts_with("__") {
                labels.push((k, v.to_string()));
            }
        }
        labels.sort();
        let points = series.entry(labels).or_insert_with_key(|k| {
            order.push(k.clone());
            Vec::new()
        });
        points.push((s.value, s.timestamp_ns.div_euclid(1_000_000)));
    }
    let mut req = Vec::with_capacity(samples.len() * 48);
    let mut ts = Vec::new();
    for labels in order {
        let mut points = series.remove(&labels).unwrap_or_default();
        points.sort_by_key(|p| p.1);
        ts.clear();
        for (k, v) in &labels {
            let mut label = Vec::with_capacity(k.len() + v.len() + 4);
            pb_bytes(&mut label, 1, k.as_bytes());
            pb_bytes(&mut label, 2, v.as_bytes());
            pb_bytes(&mut ts, 1, &label);
        }
        for (v, t) in points {
            let mut sample = Vec::with_capacity(20);
            pb_key(&mut sample, 1, 1);
            sample.extend_from_slice(&v.to_le_bytes());
            pb_key(&mut sample, 2, 0);
            pb_varint(&mut sample, t as u64);
            pb_bytes(&mut ts, 2, &sample);
        }
        pb_bytes(&mut req, 1, &ts);
    }
    enc.bytes = snap::raw::Encoder::new()
        .compress_vec(&req)
        .unwrap_or_default();
    enc
}

/// A valid label name for a metadata key: `[a-zA-Z_][a-zA-Z0-9_]*`, as the remote-write spec
/// requires. A metric name may hold `:`, a label name may not: receivers that validate (Mimir,
/// Cortex, later Prometheus) refuse the whole request otherwise.
fn label_name(key: &str) -> String {
    sanitize_metric_name("", key).replace(':', "_")
}

/// A series' labels, sorted by name.
type Labels = Vec<(String, String)>;

fn pb_key(out: &mut Vec<u8>, field: u32, wire: u8) {
    pb_varint(out, u64::from(field << 3 | u32::from(wire)));
}

fn pb_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn pb_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    pb_key(out, field, 2);
    pb_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

impl Encoded {
    fn empty() -> Encoded {
        Encoded {
            bytes: Vec::new(),
            samples: 0,
            unencodable: 0,
            oldest_ns: i64::MAX,
        }
    }

    fn count(&mut self, s: &Sample) {
        self.samples += 1;
        self.oldest_ns = self.oldest_ns.min(s.timestamp_ns);
    }
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
