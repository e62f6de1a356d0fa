//! Host bindings generated from `wit/plugin.wit`, one module per world. The shared `types` and
//! `host` interfaces are generated once (in `request`) and reused by the other worlds.
#![allow(missing_docs, clippy::all)]

/// The `images` and `text` imports are async and may trap: their work runs on a primitive
/// thread the call awaits, and a call whose deadline passes first traps as out of time
/// ([`crate::plugins::primitives::pool`]).
pub mod request {
    wasmtime::component::bindgen!({
        world: "request-adapter-plugin",
        path: "wit",
        imports: {
            "trident:plugin/images": async | trappable,
            "trident:plugin/text": async | trappable,
        },
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
            "trident:plugin/assets": super::request::trident::plugin::assets,
            "trident:plugin/images": super::request::trident::plugin::images,
            "trident:plugin/text": super::request::trident::plugin::text,
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
            "trident:plugin/assets": super::request::trident::plugin::assets,
            "trident:plugin/images": super::request::trident::plugin::images,
            "trident:plugin/text": super::request::trident::plugin::text,
        },
    });
}

/// The `model-check` export (a plugin's check of the models it is routed to); only its types
/// are used, the call is looked up by name ([`crate::plugins::platform::model_check`]).
pub mod model_check {
    wasmtime::component::bindgen!({
        world: "checked-request-adapter-plugin",
        path: "wit",
        exports: { default: async },
        with: {
            "trident:plugin/types": super::request::trident::plugin::types,
            "trident:plugin/host": super::request::trident::plugin::host,
            "trident:plugin/assets": super::request::trident::plugin::assets,
            "trident:plugin/images": super::request::trident::plugin::images,
            "trident:plugin/text": super::request::trident::plugin::text,
        },
    });
}

pub use request::trident::plugin::assets;
pub use request::trident::plugin::host;
pub use request::trident::plugin::images;
pub use request::trident::plugin::text;
pub use request::trident::plugin::types;

/// Version 0.2.0 (`wit/0.2`): the generate hooks. Its `types` are 0.1's, definition for
/// definition, so they map to the same Rust types; its `host` is generated here (the same
/// functions under the 0.2.0 name).
pub mod generate_request {
    wasmtime::component::bindgen!({
        world: "generate-request-adapter-plugin",
        path: "wit/0.2",
        exports: { default: async },
        with: {
            "trident:plugin/types@0.2.0": super::request::trident::plugin::types,
        },
    });
}

pub mod generate_response {
    wasmtime::component::bindgen!({
        world: "generate-response-adapter-plugin",
        path: "wit/0.2",
        exports: { default: async },
        with: {
            "trident:plugin/types@0.2.0": super::request::trident::plugin::types,
            "trident:plugin/host@0.2.0": super::generate_request::trident::plugin::host,
            "trident:plugin/assets@0.2.0": super::generate_request::trident::plugin::assets,
        },
    });
}

pub mod stream {
    wasmtime::component::bindgen!({
        world: "stream-adapter-plugin",
        path: "wit/0.2",
        exports: { default: async },
        with: {
            "trident:plugin/types@0.2.0": super::request::trident::plugin::types,
            "trident:plugin/host@0.2.0": super::generate_request::trident::plugin::host,
            "trident:plugin/assets@0.2.0": super::generate_request::trident::plugin::assets,
        },
    });
}

/// The host interface under its 0.2.0 name.
pub use generate_request::trident::plugin::host as host_v2;

/// The assets interface under its 0.2.0 name.
pub use generate_request::trident::plugin::assets as assets_v2;

/// `trident:session@0.1.0` (`wit/session`): the per-session store a component may import beside
/// the hooks of 0.1.0 or 0.2.0 (which its worlds include from `wit/session/deps`). Only the
/// store is bound here; the hooks are found through the bindings above.
pub mod session {
    wasmtime::component::bindgen!({
        world: "store-host",
        path: "wit/session",
    });
}

/// The session store interface.
pub use session::trident::session::store as session_store;

/// `trident:stream-state@0.1.0` (`wit/stream-state`): the per-stream state a stream adapter may import beside
/// the hooks of 0.2.0 (which its worlds include from `wit/stream-state/deps`). Only the state is
/// bound here.
pub mod stream_state_host {
    wasmtime::component::bindgen!({
        world: "state-host",
        path: "wit/stream-state",
    });
}

/// The stream state interface.
pub use stream_state_host::trident::stream_state::state as stream_state;

/// `trident:models@0.1.0` (`wit/models`): the model calls a component may import beside the
/// hooks of 0.1.0 (which its worlds include from `wit/models/deps`), and the `pipeline` hook.
/// `infer` is async and may trap: the call awaits the engine, and a call past its deadline or
/// one of its budgets traps ([`crate::plugins::runtime::model_calls`]).
pub mod pipeline {
    wasmtime::component::bindgen!({
        world: "pipeline-plugin",
        path: "wit/models",
        imports: {
            "trident:models/models": async | trappable,
        },
        exports: { default: async },
        with: {
            "trident:plugin/types": super::request::trident::plugin::types,
            "trident:plugin/host": super::request::trident::plugin::host,
            "trident:plugin/assets": super::request::trident::plugin::assets,
            "trident:plugin/images": super::request::trident::plugin::images,
            "trident:plugin/text": super::request::trident::plugin::text,
        },
    });
}

/// The model calls interface.
pub use pipeline::trident::models::models;
