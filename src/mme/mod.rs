//! The SageMaker multi-model endpoint: what a load asks for ([`load_request`]), which urls may
//! be loaded ([`url`]), where their model is
//! ([`layout`]), which models are loaded under which names ([`registry`]), a load from start to
//! end ([`load`]: the artifact resolved once, its plugins, the time-out), and which errors
//! mean out-of-memory ([`oom`]), and the list a restarted serving process loads again
//! ([`journal`]).

pub mod journal;
pub mod layout;
pub mod load;
pub mod load_request;
pub mod oom;
pub mod registry;
pub mod url;
