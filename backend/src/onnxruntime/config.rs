//! What a model's configuration asks of the onnxruntime backend, read as Triton's own
//! onnxruntime backend reads it (docs/CONTRACT.md, "The onnxruntime backend"): the model file,
//! the tensors, the batch size, the session's options. Anything it asks that this backend cannot
//! do (GPU execution accelerators, custom operator libraries) is an error naming the setting.

use serde_json::Value;

use crate::dtype::DataType;
use crate::error::{BackendError, Code};

use super::types;

/// One input or output the configuration declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    /// The tensor's name in the model.
    pub name: String,
    /// Its element type.
    pub dtype: DataType,
    /// Its shape without the batch dimension (`-1`: any size).
    pub dims: Vec<i64>,
    /// `reshape.shape`: the shape the model sees in place of `dims`, where given.
    pub reshape: Option<Vec<i64>>,
    /// `optional: true`: a request may leave the input out.
    pub optional: bool,
}

impl TensorSpec {
    /// The shape the model sees for one batch row (or the whole tensor without batching).
    pub fn model_dims(&self) -> &[i64] {
        self.reshape.as_deref().unwrap_or(&self.dims)
    }
}

/// How the backend builds each instance's ONNX Runtime session.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionOptions {
    /// `intra_op_thread_count` (0: ONNX Runtime's default, one thread per physical core).
    pub intra_op_threads: usize,
    /// `inter_op_thread_count` (0: ONNX Runtime's default).
    pub inter_op_threads: usize,
    /// `execution_mode` 1: operators run in parallel where the graph allows.
    pub parallel: bool,
    /// `enable_mem_arena`, where given.
    pub mem_arena: Option<bool>,
    /// `enable_mem_pattern`, where given.
    pub mem_pattern: Option<bool>,
    /// `optimization.graph.level`, as Triton maps it.
    pub level: GraphLevel,
    /// `session.*` parameters, passed to ONNX Runtime verbatim as session configuration entries.
    pub entries: Vec<(String, String)>,
}

/// ONNX Runtime's graph optimization levels, as `optimization.graph.level` chooses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GraphLevel {
    /// Level 2.
    Disabled,
    /// Level -1.
    Basic,
    /// Level 1.
    Extended,
    /// Anything else, or no level: every optimization.
    #[default]
    All,
}

/// The configuration, as far as this backend reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnnxConfig {
    /// `max_batch_size`: above 0, every tensor's first dimension is the batch.
    pub max_batch_size: u64,
    /// `input`, in order.
    pub inputs: Vec<TensorSpec>,
    /// `output`, in order.
    pub outputs: Vec<TensorSpec>,
    /// `default_model_filename`, else `model.onnx`.
    pub model_file: String,
    /// The session's options.
    pub session: SessionOptions,
}

/// The `session.*` configuration entries passed to ONNX Runtime: Triton's documented one and
/// the thread and numeric switches. ONNX Runtime's other entries include file paths (external
/// initializers' folder, saved models), which a configuration must not reach.
const SESSION_ENTRIES: &[&str] = &[
    "session.use_device_allocator_for_initializers",
    "session.intra_op.allow_spinning",
    "session.inter_op.allow_spinning",
    "session.disable_prepacking",
    "session.set_denormal_as_zero",
];

impl OnnxConfig {
    /// Reads the configuration Triton hands over as JSON.
    pub fn from_json(config: &Value) -> Result<OnnxConfig, BackendError> {
        refuse_what_is_not_done(config)?;
        let max_batch_size = match config.get("max_batch_size") {
            None | Some(Value::Null) => 0,
            Some(value) => integer(value)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or_else(|| invalid(format!("max_batch_size is {value}; expected a count")))?,
        };
        let model_file = config
            .get("default_model_filename")
            .and_then(Value::as_str)
            .filter(|name| !name.is_empty())
            .unwrap_or("model.onnx")
            .to_string();
        Ok(OnnxConfig {
            max_batch_size,
            inputs: tensors(config, "input")?,
            outputs: tensors(config, "output")?,
            model_file,
            session: session_options(config)?,
        })
    }
}

/// Refuses what the configuration asks that this backend does not do, naming the setting.
fn refuse_what_is_not_done(config: &Value) -> Result<(), BackendError> {
    let accelerators = config
        .pointer("/optimization/execution_accelerators")
        .cloned()
        .unwrap_or(Value::Null);
    for (list, meaning) in [
        ("gpu_execution_accelerator", "runs on the CPU only"),
        ("cpu_execution_accelerator", "has no OpenVINO"),
    ] {
        let names: Vec<&str> = accelerators
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| a.get("name").and_then(Value::as_str).unwrap_or(""))
            .collect();
        if let Some(name) = names.first() {
            return Err(BackendError::new(
                Code::Unsupported,
                format!(
                    "optimization.execution_accelerators.{list} asks for '{name}': trident's \
                     onnxruntime backend (the cpu image's) {meaning}; remove the setting, or \
                     serve the model on the nvidia image, whose onnxruntime backend is NVIDIA's"
                ),
            ));
        }
    }
    let libraries = config
        .pointer("/model_operations/op_library_filename")
        .and_then(Value::as_array)
        .is_some_and(|list| !list.is_empty());
    if libraries {
        return Err(BackendError::new(
            Code::Unsupported,
            "model_operations.op_library_filename: custom operator libraries are native code \
             from the model's folder; trident's onnxruntime backend does not load them",
        ));
    }
    Ok(())
}

/// The `input` or `output` list.
fn tensors(config: &Value, key: &str) -> Result<Vec<TensorSpec>, BackendError> {
    let Some(list) = config.get(key).and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|tensor| {
            let name = tensor
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(format!("an {key} has no name")))?
                .to_string();
            let type_name = tensor
                .get("data_type")
                .and_then(Value::as_str)
                .unwrap_or("TYPE_INVALID");
            let dtype = types::from_config(type_name).ok_or_else(|| {
                invalid(format!(
                    "{key} '{name}': data_type {type_name} is not one ONNX Runtime serves"
                ))
            })?;
            let dims = dim_list(tensor.get("dims"))
                .ok_or_else(|| invalid(format!("{key} '{name}': dims must be integers")))?;
            let reshape = match tensor.pointer("/reshape") {
                None | Some(Value::Null) => None,
                Some(reshape) => Some(dim_list(reshape.get("shape")).ok_or_else(|| {
                    invalid(format!("{key} '{name}': reshape.shape must be integers"))
                })?),
            };
            Ok(TensorSpec {
                name,
                dtype,
                dims,
                reshape,
                optional: tensor.get("optional").and_then(Value::as_bool) == Some(true),
            })
        })
        .collect()
}

/// A list of dimensions; Triton writes them as numbers, protobuf's JSON as strings.
fn dim_list(value: Option<&Value>) -> Option<Vec<i64>> {
    match value {
        None | Some(Value::Null) => Some(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(integer).collect(),
        Some(_) => None,
    }
}

/// An integer written as a number or a string.
fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The session's options: the parameters Triton documents and the graph level.
fn session_options(config: &Value) -> Result<SessionOptions, BackendError> {
    let mut options = SessionOptions {
        level: match config
            .pointer("/optimization/graph/level")
            .and_then(integer)
        {
            Some(-1) => GraphLevel::Basic,
            Some(1) => GraphLevel::Extended,
            Some(2) => GraphLevel::Disabled,
            _ => GraphLevel::All,
        },
        ..SessionOptions::default()
    };
    let Some(parameters) = config.get("parameters").and_then(Value::as_object) else {
        return Ok(options);
    };
    for (key, value) in parameters {
        let text = value
            .get("string_value")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        match key.as_str() {
            "intra_op_thread_count" => options.intra_op_threads = count(key, text)?,
            "inter_op_thread_count" => options.inter_op_threads = count(key, text)?,
            "execution_mode" => {
                options.parallel = match text {
                    "0" => false,
                    "1" => true,
                    _ => {
                        return Err(invalid(format!(
                            "parameter execution_mode is '{text}'; expected 0 (sequential) or 1 (parallel)"
                        )));
                    }
                }
            }
            "enable_mem_arena" => options.mem_arena = Some(boolean(key, text)?),
            "enable_mem_pattern" => options.mem_pattern = Some(boolean(key, text)?),
            key if SESSION_ENTRIES.contains(&key) => {
                options.entries.push((key.to_string(), text.to_string()));
            }
            key if key.starts_with("session.") => {
                return Err(invalid(format!(
                    "parameter {key}: the onnxruntime backend passes only these session entries \
                     to ONNX Runtime: {} (others can name files outside the model)",
                    SESSION_ENTRIES.join(", ")
                )));
            }
            // Read by Triton's backend for its GPU providers (cudnn_conv_algo_search,
            // gpu_mem_limit, ...) or its run options: nothing to do here. Other keys are the
            // user's own, which Triton's backend ignores too.
            _ => {}
        }
    }
    Ok(options)
}

/// A thread count parameter (negative or zero: ONNX Runtime's default, as in Triton).
fn count(key: &str, text: &str) -> Result<usize, BackendError> {
    let value: i64 = text.parse().map_err(|_| {
        invalid(format!(
            "parameter {key} is '{text}'; expected a whole number"
        ))
    })?;
    Ok(usize::try_from(value).unwrap_or(0).min(1024))
}

/// A boolean parameter, spelled as Triton accepts it.
fn boolean(key: &str, text: &str) -> Result<bool, BackendError> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "on" | "1" => Ok(true),
        "false" | "off" | "0" => Ok(false),
        _ => Err(invalid(format!(
            "parameter {key} is '{text}'; expected true or false"
        ))),
    }
}

/// An invalid-configuration error.
fn invalid(message: String) -> BackendError {
    BackendError::new(Code::InvalidArg, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(config: Value) -> Result<OnnxConfig, BackendError> {
        OnnxConfig::from_json(&config)
    }

    #[test]
    fn tensors_batch_size_and_file_are_read_with_quoted_or_plain_numbers() {
        let config = read(json!({
            "max_batch_size": "8",
            "default_model_filename": "net.onnx",
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": ["3", -1, 4],
                       "reshape": {"shape": [12, -1]}}],
            "output": [{"name": "y", "data_type": "TYPE_STRING", "dims": [1]}]
        }))
        .unwrap();
        assert_eq!(config.max_batch_size, 8);
        assert_eq!(config.model_file, "net.onnx");
        assert_eq!(config.inputs[0].dims, [3, -1, 4]);
        assert_eq!(config.inputs[0].model_dims(), [12, -1]);
        assert_eq!(config.outputs[0].dtype, DataType::Bytes);
        assert_eq!(read(json!({})).unwrap().model_file, "model.onnx");
    }

    #[test]
    fn parameters_and_graph_level_follow_triton() {
        let config = read(json!({
            "optimization": {"graph": {"level": -1}},
            "parameters": {
                "intra_op_thread_count": {"string_value": "2"},
                "inter_op_thread_count": {"string_value": "-3"},
                "execution_mode": {"string_value": "1"},
                "enable_mem_arena": {"string_value": "OFF"},
                "enable_mem_pattern": {"string_value": "true"},
                "session.intra_op.allow_spinning": {"string_value": "0"},
                "cudnn_conv_algo_search": {"string_value": "1"},
                "my_own_key": {"string_value": "anything"}
            }
        }))
        .unwrap();
        let s = config.session;
        assert_eq!((s.intra_op_threads, s.inter_op_threads), (2, 0));
        assert!(s.parallel);
        assert_eq!((s.mem_arena, s.mem_pattern), (Some(false), Some(true)));
        assert_eq!(s.level, GraphLevel::Basic);
        assert_eq!(
            s.entries,
            [("session.intra_op.allow_spinning".into(), "0".into())]
        );
        for (level, expected) in [
            (json!(1), GraphLevel::Extended),
            (json!(2), GraphLevel::Disabled),
            (json!(0), GraphLevel::All),
            (json!(7), GraphLevel::All),
        ] {
            let c = read(json!({"optimization": {"graph": {"level": level}}})).unwrap();
            assert_eq!(c.session.level, expected);
        }
    }

    #[test]
    fn bad_values_and_unserved_settings_name_the_setting() {
        let cases = [
            (
                json!({"parameters": {"execution_mode": {"string_value": "2"}}}),
                "execution_mode",
            ),
            (
                json!({"parameters": {"intra_op_thread_count": {"string_value": "two"}}}),
                "intra_op_thread_count",
            ),
            (
                json!({"parameters": {"enable_mem_arena": {"string_value": "maybe"}}}),
                "enable_mem_arena",
            ),
            (json!({"max_batch_size": -1}), "max_batch_size"),
            (
                json!({"parameters": {"session.model_external_initializers_file_folder_path":
                    {"string_value": "/etc"}}}),
                "session.model_external_initializers_file_folder_path",
            ),
            (
                json!({"input": [{"name": "x", "data_type": "TYPE_FP8", "dims": [1]}]}),
                "input 'x'",
            ),
            (
                json!({"optimization": {"execution_accelerators": {
                    "gpu_execution_accelerator": [{"name": "tensorrt"}]}}}),
                "gpu_execution_accelerator asks for 'tensorrt'",
            ),
            (
                json!({"optimization": {"execution_accelerators": {
                    "cpu_execution_accelerator": [{"name": "openvino"}]}}}),
                "cpu_execution_accelerator asks for 'openvino'",
            ),
            (
                json!({"model_operations": {"op_library_filename": ["libcustom.so"]}}),
                "op_library_filename",
            ),
        ];
        for (config, named) in cases {
            let error = read(config.clone()).unwrap_err();
            assert!(error.message.contains(named), "{config}: {}", error.message);
        }
    }
}
