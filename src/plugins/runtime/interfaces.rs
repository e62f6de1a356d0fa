//! The host primitives as guests import them: the `images` and `text` interfaces of a call's
//! store, each running its work ([`crate::plugins::primitives`]) on a primitive thread within
//! the engine's share and the call's deadline.

use super::store::{DeadlineExceeded, PluginState};
use crate::plugins::primitives::{images, pool, text};
use crate::plugins::wit::bindings;
use crate::plugins::wit::bindings::types::{PluginError, Tensor};
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
