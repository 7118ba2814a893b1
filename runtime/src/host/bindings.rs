//! Host-side bindings of the WIT worlds, one `bindgen!` per world (kept in a file of their own:
//! an edit next to `bindgen!` recompiles slowly). The agent world reuses the transformer
//! world's shared interfaces so both see one set of types.

pub mod transformer {
    wasmtime::component::bindgen!({
        world: "transformer",
        path: "../wit",
        additional_derives: [PartialEq],
    });
}

pub mod agent {
    wasmtime::component::bindgen!({
        world: "agent",
        path: "../wit",
        with: {
            "wasmon:collector/types": super::transformer::wasmon::collector::types,
            "wasmon:collector/host": super::transformer::wasmon::collector::host,
        },
    });
}

pub use transformer::wasmon::collector::types;
