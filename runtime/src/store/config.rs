//! `[store]` configuration: per-metric frequency and aggregation, unknown-metric policy,
//! retention, snapshot/WAL/archive settings and request limits. Parsed from the daemon's TOML.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How values of one metric are combined when a read addresses a level that has no data of its
/// own for the metric and the children's series are merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Aggregation {
    /// Children are not combined: a read matching several series is an error.
    #[default]
    None,
    /// Step-wise sum over the children (e.g. flops, bandwidth).
    Sum,
    /// Step-wise mean over the children (e.g. clock frequency, utilisation).
    Avg,
}

/// One entry of the `[store.metrics]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MetricConfig {
    /// Interval in seconds at which samples of this metric arrive; the buffer step
    /// (1 to 65,535: see `MAX_FREQUENCY`).
    #[serde(deserialize_with = "frequency")]
    pub frequency: u64,
    /// `"sum"`, `"avg"` or `"none"` (the default): how to combine children on reads.
    #[serde(default)]
    pub aggregation: Aggregation,
    /// Significant decimal digits kept once a buffer closes (1 to 17; lossy). Unset: every
    /// value bit for bit.
    #[serde(
        default,
        deserialize_with = "precision",
        skip_serializing_if = "Option::is_none"
    )]
    pub precision: Option<u32>,
}

/// Settings of the snapshot archive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct ArchiveConfig {
    /// Compress superseded snapshots into the archive directory instead of deleting them.
    pub enabled: bool,
    /// Where compressed snapshots go; relative paths are below the data directory.
    pub directory: PathBuf,
    /// gzip level 0..=9.
    pub compression_level: u32,
    /// Archived snapshots older than this are deleted (0 = keep forever).
    #[serde(with = "crate::duration::serde")]
    pub keep_for: Duration,
}

impl Default for ArchiveConfig {
    fn default() -> Self {
        ArchiveConfig {
            enabled: true,
            directory: PathBuf::from("archive"),
            compression_level: 6,
            keep_for: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// The `[store]` section of the daemon configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct StoreConfig {
    /// Known metrics: name -> { frequency (seconds), aggregation ("sum" | "avg" | "none") }.
    pub metrics: BTreeMap<String, MetricConfig>,
    /// Step in seconds used for metrics the table does not name.
    #[serde(deserialize_with = "frequency")]
    pub default_frequency: u64,
    /// Reject samples of metrics the table does not name instead of storing them.
    pub refuse_unknown_metrics: bool,
    /// How long samples stay in memory ("48h", "90m", "1d12h" or a number of seconds).
    #[serde(with = "crate::duration::serde")]
    pub retention_in_memory: Duration,
    /// Series of the metrics `idle-metrics` names that are no longer written (a process that
    /// exited) are dropped this long after their newest sample, instead of staying for
    /// `retention-in-memory` ("1h" by default, as Netdata drops the charts of a process that
    /// is gone after an hour; "0" keeps them for the whole retention).
    #[serde(with = "crate::duration::serde")]
    pub idle_retention: Duration,
    /// Metric-name prefixes `idle-retention` applies to: per-process series, whose processes
    /// come and go (default `["proc."]`: the process reader's series, one set per PID).
    pub idle_metrics: Vec<String>,
    /// How often a full snapshot is written (after which the write-ahead log is truncated).
    #[serde(with = "crate::duration::serde")]
    pub checkpoint_interval: Duration,
    /// Write-ahead log: acknowledged writes survive a crash. Off = only snapshots persist.
    pub wal: bool,
    /// Snapshot archive (compressed superseded snapshots).
    pub archive: ArchiveConfig,
    /// Largest accepted `/api/write` body in bytes; larger bodies get 413.
    pub max_body_size: usize,
    /// Freed 4 KiB buffers kept for reuse; beyond this they are returned to the allocator.
    pub buffer_pool_max: usize,
    /// A query's `resolution` downsamples (LTTB) only series of at least this many values;
    /// shorter ones come back at their own step. cc-backend's `resampling.minimum-points`
    /// (cc-lib's default, 1,000; cc-metric-store's own copy of the resampler used 100).
    pub resampling_minimum_points: usize,
}

/// The step of metrics `[store.metrics]` does not name, when `default-frequency` is not set:
/// the embedded config's poll interval, so a central daemon without `[store]` keeps every
/// value a node on the default config forwards (at 60 s it kept one in six, each overwriting
/// the slot the one before it took).
pub const DEFAULT_FREQUENCY: u64 = 10;

/// Series shorter than this are returned at their native step: cc-lib's
/// `resampler.MinimumRequiredPoints` default; `[store] resampling-minimum-points` sets it, as
/// cc-backend's `resampling.minimum-points` does.
pub const LTTB_MIN_POINTS: usize = 1000;

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            metrics: BTreeMap::new(),
            default_frequency: DEFAULT_FREQUENCY,
            refuse_unknown_metrics: false,
            retention_in_memory: Duration::from_secs(48 * 3600),
            idle_retention: Duration::from_secs(3600),
            idle_metrics: vec!["proc.".into()],
            checkpoint_interval: Duration::from_secs(3600),
            wal: true,
            archive: ArchiveConfig::default(),
            max_body_size: 64 << 20,
            buffer_pool_max: 16_384,
            resampling_minimum_points: LTTB_MIN_POINTS,
        }
    }
}

impl StoreConfig {
    /// Significant digits per metric in the registry's id order (the table's name order;
    /// 0 = lossless).
    pub(crate) fn precision_by_id(&self) -> Vec<u8> {
        self.metrics
            .values()
            .map(|m| m.precision.unwrap_or(0) as u8)
            .collect()
    }
}

/// Significant digits: an f64 holds 15 to 17, so 1 to 17.
fn precision<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let p = u32::deserialize(d)?;
    if !(1..=17).contains(&p) {
        return Err(serde::de::Error::custom(format!(
            "precision {p} out of range: 1 to 17 significant digits"
        )));
    }
    Ok(Some(p))
}

/// A step in seconds, refused at parse time when a chain cannot hold it (zero, or more than
/// [`super::MAX_FREQUENCY`]), so the config check names the field instead of the store
/// clamping it.
fn frequency<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let f = u64::deserialize(d)?;
    if f == 0 || f > super::MAX_FREQUENCY {
        return Err(serde::de::Error::custom(format!(
            "frequency {f} out of range: 1 to {} seconds",
            super::MAX_FREQUENCY
        )));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_a_chain_cannot_hold_are_refused() {
        for bad in ["0", "65536"] {
            let e = toml::from_str::<StoreConfig>(&format!("default-frequency = {bad}"));
            assert!(e.unwrap_err().to_string().contains("out of range"), "{bad}");
            let e = toml::from_str::<StoreConfig>(&format!("metrics.x = {{ frequency = {bad} }}"));
            assert!(e.is_err(), "{bad}");
        }
        let ok = toml::from_str::<StoreConfig>("default-frequency = 65535").unwrap();
        assert_eq!(ok.default_frequency, 65535);
    }

    #[test]
    fn precision_is_one_to_seventeen_digits() {
        let c: StoreConfig = toml::from_str(
            "[metrics.a]\nfrequency = 10\nprecision = 5\n[metrics.b]\nfrequency = 1",
        )
        .unwrap();
        assert_eq!(c.metrics["a"].precision, Some(5));
        assert_eq!(c.metrics["b"].precision, None);
        assert_eq!(c.precision_by_id(), vec![5, 0]);
        for bad in ["0", "18"] {
            let e = toml::from_str::<StoreConfig>(&format!(
                "[metrics.a]\nfrequency = 10\nprecision = {bad}"
            ));
            assert!(e.unwrap_err().to_string().contains("precision"), "{bad}");
        }
    }

    #[test]
    fn toml_section() {
        let cfg: StoreConfig = toml::from_str(
            r#"
            default-frequency = 30
            retention-in-memory = "24h"
            checkpoint-interval = 600
            [metrics]
            flops_any = { frequency = 60, aggregation = "sum" }
            clock = { frequency = 60, aggregation = "avg" }
            mem_used = { frequency = 10 }
            [archive]
            enabled = false
            "#,
        )
        .unwrap();
        assert_eq!(cfg.default_frequency, 30);
        assert_eq!(cfg.retention_in_memory, Duration::from_secs(86_400));
        assert_eq!(cfg.checkpoint_interval, Duration::from_secs(600));
        assert_eq!(cfg.idle_retention, Duration::from_secs(3600));
        assert_eq!(cfg.idle_metrics, vec!["proc.".to_string()]);
        assert_eq!(cfg.metrics["flops_any"].aggregation, Aggregation::Sum);
        assert_eq!(cfg.metrics["mem_used"].aggregation, Aggregation::None);
        assert!(!cfg.archive.enabled);
        assert!(toml::from_str::<StoreConfig>("bogus = 1").is_err());
        assert!(
            toml::from_str::<StoreConfig>("[metrics]\nx = { frequency = 1, agg = \"sum\" }")
                .is_err()
        );
    }
}
