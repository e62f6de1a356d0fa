//! The model configuration fields trident understands: Triton's `ModelConfig` message
//! (`model_config.proto` of Triton's common repository), every message and field of it, with
//! the strings that name a file in the model's folder marked as such. Under a gate, a
//! configuration is held to this schema: a field that is not in it is refused, never passed
//! on, and a file name must name a file in the model's own folder.

use super::text_format::{Message, Value};

/// What a field holds.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A number, an enum value or a boolean.
    Word,
    /// A string.
    Text,
    /// A string naming a file the core reads from the model's folder (or a subfolder of
    /// its own, as `warmup/` and `initial_state/`).
    FileName,
    /// A message with these fields.
    Message(&'static [(&'static str, Kind)]),
    /// A map: entries with a `key` and a `value` of these kinds.
    Map(&'static Kind, &'static Kind),
}

use Kind::{FileName, Map, Message as M, Text, Word};

const RATE_LIMITER: &[(&str, Kind)] = &[
    (
        "resources",
        M(&[("name", Text), ("global", Word), ("count", Word)]),
    ),
    ("priority", Word),
];
const INSTANCE_GROUP: &[(&str, Kind)] = &[
    ("name", Text),
    ("kind", Word),
    ("count", Word),
    ("rate_limiter", M(RATE_LIMITER)),
    ("gpus", Word),
    (
        "secondary_devices",
        M(&[("kind", Word), ("device_id", Word)]),
    ),
    ("profile", Text),
    ("passive", Word),
    ("host_policy", Text),
];
const RESHAPE: &[(&str, Kind)] = &[("shape", Word)];
const INPUT: &[(&str, Kind)] = &[
    ("name", Text),
    ("data_type", Word),
    ("format", Word),
    ("dims", Word),
    ("reshape", M(RESHAPE)),
    ("is_shape_tensor", Word),
    ("allow_ragged_batch", Word),
    ("optional", Word),
    ("is_non_linear_format_io", Word),
];
const OUTPUT: &[(&str, Kind)] = &[
    ("name", Text),
    ("data_type", Word),
    ("dims", Word),
    ("reshape", M(RESHAPE)),
    ("label_filename", FileName),
    ("is_shape_tensor", Word),
    ("is_non_linear_format_io", Word),
];
const BATCH_INPUT: &[(&str, Kind)] = &[
    ("kind", Word),
    ("target_name", Text),
    ("data_type", Word),
    ("source_input", Text),
];
const BATCH_OUTPUT: &[(&str, Kind)] = &[
    ("target_name", Text),
    ("kind", Word),
    ("source_input", Text),
];
const VERSION_POLICY: &[(&str, Kind)] = &[
    ("latest", M(&[("num_versions", Word)])),
    ("all", M(&[])),
    ("specific", M(&[("versions", Word)])),
];
const SHAPE: Kind = M(&[("dim", Word)]);
const GRAPH_SPEC: &[(&str, Kind)] = &[
    ("batch_size", Word),
    ("input", Map(&Text, &SHAPE)),
    (
        "graph_lower_bound",
        M(&[("batch_size", Word), ("input", Map(&Text, &SHAPE))]),
    ),
];
const ACCELERATOR: &[(&str, Kind)] = &[("name", Text), ("parameters", Map(&Text, &Text))];
const OPTIMIZATION: &[(&str, Kind)] = &[
    ("graph", M(&[("level", Word)])),
    ("priority", Word),
    (
        "cuda",
        M(&[
            ("graphs", Word),
            ("busy_wait_events", Word),
            ("graph_spec", M(GRAPH_SPEC)),
            ("output_copy_stream", Word),
        ]),
    ),
    (
        "execution_accelerators",
        M(&[
            ("gpu_execution_accelerator", M(ACCELERATOR)),
            ("cpu_execution_accelerator", M(ACCELERATOR)),
        ]),
    ),
    ("input_pinned_memory", M(&[("enable", Word)])),
    ("output_pinned_memory", M(&[("enable", Word)])),
    ("gather_kernel_buffer_threshold", Word),
    ("eager_batching", Word),
];
const QUEUE_POLICY: Kind = M(&[
    ("timeout_action", Word),
    ("default_timeout_microseconds", Word),
    ("allow_timeout_override", Word),
    ("max_queue_size", Word),
]);
const DYNAMIC_BATCHING: &[(&str, Kind)] = &[
    ("preferred_batch_size", Word),
    ("max_queue_delay_microseconds", Word),
    ("preserve_ordering", Word),
    ("priority_levels", Word),
    ("default_priority_level", Word),
    ("default_queue_policy", QUEUE_POLICY),
    ("priority_queue_policy", Map(&Word, &QUEUE_POLICY)),
];
const CONTROL: &[(&str, Kind)] = &[
    ("kind", Word),
    ("int32_false_true", Word),
    ("fp32_false_true", Word),
    ("bool_false_true", Word),
    ("data_type", Word),
];
const INITIAL_STATE: &[(&str, Kind)] = &[
    ("data_type", Word),
    ("dims", Word),
    ("zero_data", Word),
    ("data_file", FileName),
    ("name", Text),
];
const STATE: &[(&str, Kind)] = &[
    ("input_name", Text),
    ("output_name", Text),
    ("data_type", Word),
    ("dims", Word),
    ("initial_state", M(INITIAL_STATE)),
    ("use_same_buffer_for_input_output", Word),
    ("use_growable_memory", Word),
];
const SEQUENCE_BATCHING: &[(&str, Kind)] = &[
    (
        "direct",
        M(&[
            ("max_queue_delay_microseconds", Word),
            ("minimum_slot_utilization", Word),
        ]),
    ),
    (
        "oldest",
        M(&[
            ("max_candidate_sequences", Word),
            ("preferred_batch_size", Word),
            ("max_queue_delay_microseconds", Word),
            ("preserve_ordering", Word),
        ]),
    ),
    ("max_sequence_idle_microseconds", Word),
    (
        "control_input",
        M(&[("name", Text), ("control", M(CONTROL))]),
    ),
    ("state", M(STATE)),
    ("iterative_sequence", Word),
];
const ENSEMBLE: &[(&str, Kind)] = &[
    (
        "step",
        M(&[
            ("model_name", Text),
            ("model_version", Word),
            ("input_map", Map(&Text, &Text)),
            ("output_map", Map(&Text, &Text)),
            ("model_namespace", Text),
        ]),
    ),
    ("max_inflight_requests", Word),
];
const WARMUP_INPUT: Kind = M(&[
    ("data_type", Word),
    ("dims", Word),
    ("zero_data", Word),
    ("random_data", Word),
    ("input_data_file", FileName),
]);
const WARMUP: &[(&str, Kind)] = &[
    ("name", Text),
    ("batch_size", Word),
    ("inputs", Map(&Text, &WARMUP_INPUT)),
    ("count", Word),
];
const METRICS: &[(&str, Kind)] = &[(
    "metric_control",
    M(&[
        ("metric_identifier", M(&[("family", Text)])),
        ("histogram_options", M(&[("buckets", Word)])),
    ]),
)];

/// `ModelConfig`: the top of a `config.pbtxt`.
pub const MODEL_CONFIG: &[(&str, Kind)] = &[
    ("name", Text),
    ("platform", Text),
    ("backend", Text),
    ("runtime", FileName),
    ("version_policy", M(VERSION_POLICY)),
    ("max_batch_size", Word),
    ("input", M(INPUT)),
    ("output", M(OUTPUT)),
    ("batch_input", M(BATCH_INPUT)),
    ("batch_output", M(BATCH_OUTPUT)),
    ("optimization", M(OPTIMIZATION)),
    ("dynamic_batching", M(DYNAMIC_BATCHING)),
    ("sequence_batching", M(SEQUENCE_BATCHING)),
    ("ensemble_scheduling", M(ENSEMBLE)),
    ("instance_group", M(INSTANCE_GROUP)),
    ("default_model_filename", FileName),
    ("cc_model_filenames", Map(&Text, &FileName)),
    ("metric_tags", Map(&Text, &Text)),
    ("parameters", Map(&Text, &M(&[("string_value", Text)]))),
    ("model_warmup", M(WARMUP)),
    ("model_operations", M(&[("op_library_filename", FileName)])),
    ("model_transaction_policy", M(&[("decoupled", Word)])),
    ("model_repository_agents", M(&[("agents", M(ACCELERATOR))])),
    ("response_cache", M(&[("enable", Word)])),
    ("model_metrics", M(METRICS)),
];

/// Whether `name` names a file in a folder itself: not empty, no separator, not `.` or `..`.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['/', '\\', '\0']) && name != "." && name != ".."
}

/// Every way `message` departs from `schema`, each naming the field by its path
/// (`sequence_batching.oldest.max_candidate_sequences`).
pub fn check(message: &Message, schema: &[(&str, Kind)]) -> Vec<String> {
    let mut problems = Vec::new();
    check_fields(message, schema, "", &mut problems);
    problems
}

fn check_fields(
    message: &Message,
    schema: &[(&str, Kind)],
    path: &str,
    problems: &mut Vec<String>,
) {
    for field in &message.fields {
        let name = format!("{path}{}", field.name);
        match schema.iter().find(|(known, _)| *known == field.name) {
            Some((_, kind)) => check_value(&field.value, *kind, &name, problems),
            None => problems.push(format!("sets {name}, a field trident does not understand")),
        }
    }
}

fn check_value(value: &Value, kind: Kind, name: &str, problems: &mut Vec<String>) {
    match (kind, value) {
        (Word, Value::Word(_)) | (Text, Value::Text(_)) => {}
        (FileName, Value::Text(file)) => {
            if !is_plain_file_name(file) {
                problems.push(format!(
                    "sets {name} to {file:?}, which is not a file of the model's own folder"
                ));
            }
        }
        (M(fields), Value::Message(message)) => {
            check_fields(message, fields, &format!("{name}."), problems);
        }
        (Map(key, value_kind), Value::Message(entry)) => {
            for field in &entry.fields {
                match field.name.as_str() {
                    "key" => check_value(&field.value, *key, &format!("{name}.key"), problems),
                    "value" => check_value(&field.value, *value_kind, name, problems),
                    other => problems.push(format!(
                        "sets {name}.{other}, a field trident does not understand"
                    )),
                }
            }
        }
        _ => problems.push(format!("sets {name} to a value of the wrong kind")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifacts::text_format::parse;

    fn problems(text: &str) -> Vec<String> {
        check(&parse(text.as_bytes()).unwrap(), MODEL_CONFIG)
    }

    #[test]
    fn the_configurations_of_triton_s_examples_are_understood() {
        let text = r#"
            name: "m" backend: "onnxruntime" max_batch_size: 8
            input [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [3, 224, 224] reshape { shape: [1] } } ]
            output [ { name: "y" data_type: TYPE_FP32 dims: [1000] label_filename: "labels.txt" } ]
            instance_group [ { count: 2 kind: KIND_CPU } ]
            dynamic_batching { preferred_batch_size: [4, 8] max_queue_delay_microseconds: 100
              priority_queue_policy { key: 1 value { max_queue_size: 4 } } }
            optimization { execution_accelerators { cpu_execution_accelerator : [ { name : "openvino" } ] } }
            parameters { key: "k" value: { string_value: "v" } }
            model_warmup [ { name: "w" batch_size: 1 inputs { key: "x" value { data_type: TYPE_FP32 dims: [3] zero_data: true } } } ]
            version_policy: { latest { num_versions: 1 } }
            response_cache { enable: true }
        "#;
        assert_eq!(problems(text), Vec::<String>::new());
        let stateful = "sequence_batching { max_sequence_idle_microseconds: 5000000 \
            control_input [ { name: \"START\" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] } ] } ] \
            oldest { max_candidate_sequences: 4 } state [ { input_name: \"a\" output_name: \"b\" data_type: TYPE_INT32 dims: [1] } ] }";
        assert_eq!(problems(stateful), Vec::<String>::new());
        let ensemble = "platform: \"ensemble\" ensemble_scheduling { step [ { model_name: \"a\" \
            model_version: -1 input_map { key: \"x\" value: \"y\" } } ] }";
        assert_eq!(problems(ensemble), Vec::<String>::new());
    }

    #[test]
    fn unknown_fields_and_paths_out_of_the_folder_are_named() {
        let found = problems(
            "backend: \"onnxruntime\" secret_option: 1 sequence_batching { oldest { hidden: 2 } } \
             output { name: \"y\" label_filename: \"../../proc/self/environ\" } \
             model_warmup { inputs { key: \"x\" value { input_data_file: \"/etc/passwd\" } } } \
             name { nested: 1 } parameters { key: \"k\" value { string_value: \"v\" } extra: 1 }",
        );
        let expected = [
            "secret_option",
            "sequence_batching.oldest.hidden",
            "output.label_filename",
            "model_warmup.inputs",
            "name to a value of the wrong kind",
            "parameters.extra",
        ];
        assert_eq!(found.len(), expected.len(), "{found:?}");
        for (problem, what) in found.iter().zip(expected) {
            assert!(problem.contains(what), "{problem} should name {what}");
        }
    }

    #[test]
    fn plain_file_names_are_names_and_nothing_else() {
        for good in ["model.onnx", "labels.txt", "..x", "a..b"] {
            assert!(is_plain_file_name(good), "{good}");
        }
        for bad in ["", ".", "..", "../x", "a/b", "/abs", "a\\b", "x\0"] {
            assert!(!is_plain_file_name(bad), "{bad:?}");
        }
    }
}
