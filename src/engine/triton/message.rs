//! `TRITONSERVER_Message`: JSON documents Triton hands out (metadata, configs, the model index).

use super::error::check;
use super::ffi;
use super::handle::Owned;
use crate::engine::{EngineError, ErrorCode};

/// An owned Triton message, deleted on drop.
pub(super) type Message = Owned<ffi::TRITONSERVER_Message>;

impl Message {
    /// The message parsed as JSON.
    pub(super) fn to_json(&self) -> Result<serde_json::Value, EngineError> {
        let api = &self.triton().api;
        let (mut base, mut size) = (std::ptr::null(), 0usize);
        // SAFETY: the message is valid while `self` lives; both out-pointers are valid for writes.
        check(api, unsafe {
            api.TRITONSERVER_MessageSerializeToJson(self.as_ptr(), &mut base, &mut size)
        })?;
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
