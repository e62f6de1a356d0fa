//! Responses and response factories, each owned by one Rust value: a response is sent at most
//! once (sending consumes it) and deleted if it is dropped unsent; a factory is deleted on drop.

use std::ffi::CString;
use std::ptr;

use crate::dtype::DataType;
use crate::error::{BackendError, Code, check};
use crate::ffi;
use crate::request::Request;

/// One output tensor a model computed: its name, type, shape and data.
pub struct Output<'a> {
    /// The output's name, as the configuration declares it.
    pub name: String,
    /// The element type.
    pub dtype: DataType,
    /// The shape.
    pub shape: Vec<i64>,
    /// The data, borrowed from an input where the model passes it through.
    pub data: std::borrow::Cow<'a, [u8]>,
}

/// A response being built, not yet sent.
pub struct Response {
    raw: *mut ffi::TRITONBACKEND_Response,
}

impl Response {
    /// A new response to `request`.
    pub fn new(request: &Request) -> Result<Response, BackendError> {
        let mut raw = ptr::null_mut();
        // SAFETY: the request is live (borrowed); the out-pointer is writable.
        unsafe {
            check(
                ffi::TRITONBACKEND_ResponseNew(&mut raw, request.raw()),
                "TRITONBACKEND_ResponseNew",
            )?
        };
        Ok(Response { raw })
    }

    /// A new response from `factory` (decoupled models).
    pub fn from_factory(factory: &ResponseFactory) -> Result<Response, BackendError> {
        let mut raw = ptr::null_mut();
        // SAFETY: the factory is live (borrowed); the out-pointer is writable.
        unsafe {
            check(
                ffi::TRITONBACKEND_ResponseNewFromFactory(&mut raw, factory.raw),
                "TRITONBACKEND_ResponseNewFromFactory",
            )?
        };
        Ok(Response { raw })
    }

    /// Adds an output and copies its data into the buffer Triton's response allocator gives.
    pub fn add_output(&mut self, output: &Output<'_>) -> Result<(), BackendError> {
        let name = CString::new(output.name.as_str())
            .map_err(|_| BackendError::invalid("an output name holds a NUL byte"))?;
        let mut raw_output = ptr::null_mut();
        // SAFETY: the response is live and unsent (type invariant); the name and the shape are
        // valid for the call, and Triton copies both.
        unsafe {
            check(
                ffi::TRITONBACKEND_ResponseOutput(
                    self.raw,
                    &mut raw_output,
                    name.as_ptr(),
                    output.dtype.raw(),
                    output.shape.as_ptr(),
                    output.shape.len() as u32,
                ),
                "TRITONBACKEND_ResponseOutput",
            )?
        };
        let mut buffer = ptr::null_mut();
        let mut memory = ffi::TRITONSERVER_MEMORY_CPU;
        let mut memory_id = 0i64;
        // SAFETY: `raw_output` was just created on this response; the out-pointers are writable.
        unsafe {
            check(
                ffi::TRITONBACKEND_OutputBuffer(
                    raw_output,
                    &mut buffer,
                    output.data.len() as u64,
                    &mut memory,
                    &mut memory_id,
                ),
                "TRITONBACKEND_OutputBuffer",
            )?
        };
        if output.data.is_empty() {
            return Ok(());
        }
        if memory == ffi::TRITONSERVER_MEMORY_GPU {
            return Err(BackendError::new(
                Code::Unsupported,
                format!(
                    "output {}: the response allocator gave GPU memory; the trident backend writes CPU memory",
                    output.name
                ),
            ));
        }
        if buffer.is_null() {
            return Err(BackendError::internal(format!(
                "output {}: the response allocator gave no buffer for {} bytes",
                output.name,
                output.data.len()
            )));
        }
        // SAFETY: Triton's allocator returned `buffer` as `data.len()` writable bytes of CPU
        // memory owned by the output; the source is a separate Rust slice, so they cannot overlap.
        unsafe {
            ptr::copy_nonoverlapping(output.data.as_ptr(), buffer.cast::<u8>(), output.data.len())
        };
        Ok(())
    }

    /// Sends the response, with `error` where it failed; `last` marks the request's final one.
    pub fn send(self, last: bool, error: Option<BackendError>) -> Result<(), BackendError> {
        let raw = self.raw;
        std::mem::forget(self);
        let flags = if last {
            ffi::TRITONSERVER_RESPONSE_COMPLETE_FINAL
        } else {
            0
        };
        let error = error.map_or(ptr::null_mut(), BackendError::into_raw);
        // SAFETY: `raw` is live and unsent (type invariant; `self` is forgotten, so it is not
        // deleted too); Triton takes ownership of the response and of `error`.
        unsafe {
            check(
                ffi::TRITONBACKEND_ResponseSend(raw, flags, error),
                "TRITONBACKEND_ResponseSend",
            )
        }
    }
}

impl Drop for Response {
    fn drop(&mut self) {
        // SAFETY: the response is live and unsent (type invariant); this is its only delete.
        let _ = unsafe {
            check(
                ffi::TRITONBACKEND_ResponseDelete(self.raw),
                "TRITONBACKEND_ResponseDelete",
            )
        };
    }
}

/// A response factory: a decoupled model's way to send any number of responses to a request.
pub struct ResponseFactory {
    raw: *mut ffi::TRITONBACKEND_ResponseFactory,
}

impl ResponseFactory {
    /// A factory for `request`'s responses.
    pub fn new(request: &Request) -> Result<ResponseFactory, BackendError> {
        let mut raw = ptr::null_mut();
        // SAFETY: the request is live (borrowed); the out-pointer is writable.
        unsafe {
            check(
                ffi::TRITONBACKEND_ResponseFactoryNew(&mut raw, request.raw()),
                "TRITONBACKEND_ResponseFactoryNew",
            )?
        };
        Ok(ResponseFactory { raw })
    }

    /// Ends the request's responses with the final flag alone, no response.
    pub fn send_final(&self) -> Result<(), BackendError> {
        // SAFETY: the factory is live (type invariant).
        unsafe {
            check(
                ffi::TRITONBACKEND_ResponseFactorySendFlags(
                    self.raw,
                    ffi::TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                ),
                "TRITONBACKEND_ResponseFactorySendFlags",
            )
        }
    }

    /// Whether the client cancelled the request these responses answer.
    pub fn is_cancelled(&self) -> bool {
        let mut cancelled = false;
        // SAFETY: the factory is live (type invariant); the out-pointer is writable.
        let status = unsafe {
            check(
                ffi::TRITONBACKEND_ResponseFactoryIsCancelled(self.raw, &mut cancelled),
                "TRITONBACKEND_ResponseFactoryIsCancelled",
            )
        };
        status.is_ok() && cancelled
    }
}

impl Drop for ResponseFactory {
    fn drop(&mut self) {
        // SAFETY: the factory is live (type invariant); this is its only delete.
        let _ = unsafe {
            check(
                ffi::TRITONBACKEND_ResponseFactoryDelete(self.raw),
                "TRITONBACKEND_ResponseFactoryDelete",
            )
        };
    }
}
