//! What an OTLP receiver remembers across protobuf requests ([`Recent`]): an SDK or a
//! Collector sends the same resources, metrics and attribute sets every export, and what
//! their bytes decoded to last time costs a hash and a compare, where decoding them again
//! costs UTF-8 checks, interning and a metadata set's lookup per point.
//!
//! - resources by their `Resource` message's bytes, each with an id no other resource gets;
//! - a metric's heads by its name, unit and data kind;
//! - what a gauge or sum point carries by its resource's id and its attributes' bytes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::emit::{Carried, Data, Heads};
use crate::ingest::recent::{Lookup, Recent};
use crate::sample::Pair;

/// Bytes of resources remembered: a Collector forwards thousands of hosts' resources, each
/// with tens of attributes.
pub const RESOURCE_MEMORY: usize = 16 << 20;

/// Bytes of metric heads remembered: a schema, a few thousand names.
pub const HEADS_MEMORY: usize = 4 << 20;

/// Bytes of points' attribute sets remembered: the series of a large Collector.
pub const POINT_MEMORY: usize = 64 << 20;

/// What the receiver remembers.
pub struct Memory {
    resources: Recent<Resource>,
    heads: Recent<Heads>,
    points: Recent<Carried>,
    /// The next resource id: ids are never reused, so a point's key names one resource's
    /// content for as long as the daemon runs.
    ids: AtomicU64,
}

impl Default for Memory {
    fn default() -> Memory {
        Memory {
            resources: Recent::new(RESOURCE_MEMORY),
            heads: Recent::new(HEADS_MEMORY),
            points: Recent::new(POINT_MEMORY),
            ids: AtomicU64::new(0),
        }
    }
}

impl Memory {
    /// A request's view of the memory.
    pub(super) fn recall(&self) -> Recall<'_> {
        Recall {
            resources: self.resources.lookup(),
            heads: self.heads.lookup(),
            points: self.points.lookup(),
            ids: &self.ids,
            key: Vec::new(),
        }
    }
}

/// A resource as its points use it.
#[derive(Clone)]
pub struct Resource {
    pub id: u64,
    /// Its attributes, which a point's own are merged over.
    pub pairs: Arc<[Pair]>,
    /// What a point without attributes of its own carries.
    pub plain: Carried,
}

/// One request's lookups, and the key being built.
pub(super) struct Recall<'m> {
    pub resources: Lookup<'m, Resource>,
    pub heads: Lookup<'m, Heads>,
    pub points: Lookup<'m, Carried>,
    ids: &'m AtomicU64,
    /// The key being built (see [`heads_key`], [`point_key`]).
    pub key: Vec<u8>,
}

impl Recall<'_> {
    pub fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// Keeps what the request learned (once the whole body decoded).
    pub fn keep(self) {
        self.resources.keep();
        self.heads.keep();
        self.points.keep();
    }
}

/// The key of a metric's heads: name and unit as sent (not checked yet: a hit means
/// they were, since 0xFF, which separates them, is never part of UTF-8 text), the data's
/// field, temporality and monotonicity.
pub fn heads_key<'k>(k: &'k mut Vec<u8>, name: &[u8], unit: &[u8], d: Data) -> &'k [u8] {
    let (field, temporality, monotonic) = match d {
        Data::Gauge => (5, 0, false),
        Data::Sum {
            temporality,
            monotonic,
        } => (7, temporality, monotonic),
        Data::Histogram { temporality } => (9, temporality, false),
        Data::Exponential { temporality } => (10, temporality, false),
        Data::Summary => (11, 0, false),
    };
    k.clear();
    k.extend_from_slice(name);
    k.push(0xFF);
    k.extend_from_slice(unit);
    k.push(0xFF);
    k.push(field);
    k.extend_from_slice(&temporality.to_le_bytes());
    k.push(u8::from(monotonic));
    k
}

/// The key of a point's attribute set: its resource's id and the attributes' bytes.
pub fn point_key<'k>(k: &'k mut Vec<u8>, resource: u64, attributes: &[u8]) -> &'k [u8] {
    k.clear();
    k.extend_from_slice(&resource.to_le_bytes());
    k.extend_from_slice(attributes);
    k
}
