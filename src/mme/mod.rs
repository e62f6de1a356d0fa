//! The SageMaker multi-model endpoint: which urls may be loaded ([`url`]), where their model is
//! ([`layout`]), which models are loaded under which names ([`registry`]), and which errors
//! mean out-of-memory ([`oom`]).

pub mod layout;
pub mod oom;
pub mod registry;
pub mod url;
