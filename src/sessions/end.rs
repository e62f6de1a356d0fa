//! How the end of a session reaches its model.
//!
//! A close carries no tensors, and Triton's sequence batcher learns that a sequence ended only
//! from a request flagged END. Decision: trident sends the model one request of its own, flagged
//! END, with every input the model requires (its configuration's inputs not marked `optional`),
//! zero-filled, shaped by the metadata: each variable dimension (`-1`, the batch dimension
//! included) is 1, numbers are 0 and `BYTES` elements are empty. Its responses are dropped. A
//! stateful model therefore sees one last request of zeros when a session closes or expires;
//! models whose state must not take it can tell it by the END flag (the `END` control input, or
//! the sequence batcher's end signal) and the all-zero inputs. The inputs together may take at
//! most [`MAX_END_BYTES`]; a model whose required inputs are larger gets no END request (its
//! sequence batcher's idle limit ends the sequence then).

use futures_util::StreamExt;

use super::Session;
use crate::engine::{DataType, Engine, InferRequest, Sequence};

/// The most bytes the zero-filled inputs of one END request may take together: a model (a
/// tenant's, on a multi-model endpoint) whose configuration declares enormous fixed shapes gets
/// no END request rather than an allocation that size, however many inputs it declares.
pub const MAX_END_BYTES: usize = 64 << 20;

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

/// The names of the inputs `config` marks optional.
fn optional_inputs(config: &serde_json::Value) -> Vec<&str> {
    config["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|input| input["optional"].as_bool() == Some(true))
        .filter_map(|input| input["name"].as_str())
        .collect()
}

fn end_request<E: Engine>(engine: &E, session: &Session) -> Result<InferRequest, String> {
    let metadata = engine
        .model_metadata(&session.model)
        .map_err(|e| e.message)?;
    let config = engine.model_config(&session.model).map_err(|e| e.message)?;
    let optional = optional_inputs(&config);
    let mut request = InferRequest::new(session.model.clone());
    let mut total = 0usize;
    let inputs = metadata["inputs"].as_array().cloned().unwrap_or_default();
    for input in inputs {
        let name = input["name"].as_str().ok_or("an input without a name")?;
        if optional.contains(&name) {
            continue;
        }
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
            .and_then(|bytes| Some((bytes, total.checked_add(bytes)?)))
            .filter(|&(_, sum)| sum <= MAX_END_BYTES)
            .map(|(bytes, sum)| {
                total = sum;
                bytes
            })
            .ok_or_else(|| {
                format!(
                    "the required inputs reach past {} MiB at '{name}' (shape {shape:?}); no \
                     END request is made",
                    MAX_END_BYTES >> 20
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
    use crate::engine::fake::{FakeEngine, FakeModel};
    use crate::engine::{SequenceBatching, SequenceId};
    use crate::sessions::{SessionSettings, SessionTable};

    fn model(inputs: serde_json::Value, config: Option<serde_json::Value>) -> FakeEngine {
        let metadata = json!({ "name": "m", "inputs": inputs, "outputs": [] });
        let mut model = FakeModel::new(metadata, |_| Vec::new());
        model.config = config;
        FakeEngine::new().with_model("m", model)
    }

    fn session() -> std::sync::Arc<Session> {
        let table = SessionTable::new(SessionSettings::default());
        let batching = SequenceBatching {
            idle_limit: std::time::Duration::from_secs(60),
            slots: None,
        };
        table.create("m", Some(batching)).unwrap().session
    }

    #[test]
    fn the_end_request_is_zeros_of_every_required_input_flagged_end() {
        let engine = model(
            json!([
                {"name": "INPUT", "datatype": "INT32", "shape": [-1, 2]},
                {"name": "TEXT", "datatype": "BYTES", "shape": [3]},
                {"name": "EXTRA", "datatype": "FP32", "shape": [1000]},
            ]),
            Some(json!({"input": [
                {"name": "INPUT"}, {"name": "TEXT", "optional": false},
                {"name": "EXTRA", "optional": true},
            ]})),
        );
        let request = end_request(&engine, &session()).unwrap();
        assert_eq!(request.inputs.len(), 2, "the optional input is not filled");
        assert_eq!(request.inputs[0].shape, [1, 2]);
        assert_eq!(request.inputs[0].data.as_ref(), [0u8; 8]);
        // Three empty BYTES elements: a zero length each.
        assert_eq!(request.inputs[1].data.as_ref(), [0u8; 12]);
        let sequence = &request.sequence;
        assert!(sequence.end && !sequence.start);
        assert!(matches!(sequence.id, Some(SequenceId::Number(id)) if id >= 1 << 63));
    }

    #[test]
    fn enormous_declared_shapes_make_no_end_request() {
        for shape in [json!([1_u64 << 40, 1_u64 << 40]), json!([1 << 20, 1 << 20])] {
            let engine = model(
                json!([{"name": "X", "datatype": "FP32", "shape": shape}]),
                None,
            );
            let error = end_request(&engine, &session()).unwrap_err();
            assert!(error.contains("no END request"), "{error}");
        }
        // Eight inputs of 16 MiB each: under the bound one by one, over it together.
        let inputs: Vec<_> = (0..8)
            .map(|i| json!({"name": format!("X{i}"), "datatype": "FP32", "shape": [4 << 20]}))
            .collect();
        let engine = model(json!(inputs), None);
        let error = end_request(&engine, &session()).unwrap_err();
        assert!(error.contains("X4"), "{error}");
    }
}
