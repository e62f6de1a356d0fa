//! Stream adapters that break the rules (`tests/guests/hostile-stream`) on a `generate_stream`
//! endpoint over the real core: each failure ends its stream with the events before it and one
//! error event, nothing else, and the next stream is whole; each stream's state is its own, and
//! bounded.

mod common;

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::Path;

use common::copy_model;
use common::http_client::request;
use common::plugins::{digest, guest};
use common::process::{Running, serve_with};
use serde_json::Value;

fn start(dir: &Path) -> (Running, SocketAddr) {
    copy_model("native_text_stream", &dir.join("models"), "text_stream");
    let manifest = dir.join("plugins.toml");
    std::fs::write(
        &manifest,
        format!(
            "[plugins.hostile]\npath = \"{}\"\nsha256 = \"{}\"\ntime_limit_ms = 200\nmemory_limit_mb = 32\n\n[models.\"*\"]\nresponse = \"hostile\"\n",
            guest("hostile_stream").display(),
            digest("hostile_stream"),
        ),
    )
    .unwrap();
    let env = [
        (
            "SAGEMAKER_TRITON_INFERENCE_TYPE",
            OsStr::new("generate_stream"),
        ),
        ("SAGEMAKER_TRITON_PLUGINS", manifest.as_os_str()),
    ];
    serve_with(&dir.join("models"), &env)
}

/// The payloads of the stream `mode` asks for (three responses from the model).
fn stream(addr: SocketAddr, mode: &str) -> Vec<String> {
    let body = format!("{{\"PROMPT\": \"{mode}\", \"COUNT\": 3}}");
    let response = request(
        addr,
        "POST",
        "/invocations",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(response.status, 200, "{mode}: {}", response.text());
    let text = response.text();
    assert!(text.ends_with("\n\n"), "{mode}: {text:?}");
    text.split("\n\n")
        .filter(|event| !event.is_empty())
        .map(|event| {
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("{mode}: not an event: {event:?}"))
                .to_owned()
        })
        .collect()
}

/// The text of an event the hostile adapter passed (tagged ` #n` by it).
fn text_of(payload: &str) -> String {
    let (event, _) = payload.rsplit_once(" #").unwrap_or((payload, ""));
    let event: Value = serde_json::from_str(event).unwrap();
    event["TEXT"].as_str().unwrap().to_owned()
}

/// The number the adapter's stream state gave an event it passed.
fn seen_of(payload: &str) -> u64 {
    payload.rsplit_once(" #").unwrap().1.parse().unwrap()
}

#[test]
fn a_failing_stream_adapter_ends_its_stream_with_one_error_event() {
    let dir = tempfile::tempdir().unwrap();
    let (_running, addr) = start(dir.path());

    let whole = stream(addr, "ok");
    assert_eq!(whole.len(), 4, "{whole:?}");
    let texts: Vec<String> = whole[..3].iter().map(|p| text_of(p)).collect();
    assert_eq!(texts, ["ok 0", "ok 1", "ok 2"]);
    assert_eq!(whole[3], "[END 3 seen 3]");
    let seen: Vec<u64> = whole[..3].iter().map(|p| seen_of(p)).collect();
    assert_eq!(seen, [1, 2, 3]);

    for (mode, expected) in [
        ("trap", "trap"),
        ("loop", "200 ms"),
        ("hog", "32 MiB"),
        ("newline", "line break"),
        ("refuse", "this event is refused"),
        ("state-hog", "at most 65536 bytes"),
    ] {
        let events = stream(addr, mode);
        assert_eq!(events.len(), 2, "{mode}: {events:?}");
        assert_eq!(text_of(&events[0]), format!("{mode} 0"));
        let error: Value = serde_json::from_str(&events[1]).unwrap();
        let message = error["error"].as_str().unwrap_or_default();
        assert!(
            message.contains("hostile") && message.contains(expected),
            "{mode}: {events:?}"
        );
        assert_eq!(stream(addr, "ok").len(), 4, "after {mode}");
    }

    // Every event passed, then the end traps: the events, then the error.
    let events = stream(addr, "end-trap");
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(events[3].contains("\"error\""), "{events:?}");
    assert_eq!(stream(addr, "ok").len(), 4);

    // A model that fails on its first response is answered as without an adapter (the
    // error's status and one error event); the adapter is never called.
    let failed = request(
        addr,
        "POST",
        "/invocations",
        &[("Content-Type", "application/json")],
        br#"{"PROMPT": "ok", "COUNT": -2}"#,
    );
    assert_eq!(failed.status, 500, "{}", failed.text());
    assert_eq!(
        failed.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    assert_eq!(
        failed.text(),
        "data: {\"error\":\"text_stream: failed at the first response\"}\n\n"
    );

    // Streams at once each count in a state of their own, from nothing.
    std::thread::scope(|scope| {
        let streams: Vec<_> = (0..8).map(|_| scope.spawn(|| stream(addr, "ok"))).collect();
        for stream in streams {
            let events = stream.join().unwrap();
            let seen: Vec<u64> = events[..3].iter().map(|p| seen_of(p)).collect();
            assert_eq!(seen, [1, 2, 3], "{events:?}");
            assert_eq!(events[3], "[END 3 seen 3]");
        }
    });

    // Counted per plugin: sixteen whole streams (4 calls each), six failing on their second
    // event (2 calls, 1 failed), one failing at its end (4 calls, 1 failed).
    let metrics = request(addr, "GET", "/metrics", &[], b"").text();
    for counted in [
        "trident_plugin_stream_calls_total{plugin=\"hostile\"} 80",
        "trident_plugin_stream_failures_total{plugin=\"hostile\"} 7",
    ] {
        assert!(metrics.contains(counted), "no {counted} in {metrics}");
    }
}
