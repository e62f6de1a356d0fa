//! `trident:models/models`: a plugin's calls of its endpoint's models, from inside its call
//! (the interface as the store offers it is in [`super::interfaces`]).
//!
//! What a call may do is the plugin's [`ModelAccess`] (its manifest entry's `models`,
//! `max_model_calls`, `max_model_mb`); who answers is the [`ModelCaller`] the request's
//! serving path sets on the call (the engine, or a golden case's stand-in). Every call:
//! - names a model the plugin may call, else `not-allowed` (nothing reaches the engine);
//! - counts against the request's budgets: past `max_model_calls` calls, or `max_model_mb` of
//!   tensors in and out, the plugin's call traps (the request fails once, with a 500 naming the
//!   budget), checked before the engine is asked and before an answer is copied into the guest;
//! - waits within the plugin's time limit, which counts the models' time: past it, the model's
//!   request is cancelled (dropped) and the call traps as out of time (504). A client that
//!   leaves drops the plugin's call, and with it the model's request in flight.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::engine::{EngineError, InferRequest, InferResponse};

/// Default for a plugin's `max_model_calls`: model calls one request's plugin call may make.
pub const DEFAULT_MAX_MODEL_CALLS: u32 = 64;

/// Default for a plugin's `max_model_mb`: MiB of tensors one request's model calls may move,
/// in and out together.
pub const DEFAULT_MAX_MODEL_MB: u64 = 256;

/// Who answers a plugin's model calls for one request: the engine behind the endpoint, or a
/// golden case's stand-in.
pub trait ModelCaller: Send + Sync {
    /// `request`'s one response, or why there is none. Dropping the future cancels the request.
    fn infer(
        &self,
        request: InferRequest,
    ) -> BoxFuture<'static, Result<InferResponse, EngineError>>;
}

/// What a plugin's calls may ask of the models: which, and how much per request.
#[derive(Debug, Clone)]
pub struct ModelAccess {
    /// The models it may call, by the names the endpoint serves them under.
    pub models: Arc<[String]>,
    /// The most model calls one of its calls may make.
    pub max_calls: u32,
    /// The most bytes of tensors (inputs and outputs together) those calls may move.
    pub max_bytes: u64,
}

impl Default for ModelAccess {
    /// No model.
    fn default() -> ModelAccess {
        ModelAccess {
            models: Arc::from([]),
            max_calls: DEFAULT_MAX_MODEL_CALLS,
            max_bytes: DEFAULT_MAX_MODEL_MB << 20,
        }
    }
}

impl ModelAccess {
    /// Whether the plugin may call `model`.
    pub fn allows(&self, model: &str) -> bool {
        self.models.iter().any(|allowed| allowed == model)
    }
}

/// What one plugin call's model calls have spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelSpent {
    /// Calls made (answered or not).
    pub calls: u32,
    /// Bytes of tensors sent and received.
    pub bytes: u64,
    /// Time spent waiting for models.
    pub time: Duration,
}

/// A budget a call went past: its message ends the plugin's call.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct ModelBudgetExceeded(pub(super) String);
