//! What a forwarding sink puts on the wire, encoded once when a batch is queued (the queue
//! holds the bytes the destination receives, so a retry re-sends them unchanged):
//! - line protocol, as cc-metric-store's `/api/write` and its NATS subscriptions read it, with
//!   the tags that put a sample at the level this node's own store uses ([`Level`]);
//! - Prometheus remote write 1.0: a `WriteRequest` protobuf, snappy block-compressed.
//!
//! A value that neither format can carry (NaN, ±∞: line protocol has no literal for them, and
//! Prometheus reads NaN as a stale marker), or a name line protocol cannot carry (one ending in
//! a backslash, or with a control character), is left out and counted by the caller.

use std::io::Write;

use crate::sample::{Component, Level, Sample, sanitize_metric_name, split_id};
use crate::util::{pb_bytes, pb_key, pb_varint};

/// What the encoders need besides the samples.
pub struct Context<'a> {
    pub default_cluster: &'a str,
    pub hostname: &'a str,
    /// Metadata keys sent as tags too (`meta-as-tags`).
    pub meta_as_tags: &'a [String],
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

/// Line protocol: `name,cluster=..,hostname=..[,type=..,type-id=..[,stype=..,stype-id=..]]
/// [,KEY=.. for each `meta_as_tags` key the sample has] value=V SECONDS`. A resource-only component (`cpu0`) goes as `type=cpu,type-id=0` where it
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
        let start = out.len();
        let mut ok = escape(&mut out, &s.name, b", ");
        let level = Level::of(s, cx.default_cluster, cx.hostname);
        ok &= tag(&mut out, "cluster", level.cluster);
        ok &= tag(&mut out, "hostname", level.host);
        match &level.component {
            Some(Component::Tagged { kind, id }) => {
                ok &= tag(&mut out, "type", kind);
                ok &= tag(&mut out, "type-id", id);
                if let Some((st, sid)) = level.sub {
                    // `stype`: cc-metric-store (cc-backend's metricstore) reads no `subtype`.
                    ok &= tag(&mut out, "stype", st);
                    ok &= tag(&mut out, "stype-id", sid);
                }
            }
            Some(Component::Resource(r)) => match split_id(r) {
                (kind, id) if !kind.is_empty() && !id.is_empty() => {
                    ok &= tag(&mut out, "type", kind);
                    ok &= tag(&mut out, "type-id", id);
                }
                _ => ok &= tag(&mut out, "type", r),
            },
            None => {}
        }
        // The level's own tags are written once, from the level; a node-level sample's `type`
        // (`node`) and `stype` (netstat's `network`) name no level, and go as plain tags when
        // asked.
        let (component, sub) = (level.component.is_some(), level.sub.is_some());
        for key in cx.meta_as_tags {
            let own = matches!(key.as_str(), "cluster" | "hostname" | "host")
                || (component && matches!(key.as_str(), "type" | "type-id"))
                || (sub && matches!(key.as_str(), "stype" | "subtype" | "stype-id"));
            if let Some(v) = s.metadata.get(key).filter(|_| !own) {
                ok &= tag(&mut out, key, v);
            }
        }
        if !ok {
            // One sample a receiver would refuse must not cost its batch (a 400 dead-letters
            // the whole record): it is left out and counted.
            out.truncate(start);
            enc.unencodable += 1;
            continue;
        }
        enc.count(s);
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

fn tag(out: &mut Vec<u8>, key: &str, value: &str) -> bool {
    out.push(b',');
    out.extend_from_slice(key.as_bytes());
    out.push(b'=');
    escape(out, value, b",= ")
}

/// Line protocol's escapes as influxdata/line-protocol v2 (cc-metric-store's decoder, and
/// wasmon's) reads them: a backslash before each of `special`. Its scanner takes a backslash
/// and the byte after it as a pair whatever that byte is, and only `\` before a special byte
/// unescapes, so other backslashes stand for themselves, except where a pair would swallow a
/// separator (a backslash at the end, or before a byte that had to be escaped). `false` when
/// `text` does not read back as itself, or holds a control character (refused in names).
fn escape(out: &mut Vec<u8>, text: &str, special: &[u8]) -> bool {
    let start = out.len();
    for &b in text.as_bytes() {
        if special.contains(&b) {
            out.push(b'\\');
        }
        out.push(b);
    }
    if text.is_empty() || text.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    !text.contains('\\') || reads_back(&out[start..], special).as_deref() == Some(text.as_bytes())
}

/// What the v2 decoder makes of an escaped token (`None`: it would end the token early).
fn reads_back(token: &[u8], special: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(token.len());
    let mut i = 0;
    while i < token.len() {
        match token[i] {
            b'\\' if i + 1 == token.len() => return None,
            b'\\' if special.contains(&token[i + 1]) => {
                out.push(token[i + 1]);
                i += 2;
            }
            b'\\' => {
                out.extend_from_slice(&token[i..i + 2]);
                i += 2;
            }
            b if special.contains(&b) => return None,
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(out)
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
mod tests;
