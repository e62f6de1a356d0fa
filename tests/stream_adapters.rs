//! Stream adapters that break the rules (`tests/guests/hostile-stream`) on a `generate_stream`
//! endpoint over the real core: each failure ends its stream with the events before it and one
//! error event, nothing else, and the next stream is whole; each stream's state is its own, and
//! bounded; a stream's calls share one instance, which no other stream ever gets, within the
//! engine's budget and while its memory stays at most half its limit.

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

/// The text of an event the hostile adapter passed (tagged ` #n @k` by it).
fn text_of(payload: &str) -> String {
    let (event, _) = payload.rsplit_once(" #").unwrap_or((payload, ""));
    let event: Value = serde_json::from_str(event).unwrap();
    event["TEXT"].as_str().unwrap().to_owned()
}

/// The number the adapter's stream state gave an event it passed.
fn seen_of(payload: &str) -> u64 {
    let tags = payload.rsplit_once(" #").unwrap().1;
    tags.split_once(" @").unwrap().0.parse().unwrap()
}

/// How many calls the instance that made `payload` had served, that one included.
fn calls_of(payload: &str) -> u64 {
    let calls = payload.rsplit_once(" @").unwrap().1;
    calls.trim_end_matches(']').parse().unwrap()
}

/// The instance tags of a stream's payloads.
fn calls(events: &[String]) -> Vec<u64> {
    events.iter().map(|p| calls_of(p)).collect()
}

#[test]
fn a_failing_stream_adapter_ends_its_stream_with_one_error_event() {
    let dir = tempfile::tempdir().unwrap();
    let (_running, addr) = start(dir.path());

    let whole = stream(addr, "ok");
    assert_eq!(whole.len(), 4, "{whole:?}");
    let texts: Vec<String> = whole[..3].iter().map(|p| text_of(p)).collect();
    assert_eq!(texts, ["ok 0", "ok 1", "ok 2"]);
    let seen: Vec<u64> = whole[..3].iter().map(|p| seen_of(p)).collect();
    assert_eq!(seen, [1, 2, 3]);
    // One instance served the stream's four calls (three events and the end).
    assert_eq!(whole[3], "[END 3 seen 3 @4]");
    assert_eq!(calls(&whole), [1, 2, 3, 4]);

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
        // The next stream is whole, in an instance of its own from its first call.
        assert_eq!(calls(&stream(addr, "ok")), [1, 2, 3, 4], "after {mode}");
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

    // Streams at once each count in a state of their own, from nothing, each in an instance
    // of its own.
    std::thread::scope(|scope| {
        let streams: Vec<_> = (0..8).map(|_| scope.spawn(|| stream(addr, "ok"))).collect();
        for stream in streams {
            let events = stream.join().unwrap();
            let seen: Vec<u64> = events[..3].iter().map(|p| seen_of(p)).collect();
            assert_eq!(seen, [1, 2, 3], "{events:?}");
            assert_eq!(events[3], "[END 3 seen 3 @4]");
        }
    });

    // An adapter leaving 12 MiB behind at each event (limit 32 MiB): its instance is kept
    // after the first event, not after the second (past half the limit), so the third runs in
    // a fresh one and fits; in the same instance it would have run out of memory.
    let leaky = stream(addr, "leak");
    assert_eq!(leaky.len(), 4, "{leaky:?}");
    assert_eq!(calls(&leaky), [1, 2, 1, 2], "{leaky:?}");
    assert_eq!(leaky[3], "[END 3 seen 3 @2]");

    // Counted per plugin: seventeen whole streams (4 calls each), six failing on their second
    // event (2 calls, 1 failed), one failing at its end (4 calls, 1 failed).
    let metrics = request(addr, "GET", "/metrics", &[], b"").text();
    for counted in [
        "trident_plugin_stream_calls_total{plugin=\"hostile\"} 84",
        "trident_plugin_stream_failures_total{plugin=\"hostile\"} 7",
    ] {
        assert!(metrics.contains(counted), "no {counted} in {metrics}");
    }
}

/// Streams past the container engine's budget of kept instances (64) get a fresh instance
/// for each call and are served as well; a stream that ends gives its share back, and the
/// next stream to call keeps an instance again. Called through the plugin host itself, so
/// that seventy-two streams wait between events for as long as the test says.
#[test]
fn past_the_budget_of_kept_instances_each_call_gets_a_fresh_one() {
    use std::sync::Arc;
    use trident::plugins::platform::manifest::Manifest;
    use trident::plugins::{
        KeptInstance, PluginHost, PluginInvocation, StreamPosition, StreamState,
    };

    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("plugins.toml");
    std::fs::write(
        &manifest,
        format!(
            "[plugins.hostile]\npath = \"{}\"\nsha256 = \"{}\"\n\n[models.\"*\"]\nresponse = \"hostile\"\n",
            guest("hostile_stream").display(),
            digest("hostile_stream"),
        ),
    )
    .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let host = runtime
        .block_on(PluginHost::load(&Manifest::load(&manifest).unwrap()))
        .unwrap();
    let plugin = host
        .select("text_stream", None, None)
        .unwrap()
        .response
        .unwrap();
    let invocation = PluginInvocation::new(
        "/invocations",
        "text_stream",
        &trident::invocation::Invocation {
            content_type: Some("application/json".into()),
            ..Default::default()
        },
        &http::HeaderMap::new(),
        &[],
        br#"{"PROMPT": "ok", "COUNT": 3}"#,
        None,
    );
    type Stream = (Arc<StreamState>, Arc<KeptInstance>);
    // One event of `stream`: its `#seen` and `@calls` tags.
    let event = |stream: &Stream, index: u64| -> (u64, u64) {
        let position = StreamPosition {
            stream_id: format!("{:p}", Arc::as_ptr(&stream.0)),
            created: 0,
            index,
        };
        let payloads = runtime
            .block_on(host.adapt_stream(
                &plugin,
                &invocation,
                &position,
                Some(br#"{"TEXT": "x"}"#.to_vec()),
                &stream.0,
                Some(&stream.1),
            ))
            .unwrap()
            .unwrap();
        (seen_of(&payloads[0]), calls_of(&payloads[0]))
    };
    let mut streams: Vec<Stream> = (0..72).map(|_| Default::default()).collect();
    for stream in &streams {
        assert_eq!(event(stream, 0), (1, 1));
    }
    // The first 64 kept their instance; the other 8 found the budget spent.
    let second: Vec<(u64, u64)> = streams.iter().map(|s| event(s, 1)).collect();
    let expected: Vec<(u64, u64)> = [vec![(2, 2); 64], vec![(2, 1); 8]].concat();
    assert_eq!(second, expected);
    // Eight streams end: the last eight keep theirs from their next call on.
    streams.drain(..8);
    let third: Vec<(u64, u64)> = streams.iter().map(|s| event(s, 2)).collect();
    let expected: Vec<(u64, u64)> = [vec![(3, 3); 56], vec![(3, 1); 8]].concat();
    assert_eq!(third, expected);
    let fourth: Vec<(u64, u64)> = streams.iter().map(|s| event(s, 3)).collect();
    let expected: Vec<(u64, u64)> = [vec![(4, 4); 56], vec![(4, 2); 8]].concat();
    assert_eq!(fourth, expected);
}
