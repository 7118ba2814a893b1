//! Line protocol → store, as cc-metric-store's `decodeLine` does it: the measurement is the
//! metric, tags `cluster`, `hostname` (alias `host`), `type`+`type-id`, `stype`+`stype-id`
//! (aliases `subtype`, `subtype-id`) select the level, `type=node` means the host level,
//! other tags are ignored; the numeric field `value` is the sample; timestamps in s, ms, us or
//! ns are recognised by magnitude; a missing timestamp means now. Shared by HTTP and NATS.

use std::borrow::Cow;
use std::sync::Arc;

use crate::lineproto::{FieldValue, Line, Text, for_each_line};
use crate::store::{
    GroupWrite, Level, LevelCacheGuard, MetricInfo, Pending, Queued, Store, StoreError,
};
use crate::util::eq_bytes;

/// A rejected line of a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: usize,
    pub reason: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// What happened to a body: lines stored, lines rejected, and the WAL sequence number that
/// covers the stored ones (wait on it with [`Store::wait_durable`] before acknowledging).
#[derive(Debug, Default)]
pub struct IngestOutcome {
    pub stored: usize,
    pub errors: Vec<LineError>,
    pub wal_seq: u64,
}

enum Tag {
    Cluster,
    Host,
    Type,
    TypeId,
    SubType,
    SubTypeId,
    Other,
}

/// Classifies a tag key. Dispatching on the length first lets the comparisons compile to
/// fixed-size loads instead of a `memcmp` call per candidate (measurable at ~6 tags a line).
#[inline]
fn tag_key(k: &[u8]) -> Tag {
    match k.len() {
        4 if k == b"host" => Tag::Host,
        4 if k == b"type" => Tag::Type,
        5 if k == b"stype" => Tag::SubType,
        7 if k == b"cluster" => Tag::Cluster,
        7 if k == b"type-id" => Tag::TypeId,
        7 if k == b"subtype" => Tag::SubType,
        8 if k == b"hostname" => Tag::Host,
        8 if k == b"stype-id" => Tag::SubTypeId,
        10 if k == b"subtype-id" => Tag::SubTypeId,
        _ => Tag::Other,
    }
}

/// Converts a timestamp of unknown unit to seconds by its magnitude (seconds are < 1e11, i.e.
/// before the year 5138; ms < 1e14; us < 1e17; else ns).
pub fn timestamp_secs(t: i64) -> i64 {
    let a = t.unsigned_abs();
    if a < 100_000_000_000 {
        t
    } else if a < 100_000_000_000_000 {
        t.div_euclid(1_000)
    } else if a < 100_000_000_000_000_000 {
        t.div_euclid(1_000_000)
    } else {
        t.div_euclid(1_000_000_000)
    }
}

/// Parses `body` and writes every valid line into `store`; one WAL append for the body.
/// `default_cluster` applies to lines without a `cluster` tag; `now` (seconds) to lines
/// without a timestamp. Each bad line is reported and skipped; the others are stored.
pub fn ingest(
    store: &Store,
    body: &[u8],
    default_cluster: Option<&str>,
    now: i64,
) -> IngestOutcome {
    let mut st = Ingest {
        store,
        default_cluster,
        now,
        errors: Vec::new(),
        // Lines are rarely shorter than 50 bytes.
        write: store.group_write(body.len() / 50),
        metrics: MetricCache::default(),
        levels: store.level_cache(default_cluster.unwrap_or_default()),
        last_tags: None,
        name: String::new(),
    };
    for_each_line(body, |res| match res {
        Ok(line) => st.line(line),
        Err(e) => st.errors.push(LineError {
            line: e.line,
            reason: format!("column {}: {}", e.column, e.kind),
        }),
    });
    let written = st.write.finish(&*st.levels);
    let mut errors = st.errors;
    errors.extend(written.refused.into_iter().map(|(item, e)| LineError {
        line: item.line,
        reason: e.to_string(),
    }));
    errors.sort_by_key(|e| e.line);
    let mut out = IngestOutcome {
        stored: written.stored,
        errors,
        wal_seq: 0,
    };
    match written.wal {
        Ok(seq) => out.wal_seq = seq,
        Err(e) => out.errors.push(LineError {
            line: 0,
            reason: e.to_string(),
        }),
    }
    out
}

/// A line resolved to a sample of the current target level.
#[derive(Clone)]
struct Item<'a> {
    line: usize,
    name: Cow<'a, str>,
    metric: MetricInfo,
    ts: i64,
    value: f64,
}

impl Queued for Item<'_> {
    #[inline(always)]
    fn pending(&self) -> Pending<'_> {
        Pending {
            name: &self.name,
            metric: self.metric,
            ts: self.ts,
            value: self.value,
        }
    }
}

/// The per-body state of [`ingest`]. Lines from cc-metric-collector come grouped by host
/// and component, and the same tag sections come back every interval: a line's tag section
/// (as raw text: equal text means equal tags) is looked up in the store's level cache, most
/// lines repeat the previous line's and skip even that, and consecutive samples of one level
/// go to the store's grouped write (one lock of the level per group). No allocation per line.
struct Ingest<'a, 's> {
    store: &'s Store,
    default_cluster: Option<&'s str>,
    now: i64,
    /// Lines refused before the store saw them.
    errors: Vec<LineError>,
    /// Samples queued by level, a level named by its handle in `levels`.
    write: GroupWrite<'s, u32, Item<'a>>,
    metrics: MetricCache<'a>,
    levels: LevelCacheGuard<'s>,
    /// The previous line's tag section and its level.
    last_tags: Option<(&'a str, u32)>,
    /// Scratch for component names (type + type-id), reused across lines.
    name: String,
}

impl<'a> Ingest<'a, '_> {
    #[inline]
    fn line(&mut self, line: &Line<'a>) {
        match self.resolve(line) {
            Ok((target, item)) => self.write.push(&*self.levels, &target, item),
            Err(reason) => self.errors.push(LineError {
                line: line.line,
                reason,
            }),
        }
    }

    #[inline]
    fn resolve(&mut self, line: &Line<'a>) -> Result<(u32, Item<'a>), String> {
        let tags_raw = line.tags_raw();
        if let Some((t, target)) = self.last_tags
            && eq_bytes(t.as_bytes(), tags_raw.as_bytes())
        {
            return Ok((target, self.sample(line)?));
        }
        self.last_tags = None;
        let r = match self.levels.get(tags_raw) {
            Some(target) => (target, self.sample(line)?),
            None => {
                let (level, item) = self.resolve_tags(line)?;
                // Queued items refer to a handle that an insert may invalidate.
                self.write.flush(&*self.levels);
                (self.levels.insert(tags_raw, level), item)
            }
        };
        self.last_tags = Some((tags_raw, r.0));
        Ok(r)
    }

    /// The value, timestamp and metric of a line.
    #[inline(always)]
    fn sample(&mut self, line: &Line<'a>) -> Result<Item<'a>, String> {
        let value = match line.sole_field("value") {
            Ok(v) => v.as_f64().ok_or(match v {
                FieldValue::Bool(_) => "field 'value' is a bool, not a number",
                _ => "field 'value' is a string, not a number",
            })?,
            Err(other) => {
                return Err(format!(
                    "unknown field {:?}: cc-metric-store takes one field, 'value'",
                    other.as_str()
                ));
            }
        };
        let ts = line.timestamp.map_or(self.now, timestamp_secs);
        let (name, metric) = self
            .metrics
            .get(self.store, line.measurement)
            .map_err(|e| e.to_string())?;
        Ok(Item {
            line: line.line,
            name,
            metric,
            ts,
            value,
        })
    }

    /// Resolves a tag section not in the cache: checks the tags, then finds (or creates) the
    /// level they name.
    #[cold]
    fn resolve_tags(&mut self, line: &Line<'a>) -> Result<(Arc<Level>, Item<'a>), String> {
        let mut tags: [Option<Text<'a>>; 6] = [None; 6];
        for (k, v) in line.tags() {
            let i = match tag_key(k.raw().as_bytes()) {
                Tag::Cluster => 0,
                Tag::Host => 1,
                Tag::Type => 2,
                Tag::TypeId => 3,
                Tag::SubType => 4,
                Tag::SubTypeId => 5,
                Tag::Other => continue, // e.g. a unit tag cc-metric-collector sends
            };
            tags[i] = Some(v);
        }
        let [cluster, host, typ, typ_id, styp, styp_id] = tags;
        if cluster.is_none() && self.default_cluster.is_none() {
            return Err("no cluster tag and no ?cluster= default".into());
        }
        // cc-metric-store stores a line without a host under a host named "" and one with
        // only a `type-id` under a level named by the id: levels no query finds. Refused here,
        // each naming the tag (README: "Differences from cc-metric-store").
        let host = host.ok_or("no hostname tag (`hostname` or `host`): the line names no host")?;
        let item = self.sample(line)?;
        let cluster = match cluster {
            Some(c) => c.as_str(),
            None => Cow::Borrowed(self.default_cluster.unwrap_or_default()),
        };
        let mut level = self
            .store
            .level(&[&cluster, &host.as_str()])
            .map_err(|e| e.to_string())?;
        // `type` alone names the component by itself, as cc-metric-store reads it (what a
        // forwarding sink sends for a resource such as `lo`).
        let component = match (typ, typ_id) {
            (None, Some(_)) => return Err("tag 'type-id' without 'type'".into()),
            (None, None) => None,
            // A node's `stype` is no level in cc-metric-store (it reads a subtype only under a
            // component): cc-metric-collector's netstat and nfsiostat send
            // `type=node,stype=network,stype-id=eth0`, stored at the node.
            (Some(t), _) if t == "node" => return Ok((level, item)),
            (Some(t), id) => Some((t, id)),
        };
        let Some((typ, typ_id)) = component else {
            if styp.is_some() {
                return Err("tag 'stype' without a component 'type'".into());
            }
            return Ok((level, item));
        };
        let sub = match (styp, styp_id) {
            (None, Some(_)) => return Err("tag 'stype-id' without 'stype'".into()),
            (None, None) => None,
            (Some(_), None) => return Err("tag 'stype' without 'stype-id'".into()),
            (Some(s), Some(id)) => Some((s, id)),
        };
        for (kind, id) in std::iter::once((typ, typ_id)).chain(sub.map(|(s, id)| (s, Some(id)))) {
            self.name.clear();
            self.name.push_str(&kind.as_str());
            if let Some(id) = id {
                self.name.push_str(&id.as_str());
            }
            level = self
                .store
                .child(&level, &self.name)
                .map_err(|e| e.to_string())?;
        }
        Ok((level, item))
    }
}

/// Recently seen measurements and their metrics: a direct-mapped table keyed by the raw
/// measurement text, so a line costs a short hash and a compare instead of a registry
/// lookup (a body cycles through a dozen metrics).
struct MetricCache<'a> {
    slots: [Option<(&'a str, MetricInfo)>; 64],
}

impl Default for MetricCache<'_> {
    fn default() -> Self {
        MetricCache { slots: [None; 64] }
    }
}

impl<'a> MetricCache<'a> {
    #[inline(always)]
    fn get(
        &mut self,
        store: &Store,
        m: Text<'a>,
    ) -> Result<(Cow<'a, str>, MetricInfo), StoreError> {
        let raw = m.raw();
        let b = raw.as_bytes();
        // First and last (up to) eight bytes and the length.
        let mut head = [0u8; 8];
        let n = b.len().min(8);
        head[..n].copy_from_slice(&b[..n]);
        let tail = b.last_chunk::<8>().copied().unwrap_or(head);
        let mix = u64::from_le_bytes(head) ^ u64::from_le_bytes(tail).rotate_left(29);
        let h = (mix ^ b.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
        let slot = &mut self.slots[h as usize];
        if let Some((k, info)) = slot
            && eq_bytes(k.as_bytes(), b)
        {
            return Ok((m.as_str(), *info));
        }
        let name = m.as_str();
        let info = store.metric(&name)?;
        *slot = Some((raw, info));
        Ok((name, info))
    }
}

/// [`ingest`] and wait until the stored lines are durable (no-op without a WAL).
pub async fn ingest_durable(
    store: &Store,
    body: &[u8],
    default_cluster: Option<&str>,
    now: i64,
) -> Result<IngestOutcome, StoreError> {
    let out = ingest(store, body, default_cluster, now);
    store.wait_durable(out.wal_seq).await?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::selector;
    use crate::testutil::minute_store;

    #[test]
    fn timestamp_units() {
        assert_eq!(timestamp_secs(1_700_000_000), 1_700_000_000);
        assert_eq!(timestamp_secs(1_700_000_000_123), 1_700_000_000);
        assert_eq!(timestamp_secs(1_700_000_000_123_456), 1_700_000_000);
        assert_eq!(timestamp_secs(1_700_000_000_123_456_789), 1_700_000_000);
        assert_eq!(timestamp_secs(5), 5);
    }

    #[test]
    fn tags_in_any_order_aliases_and_levels() {
        let s = minute_store();
        let body = b"m,type-id=3,type=hwthread,host=h1,cluster=c value=1i 60\n\
m,cluster=c,hostname=h1,type=node,type-id=0 value=2u 60\n\
m,cluster=c,hostname=h1,type=socket,type-id=0,stype-id=1,stype=core,unit=x value=3.5 60\n\
m,hostname=h2 value=4 60\n\
m,cluster=c,hostname=h1 value=t 60\n\
m,cluster=c,hostname=../x value=1 60\n\
m,cluster=c,hostname=h1,type=hwthread value=1 60\n\
m,cluster=c,hostname=h1 other=1 60\n\
bad line\n";
        let out = ingest(&s, body, Some("dflt"), 0);
        assert_eq!(out.stored, 5, "{:?}", out.errors);
        let lines: Vec<usize> = out.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![5, 6, 8, 9]);
        assert!(out.errors[1].reason.contains(".."), "{}", out.errors[1]);
        let read = |p: &[&str]| s.read(&selector(p), "m", 60, 61, 0).unwrap().data;
        assert_eq!(read(&["c", "h1", "hwthread3"]), vec![1.0]);
        assert_eq!(read(&["c", "h1", "socket0", "core1"]), vec![3.5]);
        assert_eq!(read(&["dflt", "h2"]), vec![4.0]);
        // `type` without `type-id` names the component by itself, as cc-metric-store reads it.
        assert_eq!(read(&["c", "h1", "hwthread"]), vec![1.0]);
        // type=node wrote to the host level itself.
        assert_eq!(
            s.read(&selector(&["c", "h1"]), "m", 60, 61, 0)
                .unwrap()
                .data,
            vec![2.0]
        );
    }

    #[test]
    fn only_the_value_field_and_the_last_one_wins() {
        // cc-backend pkg/metricstore/lineprotocol.go DecodeLine: a field other than `value`
        // is an error ("unknown field"), each `value` overwrites the one before, and a bool
        // or string value is an error. Here the error is the line's alone.
        let s = minute_store();
        let body = b"m,cluster=c,host=h value=1,value=2 60\n\
m,cluster=c,host=h value=3,unit=4 120\n\
m,cluster=c,host=h load=5 180\n\
m,cluster=c,host=h value=\"x\" 240\n\
m,cluster=c,host=h value=6i,value=7u 300\n";
        let out = ingest(&s, body, None, 0);
        assert_eq!(out.stored, 2, "{:?}", out.errors);
        let lines: Vec<usize> = out.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines, vec![2, 3, 4]);
        assert!(
            out.errors[0].reason.contains("\"unit\""),
            "{}",
            out.errors[0]
        );
        let r = s.read(&selector(&["c", "h"]), "m", 0, 400, 0).unwrap();
        assert_eq!(r.from, 60);
        assert_eq!((r.data[0], r.data.len()), (2.0, 5));
        assert_eq!(r.data[4], 7.0);
    }

    #[test]
    fn missing_timestamp_means_now() {
        let s = minute_store();
        let out = ingest(&s, b"m,cluster=c,host=h value=9", None, 1200);
        assert_eq!(out.stored, 1);
        assert_eq!(
            s.read(&selector(&["c", "h"]), "m", 1200, 1201, 0)
                .unwrap()
                .data,
            vec![9.0]
        );
        let out = ingest(&s, b"m,host=h value=9", None, 1200);
        assert_eq!(out.errors[0].line, 1);
    }

    #[test]
    fn cached_tag_sections_keep_their_meaning_across_bodies_and_default_clusters() {
        let s = minute_store();
        let body = |ts: i64, v: i64| {
            format!(
                "m,host=h,type=socket,type-id=0 value={v} {ts}\nm,host=h value={} {ts}\n",
                v + 1
            )
        };
        // The same tag sections, first with default cluster a, then b, then a again.
        for (cluster, ts, v) in [("a", 60, 1), ("b", 60, 10), ("a", 120, 2)] {
            let out = ingest(&s, body(ts, v).as_bytes(), Some(cluster), 0);
            assert_eq!(out.stored, 2, "{:?}", out.errors);
        }
        let read = |p: &[&str], from| s.read(&selector(p), "m", from, 121, 0).unwrap().data;
        assert_eq!(read(&["a", "h", "socket0"], 60), vec![1.0, 2.0]);
        assert_eq!(read(&["a", "h"], 60), vec![2.0, 3.0]);
        assert_eq!(read(&["b", "h", "socket0"], 60), vec![10.0]);
        assert_eq!(read(&["b", "h"], 60), vec![11.0]);
        // cc-metric-collector's netstat: a node's stype is no level (cc-metric-store's reading).
        let out = ingest(
            &s,
            b"m,cluster=a,host=n,type=node,stype=network,stype-id=eth0,unit=bytes value=4 180\n",
            None,
            0,
        );
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        let node = s.read(&selector(&["a", "n"]), "m", 180, 181, 0).unwrap();
        assert_eq!(node.data, vec![4.0]);
        // A tag section that failed is not remembered as good: it fails again.
        for _ in 0..2 {
            let out = ingest(
                &s,
                b"m,cluster=c,host=h,stype=core,stype-id=1 value=1 60\n",
                None,
                0,
            );
            assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
        }
    }

    #[test]
    fn levels_no_query_finds_are_refused_naming_the_tag() {
        // cc-metric-store stores these at a level named by the id alone ("3"), at the host with
        // the stype dropped, at a host named "", or at a level named by the subtype alone;
        // each is an error here, naming the tag.
        let s = minute_store();
        let body = b"m,cluster=c,hostname=h,type-id=3 value=1 60\n\
m,cluster=c,hostname=h,stype=core,stype-id=1 value=2 60\n\
m,cluster=c,type=cpu,type-id=0 value=3 60\n\
m,cluster=c,hostname=h,type=socket,type-id=0,stype-id=1 value=4 60\n\
m,cluster=c,hostname=h,type=socket,type-id=0,stype=core value=6 60\n\
m,cluster=c,hostname=h,type=socket,type-id=0 value=5 60\n";
        let out = ingest(&s, body, None, 0);
        assert_eq!(out.stored, 1, "{:?}", out.errors);
        let errors: Vec<String> = out.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                "line 1: tag 'type-id' without 'type'",
                "line 2: tag 'stype' without a component 'type'",
                "line 3: no hostname tag (`hostname` or `host`): the line names no host",
                "line 4: tag 'stype-id' without 'stype'",
                "line 5: tag 'stype' without 'stype-id'",
            ]
        );
        let r = s.read(&selector(&["c", "h", "socket0"]), "m", 60, 61, 0);
        assert_eq!(r.unwrap().data, vec![5.0]);
    }
}
