//! Inference routes: `/invocations` (infer, generate or generate_stream, by configuration) and
//! `/models/{name}/invoke`. Glue around the [`pipeline`](crate::pipeline): run it, map its
//! failure to a status (`status::refused`, one place for every route and transport) and frame its answer
//! for HTTP (`framed`). The bidirectional stream runs the same requests (`run_default`) and
//! frames them as WebSocket messages.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Response, header};

use super::AppState;
use super::body::ResponseBody;
use super::call::Call;
use super::error::ApiError;
use super::plugin_reply::reply_response;
pub use super::status::{InferRoute, Refused};
use super::status::{Statuses, refused};
use crate::config::InferenceType;
use crate::engine::Engine;
use crate::invocation::Invocation;
use crate::pipeline::{Answer, Failure, Pipeline, Request};
use crate::plugins::PluginHost;
use crate::protocol::sse::{EVENT_STREAM, error_event};
use crate::sessions::SessionTurn;

/// The header naming the A/B variant that served a request.
pub const VARIANT_HEADER: &str = "x-trident-variant";

impl InferRoute {
    /// The route as plugins see it.
    pub fn path(self) -> &'static str {
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

/// What `/invocations` answers for a body, framed for HTTP (in the session whose turn the
/// router gave it, when it has one).
pub async fn invoke_default<E: Engine>(
    call: Call<'_, E>,
) -> Result<Response<ResponseBody>, ApiError> {
    let invocation = call.invocation();
    let state = call.state;
    let invoked = run_default(
        state,
        &invocation,
        &call.parts.headers,
        call.body,
        call.session,
    )
    .await;
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
pub async fn openai_chat<E: Engine>(call: Call<'_, E>) -> Result<Response<ResponseBody>, ApiError> {
    let (state, path, headers) = (call.state, call.parts.uri.path(), &call.parts.headers);
    let invocation = &call.invocation();
    let plugins = state.plugins.load_full();
    let Some(selection) = plugins.as_ref().and_then(|host| host.openai_chat()) else {
        return Err(ApiError::route_not_served(format!(
            "{path} needs an OpenAI chat plugin: name one with openai_chat = \"<plugin>\" in \
             the plugin manifest (SAGEMAKER_TRITON_PLUGINS)"
        )));
    };
    if matches!(state.config.mode, crate::config::Mode::MultiModel { .. }) {
        return Err(ApiError::route_not_served(format!(
            "{path} serves the default model of a single-model endpoint; a multi-model \
             endpoint has none"
        )));
    }
    // The chat plugin is the route: a body it does not take never runs on the model as it is.
    if let Some(plugin) = &selection.request
        && !plugin.accepts_content_type(invocation.content_type.as_deref())
    {
        return Err(ApiError::unsupported_media_type(format!(
            "{path} takes {} (the content_types of plugin '{}'), not {}",
            plugin.content_types().join(", "),
            plugin.name,
            invocation.content_type.as_deref().map_or(
                "a body without Content-Type".into(),
                |t| format!("'{}'", t.escape_debug())
            ),
        )));
    }
    let pipeline = pipeline(state, plugins);
    let request = Request {
        route: path,
        model: &state.default_model,
        invocation,
        headers,
        body: call.body,
        session: None,
    };
    let answer = pipeline.generate_with(request, selection, false).await;
    framed(state, generated(state, answer).await)
}

/// One KServe v2 inference over HTTP on `route`, through the payload plugins `plugins` routes
/// to the request's model when it has any.
pub async fn infer<E: Engine>(
    state: &AppState<E>,
    route: InferRoute,
    plugins: Option<Arc<PluginHost>>,
    request: Request<'_>,
) -> Result<Response<ResponseBody>, ApiError> {
    let pipeline = pipeline(state, plugins);
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
