//! `trident:models/models`: a plugin's calls of its endpoint's models, from inside its call.
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
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;

use super::store::{DeadlineExceeded, PluginState};
use crate::engine::{EngineError, ErrorCode, InferRequest, InferResponse};
use crate::plugins::wit::bindings::models::{self, CallError, ModelRequest, ModelResponse};
use crate::plugins::wit::convert;

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
pub(super) struct ModelBudgetExceeded(String);

/// The status-bearing error a model's refusal or failure is for the guest.
fn call_error(model: &str, error: EngineError) -> CallError {
    let message = format!("model '{model}': {}", error.message);
    match error.code {
        ErrorCode::InvalidArg | ErrorCode::Unsupported => CallError::BadRequest(message),
        ErrorCode::NotFound | ErrorCode::Unavailable => CallError::Unavailable(message),
        _ => CallError::Failed(message),
    }
}

fn tensor_bytes<'a>(tensors: impl Iterator<Item = &'a [u8]>) -> u64 {
    tensors.map(|data| data.len() as u64).sum()
}

impl PluginState {
    /// Counts `bytes` more against the call's budget: a trap when it would pass it.
    fn spend_bytes(&mut self, bytes: u64) -> wasmtime::Result<()> {
        let spent = self.model_spent.bytes.saturating_add(bytes);
        if spent > self.model_access.max_bytes {
            return Err(ModelBudgetExceeded(format!(
                "exceeded its budget of {} MiB of model tensors per request (max_model_mb)",
                self.model_access.max_bytes >> 20
            ))
            .into());
        }
        self.model_spent.bytes = spent;
        Ok(())
    }
}

impl models::Host for PluginState {
    async fn infer(
        &mut self,
        request: ModelRequest,
    ) -> wasmtime::Result<Result<ModelResponse, CallError>> {
        let model = request.model;
        if !self.model_access.allows(&model) {
            let allowed = self.model_access.models.join("', '");
            return Ok(Err(CallError::NotAllowed(match allowed.is_empty() {
                true => format!(
                    "model '{model}' may not be called: this plugin's manifest entry names no \
                     model (models = [...])"
                ),
                false => format!(
                    "model '{model}' may not be called: this plugin may call '{allowed}' \
                     (its manifest entry's models)"
                ),
            })));
        }
        let Some(caller) = self.models.clone() else {
            return Ok(Err(CallError::Unavailable(format!(
                "model '{model}' cannot be called here: this call serves no request (a golden \
                 case without the model's answer, or a configuration check)"
            ))));
        };
        if self.model_spent.calls >= self.model_access.max_calls {
            return Err(ModelBudgetExceeded(format!(
                "exceeded its budget of {} model calls per request (max_model_calls)",
                self.model_access.max_calls
            ))
            .into());
        }
        self.model_spent.calls += 1;
        let sent = tensor_bytes(request.inputs.iter().map(|t| t.data.as_slice()));
        self.spend_bytes(sent)?;
        let mut infer = InferRequest::new(&model);
        infer.inputs = request
            .inputs
            .into_iter()
            .map(convert::input_from_wit)
            .collect();
        infer.requested_outputs = request.outputs;
        let started = Instant::now();
        let deadline = tokio::time::Instant::from_std(self.deadline);
        let answered = tokio::time::timeout_at(deadline, caller.infer(infer)).await;
        let took = started.elapsed();
        self.model_spent.time += took;
        let plugin = Arc::clone(&self.plugin);
        let response = match answered {
            Err(_elapsed) => {
                tracing::warn!(plugin = %plugin, model, "a model call outlasted the plugin's time limit; cancelled");
                return Err(DeadlineExceeded.into());
            }
            Ok(Err(error)) => {
                tracing::debug!(plugin = %plugin, model, error = %error.message, took_ms = took.as_millis() as u64, "model call failed");
                return Ok(Err(call_error(&model, error)));
            }
            Ok(Ok(response)) => response,
        };
        let received = tensor_bytes(response.outputs.iter().map(|t| &t.data[..]));
        self.spend_bytes(received)?;
        tracing::debug!(
            plugin = %plugin,
            model,
            took_ms = took.as_millis() as u64,
            sent,
            received,
            "model call"
        );
        Ok(Ok(ModelResponse {
            model_name: response.model_name,
            model_version: response.model_version.to_string(),
            outputs: response
                .outputs
                .iter()
                .map(convert::output_to_wit)
                .collect(),
        }))
    }
}
