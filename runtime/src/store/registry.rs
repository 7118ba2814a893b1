//! The metric registry (name → dense id, step, aggregation) and name validation. Configured
//! metrics live in an immutable map (no lock on lookup); unknown ones are registered on first
//! sight unless the configuration refuses them.

use std::sync::{Arc, RwLock};

use super::buffer::MAX_FREQUENCY;
use super::{Aggregation, FastMap, MetricInfo, StoreConfig, StoreError, read, write};

/// Name → metric. Configured metrics are immutable (no lock on lookup); unknown metrics are
/// registered on first sight behind an `RwLock` consulted only on a miss.
pub(crate) struct Registry {
    fixed: FastMap<Box<str>, MetricInfo>,
    dynamic: RwLock<FastMap<Box<str>, MetricInfo>>,
    names: RwLock<Vec<Arc<str>>>,
    default_frequency: i64,
    refuse_unknown: bool,
}

impl Registry {
    pub(crate) fn new(cfg: &StoreConfig) -> Registry {
        let mut fixed = FastMap::default();
        let mut names = Vec::new();
        for (name, mc) in &cfg.metrics {
            let info = MetricInfo {
                id: names.len() as u32,
                // Chains keep the step as a u16 (see MAX_FREQUENCY; config refuses more).
                frequency: mc.frequency.clamp(1, MAX_FREQUENCY) as i64,
                aggregation: mc.aggregation,
            };
            fixed.insert(name.as_str().into(), info);
            names.push(Arc::from(name.as_str()));
        }
        Registry {
            fixed,
            dynamic: RwLock::default(),
            names: RwLock::new(names),
            default_frequency: cfg.default_frequency.clamp(1, MAX_FREQUENCY) as i64,
            refuse_unknown: cfg.refuse_unknown_metrics,
        }
    }

    #[inline]
    pub(crate) fn get(&self, name: &str) -> Result<MetricInfo, StoreError> {
        if let Some(m) = self.fixed.get(name) {
            return Ok(*m);
        }
        self.get_dynamic(name)
    }

    pub(crate) fn lookup(&self, name: &str) -> Option<MetricInfo> {
        // The configured metrics without the dynamic table's lock (`or_else`: `or` would take
        // it on every lookup).
        match self.fixed.get(name) {
            Some(m) => Some(*m),
            None => read(&self.dynamic).get(name).copied(),
        }
    }

    #[cold]
    fn get_dynamic(&self, name: &str) -> Result<MetricInfo, StoreError> {
        if self.refuse_unknown {
            return Err(StoreError::UnknownMetric(name.to_string()));
        }
        if let Some(m) = read(&self.dynamic).get(name) {
            return Ok(*m);
        }
        validate_name(name)?;
        let mut dynamic = write(&self.dynamic);
        if let Some(m) = dynamic.get(name) {
            return Ok(*m);
        }
        let mut names = write(&self.names);
        let info = MetricInfo {
            id: names.len() as u32,
            frequency: self.default_frequency,
            aggregation: Aggregation::None,
        };
        names.push(Arc::from(name));
        dynamic.insert(name.into(), info);
        Ok(info)
    }

    pub(crate) fn all_names(&self) -> Vec<Arc<str>> {
        read(&self.names).clone()
    }

    /// The name of metric `id`, from `snapshot` (an earlier [`Registry::all_names`]) or, for
    /// a metric registered since, from the registry: a series walked after the snapshot was
    /// taken may belong to a metric a writer registered meanwhile (indexing the snapshot
    /// alone panicked `/metrics` while a receiver brought new names).
    pub(crate) fn name_of(&self, snapshot: &[Arc<str>], id: u32) -> Arc<str> {
        match snapshot.get(id as usize) {
            Some(n) => n.clone(),
            None => read(&self.names)[id as usize].clone(),
        }
    }
}

/// Rejects names that could escape a directory or confuse path-shaped selectors.
pub fn validate_name(name: &str) -> Result<(), StoreError> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > 1024 {
        "longer than 1024 bytes"
    } else if name.contains('/') {
        "contains '/'"
    } else if name.contains("..") {
        "contains '..'"
    } else if name.chars().any(char::is_control) {
        "contains control characters"
    } else {
        return Ok(());
    };
    Err(StoreError::InvalidName {
        name: name.to_string(),
        reason,
    })
}
