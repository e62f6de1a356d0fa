//! SageMaker's stateful sessions, mapped onto Triton's sequences.
//!
//! A client opens a session (`X-Amzn-SageMaker-Session-Id: NEW_SESSION`), sends requests in it
//! (`X-Amzn-SageMaker-Session-Id: <id>`) and closes it (`{"requestType": "CLOSE"}`); idle
//! sessions expire. Each session belongs to one model (the default model on `/invocations`, the
//! url's model on `/models/{name}/invoke`) and gets one correlation id of its own. On a model
//! with sequence batching every request of the session is a request of that sequence: the start
//! flag on the first, the end flag on a request trident makes when the session closes or
//! expires (`end.rs`), so the model's own state follows the session. A session's requests reach
//! the model one at a time, in the order they arrived (a fair lock per session).
//!
//! - `table.rs`: the sessions, their bounds and expiry;
//! - `control.rs`: what a request's session header and body ask for;
//! - `end.rs`: the request that carries the end flag to the model;
//! - `store.rs`: the bounded key-value store each session offers plugins;
//! - `utc.rs`: the `Expires=` timestamp.

mod control;
mod end;
pub mod store;
pub mod table;
mod utc;

pub use control::{SESSION_HEADER, SessionControl, classify};
pub use end::end_sequence;
pub use store::SessionStore;
pub use table::{
    Ended, Session, SessionCounts, SessionError, SessionSettings, SessionTurn, Sessions,
};
pub use utc::format_utc;

/// `X-Amzn-SageMaker-New-Session-Id`: the answer to a `NEW_SESSION` request.
pub const NEW_SESSION_HEADER: &str = "x-amzn-sagemaker-new-session-id";
/// `X-Amzn-SageMaker-Closed-Session-Id`: the answer to a `CLOSE` request.
pub const CLOSED_SESSION_HEADER: &str = "x-amzn-sagemaker-closed-session-id";
