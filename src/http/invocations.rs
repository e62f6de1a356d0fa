//! Inference routes: `/invocations` (infer, generate or generate_stream, by configuration) and
//! the inference behind `/models/{name}/invoke`.

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, Response, StatusCode, header};
use tokio::sync::mpsc;

use super::AppState;
use super::body::ResponseBody;
use super::error::ApiError;
use super::invocation::Invocation;
use crate::engine::{Engine, EngineError};
use crate::protocol::binary_header::json_header_size;
use crate::protocol::generate::{decode_generate_request, encode_generate_response, input_specs};
use crate::protocol::sse::{EVENT_STREAM, error_event, event};
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
    fn refuse(&self, error: EngineError, style: ErrorStyle) -> ApiError {
        match style {
            ErrorStyle::ByCode => ApiError::from_engine(error),
            ErrorStyle::MultiModel => ApiError::bad_request_or_oom(error.message, &*self.is_oom),
        }
    }

    /// Errors the model returns while executing: 400, or 507 when out-of-memory.
    fn model_failed(&self, error: EngineError) -> ApiError {
        ApiError::bad_request_or_oom(error.message, &*self.is_oom)
    }
}

/// One KServe v2 inference on `model`.
pub async fn infer<E: Engine>(
    state: &AppState<E>,
    model: &str,
    invocation: &Invocation,
    body: Bytes,
    style: ErrorStyle,
) -> Result<Response<ResponseBody>, ApiError> {
    let protocol = |e: crate::protocol::ProtocolError| match style {
        ErrorStyle::ByCode => ApiError::from(e),
        ErrorStyle::MultiModel => ApiError::bad_request_or_oom(e.to_string(), &*state.is_oom),
    };
    let json_len = json_header_size(
        invocation.content_type.as_deref().map(str::as_bytes),
        body.len(),
    )
    .map_err(protocol)?;
    let (request, encoding) = decode_infer_request(model, &body, json_len).map_err(protocol)?;
    match state.engine.is_decoupled(model) {
        Ok(false) => {}
        Ok(true) => {
            let refused =
                EngineError::new(crate::engine::ErrorCode::Unsupported, DECOUPLED_REFUSED);
            return Err(state.refuse(refused, style));
        }
        Err(error) => return Err(state.refuse(error, style)),
    }
    let mut responses = state
        .engine
        .infer(request)
        .map_err(|e| state.refuse(e, style))?;
    let response = match responses.next().await {
        Some(Ok(response)) => response,
        Some(Err(error)) => return Err(state.model_failed(error)),
        None => {
            return Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the model completed the request without a response",
            ));
        }
    };
    let encoded = encode_infer_response(&response, &encoding).map_err(protocol)?;
    let mut http = Response::new(ResponseBody::parts(encoded.parts));
    http.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&encoded.content_type).expect("content types are ASCII"),
    );
    Ok(http)
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
                ResponseBody::full(error_event(&error.message)),
                EVENT_STREAM,
            );
            *response.status_mut() = status;
            return Ok(response);
        }
        None => None,
    };
    let (sender, receiver) = mpsc::channel(16);
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
                    let _ = sender.send(error_event(&message)).await;
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
