//! The text side of a generate endpoint (`generate` and `generate_stream`), for a model that
//! takes token ids and gives token ids, as TensorRT-LLM's engines do: the `preprocessing` and
//! `postprocessing` python models of Triton's LLM ensembles, without a python process. On the
//! way in the prompt is tokenized; on the way out the ids become text, whole for `generate`,
//! and for `generate_stream` event by event, each event carrying exactly the text its ids add
//! (a character whose bytes span several ids is sent once it is whole; the texts of all events
//! are the text of the whole sequence). The work is `trident-text` (`text/` in the repository).
//!
//! Asset `tokenizer` (required): the model's `tokenizer.json`.
//!
//! Config (manifest `config` table; every key optional):
//! - `prompt` (default `text_input`): the body's field holding the prompt; the other fields go
//!   to the model as they are (`max_tokens`, sampling parameters);
//! - `input_ids` (default `input_ids`): the model input the prompt's ids go to;
//! - `output_ids` (default `output_ids`): the model output holding the ids it generates;
//! - `text_output` (default `text_output`): the field the text is answered in (Triton's
//!   generate name);
//! - `skip_special_tokens` (default `true`): the text without the tokenizer's special tokens;
//! - `add_special_tokens` (default `true`): the prompt with them (`<s>`, `<|begin_of_text|>`);
//! - `max_length` (default 4096): the most tokens a prompt may have (a longer one is 400);
//! - `max_text_bytes` (default 262144): the most bytes a prompt may have.
//!
//! An answer is the model's response with `output_ids` replaced by `text_output`; a stream
//! event likewise, and an event whose ids add no text yet is not sent. Between the events of a
//! stream the decoder's state (the ids of the last text sent, and those not yet text) is kept
//! in the stream's state (`trident:stream-state`), at most a few dozen ids.

wit_bindgen::generate!({ world: "generate-adapter-plugin", path: "../../wit/stream-state", generate_all });

use std::sync::OnceLock;

use exports::trident::plugin::generate_request_adapter::{
    GenerateInputs, GenerateRequest, Guest as RequestAdapter,
};
use exports::trident::plugin::generate_response_adapter::Guest as ResponseAdapter;
use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::stream_adapter::{Guest as StreamAdapter, StreamPosition};
use serde_json::{Map, Value};
use trident::plugin::assets;
use trident::plugin::host::config;
use trident::plugin::types::{Invocation, PluginError, Reply};
use trident::stream_state::state;
use trident_text::decode::{StreamDecoder, decode, output_ids};
use trident_text::encode::encode;
use trident_text::settings::Padding;
use trident_text::{Encode, Error, Limits, Tokenizer};

struct Plugin;

/// What the configuration says, read once, with the tokenizer.
struct Settings {
    prompt: String,
    input_ids: String,
    output_ids: String,
    text_output: String,
    skip_special: bool,
    limits: Limits,
    tokenizer: Tokenizer,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

fn boolean(key: &str, default: bool) -> Result<bool, String> {
    match config(key).as_deref().map(str::trim) {
        None => Ok(default),
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        Some(other) => Err(format!("{key} = '{other}': give true or false")),
    }
}

fn settings() -> Result<Settings, String> {
    let mut encode = Encode::from_config(|key| match key {
        // A prompt is one text, never padded nor cut: a longer one is refused.
        "padding" | "truncation" | "batch" | "datatype" | "pad_token" => None,
        "max_length" => config(key).or_else(|| Some("4096".into())),
        _ => config(key),
    })?;
    encode.padding = Padding::Longest;
    encode.truncation = false;
    let json = assets::get("tokenizer")
        .ok_or("the manifest gives it no asset 'tokenizer' (the model's tokenizer.json)")?;
    let tokenizer =
        Tokenizer::from_json(&json, &encode).map_err(|e| format!("asset 'tokenizer': {e}"))?;
    let name = |key: &str, default: &str| {
        config(key).map_or_else(|| default.to_owned(), |v| v.trim().to_owned())
    };
    Ok(Settings {
        prompt: name("prompt", "text_input"),
        input_ids: name("input_ids", "input_ids"),
        output_ids: name("output_ids", "output_ids"),
        text_output: name("text_output", "text_output"),
        skip_special: boolean("skip_special_tokens", true)?,
        limits: Limits {
            max_texts: 1,
            ..Limits::from_config(config)?
        },
        tokenizer,
    })
}

fn get() -> Result<&'static Settings, PluginError> {
    SETTINGS
        .get()
        .ok_or_else(|| PluginError::Internal("detokenize was not initialised".into()))
}

fn plugin_error(error: Error) -> PluginError {
    match error {
        Error::BadRequest(message) => PluginError::BadRequest(message),
        Error::Unsupported(message) => PluginError::UnsupportedMediaType(message),
    }
}

/// `bytes` as a JSON object, or a 400 (`what` names it).
fn object(bytes: &[u8], what: &str) -> Result<Map<String, Value>, PluginError> {
    match serde_json::from_slice(bytes) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(PluginError::BadRequest(format!(
            "{what} is not a JSON object"
        ))),
        Err(error) => Err(PluginError::BadRequest(format!(
            "{what} is not JSON: {error}"
        ))),
    }
}

/// The ids a model response's `output_ids` holds (a number or a list of them), taken out of
/// it; the model's answer is not the client's fault, so a wrong one is a 500.
fn ids(settings: &Settings, response: &mut Map<String, Value>) -> Result<Vec<u32>, PluginError> {
    let ids = output_ids(response, &settings.output_ids).map_err(PluginError::Internal)?;
    response.remove(&settings.output_ids);
    Ok(ids)
}

/// `response` with its text under `text_output`, as JSON.
fn with_text(settings: &Settings, mut response: Map<String, Value>, text: String) -> String {
    response.insert(settings.text_output.clone(), Value::String(text));
    Value::Object(response).to_string()
}

impl RequestAdapter for Plugin {
    fn adapt_generate_request(invocation: Invocation) -> Result<GenerateRequest, PluginError> {
        let settings = get()?;
        let mut body = object(&invocation.body, "the body")?;
        let prompt = match body.remove(&settings.prompt) {
            Some(Value::String(prompt)) => prompt,
            Some(_) => {
                return Err(PluginError::BadRequest(format!(
                    "'{}' is not a string",
                    settings.prompt
                )));
            }
            None => {
                return Err(PluginError::BadRequest(format!(
                    "the body has no field '{}' (the prompt)",
                    settings.prompt
                )));
            }
        };
        let encoded =
            encode(&settings.tokenizer, &[prompt], &settings.limits).map_err(plugin_error)?;
        let ids: Vec<Value> = encoded
            .input_ids
            .iter()
            .map(|id| Value::from(*id))
            .collect();
        body.insert(settings.input_ids.clone(), Value::Array(ids));
        Ok(GenerateRequest {
            inputs: GenerateInputs::Json(Value::Object(body).to_string().into_bytes()),
            stream: None,
        })
    }
}

impl ResponseAdapter for Plugin {
    fn adapt_generate_response(
        _invocation: Invocation,
        responses: Vec<Vec<u8>>,
    ) -> Result<Reply, PluginError> {
        let settings = get()?;
        let mut all = Vec::new();
        let mut first = None;
        for response in &responses {
            let mut response = object(response, "the model's response").map_err(|e| match e {
                PluginError::BadRequest(m) => PluginError::Internal(m),
                other => other,
            })?;
            all.extend(ids(settings, &mut response)?);
            first.get_or_insert(response);
        }
        let text = decode(&settings.tokenizer, &all, settings.skip_special)
            .map_err(|e| PluginError::Internal(e.to_string()))?;
        Ok(Reply {
            status: 200,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body: with_text(settings, first.unwrap_or_default(), text).into_bytes(),
        })
    }
}

/// The stream's decoder as its previous calls left it.
fn decoder() -> Result<StreamDecoder, PluginError> {
    StreamDecoder::resume(state::get().as_deref()).map_err(PluginError::Internal)
}

impl StreamAdapter for Plugin {
    fn adapt_event(
        _invocation: Invocation,
        _position: StreamPosition,
        event: Vec<u8>,
    ) -> Result<Vec<String>, PluginError> {
        let settings = get()?;
        let mut response = object(&event, "the model's event").map_err(|e| match e {
            PluginError::BadRequest(m) => PluginError::Internal(m),
            other => other,
        })?;
        let new = ids(settings, &mut response)?;
        let mut decoder = decoder()?;
        let text = decoder
            .step(&settings.tokenizer, &new, settings.skip_special)
            .map_err(|e| PluginError::Internal(e.to_string()))?;
        state::set(&decoder.to_bytes()).map_err(PluginError::Internal)?;
        if text.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![with_text(settings, response, text)])
    }

    fn end_stream(
        _invocation: Invocation,
        _position: StreamPosition,
    ) -> Result<Vec<String>, PluginError> {
        let settings = get()?;
        let mut decoder = decoder()?;
        let text = decoder
            .finish(&settings.tokenizer, settings.skip_special)
            .map_err(|e| PluginError::Internal(e.to_string()))?;
        if text.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![with_text(settings, Map::new(), text)])
    }
}

impl Lifecycle for Plugin {
    fn check_config() -> Result<(), String> {
        if SETTINGS.get().is_none() {
            let _ = SETTINGS.set(settings()?);
        }
        Ok(())
    }
}

export!(Plugin);
