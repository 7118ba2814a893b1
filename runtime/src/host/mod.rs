//! `host` narrows wasmtime to wasmon's policy and owns everything about running guests: the
//! engine and its epoch ticker, the compiled-component cache, one `Store` per guest instance,
//! CPU deadlines, memory and output caps (batches out, requests back for exporters), capability grants, failure accounting and
//! quarantine. It knows samples only as batches to pass through; it may not touch the
//! pipeline's scheduling, the store or the namespace.

/// The [`World`] impl every world has: link a component against the world's linker,
/// instantiate it, and call the `configure` that its interface `$iface` exports; all under
/// the call deadline.
macro_rules! world {
    ($marker:ident, $pre:ident, $bindings:ty, $name:literal, $linker:ident, $iface:ident) => {
        impl super::guest::World for $marker {
            type Pre = $pre<super::state::State>;
            type Bindings = $bindings;
            const NAME: &'static str = $name;

            fn pre(
                rt: &super::engine::Runtime,
                component: &wasmtime::component::Component,
            ) -> wasmtime::Result<Self::Pre> {
                $pre::new(rt.$linker().instantiate_pre(component)?)
            }

            async fn instantiate(
                pre: &Self::Pre,
                store: &mut wasmtime::Store<super::state::State>,
            ) -> wasmtime::Result<Self::Bindings> {
                super::guest::in_guest(store, async |s| pre.instantiate_async(s).await).await
            }

            async fn configure(
                b: &Self::Bindings,
                store: &mut wasmtime::Store<super::state::State>,
                params: &str,
            ) -> wasmtime::Result<Result<(), String>> {
                let iface = b.$iface();
                super::guest::in_guest(store, async |s| iface.call_configure(s, params).await).await
            }
        }
    };
}

mod agent;
mod bindings;
pub mod check;
mod clock;
mod dirs;
mod engine;
mod exporter;
mod files;
mod guest;
pub mod limits;
mod log;
mod mapped;
mod state;
mod stats;
mod strings;
mod transformer;

pub use agent::{AgentInstance, AgentWorld, Fetched};
pub use engine::{Compiled, Runtime};
pub use exporter::{ExporterInstance, ExporterWorld, Request};
pub use guest::{CallError, GuestConfig, Image, Instance, Live, World};
pub use state::MappedDir;
pub use state::{DirGrant, Grants};
pub use stats::GuestStats;
pub use strings::StringTable;
pub use transformer::{TransformerInstance, TransformerWorld, encode};

/// The WIT types of the agent world (PMIDs, namespace errors, descriptors, values).
pub mod agent_types {
    pub use super::agent::{
        Atom, Child, Column, Fetched, IndexedFetch, IndexedSet, IndexedValues, MetricDesc, NsError,
        Pmid, Semantics, Value, ValueSet, ValueType,
    };
}
