//! Generate through version 0.2.0's plugins, for a model whose selection has generate hooks:
//!
//! ```text
//! generate request adapter (invocation → generate JSON or tensors, and whether to stream)
//!   ─▶ engine
//!   ─▶ one answer: every response to the generate response adapter (a reply), or the JSON
//!   ─▶ a stream: each event through the stream adapter, then its end (payloads → events)
//! ```
//! Without a request adapter the body is a generate body and the endpoint's inference type
//! says whether to stream. A stream adapter that fails (refuses, traps, runs out of time or
//! memory, or returns a payload with a line break) ends its stream with one error event.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::generate::{EVENTS_BUFFERED, Redact, request as generate_request};
use super::{Failure, Pipeline, Request, plugin_result};
use crate::engine::{Engine, EngineError, ErrorCode, InferRequest};
use crate::plugins::bindings::generate_request::exports::trident::plugin::generate_request_adapter::GenerateInputs;
use crate::plugins::host::{LoadedPlugin, StreamPosition};
use crate::plugins::{PluginHost, Reply, WitInvocation, convert};
use crate::protocol::generate::encode_generate_response;
use crate::protocol::sse::{error_event, event};

/// The most a finished answer's responses may hold (as JSON) for the generate response
/// adapter: past it the request is cancelled and fails, instead of growing without bound.
const MAX_COLLECTED_BYTES: usize = 64 << 20;

/// What a generate through plugins answers.
pub enum GenerateAnswer {
    /// The model's one response as generate JSON (no response adapter).
    Json(Vec<u8>),
    /// The generate response adapter's reply.
    Reply {
        plugin: Arc<LoadedPlugin>,
        reply: Reply,
    },
    /// Server-sent events, framed.
    Events(mpsc::Receiver<Bytes>),
}

/// The stream adapter of one stream, and what each of its calls is given.
struct StreamAdapter {
    host: Arc<PluginHost>,
    plugin: Arc<LoadedPlugin>,
    invocation: Arc<WitInvocation>,
    stream_id: String,
    created: u64,
}

impl<E: Engine> Pipeline<'_, E> {
    /// Whether `model`'s plugins take part in its generate requests: a generate request
    /// adapter, or a generate response or stream adapter.
    pub fn adapts_generate(&self, model: &str) -> bool {
        let Some(plugins) = &self.plugins else {
            return false;
        };
        plugins.select(model, None, None).is_some_and(|s| {
            s.request.is_some_and(|p| p.adapts_generate_requests())
                || s.response
                    .is_some_and(|p| p.adapts_generate_responses() || p.adapts_streams())
        })
    }

    /// A generate request through the model's plugins; `stream_by_default` is the endpoint's
    /// inference type (`generate_stream`), used when no request adapter decides.
    pub async fn generate(
        &self,
        request: Request<'_>,
        stream_by_default: bool,
        redact: Redact,
    ) -> Result<GenerateAnswer, Failure> {
        let plugins = self.plugins.clone().ok_or(Failure::NoResponse)?;
        let selection = plugins
            .select(
                request.model,
                request.invocation.target_variant.as_deref(),
                request.invocation.inference_id.as_deref(),
            )
            .unwrap_or_default();
        let adapter = selection.request.filter(|p| {
            p.adapts_generate_requests()
                && p.accepts_content_type(request.invocation.content_type.as_deref())
        });
        let (infer, stream) = match &adapter {
            Some(plugin) => {
                let (infer, stream) = self.adapt_request(&request, &plugins, plugin).await?;
                (infer, stream.unwrap_or(stream_by_default))
            }
            None => (
                generate_request(self.engine, request.model, &request.body)?,
                stream_by_default,
            ),
        };
        let response = selection.response.filter(|p| {
            if stream {
                p.adapts_streams()
            } else {
                p.adapts_generate_responses()
            }
        });
        let responses = self.engine.infer(infer).map_err(Failure::Refused)?;
        if stream {
            self.stream(&request, &plugins, response, responses, redact)
                .await
        } else {
            self.answer_once(&request, &plugins, response, responses)
                .await
        }
    }

    /// Every response of the model, to the generate response adapter, or the one response as
    /// generate JSON.
    async fn answer_once(
        &self,
        request: &Request<'_>,
        plugins: &PluginHost,
        adapter: Option<Arc<LoadedPlugin>>,
        mut responses: E::Responses,
    ) -> Result<GenerateAnswer, Failure> {
        let (mut collected, mut bytes) = (Vec::new(), 0usize);
        while let Some(item) = responses.next().await {
            let response = item.map_err(Failure::Model)?;
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
        let Some(plugin) = adapter else {
            return match <[Vec<u8>; 1]>::try_from(collected) {
                Ok([json]) => Ok(GenerateAnswer::Json(json)),
                Err(_) => Err(Failure::Model(EngineError::new(
                    ErrorCode::InvalidArg,
                    "generate expects model to produce exactly 1 response, use generate \
                     stream for model that generates various number of responses",
                ))),
            };
        };
        let started = Instant::now();
        let wit = Arc::new(self.wit_invocation(request, &plugin));
        let reply = plugins
            .adapt_generate_response(&plugin, wit, collected)
            .await;
        self.observe_generate(&plugin, "generate-response", &reply, started);
        let reply = plugin_result(&plugin, reply)?;
        Ok(GenerateAnswer::Reply { plugin, reply })
    }

    /// The model's responses as events, through the stream adapter when there is one. The
    /// first response decides the outcome (its error is the request's); a later one's error
    /// becomes the stream's last event.
    async fn stream(
        &self,
        request: &Request<'_>,
        plugins: &Arc<PluginHost>,
        adapter: Option<Arc<LoadedPlugin>>,
        mut responses: E::Responses,
        redact: Redact,
    ) -> Result<GenerateAnswer, Failure> {
        let first = match responses.next().await {
            Some(Ok(response)) => {
                Some(encode_generate_response(&response).map_err(Failure::Encode)?)
            }
            Some(Err(error)) => return Err(Failure::Model(error)),
            None => None,
        };
        let adapter = adapter.map(|plugin| StreamAdapter {
            invocation: Arc::new(self.wit_invocation(request, &plugin)),
            host: Arc::clone(plugins),
            plugin,
            stream_id: stream_id(),
            created: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        });
        let (sender, receiver) = mpsc::channel(EVENTS_BUFFERED);
        tokio::spawn(async move {
            let mut index = 0;
            let mut next = first;
            while let Some(json) = next.take() {
                let events = match &adapter {
                    Some(adapter) => adapter.call(index, Some(&json)).await,
                    None => Ok(vec![event(&json)]),
                };
                if !send_all(&sender, events, &redact).await {
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
                            let _ = sender.send(error_event(&redact(&message))).await;
                            return;
                        }
                    },
                };
            }
            if let Some(adapter) = &adapter {
                let events = adapter.call(index, None).await;
                send_all(&sender, events, &redact).await;
            }
        });
        Ok(GenerateAnswer::Events(receiver))
    }

    /// The generate request adapter's request, and whether to stream its answer.
    async fn adapt_request(
        &self,
        request: &Request<'_>,
        plugins: &PluginHost,
        plugin: &Arc<LoadedPlugin>,
    ) -> Result<(InferRequest, Option<bool>), Failure> {
        let started = Instant::now();
        let wit = Arc::new(self.wit_invocation(request, plugin));
        let adapted = plugins.adapt_generate_request(plugin, wit).await;
        self.observe_generate(plugin, "generate-request", &adapted, started);
        let adapted = plugin_result(plugin, adapted)?;
        let stream = adapted.stream;
        let infer = match adapted.inputs {
            GenerateInputs::Json(json) => {
                generate_request(self.engine, request.model, &Bytes::from(json))?
            }
            GenerateInputs::Tensors(tensors) => {
                let mut infer = InferRequest::new(request.model);
                infer.inputs = tensors.into_iter().map(convert::input_from_wit).collect();
                infer
            }
        };
        Ok((infer, stream))
    }

    fn observe_generate<T>(
        &self,
        plugin: &LoadedPlugin,
        hook: &'static str,
        result: &Result<Result<T, crate::plugins::PluginError>, crate::plugins::CallFailure>,
        started: Instant,
    ) {
        self.observe(plugin, hook, &super::Codecs::default(), result, started);
    }
}

impl StreamAdapter {
    /// The events the adapter sends for the event `json` at `index`, or, with `None`, at the
    /// end: framed, or the message of why the stream ends here.
    async fn call(&self, index: u64, json: Option<&[u8]>) -> Result<Vec<Bytes>, String> {
        let position = StreamPosition {
            stream_id: self.stream_id.clone(),
            created: self.created,
            index,
        };
        let payloads = self
            .host
            .adapt_stream(
                &self.plugin,
                Arc::clone(&self.invocation),
                position,
                json.map(<[u8]>::to_vec),
            )
            .await;
        let name = &self.plugin.name;
        let events = match payloads {
            Ok(Ok(payloads)) => payloads
                .iter()
                .map(|payload| {
                    if payload.contains(['\n', '\r']) {
                        Err(format!(
                            "plugin '{name}' returned an event payload with a line break"
                        ))
                    } else {
                        Ok(event(payload.as_bytes()))
                    }
                })
                .collect(),
            Ok(Err(error)) => Err(format!("plugin '{name}' refused an event: {error:?}")),
            Err(failure) => Err(failure.to_string()),
        };
        self.plugin.counters().add_stream_call(events.is_err());
        events
    }
}

/// Sends `events`, or the error event that ends the stream; whether the stream goes on.
async fn send_all(
    sender: &mpsc::Sender<Bytes>,
    events: Result<Vec<Bytes>, String>,
    redact: &Redact,
) -> bool {
    match events {
        Ok(events) => {
            for event in events {
                if sender.send(event).await.is_err() {
                    return false;
                }
            }
            true
        }
        Err(message) => {
            tracing::warn!(error = %message, "a stream adapter ended its stream");
            let _ = sender.send(error_event(&redact(&message))).await;
            false
        }
    }
}

/// An id unique to one stream in this process: the time it started and a sequence number.
fn stream_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:x}{:04x}",
        nanos,
        NEXT.fetch_add(1, Ordering::Relaxed) & 0xffff
    )
}
