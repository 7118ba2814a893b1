//! Parser for PCP's Memory Mapped Values (MMV) files, versions 1 to 3, as written by
//! libpcp_mmv (`mmv_stats_init`, `mmv_stats2_init`, the registry API) and read by pmdammv.
//!
//! Pure Rust over a `&[u8]`: it runs inside the mmv guest, which gets a read-only view of a
//! file the host mapped. Every count and offset in the file is checked against the slice
//! before use, so a truncated, corrupt or hostile file yields an [`MmvError`] naming what is
//! wrong, never a panic or an out-of-bounds read. A file whose writer is still initialising
//! it (generation g1 == 0 or g1 != g2) is [`MmvError::Updating`]: try again later.
//!
//! Layout (all integers little-endian, as written on x86-64/aarch64 hosts):
//!
//! ```text
//! header  40  magic "MMV\0", version i32, g1 u64, g2 u64, tocs i32, flags u32, pid i32, cluster i32
//! toc     16  type i32 (1 indoms, 2 instances, 3 metrics, 4 values, 5 strings, 6 labels),
//!             count i32, offset u64
//! indom   32  serial u32, count u32, first-instance offset u64, shorttext u64, helptext u64
//! inst v1 80  indom offset u64, pad u32, internal i32, external name char[64]
//! inst v2 24  indom offset u64, pad u32, internal i32, external name string offset u64
//! metric v1 104  name char[64], item u32, type i32, semantics i32, units u32, indom i32,
//!             pad u32, shorttext u64, helptext u64
//! metric v2 48   name string offset u64, then as v1 from item on
//! value   32  atom (8 bytes: i32/u32/i64/u64/float/double), extra i64 (string offset or
//!             elapsed start), metric offset u64, instance offset u64 (0 if singular)
//! string  256 NUL-terminated payload
//! label   256 flags u32, identity u32, internal i32, JSON payload char[244] (as libpcp_mmv
//!             6.x writes it; an early v3 draft had two length fields and char[232])
//! ```
//!
//! Owns only the format; naming metrics in the PMNS and fetching are the mmv agent's.

use std::fmt;

pub const MAGIC: [u8; 4] = *b"MMV\0";
pub const HEADER_SIZE: u64 = 40;
pub const TOC_SIZE: u64 = 16;
pub const INDOM_SIZE: u64 = 32;
pub const INSTANCE1_SIZE: u64 = 80;
pub const INSTANCE2_SIZE: u64 = 24;
pub const METRIC1_SIZE: u64 = 104;
pub const METRIC2_SIZE: u64 = 48;
pub const VALUE_SIZE: u64 = 32;
pub const STRING_SIZE: u64 = 256;
pub const LABEL_SIZE: u64 = 256;
/// Inline names (v1 metrics and instances) are `char[64]`.
pub const NAME_MAX: u64 = 64;
const LABEL_PAYLOAD: u64 = 244;

/// `MMV_FLAG_NOPREFIX`: metric names are not prefixed by the file name.
pub const FLAG_NOPREFIX: u32 = 0x1;
/// `MMV_FLAG_PROCESS`: the values are only valid while process `pid` runs.
pub const FLAG_PROCESS: u32 = 0x2;
/// `MMV_FLAG_SENTINEL`: sentinel values mean "no value available".
pub const FLAG_SENTINEL: u32 = 0x4;

const TOC_INDOMS: i32 = 1;
const TOC_INSTANCES: i32 = 2;
const TOC_METRICS: i32 = 3;
const TOC_VALUES: i32 = 4;
const TOC_STRINGS: i32 = 5;
const TOC_LABELS: i32 = 6;

/// What is wrong with a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MmvError {
    /// Shorter than its header or table of contents.
    Truncated {
        what: &'static str,
        need: u64,
        have: u64,
    },
    BadMagic([u8; 4]),
    UnknownVersion(i32),
    /// The writer has not finished (re)initialising the file (g1 == 0 or g1 != g2).
    Updating {
        g1: u64,
        g2: u64,
    },
    /// A table-of-contents entry is unusable.
    BadToc {
        index: usize,
        reason: String,
    },
    /// A required section is missing.
    MissingSection(&'static str),
    /// A section, entry or string lies (partly) outside the file.
    OutOfBounds {
        what: String,
        offset: u64,
        len: u64,
        file_len: u64,
    },
    /// An offset that should point at an entry of some section does not.
    BadReference {
        what: String,
        offset: u64,
        target: &'static str,
    },
    /// A string that is not NUL-terminated within its slot, or not UTF-8.
    BadString {
        what: String,
        offset: u64,
    },
    BadMetricType {
        metric: String,
        code: i32,
    },
    BadSemantics {
        metric: String,
        code: i32,
    },
    /// A metric names an instance domain the file does not define.
    UnknownIndom {
        metric: String,
        serial: u32,
    },
}

impl fmt::Display for MmvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MmvError::Truncated { what, need, have } => {
                write!(
                    f,
                    "MMV file truncated: {what} needs {need} bytes, file has {have}"
                )
            }
            MmvError::BadMagic(m) => write!(f, "not an MMV file: magic {m:02x?}"),
            MmvError::UnknownVersion(v) => write!(f, "unsupported MMV version {v} (know 1 to 3)"),
            MmvError::Updating { g1, g2 } => {
                write!(
                    f,
                    "MMV file being (re)initialised by its writer (generation {g1} vs {g2})"
                )
            }
            MmvError::BadToc { index, reason } => {
                write!(f, "MMV table of contents entry {index}: {reason}")
            }
            MmvError::MissingSection(s) => write!(f, "MMV file has no {s} section"),
            MmvError::OutOfBounds {
                what,
                offset,
                len,
                file_len,
            } => write!(
                f,
                "MMV {what} at offset {offset} (+{len} bytes) lies outside the file ({file_len} bytes)"
            ),
            MmvError::BadReference {
                what,
                offset,
                target,
            } => {
                write!(
                    f,
                    "MMV {what} refers to offset {offset}, which is not an entry of the {target} section"
                )
            }
            MmvError::BadString { what, offset } => {
                write!(
                    f,
                    "MMV {what} at offset {offset} is not a NUL-terminated UTF-8 string"
                )
            }
            MmvError::BadMetricType { metric, code } => {
                write!(f, "MMV metric {metric:?} has unknown type {code}")
            }
            MmvError::BadSemantics { metric, code } => {
                write!(f, "MMV metric {metric:?} has unknown semantics {code}")
            }
            MmvError::UnknownIndom { metric, serial } => {
                write!(
                    f,
                    "MMV metric {metric:?} uses instance domain {serial}, which the file does not define"
                )
            }
        }
    }
}

impl std::error::Error for MmvError {}

/// `mmv_metric_type_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetricType {
    NoSupport,
    I32,
    U32,
    I64,
    U64,
    Float,
    Double,
    String,
    /// Accumulated microseconds, with an interval possibly in progress (pmdammv exports it as
    /// a 64-bit counter in microseconds).
    Elapsed,
}

impl MetricType {
    fn from_code(code: i32) -> Option<MetricType> {
        Some(match code {
            -1 => MetricType::NoSupport,
            0 => MetricType::I32,
            1 => MetricType::U32,
            2 => MetricType::I64,
            3 => MetricType::U64,
            4 => MetricType::Float,
            5 => MetricType::Double,
            6 => MetricType::String,
            9 => MetricType::Elapsed,
            _ => return None,
        })
    }
}

/// `mmv_metric_sem_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Semantics {
    Counter,
    Instant,
    Discrete,
}

/// PCP's `pmUnits`: dimensions (signed powers) and scales.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Units {
    pub dim_space: i8,
    pub dim_time: i8,
    pub dim_count: i8,
    /// `PM_SPACE_*`: 0 byte, 1 Kbyte, ... 8 Ybyte.
    pub scale_space: u8,
    /// `PM_TIME_*`: 0 nsec, 1 usec, 2 msec, 3 sec, 4 min, 5 hour.
    pub scale_time: u8,
    /// Power of ten.
    pub scale_count: i8,
}

fn nibble_signed(v: u32) -> i8 {
    let n = (v & 0xf) as i8;
    if n >= 8 { n - 16 } else { n }
}

impl Units {
    /// Decodes the 32-bit bitfield as gcc lays it out on little-endian hosts (first field in
    /// the lowest bits: pad:8, scaleCount:4, scaleTime:4, scaleSpace:4, dimCount:4, dimTime:4,
    /// dimSpace:4).
    pub fn from_raw(raw: u32) -> Units {
        Units {
            scale_count: nibble_signed(raw >> 8),
            scale_time: ((raw >> 12) & 0xf) as u8,
            scale_space: ((raw >> 16) & 0xf) as u8,
            dim_count: nibble_signed(raw >> 20),
            dim_time: nibble_signed(raw >> 24),
            dim_space: nibble_signed(raw >> 28),
        }
    }
}

impl fmt::Display for Units {
    /// Close to PCP's `pmUnitsStr`: "Kbyte", "millisec", "byte / sec", "count x 10^3", ""
    /// for a dimensionless value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SPACE: [&str; 9] = [
            "byte", "Kbyte", "Mbyte", "Gbyte", "Tbyte", "Pbyte", "Ebyte", "Zbyte", "Ybyte",
        ];
        const TIME: [&str; 6] = ["nanosec", "microsec", "millisec", "sec", "min", "hour"];
        let space = SPACE
            .get(self.scale_space as usize)
            .copied()
            .unwrap_or("?byte");
        let time = TIME
            .get(self.scale_time as usize)
            .copied()
            .unwrap_or("?sec");
        let count = if self.scale_count == 0 {
            "count".to_string()
        } else {
            format!("count x 10^{}", self.scale_count)
        };
        let parts = [
            (self.dim_space, space.to_string()),
            (self.dim_time, time.to_string()),
            (self.dim_count, count),
        ];
        let term = |(d, name): &(i8, String)| {
            if d.abs() > 1 {
                format!("{name}^{}", d.abs())
            } else {
                name.clone()
            }
        };
        let num: Vec<String> = parts.iter().filter(|p| p.0 > 0).map(term).collect();
        let den: Vec<String> = parts.iter().filter(|p| p.0 < 0).map(term).collect();
        match (num.is_empty(), den.is_empty()) {
            (true, true) => Ok(()),
            (false, true) => write!(f, "{}", num.join(" ")),
            (true, false) => write!(f, "/ {}", den.join(" ")),
            (false, false) => write!(f, "{} / {}", num.join(" "), den.join(" ")),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub internal: i32,
    pub external: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Indom {
    pub serial: u32,
    pub instances: Vec<Instance>,
    pub shorttext: Option<String>,
    pub helptext: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metric {
    /// As in the file (pmdammv prefixes it with `mmv.<file>.` unless `FLAG_NOPREFIX`).
    pub name: String,
    pub item: u32,
    pub mtype: MetricType,
    pub semantics: Semantics,
    pub units: Units,
    /// Instance domain serial; `None` when singular (0 or PM_INDOM_NULL in the file).
    pub indom: Option<u32>,
    pub shorttext: Option<String>,
    pub helptext: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum MmvValue {
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    Float(f32),
    Double(f64),
    String(String),
    /// `total_us` accumulated; `started_us` is the start time (µs since the epoch) of an
    /// interval still running.
    Elapsed {
        total_us: i64,
        started_us: Option<i64>,
    },
    NoSupport,
}

impl MmvValue {
    /// The value as a number; elapsed time includes a running interval up to `now_us`
    /// (µs since the epoch), as pmdammv computes it at fetch time. Strings have none.
    pub fn as_f64(&self, now_us: i64) -> Option<f64> {
        Some(match self {
            MmvValue::I32(v) => *v as f64,
            MmvValue::U32(v) => *v as f64,
            MmvValue::I64(v) => *v as f64,
            MmvValue::U64(v) => *v as f64,
            MmvValue::Float(v) => *v as f64,
            MmvValue::Double(v) => *v,
            MmvValue::Elapsed { .. } => self.elapsed_us(now_us)? as f64,
            MmvValue::String(_) | MmvValue::NoSupport => return None,
        })
    }

    /// An elapsed value's microseconds, a running interval counted up to `now_us`.
    pub fn elapsed_us(&self, now_us: i64) -> Option<i64> {
        match self {
            MmvValue::Elapsed {
                total_us,
                started_us,
            } => Some(total_us.saturating_add(started_us.map_or(0, |s| now_us.saturating_sub(s)))),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// Index into [`MmvFile::metrics`].
    pub metric: usize,
    /// Instance (internal id, external name); `None` for a singular metric.
    pub instance: Option<Instance>,
    pub value: MmvValue,
}

/// A v3 label (JSON `{"name":value}` payload), attached per `flags` to the cluster, an
/// indom, a metric item or an instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub flags: u32,
    pub identity: u32,
    pub internal: i32,
    pub payload: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MmvFile {
    pub version: u32,
    pub generation: u64,
    pub flags: u32,
    pub process: i32,
    pub cluster: u32,
    pub indoms: Vec<Indom>,
    pub metrics: Vec<Metric>,
    pub values: Vec<Value>,
    pub labels: Vec<Label>,
}

impl MmvFile {
    pub fn metric(&self, name: &str) -> Option<(usize, &Metric)> {
        self.metrics
            .iter()
            .enumerate()
            .find(|(_, m)| m.name == name)
    }

    /// The value of `metric` for `instance` (`None` for singular metrics).
    pub fn value(&self, metric: &str, instance: Option<&str>) -> Option<&MmvValue> {
        let (i, _) = self.metric(metric)?;
        self.values
            .iter()
            .find(|v| v.metric == i && v.instance.as_ref().map(|x| x.external.as_str()) == instance)
            .map(|v| &v.value)
    }

    /// Values of one metric, in file order.
    pub fn values_of(&self, metric: usize) -> impl Iterator<Item = &Value> {
        self.values.iter().filter(move |v| v.metric == metric)
    }
}

/// Reads the generation without parsing the rest: a cheap "has the file been recreated?"
/// check between fetches. `None` if the header is unreadable.
pub fn generation(bytes: &[u8]) -> Option<(u64, u64)> {
    Some((rd_u64(bytes, 8)?, rd_u64(bytes, 16)?))
}

#[path = "format/parse.rs"]
mod parse;
pub use parse::parse;

fn rd_u32(b: &[u8], off: u64) -> Option<u32> {
    let off = usize::try_from(off).ok()?;
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes(s.try_into().ok()?))
}

fn rd_u64(b: &[u8], off: u64) -> Option<u64> {
    let off = usize::try_from(off).ok()?;
    let s = b.get(off..off.checked_add(8)?)?;
    Some(u64::from_le_bytes(s.try_into().ok()?))
}

#[cfg(test)]
#[path = "format/tests.rs"]
mod tests;
#[cfg(test)]
#[path = "format/tests_pcp.rs"]
mod tests_pcp;
