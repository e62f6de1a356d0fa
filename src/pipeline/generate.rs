//! Triton's generate extension: a flat JSON object in, the model's inputs by its metadata, one
//! flat JSON answer out (`generate`) or server-sent events as responses come
//! (`generate_stream`).

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::Failure;
use crate::engine::{Engine, EngineError, ErrorCode, InferRequest};
use crate::protocol::generate::{decode_generate_request, encode_generate_response, input_specs};
use crate::protocol::sse::{error_event, event};

/// What a stream's later error events may say: the route hides server folders with it.
pub type Redact = Arc<dyn Fn(&str) -> String + Send + Sync>;

/// How many encoded events wait for a slow client before the stream waits for it.
pub(super) const EVENTS_BUFFERED: usize = 16;

/// The request for `model` from a generate body, by the model's metadata.
pub(super) fn request<E: Engine>(
    engine: &E,
    model: &str,
    body: &Bytes,
) -> Result<InferRequest, Failure> {
    let metadata = engine.model_metadata(model).map_err(Failure::Refused)?;
    let inputs = input_specs(&metadata).map_err(Failure::Decode)?;
    decode_generate_request(model, body, &inputs).map_err(Failure::Decode)
}

/// `generate`: the model's one response as a flat JSON object.
pub async fn generate<E: Engine>(
    engine: &E,
    model: &str,
    body: &Bytes,
) -> Result<Vec<u8>, Failure> {
    let mut responses = engine
        .infer(request(engine, model, body)?)
        .map_err(Failure::Refused)?;
    let mut collected = Vec::with_capacity(1);
    while let Some(item) = responses.next().await {
        collected.push(item.map_err(Failure::Model)?);
    }
    let [response] = collected.as_slice() else {
        return Err(Failure::Model(EngineError::new(
            ErrorCode::InvalidArg,
            "generate expects model to produce exactly 1 response, use generate stream for model \
             that generates various number of responses",
        )));
    };
    encode_generate_response(response).map_err(Failure::Encode)
}

/// `generate_stream`: one event per response, in order. The first response decides the
/// outcome (an error there is `Failure::Model`); a later error becomes one error event, its
/// message passed through `redact`, and ends the stream. A client that leaves cancels the
/// request (the responses are dropped).
pub async fn generate_stream<E: Engine>(
    engine: &E,
    model: &str,
    body: &Bytes,
    redact: Redact,
) -> Result<mpsc::Receiver<Bytes>, Failure> {
    let mut responses = engine
        .infer(request(engine, model, body)?)
        .map_err(Failure::Refused)?;
    let first = match responses.next().await {
        Some(Ok(response)) => Some(event(
            &encode_generate_response(&response).map_err(Failure::Encode)?,
        )),
        Some(Err(error)) => return Err(Failure::Model(error)),
        None => None,
    };
    let (sender, receiver) = mpsc::channel(EVENTS_BUFFERED);
    tokio::spawn(async move {
        if let Some(first) = first
            && sender.send(first).await.is_err()
        {
            return;
        }
        while let Some(item) = responses.next().await {
            let chunk = match item
                .map_err(|e| e.message)
                .and_then(|response| encode_generate_response(&response).map_err(|e| e.to_string()))
            {
                Ok(json) => event(&json),
                Err(message) => {
                    let _ = sender.send(error_event(&redact(&message))).await;
                    return;
                }
            };
            if sender.send(chunk).await.is_err() {
                return;
            }
        }
    });
    Ok(receiver)
}
