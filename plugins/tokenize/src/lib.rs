//! Request adapter: texts become the tensors a transformer takes (`input_ids`,
//! `attention_mask`, `token_type_ids`), tokenized as Hugging Face's `tokenizers` does it with
//! the model's own `tokenizer.json`: the python preprocessing step of Triton's BERT and LLM
//! ensembles, without a python process. The work is `trident-text` (`text/` in the repository),
//! the same code trident offers every guest as host text primitives.
//!
//! Body: `text/plain` (one text), or JSON: a string, a list of strings, or an object whose
//! `inputs` (Hugging Face), `text` or `instances` field holds them (`field` names another).
//! Texts may come in pairs as Hugging Face's clients send them for NLI models and
//! cross-encoders (`{"inputs": {"text": ..., "text_pair": ...}}`, or a list of such objects):
//! each pair is one row with the tokenizer's pair template (`[CLS] a [SEP] b [SEP]`, type ids 0
//! then 1). A JSON body's `parameters` may set `truncation` (`true`, `false`,
//! `"longest_first"`, `"only_first"`, `"only_second"`, `"do_not_truncate"`) and `max_length`
//! (at most the setting) for its own rows. Where `tokenize_in` is `host`, pairs and such
//! parameters go to the host's `text.tokenize-pairs`.
//!
//! Asset `tokenizer` (required): the model's `tokenizer.json`.
//!
//! Config (manifest `config` table; every key optional): `input_ids`, `attention_mask`,
//! `token_type_ids` (the inputs' names, defaults those; an empty name leaves that tensor out,
//! as a DistilBERT or RoBERTa takes no `token_type_ids`), `outputs` (comma-separated outputs to
//! ask for; default all), `field`, and the keys of `trident_text::settings`: `max_length`
//! (default 512), `padding` (`max_length`, default, or `longest`), `truncation` (default
//! `true`; `false` refuses a longer text with 400), `add_special_tokens` (default `true`),
//! `datatype` (`INT64`, default, or `INT32`), `batch` (`true`: a batch dimension first),
//! `pad_token`, `max_text_bytes` (default 262144), `max_texts` (default 64); and `tokenize_in`:
//! `host` (default) has trident tokenize natively through its text primitives (`text.tokenize`,
//! the same code, the tokenizer parsed once by the host and kept for the plugin), `sandbox` here,
//! in the plugin's own memory and time limits, for a platform that wants the tokenizer isolated
//! too. Either way the tokenizer is also read here, once, to check it and the model.
//!
//! The tokenizer is read and configured once, in `check-config`; trident keeps the state that
//! leaves, so no call parses it again. Before a model is served, `check-model` refuses one whose
//! inputs do not match, naming the key to set: an input it lacks or takes besides, another
//! datatype, or a sequence length other than `max_length` (`[-1, 128]` for a batching model
//! with `max_length = 128`; a model whose length is `-1` takes any).

wit_bindgen::generate!({ world: "checked-request-adapter-plugin", path: "../../wit" });

use std::sync::OnceLock;

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::model_check::{Guest as ModelCheck, ModelInfo};
use exports::trident::plugin::request_adapter::{Adapted, Guest, TensorRequest};
use trident::plugin::assets;
use trident::plugin::host::config;
use trident::plugin::text::{TextPair, tokenize, tokenize_pairs};
use trident::plugin::types::{Datatype, Invocation, PluginError, Tensor};
use trident_text::encode::{encode_request_within, tensor_bytes};
use trident_text::settings::{Datatype as Element, Padding};
use trident_text::{Encode, Error, Limits, Tokenizer};

struct Plugin;

/// What the configuration says, read once, with the tokenizer it configures.
struct Settings {
    /// The names of `input_ids`, `attention_mask` and `token_type_ids`; `None`: left out.
    names: [Option<String>; 3],
    outputs: Vec<String>,
    field: Option<String>,
    limits: Limits,
    tokenizer: Tokenizer,
    /// The text keys as given, for the host's primitives; `None`: the work is done here.
    host: Option<Vec<(String, String)>>,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// The tensors this plugin makes, in the order of [`Settings::names`].
const TENSORS: [&str; 3] = ["input_ids", "attention_mask", "token_type_ids"];

fn settings() -> Result<Settings, String> {
    let encode = Encode::from_config(config)?;
    let json = assets::get("tokenizer")
        .ok_or("the manifest gives it no asset 'tokenizer' (the model's tokenizer.json)")?;
    let tokenizer =
        Tokenizer::from_json(&json, &encode).map_err(|e| format!("asset 'tokenizer': {e}"))?;
    let names = TENSORS.map(|key| match config(key) {
        None => Some(key.to_owned()),
        Some(name) if name.trim().is_empty() => None,
        Some(name) => Some(name.trim().to_owned()),
    });
    if names[0].is_none() {
        return Err("input_ids may not be left out".into());
    }
    Ok(Settings {
        names,
        outputs: config("outputs")
            .map(|list| {
                list.split(',')
                    .map(|o| o.trim().to_owned())
                    .filter(|o| !o.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        field: config("field"),
        limits: Limits::from_config(config)?,
        tokenizer,
        host: match config("tokenize_in").as_deref() {
            None | Some("host") => Some(
                trident_text::settings::KEYS
                    .iter()
                    .filter_map(|key| Some((key.to_string(), config(key)?)))
                    .collect(),
            ),
            Some("sandbox") => None,
            Some(other) => return Err(format!("tokenize_in = '{other}': give host or sandbox")),
        },
    })
}

fn plugin_error(error: Error) -> PluginError {
    match error {
        Error::BadRequest(message) => PluginError::BadRequest(message),
        Error::Unsupported(message) => PluginError::UnsupportedMediaType(message),
    }
}

/// The tensors' datatype in the WIT's terms.
fn datatype(settings: &Settings) -> Datatype {
    match settings.tokenizer.settings().datatype {
        Element::Int64 => Datatype::Int64,
        Element::Int32 => Datatype::Int32,
    }
}

/// A datatype as Triton names it.
fn triton_name(datatype: Datatype) -> &'static str {
    match datatype {
        Datatype::Boolean => "BOOL",
        Datatype::Uint8 => "UINT8",
        Datatype::Uint16 => "UINT16",
        Datatype::Uint32 => "UINT32",
        Datatype::Uint64 => "UINT64",
        Datatype::Int8 => "INT8",
        Datatype::Int16 => "INT16",
        Datatype::Int32 => "INT32",
        Datatype::Int64 => "INT64",
        Datatype::Fp16 => "FP16",
        Datatype::Fp32 => "FP32",
        Datatype::Fp64 => "FP64",
        Datatype::Bytes => "BYTES",
        Datatype::Bf16 => "BF16",
    }
}

impl Guest for Plugin {
    fn adapt_request(invocation: Invocation) -> Result<Adapted, PluginError> {
        let settings = SETTINGS
            .get()
            .ok_or_else(|| PluginError::Internal("tokenize was not initialised".into()))?;
        let request = trident_text::body::request(
            invocation.content_type.as_deref(),
            &invocation.body,
            settings.field.as_deref(),
            &settings.limits,
        )
        .map_err(plugin_error)?;
        let tensors: Vec<Tensor> = match &settings.host {
            Some(keys) if request.is_plain() => {
                let texts: Vec<String> = request.inputs.into_iter().map(|i| i.text).collect();
                tokenize("tokenizer", &texts, keys)?
            }
            Some(keys) => {
                let rows: Vec<TextPair> = request
                    .inputs
                    .into_iter()
                    .map(|input| TextPair {
                        text: input.text,
                        pair: input.pair,
                    })
                    .collect();
                let parameters = request.parameters;
                tokenize_pairs(
                    "tokenizer",
                    &rows,
                    keys,
                    parameters.truncation.map(|t| t.name()),
                    parameters
                        .max_length
                        .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                )?
            }
            None => {
                let encoded = encode_request_within(
                    &settings.tokenizer,
                    &request.inputs,
                    &request.parameters,
                    &settings.limits,
                    &|| false,
                )
                .map_err(plugin_error)?
                .ok_or_else(|| PluginError::Internal("never out of time".into()))?;
                let shape = encoded.shape(settings.tokenizer.settings().batch);
                let element = settings.tokenizer.settings().datatype;
                let values = [
                    &encoded.input_ids,
                    &encoded.attention_mask,
                    &encoded.token_type_ids,
                ];
                values
                    .into_iter()
                    .map(|values| Tensor {
                        name: String::new(),
                        datatype: datatype(settings),
                        shape: shape.clone(),
                        data: tensor_bytes(values, element),
                    })
                    .collect()
            }
        };
        // The three tensors, in the order of `TENSORS`, under the names the model takes.
        let inputs = settings
            .names
            .iter()
            .zip(tensors)
            .filter_map(|(name, tensor)| {
                Some(Tensor {
                    name: name.clone()?,
                    ..tensor
                })
            })
            .collect();
        Ok(Adapted::Tensors(TensorRequest {
            inputs,
            outputs: settings.outputs.clone(),
        }))
    }
}

impl ModelCheck for Plugin {
    fn check_model(model: ModelInfo) -> Result<(), String> {
        let settings = SETTINGS.get().ok_or("tokenize was not initialised")?;
        let encode = settings.tokenizer.settings();
        let length = match encode.padding {
            Padding::MaxLength => i64::try_from(encode.max_length).unwrap_or(i64::MAX),
            Padding::Longest => -1,
        };
        let expected: Vec<i64> = if encode.batch {
            vec![-1, length]
        } else {
            vec![length]
        };
        let names: Vec<&str> = model.inputs.iter().map(|t| t.name.as_str()).collect();
        for (key, name) in TENSORS.iter().zip(&settings.names) {
            let Some(name) = name else { continue };
            let input = model.inputs.iter().find(|t| &t.name == name).ok_or_else(|| {
                format!(
                    "it has no input '{name}' (its inputs: {}); set the plugin's `{key}` to its name, or to \"\" to leave it out",
                    names.join(", ")
                )
            })?;
            if input.datatype != datatype(settings) {
                return Err(format!(
                    "input '{name}' is {}, and this plugin makes {}; set the plugin's `datatype`",
                    triton_name(input.datatype),
                    encode.datatype.name()
                ));
            }
            let fits = input.shape.len() == expected.len()
                && input
                    .shape
                    .iter()
                    .zip(&expected)
                    .all(|(have, want)| *have == -1 || *want == -1 || have == want);
            if !fits {
                return Err(format!(
                    "input '{name}' is shaped {:?}, and this plugin makes {expected:?} (max_length, padding and batch set it)",
                    input.shape
                ));
            }
        }
        if let Some(other) = model
            .inputs
            .iter()
            .find(|t| !settings.names.iter().flatten().any(|n| *n == t.name))
        {
            return Err(format!(
                "it takes input '{}', which this plugin does not make (it makes {})",
                other.name,
                settings
                    .names
                    .iter()
                    .flatten()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(())
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
