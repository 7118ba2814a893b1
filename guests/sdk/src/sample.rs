//! The guest-side view of a sample. Strings are reference-counted and shared between samples:
//! decoding a batch allocates each distinct string once, and cloning a sample never copies text.

use std::rc::Rc;

/// A shared, immutable string.
pub type Str = Rc<str>;

thread_local! {
    static ATOMS: std::cell::RefCell<std::collections::HashSet<Str, crate::FxBuildHasher>> =
        Default::default();
}

/// The one shared allocation of `text` for strings a transformer compares samples against
/// (meter names, targets): the host's strings of the same text decode to this very `Rc`, so
/// [`crate::same`] and [`crate::Key`] answer by comparing addresses, not bytes. Call it at
/// configure time: what it holds lives as long as the instance.
pub fn intern(text: &str) -> Str {
    ATOMS.with(|atoms| {
        let mut atoms = atoms.borrow_mut();
        match atoms.get(text) {
            Some(s) => s.clone(),
            None => {
                let s = Str::from(text);
                atoms.insert(s.clone());
                s
            }
        }
    })
}

/// `text` as a `Str`, the interned allocation if there is one.
pub(crate) fn from_host(text: String) -> Str {
    ATOMS
        .with(|atoms| atoms.borrow().get(text.as_str()).cloned())
        .unwrap_or_else(|| Str::from(text))
}

/// How a sample's value relates to earlier ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Gauge,
    Delta,
    Cumulative,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Gauge => "gauge",
            Kind::Delta => "delta",
            Kind::Cumulative => "cumulative",
        }
    }

    /// Parses `gauge`, `delta` or `cumulative`.
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "gauge" => Some(Kind::Gauge),
            "delta" => Some(Kind::Delta),
            "cumulative" => Some(Kind::Cumulative),
            _ => None,
        }
    }
}

/// A sample's metadata (Ceilometer's `resource_metadata`): key/value pairs, shared between the
/// samples of one batch that carry the same set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata(pub Rc<[(Str, Str)]>);

impl Metadata {
    pub fn new(pairs: Vec<(Str, Str)>) -> Metadata {
        Metadata(pairs.into())
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| &**k == key).map(|(_, v)| &**v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One sample, as a transformer sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: Str,
    pub resource: Str,
    pub unit: Str,
    pub kind: Kind,
    pub value: f64,
    /// Nanoseconds since the Unix epoch.
    pub timestamp_ns: i64,
    pub metadata: Metadata,
}

impl Sample {
    /// A sample with no unit and no metadata (handy in tests).
    pub fn new(name: &str, resource: &str, kind: Kind, value: f64, timestamp_ns: i64) -> Sample {
        Sample {
            name: name.into(),
            resource: resource.into(),
            unit: "".into(),
            kind,
            value,
            timestamp_ns,
            metadata: Metadata::default(),
        }
    }

    pub fn with_unit(mut self, unit: &str) -> Sample {
        self.unit = unit.into();
        self
    }

    pub fn with_metadata(mut self, pairs: &[(&str, &str)]) -> Sample {
        self.metadata = Metadata::new(
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        );
        self
    }
}
