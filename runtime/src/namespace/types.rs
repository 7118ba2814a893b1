//! The PMNS vocabulary: PMIDs (PCP's `domain.cluster.item`, with the dynamic-root marker
//! `D.*.*`), namespace errors with PCP's codes and messages, and the [`Agent`] contract that
//! native agents implement and WASM agents mirror through the WIT `namespace`/`metrics` interfaces.
//!
//! Owns only these types; refers to nothing else in the crate.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Largest domain an agent may have: 9 bits, with 511 reserved for dynamic-root markers
/// (PCP's `DYNAMIC_PMID`).
pub const MAX_DOMAIN: u32 = 510;
/// Cluster field: 12 bits.
pub const MAX_CLUSTER: u32 = 4095;
/// Item field: 10 bits.
pub const MAX_ITEM: u32 = 1023;
/// The reserved domain that marks a dynamic-subtree root. As in current PCP, the real domain of
/// the agent is kept in the cluster field and the item is 0 (the 2009 proposal used a spare
/// "dynamic" bit instead; PCP settled on this encoding, which needs no extra bit).
pub const DYNAMIC_DOMAIN: u32 = 511;

/// A performance metric identifier: which agent (domain), and which metric within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Pmid {
    pub domain: u32,
    pub cluster: u32,
    pub item: u32,
}

impl Pmid {
    /// A checked PMID of a real metric (not a dynamic-root marker).
    pub fn new(domain: u32, cluster: u32, item: u32) -> Result<Pmid, NsError> {
        let id = Pmid {
            domain,
            cluster,
            item,
        };
        if domain > MAX_DOMAIN || cluster > MAX_CLUSTER || item > MAX_ITEM {
            return Err(NsError::UnknownPmid);
        }
        Ok(id)
    }

    /// The marker PCP gives the node at the root of a subtree whose names `domain`'s agent
    /// resolves (`44:*:*` in a pmns file, shown `44.*.*`).
    pub const fn dynamic_root(domain: u32) -> Pmid {
        Pmid {
            domain: DYNAMIC_DOMAIN,
            cluster: domain,
            item: 0,
        }
    }

    pub const fn is_dynamic_root(&self) -> bool {
        self.domain == DYNAMIC_DOMAIN && self.item == 0
    }

    /// The domain of the agent that answers for this PMID (the marker's cluster for a
    /// dynamic root).
    pub const fn agent_domain(&self) -> u32 {
        if self.is_dynamic_root() {
            self.cluster
        } else {
            self.domain
        }
    }

    /// True when every field fits PCP's bit widths.
    pub const fn is_valid(&self) -> bool {
        self.domain <= DYNAMIC_DOMAIN && self.cluster <= MAX_CLUSTER && self.item <= MAX_ITEM
    }

    /// PCP's 32-bit packing (domain:9, cluster:12, item:10, top bit clear): what goes on
    /// the wire and into archives.
    pub const fn to_raw(&self) -> u32 {
        ((self.domain & 0x1ff) << 22) | ((self.cluster & 0xfff) << 10) | (self.item & 0x3ff)
    }

    pub const fn from_raw(raw: u32) -> Pmid {
        Pmid {
            domain: (raw >> 22) & 0x1ff,
            cluster: (raw >> 10) & 0xfff,
            item: raw & 0x3ff,
        }
    }
}

impl fmt::Display for Pmid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_dynamic_root() {
            write!(f, "{}.*.*", self.cluster)
        } else {
            write!(f, "{}.{}.{}", self.domain, self.cluster, self.item)
        }
    }
}

/// Why a PMID string did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PmidParseError {
    #[error("PMID {0:?}: expected domain.cluster.item or domain:cluster:item")]
    Shape(String),
    #[error("PMID {0:?}: domain must be 0..={MAX_DOMAIN}")]
    Domain(String),
    #[error("PMID {0:?}: cluster must be 0..={MAX_CLUSTER}")]
    Cluster(String),
    #[error("PMID {0:?}: item must be 0..={MAX_ITEM}")]
    Item(String),
}

impl FromStr for Pmid {
    type Err = PmidParseError;

    /// Accepts `44.0.1`, `44:0:1`, and the dynamic-root forms `44:*:*` / `44.*.*`
    /// (one separator throughout; surrounding whitespace ignored).
    fn from_str(s: &str) -> Result<Pmid, PmidParseError> {
        let t = s.trim();
        let sep = if t.contains(':') { ':' } else { '.' };
        let mut parts = t.split(sep);
        let (Some(d), Some(c), Some(i), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(PmidParseError::Shape(s.to_string()));
        };
        let num = |p: &str| -> Option<u32> {
            if p.is_empty() || p.len() > 9 || !p.bytes().all(|b| b.is_ascii_digit()) {
                None
            } else {
                p.parse().ok()
            }
        };
        let domain = num(d.trim()).ok_or_else(|| PmidParseError::Shape(s.to_string()))?;
        if domain > MAX_DOMAIN {
            return Err(PmidParseError::Domain(s.to_string()));
        }
        if c.trim() == "*" && i.trim() == "*" {
            return Ok(Pmid::dynamic_root(domain));
        }
        let cluster = num(c.trim()).ok_or_else(|| PmidParseError::Shape(s.to_string()))?;
        let item = num(i.trim()).ok_or_else(|| PmidParseError::Shape(s.to_string()))?;
        if cluster > MAX_CLUSTER {
            return Err(PmidParseError::Cluster(s.to_string()));
        }
        if item > MAX_ITEM {
            return Err(PmidParseError::Item(s.to_string()));
        }
        Ok(Pmid {
            domain,
            cluster,
            item,
        })
    }
}

/// PCP's error base (`PM_ERR_BASE`): PMAPI codes are `-(PM_ERR_BASE + n)`.
pub const PM_ERR_BASE: i32 = 12345;
pub const PM_ERR_GENERIC: i32 = -PM_ERR_BASE;
pub const PM_ERR_PMNS: i32 = -PM_ERR_BASE - 1;
pub const PM_ERR_APPVERSION: i32 = -PM_ERR_BASE - 5;
pub const PM_ERR_NAME: i32 = -PM_ERR_BASE - 12;
pub const PM_ERR_PMID: i32 = -PM_ERR_BASE - 13;
pub const PM_ERR_NOAGENT: i32 = -PM_ERR_BASE - 41;
pub const PM_ERR_NONLEAF: i32 = -PM_ERR_BASE - 49;

/// A namespace answer that is not a result. Display is PCP's `pmErrStr` text, checked
/// against libpcp 6.0.3.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum NsError {
    #[error("Unknown metric name")]
    UnknownName,
    #[error("Metric name is not a leaf in PMNS")]
    NonLeaf,
    #[error("Unknown or illegal metric identifier")]
    UnknownPmid,
    /// The agent for the domain is absent, or trapped while answering.
    #[error("No PMCD agent for domain of request")]
    NoAgent,
    /// The agent knows the metric but the monitored system no longer provides it (PCP's
    /// `PM_ERR_APPVERSION`: `swap.in` on Linux 2.6+).
    #[error("Metric not supported by this version of monitored application")]
    AppVersion,
    #[error("{0}")]
    Other(String),
}

impl NsError {
    /// PCP's numeric code (`PM_ERR_*`); `Other` maps to `PM_ERR_GENERIC`.
    pub fn code(&self) -> i32 {
        match self {
            NsError::UnknownName => PM_ERR_NAME,
            NsError::NonLeaf => PM_ERR_NONLEAF,
            NsError::UnknownPmid => PM_ERR_PMID,
            NsError::NoAgent => PM_ERR_NOAGENT,
            NsError::AppVersion => PM_ERR_APPVERSION,
            NsError::Other(_) => PM_ERR_GENERIC,
        }
    }
}

/// One entry of a children listing (`pmGetChildrenStatus`): the last name component, and
/// whether it is a leaf (`PMNS_LEAF_STATUS`) or may have descendants (dynamic roots are not
/// leaves).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Child {
    pub name: String,
    pub leaf: bool,
}

/// PCP's value semantics (`PM_SEM_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Semantics {
    Counter,
    Instant,
    Discrete,
}

/// What `describe` tells about a metric (PCP's `pmDesc` plus its one-line help).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricDesc {
    pub id: Pmid,
    pub semantics: Semantics,
    /// Units as PCP's `pmUnitsStr` writes them ("Kbyte", "millisec", "byte", "" for none).
    pub units: String,
    /// Instance domain serial, `None` for singular metrics.
    pub indom: Option<u32>,
    pub help: String,
    /// PCP's data type of the values.
    #[serde(default, rename = "type")]
    pub value_type: ValueType,
}

/// One value of a metric. Integers stay integers so that a 64-bit counter past 2^53 keeps
/// every digit on PCP's wire; everything that stores numbers (samples, the store) takes
/// [`Value::as_f64`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Int(i64),
    Uint(u64),
    Real(f64),
    Text(String),
}

impl Value {
    /// The value as a number; `None` for text.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Int(i) => Some(i as f64),
            Value::Uint(u) => Some(u as f64),
            Value::Real(f) => Some(f),
            Value::Text(_) => None,
        }
    }

    /// The value in the case `ty` calls for: integers from reals are rounded (and saturate,
    /// NaN becoming 0, as Rust's `as` does), reals from integers are exact up to 2^53. `None`
    /// when a number is given for a text metric or text for a number.
    pub fn conform(self, ty: ValueType) -> Option<Value> {
        use ValueType as T;
        Some(match (ty, self) {
            (T::String, v @ Value::Text(_)) => v,
            (T::String, _) | (_, Value::Text(_)) => return None,
            (T::Float | T::Double, v) => Value::Real(v.as_f64()?),
            (T::I32 | T::I64, Value::Int(i)) => Value::Int(i),
            (T::I32 | T::I64, Value::Uint(u)) => Value::Int(i64::try_from(u).unwrap_or(i64::MAX)),
            (T::I32 | T::I64, Value::Real(f)) => Value::Int(f.round() as i64),
            (T::U32 | T::U64, Value::Uint(u)) => Value::Uint(u),
            (T::U32 | T::U64, Value::Int(i)) => Value::Uint(u64::try_from(i).unwrap_or(0)),
            (T::U32 | T::U64, Value::Real(f)) => Value::Uint(f.round() as u64),
        })
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Value {
        Value::Real(f)
    }
}

/// Values of one metric: (instance name, "" when singular; value).
pub type Values = Vec<(String, Value)>;

/// PCP's data type of a metric's values (`pmDesc.type`, `PM_TYPE_*`): what PCP clients are
/// told, how a value is laid out on PCP's wire, and which [`Value`] case it takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueType {
    I32,
    U32,
    I64,
    U64,
    Float,
    #[default]
    Double,
    String,
}

/// What labels are asked of an agent ([`Agent::labels`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelsOf<'a> {
    /// A metric (PCP's PM_LABEL_ITEM).
    Item(Pmid),
    /// An instance domain, by serial (PM_LABEL_INDOM).
    Indom(u32),
    /// One instance of an instance domain, by name (PM_LABEL_INSTANCES).
    Instance(u32, &'a str),
}

/// What an agent answers: the three PMDA_INTERFACE_4 namespace callbacks for the dynamic
/// subtrees it owns, plus description and fetch. Agents built into the daemon implement it
/// directly; the host wraps each WASM agent in an implementation that calls the guest and
/// turns a trap into [`NsError::NoAgent`].
pub trait Agent: Send {
    /// PMID of a full dotted name (`foo.count.ops`).
    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError>;
    /// Every full name of a PMID.
    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError>;
    /// Children of a full dotted name, with leaf status.
    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError>;
    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError>;
    /// One entry per requested id, in order.
    fn fetch(&mut self, ids: &[Pmid]) -> Vec<(Pmid, Result<Values, NsError>)>;
    /// Ends a quarantine the agent is in, if it can be in one (the operator asked).
    fn release(&mut self) {}
    /// The agent's name in PCP's domain label (`{"agent":"linux"}`, as libpcp_pmda gives each
    /// PMDA's name without its `pmda` prefix).
    fn label_name(&self) -> Option<String> {
        None
    }
    /// Labels the agent states (PCP's `pmdaLabel`) for a metric, an instance domain or one
    /// of its instances: (name, value).
    fn labels(&mut self, _of: LabelsOf) -> Vec<(String, serde_json::Value)> {
        Vec::new()
    }
    /// PCP's fixed instance identifier of an instance name of indom serial `indom`, when the
    /// agent has one (`cpu3` is 3 in PCP's linux PMDA); `None`: the PCP server numbers
    /// instances itself, in the order it first sees them.
    fn instance_id(&mut self, _indom: u32, _name: &str) -> Option<u32> {
        None
    }
    /// Every instance name of indom serial `indom` now, when the agent can list them without
    /// a metric (PCP's `pmdaInstance`); `None`: the server lists the instances of one of the
    /// indom's metrics instead.
    fn instances(&mut self, _indom: u32) -> Option<Vec<String>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmid_display_and_parse() {
        let p: Pmid = "44.0.1".parse().unwrap();
        assert_eq!(
            p,
            Pmid {
                domain: 44,
                cluster: 0,
                item: 1
            }
        );
        assert_eq!(p.to_string(), "44.0.1");
        assert_eq!("44:0:1".parse::<Pmid>().unwrap(), p);
        assert_eq!(" 44 : 0 : 1 ".parse::<Pmid>().unwrap(), p);
        let d: Pmid = "44:*:*".parse().unwrap();
        assert!(d.is_dynamic_root());
        assert_eq!(d.agent_domain(), 44);
        assert_eq!(d.to_string(), "44.*.*");
        assert_eq!("44.*.*".parse::<Pmid>().unwrap(), d);
        assert_eq!(Pmid::from_raw(p.to_raw()), p);
        assert_eq!(Pmid::from_raw(d.to_raw()), d);
        // PCP's packing: 60.1.58 is 0x0f000000 | 1<<10 | 58.
        assert_eq!(
            Pmid {
                domain: 60,
                cluster: 1,
                item: 58
            }
            .to_raw(),
            (60 << 22) | (1 << 10) | 58
        );
    }

    #[test]
    fn pmid_limits() {
        // Each bad text with the part it names: domain, cluster, item, or the shape.
        type Names = fn(&PmidParseError) -> bool;
        let refused: [(&str, Names); 8] = [
            ("511.0.0", |e| matches!(e, PmidParseError::Domain(_))),
            ("1.4096.0", |e| matches!(e, PmidParseError::Cluster(_))),
            ("1.0.1024", |e| matches!(e, PmidParseError::Item(_))),
            ("1.0", |e| matches!(e, PmidParseError::Shape(_))),
            ("1.0.1.2", |e| matches!(e, PmidParseError::Shape(_))),
            ("1:0.1", |e| matches!(e, PmidParseError::Shape(_))),
            ("1.*.3", |e| matches!(e, PmidParseError::Shape(_))),
            ("-1.0.0", |e| matches!(e, PmidParseError::Shape(_))),
        ];
        for (text, names) in refused {
            let got = text.parse::<Pmid>();
            assert!(got.as_ref().is_err_and(names), "{text}: {got:?}");
        }
        assert!("510.4095.1023".parse::<Pmid>().is_ok());
        assert!(Pmid::new(511, 0, 0).is_err());
    }

    #[test]
    fn errors_have_pcp_codes_and_messages() {
        assert_eq!(NsError::UnknownName.code(), -12357);
        assert_eq!(NsError::UnknownPmid.code(), -12358);
        assert_eq!(NsError::NoAgent.code(), -12386);
        assert_eq!(NsError::AppVersion.code(), -12350);
        assert_eq!(NsError::NonLeaf.code(), -12394);
        assert_eq!(NsError::Other("x".into()).code(), -12345);
        assert_eq!(NsError::UnknownName.to_string(), "Unknown metric name");
        assert_eq!(
            NsError::NonLeaf.to_string(),
            "Metric name is not a leaf in PMNS"
        );
        assert_eq!(
            NsError::UnknownPmid.to_string(),
            "Unknown or illegal metric identifier"
        );
        assert_eq!(
            NsError::NoAgent.to_string(),
            "No PMCD agent for domain of request"
        );
    }
}
