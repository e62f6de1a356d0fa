//! Why a session request is refused, in words a client can act on (never an internal id).

use crate::engine::EngineError;

/// Why a session request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// The header or body does not fit the convention (400).
    Invalid(String),
    /// No open session has the id: never opened, closed, expired, or opened before a restart
    /// (400).
    Unknown(String),
    /// The session was opened on another model (400).
    WrongModel(String),
    /// The model no longer holds the session's state (it dropped the sequence, or was loaded
    /// again): the session has ended (400).
    Lost(String),
    /// As many sessions are open as the endpoint allows (429).
    Full(usize),
    /// The model could not be asked about its sequence batcher (the engine's status: an
    /// unknown model is 404).
    Model(EngineError),
    /// The session could not be opened or closed (500).
    Internal(String),
}

impl SessionError {
    /// The message a client reads.
    pub fn message(&self) -> String {
        match self {
            SessionError::Invalid(message) | SessionError::Internal(message) => message.clone(),
            SessionError::Unknown(id) => format!(
                "session '{id}' is not open: it was closed, it expired, or the endpoint \
                 restarted; open a new one with X-Amzn-SageMaker-Session-Id: NEW_SESSION"
            ),
            SessionError::WrongModel(id) => {
                format!("session '{id}' was opened on another model")
            }
            SessionError::Lost(id) => format!(
                "session '{id}' has ended: the model no longer holds its state (the model \
                 dropped it, or was loaded again); open a new one with \
                 X-Amzn-SageMaker-Session-Id: NEW_SESSION"
            ),
            SessionError::Full(limit) => format!(
                "the endpoint holds its limit of {limit} open sessions; close one, or retry \
                 when one expires"
            ),
            SessionError::Model(error) => error.message.clone(),
        }
    }
}
