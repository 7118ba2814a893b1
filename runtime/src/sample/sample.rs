//! The runtime's sample: what sources produce, transformers rewrite and sinks consume. Names
//! and units are interned [`Name`]s; resources and metadata are `Arc<str>`, so a batch shares
//! one allocation per distinct string.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Name;

/// How a sample's value relates to earlier ones (Ceilometer's meter types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Gauge,
    Delta,
    Cumulative,
}

/// Metadata pairs shared between the samples that carry the same set. Most samples carry
/// none: the empty set is no allocation, so cloning and dropping it costs no atomic operation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata(Option<Arc<[Pair]>>);

/// A metadata key and its value.
pub type Pair = (Arc<str>, Arc<str>);

impl Metadata {
    pub fn new(pairs: Vec<Pair>) -> Metadata {
        Metadata((!pairs.is_empty()).then(|| pairs.into()))
    }

    pub fn pairs(&self) -> &[Pair] {
        self.0.as_deref().unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Whether both are the very same set (one allocation, or both empty): a cheap test
    /// that lets a consumer reuse what it derived from the previous sample's metadata.
    pub fn same(&self, other: &Metadata) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The set's address (0 for the empty set): while the set is alive, no other set has it.
    pub fn addr(&self) -> usize {
        self.0
            .as_ref()
            .map_or(0, |a| a.as_ptr() as *const u8 as usize)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs()
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| &**v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs().iter().map(|(k, v)| (&**k, &**v))
    }
}

/// One sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: Name,
    pub resource: Arc<str>,
    pub unit: Name,
    pub kind: Kind,
    pub value: f64,
    /// Nanoseconds since the Unix epoch.
    pub timestamp_ns: i64,
    pub metadata: Metadata,
}

impl Sample {
    pub fn new(name: &str, resource: &str, value: f64, timestamp_ns: i64) -> Sample {
        Sample {
            name: Name::new(name),
            resource: resource.into(),
            unit: Name::EMPTY,
            kind: Kind::Gauge,
            value,
            timestamp_ns,
            metadata: Metadata::default(),
        }
    }
}
