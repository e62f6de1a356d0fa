//! `TRITONSERVER_Error` to [`EngineError`]: Triton's code and message, copied out and owned.

use std::ffi::{CStr, CString};
use std::os::raw::c_char;

use super::ffi;
use crate::engine::{EngineError, ErrorCode};

/// The engine's code for a Triton error code.
fn code_from_raw(code: ffi::TRITONSERVER_Error_Code) -> ErrorCode {
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

/// Copies code and message out of an error Triton still owns (e.g. a response's error).
///
/// # Safety
/// `error` must be a valid, non-null `TRITONSERVER_Error` for the duration of the call.
pub(super) unsafe fn copy_error(
    api: &ffi::TritonServerApi,
    error: *mut ffi::TRITONSERVER_Error,
) -> EngineError {
    // SAFETY: the caller guarantees `error` is valid; the message pointer Triton returns is a
    // NUL-terminated string that lives as long as `error`, and is copied before returning.
    unsafe {
        let code = code_from_raw(api.TRITONSERVER_ErrorCode(error));
        let message = cstr_lossy(api.TRITONSERVER_ErrorMessage(error));
        EngineError { code, message }
    }
}

/// Turns a status returned by a Triton call into a `Result`, deleting the error object.
pub(super) fn check(
    api: &ffi::TritonServerApi,
    status: *mut ffi::TRITONSERVER_Error,
) -> Result<(), EngineError> {
    if status.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null status is an error object that the caller of a Triton function owns;
    // it is read and then deleted exactly once here.
    unsafe {
        let error = copy_error(api, status);
        api.TRITONSERVER_ErrorDelete(status);
        Err(error)
    }
}

/// Calls a Triton function that writes a plain result (a flag, a count) through an out-pointer,
/// checks its status and returns the result.
pub(super) fn out_value<V: Default>(
    api: &ffi::TritonServerApi,
    call: impl FnOnce(&mut V) -> *mut ffi::TRITONSERVER_Error,
) -> Result<V, EngineError> {
    let mut value = V::default();
    check(api, call(&mut value))?;
    Ok(value)
}

/// Copies a C string Triton returned; an empty string for a null pointer.
///
/// # Safety
/// `ptr` must be null or point to a NUL-terminated string valid for the call.
pub(super) unsafe fn cstr_lossy(ptr: *const c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: guaranteed by the caller.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}

/// A C string for a caller-supplied name or path; an interior NUL is an invalid argument.
pub(super) fn to_cstring(what: &str, text: &str) -> Result<CString, EngineError> {
    CString::new(text).map_err(|_| {
        EngineError::new(
            ErrorCode::InvalidArg,
            format!("{what} must not contain a NUL byte"),
        )
    })
}
