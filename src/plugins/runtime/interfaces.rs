//! The host primitives as guests import them: the `images` and `text` interfaces of a call's
//! store, each running its work ([`crate::plugins::primitives`]) on a primitive thread within
//! the engine's share and the call's deadline; and `trident:models/models`, the call's model
//! calls within its access and budgets ([`super::model_calls`]).

use std::sync::Arc;
use std::time::Instant;

use super::model_calls::ModelBudgetExceeded;
use super::store::{DeadlineExceeded, PluginState};
use crate::engine::{EngineError, ErrorCode, InferRequest};
use crate::plugins::primitives::{images, pool, text};
use crate::plugins::wit::bindings;
use crate::plugins::wit::bindings::models::{self, CallError, ModelRequest, ModelResponse};
use crate::plugins::wit::bindings::types::{PluginError, Tensor};
use crate::plugins::wit::convert;
use trident_text::body::Request;
use trident_text::request::{Input, Parameters};

/// `images`: the work runs on a primitive thread within the call's deadline
/// ([`pool`]).
impl bindings::images::Host for PluginState {
    async fn to_tensor(
        &mut self,
        name: String,
        content_type: Option<String>,
        body: Vec<u8>,
        settings: Vec<(String, String)>,
    ) -> wasmtime::Result<Result<Tensor, PluginError>> {
        let (memory_limit_bytes, max_batch) = (self.memory_limit_bytes(), self.max_batch);
        let made = self
            .primitive(move |budget| {
                images::to_tensor(
                    memory_limit_bytes,
                    max_batch,
                    name,
                    content_type.as_deref(),
                    &body,
                    &settings,
                    &|| budget.exhausted(),
                )
            })
            .await?;
        Ok(made.map(|(tensor, working_bytes)| {
            self.host_bytes = self.host_bytes.max(working_bytes);
            tensor
        }))
    }
}

/// `text`: tokenization and detokenization over the plugin's assets ([`crate::plugins::primitives::text`]), on a
/// primitive thread within the call's deadline ([`crate::plugins::primitives::pool`]).
impl bindings::text::Host for PluginState {
    async fn tokenize(
        &mut self,
        tokenizer: String,
        texts: Vec<String>,
        settings: Vec<(String, String)>,
    ) -> wasmtime::Result<Result<Vec<Tensor>, PluginError>> {
        let request = Request {
            inputs: texts.into_iter().map(Input::single).collect(),
            parameters: Parameters::default(),
        };
        self.tokenize_request(tokenizer, request, settings).await
    }

    async fn tokenize_pairs(
        &mut self,
        tokenizer: String,
        rows: Vec<bindings::text::TextPair>,
        settings: Vec<(String, String)>,
        truncation: Option<String>,
        max_length: Option<u32>,
    ) -> wasmtime::Result<Result<Vec<Tensor>, PluginError>> {
        let parameters = match text::parameters(truncation.as_deref(), max_length) {
            Ok(parameters) => parameters,
            Err(error) => return Ok(Err(error)),
        };
        let inputs = rows
            .into_iter()
            .map(|row| Input {
                text: row.text,
                pair: row.pair,
            })
            .collect();
        let request = Request { inputs, parameters };
        self.tokenize_request(tokenizer, request, settings).await
    }

    async fn detokenize(
        &mut self,
        tokenizer: String,
        ids: Vec<u32>,
        skip_special_tokens: bool,
    ) -> wasmtime::Result<Result<String, PluginError>> {
        let (cache, assets) = (self.text.clone(), self.assets.clone());
        let memory_limit_bytes = self.memory_limit_bytes();
        self.primitive(move |_| {
            text::detokenize(
                &cache,
                &assets,
                memory_limit_bytes,
                &tokenizer,
                &ids,
                skip_special_tokens,
            )
            .map(Some)
        })
        .await
    }
}

impl PluginState {
    /// `text.tokenize` and `text.tokenize-pairs`: `request`'s rows tokenized with the asset
    /// `tokenizer` under `settings`, on a primitive thread within the call's deadline.
    fn tokenize_request(
        &self,
        tokenizer: String,
        request: Request,
        settings: Vec<(String, String)>,
    ) -> impl std::future::Future<Output = wasmtime::Result<Result<Vec<Tensor>, PluginError>>>
    + Send
    + 'static {
        let (cache, assets) = (self.text.clone(), self.assets.clone());
        let bounds = text::Bounds {
            memory_limit_bytes: self.memory_limit_bytes(),
            max_batch: self.max_batch,
        };
        self.primitive(move |budget| {
            text::tokenize(
                &cache,
                &assets,
                bounds,
                &tokenizer,
                &request,
                &settings,
                &|| budget.exhausted(),
            )
        })
    }

    /// Runs a host primitive's `work` on a primitive thread, within the engine's share and the
    /// call's deadline ([`crate::plugins::primitives::pool`]): its answer for the guest; a trap when the
    /// deadline comes first (the call fails as one past its time limit), or the work fails.
    pub(in crate::plugins) fn primitive<T: Send + 'static>(
        &self,
        work: impl FnOnce(pool::Budget) -> Result<Option<T>, PluginError> + Send + 'static,
    ) -> impl std::future::Future<Output = wasmtime::Result<Result<T, PluginError>>> + Send + 'static
    {
        use pool::{Unanswered, run};
        let share = if super::scheduler::in_shadow() {
            self.shadow_primitives.clone()
        } else {
            self.primitives.clone()
        };
        let deadline = self.deadline;
        async move {
            match run(&share, deadline, work).await {
                Ok(Ok(Some(value))) => Ok(Ok(value)),
                Ok(Err(error)) => Ok(Err(error)),
                Ok(Ok(None)) | Err(Unanswered::Deadline) => Err(DeadlineExceeded.into()),
                Err(Unanswered::Panicked(why)) => Err(wasmtime::Error::msg(format!(
                    "a host primitive failed: {why}"
                ))),
            }
        }
    }
}

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
            outputs: convert::outputs_to_wit(&response.outputs),
        }))
    }
}
