//! A request handed to the backend's execute: owned until released, which its drop does, so a
//! request is released exactly once on every path (a panic's unwinding included).

use std::borrow::Cow;
use std::ffi::CStr;
use std::ptr;

use crate::dtype::DataType;
use crate::error::{BackendError, check};
use crate::ffi;

/// A request the backend owns: Triton gave it to execute, and it goes back with
/// `TRITONBACKEND_RequestRelease` when this drops.
pub struct Request {
    raw: *mut ffi::TRITONBACKEND_Request,
}

/// An input tensor of a request, its data read into one contiguous slice.
#[derive(Clone)]
pub struct Input<'r> {
    /// The tensor's name.
    pub name: String,
    /// The element type.
    pub dtype: DataType,
    /// The shape, batch dimension included where the model batches.
    pub shape: Vec<i64>,
    /// The data: borrowed where Triton holds it in one CPU buffer, copied where it is in several.
    pub data: Cow<'r, [u8]>,
}

impl Request {
    /// Adopts a request execute received.
    ///
    /// # Safety
    /// `raw` is a request Triton passed to `TRITONBACKEND_ModelInstanceExecute`, not yet released
    /// and adopted only once.
    pub unsafe fn adopt(raw: *mut ffi::TRITONBACKEND_Request) -> Request {
        Request { raw }
    }

    /// The raw handle, for the response and statistics calls that take it.
    pub fn raw(&self) -> *mut ffi::TRITONBACKEND_Request {
        self.raw
    }

    /// The names of the outputs the client asked for, in its order.
    pub fn requested_outputs(&self) -> Result<Vec<String>, BackendError> {
        let mut count = 0u32;
        // SAFETY: `self.raw` is a live request (type invariant); `count` is writable.
        unsafe {
            check(
                ffi::TRITONBACKEND_RequestOutputCount(self.raw, &mut count),
                "TRITONBACKEND_RequestOutputCount",
            )?
        };
        (0..count)
            .map(|index| {
                let mut name = ptr::null();
                // SAFETY: `index` < count; the name Triton returns is a NUL-terminated string
                // owned by the request, copied before the request can be released.
                unsafe {
                    check(
                        ffi::TRITONBACKEND_RequestOutputName(self.raw, index, &mut name),
                        "TRITONBACKEND_RequestOutputName",
                    )?;
                    Ok(CStr::from_ptr(name).to_string_lossy().into_owned())
                }
            })
            .collect()
    }

    /// Every input of the request, in its order.
    pub fn inputs(&self) -> Result<Vec<Input<'_>>, BackendError> {
        let mut count = 0u32;
        // SAFETY: live request, writable out-pointer.
        unsafe {
            check(
                ffi::TRITONBACKEND_RequestInputCount(self.raw, &mut count),
                "TRITONBACKEND_RequestInputCount",
            )?
        };
        (0..count)
            .map(|index| {
                let mut input = ptr::null_mut();
                // SAFETY: live request, `index` < count, writable out-pointer.
                unsafe {
                    check(
                        ffi::TRITONBACKEND_RequestInputByIndex(self.raw, index, &mut input),
                        "TRITONBACKEND_RequestInputByIndex",
                    )?
                };
                self.read_input(input)
            })
            .collect()
    }

    fn read_input(&self, input: *mut ffi::TRITONBACKEND_Input) -> Result<Input<'_>, BackendError> {
        let mut name = ptr::null();
        let mut dtype = 0;
        let mut shape = ptr::null();
        let mut dims = 0u32;
        let mut byte_size = 0u64;
        let mut buffers = 0u32;
        // SAFETY: `input` belongs to this live request; every out-pointer is writable. The name
        // and shape Triton returns live as long as the request; both are copied here.
        let (name, shape) = unsafe {
            check(
                ffi::TRITONBACKEND_InputProperties(
                    input,
                    &mut name,
                    &mut dtype,
                    &mut shape,
                    &mut dims,
                    &mut byte_size,
                    &mut buffers,
                ),
                "TRITONBACKEND_InputProperties",
            )?;
            let name = CStr::from_ptr(name).to_string_lossy().into_owned();
            let shape = if dims == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(shape, dims as usize).to_vec()
            };
            (name, shape)
        };
        let dtype = DataType::from_raw(dtype)?;
        let mut parts: Vec<&[u8]> = Vec::with_capacity(buffers as usize);
        for index in 0..buffers {
            let mut base = ptr::null();
            let mut size = 0u64;
            let mut memory = ffi::TRITONSERVER_MEMORY_CPU;
            let mut memory_id = 0i64;
            // SAFETY: `index` < the buffer count Triton gave; out-pointers are writable.
            unsafe {
                check(
                    ffi::TRITONBACKEND_InputBuffer(
                        input,
                        index,
                        &mut base,
                        &mut size,
                        &mut memory,
                        &mut memory_id,
                    ),
                    "TRITONBACKEND_InputBuffer",
                )?
            };
            if memory == ffi::TRITONSERVER_MEMORY_GPU {
                return Err(BackendError::new(
                    crate::error::Code::Unsupported,
                    format!("input {name} is in GPU memory; the trident backend runs on the CPU"),
                ));
            }
            if size == 0 {
                continue;
            }
            // SAFETY: Triton documents the buffer as `size` readable bytes of CPU memory that
            // live as long as the request, which outlives the returned `Input` (borrowed from
            // `self`).
            parts.push(unsafe { std::slice::from_raw_parts(base.cast::<u8>(), size as usize) });
        }
        let data = match parts.as_slice() {
            [] => Cow::Borrowed(&[][..]),
            [one] => Cow::Borrowed(*one),
            many => Cow::Owned(many.concat()),
        };
        if data.len() as u64 != byte_size {
            return Err(BackendError::internal(format!(
                "input {name}: its buffers hold {} bytes, its properties say {byte_size}",
                data.len()
            )));
        }
        Ok(Input {
            name,
            dtype,
            shape,
            data,
        })
    }

    /// The request's sequence correlation id (0 outside a sequence).
    pub fn correlation_id(&self) -> Result<u64, BackendError> {
        let mut id = 0u64;
        // SAFETY: live request, writable out-pointer.
        unsafe {
            check(
                ffi::TRITONBACKEND_RequestCorrelationId(self.raw, &mut id),
                "TRITONBACKEND_RequestCorrelationId",
            )?
        };
        Ok(id)
    }

    /// The request's flags (`TRITONSERVER_REQUEST_FLAG_SEQUENCE_START` / `_END`).
    pub fn flags(&self) -> Result<u32, BackendError> {
        let mut flags = 0u32;
        // SAFETY: live request, writable out-pointer.
        unsafe {
            check(
                ffi::TRITONBACKEND_RequestFlags(self.raw, &mut flags),
                "TRITONBACKEND_RequestFlags",
            )?
        };
        Ok(flags)
    }

    /// Whether the client cancelled the request.
    pub fn is_cancelled(&self) -> bool {
        let mut cancelled = false;
        // SAFETY: live request, writable out-pointer.
        let status = unsafe {
            check(
                ffi::TRITONBACKEND_RequestIsCancelled(self.raw, &mut cancelled),
                "TRITONBACKEND_RequestIsCancelled",
            )
        };
        status.is_ok() && cancelled
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        // SAFETY: the request is live and owned (type invariant), and this is its only release.
        // A failed release leaves nothing the backend could do; the error is freed.
        let _ = unsafe {
            check(
                ffi::TRITONBACKEND_RequestRelease(self.raw, ffi::TRITONSERVER_REQUEST_RELEASE_ALL),
                "TRITONBACKEND_RequestRelease",
            )
        };
    }
}
