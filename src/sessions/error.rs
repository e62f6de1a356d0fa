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
    /// As many sessions are open as the endpoint allows (429): the limit, and when the first
    /// open session expires if left idle.
    Full {
        /// `TRIDENT_MAX_SESSIONS`.
        limit: usize,
        /// When to retry.
        retry_after: std::time::Duration,
    },
    /// As many sessions are open on a stateful model as it holds sequences at once (429): one
    /// more would wait in the core's backlog, with no bound, until one of them ends.
    NoSequenceSlot {
        /// The model.
        model: String,
        /// Its sequence batcher's slots.
        slots: usize,
        /// When the first of its sessions expires if left idle.
        retry_after: std::time::Duration,
    },
    /// The model could not be asked about its sequence batcher (the engine's status: an
    /// unknown model is 404).
    Model(EngineError),
    /// The session could not be opened or closed (500).
    Internal(String),
}

impl SessionError {
    /// When a client refused for want of room may retry.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            SessionError::Full { retry_after, .. }
            | SessionError::NoSequenceSlot { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The message a client reads.
    pub fn message(&self) -> String {
        match self {
            SessionError::Invalid(message) | SessionError::Internal(message) => message.clone(),
            SessionError::Unknown(id) => format!(
                "session '{id}' is not open: it was closed, it expired, its slot went to a new \
                 session after it had been idle, or the endpoint restarted; open a new one with \
                 X-Amzn-SageMaker-Session-Id: NEW_SESSION"
            ),
            SessionError::WrongModel(id) => {
                format!("session '{id}' was opened on another model")
            }
            SessionError::Lost(id) => format!(
                "session '{id}' has ended: the model no longer holds its state (the model \
                 dropped it, or was loaded again); open a new one with \
                 X-Amzn-SageMaker-Session-Id: NEW_SESSION"
            ),
            SessionError::Full { limit, retry_after } => format!(
                "the endpoint holds its limit of {limit} open sessions; close one, or retry \
                 in {} s, when the first of them expires or has been idle long enough for its \
                 slot to be reclaimed",
                retry_after.as_secs()
            ),
            SessionError::NoSequenceSlot {
                model,
                slots,
                retry_after,
            } => format!(
                "model '{model}' holds {slots} sequences at once (its sequence batcher's \
                 slots: max_batch_size rows per instance, or oldest.max_candidate_sequences), \
                 and {slots} sessions are open on it; close one, or retry in {} s, when the \
                 first of them expires or has been idle long enough for its slot to be \
                 reclaimed",
                retry_after.as_secs()
            ),
            SessionError::Model(error) => error.message.clone(),
        }
    }
}
