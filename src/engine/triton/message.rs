//! `TRITONSERVER_Message`: JSON documents Triton hands out (metadata, configs, the model index).

use std::ptr::NonNull;

use super::error::check;
use super::ffi;
use super::library::Triton;
use crate::engine::{EngineError, ErrorCode};

/// An owned Triton message, deleted on drop.
pub(super) struct Message {
    triton: &'static Triton,
    ptr: NonNull<ffi::TRITONSERVER_Message>,
}

impl Message {
    /// Takes ownership of a message a Triton call returned.
    pub(super) fn from_raw(
        triton: &'static Triton,
        ptr: *mut ffi::TRITONSERVER_Message,
    ) -> Result<Message, EngineError> {
        NonNull::new(ptr)
            .map(|ptr| Message { triton, ptr })
            .ok_or_else(|| EngineError::new(ErrorCode::Internal, "Triton returned a null message"))
    }

    /// The message parsed as JSON.
    pub(super) fn to_json(&self) -> Result<serde_json::Value, EngineError> {
        let (mut base, mut size) = (std::ptr::null(), 0usize);
        // SAFETY: the message is valid while `self` lives; both out-pointers are valid for writes.
        let status = unsafe {
            self.triton.api.TRITONSERVER_MessageSerializeToJson(
                self.ptr.as_ptr(),
                &mut base,
                &mut size,
            )
        };
        check(&self.triton.api, status)?;
        if base.is_null() {
            return Err(EngineError::new(
                ErrorCode::Internal,
                "Triton returned an empty message",
            ));
        }
        // SAFETY: Triton guarantees `base` points to `size` bytes owned by the message, which
        // outlives this borrow; the bytes are parsed (copied) before `self` can be dropped.
        let bytes = unsafe { std::slice::from_raw_parts(base.cast::<u8>(), size) };
        serde_json::from_slice(bytes).map_err(|e| {
            EngineError::new(
                ErrorCode::Internal,
                format!("Triton returned invalid JSON: {e}"),
            )
        })
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        // SAFETY: the message is owned by `self` and deleted exactly once, here.
        let status = unsafe {
            self.triton
                .api
                .TRITONSERVER_MessageDelete(self.ptr.as_ptr())
        };
        if let Err(e) = check(&self.triton.api, status) {
            tracing::warn!(error = %e, "deleting a Triton message failed");
        }
    }
}
