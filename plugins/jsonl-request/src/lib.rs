//! JSON request adapter for row-oriented payloads: `application/jsonlines` (one JSON array of
//! numbers per line) or `application/json` with `{"instances": [[...], ...]}` (TensorFlow
//! Serving's row format) become one `[rows, columns]` tensor.
//!
//! Config: `input` (default `INPUT0`), `datatype` (`FP32` default, `FP64`, `INT32`, `INT64`),
//! `outputs` (comma-separated; default all).

wit_bindgen::generate!({ world: "request-adapter-plugin", path: "../../wit" });

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::request_adapter::{Adapted, Guest, TensorRequest};
use serde_json::Value;
use trident::plugin::host::config;
use trident::plugin::types::{Datatype, Invocation, PluginError, Tensor};

struct Plugin;

fn datatype() -> Result<Datatype, String> {
    match config("datatype").as_deref().unwrap_or("FP32") {
        "FP32" => Ok(Datatype::Fp32),
        "FP64" => Ok(Datatype::Fp64),
        "INT32" => Ok(Datatype::Int32),
        "INT64" => Ok(Datatype::Int64),
        other => Err(format!(
            "datatype '{other}' is not supported (FP32, FP64, INT32, INT64)"
        )),
    }
}

fn push(out: &mut Vec<u8>, dtype: Datatype, value: &Value) -> Result<(), String> {
    let bad = || format!("{value} is not a valid {dtype:?} number");
    match dtype {
        Datatype::Fp32 => out.extend((value.as_f64().ok_or_else(bad)? as f32).to_le_bytes()),
        Datatype::Fp64 => out.extend(value.as_f64().ok_or_else(bad)?.to_le_bytes()),
        Datatype::Int32 => {
            let v = value
                .as_i64()
                .and_then(|v| i32::try_from(v).ok())
                .ok_or_else(bad)?;
            out.extend(v.to_le_bytes())
        }
        Datatype::Int64 => out.extend(value.as_i64().ok_or_else(bad)?.to_le_bytes()),
        _ => return Err(format!("{dtype:?} is not supported")),
    }
    Ok(())
}

/// The rows of the payload, each a list of values.
fn rows(content_type: &str, body: &[u8]) -> Result<Vec<Value>, PluginError> {
    let bad = |e: serde_json::Error| PluginError::BadRequest(format!("invalid JSON: {e}"));
    if content_type.starts_with("application/jsonlines")
        || content_type.starts_with("application/jsonl")
    {
        let text = std::str::from_utf8(body)
            .map_err(|_| PluginError::BadRequest("body is not UTF-8".into()))?;
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(bad))
            .collect()
    } else if content_type.starts_with("application/json") {
        match serde_json::from_slice::<Value>(body).map_err(bad)? {
            Value::Object(mut object) => match object.remove("instances") {
                Some(Value::Array(rows)) => Ok(rows),
                _ => Err(PluginError::BadRequest(
                    "expected {\"instances\": [...]}".into(),
                )),
            },
            _ => Err(PluginError::BadRequest(
                "expected {\"instances\": [...]}".into(),
            )),
        }
    } else {
        Err(PluginError::UnsupportedMediaType(format!(
            "this endpoint takes application/jsonlines or application/json, not {content_type}"
        )))
    }
}

impl Guest for Plugin {
    fn adapt_request(invocation: Invocation) -> Result<Adapted, PluginError> {
        let dtype = datatype().map_err(PluginError::Internal)?;
        let content_type = invocation
            .content_type
            .as_deref()
            .unwrap_or("application/json");
        let rows = rows(content_type, &invocation.body)?;
        let mut data = Vec::new();
        let mut columns = None;
        for (index, row) in rows.iter().enumerate() {
            let values = match row {
                Value::Array(values) => values.as_slice(),
                scalar => std::slice::from_ref(scalar),
            };
            if *columns.get_or_insert(values.len()) != values.len() {
                return Err(PluginError::BadRequest(format!(
                    "row {index} has {} values",
                    values.len()
                )));
            }
            for value in values {
                push(&mut data, dtype, value)
                    .map_err(|e| PluginError::BadRequest(format!("row {index}: {e}")))?;
            }
        }
        let columns = columns.ok_or_else(|| PluginError::BadRequest("no rows".into()))?;
        let outputs = config("outputs")
            .map(|list| {
                list.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Adapted::Tensors(TensorRequest {
            inputs: vec![Tensor {
                name: config("input").unwrap_or_else(|| "INPUT0".into()),
                datatype: dtype,
                shape: vec![rows.len() as i64, columns as i64],
                data,
            }],
            outputs,
        }))
    }
}

impl Lifecycle for Plugin {
    fn check_config() -> Result<(), String> {
        // Every key this plugin reads is read here: trident refuses a key check-config did
        // not read, so a misspelled one fails the load instead of leaving its default serving.
        for key in ["input", "outputs"] {
            let _ = config(key);
        }
        datatype().map(|_| ())
    }
}

export!(Plugin);
