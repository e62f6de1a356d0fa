//! The inference engine: plain request and response types, and the Triton core behind them.
//!
//! Everything here above `triton` is safe Rust with no Triton types; `triton` binds the C API.
//! [`processes`] reads the python backend's processes from `/proc` (the engine's recovery and the
//! supervisor both need it).

pub mod classification;
pub mod dtype;
mod error;
#[cfg(test)]
pub mod fake;
pub mod processes;
mod request;
mod response;
pub mod service;
pub mod settings;
pub mod shape;
pub mod triton;

pub use dtype::DataType;
pub use error::{EngineError, ErrorCode};
pub use request::{InferRequest, InputTensor, ParameterValue, Sequence, SequenceId};
pub use response::{InferResponse, OutputTensor};
pub use service::{
    DEFAULT_SEQUENCE_IDLE, Engine, HealthCheck, InFlight, ModelState, SequenceBatching,
};
pub use settings::{BackendSetting, CoreLogging};
