//! The engine's error: Triton's error code and message, as plain Rust values.

use std::fmt;

/// Triton's error categories (`TRITONSERVER_Error_Code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// No specific category, or a code newer than trident (`TRITONSERVER_ERROR_UNKNOWN`).
    Unknown,
    /// A failure in the server or trident, not the caller's (`TRITONSERVER_ERROR_INTERNAL`).
    Internal,
    /// The model, version or other named thing does not exist (`TRITONSERVER_ERROR_NOT_FOUND`).
    NotFound,
    /// The request or an argument is malformed or inconsistent (`TRITONSERVER_ERROR_INVALID_ARG`).
    InvalidArg,
    /// The server or model cannot serve now, e.g. not ready (`TRITONSERVER_ERROR_UNAVAILABLE`).
    Unavailable,
    /// The operation is not supported here (`TRITONSERVER_ERROR_UNSUPPORTED`).
    Unsupported,
    /// What was to be created exists already (`TRITONSERVER_ERROR_ALREADY_EXISTS`).
    AlreadyExists,
    /// The request was cancelled before it completed (`TRITONSERVER_ERROR_CANCELLED`).
    Cancelled,
}

impl ErrorCode {
    /// The name Triton's own frontends use for the code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unknown => "UNKNOWN",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::InvalidArg => "INVALID_ARG",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::Unsupported => "UNSUPPORTED",
            ErrorCode::AlreadyExists => "ALREADY_EXISTS",
            ErrorCode::Cancelled => "CANCELLED",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error from the engine, in Triton's terms: a code and a message. Displays as the message
/// alone, which is what clients are shown; the code decides the HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EngineError {
    /// The category, which decides how the error is reported (HTTP status).
    pub code: ErrorCode,
    /// Human-readable description, shown to clients as is.
    pub message: String,
}

impl EngineError {
    /// An error with the given code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> EngineError {
        EngineError {
            code,
            message: message.into(),
        }
    }
}
