//! `TRITONSERVER_Error` as a Rust error: Triton's code and message, owned.

use std::ffi::CStr;
use std::fmt;

use super::ffi;

/// Triton's error categories (`TRITONSERVER_Error_Code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    Unknown,
    Internal,
    NotFound,
    InvalidArg,
    Unavailable,
    Unsupported,
    AlreadyExists,
    Cancelled,
}

impl ErrorCode {
    pub(super) fn from_raw(code: ffi::TRITONSERVER_Error_Code) -> ErrorCode {
        match code {
            ffi::TRITONSERVER_ERROR_INTERNAL => ErrorCode::Internal,
            ffi::TRITONSERVER_ERROR_NOT_FOUND => ErrorCode::NotFound,
            ffi::TRITONSERVER_ERROR_INVALID_ARG => ErrorCode::InvalidArg,
            ffi::TRITONSERVER_ERROR_UNAVAILABLE => ErrorCode::Unavailable,
            ffi::TRITONSERVER_ERROR_UNSUPPORTED => ErrorCode::Unsupported,
            ffi::TRITONSERVER_ERROR_ALREADY_EXISTS => ErrorCode::AlreadyExists,
            ffi::TRITONSERVER_ERROR_CANCELLED => ErrorCode::Cancelled,
            _ => ErrorCode::Unknown,
        }
    }

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

/// An error reported by the Triton core (or raised by trident in Triton's terms). Displays as
/// Triton's message alone, which is what clients are shown; the code is kept beside it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TritonError {
    pub code: ErrorCode,
    pub message: String,
}

impl TritonError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> TritonError {
        TritonError {
            code,
            message: message.into(),
        }
    }

    /// Copies code and message out of an error Triton still owns (e.g. a response's error).
    ///
    /// # Safety
    /// `error` must be a valid, non-null `TRITONSERVER_Error` for the duration of the call.
    pub(super) unsafe fn copy_from(
        api: &ffi::TritonServerApi,
        error: *mut ffi::TRITONSERVER_Error,
    ) -> TritonError {
        // SAFETY: the caller guarantees `error` is valid; the message pointer Triton returns is a
        // NUL-terminated string that lives as long as `error`, and is copied before returning.
        unsafe {
            let code = ErrorCode::from_raw(api.TRITONSERVER_ErrorCode(error));
            let message = cstr_lossy(api.TRITONSERVER_ErrorMessage(error));
            TritonError { code, message }
        }
    }
}

/// Turns a status returned by a Triton call into a `Result`, deleting the error object.
pub(super) fn check(
    api: &ffi::TritonServerApi,
    status: *mut ffi::TRITONSERVER_Error,
) -> Result<(), TritonError> {
    if status.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null status is an error object that the caller of a Triton function owns;
    // it is read and then deleted exactly once here.
    unsafe {
        let error = TritonError::copy_from(api, status);
        api.TRITONSERVER_ErrorDelete(status);
        Err(error)
    }
}

/// Copies a C string Triton returned; `None`-like empty string for a null pointer.
///
/// # Safety
/// `ptr` must be null or point to a NUL-terminated string valid for the call.
pub(super) unsafe fn cstr_lossy(ptr: *const std::os::raw::c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: guaranteed by the caller.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}

/// A C string for a caller-supplied name or path; an interior NUL is refused as an invalid argument.
pub(super) fn to_cstring(what: &str, text: &str) -> Result<std::ffi::CString, TritonError> {
    std::ffi::CString::new(text).map_err(|_| {
        TritonError::new(
            ErrorCode::InvalidArg,
            format!("{what} must not contain a NUL byte"),
        )
    })
}
