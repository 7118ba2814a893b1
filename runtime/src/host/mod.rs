//! `host` narrows wasmtime to wasmon's policy and owns everything about running guests: the
//! engine and its epoch ticker, the compiled-component cache, one `Store` per guest instance,
//! CPU deadlines, memory and output caps (batches out, requests back for exporters), capability grants, failure accounting and
//! quarantine. It knows samples only as batches to pass through; it may not touch the
//! pipeline's scheduling, the store or the namespace.

mod agent;
mod bindings;
pub mod check;
mod engine;
mod exporter;
mod guest;
pub mod limits;
mod log;
mod mapped;
mod state;
mod stats;
mod strings;
mod transformer;

pub use agent::{AgentInstance, AgentWorld};
pub use engine::{Compiled, Runtime};
pub use exporter::{ExporterInstance, ExporterWorld, Request};
pub use guest::{CallError, GuestConfig, Image, Instance, Live, World};
pub use mapped::MappedDir;
pub use state::{DirGrant, Grants};
pub use stats::GuestStats;
pub use strings::StringTable;
pub use transformer::{TransformerInstance, TransformerWorld, encode};

/// The WIT types of the agent world (PMIDs, namespace errors, descriptors, values).
pub mod agent_types {
    pub use super::agent::{
        Atom, Child, MetricDesc, NsError, Pmid, Semantics, Value, ValueSet, ValueType,
    };
}
