//! Read selectors: a path through the level tree where each element names one child, a group
//! of children, or any child (cc-metric-store's `Selector`).

use serde::{Deserialize, Serialize};

/// One step of a read selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SelectorElement {
    /// Exactly this child (e.g. `"hwthread3"`).
    Name(String),
    /// Each of these children; their series are combined.
    Group(Vec<String>),
    /// Every child (`"*"` in the JSON form is not special; use this variant).
    #[serde(skip)]
    Any,
}

impl From<&str> for SelectorElement {
    fn from(s: &str) -> Self {
        SelectorElement::Name(s.to_string())
    }
}

impl From<String> for SelectorElement {
    fn from(s: String) -> Self {
        SelectorElement::Name(s)
    }
}

/// Builds a selector of exact names, e.g. `selector(&["alex", "a903", "hwthread1"])`.
pub fn selector(path: &[&str]) -> Vec<SelectorElement> {
    path.iter().map(|s| SelectorElement::from(*s)).collect()
}
