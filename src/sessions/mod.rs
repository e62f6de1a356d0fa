//! SageMaker's stateful sessions, mapped onto Triton's sequences.
//!
//! A client opens a session (`X-Amzn-SageMaker-Session-Id: NEW_SESSION`), sends requests in it
//! (`X-Amzn-SageMaker-Session-Id: <id>`) and closes it (`{"requestType": "CLOSE"}`); idle
//! sessions expire. Each session belongs to one model (the default model on `/invocations`, the
//! url's model on `/models/{name}/invoke`) and gets one correlation id of its own. On a model
//! with sequence batching every request of the session is a request of that sequence: the start
//! flag on the first, the end flag on a request trident makes when the session ends (`end.rs`),
//! so the model's own state follows the session, and a session never outlives that state
//! (`idle.rs`). A session's requests reach the model one at a time, in the order they arrived
//! (a fair lock per session, held to a stream's last event).
//!
//! - `lifecycle.rs`: [`Sessions`], the one home of a session's life (open, close, expiry, the
//!   end of a model's sessions and of all at shutdown);
//! - `table.rs`: the sessions, their bounds and turns, with no engine in sight;
//! - `control.rs`: what a request's session header and body ask for;
//! - `end.rs`: the request that carries the end flag to the model;
//! - `idle.rs`: a stateful model's idle limit against the sessions' expiration;
//! - `error.rs`: why a session request is refused;
//! - `store.rs`: the bounded key-value store each session offers plugins;
//! - `utc.rs`: the `Expires=` timestamp.

mod control;
mod end;
mod error;
pub mod idle;
mod lifecycle;
pub mod store;
pub mod table;
mod utc;

pub use control::{SESSION_HEADER, SessionControl, classify};
pub use end::{MAX_END_BYTES, end_sequence};
pub use error::SessionError;
pub use lifecycle::{END_WITHIN, Sessions};
pub use store::SessionStore;
pub use table::{Ended, Session, SessionCounts, SessionSettings, SessionTable, SessionTurn};
pub use utc::format_utc;

/// `X-Amzn-SageMaker-New-Session-Id`: the answer to a `NEW_SESSION` request.
pub const NEW_SESSION_HEADER: &str = "x-amzn-sagemaker-new-session-id";
/// `X-Amzn-SageMaker-Closed-Session-Id`: the answer to a `CLOSE` request.
pub const CLOSED_SESSION_HEADER: &str = "x-amzn-sagemaker-closed-session-id";
