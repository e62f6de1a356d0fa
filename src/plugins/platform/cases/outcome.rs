//! What a plugin answered a case, as one JSON value of the same shape for every hook (a case is
//! run through the plugin host by `host::cases`):
//!
//! - a refusal or a failed call: `{ status, message }`, the status a client would get;
//! - `request`: `{ status: 200, inputs: [KServe v2 tensors], outputs: [names asked for] }`;
//! - `response`, `generate-response`: `{ status, content_type, headers: {name: value}, body }`,
//!   with `json`, the body parsed, when it is JSON (and `body_base64` instead of `body` when it
//!   is not UTF-8);
//! - `generate-request`: `{ status: 200, stream: true | false | null, json }` or `{ ..., inputs }`;
//! - `stream`: `{ status: 200, events: [...] }`, each event's payload parsed where it is JSON.
//!   A stream that fails part way answers `{ status, message, events }`;
//! - `oom`: `{ status: 200, out_of_memory: true | false }` for the engine error in `body`.
//!
//! Streams are told they started at Unix time 0 (`created`), so that what a plugin derives from
//! it is the same at every run. These helpers also serve `trident plugin run`.

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Value, json};

use super::{Case, CaseHook};
use crate::engine::{InferResponse, InputTensor, OutputTensor};
use crate::plugins::runtime::boundary::{
    AdaptedGenerate, AdaptedRequest, GenerateInputs, HookResult, PluginReply, Refusal,
};
use crate::plugins::runtime::store::CallFailure;
use crate::protocol::v2_request::{OutputEncoding, decode_infer_request};
use crate::protocol::v2_response::encode_infer_response;

/// What a case expects, as JSON.
pub fn expected(case: &Case) -> Value {
    serde_json::to_value(&case.expect).unwrap_or(Value::Null)
}

/// Checks what a case can be checked for before it runs: one body at most, outputs where its
/// hook needs them (and only there), headers HTTP can carry.
pub fn check(case: &Case) -> Result<(), String> {
    if case.body.is_some() && case.body_base64.is_some() {
        return Err("give body or body_base64, not both".into());
    }
    body(case)?;
    headers(case)?;
    let needs_outputs = !matches!(
        case.hook,
        CaseHook::Request | CaseHook::GenerateRequest | CaseHook::Oom | CaseHook::Pipeline
    );
    if case.models.len() > super::MAX_MODEL_ANSWERS {
        return Err(format!(
            "gives {} model answers; a case may give at most {}",
            case.models.len(),
            super::MAX_MODEL_ANSWERS
        ));
    }
    for (index, answer) in case.models.iter().enumerate() {
        // Answers that take data from files are checked once the files are read.
        let mut referenced = Vec::new();
        super::data_files(&answer.outputs, &mut referenced);
        if referenced.is_empty() {
            let outputs = serde_json::to_value(&answer.outputs).map_err(|e| e.to_string())?;
            output_tensors(&outputs)
                .map_err(|e| format!("models[{index}] ('{}'): {e}", answer.model))?;
        }
    }
    match (&case.outputs, needs_outputs) {
        (Some(_), false) => return Err("outputs are for the response and stream hooks".into()),
        (None, true) => return Err("this hook needs outputs (what the model answered)".into()),
        _ => {}
    }
    if let Some(outputs) = &case.outputs {
        let outputs = serde_json::to_value(outputs).map_err(|e| e.to_string())?;
        if case.hook == CaseHook::Response {
            output_tensors(&outputs).map_err(|e| format!("outputs: {e}"))?;
        } else {
            responses(&outputs).map_err(|e| format!("outputs: {e}"))?;
        }
    }
    Ok(())
}

/// The case's request body: its text, its base64 decoded, or none.
pub fn body(case: &Case) -> Result<Vec<u8>, String> {
    match (&case.body, &case.body_base64) {
        (_, Some(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|e| format!("body_base64: {e}")),
        (Some(text), None) => Ok(text.clone().into_bytes()),
        (None, None) => Ok(Vec::new()),
    }
}

/// The case's request headers, each checked to be one HTTP can carry.
pub fn headers(case: &Case) -> Result<http::HeaderMap, String> {
    let mut map = http::HeaderMap::new();
    for (name, value) in &case.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("header '{}' is not a header name", name.escape_debug()))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("header '{name}': its value cannot be sent in HTTP"))?;
        map.insert(name, value);
    }
    Ok(map)
}

/// The value of a call the plugin completed, or the answer a client would have had instead:
/// `{ status, message }` with the status of `http::error::ApiError::from_plugin` and
/// `from_call_failure`.
pub fn answered<T>(result: HookResult<T>) -> Result<T, Value> {
    let (status, message) = match result {
        Ok(Ok(value)) => return Ok(value),
        Ok(Err(Refusal::BadRequest(m))) => (400, m),
        Ok(Err(Refusal::UnsupportedMediaType(m))) => (415, m),
        Ok(Err(Refusal::Internal(m))) => (500, m),
        Err(failure @ CallFailure::Deadline { .. }) => (504, failure.to_string()),
        Err(failure) => (500, failure.to_string()),
    };
    Err(json!({"status": status, "message": message}))
}

/// `status: message`, as `trident plugin run` prints a refusal.
pub fn refusal_line(refusal: &Value) -> String {
    format!(
        "{}: {}",
        refusal["status"],
        refusal["message"].as_str().unwrap_or_default()
    )
}

/// A request adapter's answer as a case sees it (`{ status, inputs, outputs }`).
pub fn request_answer(model: &str, adapted: AdaptedRequest) -> Value {
    let (inputs, outputs) = match adapted {
        AdaptedRequest::Tensors { inputs, outputs } => (inputs, outputs),
        AdaptedRequest::V2Json(json) => match decode_infer_request(model, &Bytes::from(json), None)
        {
            Ok((request, _)) => (request.inputs, request.requested_outputs),
            Err(e) => return json!({"status": 400, "message": e.to_string()}),
        },
    };
    match inputs_json(&inputs) {
        Ok(inputs) => json!({"status": 200, "inputs": inputs, "outputs": outputs}),
        Err(why) => json!({"status": 400, "message": why}),
    }
}

/// A generate request adapter's answer as a case sees it (`{ status, stream, json }` or
/// `inputs`).
pub fn generate_request_answer(adapted: AdaptedGenerate) -> Value {
    let mut answer = json!({"status": 200, "stream": adapted.stream});
    match adapted.inputs {
        GenerateInputs::Json(body) => {
            answer["json"] = serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&body)));
        }
        GenerateInputs::Tensors(inputs) => match inputs_json(&inputs) {
            Ok(inputs) => answer["inputs"] = inputs,
            Err(why) => return json!({"status": 400, "message": why}),
        },
    }
    answer
}

/// A response adapter's answer as a case sees it (`{ status, content_type, headers, body,
/// json }`), or the refusal given.
pub fn reply_answer(reply: Result<PluginReply, Value>) -> Value {
    let reply = match reply {
        Ok(reply) => reply,
        Err(refusal) => return refusal,
    };
    let headers: serde_json::Map<String, Value> = reply
        .headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), Value::from(value.as_str())))
        .collect();
    let mut answer = json!({
        "status": reply.status,
        "content_type": reply.content_type,
        "headers": headers,
    });
    match String::from_utf8(reply.body) {
        Ok(text) => {
            if let Ok(parsed) = serde_json::from_str::<Value>(&text) {
                answer["json"] = parsed;
            }
            answer["body"] = Value::from(text);
        }
        Err(bytes) => {
            answer["body_base64"] =
                Value::from(base64::engine::general_purpose::STANDARD.encode(bytes.as_bytes()));
        }
    }
    answer
}

/// Input tensors as KServe v2 JSON tensors, checked by the rule the server applies before the
/// model (a refusal's message when they break it).
pub fn inputs_json(inputs: &[InputTensor]) -> Result<Value, String> {
    let mut request = crate::engine::InferRequest::new("model");
    request.inputs = inputs.to_vec();
    request.check_inputs().map_err(|e| e.to_string())?;
    let as_outputs = InferResponse {
        model_name: "model".into(),
        model_version: 1,
        id: None,
        parameters: Vec::new(),
        outputs: inputs
            .iter()
            .map(|input| OutputTensor {
                name: input.name.clone(),
                datatype: input.datatype,
                shape: input.shape.clone(),
                data: input.data.clone(),
            })
            .collect(),
    };
    let encoded = encode_infer_response(&as_outputs, &OutputEncoding::default())
        .map_err(|e| e.to_string())?;
    let json: Value = serde_json::from_slice(&encoded.parts.concat()).map_err(|e| e.to_string())?;
    Ok(json["outputs"].clone())
}

/// A model's outputs given as KServe v2 tensors (`[{name, datatype, shape, data}]`, or a whole
/// response `{"outputs": [...]}`), typed by the server's request decoder.
pub fn output_tensors(outputs: &Value) -> Result<Vec<OutputTensor>, String> {
    let list = match outputs {
        Value::Object(response) => response
            .get("outputs")
            .cloned()
            .ok_or("no \"outputs\" list")?,
        list => list.clone(),
    };
    let as_request = json!({ "inputs": list }).to_string();
    let (request, _) =
        decode_infer_request("model", &Bytes::from(as_request), None).map_err(|e| e.to_string())?;
    Ok(request
        .inputs
        .into_iter()
        .map(|input| OutputTensor {
            name: input.name,
            datatype: input.datatype,
            shape: input.shape,
            data: input.data,
        })
        .collect())
}

/// A model's generate responses: a list of JSON objects, each as the model's answer's bytes.
pub fn responses(outputs: &Value) -> Result<Vec<Vec<u8>>, String> {
    let list = outputs.as_array().ok_or("give a list of responses")?;
    list.iter()
        .map(|response| match response {
            Value::Object(_) => Ok(response.to_string().into_bytes()),
            _ => Err("every response must be an object".to_owned()),
        })
        .collect()
}
