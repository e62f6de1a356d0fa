//! {{name}}: a trident request adapter. A body of numbers separated by commas or white space
//! becomes one FP32 tensor of shape `[1, n]`, named by the `input` config (default `INPUT0`).
//! Change `adapt_request` to read your payload; see trident's book, docs/plugins/writing.md.

wit_bindgen::generate!({ world: "request-adapter-plugin", path: "wit" });

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::request_adapter::{Adapted, Guest, TensorRequest};
use trident::plugin::host::config;
use trident::plugin::types::{Datatype, Invocation, PluginError, Tensor};

struct Plugin;

impl Guest for Plugin {
    fn adapt_request(invocation: Invocation) -> Result<Adapted, PluginError> {
        let text = std::str::from_utf8(&invocation.body)
            .map_err(|_| PluginError::BadRequest("the body is not UTF-8".into()))?;
        let values = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|field| !field.is_empty())
            .map(|field| {
                field
                    .parse::<f32>()
                    .map_err(|_| PluginError::BadRequest(format!("'{field}' is not a number")))
            })
            .collect::<Result<Vec<f32>, _>>()?;
        if values.is_empty() {
            return Err(PluginError::BadRequest("the body has no numbers".into()));
        }
        let tensor = Tensor {
            name: config("input").unwrap_or_else(|| "INPUT0".into()),
            datatype: Datatype::Fp32,
            shape: vec![1, values.len() as i64],
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        Ok(Adapted::Tensors(TensorRequest {
            inputs: vec![tensor],
            outputs: Vec::new(),
        }))
    }
}

impl Lifecycle for Plugin {
    /// Called once when trident loads the plugin: refuse a configuration you cannot work with.
    /// Read every config key here: trident refuses a key check-config did not read (a
    /// misspelling), so that it fails the load instead of leaving a default serving.
    fn check_config() -> Result<(), String> {
        let _ = config("input");
        Ok(())
    }
}

export!(Plugin);
