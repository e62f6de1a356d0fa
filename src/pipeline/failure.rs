//! What went wrong in an inference, by where it happened. Each route maps it to a status in one
//! place (`http::invocations`).

use crate::engine::EngineError;
use crate::plugins::{CallFailure, Refusal};
use crate::protocol::ProtocolError;
use crate::sessions::SessionError;

/// Why an inference did not produce an answer.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The body (or a request plugin's v2 body) could not be decoded.
    Decode(ProtocolError),
    /// A plugin refused the request on purpose (its own error, with the status it chose).
    PluginRefused {
        /// The plugin's name.
        plugin: String,
        /// The error it returned.
        error: Refusal,
    },
    /// A plugin call failed: trapped, ran out of time or memory.
    PluginFailed(CallFailure),
    /// The engine refused the request before the model ran (unknown model, a decoupled model
    /// on a route that answers once, inputs the engine does not accept).
    Refused(EngineError),
    /// The model failed while it ran.
    Model(EngineError),
    /// The model failed on a stream's first response. Every transport answers it the same way
    /// as a stream with one event: HTTP with the error's status and a body of one error event,
    /// the bidirectional stream with the close code of that status.
    FirstResponse(EngineError),
    /// The model finished without a response.
    NoResponse,
    /// The model's answer could not be encoded.
    Encode(ProtocolError),
    /// The request's session has ended: the model refused it because it no longer holds the
    /// session's sequence (it dropped it, or was loaded again).
    SessionEnded(SessionError),
}

impl Failure {
    /// The message the client is shown (before redaction).
    pub fn message(&self) -> String {
        match self {
            Failure::Decode(e) | Failure::Encode(e) => e.to_string(),
            Failure::PluginRefused { plugin, error } => match error {
                Refusal::BadRequest(m) | Refusal::UnsupportedMediaType(m) => m.clone(),
                Refusal::Internal(m) => format!("plugin '{plugin}': {m}"),
            },
            Failure::PluginFailed(e) => e.to_string(),
            Failure::Refused(e) | Failure::Model(e) | Failure::FirstResponse(e) => {
                e.message.clone()
            }
            Failure::NoResponse => "the model completed the request without a response".into(),
            Failure::SessionEnded(e) => e.message(),
        }
    }
}
