//! WebAssembly plugins: payload adapters, the out-of-memory policy and A/B variants, defined by
//! `wit/plugin.wit` and run by wasmtime as sandboxed components.
//!
//! - [`manifest`]: the TOML manifest (digests, limits, config, which models use what);
//! - [`model_plugins`]: the plugins a multi-model artifact brings (`plugins.toml`);
//! - [`compile_cache`]: compiled plugins kept on disk between starts, verified before use;
//! - [`runtime`]: the engine, the linker and the per-call store with its limits;
//! - [`host`]: loading plugins (compiled once, pre-instantiated) and calling them;
//! - [`warm`]: fresh instances made ahead of time, one per call;
//! - [`variants`]: choosing an A/B variant;
//! - [`counters`]: the per-call output budget and what trident withholds, per plugin;
//! - [`new`], [`run`]: `trident plugin new` (a project from `templates/`) and `trident plugin
//!   run` (one hook without Triton), for authors;
//! - [`boundary`]: trident's own types at the boundary (replies, refusals, adapted requests,
//!   the invocation a plugin sees); the generated types stay inside this module;
//! - [`bindings`], [`convert`]: generated bindings and type conversions.

pub mod bindings;
pub mod boundary;
pub mod cli;
pub mod compile_cache;
pub mod convert;
pub mod counters;
pub mod host;
pub mod manifest;
pub mod model_plugins;
pub mod new;
pub mod run;
pub mod runtime;
pub mod scheduler;
pub mod signing;
pub mod threads;
pub mod variants;
pub mod warm;

pub use boundary::{
    AdaptedGenerate, AdaptedRequest, GenerateInputs, HookResult, PluginInvocation, PluginReply,
    Refusal, StreamPosition,
};
pub use host::{PluginHost, Selection};
pub use runtime::CallFailure;
