//! Inference routes: `/invocations` (infer, generate or generate_stream, by configuration) and
//! `/models/{name}/invoke`. Glue around the [`pipeline`](crate::pipeline): run it, frame its
//! answer for HTTP, and map its failure to a status, in one function per kind of route.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use super::plugin_reply::reply_response;
use crate::config::InferenceType;
use crate::engine::Engine;
use crate::invocation::Invocation;
use crate::pipeline::generate::{generate, generate_stream};
use crate::pipeline::generate_adapted::GenerateAnswer;
use crate::pipeline::{Answer, Failure, Pipeline, Request};
use crate::plugins::PluginHost;
use crate::protocol::sse::{EVENT_STREAM, error_event};

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

/// What `/invocations` answers for a body: by the configured inference type, an inference on
/// the default model through the container's plugins, a generate answer, or a generate stream.
pub async fn invoke_default<E: Engine>(
    state: &AppState<E>,
    invocation: &Invocation,
    headers: &http::HeaderMap,
    body: Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let model = &state.default_model;
    match state.config.inference_type {
        InferenceType::Infer => {
            let plugins = state.plugins.load_full();
            let route = InferRoute::Invocations;
            infer(state, route, model, plugins, invocation, headers, body).await
        }
        InferenceType::Generate | InferenceType::GenerateStream => {
            let stream = state.config.inference_type == InferenceType::GenerateStream;
            let pipeline = Pipeline {
                engine: &state.engine,
                plugins: state.plugins.load_full(),
                metrics: &state.metrics,
            };
            if pipeline.adapts_generate(model) {
                let request = Request {
                    route: InferRoute::Invocations.path(),
                    model,
                    invocation,
                    headers,
                    body,
                };
                return generate_adapted(state, &pipeline, request, stream).await;
            }
            if stream {
                generate_events(state, model, body).await
            } else {
                generate_once(state, model, body).await
            }
        }
    }
}

/// A generate request through the model's generate plugins (version 0.2.0 hooks).
async fn generate_adapted<E: Engine>(
    state: &AppState<E>,
    pipeline: &Pipeline<'_, E>,
    request: Request<'_>,
    stream: bool,
) -> Result<Response<ResponseBody>, ApiError> {
    let redactor = state.redactor.clone();
    let redact = Arc::new(move |message: &str| redactor.redact(message).into_owned());
    match pipeline.generate(request, stream, redact).await {
        Ok(GenerateAnswer::Json(json)) => Ok(with_content_type(
            ResponseBody::full(json),
            "application/json",
        )),
        Ok(GenerateAnswer::Reply { plugin, reply }) => reply_response(&plugin, reply),
        Ok(GenerateAnswer::Events(events)) => Ok(with_content_type(
            ResponseBody::Stream(events),
            EVENT_STREAM,
        )),
        Err(failure) => Err(generate_error(failure)),
    }
}

/// One KServe v2 inference on `model`, through the payload plugins `plugins` routes to it when
/// it has any.
pub async fn infer<E: Engine>(
    state: &AppState<E>,
    route: InferRoute,
    model: &str,
    plugins: Option<Arc<PluginHost>>,
    invocation: &Invocation,
    headers: &http::HeaderMap,
    body: Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let pipeline = Pipeline {
        engine: &state.engine,
        plugins,
        metrics: &state.metrics,
    };
    let request = Request {
        route: route.path(),
        model,
        invocation,
        headers,
        body,
    };
    let outcome = pipeline.infer(request).await;
    let mut response = match outcome.result {
        Ok(Answer::V2(encoded)) => {
            let content_type =
                HeaderValue::from_str(&encoded.content_type).expect("content types are ASCII");
            let mut response = Response::new(ResponseBody::parts(encoded.parts));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, content_type);
            response
        }
        Ok(Answer::Reply { plugin, reply }) => reply_response(&plugin, reply)?,
        Err(failure) => return Err(infer_error(state, route, failure).await),
    };
    if let Some(variant) = outcome.variant
        && let Ok(value) = HeaderValue::from_str(&variant)
    {
        response.headers_mut().insert(VARIANT_HEADER, value);
    }
    Ok(response)
}

/// The status of an inference failure on `route`. The out-of-memory verdict (the OOM plugin,
/// else the built-in list) is asked at most once, and only where SageMaker expects a 507.
async fn infer_error<E: Engine>(
    state: &AppState<E>,
    route: InferRoute,
    failure: Failure,
) -> ApiError {
    match (route, failure) {
        (_, Failure::PluginRefused { plugin, error }) => ApiError::from_plugin(&plugin, error),
        (_, Failure::PluginFailed(failure)) => ApiError::from_call_failure(failure),
        (_, failure @ Failure::NoResponse) => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, failure.message())
        }
        (InferRoute::Invocations, Failure::Decode(e) | Failure::Encode(e)) => ApiError::from(e),
        (InferRoute::Invocations, Failure::Refused(e)) => ApiError::from_engine(e),
        // The model failed (either route), or anything failed on a multi-model endpoint.
        (_, failure) => {
            let message = failure.message();
            let oom = state.is_out_of_memory(&message).await;
            ApiError::bad_request_or_oom(message, oom)
        }
    }
}

/// The status of a generate failure: Triton's mapping of error codes.
fn generate_error(failure: Failure) -> ApiError {
    match failure {
        Failure::Decode(e) | Failure::Encode(e) => ApiError::from(e),
        Failure::Refused(e) | Failure::Model(e) => ApiError::from_engine(e),
        Failure::PluginRefused { plugin, error } => ApiError::from_plugin(&plugin, error),
        Failure::PluginFailed(failure) => ApiError::from_call_failure(failure),
        failure @ Failure::NoResponse => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, failure.message())
        }
    }
}

/// Triton's generate extension on `model`: one flat JSON answer.
pub async fn generate_once<E: Engine>(
    state: &AppState<E>,
    model: &str,
    body: Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let json = generate(&state.engine, model, &body)
        .await
        .map_err(generate_error)?;
    Ok(with_content_type(
        ResponseBody::full(json),
        "application/json",
    ))
}

/// Triton's generate extension on `model` as server-sent events. The status is the first
/// response's: when the model fails on it, that status with one error event.
pub async fn generate_events<E: Engine>(
    state: &AppState<E>,
    model: &str,
    body: Bytes,
) -> Result<Response<ResponseBody>, ApiError> {
    let redactor = state.redactor.clone();
    let redact = Arc::new(move |message: &str| redactor.redact(message).into_owned());
    match generate_stream(&state.engine, model, &body, redact).await {
        Ok(events) => Ok(with_content_type(
            ResponseBody::Stream(events),
            EVENT_STREAM,
        )),
        Err(Failure::Model(error)) => {
            let status = ApiError::from_engine(error.clone()).status;
            let event = error_event(&state.redactor.redact(&error.message));
            let mut response = with_content_type(ResponseBody::full(event), EVENT_STREAM);
            *response.status_mut() = status;
            Ok(response)
        }
        Err(failure) => Err(generate_error(failure)),
    }
}

fn with_content_type(body: ResponseBody, content_type: &'static str) -> Response<ResponseBody> {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
