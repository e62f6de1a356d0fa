//! The inference pipeline between HTTP and the engine: one straight path per request.
//!
//! ```text
//! codecs chosen once (v2 JSON / binary, or the model's plugins)   codecs.rs
//!   ─▶ decode (a request plugin, or the v2 codec)
//!   ─▶ engine (shapes checked there; one response expected)
//!   ─▶ encode (a response plugin's reply, or v2 JSON / binary)
//!   ─▶ an Answer, or one Failure saying where it went wrong       failure.rs
//! ```
//! A model whose manifest entry names a pipeline plugin is answered by the plugin whole: it
//! calls the models it needs through the engine (`model_calls.rs`) and writes the reply.
//! Generate and its stream have one path of their own, with or without the model's generate
//! plugins (`generate.rs`); a stream is handed on as unframed events (`events.rs`). Nothing
//! here knows HTTP or WebSocket: each transport frames an [`Answer`] and maps a [`Failure`] to
//! a status once (`http::invocations`, `http::bidi_stream`).

mod batches;
mod codecs;
pub mod events;
mod failure;
mod generate;
mod model_calls;
mod stream_adapter;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::StreamExt;
use http::HeaderMap;

pub use codecs::Codecs;
pub use events::{Events, StreamEvent};
pub use failure::Failure;

use crate::engine::{Engine, EngineError, ErrorCode, InferRequest, InferResponse, SequenceId};
use crate::invocation::Invocation;
use crate::metrics::Metrics;
use crate::plugins::LoadedPlugin;
use crate::plugins::host::shadow::{Serving, ShadowCall};
use crate::plugins::platform::shadow::{ShadowHook, Verdict};
use crate::plugins::{
    AdaptedRequest, CallFailure, HookResult, PluginHost, PluginInvocation, PluginReply,
};
use crate::protocol::binary_header::json_header_size;
use crate::protocol::v2_request::{OutputEncoding, decode_infer_request};
use crate::protocol::v2_response::{EncodedBody, encode_infer_response};
use crate::sessions::SessionTurn;
use crate::sessions::table::FIRST_SESSION_SEQUENCE_ID;

/// Triton's message for a decoupled model asked for one answer.
pub const DECOUPLED_REFUSED: &str =
    "HTTP end point doesn't support models with decoupled transaction policy";

/// What an inference or a generate answers, before a transport frames it.
pub enum Answer {
    /// KServe v2, JSON or binary.
    V2(EncodedBody),
    /// A response adapter's reply, as the plugin wrote it (the transport frames it).
    Reply {
        /// The plugin that wrote the reply: named in errors, and its dropped headers counted.
        plugin: Arc<LoadedPlugin>,
        /// The status, content type, headers and body the plugin chose.
        reply: PluginReply,
    },
    /// Generate: the model's one response as a flat JSON object.
    Json(Vec<u8>),
    /// Generate stream: its events as they come.
    Events(Events),
}

/// An inference's answer or failure, and the A/B variant that served it.
pub struct Inferred {
    /// The A/B variant that served it, when the model has variants.
    pub variant: Option<String>,
    /// The answer, or where the inference failed.
    pub result: Result<Answer, Failure>,
}

/// What one request's inference runs on.
pub struct Pipeline<'a, E> {
    /// The engine the model runs on.
    pub engine: &'a E,
    /// The plugin set the request started with (a reload meanwhile does not change it).
    pub plugins: Option<Arc<PluginHost>>,
    /// Where plugin calls are counted.
    pub metrics: &'a Metrics,
    /// Whether stateful sessions are on: numeric sequence ids from
    /// [`FIRST_SESSION_SEQUENCE_ID`] are then the sessions', and a request outside a session
    /// may not use them.
    pub sessions: bool,
}

/// One request to the pipeline: which route it came by, for which model, with SageMaker's
/// headers and the body.
pub struct Request<'a> {
    /// The route as plugins see it: `/invocations` or `/models/{name}/invoke`.
    pub route: &'a str,
    /// The name the engine serves the model under.
    pub model: &'a str,
    /// SageMaker's headers of the request.
    pub invocation: &'a Invocation,
    /// Every request header; plugins see only those their manifest names.
    pub headers: &'a HeaderMap,
    /// The request body, read whole.
    pub body: Bytes,
    /// The request's turn in its stateful session, if it has one: its inference is then a
    /// request of the session's sequence. A stream keeps the turn to its last event.
    pub session: Option<SessionTurn>,
}

impl<E: Engine> Pipeline<'_, E> {
    /// One KServe v2 inference: codecs chosen once, decode → engine → encode.
    pub async fn infer(&self, request: Request<'_>) -> Inferred {
        let selection = self.plugins.as_ref().and_then(|plugins| {
            plugins.select(
                request.model,
                request.invocation.target_variant.as_deref(),
                request.invocation.inference_id.as_deref(),
            )
        });
        let codecs = selection
            .map(|s| Codecs::choose(s, request.invocation, &request.body))
            .unwrap_or_default();
        let variant = codecs.variant.clone();
        Inferred {
            variant,
            result: self.run(&request, &codecs).await,
        }
    }

    async fn run(&self, request: &Request<'_>, codecs: &Codecs) -> Result<Answer, Failure> {
        if let (Some(plugin), Some(plugins)) = (&codecs.pipeline, &self.plugins) {
            return self.pipeline(request, codecs, plugin, plugins).await;
        }
        let mut shadows = Vec::new();
        let (infer, encoding) = self.decode(request, codecs, &mut shadows).await?;
        let response = match codecs.request.is_some() && request.session.is_none() {
            true => self.adapted_response(request, infer).await?,
            false => self.one_response(request, infer).await?,
        };
        let answer = self
            .encode(request, codecs, response, &encoding, &mut shadows)
            .await?;
        // The answer is made: the shadows' candidates start now, on the guest threads.
        if let Some(plugins) = &self.plugins {
            plugins.shadow(shadows);
        }
        Ok(answer)
    }

    /// The request answered whole by the pipeline `plugin`, its model calls answered by the
    /// engine.
    async fn pipeline(
        &self,
        request: &Request<'_>,
        codecs: &Codecs,
        plugin: &Arc<LoadedPlugin>,
        plugins: &PluginHost,
    ) -> Result<Answer, Failure> {
        let started = Instant::now();
        let invocation = self.plugin_invocation(request, plugin);
        let reply = plugins.handle(plugin, &invocation).await;
        self.observe(plugin, "pipeline", variant(codecs), &reply, started);
        Ok(Answer::Reply {
            plugin: Arc::clone(plugin),
            reply: plugin_result(plugin, reply)?,
        })
    }

    /// A shadow call of `hook`'s candidate for `request`, when the request is in the model's
    /// shadow sample and the candidate takes it (else counted skipped); `serving` is what the
    /// serving adapter answered, made only when the call is.
    fn shadow_call(
        &self,
        request: &Request<'_>,
        codecs: &Codecs,
        hook: ShadowHook,
        serving: impl FnOnce() -> Serving,
    ) -> Option<ShadowCall> {
        let shadow = codecs.shadow.as_ref()?;
        let candidate = shadow.candidate(hook)?;
        let takes = match hook {
            ShadowHook::Request => {
                candidate.serves_content_type(request.invocation.content_type.as_deref())
            }
            ShadowHook::Response => candidate.serves_accept(request.invocation.accept.as_deref()),
        };
        if !takes {
            shadow.count(request.model, hook, Verdict::Skipped, None);
            return None;
        }
        // The candidate sees the request as a plugin would, without its session's store: a
        // shadow changes nothing.
        let invocation = PluginInvocation::new(
            request.route,
            request.model,
            request.invocation,
            request.headers,
            &candidate.headers,
            &request.body,
            None,
        );
        Some(ShadowCall {
            shadow: Arc::clone(shadow),
            model: request.model.to_owned(),
            inference_id: request.invocation.inference_id.clone(),
            invocation,
            serving: serving(),
        })
    }

    /// The request as the engine takes it: from the request plugin, or the v2 codec.
    async fn decode(
        &self,
        request: &Request<'_>,
        codecs: &Codecs,
        shadows: &mut Vec<ShadowCall>,
    ) -> Result<(InferRequest, OutputEncoding), Failure> {
        let (Some(plugin), Some(plugins)) = (&codecs.request, &self.plugins) else {
            let content_type = request.invocation.content_type.as_deref();
            return json_header_size(content_type.map(str::as_bytes), request.body.len())
                .and_then(|json_len| decode_infer_request(request.model, &request.body, json_len))
                .map_err(Failure::Decode);
        };
        let started = Instant::now();
        // The most rows an adapted request may carry (the model's batch bound, times the
        // parts a request is split into: [`batches`]), so the host's primitives refuse a larger
        // batch before decoding it (an unknown model answers for itself at the engine). A
        // session's turn is one request of its sequence, never split.
        let max_batch = self
            .engine
            .max_batch_size(request.model)
            .ok()
            .filter(|most| *most > 0)
            .and_then(|most| usize::try_from(most).ok())
            .map(|most| match request.session {
                Some(_) => most,
                None => batches::most_rows(most),
            });
        let invocation = self
            .plugin_invocation(request, plugin)
            .with_max_batch(max_batch);
        let adapted = plugins.adapt_request(plugin, &invocation).await;
        self.observe(plugin, "request", variant(codecs), &adapted, started);
        let adapted = plugin_result(plugin, adapted)?;
        shadows.extend(self.shadow_call(request, codecs, ShadowHook::Request, || {
            Serving::Request(adapted.clone())
        }));
        match adapted {
            AdaptedRequest::Tensors { inputs, outputs } => {
                let mut infer = InferRequest::new(request.model);
                infer.inputs = inputs;
                infer.requested_outputs = outputs;
                Ok((infer, OutputEncoding::default()))
            }
            AdaptedRequest::V2Json(json) => {
                decode_infer_request(request.model, &Bytes::from(json), None)
                    .map_err(Failure::Decode)
            }
        }
    }

    /// A request adapter's request answered as one response: split into requests of the
    /// model's `max_batch_size` rows when it carries more, run together, and their responses
    /// joined ([`batches`]).
    async fn adapted_response(
        &self,
        request: &Request<'_>,
        infer: InferRequest,
    ) -> Result<InferResponse, Failure> {
        let most = self
            .engine
            .max_batch_size(request.model)
            .ok()
            .and_then(|most| usize::try_from(most).ok())
            .filter(|most| *most > 0);
        let (Some(most), Some(rows)) = (most, batches::rows(&infer)) else {
            return self.one_response(request, infer).await;
        };
        if rows <= most {
            return self.one_response(request, infer).await;
        }
        let invalid = |message: String| EngineError::new(ErrorCode::InvalidArg, message);
        let parts = batches::split(&infer, rows, most).map_err(|m| Failure::Refused(invalid(m)))?;
        drop(infer);
        let responses = futures_util::future::try_join_all(
            parts
                .into_iter()
                .map(|part| self.one_response(request, part)),
        )
        .await?;
        batches::join(responses)
            .map_err(|m| Failure::Model(EngineError::new(ErrorCode::Internal, m)))
    }

    /// Submits the request and takes its one response; a decoupled model is refused first.
    async fn one_response(
        &self,
        request: &Request<'_>,
        infer: InferRequest,
    ) -> Result<InferResponse, Failure> {
        match self.engine.is_decoupled(request.model) {
            Ok(false) => {}
            Ok(true) => {
                let refused = EngineError::new(ErrorCode::Unsupported, DECOUPLED_REFUSED);
                return Err(Failure::Refused(refused));
            }
            Err(error) => return Err(Failure::Refused(error)),
        }
        let mut responses = self.submit(request, infer)?;
        match responses.next().await {
            Some(Ok(response)) => Ok(response),
            Some(Err(error)) => Err(session_ended(request, error).unwrap_or_else(Failure::Model)),
            None => Err(Failure::NoResponse),
        }
    }

    /// Submits `infer` to the engine, as a request of the session's sequence when `request` is
    /// in a session of a stateful model (the session learns it started once the engine took it).
    fn submit(
        &self,
        request: &Request<'_>,
        mut infer: InferRequest,
    ) -> Result<E::Responses, Failure> {
        // A session's sequence replaces the client's; anywhere else (no session, or a session
        // on a stateless model) a client's sequence_id may not reach a session's.
        let session_sequence = request.session.as_ref().and_then(|turn| turn.sequence());
        if self.sessions
            && session_sequence.is_none()
            && let Some(SequenceId::Number(id)) = infer.sequence.id
            && id >= FIRST_SESSION_SEQUENCE_ID
        {
            return Err(Failure::Refused(EngineError::new(
                ErrorCode::InvalidArg,
                format!(
                    "sequence_id {id} is reserved: ids from {FIRST_SESSION_SEQUENCE_ID} \
                     belong to stateful sessions (X-Amzn-SageMaker-Session-Id)"
                ),
            )));
        }
        let Some(turn) = &request.session else {
            return self.engine.infer(infer).map_err(Failure::Refused);
        };
        if let Some(sequence) = session_sequence {
            infer.sequence = sequence;
        }
        let responses = self
            .engine
            .infer(infer)
            .map_err(|error| session_ended(request, error).unwrap_or_else(Failure::Refused))?;
        turn.submitted();
        Ok(responses)
    }

    /// The answer: the response plugin's reply, or v2 JSON / binary as the request asked.
    async fn encode(
        &self,
        request: &Request<'_>,
        codecs: &Codecs,
        response: InferResponse,
        encoding: &OutputEncoding,
        shadows: &mut Vec<ShadowCall>,
    ) -> Result<Answer, Failure> {
        let (Some(plugin), Some(plugins)) = (&codecs.response, &self.plugins) else {
            return encode_infer_response(&response, encoding)
                .map(Answer::V2)
                .map_err(Failure::Encode);
        };
        let started = Instant::now();
        let invocation = self.plugin_invocation(request, plugin);
        let reply = plugins.adapt_response(plugin, &invocation, &response).await;
        self.observe(plugin, "response", variant(codecs), &reply, started);
        let reply = plugin_result(plugin, reply)?;
        shadows.extend(self.shadow_call(request, codecs, ShadowHook::Response, || {
            Serving::Response(reply.clone(), Box::new(response))
        }));
        Ok(Answer::Reply {
            plugin: Arc::clone(plugin),
            reply,
        })
    }

    /// The request as `plugin` sees it, its model calls (when its entry names models) answered
    /// by the engine.
    fn plugin_invocation(&self, request: &Request<'_>, plugin: &LoadedPlugin) -> PluginInvocation {
        let invocation = PluginInvocation::new(
            request.route,
            request.model,
            request.invocation,
            request.headers,
            &plugin.headers,
            &request.body,
            request
                .session
                .as_ref()
                .map(|turn| Arc::clone(turn.session().store())),
        );
        match plugin.calls_models() {
            false => invocation,
            true => invocation.with_models(Arc::new(model_calls::EngineModels {
                engine: self.engine.clone(),
            })),
        }
    }

    fn observe<T>(
        &self,
        plugin: &LoadedPlugin,
        hook: &'static str,
        variant: &str,
        result: &HookResult<T>,
        started: Instant,
    ) {
        let outcome = match result {
            Ok(Ok(_)) => "ok",
            Ok(Err(_)) => "refused",
            Err(CallFailure::Deadline { .. }) => "timeout",
            Err(CallFailure::Memory { .. }) => "memory",
            Err(CallFailure::Trap { .. }) => "trap",
        };
        self.metrics
            .observe_plugin(&plugin.name, hook, variant, outcome, started.elapsed());
    }
}

/// How Triton's sequence batcher refuses a request of a sequence it does not hold (dropped
/// after its idle limit, or lost with a reload of the model): it asks for a start.
const SEQUENCE_GONE: &str = "must specify the START flag";

/// The request's session ends when the engine refused it for a sequence it no longer holds:
/// the failure the client is told, in SageMaker's terms and without the correlation id; `Err`
/// gives the error back for any other refusal (or a request outside a session).
fn session_ended(request: &Request<'_>, error: EngineError) -> Result<Failure, EngineError> {
    match &request.session {
        Some(turn) if turn.sequence().is_some() && error.message.contains(SEQUENCE_GONE) => {
            let lost = turn.lost();
            tracing::warn!(
                model = request.model,
                error = %error.message,
                "the model no longer holds a session's sequence; the session ended"
            );
            Ok(Failure::SessionEnded(lost))
        }
        _ => Err(error),
    }
}

/// The variant label of plugin calls made with `codecs` ("" without variants).
fn variant(codecs: &Codecs) -> &str {
    codecs.variant.as_deref().unwrap_or("")
}

/// A plugin call's value, or the failure it was.
fn plugin_result<T>(plugin: &LoadedPlugin, result: HookResult<T>) -> Result<T, Failure> {
    result
        .map_err(Failure::PluginFailed)?
        .map_err(|error| Failure::PluginRefused {
            plugin: plugin.name.to_string(),
            error,
        })
}
