//! The wire formats, as pure functions: KServe v2 inference JSON, the binary tensor extension
//! behind SageMaker's mime type, whether a JSON body is a v2 request (`v2_sniff`), Triton's generate extension, server-sent events, and Triton's
//! (RapidJSON's) wording for a body that is not JSON; and which model names the routes can
//! address (`model_name`).
//!
//! Nothing here does I/O or knows about HTTP; `pipeline`, `http` and `plugins` call in with bytes
//! and headers.

pub mod binary_header;
pub mod float_array;
pub mod generate;
pub mod json_syntax;
pub mod model_name;
pub mod sse;
pub mod tensor_data;
pub mod v2_envelope;
pub mod v2_request;
pub mod v2_response;
pub mod v2_sniff;

/// Why a body could not be decoded or a response encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The client sent something malformed (400).
    #[error("{0}")]
    BadRequest(String),
    /// The model produced something that cannot be encoded (500).
    #[error("{0}")]
    Internal(String),
}
