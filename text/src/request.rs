//! What one request asks of the tokenizer beside the plugin's settings: texts that come in pairs
//! (Hugging Face's `text_pair`: a question and its passage, a premise and its hypothesis, a
//! query and a document for a cross-encoder), tokenized as one row with the tokenizer's pair
//! template, and Hugging Face's `parameters` `truncation` and `max_length`, as the Hugging Face
//! inference toolkit's clients send them.
//!
//! A request's parameters work within the plugin's settings, never past them: `max_length` may
//! shorten rows (the tensors keep the model's length, padding masked), not lengthen them.

use serde_json::Value;

use crate::Error;

/// One row's text, and the text paired with it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// The text (Hugging Face's `text`), the row's first segment.
    pub text: String,
    /// The text paired with it (`text_pair`), its second segment (type id 1 where the
    /// tokenizer's template says so).
    pub pair: Option<String>,
}

impl Input {
    /// A text alone.
    pub fn single(text: String) -> Input {
        Input { text, pair: None }
    }

    /// Bytes of text the row holds (both texts).
    pub fn bytes(&self) -> usize {
        self.text.len() + self.pair.as_ref().map_or(0, String::len)
    }
}

/// What `truncation` may be, for errors.
const STRATEGIES: &str = "give true, false, \"longest_first\", \"only_first\", \"only_second\" \
                          or \"do_not_truncate\"";

/// How a row longer than its length is cut, as `tokenizers` names the strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// Refused with 400 (`false`, `do_not_truncate`).
    Refuse,
    /// A token at a time from the longer of the two texts (`true`, `longest_first`).
    LongestFirst,
    /// From the first text only (`only_first`).
    OnlyFirst,
    /// From the paired text only (`only_second`).
    OnlySecond,
}

impl Truncation {
    /// The strategy `name` names (as `tokenizers` and the `text` interface name them).
    pub fn parse(name: &str) -> Result<Truncation, Error> {
        match name {
            "longest_first" => Ok(Truncation::LongestFirst),
            "only_first" => Ok(Truncation::OnlyFirst),
            "only_second" => Ok(Truncation::OnlySecond),
            "do_not_truncate" => Ok(Truncation::Refuse),
            other => Err(Error::BadRequest(format!(
                "parameters.truncation = {other:?}: {STRATEGIES}"
            ))),
        }
    }

    /// Its name in the `text` interface.
    pub fn name(self) -> &'static str {
        match self {
            Truncation::Refuse => "do_not_truncate",
            Truncation::LongestFirst => "longest_first",
            Truncation::OnlyFirst => "only_first",
            Truncation::OnlySecond => "only_second",
        }
    }
}

/// A request's own tokenizer parameters; `None`: the plugin's setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parameters {
    /// `truncation`.
    pub truncation: Option<Truncation>,
    /// `max_length`: tokens of a row at most, special tokens included; at most the plugin's.
    pub max_length: Option<usize>,
}

impl Parameters {
    /// Whether the request sets none (the settings decide everything).
    pub fn is_empty(&self) -> bool {
        self.truncation.is_none() && self.max_length.is_none()
    }

    /// The parameters of a JSON body's `parameters` object; keys other than `truncation` and
    /// `max_length` are left to others (a response adapter's `top_k`), as Hugging Face's
    /// toolkit passes them on. A value of the wrong kind is 400, naming it.
    pub fn from_json(parameters: &Value) -> Result<Parameters, Error> {
        let Value::Object(object) = parameters else {
            return Err(Error::BadRequest(
                "parameters must be a JSON object".to_owned(),
            ));
        };
        let truncation = match object.get("truncation") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(true)) => Some(Truncation::LongestFirst),
            Some(Value::Bool(false)) => Some(Truncation::Refuse),
            Some(Value::String(name)) => Some(Truncation::parse(name)?),
            Some(other) => Err(Error::BadRequest(format!(
                "parameters.truncation = {other}: {STRATEGIES}"
            )))?,
        };
        let max_length = match object.get("max_length") {
            None | Some(Value::Null) => None,
            Some(value) => Some(
                value
                    .as_u64()
                    .filter(|n| *n > 0)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        Error::BadRequest(format!(
                            "parameters.max_length = {value}: give a whole number of tokens, \
                             at least 1"
                        ))
                    })?,
            ),
        };
        Ok(Parameters {
            truncation,
            max_length,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn parameters_read_as_hugging_face_clients_send_them() {
        let read = |value: Value| Parameters::from_json(&value);
        assert_eq!(read(json!({})).unwrap(), Parameters::default());
        assert_eq!(
            read(json!({"truncation": true, "max_length": 8, "top_k": 2})).unwrap(),
            Parameters {
                truncation: Some(Truncation::LongestFirst),
                max_length: Some(8)
            }
        );
        assert_eq!(
            read(json!({"truncation": "only_second"}))
                .unwrap()
                .truncation,
            Some(Truncation::OnlySecond)
        );
        assert_eq!(
            read(json!({"truncation": false})).unwrap().truncation,
            Some(Truncation::Refuse)
        );
        for bad in [
            json!({"truncation": "sideways"}),
            json!({"truncation": "true"}),
            json!({"truncation": 1}),
            json!({"max_length": 0}),
            json!({"max_length": -3}),
            json!({"max_length": 1.5}),
            json!({"max_length": "64"}),
            json!([1]),
        ] {
            let error = read(bad.clone()).unwrap_err();
            assert!(matches!(error, Error::BadRequest(_)), "{bad}");
        }
        for name in [
            "longest_first",
            "only_first",
            "only_second",
            "do_not_truncate",
        ] {
            assert_eq!(Truncation::parse(name).unwrap().name(), name);
        }
    }
}
