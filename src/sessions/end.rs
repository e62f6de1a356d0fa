//! How the end of a session reaches its model.
//!
//! A close carries no tensors, and Triton's sequence batcher learns that a sequence ended only
//! from a request flagged END. Decision: trident sends the model one request of its own, flagged
//! END, with every input the model's metadata lists, zero-filled: each variable dimension
//! (`-1`, the batch dimension included) is 1, numbers are 0 and `BYTES` elements are empty. Its
//! responses are dropped. A stateful model therefore sees one last request of zeros when a
//! session closes or expires; models whose state must not take it can tell it by the END flag
//! (the `END` control input, or the sequence batcher's end signal) and the all-zero inputs.

use futures_util::StreamExt;

use super::Session;
use crate::engine::{DataType, Engine, InferRequest, Sequence};

/// Sends `session`'s model the request that ends its sequence, and waits for its responses.
/// A failure is logged, not returned: the session is gone either way.
pub async fn end_sequence<E: Engine>(engine: &E, session: &Session) {
    let request = match end_request(engine, session) {
        Ok(request) => request,
        Err(error) => {
            tracing::warn!(model = %session.model, %error, "the end of a session's sequence could not be built");
            return;
        }
    };
    let mut responses = match engine.infer(request) {
        Ok(responses) => responses,
        Err(error) => {
            tracing::warn!(model = %session.model, error = %error.message, "the model refused the end of a session's sequence");
            return;
        }
    };
    while let Some(response) = responses.next().await {
        if let Err(error) = response {
            tracing::warn!(model = %session.model, error = %error.message, "the model failed the end of a session's sequence");
        }
    }
}

fn end_request<E: Engine>(engine: &E, session: &Session) -> Result<InferRequest, String> {
    let metadata = engine
        .model_metadata(&session.model)
        .map_err(|e| e.message)?;
    let mut request = InferRequest::new(session.model.clone());
    let inputs = metadata["inputs"].as_array().cloned().unwrap_or_default();
    for input in inputs {
        let name = input["name"].as_str().ok_or("an input without a name")?;
        let datatype = input["datatype"]
            .as_str()
            .and_then(|d| d.parse::<DataType>().ok())
            .ok_or_else(|| format!("input '{name}' has no datatype trident knows"))?;
        let shape: Vec<i64> = input["shape"]
            .as_array()
            .ok_or_else(|| format!("input '{name}' has no shape"))?
            .iter()
            .map(|d| d.as_i64().filter(|&d| d >= 0).unwrap_or(1))
            .collect();
        let elements = shape.iter().product::<i64>().max(0) as usize;
        let element_bytes = datatype.element_size().unwrap_or(4);
        request = request.input(
            name,
            datatype,
            shape,
            vec![0u8; elements.saturating_mul(element_bytes)],
        );
    }
    request.sequence = Sequence {
        id: Some(session.sequence_id()),
        start: false,
        end: true,
    };
    Ok(request)
}
