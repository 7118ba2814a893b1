//! Host-side bindings of the WIT worlds, one `bindgen!` per world (kept in a file of their own:
//! an edit next to `bindgen!` recompiles slowly). The agent and exporter worlds reuse the
//! transformer world's shared interfaces so that all see one set of types.
//!
//! Exports are called asynchronously (`call_*` return futures) so that a call can be abandoned
//! at its deadline even while the guest waits in a host call (a WASI sleep, a socket): the
//! future is dropped and the store with it. The host's own imports stay synchronous: none of
//! them waits.

pub mod transformer {
    wasmtime::component::bindgen!({
        world: "transformer",
        path: "../wit",
        additional_derives: [PartialEq],
        exports: { default: async },
    });
}

/// A world that takes the transformer world's `types` and `host` interfaces instead of
/// generating its own copies.
macro_rules! sharing_transformer_types {
    ($world:tt) => {
        wasmtime::component::bindgen!({
            world: $world,
            path: "../wit",
            with: {
                "wasmon:collector/types": super::transformer::wasmon::collector::types,
                "wasmon:collector/host": super::transformer::wasmon::collector::host,
            },
            exports: { default: async },
        });
    };
}

pub mod agent {
    sharing_transformer_types!("agent");
}

/// Agents built before the `metrics` export (values carry instance names): the same imports,
/// so the agent world's linker serves them.
pub mod legacy_agent {
    wasmtime::component::bindgen!({
        world: "legacy-agent",
        path: "../wit",
        with: {
            "wasmon:collector/types": super::transformer::wasmon::collector::types,
            "wasmon:collector/host": super::transformer::wasmon::collector::host,
            "wasmon:collector/mapped": super::agent::wasmon::collector::mapped,
            "wasmon:collector/files": super::agent::wasmon::collector::files,
        },
        exports: { default: async },
    });
}

pub mod exporter {
    sharing_transformer_types!("exporter");
}

pub use transformer::wasmon::collector::types;
