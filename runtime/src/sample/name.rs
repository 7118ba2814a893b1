//! Interned metric names and units. A [`Name`] is one pointer: copying, comparing and dropping
//! it touches no reference count, which matters because every sample carries two of them and
//! samples are cloned and dropped at every hop (an atomic increment and decrement per `Arc`
//! field was most of what decoding a guest's output cost). Names and units are a schema, not
//! data: a daemon sees a few thousand of them, so they are kept for the life of the process.
//! Resources, which can be unbounded (pids, job ids), stay reference-counted `Arc<str>`s.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, RwLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Distinct names the process interns before [`Name::try_new`] refuses new ones (guests' output
/// goes through it) and [`Name::new`] warns. A million names is far past any real schema and
/// about 60 MB: a source minting a name per sample is broken, and this bounds what it costs.
pub const MAX_NAMES: usize = 1 << 20;

/// An interned string: equal names are the same pointer.
#[derive(Clone, Copy)]
pub struct Name(&'static Entry);

struct Entry {
    /// Position in the interner: lets per-guest tables map names by index, without hashing.
    index: u32,
    text: &'static str,
}

/// Every name so far. Reads (a name seen before) share the lock; only a new name writes.
struct Interner {
    by_text: HashMap<&'static str, Name, foldhash::fast::FixedState>,
}

static EMPTY: Entry = Entry { index: 0, text: "" };

static INTERNER: LazyLock<RwLock<Interner>> = LazyLock::new(|| {
    let mut by_text = HashMap::default();
    by_text.insert("", Name(&EMPTY));
    RwLock::new(Interner { by_text })
});

static WARNED_FULL: AtomicBool = AtomicBool::new(false);

/// [`Name::try_new`] refused a new name: the interner holds [`MAX_NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the daemon already holds {MAX_NAMES} distinct metric names and units; refusing {0:?}")]
pub struct NamesFull(pub String);

impl Name {
    /// The empty name (a sample without a unit).
    pub const EMPTY: Name = Name(&EMPTY);

    /// Interns `text`. Past [`MAX_NAMES`] it still does, and logs one warning.
    pub fn new(text: &str) -> Name {
        Self::intern(text, true).expect("interning is not refused when forced")
    }

    /// `text` if it is interned already (interns nothing).
    pub fn get(text: &str) -> Option<Name> {
        read().by_text.get(text).copied()
    }

    /// Interns `text` unless it is new and the interner is full.
    pub fn try_new(text: &str) -> Result<Name, NamesFull> {
        Self::intern(text, false)
    }

    fn intern(text: &str, force: bool) -> Result<Name, NamesFull> {
        if let Some(&n) = read().by_text.get(text) {
            return Ok(n);
        }
        let mut w = crate::util::write(&INTERNER);
        if let Some(&n) = w.by_text.get(text) {
            return Ok(n);
        }
        let len = w.by_text.len();
        if len >= MAX_NAMES {
            if !force {
                return Err(NamesFull(text.to_string()));
            }
            if !WARNED_FULL.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    names = len,
                    "more than {MAX_NAMES} distinct metric names and units: a source is minting names from data"
                );
            }
        }
        let text: &'static str = Box::leak(text.into());
        let entry: &'static Entry = Box::leak(Box::new(Entry {
            index: len as u32,
            text,
        }));
        w.by_text.insert(text, Name(entry));
        Ok(Name(entry))
    }

    pub fn as_str(self) -> &'static str {
        self.0.text
    }

    /// Dense, from 0 (the empty name): an index into per-table arrays.
    pub(crate) fn index(self) -> usize {
        self.0.index as usize
    }

    /// Names interned so far (the empty one included).
    pub fn count() -> usize {
        read().by_text.len()
    }
}

fn read() -> std::sync::RwLockReadGuard<'static, Interner> {
    crate::util::read(&INTERNER)
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.0.text
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.0.text
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.0.text == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.0.text == *other
    }
}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.text.hash(state)
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.0.text.cmp(other.0.text)
    }
}

impl Default for Name {
    fn default() -> Name {
        Name::EMPTY
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.text, f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.text)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Name {
        Name::new(s)
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Name {
        Name::new(s)
    }
}

impl From<String> for Name {
    fn from(s: String) -> Name {
        Name::new(&s)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.text)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Name::new(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_text_is_the_same_name() {
        let a = Name::new("cpu.util");
        let b = Name::from(String::from("cpu.util"));
        assert_eq!(a, b);
        assert_eq!(a.index(), b.index());
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        assert_ne!(a, Name::new("cpu.idle"));
        assert_eq!(Name::new(""), Name::EMPTY);
        assert_eq!(Name::EMPTY.index(), 0);
        assert_eq!(a, "cpu.util");
        assert_eq!(format!("{a} {a:?}"), "cpu.util \"cpu.util\"");
    }

    #[test]
    fn indexes_are_dense_and_names_round_trip_through_serde() {
        let n: Name = serde_json::from_str("\"name.rs-test\"").unwrap();
        assert!(n.index() < Name::count());
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"name.rs-test\"");
        assert_eq!(Name::try_new("name.rs-test"), Ok(n));
    }
}
