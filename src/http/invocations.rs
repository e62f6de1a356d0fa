//! Inference routes: `/invocations` (infer, generate or generate_stream, by configuration) and
//! `/models/{name}/invoke`. Glue around the [`pipeline`](crate::pipeline): run it, map its
//! failure to a status (`refused`, one place for every route and transport) and frame its answer
//! for HTTP (`framed`). The bidirectional stream runs the same requests (`run_default`) and
//! frames them as WebSocket messages.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use super::plugin_reply::reply_response;
use super::sessions::{self, Step};
use crate::config::InferenceType;
use crate::engine::Engine;
use crate::invocation::Invocation;
use crate::pipeline::{Answer, Failure, Pipeline, Request};
use crate::plugins::PluginHost;
use crate::protocol::sse::{EVENT_STREAM, error_event};
use crate::sessions::SessionTurn;

/// The header naming the A/B variant that served a request.
pub const VARIANT_HEADER: &str = "x-trident-variant";

/// The routes that run a KServe v2 inference; they answer failures differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InferRoute {
    /// `/invocations`: Triton's HTTP mapping of error codes (a failing model: 400, or 507).
    Invocations,
    /// `/models/{name}/invoke`: every failure 400, or 507 when it looks like out-of-memory.
    Invoke,
}

impl InferRoute {
    /// The route as plugins see it.
    fn path(self) -> &'static str {
        match self {
            InferRoute::Invocations => "/invocations",
            InferRoute::Invoke => "/models/{name}/invoke",
        }
    }
}

/// What an inference route produced, before a transport frames it.
pub struct Invoked {
    /// The A/B variant that served it, when the model has variants.
    pub variant: Option<String>,
    /// The answer, not yet framed.
    pub answer: Answer,
}

/// A request that failed, as every transport answers it: its status and message (not yet
/// redacted), and whether it is a stream that failed on its first response, which HTTP answers
/// with that status and one error event (as Triton's frontend does).
pub struct Refused {
    /// The status and message (not yet redacted).
    pub error: ApiError,
    /// Whether HTTP answers with the status and one server-sent error event instead of a JSON
    /// error body: the stream failed on its first response.
    pub as_event: bool,
}

/// What `/invocations` answers for a body, framed for HTTP.
pub async fn invoke_default<E: Engine>(
    state: &AppState<E>,
    invocation: &Invocation,
    headers: &http::HeaderMap,
    body: Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let session = match sessions::step(state, &state.default_model, headers, &body).await? {
        Step::Answered(response) => return Ok(response),
        Step::Run(session) => session,
    };
    let invoked = run_default(state, invocation, headers, body, session).await;
    framed(state, invoked)
}

/// What `/invocations` produces for a body: by the configured inference type, an inference on
/// the default model through the container's plugins, or a generate answer or stream (through
/// the model's generate plugins where it has them), in `session`'s sequence when it has one.
pub async fn run_default<E: Engine>(
    state: &AppState<E>,
    invocation: &Invocation,
    headers: &http::HeaderMap,
    body: Bytes,
    session: Option<SessionTurn>,
) -> Result<Invoked, Refused> {
    let route = InferRoute::Invocations;
    let pipeline = pipeline(state, state.plugins.load_full());
    let request = Request {
        route: route.path(),
        model: &state.default_model,
        invocation,
        headers,
        body,
        session,
    };
    let stream = match state.config.inference_type {
        InferenceType::Infer => return run_infer(state, route, &pipeline, request).await,
        InferenceType::Generate => false,
        InferenceType::GenerateStream => true,
    };
    generated(state, pipeline.generate(request, stream).await).await
}

/// The pipeline a request of `state`'s server runs on, with `plugins`.
fn pipeline<E: Engine>(state: &AppState<E>, plugins: Option<Arc<PluginHost>>) -> Pipeline<'_, E> {
    Pipeline {
        engine: &state.engine,
        plugins,
        metrics: &state.metrics,
        sessions: state.sessions.is_some(),
    }
}

/// A generate answer, or its failure as generate maps failures to statuses.
async fn generated<E: Engine>(
    state: &AppState<E>,
    result: Result<Answer, Failure>,
) -> Result<Invoked, Refused> {
    match result {
        Ok(answer) => Ok(Invoked {
            variant: None,
            answer,
        }),
        Err(failure) => Err(refused(state, Statuses::Generate, failure).await),
    }
}

/// OpenAI's chat completions (`path`: `/v1/chat/completions` or
/// `/openai/v1/chat/completions`): the body goes to the manifest's `openai_chat` plugin as a
/// generate request on the default model, which answers once or streams as the plugin decides
/// (OpenAI's `"stream": true`). 404 when no chat plugin is configured, or on a multi-model
/// endpoint (no default model).
pub async fn openai_chat<E: Engine>(
    state: &AppState<E>,
    path: &str,
    invocation: &Invocation,
    headers: &http::HeaderMap,
    body: Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let plugins = state.plugins.load_full();
    let Some(selection) = plugins.as_ref().and_then(|host| host.openai_chat()) else {
        return Err(ApiError::not_found(format!(
            "{path} needs an OpenAI chat plugin: name one with openai_chat = \"<plugin>\" in \
             the plugin manifest (SAGEMAKER_TRITON_PLUGINS)"
        )));
    };
    if matches!(state.config.mode, crate::config::Mode::MultiModel { .. }) {
        return Err(ApiError::not_found(format!(
            "{path} serves the default model of a single-model endpoint; a multi-model \
             endpoint has none"
        )));
    }
    // The chat plugin is the route: a body it does not take never runs on the model as it is.
    if let Some(plugin) = &selection.request
        && !plugin.accepts_content_type(invocation.content_type.as_deref())
    {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "{path} takes {} (the content_types of plugin '{}'), not {}",
                plugin.content_types().join(", "),
                plugin.name,
                invocation.content_type.as_deref().map_or(
                    "a body without Content-Type".into(),
                    |t| format!("'{}'", t.escape_debug())
                ),
            ),
        ));
    }
    let pipeline = pipeline(state, plugins);
    let request = Request {
        route: path,
        model: &state.default_model,
        invocation,
        headers,
        body,
        session: None,
    };
    let answer = pipeline.generate_with(request, selection, false).await;
    framed(state, generated(state, answer).await)
}

/// One KServe v2 inference on `model` over HTTP, through the payload plugins `plugins` routes
/// to it when it has any, in a stateful session when the request asks for one.
pub async fn infer<E: Engine>(
    state: &AppState<E>,
    route: InferRoute,
    model: &str,
    plugins: Option<Arc<PluginHost>>,
    invocation: &Invocation,
    headers: &http::HeaderMap,
    body: Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let session = match sessions::step(state, model, headers, &body).await? {
        Step::Answered(response) => return Ok(response),
        Step::Run(session) => session,
    };
    let pipeline = pipeline(state, plugins);
    let request = Request {
        route: route.path(),
        model,
        invocation,
        headers,
        body,
        session,
    };
    framed(state, run_infer(state, route, &pipeline, request).await)
}

async fn run_infer<E: Engine>(
    state: &AppState<E>,
    route: InferRoute,
    pipeline: &Pipeline<'_, E>,
    request: Request<'_>,
) -> Result<Invoked, Refused> {
    let outcome = pipeline.infer(request).await;
    match outcome.result {
        Ok(answer) => Ok(Invoked {
            variant: outcome.variant,
            answer,
        }),
        Err(failure) => Err(refused(state, Statuses::Infer(route), failure).await),
    }
}

/// Which mapping of failures to statuses a request follows.
#[derive(Clone, Copy)]
enum Statuses {
    /// A KServe v2 inference on `route`.
    Infer(InferRoute),
    /// Generate (on `/invocations`): Triton's mapping of error codes throughout.
    Generate,
}

/// How a failure is answered, in one place for every route and transport. The out-of-memory
/// verdict (the OOM plugin, else the built-in list) is asked at most once, and only where
/// SageMaker expects a 507.
async fn refused<E: Engine>(state: &AppState<E>, statuses: Statuses, failure: Failure) -> Refused {
    use InferRoute::Invocations;
    let error = match (statuses, failure) {
        (_, Failure::FirstResponse(error)) => {
            return Refused {
                error: ApiError::from_engine(error),
                as_event: true,
            };
        }
        (_, Failure::PluginRefused { plugin, error }) => ApiError::from_plugin(&plugin, error),
        (_, Failure::PluginFailed(failure)) => ApiError::from_call_failure(failure),
        (_, Failure::SessionEnded(error)) => ApiError::from(error),
        (_, failure @ Failure::NoResponse) => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, failure.message())
        }
        (
            Statuses::Generate | Statuses::Infer(Invocations),
            Failure::Decode(e) | Failure::Encode(e),
        ) => ApiError::from(e),
        (Statuses::Generate | Statuses::Infer(Invocations), Failure::Refused(e)) => {
            ApiError::from_engine(e)
        }
        (Statuses::Generate, Failure::Model(e)) => ApiError::from_engine(e),
        // An inference's model failed (either route), or anything failed on a multi-model
        // endpoint.
        (Statuses::Infer(_), failure) => {
            let message = failure.message();
            let oom = state.is_out_of_memory(&message).await;
            ApiError::bad_request_or_oom(message, oom)
        }
    };
    Refused {
        error,
        as_event: false,
    }
}

/// An answer, or a failure, as an HTTP response.
fn framed<E: Engine>(
    state: &AppState<E>,
    result: Result<Invoked, Refused>,
) -> Result<Response<ResponseBody>, ApiError> {
    let invoked = match result {
        Ok(invoked) => invoked,
        Err(Refused {
            error,
            as_event: true,
        }) => {
            let event = error_event(&state.redactor.redact(&error.message));
            let mut response = with_content_type(ResponseBody::full(event), EVENT_STREAM);
            *response.status_mut() = error.status;
            return Ok(response);
        }
        Err(Refused { error, .. }) => return Err(error),
    };
    let mut response = match invoked.answer {
        Answer::V2(encoded) => {
            let content_type =
                HeaderValue::from_str(&encoded.content_type).expect("content types are ASCII");
            let mut response = Response::new(ResponseBody::parts(encoded.parts));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, content_type);
            response
        }
        Answer::Reply { plugin, reply } => reply_response(&plugin, reply)?,
        Answer::Json(json) => with_content_type(ResponseBody::full(json), "application/json"),
        Answer::Events(events) => with_content_type(
            ResponseBody::events(events, state.redactor.clone()),
            EVENT_STREAM,
        ),
    };
    if let Some(variant) = invoked.variant
        && let Ok(value) = HeaderValue::from_str(&variant)
    {
        response.headers_mut().insert(VARIANT_HEADER, value);
    }
    Ok(response)
}

fn with_content_type(body: ResponseBody, content_type: &'static str) -> Response<ResponseBody> {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
