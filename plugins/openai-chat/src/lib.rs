//! OpenAI-compatible chat completions over Triton's generate extension (`trident:plugin@0.2.0`):
//! a `POST /invocations` with OpenAI's chat-completions body becomes the model's generate
//! inputs; its answer becomes a `chat.completion`, or, with `"stream": true`, a stream of
//! `chat.completion.chunk` events ending with `data: [DONE]`.
//!
//! Request: `model` (echoed back; default the served model's name), `messages` (`system`,
//! `user`, `assistant` or `tool`, with text `content`: a string or `[{"type": "text", "text":
//! ...}]`), `max_tokens` (or `max_completion_tokens`), `temperature` (0 to 2), `stream`.
//!
//! Config (manifest `config` table): the model's inputs `prompt_input` (`PROMPT`),
//! `max_tokens_input` (`MAX_TOKENS`), `temperature_input` (`TEMPERATURE`; empty: not sent) and
//! output `text_output` (`TEXT`, one piece of text per response); the prompt's `template` per
//! message (`{role}: {content}\n`) and `prompt_suffix` after the last one (`assistant:`);
//! `default_max_tokens` (256) and `max_max_tokens` (4096).
//!
//! With the model's `tokenizer.json` as the asset `tokenizer`, the plugin speaks token ids to
//! the model, as a TensorRT-LLM engine takes them: the prompt goes as its ids to
//! `prompt_ids_input` (`input_ids`; `prompt_input` is then not sent) and the model's ids
//! (`ids_output`, `output_ids`) become the text, decoded whole, or event by event in a stream,
//! each chunk carrying exactly the text its ids add (`trident-text`'s streamed decoder, its state
//! kept in the stream's state); `max_prompt_tokens` (4096) bounds the prompt. `usage` then
//! counts tokens; without a tokenizer it counts the prompt's whitespace-separated words and the
//! model's responses.

wit_bindgen::generate!({ world: "generate-adapter-plugin", path: "../../wit/stream-state", generate_all });

use std::sync::OnceLock;

use exports::trident::plugin::generate_request_adapter::{
    GenerateInputs, GenerateRequest, Guest as RequestGuest,
};
use exports::trident::plugin::generate_response_adapter::Guest as ResponseGuest;
use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::stream_adapter::{Guest as StreamGuest, StreamPosition};
use serde_json::{Map, Value, json};
use trident::plugin::assets;
use trident::plugin::host::config;
use trident::plugin::types::{Invocation, PluginError, Reply};
use trident::stream_state::state;
use trident_text::decode::{StreamDecoder, decode, output_ids};
use trident_text::settings::Padding;
use trident_text::{Encode, Limits, Tokenizer};

struct Plugin;

/// The model's tokenizer, when the manifest gives the plugin one; read once, in `check-config`.
static TOKENIZER: OnceLock<Option<Tokenizer>> = OnceLock::new();

fn tokenizer() -> Option<&'static Tokenizer> {
    TOKENIZER.get().and_then(Option::as_ref)
}

/// The tokenizer of the asset `tokenizer`, configured for one prompt at a time.
fn read_tokenizer() -> Result<Option<Tokenizer>, String> {
    let Some(json) = assets::get("tokenizer") else {
        return Ok(None);
    };
    let encode = Encode {
        max_length: usize::try_from(number_setting("max_prompt_tokens", 4096)?)
            .unwrap_or(usize::MAX),
        padding: Padding::Longest,
        truncation: false,
        ..Encode::default()
    };
    Tokenizer::from_json(&json, &encode)
        .map(Some)
        .map_err(|e| format!("asset 'tokenizer': {e}"))
}

/// The prompt's ids.
fn prompt_ids(tokenizer: &Tokenizer, prompt: &str) -> Result<Vec<u32>, PluginError> {
    let limits = Limits {
        max_texts: 1,
        ..Limits::default()
    };
    trident_text::encode::encode(tokenizer, &[prompt], &limits)
        .map(|encoded| encoded.input_ids)
        .map_err(|e| bad(e.to_string()))
}

/// The ids of one generate response (its `ids_output`: a number or a list of them).
fn response_ids(json: &[u8]) -> Result<Vec<u32>, PluginError> {
    let response: Map<String, Value> = serde_json::from_slice(json)
        .map_err(|e| PluginError::Internal(format!("a model response is not JSON: {e}")))?;
    output_ids(&response, &setting("ids_output", "output_ids")).map_err(PluginError::Internal)
}

fn setting(key: &str, default: &str) -> String {
    config(key).unwrap_or_else(|| default.to_owned())
}

fn number_setting(key: &str, default: u64) -> Result<u64, String> {
    match config(key) {
        None => Ok(default),
        Some(text) => text
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{key} must be a positive integer, not '{text}'")),
    }
}

fn bad(message: impl Into<String>) -> PluginError {
    PluginError::BadRequest(message.into())
}

/// What the plugin reads of a chat-completions body.
struct Chat {
    model: Option<String>,
    prompt: String,
    max_tokens: u64,
    temperature: Option<f64>,
    stream: bool,
}

/// A message's text: a string, or the text parts of a list of content parts.
fn content_text(content: &Value, index: usize) -> Result<String, PluginError> {
    match content {
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => parts
            .iter()
            .map(|part| match (part.get("type"), part.get("text")) {
                (Some(Value::String(kind)), Some(Value::String(text))) if kind == "text" => {
                    Ok(text.as_str())
                }
                _ => Err(bad(format!(
                    "messages[{index}].content: only text parts are supported"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|texts| texts.concat()),
        _ => Err(bad(format!(
            "messages[{index}].content must be a string or a list of text parts"
        ))),
    }
}

/// A member of the body; `null` counts as absent, as OpenAI's API reads it.
fn field<'a>(body: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    body.get(key).filter(|value| !value.is_null())
}

fn parse_chat(invocation: &Invocation) -> Result<Chat, PluginError> {
    if let Some(content_type) = &invocation.content_type
        && !content_type.starts_with("application/json")
    {
        return Err(PluginError::UnsupportedMediaType(format!(
            "chat completions are application/json, not {content_type}"
        )));
    }
    let body: Value = serde_json::from_slice(&invocation.body)
        .map_err(|e| bad(format!("the body is not JSON: {e}")))?;
    let Value::Object(body) = body else {
        return Err(bad("the body must be a JSON object"));
    };
    let messages = match field(&body, "messages") {
        Some(Value::Array(messages)) if !messages.is_empty() => messages,
        _ => return Err(bad("'messages' must be a non-empty list")),
    };
    let template = setting("template", "{role}: {content}\n");
    let mut prompt = String::new();
    for (index, message) in messages.iter().enumerate() {
        let role = match message.get("role") {
            Some(Value::String(role))
                if ["system", "user", "assistant", "tool", "developer"]
                    .contains(&role.as_str()) =>
            {
                role
            }
            _ => {
                return Err(bad(format!(
                    "messages[{index}].role must be system, developer, user, assistant or tool"
                )));
            }
        };
        let content = content_text(message.get("content").unwrap_or(&Value::Null), index)?;
        prompt.push_str(
            &template
                .replace("{role}", role)
                .replace("{content}", &content),
        );
    }
    prompt.push_str(&setting("prompt_suffix", "assistant:"));
    let limit = number_setting("max_max_tokens", 4096).map_err(PluginError::Internal)?;
    let max_tokens = match field(&body, "max_completion_tokens").or(field(&body, "max_tokens")) {
        None => number_setting("default_max_tokens", 256).map_err(PluginError::Internal)?,
        Some(value) => value
            .as_u64()
            .filter(|n| (1..=limit).contains(n))
            .ok_or_else(|| bad(format!("max_tokens must be an integer from 1 to {limit}")))?,
    };
    let temperature = match field(&body, "temperature") {
        None => None,
        Some(value) => Some(
            value
                .as_f64()
                .filter(|t| (0.0..=2.0).contains(t))
                .ok_or_else(|| bad("temperature must be a number from 0 to 2"))?,
        ),
    };
    let stream = match field(&body, "stream") {
        None => false,
        Some(Value::Bool(stream)) => *stream,
        Some(_) => return Err(bad("stream must be true or false")),
    };
    let model = match field(&body, "model") {
        None => None,
        Some(Value::String(model)) => Some(model.clone()),
        Some(_) => return Err(bad("model must be a string")),
    };
    Ok(Chat {
        model,
        prompt,
        max_tokens,
        temperature,
        stream,
    })
}

/// The `model` an answer names: the request's, else the served model's.
fn model_name(invocation: &Invocation) -> String {
    parse_chat(invocation)
        .ok()
        .and_then(|chat| chat.model)
        .unwrap_or_else(|| invocation.model.clone())
}

/// The text of one generate response (its `text_output`).
fn response_text(json: &[u8]) -> Result<String, PluginError> {
    let output = setting("text_output", "TEXT");
    let response: Map<String, Value> = serde_json::from_slice(json)
        .map_err(|e| PluginError::Internal(format!("a model response is not JSON: {e}")))?;
    match response.get(&output) {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(items)) => Ok(items
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .concat()),
        _ => Err(PluginError::Internal(format!(
            "the model's response has no text output '{output}'"
        ))),
    }
}

fn finish_reason(invocation: &Invocation, completion_tokens: u64) -> &'static str {
    let max_tokens = parse_chat(invocation).map_or(u64::MAX, |chat| chat.max_tokens);
    if completion_tokens >= max_tokens {
        "length"
    } else {
        "stop"
    }
}

fn json_reply(status: u16, body: &Value) -> Reply {
    Reply {
        status,
        content_type: "application/json".into(),
        headers: Vec::new(),
        body: body.to_string().into_bytes(),
    }
}

impl Lifecycle for Plugin {
    fn check_config() -> Result<(), String> {
        // Every key this plugin reads is read here: trident refuses a key check-config did
        // not read, so a misspelled one fails the load instead of leaving its default serving.
        for key in [
            "ids_output",
            "max_tokens_input",
            "prompt_ids_input",
            "prompt_suffix",
            "temperature_input",
            "template",
            "max_prompt_tokens",
        ] {
            let _ = config(key);
        }
        number_setting("default_max_tokens", 256)?;
        number_setting("max_max_tokens", 4096)?;
        if setting("prompt_input", "PROMPT").is_empty() || setting("text_output", "TEXT").is_empty()
        {
            return Err("prompt_input and text_output may not be empty".into());
        }
        if TOKENIZER.get().is_none() {
            let _ = TOKENIZER.set(read_tokenizer()?);
        }
        Ok(())
    }
}

impl RequestGuest for Plugin {
    fn adapt_generate_request(invocation: Invocation) -> Result<GenerateRequest, PluginError> {
        let chat = parse_chat(&invocation)?;
        let mut inputs = Map::new();
        match tokenizer() {
            Some(tokenizer) => {
                let ids = prompt_ids(tokenizer, &chat.prompt)?;
                inputs.insert(setting("prompt_ids_input", "input_ids"), json!(ids));
            }
            None => {
                inputs.insert(setting("prompt_input", "PROMPT"), json!(chat.prompt));
            }
        }
        let max_tokens_input = setting("max_tokens_input", "MAX_TOKENS");
        if !max_tokens_input.is_empty() {
            inputs.insert(max_tokens_input, json!(chat.max_tokens));
        }
        let temperature_input = setting("temperature_input", "TEMPERATURE");
        if let Some(temperature) = chat.temperature
            && !temperature_input.is_empty()
        {
            inputs.insert(temperature_input, json!(temperature));
        }
        Ok(GenerateRequest {
            inputs: GenerateInputs::Json(Value::Object(inputs).to_string().into_bytes()),
            stream: Some(chat.stream),
        })
    }
}

impl ResponseGuest for Plugin {
    fn adapt_generate_response(
        invocation: Invocation,
        responses: Vec<Vec<u8>>,
    ) -> Result<Reply, PluginError> {
        let chat = parse_chat(&invocation)?;
        let (content, completion_tokens, prompt_tokens) = match tokenizer() {
            Some(tokenizer) => {
                let mut ids = Vec::new();
                for json in &responses {
                    ids.extend(response_ids(json)?);
                }
                let content = decode(tokenizer, &ids, true)
                    .map_err(|e| PluginError::Internal(e.to_string()))?;
                (
                    content,
                    ids.len() as u64,
                    prompt_ids(tokenizer, &chat.prompt)?.len() as u64,
                )
            }
            None => {
                let content = responses
                    .iter()
                    .map(|json| response_text(json))
                    .collect::<Result<Vec<_>, _>>()?
                    .concat();
                (
                    content,
                    responses.len() as u64,
                    chat.prompt.split_whitespace().count() as u64,
                )
            }
        };
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let id = invocation
            .inference_id
            .clone()
            .unwrap_or_else(|| format!("{created:x}"));
        Ok(json_reply(
            200,
            &json!({
                "id": format!("chatcmpl-{id}"),
                "object": "chat.completion",
                "created": created,
                "model": chat.model.unwrap_or_else(|| invocation.model.clone()),
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason(&invocation, completion_tokens),
                }],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }),
        ))
    }
}

fn chunk(
    invocation: &Invocation,
    position: &StreamPosition,
    delta: Value,
    finish: Value,
) -> String {
    json!({
        "id": format!("chatcmpl-{}", position.stream_id),
        "object": "chat.completion.chunk",
        "created": position.created,
        "model": model_name(invocation),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    })
    .to_string()
}

/// The stream's decoder as its previous events left it.
fn stream_decoder() -> Result<StreamDecoder, PluginError> {
    StreamDecoder::resume(state::get().as_deref()).map_err(PluginError::Internal)
}

impl StreamGuest for Plugin {
    fn adapt_event(
        invocation: Invocation,
        position: StreamPosition,
        event: Vec<u8>,
    ) -> Result<Vec<String>, PluginError> {
        let text = match tokenizer() {
            Some(tokenizer) => {
                let mut decoder = stream_decoder()?;
                let text = decoder
                    .step(tokenizer, &response_ids(&event)?, true)
                    .map_err(|e| PluginError::Internal(e.to_string()))?;
                state::set(&decoder.to_bytes()).map_err(PluginError::Internal)?;
                if text.is_empty() && position.index > 0 {
                    return Ok(Vec::new());
                }
                text
            }
            None => response_text(&event)?,
        };
        let delta = if position.index == 0 {
            json!({"role": "assistant", "content": text})
        } else {
            json!({"content": text})
        };
        Ok(vec![chunk(&invocation, &position, delta, Value::Null)])
    }

    fn end_stream(
        invocation: Invocation,
        position: StreamPosition,
    ) -> Result<Vec<String>, PluginError> {
        let reason = finish_reason(&invocation, position.index);
        let mut events = Vec::new();
        if let Some(tokenizer) = tokenizer() {
            let rest = stream_decoder()?
                .finish(tokenizer, true)
                .map_err(|e| PluginError::Internal(e.to_string()))?;
            if !rest.is_empty() {
                events.push(chunk(
                    &invocation,
                    &position,
                    json!({"content": rest}),
                    Value::Null,
                ));
            }
        }
        events.push(chunk(&invocation, &position, json!({}), json!(reason)));
        events.push("[DONE]".to_owned());
        Ok(events)
    }
}

export!(Plugin);
