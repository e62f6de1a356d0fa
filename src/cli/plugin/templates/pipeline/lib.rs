//! {{name}}: a trident pipeline, a plugin that answers a request whole by calling the
//! endpoint's models. The body, a JSON array of numbers, goes to the model named by the `model`
//! config (default `affine`, which the manifest entry's `models` must name) as `INPUT0`, FP32
//! `[1, n]`; the reply is the model's FP32 outputs as JSON, `{"OUTPUT0": [...]}`. A model's
//! refusal is passed on with its status. Call more models, or one in a loop, from `handle`;
//! see trident's book, docs/plugins/pipelines.md.

wit_bindgen::generate!({ world: "pipeline-plugin", path: "wit", generate_all });

use exports::trident::models::pipeline::Guest;
use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use trident::models::models::{CallError, ModelRequest, infer};
use trident::plugin::host::config;
use trident::plugin::types::{Datatype, Invocation, PluginError, Reply, Tensor};

struct Plugin;

/// The body's numbers: a JSON array such as `[1, 2.5, -3]`.
fn numbers(body: &[u8]) -> Result<Vec<f32>, PluginError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| PluginError::BadRequest("the body is not UTF-8".into()))?;
    let inner = text
        .trim()
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .ok_or_else(|| PluginError::BadRequest("send a JSON array of numbers".into()))?;
    if inner.trim().is_empty() {
        return Err(PluginError::BadRequest("send a JSON array of numbers: it is empty".into()));
    }
    inner
        .split(',')
        .map(|n| {
            n.trim().parse::<f32>().ok().filter(|v| v.is_finite()).ok_or_else(|| {
                PluginError::BadRequest(format!(
                    "send a JSON array of numbers: '{}' is not one",
                    n.trim()
                ))
            })
        })
        .collect()
}

/// `text` as a JSON string.
fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn reply(status: u16, body: String) -> Reply {
    Reply { status, content_type: "application/json".into(), headers: Vec::new(), body: body.into_bytes() }
}

impl Guest for Plugin {
    fn handle(invocation: Invocation) -> Result<Reply, PluginError> {
        let values = numbers(&invocation.body)?;
        let model = config("model").unwrap_or_else(|| "affine".into());
        let input = Tensor {
            name: "INPUT0".into(),
            datatype: Datatype::Fp32,
            shape: vec![1, values.len() as i64],
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let request = ModelRequest { model: model.clone(), inputs: vec![input], outputs: Vec::new() };
        let response = match infer(&request) {
            Ok(response) => response,
            // The model's refusal, with the status the interface gives each kind.
            Err(error) => {
                let (status, message) = match error {
                    CallError::NotAllowed(m) => (403, m),
                    CallError::BadRequest(m) => (400, m),
                    CallError::Unavailable(m) => (503, m),
                    CallError::Failed(m) => (500, m),
                };
                return Ok(reply(status, format!("{{\"error\": {}}}", quoted(&format!("model '{model}': {message}")))));
            }
        };
        let outputs: Vec<String> = response
            .outputs
            .iter()
            .filter(|t| t.datatype == Datatype::Fp32)
            .map(|t| {
                let values: Vec<String> = t
                    .data
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]).to_string())
                    .collect();
                format!("{}: [{}]", quoted(&t.name), values.join(", "))
            })
            .collect();
        Ok(reply(200, format!("{{{}}}", outputs.join(", "))))
    }
}

impl Lifecycle for Plugin {
    // Called once when trident loads the plugin: return Err("why") to refuse the configuration.
    // Read every config key here: trident refuses a key check-config did not read.
    fn check_config() -> Result<(), String> {
        let _ = config("model");
        Ok(())
    }
}

export!(Plugin);
