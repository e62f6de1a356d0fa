//! Triton's generate extension: a flat JSON object in, a flat JSON object out.
//!
//! In: each top-level key naming a model input becomes that tensor, typed and shaped from the
//! model's metadata (a scalar or a list fills the metadata shape, `-1`s included); a nested
//! `parameters` object is read by the same rule; every other key becomes a request parameter.
//! Out: `id`, `model_name`, `model_version`, the response parameters and each output by name,
//! in sorted key order, a one-element tensor written as a scalar.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;

use super::ProtocolError;
use super::json_syntax::{rapidjson_message, refusal};
use super::tensor_data::{DataError, decode_json_data, write_json_data, write_json_string};
use super::v2_request::{element_count, parameter_value};
use super::v2_response::write_parameter_value;
use crate::engine::{DataType, InferRequest, InferResponse, InputTensor};

/// A model input as its metadata describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputSpec {
    /// The input's name: the request key that becomes this tensor.
    pub name: String,
    /// The element type of the tensor.
    pub datatype: DataType,
    /// The shape in the metadata; `-1` marks a dimension of any size.
    pub shape: Vec<i64>,
}

/// Reads the inputs of a model's metadata document.
pub fn input_specs(metadata: &Value) -> Result<Vec<InputSpec>, ProtocolError> {
    let internal =
        |what: &str| ProtocolError::Internal(format!("unexpected model metadata: {what}"));
    metadata["inputs"]
        .as_array()
        .ok_or_else(|| internal("no inputs"))?
        .iter()
        .map(|input| {
            let name = input["name"]
                .as_str()
                .ok_or_else(|| internal("input without name"))?;
            let datatype = input["datatype"]
                .as_str()
                .and_then(|d| d.parse().ok())
                .ok_or_else(|| internal("input without a known datatype"))?;
            let shape = input["shape"]
                .as_array()
                .map(|dims| dims.iter().filter_map(Value::as_i64).collect())
                .ok_or_else(|| {
                    ProtocolError::Internal(format!(
                        "Unexpected 'shape' not found in model metadata for input '{name}'"
                    ))
                })?;
            Ok(InputSpec {
                name: name.to_owned(),
                datatype,
                shape,
            })
        })
        .collect()
}

/// Decodes a generate request body for `model` with the given inputs.
pub fn decode_generate_request(
    model: &str,
    body: &[u8],
    inputs: &[InputSpec],
) -> Result<InferRequest, ProtocolError> {
    // RapidJSON's rules are checked first (serde takes numbers RapidJSON refuses, such as
    // `0e400`). Each value is kept as its text and decoded from it: a tree of serde values
    // costs 32 bytes or more per number, 16 times a body of one-digit numbers.
    if let Some(message) = rapidjson_message(body) {
        return Err(bad(message));
    }
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let object: BTreeMap<String, &RawValue> = serde_json::from_slice(body)
        .map_err(|e| bad(refusal(body, &e, "failed to parse the request JSON buffer")))?;
    let mut request = InferRequest::new(model);
    for (key, value) in object {
        if key == "parameters" {
            if inputs.iter().any(|i| i.name == "parameters") {
                return Err(bad(
                    "Keyword 'parameters' for nested schema also given as input tensor name".into(),
                ));
            }
            let Ok(nested) = serde_json::from_str::<BTreeMap<String, &RawValue>>(value.get())
            else {
                return Err(bad(
                    "Expected JSON object for keyword: 'parameters': attempt to access JSON \
                     non-object as object"
                        .into(),
                ));
            };
            for (key, value) in nested {
                add_entry(&mut request, inputs, key, value)
                    .map_err(|e| bad(format!("Converting keyword: 'parameters': {e}")))?;
            }
        } else {
            if key == "id"
                && let Ok(Value::String(id)) = serde_json::from_str(value.get())
                && !inputs.iter().any(|i| i.name == "id")
            {
                request.id = Some(id);
            }
            add_entry(&mut request, inputs, key, value)?;
        }
    }
    Ok(request)
}

fn add_entry(
    request: &mut InferRequest,
    inputs: &[InputSpec],
    key: String,
    value: &RawValue,
) -> Result<(), ProtocolError> {
    let Some(spec) = inputs.iter().find(|i| i.name == key) else {
        let value: Value = serde_json::from_str(value.get())
            .map_err(|e| bad(format!("parameter '{key}': {e}")))?;
        let value = match value {
            Value::Array(_) | Value::Object(_) | Value::Null => {
                return Err(bad(format!(
                    "parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'."
                )));
            }
            scalar => parameter_value(&key, scalar)?,
        };
        request.parameters.push((key, value));
        return Ok(());
    };
    let (data, count) = decode_json_data(value.get(), spec.datatype).map_err(|e| match e {
        // Not reached: the body passed RapidJSON's rules, and serde wrote `raw` again.
        DataError::Syntax(_) => bad(e.message(&key, 0)),
        DataError::Invalid(why) => bad(format!("Unable to parse 'data' of input '{key}': {why}")),
    })?;
    let shape = fill_shape(&key, &spec.shape, count)?;
    request.inputs.push(InputTensor {
        name: key,
        datatype: spec.datatype,
        shape,
        data: data.into(),
    });
    Ok(())
}

/// Shapes `count` elements by the metadata shape: fixed dimensions divide the count, the
/// innermost `-1` takes what remains and any other `-1` is 1.
pub fn fill_shape(name: &str, shape: &[i64], count: usize) -> Result<Vec<i64>, ProtocolError> {
    let refuse = || {
        bad(format!(
            "The schema can not convert input '{name}' to tensor with proper shape"
        ))
    };
    let mut remaining = count as i64;
    for &dim in shape.iter().rev() {
        if dim > 0 {
            if remaining % dim != 0 {
                return Err(refuse());
            }
            remaining /= dim;
        }
    }
    let mut filled = shape.to_vec();
    for dim in filled.iter_mut().rev() {
        if *dim < 0 {
            *dim = std::mem::replace(&mut remaining, 1);
        }
    }
    if remaining != 1 {
        return Err(refuse());
    }
    Ok(filled)
}

/// Encodes one response as the generate extension's flat JSON object.
pub fn encode_generate_response(response: &InferResponse) -> Result<Vec<u8>, ProtocolError> {
    let mut entries: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    let string = |text: &str| {
        let mut out = Vec::new();
        write_json_string(&mut out, text);
        out
    };
    if let Some(id) = &response.id {
        entries.insert("id", string(id));
    }
    entries.insert("model_name", string(&response.model_name));
    entries.insert("model_version", string(&response.model_version.to_string()));
    for (name, value) in &response.parameters {
        let mut fragment = Vec::new();
        write_parameter_value(&mut fragment, value);
        entries.entry(name).or_insert(fragment);
    }
    for output in &response.outputs {
        let mut out = Vec::new();
        write_json_data(&mut out, output.datatype, &output.data)?;
        let single = element_count(&output.name, &output.shape).is_ok_and(|n| n == 1);
        let fragment = if single && out.len() > 2 {
            out[1..out.len() - 1].to_vec()
        } else {
            out
        };
        entries.entry(&output.name).or_insert(fragment);
    }
    let mut json = Vec::with_capacity(entries.values().map(|v| v.len() + 8).sum::<usize>() + 2);
    json.push(b'{');
    for (index, (key, value)) in entries.iter().enumerate() {
        if index > 0 {
            json.push(b',');
        }
        write_json_string(&mut json, key);
        json.push(b':');
        json.extend_from_slice(value);
    }
    json.push(b'}');
    Ok(json)
}

fn bad(message: String) -> ProtocolError {
    ProtocolError::BadRequest(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{OutputTensor, ParameterValue};
    use bytes::Bytes;

    fn specs() -> Vec<InputSpec> {
        vec![
            InputSpec {
                name: "PROMPT".into(),
                datatype: DataType::Bytes,
                shape: vec![1, 1],
            },
            InputSpec {
                name: "STREAM".into(),
                datatype: DataType::Bool,
                shape: vec![1, 1],
            },
            InputSpec {
                name: "ids".into(),
                datatype: DataType::Int32,
                shape: vec![1, -1],
            },
        ]
    }

    #[test]
    fn keys_become_inputs_or_parameters() {
        let body =
            br#"{"PROMPT":"hello","STREAM":[true],"ids":[1,2,3],"max_tokens":5,"temperature":0.5,
            "parameters":{"top_k":2},"id":"r1"}"#;
        let request = decode_generate_request("m", body, &specs()).unwrap();
        let shapes: Vec<(&str, &[i64])> = request
            .inputs
            .iter()
            .map(|i| (i.name.as_str(), i.shape.as_slice()))
            .collect();
        assert_eq!(
            shapes,
            [
                ("PROMPT", &[1, 1][..]),
                ("STREAM", &[1, 1][..]),
                ("ids", &[1, 3][..])
            ]
        );
        assert_eq!(&request.inputs[0].data[..], b"\x05\0\0\0hello");
        assert_eq!(request.id.as_deref(), Some("r1"));
        assert!(
            request
                .parameters
                .contains(&("max_tokens".into(), ParameterValue::Int(5)))
        );
        assert!(
            request
                .parameters
                .contains(&("temperature".into(), ParameterValue::Double(0.5)))
        );
        assert!(
            request
                .parameters
                .contains(&("top_k".into(), ParameterValue::Int(2)))
        );
        assert!(
            request
                .parameters
                .contains(&("id".into(), ParameterValue::String("r1".into())))
        );
    }

    #[test]
    fn refusals() {
        let cases: &[(&[u8], &str)] = &[
            (b"[1]", "failed to parse"),
            (br#"{"PROMPT":1}"#, "expected BYTES data"),
            (br#"{"STREAM":1}"#, "expected BOOL data"),
            (br#"{"PROMPT":["a","b"]}"#, "can not convert input 'PROMPT'"),
            (br#"{"x":[1]}"#, "parameter 'x' has invalid type"),
            (br#"{"parameters":[1]}"#, "Expected JSON object"),
            (
                br#"{"parameters":{"x":{}}}"#,
                "Converting keyword: 'parameters': parameter 'x'",
            ),
        ];
        for (body, expected) in cases {
            let error = decode_generate_request("m", body, &specs()).unwrap_err();
            assert!(
                error.to_string().contains(expected),
                "{}: {error}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn shapes_fill_like_triton() {
        assert_eq!(fill_shape("x", &[1, -1], 3).unwrap(), [1, 3]);
        assert_eq!(fill_shape("x", &[-1, -1], 4).unwrap(), [1, 4]);
        assert_eq!(fill_shape("x", &[-1, 2], 6).unwrap(), [3, 2]);
        assert_eq!(fill_shape("x", &[2, 2], 4).unwrap(), [2, 2]);
        assert!(fill_shape("x", &[2, 2], 3).is_err());
        assert!(fill_shape("x", &[1, 1], 2).is_err());
    }

    #[test]
    fn response_is_flat_and_sorted() {
        let response = InferResponse {
            model_name: "llm".into(),
            model_version: 1,
            id: None,
            parameters: vec![("done".into(), ParameterValue::Bool(true))],
            outputs: vec![
                OutputTensor {
                    name: "TEXT".into(),
                    datatype: DataType::Bytes,
                    shape: vec![1, 1],
                    data: Bytes::from_static(b"\x02\0\0\0hi"),
                },
                OutputTensor {
                    name: "LOGITS".into(),
                    datatype: DataType::Int32,
                    shape: vec![2],
                    data: Bytes::from_static(&[1, 0, 0, 0, 2, 0, 0, 0]),
                },
            ],
        };
        let json = encode_generate_response(&response).unwrap();
        assert_eq!(
            String::from_utf8(json).unwrap(),
            r#"{"LOGITS":[1,2],"TEXT":"hi","done":true,"model_name":"llm","model_version":"1"}"#
        );
    }
}
