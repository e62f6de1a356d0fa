//! The plugin contract as Rust: the bindings `wasmtime` generates from the WIT packages in
//! `wit/`, and the conversions between their types and trident's. The bottom room: every other
//! room speaks these types, and this one imports none of them.
//!
//! - [`bindings`]: generated bindings (`wit/plugin.wit` at 0.1.0, `wit/0.2` at 0.2.0, the session
//!   store's `wit/session`, the stream state's `wit/stream-state`, the model calls and pipeline
//!   hook of `wit/models`);
//! - [`convert`]: conversions between the generated types and trident's.

pub mod bindings;
pub mod convert;
