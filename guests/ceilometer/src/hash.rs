//! Hash maps for the per-sample cache lookups (keys are meter and resource names), with the
//! SDK's FxHasher: SipHash's flood resistance buys nothing here (the keys come from the host's
//! own samples), and hashing is on the hot path of every transformer.

pub(crate) use wasmon_guest::{Key, same};

pub(crate) type FxHashMap<K, V> = std::collections::HashMap<K, V, wasmon_guest::FxBuildHasher>;
