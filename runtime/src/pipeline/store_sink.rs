//! The built-in `store` sink: a pipeline's output written into the buffer store at each
//! sample's level (`sample::Level::of`: cluster, host, component) through the store's grouped
//! write (`store::GroupWrite`, line protocol's ingest takes the same). The route of a sample
//! from a receiver to the store is pipeline -> store, through here. Knows the store's write
//! API and the samples' sets ([`super::levels`]); owns no data but what it remembers of levels.

use std::sync::Arc;

use super::Sink;
use super::levels::{Levels, Sets};
use crate::sample::{Level, Sample};
use crate::store::{Held, Pending, Store};
use crate::util::eq_bytes;

/// Pipeline output into the store, at the sample's [`Level`].
pub struct StoreSink {
    pub store: Arc<Store>,
    pub default_cluster: String,
    pub hostname: String,
    /// The levels of metadata sets seen in earlier batches.
    pub levels: Levels,
}

type LastLevel<'a> = Option<(
    [std::borrow::Cow<'a, str>; 4],
    usize,
    Arc<crate::store::Level>,
)>;

impl StoreSink {
    /// `s`'s level: `last`'s when the path is the same, else looked up (and kept in `last`);
    /// `None` when the store refuses the path.
    fn level_of<'a>(
        &'a self,
        pipeline: &str,
        s: &'a Sample,
        last: &mut LastLevel<'a>,
    ) -> Option<Arc<crate::store::Level>> {
        let (path, depth) = Level::of(s, &self.default_cluster, &self.hostname).path();
        if let Some((p, d, l)) = last.as_ref()
            && *d == depth
            && (0..depth).all(|i| eq_bytes(p[i].as_bytes(), path[i].as_bytes()))
        {
            return Some(l.clone());
        }
        let refs: [&str; 4] = [&path[0], &path[1], &path[2], &path[3]];
        match self.store.level(&refs[..depth]) {
            Ok(l) => {
                *last = Some((path, depth, l.clone()));
                Some(l)
            }
            Err(e) => {
                tracing::debug!(pipeline, metric = %s.name, error = %e, "store refused a sample");
                None
            }
        }
    }
}

/// The store's metric entries of the names a batch uses, by interned name (an address
/// compare): the store's registry takes a lock and compares the text per lookup.
#[derive(Default)]
struct Metrics(Vec<(crate::sample::Name, crate::store::MetricInfo)>);

impl Metrics {
    /// Names kept: a batch of one host's metrics has tens; past this the registry answers.
    const MAX: usize = 64;

    fn get(
        &mut self,
        store: &Store,
        name: crate::sample::Name,
    ) -> Result<crate::store::MetricInfo, crate::store::StoreError> {
        if let Some((_, m)) = self.0.iter().find(|(n, _)| *n == name) {
            return Ok(*m);
        }
        let m = store.metric(&name)?;
        if self.0.len() < Self::MAX {
            self.0.push((name, m));
        }
        Ok(m)
    }
}

impl Sink for StoreSink {
    fn name(&self) -> &str {
        "store"
    }

    /// One grouped write of the store for the batch (one WAL record, one lock of a level per
    /// run of samples that share it), and the level looked up once per metadata set and
    /// resource (a receiver's request comes grouped by series and host): a WAL append and a
    /// tree walk per sample cost more than the write itself.
    fn accept(&self, pipeline: &str, samples: &[Sample]) {
        let mut refused = 0usize;
        let mut write = self.store.group_write(samples.len());
        let mut last: LastLevel = None;
        let mut sets = Sets::default();
        let mut metrics = Metrics::default();
        for s in samples {
            let l = match sets.get(s) {
                Some(l) => l,
                None => match self.levels.get(s) {
                    Some(l) => sets.put(s, l),
                    None => match self.level_of(pipeline, s, &mut last) {
                        Some(l) => {
                            self.levels.put(s, &l);
                            sets.put(s, l)
                        }
                        None => {
                            refused += 1;
                            continue;
                        }
                    },
                },
            };
            match metrics.get(&self.store, s.name) {
                Ok(metric) => write.push(
                    &Held,
                    l,
                    Pending {
                        name: s.name.as_str(),
                        metric,
                        ts: s.timestamp_ns.div_euclid(1_000_000_000),
                        value: s.value,
                    },
                ),
                Err(e) => {
                    refused += 1;
                    tracing::debug!(pipeline, metric = %s.name, error = %e, "store refused a sample");
                }
            }
        }
        let written = write.finish(&Held);
        for (p, e) in &written.refused {
            tracing::debug!(pipeline, metric = p.name, error = %e, "store refused a sample");
        }
        refused += written.refused.len();
        if let Err(e) = written.wal {
            tracing::warn!(pipeline, error = %e, "the store's WAL refused a batch");
        }
        if refused > 0 {
            tracing::warn!(
                pipeline,
                refused,
                "the store refused samples (see debug log for each)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Metadata;
    use crate::store::StoreConfig;

    /// Samples that share a metadata set land at their own resource's level; another set
    /// at its own host.
    #[test]
    fn the_store_sink_reuses_a_level_only_for_the_same_set_and_resource() {
        let sink = StoreSink {
            store: Arc::new(Store::new(StoreConfig::default())),
            default_cluster: "c".into(),
            hostname: "me".into(),
            levels: Levels::default(),
        };
        let meta = Metadata::new(vec![("hostname".into(), "h1".into())]);
        let at = |resource: &str, meta: &Metadata| Sample {
            metadata: meta.clone(),
            ..Sample::new("m", resource, 1.0, 1_700_000_000_000_000_000)
        };
        let (eth0, eth1): (Arc<str>, Arc<str>) = ("eth0".into(), "eth1".into());
        let mut samples = vec![at("", &meta), at("", &meta), at("", &meta), at("", &meta)];
        samples[0].resource = eth0.clone();
        samples[1].resource = eth0;
        samples[2].resource = eth1;
        let other = Metadata::new(vec![("hostname".into(), "h2".into())]);
        samples.push(at("", &other));
        samples.push(at("", &other));
        sink.accept("p", &samples);
        for path in [["c", "h1", "eth0"], ["c", "h1", "eth1"]] {
            assert!(
                sink.store.latest_timestamp(&path).flatten().is_some(),
                "{path:?}"
            );
        }
        assert!(
            sink.store
                .latest_timestamp(&["c", "h1"])
                .flatten()
                .is_some()
        );
        assert!(
            sink.store
                .latest_timestamp(&["c", "h2"])
                .flatten()
                .is_some()
        );
        assert_eq!(sink.store.latest_timestamp(&["c", "h2", "eth1"]), None);
    }
}
