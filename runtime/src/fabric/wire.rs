//! What agents say to each other over NATS: subject and bucket names, the lease and owner
//! values in the key-value buckets, traps (JSON), data reports (a compact binary batch:
//! one epoch of one agent, resource names once per batch), and commands with their merged
//! replies. Owns the formats only; sending is the agent's.
//!
//! Subjects (`P` = `wasmon.fabric.NAME`):
//! - `P.up.AGENT.data` — data batches for AGENT (from its children), relayed to its parent;
//! - `P.up.AGENT.trap` — traps, likewise up to the master;
//! - `P.cmd.AGENT` — commands (request/reply): AGENT runs it, fans it out to its children and
//!   replies with everyone's results merged (histograms added bucket by bucket).
//!
//! Buckets: `wasmon-fabric-NAME-leases` (key AGENT → [`Lease`], `max_age` = the lease) and
//! `wasmon-fabric-NAME-owners` (key NODE → [`Owner`], no expiry; created with create-if-absent,
//! changed only by revision-checked update).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::histogram::{Histogram, WireHistogram};

/// Largest data batch per message (NATS's default max_payload is 1 MiB).
pub const MAX_BATCH_BYTES: usize = 256 * 1024;
/// Magic of a data batch, version 1.
const DATA_MAGIC: &[u8; 4] = b"WFD1";

pub fn prefix(name: &str) -> String {
    format!("wasmon.fabric.{name}")
}

pub fn up_subject(name: &str, agent: &str, kind: &str) -> String {
    format!("wasmon.fabric.{name}.up.{agent}.{kind}")
}

pub fn cmd_subject(name: &str, agent: &str) -> String {
    format!("wasmon.fabric.{name}.cmd.{agent}")
}

pub fn leases_bucket(name: &str) -> String {
    format!("wasmon-fabric-{name}-leases")
}

pub fn owners_bucket(name: &str) -> String {
    format!("wasmon-fabric-{name}-owners")
}

/// An agent's lease value, rewritten every epoch: what `wasmon fabric status` shows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Lease {
    pub agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Last epoch processed.
    pub epoch: u64,
    /// Time the last epoch's read and processing took.
    pub epoch_ms: f64,
    /// How long after the epoch's counters were taken the processing finished.
    pub lag_ms: f64,
    pub nodes: u32,
    pub ports: u32,
    pub ports_missing: u32,
    /// Owned nodes that did not answer (first few).
    #[serde(default)]
    pub missing_nodes: Vec<String>,
    pub ts_ns: i64,
    /// The owners bucket's sequence the agent's view held when it chose the nodes of `epoch`:
    /// a node taken from it at or before this sequence is not counted by it from `epoch` on,
    /// so its taker may count it without waiting out the view-staleness limit.
    #[serde(default)]
    pub owners_rev: u64,
}

/// Owned nodes listed in a lease, at most (the count is always complete).
pub const MISSING_LISTED: usize = 32;

/// An owner value: who monitors a node, and from how many hops away.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub agent: String,
    pub hops: u32,
    pub ts_ns: i64,
}

/// One trap.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrapMsg {
    pub agent: String,
    pub epoch: u64,
    pub ts_ns: i64,
    pub node: String,
    pub port: String,
    pub counter: String,
    pub increase: u64,
    #[serde(default)]
    pub at_least: bool,
    pub threshold: u64,
}

/// One reported counter of a data batch.
#[derive(Clone, Debug, PartialEq)]
pub struct DataEntry {
    /// `NODE/PORT`
    pub resource: String,
    pub counter: String,
    /// Change since the last report (bytes for data counters).
    pub change: f64,
    /// Per second; `None`: unknowable.
    pub rate: Option<f64>,
}

/// One agent's data reports of one epoch.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct DataBatch {
    pub agent: String,
    pub epoch: u64,
    pub ts_ns: i64,
    pub entries: Vec<DataEntry>,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    let n = b.len().min(u16::MAX as usize);
    out.extend_from_slice(&(n as u16).to_le_bytes());
    out.extend_from_slice(&b[..n]);
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("data batch truncated".into());
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn str(&mut self) -> Result<String, String> {
        let n = self.u16()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "data batch: bad UTF-8".into())
    }
}

impl DataBatch {
    /// Encoded into messages of at most about `MAX_BATCH_BYTES` each. Layout (little endian):
    /// magic, agent, epoch u64, ts i64, strings table (u32 count, u16-prefixed strings),
    /// entries (u32 count; each: u32 resource, u32 counter, f64 change, f64 rate, NaN for
    /// unknowable).
    pub fn encode(&self) -> Vec<Vec<u8>> {
        let mut msgs = Vec::new();
        let mut i = 0;
        // Entries per message, so that names plus entries stay under the limit.
        while i < self.entries.len() || (msgs.is_empty() && self.entries.is_empty()) {
            let mut strings: Vec<&str> = Vec::new();
            let mut index: std::collections::HashMap<&str, u32> = Default::default();
            let mut body = Vec::new();
            let mut bytes = 0usize;
            let mut n = 0u32;
            while i < self.entries.len() && bytes < MAX_BATCH_BYTES {
                let e = &self.entries[i];
                let r = *index.entry(&e.resource).or_insert_with(|| {
                    strings.push(&e.resource);
                    bytes += e.resource.len() + 2;
                    (strings.len() - 1) as u32
                });
                let c = *index.entry(&e.counter).or_insert_with(|| {
                    strings.push(&e.counter);
                    bytes += e.counter.len() + 2;
                    (strings.len() - 1) as u32
                });
                body.extend_from_slice(&r.to_le_bytes());
                body.extend_from_slice(&c.to_le_bytes());
                body.extend_from_slice(&e.change.to_le_bytes());
                body.extend_from_slice(&e.rate.unwrap_or(f64::NAN).to_le_bytes());
                bytes += 24;
                n += 1;
                i += 1;
            }
            let mut out = Vec::with_capacity(bytes + 64);
            out.extend_from_slice(DATA_MAGIC);
            put_str(&mut out, &self.agent);
            out.extend_from_slice(&self.epoch.to_le_bytes());
            out.extend_from_slice(&self.ts_ns.to_le_bytes());
            out.extend_from_slice(&(strings.len() as u32).to_le_bytes());
            for s in &strings {
                put_str(&mut out, s);
            }
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&body);
            msgs.push(out);
            if self.entries.is_empty() {
                break;
            }
        }
        msgs
    }

    /// One message back into a batch; a clear error for anything malformed.
    pub fn decode(bytes: &[u8]) -> Result<DataBatch, String> {
        let mut c = Cursor(bytes);
        if c.take(4)? != DATA_MAGIC {
            return Err("not a data batch (bad magic)".into());
        }
        let agent = c.str()?;
        let epoch = c.u64()?;
        let ts_ns = c.u64()? as i64;
        let ns = c.u32()? as usize;
        if ns > bytes.len() {
            return Err("data batch: string count too large".into());
        }
        let mut strings = Vec::with_capacity(ns);
        for _ in 0..ns {
            strings.push(c.str()?);
        }
        let n = c.u32()? as usize;
        if n.saturating_mul(24) > c.0.len() {
            return Err("data batch truncated".into());
        }
        let name = |i: u32| {
            strings
                .get(i as usize)
                .cloned()
                .ok_or_else(|| format!("data batch: string {i} out of range"))
        };
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let resource = name(c.u32()?)?;
            let counter = name(c.u32()?)?;
            let change = f64::from_bits(c.u64()?);
            let rate = f64::from_bits(c.u64()?);
            entries.push(DataEntry {
                resource,
                counter,
                change,
                rate: (!rate.is_nan()).then_some(rate),
            });
        }
        Ok(DataBatch {
            agent,
            epoch,
            ts_ns,
            entries,
        })
    }
}

/// A command sent down the tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Command {
    /// The merged histogram of one counter for one epoch (default: the latest epoch every
    /// agent should have, chosen by the agent the command is sent to).
    Histogram {
        counter: String,
        #[serde(default)]
        epoch: Option<u64>,
    },
    /// Clear every counter where the source can, and start every rate afresh.
    Clear,
    /// Set trap and change thresholds (counters by name; others unchanged).
    SetThresholds {
        #[serde(default)]
        traps: BTreeMap<String, u64>,
        #[serde(default)]
        change: BTreeMap<String, u64>,
    },
}

/// A command with the time its sender waits for the reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub cmd: Command,
    pub timeout_ms: u64,
}

/// A reply, merged on the way up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// Agents that answered.
    pub agents: Vec<String>,
    /// Agents that did not answer in time, or had no data for the epoch.
    #[serde(default)]
    pub missing: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<WireHistogram>,
    /// Ports the command applied to.
    #[serde(default)]
    pub ports: u64,
    #[serde(default)]
    pub errors: Vec<String>,
}

impl Reply {
    /// ` (missing: a, b)` after a histogram's header when agents did not answer, else empty.
    pub fn missing_note(&self) -> String {
        if self.missing.is_empty() {
            String::new()
        } else {
            format!(" (missing: {})", self.missing.join(", "))
        }
    }

    /// Add a child's reply: lists joined, histograms added bucket by bucket.
    pub fn merge(&mut self, other: Reply) {
        self.agents.extend(other.agents);
        self.missing.extend(other.missing);
        self.ports += other.ports;
        self.errors.extend(other.errors);
        if self.epoch.is_none() {
            self.epoch = other.epoch;
        }
        match (&mut self.histogram, other.histogram) {
            (_, None) => {}
            (None, Some(h)) => self.histogram = Some(h),
            (Some(mine), Some(h)) => match (Histogram::from_wire(mine), Histogram::from_wire(&h)) {
                (Ok(mut a), Ok(b)) => {
                    a.merge(&b);
                    *mine = a.to_wire();
                }
                (Err(e), _) | (_, Err(e)) => self.errors.push(e),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> DataBatch {
        DataBatch {
            agent: "a1".into(),
            epoch: 9,
            ts_ns: 123,
            entries: (0..n)
                .map(|i| DataEntry {
                    resource: format!("sw-p0-e{}/{}", i % 50, i % 7),
                    counter: if i % 2 == 0 {
                        "port_xmit_data"
                    } else {
                        "port_rcv_data"
                    }
                    .into(),
                    change: i as f64 * 4.0,
                    rate: (i % 3 != 0).then_some(i as f64),
                })
                .collect(),
        }
    }

    #[test]
    fn data_batches_round_trip_and_split() {
        let b = batch(100);
        let msgs = b.encode();
        assert_eq!(msgs.len(), 1);
        assert_eq!(DataBatch::decode(&msgs[0]).unwrap(), b);
        let big = batch(30_000);
        let msgs = big.encode();
        assert!(msgs.len() > 1 && msgs.iter().all(|m| m.len() < MAX_BATCH_BYTES + 1024));
        let mut all = Vec::new();
        for m in &msgs {
            all.extend(DataBatch::decode(m).unwrap().entries);
        }
        assert_eq!(all, big.entries);
        // Names travel once per message: well under the size of the strings repeated.
        assert!(msgs.iter().map(Vec::len).sum::<usize>() < 30_000 * 30);
    }

    #[test]
    fn malformed_batches_are_refused_with_a_reason() {
        let m = batch(10).encode().remove(0);
        assert!(
            DataBatch::decode(&m[..m.len() - 3])
                .unwrap_err()
                .contains("truncated")
        );
        assert!(
            DataBatch::decode(b"JUNKJUNK")
                .unwrap_err()
                .contains("magic")
        );
        let mut bad = m.clone();
        let at = bad.len() - 24 * 10; // first entry's resource index
        bad[at..at + 4].copy_from_slice(&999u32.to_le_bytes());
        assert!(
            DataBatch::decode(&bad)
                .unwrap_err()
                .contains("out of range")
        );
    }

    #[test]
    fn commands_parse_strictly() {
        let c: Command =
            serde_json::from_str(r#"{"op":"histogram","counter":"port_xmit_data"}"#).unwrap();
        assert_eq!(
            c,
            Command::Histogram {
                counter: "port_xmit_data".into(),
                epoch: None
            }
        );
        assert!(serde_json::from_str::<Command>(r#"{"op":"reboot"}"#).is_err());
        assert!(serde_json::from_str::<Command>(r#"{"op":"histogram"}"#).is_err());
    }

    #[test]
    fn replies_merge_histograms_exactly() {
        let mut h1 = Histogram::default();
        h1.observe(10.0);
        let mut h2 = Histogram::default();
        h2.observe(10.0);
        h2.observe(0.0);
        let mut a = Reply {
            agents: vec!["a".into()],
            histogram: Some(h1.to_wire()),
            ports: 1,
            ..Reply::default()
        };
        a.merge(Reply {
            agents: vec!["b".into()],
            histogram: Some(h2.to_wire()),
            ports: 2,
            ..Reply::default()
        });
        let mut want = h1.clone();
        want.merge(&h2);
        assert_eq!(a.histogram, Some(want.to_wire()));
        assert_eq!(a.agents, ["a", "b"]);
        assert_eq!(a.ports, 3);
    }
}
