//! The Triton core in-process, through its C API: the one place in trident with `unsafe`.
//!
//! - `ffi`: the bindgen output, nothing else;
//! - [`library`]: finding and opening `libtritonserver.so`, the API version check;
//! - [`Server`]: start and stop, health, metadata, repositories, load and unload;
//! - `inference`: requests with zero-copy inputs, responses into tokio ([`ResponseStream`]);
//! - `allocator` and `response`: outputs written into buffers trident owns;
//! - [`in_flight`]: how many requests and output buffers Triton holds right now;
//! - `descriptors`: what the processes the core's backends start inherit (std streams only);
//! - `recovery`: models whose python backend process died, reloaded and reported in health;
//! - [`EngineError`](crate::engine::EngineError): `TRITONSERVER_Error` as a Rust value.

#![allow(unsafe_code)]

mod allocator;
mod convert;
mod counters;
mod descriptors;
mod engine;
mod error;
mod ffi;
mod handle;
mod inference;
pub mod library;
mod message;
mod options;
mod recovery;
mod response;
mod server;

pub use crate::engine::settings::{BackendSetting, CoreLogging};
pub use counters::in_flight;
pub use engine::{TritonEngine, TritonResponses};
pub use inference::ResponseStream;
pub use library::{ApiVersion, LoadError, Triton};
pub use options::{ModelControl, ServerConfig};
pub use server::{ModelIndexEntry, Server, TransactionPolicy};

use crate::engine::DataType;

impl Triton {
    /// Triton's own name for a data type (`TRITONSERVER_DataTypeString`).
    pub fn datatype_name(&self, dtype: DataType) -> String {
        // SAFETY: any data type code is accepted; the returned string is static in the library.
        unsafe {
            error::cstr_lossy(
                self.api
                    .TRITONSERVER_DataTypeString(convert::datatype_to_raw(dtype)),
            )
        }
    }

    /// The data type Triton parses from a name (`TRITONSERVER_StringToDataType`).
    pub fn parse_datatype(&self, name: &str) -> Option<DataType> {
        let name = error::to_cstring("datatype", name).ok()?;
        // SAFETY: `name` is NUL-terminated and outlives the call.
        convert::datatype_from_raw(unsafe { self.api.TRITONSERVER_StringToDataType(name.as_ptr()) })
    }

    /// Triton's element size for a data type, 0 for `BYTES` (`TRITONSERVER_DataTypeByteSize`).
    pub fn datatype_byte_size(&self, dtype: DataType) -> u32 {
        // SAFETY: any data type code is accepted; the call only reads a table.
        unsafe {
            self.api
                .TRITONSERVER_DataTypeByteSize(convert::datatype_to_raw(dtype))
        }
    }
}
