//! Host bindings generated from `wit/plugin.wit`, one module per world. The shared `types` and
//! `host` interfaces are generated once (in `request`) and reused by the other worlds.
#![allow(missing_docs, clippy::all)]

pub mod request {
    wasmtime::component::bindgen!({
        world: "request-adapter-plugin",
        path: "wit",
        exports: { default: async },
    });
}

pub mod response {
    wasmtime::component::bindgen!({
        world: "response-adapter-plugin",
        path: "wit",
        exports: { default: async },
        with: {
            "trident:plugin/types": super::request::trident::plugin::types,
            "trident:plugin/host": super::request::trident::plugin::host,
        },
    });
}

pub mod oom {
    wasmtime::component::bindgen!({
        world: "oom-plugin",
        path: "wit",
        exports: { default: async },
        with: {
            "trident:plugin/host": super::request::trident::plugin::host,
        },
    });
}

pub use request::trident::plugin::host;
pub use request::trident::plugin::types;
