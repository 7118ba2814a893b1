//! How the namespace reaches the agent behind a dynamic subtree. The daemon owns the agents
//! (native ones and the host's wrappers around WASM guests), keyed by domain; the namespace
//! only borrows one for the duration of a call.
//!
//! Owns the [`Delegates`] trait and its implementations for ordinary maps; touches nothing
//! else.

use super::types::Agent;
use std::collections::{BTreeMap, HashMap};

/// The agents a namespace query may delegate to. Passing `None` instead of a `Delegates`
/// to a query is PCP's local mode (`PMNS_LOCAL`): dynamic subtrees are not expanded.
pub trait Delegates {
    /// The agent serving `domain`, or `None` when none is attached (the query then answers
    /// [`NsError::NoAgent`](super::types::NsError::NoAgent)). An implementation that finds
    /// its agent trapped returns `None`, or an agent whose calls answer `NoAgent`.
    fn agent(&mut self, domain: u32) -> Option<&mut dyn Agent>;
}

impl Delegates for HashMap<u32, Box<dyn Agent>> {
    fn agent(&mut self, domain: u32) -> Option<&mut dyn Agent> {
        Some(self.get_mut(&domain)?.as_mut())
    }
}

impl Delegates for BTreeMap<u32, Box<dyn Agent>> {
    fn agent(&mut self, domain: u32) -> Option<&mut dyn Agent> {
        Some(self.get_mut(&domain)?.as_mut())
    }
}

impl Delegates for Vec<(u32, Box<dyn Agent>)> {
    fn agent(&mut self, domain: u32) -> Option<&mut dyn Agent> {
        Some(self.iter_mut().find(|(d, _)| *d == domain)?.1.as_mut())
    }
}

/// One agent for one domain: handy where a caller has a single agent at hand.
pub struct Single<'a> {
    pub domain: u32,
    pub agent: &'a mut dyn Agent,
}

impl Delegates for Single<'_> {
    fn agent(&mut self, domain: u32) -> Option<&mut dyn Agent> {
        (domain == self.domain).then_some(&mut *self.agent)
    }
}
