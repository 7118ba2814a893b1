//! Value types of the notifier: directions, handles, threshold specifications, notifications and
//! the notifier's error type. Plain data only; owns no state and touches no other module.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The instance name that means "every instance of the metric" in selectors and on the wire.
pub const ANY_INSTANCE: &str = "*";

/// Which way a value has to cross a threshold to fire it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// "Going above N": fires when the value goes from below N to at least N.
    Rising,
    /// "Dropping below N": fires when the value goes from at least N to below N.
    Falling,
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Rising => "rising",
            Direction::Falling => "falling",
        })
    }
}

/// A 32-bit threshold handle. It names one threshold, and through it the owner, resource, value
/// and direction (look them up with `Notifier::get`). Never 0; unique among live thresholds and
/// not reused until the 32-bit counter wraps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Handle(pub u32);

impl fmt::Display for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A resource: one metric and either one instance or every instance of it. "Every instance" is
/// kept as one global threshold, not one per instance.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Selector {
    /// Metric name, e.g. `proc.fd.count`.
    pub metric: String,
    /// Instance name (e.g. a pid `4768` or `pid/tid`); `None` means every instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

impl Selector {
    /// One instance of a metric; `"*"` is read as "every instance".
    pub fn instance(metric: impl Into<String>, instance: impl Into<String>) -> Self {
        let instance = instance.into();
        let instance = (instance != ANY_INSTANCE).then_some(instance);
        Selector {
            metric: metric.into(),
            instance,
        }
    }

    /// Every instance of a metric (a global threshold).
    pub fn any(metric: impl Into<String>) -> Self {
        Selector {
            metric: metric.into(),
            instance: None,
        }
    }
}

/// What a client asks for when it adds a threshold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThresholdSpec {
    /// The resource watched.
    #[serde(flatten)]
    pub selector: Selector,
    /// The threshold value N.
    pub value: f64,
    /// Rising ("going above N") or falling ("dropping below N").
    pub direction: Direction,
    /// Re-arm distance: after firing, a rising threshold re-arms only once the value is below
    /// `N - hysteresis` (falling: at least `N + hysteresis`). 0 re-arms as soon as the value is
    /// back on the near side of N.
    #[serde(default)]
    pub hysteresis: f64,
}

impl ThresholdSpec {
    /// A rising threshold with no hysteresis.
    pub fn rising(selector: Selector, value: f64) -> Self {
        ThresholdSpec {
            selector,
            value,
            direction: Direction::Rising,
            hysteresis: 0.0,
        }
    }

    /// A falling threshold with no hysteresis.
    pub fn falling(selector: Selector, value: f64) -> Self {
        ThresholdSpec {
            selector,
            value,
            direction: Direction::Falling,
            hysteresis: 0.0,
        }
    }

    /// The same threshold with a re-arm distance.
    pub fn with_hysteresis(mut self, hysteresis: f64) -> Self {
        self.hysteresis = hysteresis;
        self
    }
}

/// A registered threshold as reported by list/get/delete.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThresholdInfo {
    pub handle: Handle,
    /// The subscriber that added it (and receives its notifications).
    pub owner: String,
    pub metric: String,
    /// `None` for a global ("every instance") threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    pub value: f64,
    pub direction: Direction,
    pub hysteresis: f64,
}

/// One threshold crossing, delivered to the threshold's owner, the log and the optional sinks.
/// Strings are shared with the index, so building one costs no string copies.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    pub handle: Handle,
    #[serde(with = "arc_str")]
    pub owner: Arc<str>,
    #[serde(with = "arc_str")]
    pub metric: Arc<str>,
    /// The instance whose value crossed (for a global threshold: the concrete instance).
    #[serde(with = "arc_str")]
    pub instance: Arc<str>,
    /// The value that crossed.
    pub value: f64,
    /// The threshold's N.
    pub threshold: f64,
    pub direction: Direction,
    /// Timestamp of the sample that crossed, nanoseconds since the Unix epoch.
    pub ts_ns: i64,
}

/// The last value seen for one resource.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurrentValue {
    pub value: f64,
    pub ts_ns: i64,
}

/// One sample for `Notifier::observe_batch`.
#[derive(Clone, Copy, Debug)]
pub struct SampleRef<'a> {
    pub metric: &'a str,
    pub instance: &'a str,
    pub value: f64,
    pub ts_ns: i64,
}

/// Errors of the notifier's operations (ingest never fails).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NotifyError {
    #[error("no threshold with handle {0}")]
    UnknownHandle(Handle),
    #[error("threshold {handle} belongs to subscriber {owner:?}, not {caller:?}")]
    NotOwner {
        handle: Handle,
        owner: String,
        caller: String,
    },
    #[error("invalid threshold: {0}")]
    Invalid(&'static str),
    #[error("all 2^32-1 threshold handles are in use")]
    HandlesExhausted,
    #[error("subscriber {0:?} is already being watched by another stream")]
    AlreadyWatched(String),
}

/// Serde for `Arc<str>` without serde's `rc` feature (which the crate does not enable).
mod arc_str {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(s: &Arc<str>, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Arc<str>, D::Error> {
        Ok(Arc::from(String::deserialize(de)?))
    }
}
