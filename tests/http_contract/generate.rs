//! `/invocations` with `generate` (one flat JSON object) and `generate_stream` (server-sent
//! events).

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    generate_answers_one_flat_object,
    generate_stream_sends_one_event_per_response,
];

fn generate_answers_one_flat_object(f: &Fixture) -> Result<(), Failed> {
    let response = post_json(
        f.at("generate"),
        "/invocations",
        &json!({"PROMPT": "hello trident", "max_tokens": 4}),
    );
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.header("content-type") == Some("application/json"),
        "{:?}",
        response.headers
    );
    let json = response.json();
    ensure!(json["TEXT"] == "HELLO TRIDENT", "{json}");
    ensure!(json["model_name"] == "text_echo", "{json}");
    let wrong = post_json(f.at("generate"), "/invocations", &json!({"PROMPT": 5}));
    ensure!(wrong.status == 400, "{} {}", wrong.status, wrong.text());
    Ok(())
}

fn generate_stream_sends_one_event_per_response(f: &Fixture) -> Result<(), Failed> {
    for count in [0, 1, 7] {
        let response = post_json(
            f.at("stream"),
            "/invocations",
            &json!({"PROMPT": "tok", "COUNT": count}),
        );
        ensure!(
            response.status == 200,
            "{} {}",
            response.status,
            response.text()
        );
        ensure!(
            response.header("content-type") == Some("text/event-stream; charset=utf-8"),
            "{:?}",
            response.headers
        );
        ensure!(
            response.header("transfer-encoding") == Some("chunked"),
            "not chunked: {:?}",
            response.headers
        );
        let text = response.text();
        let events: Vec<Value> = text
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| serde_json::from_str(e.strip_prefix("data: ").expect("data: prefix")).unwrap())
            .collect();
        ensure!(events.len() == count as usize, "count {count}: {text}");
        for (i, event) in events.iter().enumerate() {
            ensure!(event["TEXT"] == format!("tok {i}"), "{event}");
        }
    }
    // An error after streaming began arrives as an error event.
    let response = post_json(
        f.at("stream"),
        "/invocations",
        &json!({"PROMPT": "x", "COUNT": -1}),
    );
    ensure!(response.status == 200, "{}", response.status);
    let text = response.text();
    ensure!(text.starts_with("data: {\"TEXT\":\"x 0\""), "{text}");
    ensure!(
        text.contains("data: {\"error\":\"text_stream: failed mid-stream"),
        "{text}"
    );
    // An error on the first response is the stream's status (the model's error code), with
    // the error as its one event.
    let response = post_json(
        f.at("stream"),
        "/invocations",
        &json!({"PROMPT": "x", "COUNT": -2}),
    );
    ensure!(
        response.status == 500
            && response.header("content-type") == Some("text/event-stream; charset=utf-8")
            && response.text()
                == "data: {\"error\":\"text_stream: failed at the first response\"}\n\n",
        "{} {:?} {:?}",
        response.status,
        response.headers,
        response.text()
    );
    Ok(())
}
