//! The sandbox that runs one call: wasmtime's engine and linker, the per-call store with its
//! limits, the threads and scheduler calls run on, fresh and kept instances, and what a guest may
//! import. It runs what it is given; what may run is decided by the platform room above it.
//!
//! - [`engine`]: the engine, the linker and the per-call store with its limits;
//! - [`store`]: what a call's store holds, and the host interfaces a guest may import;
//!   [`interfaces`]: the `images` and `text` interfaces, as the store offers the primitives;
//! - [`threads`]: the epoch ticker, housekeeping and the guest threads calls run on;
//!   [`scheduler`]: where a call runs, and each engine's share of the guest threads;
//! - [`warm`]: fresh instances made ahead of time, one per call; [`kept_instance`]: the one a
//!   stream's calls share, while the engine's budget allows;
//! - [`hooks`]: one table of the hooks a plugin may export, and one way to call each;
//! - [`snapshot`]: a plugin's state built once at load (its `check-config`) and copied into every
//!   call's instance;
//! - [`config`]: the plugin's configuration as `host.config` answers it, noting the keys read;
//! - [`assets`]: the files a plugin reads, verified with it; [`digest`]: the SHA-256 everything
//!   is pinned by;
//! - [`compile_cache`]: compiled plugins kept on disk between starts, verified before use;
//! - [`stream_state`]: `trident:stream-state/state`, what a stream adapter keeps between the
//!   events of one stream;
//! - [`model_calls`]: `trident:models/models`, a plugin's calls of its endpoint's models within
//!   its access and budgets;
//! - [`output`]: a guest's stdout and stderr, captured for the log; [`counters`]: the per-call
//!   output budget and what trident withholds, per plugin;
//! - [`boundary`]: trident's own types at the boundary (replies, refusals, adapted requests, the
//!   invocation a plugin sees); the generated types stay inside the plugin rooms.

pub mod assets;
pub mod boundary;
pub mod compile_cache;
pub mod config;
pub mod counters;
pub mod digest;
pub mod engine;
pub mod hooks;
pub mod interfaces;
pub mod kept_instance;
pub mod model_calls;
pub mod output;
pub mod scheduler;
pub mod snapshot;
pub mod store;
pub mod stream_state;
pub mod threads;
pub mod warm;
