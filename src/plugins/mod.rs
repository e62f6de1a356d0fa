//! WebAssembly plugins: payload adapters, the out-of-memory policy and A/B variants, defined by
//! the WIT packages in `wit/` and run by wasmtime as sandboxed components.
//!
//! - [`manifest`]: the TOML manifest (digests, limits, config, which models use what);
//! - [`model_plugins`]: the plugins a multi-model artifact brings (`plugins.toml`);
//! - [`model_check`]: a plugin's check of the models it is routed to, before they are served;
//! - [`compile_cache`]: compiled plugins kept on disk between starts, verified before use;
//! - [`signing`]: ed25519 signatures of plugins, and the keys a manifest trusts; [`digest`]:
//!   the SHA-256 everything is pinned by;
//! - [`runtime`]: the engine, the linker and the per-call store with its limits ([`store`]:
//!   what a call's store holds, and the host interfaces a guest may import);
//! - [`threads`]: the epoch ticker, housekeeping and the guest threads calls run on;
//!   [`scheduler`]: where a call runs, and each engine's share of the guest threads;
//! - [`loading`]: a manifest's plugins read, verified, compiled once and pre-instantiated;
//!   [`assets`]: the files a plugin reads, verified with it; [`snapshot`]: its state built once
//!   at load (its `check-config`) and copied into every call's instance;
//! - [`cases`]: golden cases a plugin carries, run at every load before it serves;
//! - [`plugin`]: one loaded plugin and the media types it takes and serves;
//! - [`routing`]: which adapters serve a request (a model's arm or A/B variants, [`variants`]),
//!   the OOM policy and the OpenAI chat plugin; [`shadow`]: candidates compared with the
//!   serving adapters on sampled requests;
//! - [`images`]: the `images` interface, image pre-processing run natively for any guest;
//!   [`text`]: the `text` interface, tokenization and detokenization likewise;
//!   [`primitives`]: where both run (threads of their own, within the call's deadline);
//! - [`stream_state`]: `trident:stream-state/state`, what a stream adapter keeps between the events
//!   of one stream;
//! - [`host`]: the plugin host and the calls into its plugins (one table of hooks, one call);
//! - [`warm`]: fresh instances made ahead of time, one per call; [`kept_instance`]: the one a
//!   stream's calls share, while the engine's budget allows;
//! - [`output`]: a guest's stdout and stderr, captured for the log;
//! - [`counters`]: the per-call output budget and what trident withholds, per plugin;
//!   [`accounting`]: what each plugin's calls cost, by hook (calls, CPU, memory, waits);
//! - [`boundary`]: trident's own types at the boundary (replies, refusals, adapted requests,
//!   the invocation a plugin sees); the generated types stay inside this module;
//! - [`bindings`], [`convert`]: generated bindings (`wit/plugin.wit` at 0.1.0, `wit/0.2` at
//!   0.2.0, the session store's `wit/session`, the stream state's `wit/stream-state`) and type
//!   conversions;
//!
//! `trident plugin` (for platform teams: keys, signatures, inspection; for authors: `new`, `run`,
//! `test`) lives beside the server's own command line, in [`crate::cli::plugin`]: the server
//! never runs it, and nothing here imports it.

pub mod accounting;
pub mod assets;
pub mod bindings;
pub mod boundary;
pub mod cases;
pub mod compile_cache;
pub mod convert;
pub mod counters;
pub mod digest;
pub mod hooks;
pub mod host;
pub mod images;
pub mod kept_instance;
pub mod loading;
pub mod manifest;
pub mod model_check;
pub mod model_plugins;
pub mod output;
pub mod plugin;
pub mod primitives;
pub mod routing;
pub mod runtime;
pub mod scheduler;
pub mod secure_mode;
pub mod shadow;
pub mod signing;
pub mod snapshot;
pub mod store;
pub mod stream_state;
pub mod text;
pub mod threads;
pub mod variants;
pub mod warm;

pub use boundary::{
    AdaptedGenerate, AdaptedRequest, GenerateInputs, HookResult, PluginInvocation, PluginReply,
    Refusal, StreamPosition,
};
pub use host::PluginHost;
pub use kept_instance::KeptInstance;
pub use plugin::LoadedPlugin;
pub use routing::Selection;
pub use store::CallFailure;
pub use stream_state::StreamState;
