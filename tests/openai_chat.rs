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

/// trident serving the chat model through the chat plugin, ready.
fn start(dir: &Path) -> (Running, SocketAddr) {
    copy_model("chat_stream", &dir.join("models"), "chat_stream");
    let manifest = dir.join("plugins.toml");
    std::fs::write(
        &manifest,
        format!(
            "[plugins.chat]\npath = \"{}\"\nsha256 = \"{}\"\n\n[models.\"*\"]\nrequest = \"chat\"\nresponse = \"chat\"\n",
            guest("openai_chat").display(),
            digest("openai_chat"),
        ),
    )
    .unwrap();
    let env = [
        ("SAGEMAKER_TRITON_INFERENCE_TYPE", OsStr::new("generate")),
        ("SAGEMAKER_TRITON_PLUGINS", manifest.as_os_str()),
    ];
    serve_with(&dir.join("models"), &env)
}

/// Runs each of `requests` (arguments of `chat.completions.create`) with the openai client.
fn chat(addr: SocketAddr, requests: Value) -> Vec<Value> {
    let results = python_client("openai_chat.py", &format!("http://{addr}"), &requests);
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
