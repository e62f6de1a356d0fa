//! What a model's `config.pbtxt` asks of the backend, read from the configuration Triton hands
//! over as JSON. Everything is chosen by `parameters`:
//!
//! | parameter | values | effect |
//! |---|---|---|
//! | `model` | `identity`, `add_sub`, `text_stream`, `repeat`, `sequence_sum`, `classifier`, `text_classifier`, `token_stream` | which model this is (required) |
//! | `classes` | 1–100000 (default 1000) | the classifiers' number of classes |
//! | `fail_message` | text | every request fails with this message |
//! | `fail_code` | `INTERNAL` (default), `INVALID_ARG`, `UNAVAILABLE`, ... | the code of those failures |
//! | `delay_ms` | 0–600000 | each request (each response of a stream) waits this long first |
//! | `fail_load` | text | the load fails with this message |
//! | `exit_code` | 0–255 | each request ends the whole process with this code, as a native library's `exit()` would |

use serde_json::Value;

use crate::error::{BackendError, Code};

/// Which model the backend runs for a model configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// Every requested `OUTPUT<x>` is the input `INPUT<x>`, any type and shape.
    Identity,
    /// `OUTPUT0 = INPUT0 + INPUT1`, `OUTPUT1 = INPUT0 - INPUT1`.
    AddSub,
    /// Decoupled: `COUNT` responses of `TEXT = "<PROMPT> <i>"`.
    TextStream,
    /// Decoupled: `N` responses of `OUT = [i]`.
    Repeat,
    /// Sequence batcher: `OUTPUT` is the running sum of `INPUT` over the sequence.
    SequenceSum,
    /// A stand-in image classifier: `OUTPUT0` scores `classes` classes by `INPUT0`'s mean colour.
    Classifier,
    /// A stand-in BERT classifier: `logits` scores `classes` classes by `input_ids`' tokens.
    TextClassifier,
    /// Decoupled: the ids of `input_ids` back, one `output_ids` response each.
    TokenStream,
}

impl ModelKind {
    fn from_name(name: &str) -> Option<ModelKind> {
        Some(match name {
            "identity" => ModelKind::Identity,
            "add_sub" => ModelKind::AddSub,
            "text_stream" => ModelKind::TextStream,
            "repeat" => ModelKind::Repeat,
            "sequence_sum" => ModelKind::SequenceSum,
            "classifier" => ModelKind::Classifier,
            "text_classifier" => ModelKind::TextClassifier,
            "token_stream" => ModelKind::TokenStream,
            _ => return None,
        })
    }

    /// Whether the model sends its responses through a response factory (decoupled).
    pub fn is_decoupled(self) -> bool {
        matches!(
            self,
            ModelKind::TextStream | ModelKind::Repeat | ModelKind::TokenStream
        )
    }
}

/// The settings of one model, fixed at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSettings {
    /// The model the backend runs.
    pub kind: ModelKind,
    /// The configuration's `max_batch_size`: above 0, every tensor's first dimension is the batch.
    pub max_batch_size: u64,
    /// Every request fails with this error, when set.
    pub failure: Option<BackendError>,
    /// How long each request (each response, for a stream) waits first, in milliseconds.
    pub delay_ms: u64,
    /// Each request ends the process with this exit code, when set.
    pub exit_code: Option<u8>,
    /// The classifiers' number of classes.
    pub classes: usize,
}

/// The longest delay a configuration may ask for: ten minutes.
const MAX_DELAY_MS: u64 = 600_000;

impl ModelSettings {
    /// Reads the settings from the model configuration's JSON; an error names what is wrong.
    pub fn from_config_json(json: &[u8]) -> Result<ModelSettings, BackendError> {
        let config: Value = serde_json::from_slice(json)
            .map_err(|e| BackendError::internal(format!("the model configuration: {e}")))?;
        let parameter = |key: &str| -> Option<&str> {
            config
                .get("parameters")?
                .get(key)?
                .get("string_value")?
                .as_str()
        };
        if let Some(message) = parameter("fail_load") {
            return Err(BackendError::internal(message));
        }
        let name = parameter("model").ok_or_else(|| {
            BackendError::invalid(
                "the trident backend needs a `model` parameter: identity, add_sub, text_stream, repeat, sequence_sum, classifier, text_classifier or token_stream",
            )
        })?;
        let kind = ModelKind::from_name(name).ok_or_else(|| {
            BackendError::invalid(format!(
                "the trident backend has no model {name:?}: identity, add_sub, text_stream, repeat, sequence_sum, classifier, text_classifier or token_stream"
            ))
        })?;
        let failure = match parameter("fail_message") {
            None => None,
            Some(message) => {
                let code = match parameter("fail_code") {
                    None => Code::Internal,
                    Some(name) => Code::from_name(name).ok_or_else(|| {
                        BackendError::invalid(format!("fail_code {name:?} is not an error code"))
                    })?,
                };
                Some(BackendError::new(code, message))
            }
        };
        let delay_ms = match parameter("delay_ms") {
            None => 0,
            Some(text) => text
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|ms| *ms <= MAX_DELAY_MS)
                .ok_or_else(|| {
                    BackendError::invalid(format!(
                        "delay_ms {text:?} is not a whole number of milliseconds up to {MAX_DELAY_MS}"
                    ))
                })?,
        };
        let exit_code = match parameter("exit_code") {
            None => None,
            Some(text) => Some(text.trim().parse::<u8>().map_err(|_| {
                BackendError::invalid(format!("exit_code {text:?} is not a number from 0 to 255"))
            })?),
        };
        let classes = match parameter("classes") {
            None => 1000,
            Some(text) => text
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=100_000).contains(n))
                .ok_or_else(|| {
                    BackendError::invalid(format!(
                        "classes {text:?} is not a number from 1 to 100000"
                    ))
                })?,
        };
        // Triton writes max_batch_size as a number; older configurations may quote it.
        let max_batch_size = match config.get("max_batch_size") {
            None => 0,
            Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
            Some(Value::String(s)) => s.parse().unwrap_or(0),
            Some(_) => 0,
        };
        Ok(ModelSettings {
            kind,
            max_batch_size,
            failure,
            delay_ms,
            exit_code,
            classes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(parameters: &str) -> Result<ModelSettings, BackendError> {
        let json = format!(r#"{{"max_batch_size": 8, "parameters": {{{parameters}}}}}"#);
        ModelSettings::from_config_json(json.as_bytes())
    }

    #[test]
    fn a_model_is_chosen_by_its_parameter() {
        let s = settings(r#""model": {"string_value": "add_sub"}"#).unwrap();
        assert_eq!(s.kind, ModelKind::AddSub);
        assert_eq!(s.max_batch_size, 8);
        assert_eq!(s.failure, None);
        assert_eq!(s.delay_ms, 0);
        assert!(settings("").is_err());
        assert!(settings(r#""model": {"string_value": "resnet"}"#).is_err());
    }

    #[test]
    fn failures_and_delays_are_read_and_checked() {
        let s = settings(
            r#""model": {"string_value": "identity"}, "fail_message": {"string_value": "out of memory"},
               "fail_code": {"string_value": "UNAVAILABLE"}, "delay_ms": {"string_value": "250"}"#,
        )
        .unwrap();
        assert_eq!(
            s.failure,
            Some(BackendError::new(Code::Unavailable, "out of memory"))
        );
        assert_eq!(s.delay_ms, 250);
        let default_code = settings(
            r#""model": {"string_value": "identity"}, "fail_message": {"string_value": "x"}"#,
        )
        .unwrap();
        assert_eq!(default_code.failure.unwrap().code, Code::Internal);
        for bad in [
            r#""model": {"string_value": "identity"}, "delay_ms": {"string_value": "-1"}"#,
            r#""model": {"string_value": "identity"}, "delay_ms": {"string_value": "600001"}"#,
            r#""model": {"string_value": "identity"}, "fail_message": {"string_value": "x"}, "fail_code": {"string_value": "NOPE"}"#,
        ] {
            assert!(settings(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_load_failure_wins_over_everything() {
        let e = settings(r#""fail_load": {"string_value": "weights are corrupt"}"#).unwrap_err();
        assert_eq!(e.message, "weights are corrupt");
    }
}
