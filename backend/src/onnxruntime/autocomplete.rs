//! Triton's auto-complete for ONNX models: a configuration that leaves out its inputs or its
//! outputs gets them from the model, and a model that can batch gets a `max_batch_size` and a
//! dynamic batcher, as Triton's own onnxruntime backend fills them.

use serde_json::{Value, json};

use crate::error::{BackendError, Code};

use super::tensors::{ModelTensor, ModelTensors};
use super::types;

/// The batch size Triton's onnxruntime backend fills in (its `default-max-batch-size`).
pub const DEFAULT_MAX_BATCH_SIZE: u64 = 4;

/// Whether the configuration leaves anything to complete: Triton skips auto-complete entirely
/// when it declares at least one input (or batch input) and at least one output.
pub fn needed(config: &Value) -> bool {
    let declared = |key: &str| {
        config
            .get(key)
            .and_then(Value::as_array)
            .is_some_and(|list| !list.is_empty())
    };
    !((declared("input") || declared("batch_input")) && declared("output"))
}

/// Completes `config` from the model's tensors; returns whether anything changed.
pub fn complete(
    model: &str,
    config: &mut Value,
    tensors: &ModelTensors,
) -> Result<(), BackendError> {
    let batchable = tensors
        .inputs
        .iter()
        .chain(&tensors.outputs)
        .all(|t| t.shape.first() == Some(&-1));
    let mut max_batch_size = match config.get("max_batch_size") {
        Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        _ => 0,
    };
    if batchable && max_batch_size == 0 {
        max_batch_size = DEFAULT_MAX_BATCH_SIZE;
        config["max_batch_size"] = json!(max_batch_size);
        let batcher = ["dynamic_batching", "sequence_batching"]
            .iter()
            .any(|key| config.get(key).is_some_and(|v| !v.is_null()));
        if !batcher {
            config["dynamic_batching"] = json!({});
        }
    } else if !batchable && max_batch_size != 0 {
        return Err(BackendError::new(
            Code::InvalidArg,
            format!(
                "autofill failed for model '{model}': model does not support batching while \
                 non-zero max_batch_size is specified (every input and output needs -1 as its \
                 first dimension)"
            ),
        ));
    }
    for (key, list) in [("input", &tensors.inputs), ("output", &tensors.outputs)] {
        let empty = config
            .get(key)
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if empty {
            config[key] = list.iter().map(|t| entry(t, max_batch_size)).collect();
        }
    }
    Ok(())
}

/// The configuration entry Triton writes for a model tensor.
fn entry(tensor: &ModelTensor, max_batch_size: u64) -> Value {
    let dims: &[i64] = if max_batch_size > 0 {
        tensor.shape.get(1..).unwrap_or(&[])
    } else {
        &tensor.shape
    };
    let mut entry = json!({
        "name": tensor.name,
        "data_type": types::config_name(tensor.dtype),
        "dims": dims,
    });
    if dims.is_empty() && max_batch_size > 0 {
        entry["dims"] = json!([1]);
        entry["reshape"] = json!({"shape": []});
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DataType;

    fn tensor(name: &str, dtype: DataType, shape: &[i64]) -> ModelTensor {
        ModelTensor {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
        }
    }

    fn batchable() -> ModelTensors {
        ModelTensors {
            inputs: vec![tensor("x", DataType::F32, &[-1, 3, -1, -1])],
            outputs: vec![
                tensor("y", DataType::F32, &[-1, 1, -1, -1]),
                tensor("score", DataType::I64, &[-1]),
            ],
        }
    }

    #[test]
    fn an_empty_configuration_gets_tensors_a_batch_size_and_a_batcher() {
        let mut config = json!({"name": "det"});
        assert!(needed(&config));
        complete("det", &mut config, &batchable()).unwrap();
        assert_eq!(config["max_batch_size"], 4);
        assert_eq!(config["dynamic_batching"], json!({}));
        assert_eq!(
            config["input"],
            json!([{"name": "x", "data_type": "TYPE_FP32", "dims": [3, -1, -1]}])
        );
        assert_eq!(
            config["output"][1],
            json!({"name": "score", "data_type": "TYPE_INT64", "dims": [1], "reshape": {"shape": []}})
        );
    }

    #[test]
    fn what_the_configuration_says_is_kept() {
        let declared = json!({"input": [{"name": "x"}], "output": [{"name": "y"}]});
        assert!(!needed(&declared));
        let mut config = json!({"max_batch_size": 16, "sequence_batching": {},
                                "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [1]}]});
        assert!(needed(&config));
        complete("det", &mut config, &batchable()).unwrap();
        assert_eq!(config["max_batch_size"], 16);
        assert!(config.get("dynamic_batching").is_none());
        assert_eq!(config["output"].as_array().unwrap().len(), 1);
        assert_eq!(config["input"][0]["dims"], json!([3, -1, -1]));
    }

    #[test]
    fn a_fixed_batch_model_keeps_its_full_shape_and_refuses_a_batch_size() {
        let fixed = ModelTensors {
            inputs: vec![tensor("data", DataType::F32, &[1, 3, 224, 224])],
            outputs: vec![tensor("prob", DataType::F32, &[1, 1000])],
        };
        let mut config = json!({});
        complete("resnet", &mut config, &fixed).unwrap();
        assert!(config.get("max_batch_size").is_none());
        assert_eq!(config["input"][0]["dims"], json!([1, 3, 224, 224]));
        let mut config = json!({"max_batch_size": 8});
        let error = complete("resnet", &mut config, &fixed).unwrap_err();
        assert!(
            error.message.contains("does not support batching"),
            "{}",
            error.message
        );
    }
}
