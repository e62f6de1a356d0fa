//! Errors in both directions: the ones Triton's calls return to the backend (owned, freed here)
//! and the ones the backend hands Triton (created here, owned by Triton from then on).

use std::ffi::{CStr, CString};
use std::fmt;

use crate::ffi;

/// An error code, as Triton names them (`TRITONSERVER_Error_Code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// `TRITONSERVER_ERROR_UNKNOWN`.
    Unknown,
    /// `TRITONSERVER_ERROR_INTERNAL`.
    Internal,
    /// `TRITONSERVER_ERROR_NOT_FOUND`.
    NotFound,
    /// `TRITONSERVER_ERROR_INVALID_ARG`.
    InvalidArg,
    /// `TRITONSERVER_ERROR_UNAVAILABLE`.
    Unavailable,
    /// `TRITONSERVER_ERROR_UNSUPPORTED`.
    Unsupported,
    /// `TRITONSERVER_ERROR_ALREADY_EXISTS`.
    AlreadyExists,
    /// `TRITONSERVER_ERROR_CANCELLED`.
    Cancelled,
}

impl Code {
    /// The code a configuration names (`INVALID_ARG`, `UNAVAILABLE`, ...), if it names one.
    pub fn from_name(name: &str) -> Option<Code> {
        Some(match name {
            "UNKNOWN" => Code::Unknown,
            "INTERNAL" => Code::Internal,
            "NOT_FOUND" => Code::NotFound,
            "INVALID_ARG" => Code::InvalidArg,
            "UNAVAILABLE" => Code::Unavailable,
            "UNSUPPORTED" => Code::Unsupported,
            "ALREADY_EXISTS" => Code::AlreadyExists,
            "CANCELLED" => Code::Cancelled,
            _ => return None,
        })
    }

    fn raw(self) -> ffi::TRITONSERVER_Error_Code {
        match self {
            Code::Unknown => ffi::TRITONSERVER_ERROR_UNKNOWN,
            Code::Internal => ffi::TRITONSERVER_ERROR_INTERNAL,
            Code::NotFound => ffi::TRITONSERVER_ERROR_NOT_FOUND,
            Code::InvalidArg => ffi::TRITONSERVER_ERROR_INVALID_ARG,
            Code::Unavailable => ffi::TRITONSERVER_ERROR_UNAVAILABLE,
            Code::Unsupported => ffi::TRITONSERVER_ERROR_UNSUPPORTED,
            Code::AlreadyExists => ffi::TRITONSERVER_ERROR_ALREADY_EXISTS,
            Code::Cancelled => ffi::TRITONSERVER_ERROR_CANCELLED,
        }
    }

    fn from_raw(raw: ffi::TRITONSERVER_Error_Code) -> Code {
        match raw {
            ffi::TRITONSERVER_ERROR_INTERNAL => Code::Internal,
            ffi::TRITONSERVER_ERROR_NOT_FOUND => Code::NotFound,
            ffi::TRITONSERVER_ERROR_INVALID_ARG => Code::InvalidArg,
            ffi::TRITONSERVER_ERROR_UNAVAILABLE => Code::Unavailable,
            ffi::TRITONSERVER_ERROR_UNSUPPORTED => Code::Unsupported,
            ffi::TRITONSERVER_ERROR_ALREADY_EXISTS => Code::AlreadyExists,
            ffi::TRITONSERVER_ERROR_CANCELLED => Code::Cancelled,
            _ => Code::Unknown,
        }
    }
}

/// An error the backend reports: a code and a message, plain Rust data until it is handed to
/// Triton with [`BackendError::into_raw`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendError {
    /// The code Triton (and so trident's status mapping) sees.
    pub code: Code,
    /// The message the client reads.
    pub message: String,
}

impl BackendError {
    /// An error with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> BackendError {
        BackendError {
            code,
            message: message.into(),
        }
    }

    /// An `INVALID_ARG` error: the request is wrong.
    pub fn invalid(message: impl Into<String>) -> BackendError {
        BackendError::new(Code::InvalidArg, message)
    }

    /// An `INTERNAL` error: the backend is wrong.
    pub fn internal(message: impl Into<String>) -> BackendError {
        BackendError::new(Code::Internal, message)
    }

    /// Hands the error to Triton as a new `TRITONSERVER_Error`, which the caller passes to a
    /// Triton function that takes ownership of it (a return value of an entry point, or
    /// `TRITONBACKEND_ResponseSend`).
    pub fn into_raw(self) -> *mut ffi::TRITONSERVER_Error {
        // A message with an interior NUL is cut there rather than lost.
        let message = CString::new(self.message).unwrap_or_else(|e| {
            let end = e.nul_position();
            let mut bytes = e.into_vec();
            bytes.truncate(end);
            CString::new(bytes).unwrap_or_default()
        });
        // SAFETY: `message` is a valid NUL-terminated string for the duration of the call; Triton
        // copies it into the error it returns.
        unsafe { ffi::TRITONSERVER_ErrorNew(self.code.raw(), message.as_ptr()) }
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Takes ownership of what a Triton call returned: `Ok` for null, otherwise the error's code and
/// message, with the error freed. `call` names the call in the message.
///
/// # Safety
/// `error` is null or an error Triton just returned to the caller, not yet freed.
pub unsafe fn check(error: *mut ffi::TRITONSERVER_Error, call: &str) -> Result<(), BackendError> {
    if error.is_null() {
        return Ok(());
    }
    // SAFETY: the caller guarantees `error` is a live error object owned by us; its message is a
    // NUL-terminated string valid until the error is freed, which happens last.
    unsafe {
        let code = Code::from_raw(ffi::TRITONSERVER_ErrorCode(error));
        let message = CStr::from_ptr(ffi::TRITONSERVER_ErrorMessage(error))
            .to_string_lossy()
            .into_owned();
        ffi::TRITONSERVER_ErrorDelete(error);
        Err(BackendError::new(code, format!("{call}: {message}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_configurable_code_has_a_name() {
        for name in [
            "UNKNOWN",
            "INTERNAL",
            "NOT_FOUND",
            "INVALID_ARG",
            "UNAVAILABLE",
            "UNSUPPORTED",
            "ALREADY_EXISTS",
            "CANCELLED",
        ] {
            let code = Code::from_name(name).expect(name);
            assert_eq!(Code::from_raw(code.raw()), code);
        }
        assert_eq!(Code::from_name("internal"), None);
    }
}
