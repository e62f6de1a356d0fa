//! {{name}}: a trident request adapter for text. The body (UTF-8 text) becomes the tensors a
//! transformer takes, `input_ids`, `attention_mask` and `token_type_ids`, made by trident's native
//! text primitives (`text::tokenize`) with the model's `tokenizer.json` (the asset `tokenizer`)
//! and the tokenize plugin's configuration keys (defaults: 512 tokens, padded and truncated,
//! INT64, a batch dimension). Add your own steps around it; see trident's book, docs/plugins/writing.md.

wit_bindgen::generate!({ world: "request-adapter-plugin", path: "wit" });

use std::sync::OnceLock;

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::request_adapter::{Adapted, Guest, TensorRequest};
use trident::plugin::host::config;
use trident::plugin::text::tokenize;
use trident::plugin::types::{Invocation, PluginError};

/// The configuration keys handed to `tokenize` (see docs/plugins/images-and-text.md, "Text in, text out").
const KEYS: [&str; 9] = [
    "max_length", "padding", "truncation", "add_special_tokens", "datatype", "batch", "pad_token",
    "max_text_bytes", "max_texts",
];

/// The settings, read once in `check_config`: every call starts from them.
static SETTINGS: OnceLock<Vec<(String, String)>> = OnceLock::new();

struct Plugin;

impl Guest for Plugin {
    fn adapt_request(invocation: Invocation) -> Result<Adapted, PluginError> {
        let settings = SETTINGS.get().ok_or_else(|| PluginError::Internal("not initialised".into()))?;
        let text = String::from_utf8(invocation.body)
            .map_err(|e| PluginError::BadRequest(format!("the body is not UTF-8: {e}")))?;
        // A text too long raises PluginError::BadRequest, which answers the request.
        let tensors = tokenize("tokenizer", &[text], settings)?;
        Ok(Adapted::Tensors(TensorRequest { inputs: tensors, outputs: Vec::new() }))
    }
}

impl Lifecycle for Plugin {
    // Called once when trident loads the plugin: return Err("why") to refuse the configuration.
    fn check_config() -> Result<(), String> {
        let settings = KEYS.iter().filter_map(|key| Some((key.to_string(), config(key)?))).collect();
        let _ = SETTINGS.set(settings);
        Ok(())
    }
}

export!(Plugin);
