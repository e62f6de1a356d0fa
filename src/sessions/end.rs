//! How the end of a session reaches its model.
//!
//! A close carries no tensors, and Triton's sequence batcher learns that a sequence ended only
//! from a request flagged END. Decision: trident sends the model one request of its own, flagged
//! END, with every input the model's metadata lists, zero-filled: each variable dimension
//! (`-1`, the batch dimension included) is 1, numbers are 0 and `BYTES` elements are empty. Its
//! responses are dropped. A stateful model therefore sees one last request of zeros when a
//! session closes or expires; models whose state must not take it can tell it by the END flag
//! (the `END` control input, or the sequence batcher's end signal) and the all-zero inputs. An
//! input over [`MAX_END_INPUT_BYTES`] makes no END request (the batcher's idle time-out ends the
//! sequence then).

use futures_util::StreamExt;

use super::Session;

/// The most bytes one zero-filled input of an END request may take: a model (a tenant's, on a
/// multi-model endpoint) whose configuration declares an enormous fixed shape gets no END
/// request rather than an allocation that size (its sequence then ends by the batcher's idle
/// time-out).
const MAX_END_INPUT_BYTES: usize = 64 << 20;
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
        let element_bytes = datatype.element_size().unwrap_or(4);
        let bytes = shape
            .iter()
            .try_fold(element_bytes, |bytes, &d| {
                bytes.checked_mul(usize::try_from(d).ok()?)
            })
            .filter(|&bytes| bytes <= MAX_END_INPUT_BYTES)
            .ok_or_else(|| {
                format!(
                    "input '{name}' of shape {shape:?} is over {MAX_END_INPUT_BYTES} bytes; \
                     no END request is made"
                )
            })?;
        request = request.input(name, datatype, shape, vec![0u8; bytes]);
    }
    request.sequence = Sequence {
        id: Some(session.sequence_id()),
        start: false,
        end: true,
    };
    Ok(request)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::SequenceId;
    use crate::engine::fake::{FakeEngine, FakeModel};
    use crate::sessions::{SessionSettings, Sessions};

    fn model(inputs: serde_json::Value) -> FakeEngine {
        let metadata = json!({ "name": "m", "inputs": inputs, "outputs": [] });
        FakeEngine::new().with_model("m", FakeModel::new(metadata, |_| Vec::new()))
    }

    #[test]
    fn the_end_request_is_zeros_of_every_input_flagged_end() {
        let sessions = Sessions::new(SessionSettings::default());
        let (session, _) = sessions.create("m", true).unwrap();
        let engine = model(json!([
            {"name": "INPUT", "datatype": "INT32", "shape": [-1, 2]},
            {"name": "TEXT", "datatype": "BYTES", "shape": [3]},
        ]));
        let request = end_request(&engine, &session).unwrap();
        assert_eq!(request.inputs.len(), 2);
        assert_eq!(request.inputs[0].shape, [1, 2]);
        assert_eq!(request.inputs[0].data.as_ref(), [0u8; 8]);
        // Three empty BYTES elements: a zero length each.
        assert_eq!(request.inputs[1].data.as_ref(), [0u8; 12]);
        let sequence = &request.sequence;
        assert!(sequence.end && !sequence.start);
        assert!(matches!(sequence.id, Some(SequenceId::Number(id)) if id >= 1 << 63));
    }

    #[test]
    fn an_enormous_declared_shape_makes_no_end_request() {
        let sessions = Sessions::new(SessionSettings::default());
        let (session, _) = sessions.create("m", true).unwrap();
        for shape in [json!([1_u64 << 40, 1_u64 << 40]), json!([1 << 20, 1 << 20])] {
            let engine = model(json!([{"name": "X", "datatype": "FP32", "shape": shape}]));
            let error = end_request(&engine, &session).unwrap_err();
            assert!(error.contains("no END request"), "{error}");
        }
    }
}
