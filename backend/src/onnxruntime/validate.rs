//! Checks that a configuration and its model agree, tensor by tensor, with Triton's onnxruntime
//! backend's rules and messages: a disagreement fails the load naming the tensor.

use crate::error::{BackendError, Code};

use super::config::{OnnxConfig, TensorSpec};
use super::tensors::{ModelTensor, ModelTensors};
use super::types;

/// Checks every configured tensor against the model's.
pub fn check(model: &str, config: &OnnxConfig, tensors: &ModelTensors) -> Result<(), BackendError> {
    if config.inputs.len() < tensors.inputs.len() {
        return Err(invalid(format!(
            "unable to load model '{model}', configuration expects {} inputs, model provides {}",
            config.inputs.len(),
            tensors.inputs.len()
        )));
    }
    for (kind, specs, actual) in [
        ("input", &config.inputs, &tensors.inputs),
        ("output", &config.outputs, &tensors.outputs),
    ] {
        for spec in specs {
            let Some(found) = actual.iter().find(|t| t.name == spec.name) else {
                let allowed: Vec<&str> = actual.iter().map(|t| t.name.as_str()).collect();
                return Err(invalid(format!(
                    "model '{model}': unexpected inference {kind} '{}', allowed {kind}s are: {}",
                    spec.name,
                    allowed.join(", ")
                )));
            };
            if spec.optional && config.max_batch_size != 0 {
                return Err(invalid(format!(
                    "model '{model}': {kind} '{}' is optional, which the onnxruntime backend \
                     allows only where max_batch_size is 0",
                    spec.name
                )));
            }
            if found.dtype != spec.dtype {
                return Err(invalid(format!(
                    "unable to load model '{model}', configuration expects datatype {} for {kind} '{}', model provides {}",
                    types::config_name(spec.dtype),
                    spec.name,
                    types::config_name(found.dtype)
                )));
            }
            dims(model, kind, spec, found, config.max_batch_size)?;
        }
    }
    Ok(())
}

/// Compares one tensor's dimensions: for inputs a model's `-1` takes any configured size;
/// outputs must match exactly.
fn dims(
    model: &str,
    kind: &str,
    spec: &TensorSpec,
    found: &ModelTensor,
    max_batch_size: u64,
) -> Result<(), BackendError> {
    let mut shape: &[i64] = &found.shape;
    if max_batch_size > 0 {
        if shape.first() != Some(&-1) {
            return Err(invalid(format!(
                "model '{model}', tensor '{}': for the model to support batching the shape \
                 should have at least 1 dimension and the first dimension must be -1; but shape \
                 expected by the model is {shape:?}",
                spec.name
            )));
        }
        shape = &shape[1..];
    }
    let configured = spec.model_dims();
    let agrees = if shape.is_empty() {
        configured.iter().all(|d| *d == 1)
    } else {
        configured.len() == shape.len()
            && shape
                .iter()
                .zip(configured)
                .all(|(m, c)| m == c || (kind == "input" && *m == -1))
    };
    if agrees {
        return Ok(());
    }
    let batch = if max_batch_size > 0 { "[-1] + " } else { "" };
    Err(invalid(format!(
        "model '{model}', tensor '{}': the model expects {} dimensions (shape {:?}) but the \
         model configuration specifies {batch}{configured:?}",
        spec.name,
        found.shape.len(),
        found.shape
    )))
}

/// A load error of the configuration's making.
fn invalid(message: String) -> BackendError {
    BackendError::new(Code::InvalidArg, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DataType;
    use serde_json::json;

    fn tensors() -> ModelTensors {
        let t = |name: &str, dtype, shape: &[i64]| ModelTensor {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
        };
        ModelTensors {
            inputs: vec![t("x", DataType::F32, &[-1, 3, -1, -1])],
            outputs: vec![t("y", DataType::F32, &[-1, 1, -1, -1])],
        }
    }

    fn config(input_dims: serde_json::Value, output_dims: serde_json::Value) -> OnnxConfig {
        OnnxConfig::from_json(&json!({
            "max_batch_size": 4,
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": input_dims}],
            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": output_dims}],
        }))
        .unwrap()
    }

    #[test]
    fn inputs_take_any_size_where_the_model_is_open_and_outputs_must_match() {
        check(
            "det",
            &config(json!([3, 640, 640]), json!([1, -1, -1])),
            &tensors(),
        )
        .unwrap();
        let error = check(
            "det",
            &config(json!([3, 640, 640]), json!([1, 640, 640])),
            &tensors(),
        )
        .unwrap_err();
        assert!(error.message.contains("tensor 'y'"), "{}", error.message);
        let error = check(
            "det",
            &config(json!([4, -1, -1]), json!([1, -1, -1])),
            &tensors(),
        )
        .unwrap_err();
        assert!(error.message.contains("tensor 'x'"), "{}", error.message);
    }

    #[test]
    fn names_types_counts_and_batching_are_checked_with_the_tensor_named() {
        let mut wrong_name = config(json!([3, -1, -1]), json!([1, -1, -1]));
        wrong_name.outputs[0].name = "z".into();
        let error = check("det", &wrong_name, &tensors()).unwrap_err();
        assert!(
            error
                .message
                .contains("unexpected inference output 'z', allowed outputs are: y")
        );
        let mut wrong_type = config(json!([3, -1, -1]), json!([1, -1, -1]));
        wrong_type.inputs[0].dtype = DataType::I64;
        let error = check("det", &wrong_type, &tensors()).unwrap_err();
        assert!(
            error
                .message
                .contains("expects datatype TYPE_INT64 for input 'x', model provides TYPE_FP32")
        );
        let mut none = config(json!([3, -1, -1]), json!([1, -1, -1]));
        none.inputs.clear();
        let error = check("det", &none, &tensors()).unwrap_err();
        assert!(
            error
                .message
                .contains("configuration expects 0 inputs, model provides 1")
        );
        let mut fixed = tensors();
        fixed.inputs[0].shape[0] = 1;
        let error = check(
            "det",
            &config(json!([3, -1, -1]), json!([1, -1, -1])),
            &fixed,
        )
        .unwrap_err();
        assert!(
            error.message.contains("first dimension must be -1"),
            "{}",
            error.message
        );
    }
}
