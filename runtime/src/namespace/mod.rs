//! `runtime::namespace`: the Performance Metrics Name Space (PMNS) as PCP defines it, with
//! dynamic subtrees delegated to agents (PCP's dynamic namespace proposal, 2009).
//!
//! - [`types`]: PMIDs, errors with PCP's codes, the [`Agent`] contract;
//! - [`pmns`]: the ASCII pmns format;
//! - [`tree`]: the loaded [`Namespace`] and how it is built;
//! - [`query`]: lookup / names-of / children / traverse, local and delegated;
//! - [`delegate`]: how a query reaches the agent behind a dynamic subtree;
//!
//! This module refers to nothing else in the crate; the daemon owns the agents and the
//! host wraps WASM agents in [`Agent`] implementations.

pub mod delegate;
pub mod pmns;
pub mod query;
pub mod tree;
pub mod types;

#[cfg(test)]
mod tests;

pub use delegate::{Delegates, Single};
pub use pmns::{PmnsError, children_of};
pub use query::Traversal;
pub use tree::{Namespace, NamespaceBuilder};
pub use types::{
    Agent, Child, LabelsOf, MetricDesc, NsError, Pmid, Semantics, Value, ValueType, Values,
};
