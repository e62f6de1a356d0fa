//! A pipeline (`trident:models`) over the example `affine` model (`OUTPUT0 = 2 * INPUT0 + 1`),
//! behaving as its `mode` config says:
//!
//! - `chain` (the default): the body is a JSON array of numbers; they go through the model named
//!   by `model` `times` times (each call's `OUTPUT0` the next call's `INPUT0`), and the reply is
//!   `{"values": [...], "calls": times}`. A model's refusal or failure is passed on with its
//!   status (400, 403, 503, 500);
//! - `loop`: calls the model until something stops it;
//! - `forbidden`: calls the model named by `other` (one its entry does not name);
//! - `huge`: sends a tensor of `mb` MiB (default 8);
//! - `trap`: calls the model once, then panics;
//! - `wrong-dtype`: sends `INPUT0` as INT32, which the model refuses.

wit_bindgen::generate!({ world: "pipeline-plugin", path: "../../../wit/models", generate_all });

use exports::trident::models::pipeline::Guest as Pipeline;
use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use trident::models::models::{CallError, ModelRequest, infer};
use trident::plugin::host::config;
use trident::plugin::types::{Datatype, Invocation, PluginError, Reply, Tensor};

struct Plugin;

fn setting(key: &str, default: &str) -> String {
    config(key).unwrap_or_else(|| default.to_owned())
}

fn input(values: &[f32], datatype: Datatype) -> Tensor {
    Tensor {
        name: "INPUT0".into(),
        datatype,
        shape: vec![1, values.len() as i64],
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// One call of `model` on `values`: its `OUTPUT0`.
fn call(model: &str, tensor: Tensor) -> Result<Vec<f32>, CallError> {
    let response = infer(&ModelRequest {
        model: model.to_owned(),
        inputs: vec![tensor],
        outputs: vec!["OUTPUT0".into()],
    })?;
    let output = response
        .outputs
        .into_iter()
        .find(|t| t.name == "OUTPUT0")
        .ok_or_else(|| CallError::Failed("no OUTPUT0".into()))?;
    Ok(output
        .data
        .as_chunks::<4>()
        .0
        .iter()
        .map(|b| f32::from_le_bytes(*b))
        .collect())
}

fn reply(status: u16, body: String) -> Reply {
    Reply {
        status,
        content_type: "application/json".into(),
        headers: Vec::new(),
        body: body.into_bytes(),
    }
}

/// A model's refusal as the reply the client gets: its status and message.
fn refused(error: CallError) -> Reply {
    let (status, message) = match error {
        CallError::NotAllowed(m) => (403, m),
        CallError::BadRequest(m) => (400, m),
        CallError::Unavailable(m) => (503, m),
        CallError::Failed(m) => (500, m),
    };
    let escaped: String = message
        .chars()
        .filter(|c| *c != '"' && *c != '\\')
        .collect();
    reply(status, format!("{{\"error\": \"{escaped}\"}}"))
}

fn numbers(body: &[u8]) -> Result<Vec<f32>, PluginError> {
    let text =
        std::str::from_utf8(body).map_err(|_| PluginError::BadRequest("not UTF-8".into()))?;
    let inner = text
        .trim()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(|| PluginError::BadRequest("send a JSON array of numbers".into()))?;
    inner
        .split(',')
        .map(|n| {
            n.trim()
                .parse::<f32>()
                .map_err(|_| PluginError::BadRequest(format!("'{}' is not a number", n.trim())))
        })
        .collect()
}

impl Lifecycle for Plugin {
    fn check_config() -> Result<(), String> {
        for key in ["mode", "model", "times", "other", "mb"] {
            let _ = config(key);
        }
        Ok(())
    }
}

impl Pipeline for Plugin {
    fn handle(invocation: Invocation) -> Result<Reply, PluginError> {
        let model = setting("model", "affine");
        let mode = setting("mode", "chain");
        match mode.as_str() {
            "loop" => loop {
                if let Err(error) = call(&model, input(&[1.0, 2.0], Datatype::Fp32)) {
                    return Ok(refused(error));
                }
            },
            "forbidden" => {
                let other = setting("other", "secret");
                Ok(match call(&other, input(&[1.0], Datatype::Fp32)) {
                    Ok(values) => reply(200, format!("{values:?}")),
                    Err(error) => refused(error),
                })
            }
            "huge" => {
                let mb: usize = setting("mb", "8").parse().unwrap_or(8);
                let values = vec![0.5f32; (mb << 20) / 4];
                Ok(match call(&model, input(&values, Datatype::Fp32)) {
                    Ok(values) => reply(200, format!("{{\"count\": {}}}", values.len())),
                    Err(error) => refused(error),
                })
            }
            "trap" => {
                let _ = call(&model, input(&[1.0], Datatype::Fp32));
                panic!("a pipeline that fails midway");
            }
            "wrong-dtype" => Ok(match call(&model, input(&[1.0], Datatype::Int32)) {
                Ok(values) => reply(200, format!("{values:?}")),
                Err(error) => refused(error),
            }),
            _ => {
                let times: u32 = setting("times", "2").parse().unwrap_or(2);
                let mut values = numbers(&invocation.body)?;
                for _ in 0..times {
                    values = match call(&model, input(&values, Datatype::Fp32)) {
                        Ok(values) => values,
                        Err(error) => return Ok(refused(error)),
                    };
                }
                let list: Vec<String> = values.iter().map(|v| format!("{v}")).collect();
                Ok(reply(
                    200,
                    format!("{{\"values\": [{}], \"calls\": {times}}}", list.join(", ")),
                ))
            }
        }
    }
}

export!(Plugin);
