//! The response allocator: Triton writes every output tensor into a buffer trident owns, which
//! then becomes the output's `Bytes` without a copy.
//!
//! One allocator serves the whole process (it holds only function pointers). Each buffer is a
//! boxed [`OutputBuffer`] handed to Triton as the buffer's user pointer; reading the response takes
//! the bytes out of it, and Triton's release call frees what is left.

use std::os::raw::{c_char, c_void};
use std::ptr::{self, NonNull};

use super::error::out_value;
use super::ffi;
use crate::engine::{EngineError, ErrorCode};

/// Memory for one output tensor, owned by trident until the response is read.
pub(super) struct OutputBuffer {
    pub(super) data: Vec<u8>,
}

/// The process-wide `TRITONSERVER_ResponseAllocator`, never deleted (callbacks may outlive any
/// one server).
pub(crate) struct ResponseAllocator(NonNull<ffi::TRITONSERVER_ResponseAllocator>);

// SAFETY: the allocator object is immutable after creation (three function pointers) and Triton
// reads it from any thread.
unsafe impl Send for ResponseAllocator {}
// SAFETY: as above; no method mutates it.
unsafe impl Sync for ResponseAllocator {}

impl ResponseAllocator {
    pub(super) fn new(api: &ffi::TritonServerApi) -> Result<ResponseAllocator, EngineError> {
        // SAFETY: the out-pointer is valid for a write; the callbacks have the signatures
        // Triton expects and never unwind (see each one).
        let allocator = out_value(api, |allocator| unsafe {
            api.TRITONSERVER_ResponseAllocatorNew(
                allocator,
                Some(alloc_output),
                Some(release_output),
                None,
            )
        })?;
        NonNull::new(allocator)
            .map(ResponseAllocator)
            .ok_or_else(|| {
                EngineError::new(
                    ErrorCode::Internal,
                    "Triton returned a null response allocator",
                )
            })
    }

    pub(super) fn as_ptr(&self) -> *mut ffi::TRITONSERVER_ResponseAllocator {
        self.0.as_ptr()
    }
}

/// Allocates a CPU buffer for one output, whatever memory Triton prefers.
unsafe extern "C" fn alloc_output(
    _allocator: *mut ffi::TRITONSERVER_ResponseAllocator,
    _tensor_name: *const c_char,
    byte_size: usize,
    _memory_type: ffi::TRITONSERVER_MemoryType,
    _memory_type_id: i64,
    _userp: *mut c_void,
    buffer: *mut *mut c_void,
    buffer_userp: *mut *mut c_void,
    actual_memory_type: *mut ffi::TRITONSERVER_MemoryType,
    actual_memory_type_id: *mut i64,
) -> *mut ffi::TRITONSERVER_Error {
    // A panic must not unwind into C: allocation failure aborts in Rust anyway, so the only
    // fallible step here is the zeroed allocation, which cannot panic for sizes Triton passes
    // (it validates them against the tensor's shape).
    let (data_ptr, user) = if byte_size == 0 {
        (ptr::null_mut(), ptr::null_mut())
    } else {
        let mut boxed = Box::new(OutputBuffer {
            data: vec![0u8; byte_size],
        });
        let data_ptr = boxed.data.as_mut_ptr().cast::<c_void>();
        super::counters::buffer_allocated();
        (data_ptr, Box::into_raw(boxed).cast::<c_void>())
    };
    // SAFETY: Triton passes valid out-pointers for the duration of this call.
    unsafe {
        *buffer = data_ptr;
        *buffer_userp = user;
        *actual_memory_type = ffi::TRITONSERVER_MEMORY_CPU;
        *actual_memory_type_id = 0;
    }
    ptr::null_mut()
}

/// Frees an output buffer once Triton no longer references it.
unsafe extern "C" fn release_output(
    _allocator: *mut ffi::TRITONSERVER_ResponseAllocator,
    _buffer: *mut c_void,
    buffer_userp: *mut c_void,
    _byte_size: usize,
    _memory_type: ffi::TRITONSERVER_MemoryType,
    _memory_type_id: i64,
) -> *mut ffi::TRITONSERVER_Error {
    if !buffer_userp.is_null() {
        // SAFETY: every non-null buffer user pointer was made by `Box::into_raw` in
        // `alloc_output`, and Triton releases each buffer exactly once.
        drop(unsafe { Box::from_raw(buffer_userp.cast::<OutputBuffer>()) });
        super::counters::buffer_released();
    }
    ptr::null_mut()
}
