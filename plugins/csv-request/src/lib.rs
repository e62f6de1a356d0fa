//! CSV request adapter: `text/csv` rows of numbers become one `[rows, columns]` tensor, handed to
//! the model as typed data (no JSON in between).
//!
//! Config (manifest `config` table): `input` (tensor name, default `INPUT0`), `datatype`
//! (`FP32` default, or `FP64`, `INT32`, `INT64`), `outputs` (comma-separated output names to
//! ask for; default all), `header` (`true` when the first line is a header to skip).

wit_bindgen::generate!({ world: "request-adapter-plugin", path: "../../wit" });

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::request_adapter::{Adapted, Guest, TensorRequest};
use trident::plugin::host::{Level, config, log};
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

/// Appends one CSV field to `out` as an element of `dtype`.
fn push(out: &mut Vec<u8>, dtype: Datatype, field: &str) -> Result<(), String> {
    let bad = || format!("'{field}' is not a valid {dtype:?} number");
    match dtype {
        Datatype::Fp32 => out.extend(field.parse::<f32>().map_err(|_| bad())?.to_le_bytes()),
        Datatype::Fp64 => out.extend(field.parse::<f64>().map_err(|_| bad())?.to_le_bytes()),
        Datatype::Int32 => out.extend(field.parse::<i32>().map_err(|_| bad())?.to_le_bytes()),
        Datatype::Int64 => out.extend(field.parse::<i64>().map_err(|_| bad())?.to_le_bytes()),
        _ => return Err(format!("{dtype:?} is not supported")),
    }
    Ok(())
}

impl Guest for Plugin {
    fn adapt_request(invocation: Invocation) -> Result<Adapted, PluginError> {
        let content_type = invocation.content_type.as_deref().unwrap_or("text/csv");
        if !content_type.starts_with("text/csv") {
            return Err(PluginError::UnsupportedMediaType(format!(
                "this endpoint takes text/csv, not {content_type}"
            )));
        }
        let dtype = datatype().map_err(PluginError::Internal)?;
        let text = std::str::from_utf8(&invocation.body)
            .map_err(|_| PluginError::BadRequest("the CSV body is not UTF-8".into()))?;
        let skip = usize::from(config("header").as_deref() == Some("true"));
        let mut data = Vec::with_capacity(invocation.body.len() * 2);
        let (mut rows, mut columns) = (0i64, None);
        for (number, line) in text.lines().enumerate().skip(skip) {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let mut count = 0i64;
            for field in line.split(',') {
                push(&mut data, dtype, field.trim())
                    .map_err(|e| PluginError::BadRequest(format!("line {}: {e}", number + 1)))?;
                count += 1;
            }
            match columns {
                None => columns = Some(count),
                Some(expected) if expected != count => {
                    return Err(PluginError::BadRequest(format!(
                        "line {} has {count} fields, the first row has {expected}",
                        number + 1
                    )));
                }
                Some(_) => {}
            }
            rows += 1;
        }
        let Some(columns) = columns else {
            return Err(PluginError::BadRequest("the CSV body has no rows".into()));
        };
        log(
            Level::Debug,
            &format!("{rows}x{columns} CSV for {}", invocation.model),
        );
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
                shape: vec![rows, columns],
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
        for key in ["input", "outputs", "header"] {
            let _ = config(key);
        }
        datatype().map(|_| ())
    }
}

export!(Plugin);
