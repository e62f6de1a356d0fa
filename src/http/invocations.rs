//! Inference routes: `/invocations` (infer, generate or generate_stream, by configuration) and
//! the inference behind `/models/{name}/invoke`.

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, Response, StatusCode, header};
use tokio::sync::mpsc;

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use crate::invocation::Invocation;
use std::sync::Arc;
use std::time::Instant;

use crate::engine::{Engine, EngineError, InferRequest};
use crate::plugins::host::LoadedPlugin;
use crate::plugins::host::{Adapted, InferenceResult};
use crate::plugins::{CallFailure, PluginError, PluginHost, Selection, convert};
use crate::protocol::binary_header::json_header_size;
use crate::protocol::generate::{decode_generate_request, encode_generate_response, input_specs};
use crate::protocol::sse::{EVENT_STREAM, error_event, event};
use crate::protocol::v2_request::OutputEncoding;
use crate::protocol::v2_request::decode_infer_request;
use crate::protocol::v2_response::encode_infer_response;

/// How errors that happen before the model runs are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorStyle {
    /// `/invocations`: Triton's HTTP mapping of error codes.
    ByCode,
    /// `/models/{name}/invoke`: every error 400, or 507 when it looks like out-of-memory.
    MultiModel,
}

const DECOUPLED_REFUSED: &str =
    "HTTP end point doesn't support models with decoupled transaction policy";

impl<E: Engine> AppState<E> {
    async fn refuse(&self, error: EngineError, style: ErrorStyle) -> ApiError {
        match style {
            ErrorStyle::ByCode => ApiError::from_engine(error),
            ErrorStyle::MultiModel => {
                let oom = self.is_out_of_memory(&error.message).await;
                ApiError::bad_request_or_oom(error.message, oom)
            }
        }
    }

    /// Errors the model returns while executing: 400, or 507 when out-of-memory. (A model whose
    /// process died is the engine's to recover.)
    async fn model_failed(&self, error: EngineError) -> ApiError {
        let oom = self.is_out_of_memory(&error.message).await;
        ApiError::bad_request_or_oom(error.message, oom)
    }
}

/// The header naming the A/B variant that served a request.
pub const VARIANT_HEADER: &str = "x-trident-variant";

/// One KServe v2 inference on `model`, through the model's payload plugins when it has any.
pub async fn infer<E: Engine>(
    state: &AppState<E>,
    route: &str,
    model: &str,
    invocation: &Invocation,
    headers: &http::HeaderMap,
    body: Bytes,
    style: ErrorStyle,
) -> Result<Response<ResponseBody>, ApiError> {
    let plugins = state.plugins.load_full();
    let selection = plugins.as_ref().and_then(|plugins| {
        plugins.select(
            model,
            invocation.target_variant.as_deref(),
            invocation.inference_id.as_deref(),
        )
    });
    let variant = selection.as_ref().and_then(|s| s.variant.clone());
    let plugged = plugins.zip(selection);
    let call = Call {
        route,
        model,
        invocation,
        headers,
        style,
    };
    let mut response = infer_with(state, &call, body, plugged).await;
    if let Some(variant) = variant
        && let Ok(value) = HeaderValue::from_str(&variant)
    {
        let headers = match &mut response {
            Ok(response) => response.headers_mut(),
            Err(_) => return response,
        };
        headers.insert(VARIANT_HEADER, value);
    }
    response
}

/// What one inference call is about.
struct Call<'a> {
    route: &'a str,
    model: &'a str,
    invocation: &'a Invocation,
    headers: &'a http::HeaderMap,
    style: ErrorStyle,
}

async fn infer_with<E: Engine>(
    state: &AppState<E>,
    call: &Call<'_>,
    body: Bytes,
    plugged: Option<(Arc<PluginHost>, Selection)>,
) -> Result<Response<ResponseBody>, ApiError> {
    let Call {
        route,
        model,
        invocation,
        headers,
        style,
    } = *call;
    let protocol = async |e: crate::protocol::ProtocolError| match style {
        ErrorStyle::ByCode => ApiError::from(e),
        ErrorStyle::MultiModel => {
            let message = e.to_string();
            let oom = state.is_out_of_memory(&message).await;
            ApiError::bad_request_or_oom(message, oom)
        }
    };
    let (plugins, selection) = match plugged {
        Some((plugins, selection)) => (Some(plugins), selection),
        None => (None, Selection::default()),
    };
    let plugins = plugins.as_deref();
    let request_plugin = selection
        .request
        .filter(|p| p.serves_content_type(invocation.content_type.as_deref()));
    // A response adapter answers requests its request adapter took, or requests whose Accept
    // names what it writes; a plain v2 request keeps its v2 answer.
    let response_plugin = selection.response.filter(|p| {
        if request_plugin.is_some() {
            p.serves_accept(invocation.accept.as_deref())
        } else {
            p.claims_accept(invocation.accept.as_deref())
        }
    });
    let variant = selection.variant.as_deref().unwrap_or("");
    let wit_invocation = |plugin: &LoadedPlugin| {
        convert::invocation_to_wit(route, model, invocation, headers, &plugin.headers, &body)
    };

    let (request, encoding) = match (&request_plugin, plugins) {
        (Some(plugin), Some(plugins)) => {
            let started = Instant::now();
            let adapted = plugins.adapt_request(plugin, &wit_invocation(plugin)).await;
            state.metrics.observe_plugin(
                &plugin.name,
                "request",
                variant,
                outcome(&adapted),
                started.elapsed(),
            );
            match adapted
                .map_err(ApiError::from_call_failure)?
                .map_err(|e| ApiError::from_plugin(&plugin.name, e))?
            {
                Adapted::Tensors(tensors) => {
                    let mut request = InferRequest::new(model);
                    request.inputs = tensors
                        .inputs
                        .into_iter()
                        .map(convert::input_from_wit)
                        .collect();
                    request.requested_outputs = tensors.outputs;
                    (request, OutputEncoding::default())
                }
                Adapted::V2Json(json) => {
                    match decode_infer_request(model, &Bytes::from(json), None) {
                        Ok(decoded) => decoded,
                        Err(e) => return Err(protocol(e).await),
                    }
                }
            }
        }
        _ => {
            let decoded = json_header_size(
                invocation.content_type.as_deref().map(str::as_bytes),
                body.len(),
            )
            .and_then(|json_len| decode_infer_request(model, &body, json_len));
            match decoded {
                Ok(decoded) => decoded,
                Err(e) => return Err(protocol(e).await),
            }
        }
    };
    match state.engine.is_decoupled(model) {
        Ok(false) => {}
        Ok(true) => {
            let refused =
                EngineError::new(crate::engine::ErrorCode::Unsupported, DECOUPLED_REFUSED);
            return Err(state.refuse(refused, style).await);
        }
        Err(error) => return Err(state.refuse(error, style).await),
    }
    let mut responses = match state.engine.infer(request) {
        Ok(responses) => responses,
        Err(error) => return Err(state.refuse(error, style).await),
    };
    let response = match responses.next().await {
        Some(Ok(response)) => response,
        Some(Err(error)) => return Err(state.model_failed(error).await),
        None => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the model completed the request without a response",
            ));
        }
    };

    if let (Some(plugin), Some(plugins)) = (&response_plugin, plugins) {
        let result = InferenceResult {
            model_name: response.model_name.clone(),
            model_version: response.model_version.to_string(),
            outputs: response
                .outputs
                .iter()
                .map(convert::output_to_wit)
                .collect(),
        };
        let started = Instant::now();
        let reply = plugins
            .adapt_response(plugin, &wit_invocation(plugin), &result)
            .await;
        state.metrics.observe_plugin(
            &plugin.name,
            "response",
            variant,
            outcome(&reply),
            started.elapsed(),
        );
        let reply = reply
            .map_err(ApiError::from_call_failure)?
            .map_err(|e| ApiError::from_plugin(&plugin.name, e))?;
        return super::plugin_reply::reply_response(plugin, reply);
    }

    let encoded = match encode_infer_response(&response, &encoding) {
        Ok(encoded) => encoded,
        Err(e) => return Err(protocol(e).await),
    };
    let mut http = Response::new(ResponseBody::parts(encoded.parts));
    http.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&encoded.content_type).expect("content types are ASCII"),
    );
    Ok(http)
}

/// A plugin call's outcome, for metrics.
fn outcome<T>(result: &Result<Result<T, PluginError>, CallFailure>) -> &'static str {
    match result {
        Ok(Ok(_)) => "ok",
        Ok(Err(_)) => "error",
        Err(CallFailure::Deadline { .. }) => "timeout",
        Err(CallFailure::Memory { .. }) => "memory",
        Err(CallFailure::Trap { .. }) => "trap",
    }
}

/// Triton's generate extension on `model`; with `stream`, server-sent events as responses come.
pub async fn generate<E: Engine>(
    state: &AppState<E>,
    model: &str,
    body: Bytes,
    stream: bool,
) -> Result<Response<ResponseBody>, ApiError> {
    let metadata = state
        .engine
        .model_metadata(model)
        .map_err(ApiError::from_engine)?;
    let inputs = input_specs(&metadata)?;
    let request = decode_generate_request(model, &body, &inputs)?;
    let mut responses = state.engine.infer(request).map_err(ApiError::from_engine)?;

    if !stream {
        let mut collected = Vec::with_capacity(1);
        while let Some(item) = responses.next().await {
            collected.push(item.map_err(ApiError::from_engine)?);
        }
        let [response] = collected.as_slice() else {
            return Err(ApiError::bad_request(
                "generate expects model to produce exactly 1 response, use generate stream for \
                 model that generates various number of responses",
            ));
        };
        let json = encode_generate_response(response)?;
        return Ok(with_content_type(
            ResponseBody::full(json),
            "application/json",
        ));
    }

    // The status is decided by the first response; later errors become error events.
    let first = match responses.next().await {
        Some(Ok(response)) => Some(event(&encode_generate_response(&response)?)),
        Some(Err(error)) => {
            let status = ApiError::from_engine(error.clone()).status;
            let mut response = with_content_type(
                ResponseBody::full(error_event(&state.redactor.redact(&error.message))),
                EVENT_STREAM,
            );
            *response.status_mut() = status;
            return Ok(response);
        }
        None => None,
    };
    let (sender, receiver) = mpsc::channel(16);
    let redactor = state.redactor.clone();
    tokio::spawn(async move {
        if let Some(first) = first
            && sender.send(first).await.is_err()
        {
            return; // Client gone: dropping `responses` cancels the request.
        }
        while let Some(item) = responses.next().await {
            let chunk = match item
                .map_err(|e| e.message)
                .and_then(|response| encode_generate_response(&response).map_err(|e| e.to_string()))
            {
                Ok(json) => event(&json),
                Err(message) => {
                    let _ = sender.send(error_event(&redactor.redact(&message))).await;
                    return;
                }
            };
            if sender.send(chunk).await.is_err() {
                return;
            }
        }
    });
    Ok(with_content_type(
        ResponseBody::Stream(receiver),
        EVENT_STREAM,
    ))
}

fn with_content_type(body: ResponseBody, content_type: &'static str) -> Response<ResponseBody> {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}
