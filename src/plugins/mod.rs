//! WebAssembly plugins: payload adapters, the out-of-memory policy and A/B variants, defined by
//! the WIT packages in `wit/` and run by wasmtime as sandboxed components. Five rooms, each
//! importing only the rooms listed before it:
//!
//! - [`wit`]: the contract as Rust (generated bindings and their conversions);
//! - [`primitives`]: image and text work trident does natively for guests, within their budgets;
//! - [`runtime`]: the sandbox that runs one call (engine, store, threads, instances);
//! - [`platform`]: what vets plugins (manifest, signatures, golden cases, shadows, accounting)
//!   and loads them into the sandbox;
//! - [`host`]: what serves: the plugin host the HTTP routes call, which adapters serve a request
//!   ([`host::routing`]), the plugins a multi-model artifact brings ([`host::model_plugins`]) and
//!   Secure Mode's rules for them ([`host::secure_mode`]).
//!
//! `trident plugin` (for platform teams: keys, signatures, inspection; for authors: `new`, `run`,
//! `test`) lives beside the server's own command line, in [`crate::cli::plugin`]: the server
//! never runs it, and nothing here imports it.

pub mod host;
pub mod platform;
pub mod primitives;
pub mod runtime;
pub mod wit;

pub use host::PluginHost;
pub use host::routing::Selection;
pub use platform::plugin::LoadedPlugin;
pub use runtime::boundary::{
    AdaptedGenerate, AdaptedRequest, GenerateInputs, HookResult, PluginInvocation, PluginReply,
    Refusal, StreamPosition,
};
pub use runtime::kept_instance::KeptInstance;
pub use runtime::store::CallFailure;
pub use runtime::stream_state::StreamState;
