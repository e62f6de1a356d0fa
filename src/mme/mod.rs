//! The SageMaker multi-model endpoint.

pub mod oom;
