//! Triton's generate extension, with the model's generate plugins (version 0.2.0) where it has
//! them: one path, plugins optional, chosen once per request.
//!
//! ```text
//! the body: a generate request adapter's (invocation → generate JSON or tensors, and whether
//!           to stream), else a flat JSON object mapped onto the inputs by the model's metadata
//!   ─▶ engine
//!   ─▶ one answer: every response to the generate response adapter (a reply), or the one
//!      response as flat JSON
//!   ─▶ a stream: each response's JSON, through the stream adapter when there is one, then its
//!      end; events are handed on as payloads (see `events.rs`)
//! ```
//! Without a request adapter the endpoint's inference type says whether to stream. A stream's
//! first response decides its outcome: when the model fails on it, the request fails with
//! [`Failure::FirstResponse`] (answered with the error's status and one error event, on every
//! route). A later failure (the model's, or the stream adapter's: it refuses, traps, runs out
//! of time or memory, or writes a payload with a line break) ends the stream with one
//! [`StreamEvent::Failed`].

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::events::{self, StreamEvent};
use super::stream_adapter::StreamAdapter;
use super::{Answer, Failure, Pipeline, Request, plugin_result, session_ended};
use crate::engine::{Engine, EngineError, ErrorCode, InferRequest};
use crate::plugins::LoadedPlugin;
use crate::plugins::{GenerateInputs, PluginHost, Selection};
use crate::protocol::generate::{decode_generate_request, encode_generate_response, input_specs};

/// The most a finished answer's responses may hold (as JSON): past it the request is
/// cancelled and fails, instead of growing without bound.
const MAX_COLLECTED_BYTES: usize = 64 << 20;

/// Triton's message for a model that answered `generate` with other than one response.
const NOT_ONE_RESPONSE: &str = "generate expects model to produce exactly 1 response, use \
                                generate stream for model that generates various number of \
                                responses";

impl<E: Engine> Pipeline<'_, E> {
    /// A generate request: `stream_by_default` is the endpoint's inference type
    /// (`generate_stream`), used when no request adapter decides. Answers [`Answer::Json`],
    /// [`Answer::Reply`] or [`Answer::Events`].
    pub async fn generate(
        &self,
        request: Request<'_>,
        stream_by_default: bool,
    ) -> Result<Answer, Failure> {
        let selection = self
            .plugins
            .as_ref()
            .and_then(|plugins| {
                plugins.select(
                    request.model,
                    request.invocation.target_variant.as_deref(),
                    request.invocation.inference_id.as_deref(),
                )
            })
            .unwrap_or_default();
        self.generate_with(request, selection, stream_by_default)
            .await
    }

    /// A generate request through the adapters of `selection` (OpenAI's chat route names its
    /// plugin; `generate` asks the manifest's routing for the model's).
    pub async fn generate_with(
        &self,
        request: Request<'_>,
        selection: Selection,
        stream_by_default: bool,
    ) -> Result<Answer, Failure> {
        let adapter = self
            .plugins
            .as_ref()
            .zip(selection.request.as_ref().filter(|p| {
                p.adapts_generate_requests()
                    && p.accepts_content_type(request.invocation.content_type.as_deref())
            }));
        let (infer, stream) = match adapter {
            Some((plugins, plugin)) => {
                let (infer, stream) = self.adapt_request(&request, plugins, plugin).await?;
                (infer, stream.unwrap_or(stream_by_default))
            }
            None => (
                self.generate_request(request.model, &request.body)?,
                stream_by_default,
            ),
        };
        let responses = self.submit(&request, infer)?;
        let adapters = self
            .plugins
            .clone()
            .zip(response_adapter(selection, stream));
        if stream {
            self.stream(&request, adapters, responses).await
        } else {
            self.answer_once(&request, adapters, responses).await
        }
    }

    /// The request for `model` from a generate body, by the model's metadata.
    fn generate_request(&self, model: &str, body: &Bytes) -> Result<InferRequest, Failure> {
        let metadata = self
            .engine
            .model_metadata(model)
            .map_err(Failure::Refused)?;
        let inputs = input_specs(&metadata).map_err(Failure::Decode)?;
        decode_generate_request(model, body, &inputs).map_err(Failure::Decode)
    }

    /// Every response of the model, to the generate response adapter, or the one response as
    /// generate JSON.
    async fn answer_once(
        &self,
        request: &Request<'_>,
        adapter: Option<(Arc<PluginHost>, Arc<LoadedPlugin>)>,
        mut responses: E::Responses,
    ) -> Result<Answer, Failure> {
        let (mut collected, mut bytes) = (Vec::new(), 0usize);
        while let Some(item) = responses.next().await {
            let response =
                item.map_err(|e| session_ended(request, e).unwrap_or_else(Failure::Model))?;
            let json = encode_generate_response(&response).map_err(Failure::Encode)?;
            bytes += json.len();
            if bytes > MAX_COLLECTED_BYTES {
                // Dropping the responses cancels the request.
                return Err(Failure::Model(EngineError::new(
                    ErrorCode::Internal,
                    format!(
                        "the model's responses to one generate request exceed {} MiB; stream \
                         them instead",
                        MAX_COLLECTED_BYTES >> 20
                    ),
                )));
            }
            collected.push(json);
        }
        let Some((plugins, plugin)) = adapter else {
            return match <[Vec<u8>; 1]>::try_from(collected) {
                Ok([json]) => Ok(Answer::Json(json)),
                Err(_) => Err(Failure::Model(EngineError::new(
                    ErrorCode::InvalidArg,
                    NOT_ONE_RESPONSE,
                ))),
            };
        };
        let started = Instant::now();
        let invocation = self.plugin_invocation(request, &plugin);
        let reply = plugins
            .adapt_generate_response(&plugin, &invocation, collected)
            .await;
        self.observe(&plugin, "generate-response", "", &reply, started);
        let reply = plugin_result(&plugin, reply)?;
        Ok(Answer::Reply { plugin, reply })
    }

    /// The model's responses as events, through the stream adapter when there is one.
    async fn stream(
        &self,
        request: &Request<'_>,
        adapter: Option<(Arc<PluginHost>, Arc<LoadedPlugin>)>,
        mut responses: E::Responses,
    ) -> Result<Answer, Failure> {
        let first = match responses.next().await {
            Some(Ok(response)) => {
                Some(encode_generate_response(&response).map_err(Failure::Encode)?)
            }
            Some(Err(error)) => {
                return Err(session_ended(request, error).unwrap_or_else(Failure::FirstResponse));
            }
            None => None,
        };
        let adapter = adapter.map(|(plugins, plugin)| {
            let invocation = self.plugin_invocation(request, &plugin);
            StreamAdapter::new(plugins, plugin, invocation)
        });
        let (sender, receiver) = events::channel();
        // The stream outlives the request's future; it keeps the request's span, so what its
        // adapter logs names the request, and its session's turn to its last event (the
        // session's next request, a close or its expiry wait for it).
        let span = tracing::Span::current();
        let turn = request.session.clone();
        tokio::spawn(
            async move {
                let _turn = turn;
                let mut index = 0;
                let mut next = first;
                while let Some(json) = next.take() {
                    let payloads = match &adapter {
                        Some(adapter) => adapter.call(index, Some(&json)).await,
                        None => Ok(vec![Bytes::from(json)]),
                    };
                    if !send_all(&sender, payloads).await {
                        return;
                    }
                    index += 1;
                    next = match responses.next().await {
                        None => None,
                        Some(item) => match item.map_err(|e| e.message).and_then(|response| {
                            encode_generate_response(&response).map_err(|e| e.to_string())
                        }) {
                            Ok(json) => Some(json),
                            Err(message) => {
                                let _ = sender.send(StreamEvent::Failed(message)).await;
                                return;
                            }
                        },
                    };
                }
                if let Some(adapter) = &adapter {
                    send_all(&sender, adapter.call(index, None).await).await;
                }
            }
            .instrument(span),
        );
        Ok(Answer::Events(receiver))
    }

    /// The generate request adapter's request, and whether to stream its answer.
    async fn adapt_request(
        &self,
        request: &Request<'_>,
        plugins: &PluginHost,
        plugin: &Arc<LoadedPlugin>,
    ) -> Result<(InferRequest, Option<bool>), Failure> {
        let started = Instant::now();
        let invocation = self.plugin_invocation(request, plugin);
        let adapted = plugins.adapt_generate_request(plugin, &invocation).await;
        self.observe(plugin, "generate-request", "", &adapted, started);
        let adapted = plugin_result(plugin, adapted)?;
        let infer = match adapted.inputs {
            GenerateInputs::Json(json) => {
                self.generate_request(request.model, &Bytes::from(json))?
            }
            GenerateInputs::Tensors(inputs) => {
                let mut infer = InferRequest::new(request.model);
                infer.inputs = inputs;
                infer
            }
        };
        Ok((infer, adapted.stream))
    }
}

/// The selection's adapter for the answer: its stream adapter for a stream, its generate
/// response adapter for one answer.
fn response_adapter(selection: Selection, stream: bool) -> Option<Arc<LoadedPlugin>> {
    selection.response.filter(|p| {
        if stream {
            p.adapts_streams()
        } else {
            p.adapts_generate_responses()
        }
    })
}

/// Sends `payloads` as events, or the failure that ends the stream; whether the stream goes on.
async fn send_all(
    sender: &mpsc::Sender<StreamEvent>,
    payloads: Result<Vec<Bytes>, String>,
) -> bool {
    match payloads {
        Ok(payloads) => {
            for payload in payloads {
                if sender.send(StreamEvent::Data(payload)).await.is_err() {
                    return false;
                }
            }
            true
        }
        Err(message) => {
            tracing::warn!(error = %message, "a stream adapter ended its stream");
            let _ = sender.send(StreamEvent::Failed(message)).await;
            false
        }
    }
}
