//! The OpenAI-compatible chat plugin (`plugins/openai-chat`, `trident:plugin@0.2.0`) end to end:
//! OpenAI's own Python client (`tests/clients/openai_chat.py`, installed by
//! `scripts/install-test-clients`) against trident serving a decoupled python chat model
//! (`tests/models/chat_stream`) on the real core, streaming and not, with bad requests and a
//! stream that fails midway, the server answering after each.

mod common;

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::Path;

use common::copy_model;
use common::plugins::{digest, guest};
use common::process::{Running, python_client, serve_with};
use serde_json::{Value, json};

/// trident serving the chat model through the chat plugin on /invocations (inference type
/// `generate`), ready.
fn start(dir: &Path) -> (Running, SocketAddr) {
    let routing = "[models.\"*\"]\nrequest = \"chat\"\nresponse = \"chat\"\n";
    start_manifest(dir, "", routing, "generate")
}

/// trident serving the chat model with `inference_type`, and a manifest of `top` (top-level
/// keys), the chat plugin, then `routing`; ready.
fn start_manifest(
    dir: &Path,
    top: &str,
    routing: &str,
    inference_type: &str,
) -> (Running, SocketAddr) {
    copy_model("chat_stream", &dir.join("models"), "chat_stream");
    let manifest = dir.join("plugins.toml");
    std::fs::write(
        &manifest,
        format!(
            "{top}[plugins.chat]\npath = \"{}\"\nsha256 = \"{}\"\n\n{routing}",
            guest("openai_chat").display(),
            digest("openai_chat"),
        ),
    )
    .unwrap();
    let env = [
        (
            "SAGEMAKER_TRITON_INFERENCE_TYPE",
            OsStr::new(inference_type),
        ),
        ("SAGEMAKER_TRITON_PLUGINS", manifest.as_os_str()),
    ];
    serve_with(&dir.join("models"), &env)
}

/// Runs each of `requests` (arguments of `chat.completions.create`) with the openai client,
/// through /invocations.
fn chat(addr: SocketAddr, requests: Value) -> Vec<Value> {
    chat_at(&format!("http://{addr}"), requests)
}

/// Runs each of `requests` with the openai client given `base_url`.
fn chat_at(base_url: &str, requests: Value) -> Vec<Value> {
    let results = python_client("openai_chat.py", base_url, &requests);
    serde_json::from_value(results).unwrap()
}

fn user(text: &str) -> Value {
    json!([
        {"role": "system", "content": "You echo."},
        {"role": "user", "content": text},
    ])
}

#[test]
fn the_openai_client_chats_with_a_decoupled_model_through_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let (_running, addr) = start(dir.path());
    let good = json!({"model": "echo-1", "messages": user("hello there")});
    let results = chat(
        addr,
        json!([
            good,
            {"model": "echo-1", "messages": user("hello there"), "max_tokens": 2},
            {"model": "echo-1", "messages": user("hello there"), "stream": true},
            {"model": "echo-1", "messages": [{"role": "user", "content": [{"type": "text", "text": "parts work"}]}], "stream": true, "temperature": 0.5},
            {"model": "echo-1", "messages": user("please FAIL now"), "stream": true},
            good,
            {"model": "echo-1", "messages": []},
            {"model": "echo-1", "messages": user("hi"), "temperature": 5},
            {"model": "echo-1", "messages": [{"role": "wizard", "content": "hi"}]},
            {"model": "echo-1", "messages": user("hi"), "max_tokens": 0},
            {"model": "echo-1", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            good,
        ]),
    );

    let answer = &results[0];
    assert_eq!(answer["content"], "Echo: hello there", "{answer}");
    assert_eq!(answer["role"], "assistant");
    assert_eq!(answer["finish_reason"], "stop");
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["model"], "echo-1");
    assert!(answer["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(answer["usage"]["completion_tokens"], 3, "{answer}");
    assert_eq!(
        answer["usage"]["total_tokens"],
        answer["usage"]["prompt_tokens"].as_u64().unwrap() + 3
    );

    let cut = &results[1];
    assert_eq!(cut["content"], "Echo: hello", "{cut}");
    assert_eq!(cut["finish_reason"], "length");

    let streamed = &results[2];
    assert_eq!(
        streamed["deltas"],
        json!(["Echo: ", "hello ", "there"]),
        "{streamed}"
    );
    assert_eq!(streamed["roles"], json!(["assistant"]));
    assert_eq!(streamed["objects"], json!(["chat.completion.chunk"]));
    assert_eq!(streamed["ids"].as_array().unwrap().len(), 1, "{streamed}");
    assert_eq!(streamed["finish_reason"], "stop");

    assert_eq!(results[3]["deltas"], json!(["Echo: ", "parts ", "work"]));

    // The model fails after its first token: the client sees the stream end with an error.
    let failed = &results[4];
    assert!(
        failed["stream_error"].is_string(),
        "the failed stream ended without an error: {failed}"
    );
    assert_eq!(results[5]["content"], "Echo: hello there");

    for (index, expected) in [
        (6, "'messages' must be a non-empty list"),
        (7, "temperature must be a number from 0 to 2"),
        (8, "messages[0].role must be"),
        (9, "max_tokens must be an integer from 1 to 4096"),
        (10, "only text parts are supported"),
    ] {
        let refused = &results[index];
        assert_eq!(refused["status"], 400, "{refused}");
        assert!(
            refused["error"].as_str().unwrap().contains(expected),
            "{index}: {refused}"
        );
    }
    assert_eq!(results[11]["content"], "Echo: hello there");
}

/// OpenAI's client pointed straight at trident (`base_url` = `/v1` or `/openai/v1`), no hook:
/// the chat routes run the manifest's `openai_chat` plugin on the default model, answering
/// once or streaming, whatever the endpoint's inference type (here `infer`, with no plugin
/// routed to the model for /invocations).
#[test]
fn the_openai_client_works_pointed_straight_at_the_chat_routes() {
    let dir = tempfile::tempdir().unwrap();
    let (_running, addr) = start_manifest(dir.path(), "openai_chat = \"chat\"\n\n", "", "infer");
    for base in ["v1", "openai/v1"] {
        let results = chat_at(
            &format!("http://{addr}/{base}"),
            json!([
                {"model": "echo-1", "messages": user("straight in")},
                {"model": "echo-1", "messages": user("straight in"), "stream": true},
                {"model": "echo-1", "messages": []},
                {"model": "echo-1", "messages": user("after")},
            ]),
        );
        assert_eq!(
            results[0]["content"], "Echo: straight in",
            "{base}: {}",
            results[0]
        );
        assert_eq!(results[0]["object"], "chat.completion");
        assert_eq!(
            results[1]["deltas"],
            json!(["Echo: ", "straight ", "in"]),
            "{base}: {}",
            results[1]
        );
        assert_eq!(results[2]["status"], 400, "{base}: {}", results[2]);
        assert_eq!(results[3]["content"], "Echo: after", "{base}");
    }
    // The route is an inference route: a GET is 405, and /invocations still runs the model
    // without the plugin (a chat body is not a v2 request there).
    let get = common::http_client::get(addr, "/v1/chat/completions");
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));
    let body = json!({"model": "echo-1", "messages": user("hi")}).to_string();
    let invocations = common::http_client::post(addr, "/invocations", body.as_bytes());
    assert_eq!(invocations.status, 400, "{}", invocations.text());
}

/// Without an `openai_chat` plugin the chat routes answer 404, saying what to configure, and
/// the endpoint keeps serving.
#[test]
fn the_chat_routes_are_404_without_a_chat_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let (_running, addr) = start(dir.path());
    let results = chat_at(
        &format!("http://{addr}/v1"),
        json!([{"model": "echo-1", "messages": user("hi")}]),
    );
    assert_eq!(results[0]["status"], 404, "{}", results[0]);
    assert!(
        results[0]["error"]
            .as_str()
            .unwrap()
            .contains("openai_chat"),
        "{}",
        results[0]
    );
    let through_invocations = chat(addr, json!([{"model": "echo-1", "messages": user("hi")}]));
    assert_eq!(through_invocations[0]["content"], "Echo: hi");
}

/// When the chat plugin lists the content types it takes, a chat request of another type (or
/// none) is 415 on the chat routes, never run on the model as it is (past the plugin's
/// `max_tokens` bound); and a `null` field is absent, as OpenAI's API reads it: `null`
/// `max_completion_tokens` does not hide `max_tokens`.
#[test]
fn the_chat_routes_take_only_what_their_plugin_takes() {
    let dir = tempfile::tempdir().unwrap();
    let only_json = "content_types = [\"application/json\"]\n";
    let (_running, addr) =
        start_manifest(dir.path(), "openai_chat = \"chat\"\n\n", only_json, "infer");
    let body = json!({"model": "echo-1", "messages": user("hi"), "max_tokens": 100000}).to_string();
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = content_type
            .map(|t| ("Content-Type", t))
            .into_iter()
            .collect();
        let response = common::http_client::request(
            addr,
            "POST",
            "/v1/chat/completions",
            &headers,
            body.as_bytes(),
        );
        assert_eq!(
            response.status,
            415,
            "{content_type:?}: {}",
            response.text()
        );
        assert!(
            response.error().contains("application/json"),
            "{}",
            response.text()
        );
    }
    let json_post = |body: Value| {
        common::http_client::request(
            addr,
            "POST",
            "/v1/chat/completions",
            &[("Content-Type", "application/json")],
            body.to_string().as_bytes(),
        )
    };
    let over = json_post(
        json!({"messages": user("hi"), "max_completion_tokens": null, "max_tokens": 5000}),
    );
    assert_eq!(over.status, 400, "{}", over.text());
    assert!(over.error().contains("max_tokens"), "{}", over.text());
    let bounded = json_post(
        json!({"messages": user("one two three four"), "max_completion_tokens": null, "max_tokens": 2}),
    );
    assert_eq!(bounded.status, 200, "{}", bounded.text());
    let answer = bounded.json();
    assert_eq!(answer["usage"]["completion_tokens"], 2, "{answer}");
    assert_eq!(answer["choices"][0]["finish_reason"], "length", "{answer}");
    let good = json_post(json!({"messages": user("after")}));
    assert_eq!(good.status, 200, "{}", good.text());
}

/// With the model's tokenizer as an asset, the chat plugin speaks token ids to a model that
/// takes and gives them (the text-streaming example's model, which streams the prompt's ids
/// back): OpenAI's client gets the prompt's text back, whole or as chunks that are exactly what
/// each id adds, as Hugging Face's Python `tokenizers` decodes the same ids; `usage` counts
/// tokens, and `max_tokens` cuts the stream at that many ids.
#[test]
fn the_openai_client_chats_with_a_model_that_speaks_token_ids() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    common::copy_dir(
        &root.join("examples/text-streaming/models"),
        &dir.path().join("models"),
    );
    let config = dir.path().join("models/token-stream/config.pbtxt");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("string_value: \"20\"", "string_value: \"0\""),
    )
    .unwrap();
    let tokenizer = common::texts::train("llama", dir.path());
    let manifest = dir.path().join("plugins.toml");
    std::fs::write(
        &manifest,
        format!(
            "[plugins.chat]\npath = \"{}\"\nsha256 = \"{}\"\n\
             config = {{ max_tokens_input = \"max_tokens\", temperature_input = \"\" }}\n\
             assets = {{ tokenizer = {{ path = \"llama.json\", sha256 = \"{}\" }} }}\n\n\
             [models.\"*\"]\nrequest = \"chat\"\nresponse = \"chat\"\n",
            guest("openai_chat").display(),
            digest("openai_chat"),
            trident::plugins::platform::loading::sha256_hex(&std::fs::read(&tokenizer).unwrap()),
        ),
    )
    .unwrap();
    let env = [
        ("SAGEMAKER_TRITON_INFERENCE_TYPE", OsStr::new("generate")),
        ("SAGEMAKER_TRITON_PLUGINS", manifest.as_os_str()),
    ];
    let (_running, addr) = serve_with(&dir.path().join("models"), &env);

    // The prompt the plugin's default template makes, and what Hugging Face makes of it.
    let said = "hello 👋🏽 wörld, 終わり";
    let prompt = format!("system: You echo.\nuser: {said}\nassistant:");
    let ids = python_client(
        "texts.py",
        &format!("encode:{}", tokenizer.display()),
        &json!({"batches": [[prompt]], "max_length": 100_000, "truncation": false, "pad_token": "<unk>"}),
    )[0]["input_ids"][0]
        .clone();
    let ids: Vec<u32> = serde_json::from_value(ids).unwrap();
    let decoded = python_client(
        "texts.py",
        &format!("decode:{}", tokenizer.display()),
        &json!({"ids": [ids, &ids[..6]], "skip_special": true}),
    );
    let (whole, short) = (&decoded[0]["text"], &decoded[1]["text"]);
    let steps: Vec<String> = serde_json::from_value(decoded[0]["steps"].clone()).unwrap();
    let steps: Vec<&String> = steps.iter().filter(|s| !s.is_empty()).collect();

    let results = chat(
        addr,
        json!([
            {"model": "llm", "messages": user(said)},
            {"model": "llm", "messages": user(said), "stream": true},
            {"model": "llm", "messages": user(said), "stream": true, "max_tokens": 6},
            {"model": "llm", "messages": user(said), "max_tokens": 6},
        ]),
    );
    let answer = &results[0];
    assert_eq!(&answer["content"], whole, "{answer}");
    assert_eq!(answer["finish_reason"], "stop", "{answer}");
    assert_eq!(answer["usage"]["prompt_tokens"], ids.len(), "{answer}");
    assert_eq!(answer["usage"]["completion_tokens"], ids.len(), "{answer}");
    let streamed = &results[1];
    let deltas: Vec<String> = serde_json::from_value(streamed["deltas"].clone()).unwrap();
    assert_eq!(&Value::from(deltas.concat()), whole, "{streamed}");
    let sent: Vec<&String> = deltas.iter().filter(|d| !d.is_empty()).collect();
    assert_eq!(sent, steps, "{streamed}");
    assert_eq!(streamed["roles"], json!(["assistant"]), "{streamed}");
    let cut = &results[2];
    let deltas: Vec<String> = serde_json::from_value(cut["deltas"].clone()).unwrap();
    assert_eq!(&Value::from(deltas.concat()), short, "{cut}");
    assert_eq!(cut["finish_reason"], "length", "{cut}");
    assert_eq!(&results[3]["content"], short, "{}", results[3]);
    assert_eq!(results[3]["finish_reason"], "length", "{}", results[3]);
}
