//! `/invocations-bidirectional-stream` with a real WebSocket client: Python's `websockets`
//! (installed by `scripts/install-test-clients`), driving `tests/clients/ws_session.py`, against
//! trident serving the real core: answers, pings, every way a session is closed, and the server
//! serving after each.

mod common;

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::Path;

use common::copy_model;
use common::http_client::request;
use common::process::{Running, python_client, serve_with};
use serde_json::{Value, json};

use trident::http::bidi_stream::PATH;

/// trident serving `repository` with `env`, ready.
fn start(repository: &Path, env: &[(&str, &str)]) -> (Running, SocketAddr) {
    let env: Vec<(&str, &OsStr)> = env.iter().map(|(k, v)| (*k, OsStr::new(*v))).collect();
    serve_with(repository, &env)
}

/// One session run by the Python client: what it received and how it ended.
fn session(addr: SocketAddr, script: Value) -> Value {
    python_client("ws_session.py", &format!("ws://{addr}{PATH}"), &script)
}

fn affine(data: [f32; 3]) -> String {
    json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": data}]})
        .to_string()
}

/// The answer of `/invocations` in a message: the affine model's outputs.
fn outputs(message: &Value) -> Value {
    let text = message.as_str().expect("a text message");
    serde_json::from_str::<Value>(text).unwrap()["outputs"][0]["data"].clone()
}

fn closed_with(outcome: &Value, code: u16) -> String {
    assert_eq!(outcome["close"]["code"], code, "{outcome}");
    outcome["close"]["reason"].as_str().unwrap().to_owned()
}

#[test]
fn messages_pings_limits_and_failures_over_the_real_core() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models");
    let (_running, addr) = start(
        &examples,
        &[
            ("SAGEMAKER_TRITON_HTTP_RESTRICTED_API", "inference:X-Key=k"),
            ("TRIDENT_MAX_BODY_BYTES", "4096"),
            ("TRIDENT_BIDI_MESSAGES_PER_SECOND", "5"),
        ],
    );
    let key = json!({"X-Key": "k"});

    // The inference restriction applies to the handshake.
    let refused = session(addr, json!({"steps": []}));
    assert_eq!(refused["refused"], 403, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("This API is restricted")
    );

    // Answers in order, pings answered between them, a clean close by the client.
    let outcome = session(
        addr,
        json!({"headers": key, "steps": [
            {"ping": "a"}, {"text": affine([1.0, 2.0, 3.0])}, {"recv": 1},
            {"text": affine([0.0, 0.5, -1.0])}, {"ping": "b"}, {"recv": 1},
        ]}),
    );
    assert_eq!(outcome["pongs"], 2, "{outcome}");
    let received = outcome["received"].as_array().unwrap();
    assert_eq!(outputs(&received[0]), json!([3.0, 5.0, 7.0]));
    assert_eq!(outputs(&received[1]), json!([1.0, 2.0, -1.0]));

    // Each failing request ends its session with 4000 + its status and its error; hostile
    // payloads of several kinds, each followed by a session that is answered.
    let wrong_rank = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [3], "data": [1, 2, 3]}]});
    let short_data = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1, 2]}]});
    let wrong_dtype = json!({"inputs": [{"name": "INPUT0", "datatype": "INT64", "shape": [1, 3], "data": [1, 2, 3]}]});
    let hostile_shape = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [0, i64::MAX], "data": []}]});
    for bad in [
        "{not json".to_string(),
        wrong_rank.to_string(),
        short_data.to_string(),
        wrong_dtype.to_string(),
        hostile_shape.to_string(),
        String::new(),
    ] {
        let outcome = session(
            addr,
            json!({"headers": key, "steps": [{"text": bad}, {"until_close": true}]}),
        );
        let reason = closed_with(&outcome, 4400);
        assert!(!reason.is_empty() && reason.len() <= 123, "{outcome}");
        assert_eq!(outcome["received"], json!([]), "{outcome}");
        let next = session(
            addr,
            json!({"headers": key, "steps": [{"text": affine([1.0, 1.0, 1.0])}, {"recv": 1}]}),
        );
        assert_eq!(
            outputs(&next["received"][0]),
            json!([3.0, 3.0, 3.0]),
            "after {bad}"
        );
    }

    // A binary message is a request whose content type is application/octet-stream, which
    // the v2 JSON route refuses.
    let binary = session(
        addr,
        json!({"headers": key, "steps": [{"binary": "00ff00ff"}, {"until_close": true}]}),
    );
    closed_with(&binary, 4400);

    // A message over the body limit: 1009, before it reaches the model.
    let big = "x".repeat(5000);
    let oversized = session(
        addr,
        json!({"headers": key, "steps": [{"text": big}, {"until_close": true}]}),
    );
    assert!(
        closed_with(&oversized, 1009).contains("4096"),
        "{oversized}"
    );

    // More than the message rate: 1008 once the burst is spent.
    let flood = session(
        addr,
        json!({"headers": key, "steps": [
            {"burst": 30, "text": affine([1.0, 2.0, 3.0])}, {"until_close": true},
        ]}),
    );
    assert!(
        closed_with(&flood, 1008).contains("5 messages a second"),
        "{flood}"
    );
    let answered = flood["received"].as_array().unwrap().len();
    assert!((5..30).contains(&answered), "{flood}");

    // Not a WebSocket handshake: 426; another method: 405.
    let plain = request(addr, "GET", PATH, &[("X-Key", "k")], b"");
    assert_eq!(plain.status, 426, "{}", plain.text());
    assert_eq!(
        request(addr, "POST", PATH, &[("X-Key", "k")], b"").status,
        405
    );

    // The server serves plain requests after all of it.
    let body: Value = serde_json::from_str(&affine([1.0, 2.0, 3.0])).unwrap();
    let after = request(
        addr,
        "POST",
        "/invocations",
        &[("X-Key", "k"), ("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    );
    assert_eq!(after.status, 200, "{}", after.text());
}

#[test]
fn a_decoupled_model_streams_its_responses_as_messages() {
    let repository = tempfile::tempdir().unwrap();
    copy_model("native_text_stream", repository.path(), "text_stream");
    let (mut running, addr) = start(
        repository.path(),
        &[("SAGEMAKER_TRITON_INFERENCE_TYPE", "generate_stream")],
    );
    let prompt = |text: &str, count: i32| json!({"PROMPT": text, "COUNT": count}).to_string();
    let texts = |outcome: &Value| -> Vec<String> {
        outcome["received"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let event: Value = serde_json::from_str(m.as_str().unwrap()).unwrap();
                event["TEXT"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let outcome = session(
        addr,
        json!({"steps": [
            {"text": prompt("hi", 3)}, {"recv": 3}, {"text": prompt("yo", 2)}, {"recv": 2},
        ]}),
    );
    assert_eq!(texts(&outcome), ["hi 0", "hi 1", "hi 2", "yo 0", "yo 1"]);
    assert_eq!(outcome["close"], Value::Null, "{outcome}");

    // A stream that fails after its first response: that response, then 1011 with the error.
    let failed = session(
        addr,
        json!({"steps": [{"text": prompt("x", -1)}, {"until_close": true}]}),
    );
    assert_eq!(texts(&failed), ["x 0"]);
    assert!(
        closed_with(&failed, 1011).contains("failed mid-stream"),
        "{failed}"
    );

    // A stream that fails on its first response: closed with 4000 + the error's status (as
    // HTTP answers it) and the error's own message as the reason.
    let refused = session(
        addr,
        json!({"steps": [{"text": prompt("x", -2)}, {"until_close": true}]}),
    );
    assert_eq!(texts(&refused), Vec::<String>::new());
    assert_eq!(
        closed_with(&refused, 4500),
        "text_stream: failed at the first response",
        "{refused}"
    );

    let next = session(
        addr,
        json!({"steps": [{"text": prompt("ok", 1)}, {"recv": 1}]}),
    );
    assert_eq!(texts(&next), ["ok 0"]);

    // SIGTERM with a session open: it is closed with 1001, and trident exits 0.
    let open = std::thread::spawn(move || {
        session(
            addr,
            json!({"steps": [{"text": prompt("last", 1)}, {"recv": 1}, {"until_close": true}]}),
        )
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(common::send_signal(running.0.id(), "TERM"));
    let ended = open.join().unwrap();
    assert_eq!(texts(&ended), ["last 0"]);
    assert!(
        closed_with(&ended, 1001).contains("shutting down"),
        "{ended}"
    );
    let status = running.0.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// A raw WebSocket stream on `addr`, past its handshake (the client's frames are written by
/// hand, so they can break the rules a client library keeps).
fn raw_session(addr: SocketAddr) -> std::net::TcpStream {
    raw_session_with(addr, "")
}

/// A raw session whose handshake carries `headers` (each line ending in `\r\n`).
fn raw_session_with(addr: SocketAddr, headers: &str) -> std::net::TcpStream {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(
            format!(
                "GET {PATH} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
                 Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{headers}\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    stream
}

/// A masked client frame: `first` is the FIN/RSV/opcode byte; `payload` under 126 bytes.
fn masked_frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut frame = vec![first, 0x80 | u8::try_from(payload.len()).unwrap()];
    frame.extend_from_slice(&mask);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    frame
}

/// The first frame the server sends, which must be a close frame: its code and reason.
fn read_close(stream: &mut std::net::TcpStream) -> (u16, String) {
    use std::io::Read;
    let mut header = [0u8; 2];
    stream.read_exact(&mut header).unwrap();
    assert_eq!(header[0], 0x88, "not a final close frame: {header:?}");
    let mut payload = vec![0u8; usize::from(header[1] & 0x7f)];
    stream.read_exact(&mut payload).unwrap();
    let code = u16::from_be_bytes([payload[0], payload[1]]);
    (code, String::from_utf8_lossy(&payload[2..]).into_owned())
}

/// RFC 6455's failures, each told to the client before the connection ends: a text message
/// that is not UTF-8 closes with 1007, a frame with a reserved bit set and a fragmented ping
/// with 1002. The endpoint serves after each.
#[test]
fn invalid_text_and_broken_frames_close_with_the_rfc_codes() {
    use std::io::Write;
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models");
    let (_running, addr) = start(&examples, &[]);
    for (what, frame, code, reason) in [
        (
            "invalid UTF-8 text",
            masked_frame(0x81, &[b'{', 0xff, 0xfe, b'}']),
            1007,
            "a text message is not valid UTF-8",
        ),
        (
            "a reserved bit",
            masked_frame(0x81 | 0x40, b"{}"),
            1002,
            "WebSocket protocol error",
        ),
        (
            "a fragmented ping",
            masked_frame(0x09, b"p"),
            1002,
            "WebSocket protocol error",
        ),
    ] {
        let mut stream = raw_session(addr);
        stream.write_all(&frame).unwrap();
        let (got, text) = read_close(&mut stream);
        assert_eq!(got, code, "{what}: closed with {got} {text:?}");
        assert!(text.starts_with(reason), "{what}: {text:?}");
        let ping = request(addr, "GET", "/ping", &[], b"");
        assert_eq!(ping.status, 200, "after {what}");
    }
    // A valid message on a raw session is still answered.
    let mut stream = raw_session(addr);
    stream
        .write_all(&masked_frame(0x81, affine([1.0, 2.0, 3.0]).as_bytes()))
        .unwrap();
    let mut header = [0u8; 2];
    std::io::Read::read_exact(&mut stream, &mut header).unwrap();
    assert_eq!(header[0], 0x81, "an answer in a text frame: {header:?}");
}

/// One frame the server sends: its first byte and its payload (server frames are unmasked).
fn read_frame(stream: &mut std::net::TcpStream) -> (u8, Vec<u8>) {
    use std::io::Read;
    let mut header = [0u8; 2];
    stream.read_exact(&mut header).unwrap();
    let length = match header[1] & 0x7f {
        126 => {
            let mut extended = [0u8; 2];
            stream.read_exact(&mut extended).unwrap();
            usize::from(u16::from_be_bytes(extended))
        }
        127 => {
            let mut extended = [0u8; 8];
            stream.read_exact(&mut extended).unwrap();
            usize::try_from(u64::from_be_bytes(extended)).unwrap()
        }
        short => usize::from(short),
    };
    let mut payload = vec![0u8; length];
    stream.read_exact(&mut payload).unwrap();
    (header[0], payload)
}

/// Another client's session is its own: while one session is open and answering, other
/// clients break theirs in every way a frame can (text that is not UTF-8, an unmasked frame, a
/// reserved bit, a frame claiming 2^62 bytes, a close with a forbidden code, a binary message
/// the route refuses) and are closed, each; the open session's next message is answered every
/// time, in order, with its own data.
#[test]
fn other_clients_broken_sessions_leave_an_open_one_answering() {
    use std::io::Write;
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models");
    let (_running, addr) = start(&examples, &[]);
    let mut steady = raw_session(addr);
    let mut ask = |round: usize| {
        let value = round as f32;
        steady
            .write_all(&masked_frame(0x81, affine([value, 0.0, -value]).as_bytes()))
            .unwrap();
        let (first, payload) = read_frame(&mut steady);
        assert_eq!(first, 0x81, "round {round}: an answer in a text frame");
        let answer = Value::String(String::from_utf8(payload).unwrap());
        assert_eq!(
            outputs(&answer),
            json!([2.0 * value + 1.0, 1.0, -2.0 * value + 1.0]),
            "round {round}"
        );
    };
    ask(0);
    let unmasked = {
        let mut frame = vec![0x81, 2];
        frame.extend_from_slice(b"{}");
        frame
    };
    let mut huge = vec![0x82, 0x80 | 127];
    huge.extend_from_slice(&(1u64 << 62).to_be_bytes());
    huge.extend_from_slice(&[1, 2, 3, 4]);
    let breakers: [(&str, Vec<u8>); 6] = [
        ("invalid UTF-8 text", masked_frame(0x81, &[0xc3, 0x28])),
        ("an unmasked client frame", unmasked),
        ("a reserved bit", masked_frame(0x81 | 0x20, b"{}")),
        ("a frame claiming 2^62 bytes", huge),
        (
            "a close with code 1005",
            masked_frame(0x88, &1005u16.to_be_bytes()),
        ),
        ("a binary message", masked_frame(0x82, b"\x00\x01")),
    ];
    for (round, (what, frame)) in breakers.into_iter().enumerate() {
        let mut breaker = raw_session(addr);
        breaker.write_all(&frame).unwrap();
        let (code, reason) = read_close(&mut breaker);
        assert!(
            (1002..=1011).contains(&code) || (4000..5000).contains(&code),
            "{what}: closed with {code} {reason:?}"
        );
        ask(round + 1);
    }
}

/// SageMaker's payload parts PARTIAL … COMPLETE arrive as one fragmented WebSocket message (a
/// first frame without FIN, continuations, the last with FIN): it is one request, text or
/// binary, and the session answers the next message as usual.
#[test]
fn a_message_fragmented_across_frames_is_one_request() {
    use std::io::Write;
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models");
    let (_running, addr) = start(&examples, &[]);
    let mut stream = raw_session_with(addr, "Content-Type: application/json\r\n");
    for (opcode, data) in [(0x01u8, [1.0, 2.0, 3.0]), (0x02, [4.0, 5.0, 6.0])] {
        let message = affine(data);
        let parts: Vec<&[u8]> = message.as_bytes().chunks(message.len() / 3 + 1).collect();
        assert_eq!(parts.len(), 3);
        // First frame: the message's opcode, FIN clear; then continuations (opcode 0), FIN on
        // the last.
        stream.write_all(&masked_frame(opcode, parts[0])).unwrap();
        stream.write_all(&masked_frame(0x00, parts[1])).unwrap();
        stream.write_all(&masked_frame(0x80, parts[2])).unwrap();
        let (first, payload) = read_frame(&mut stream);
        assert_eq!(first, 0x81, "one text answer for opcode {opcode}");
        let answer: Value = serde_json::from_slice(&payload).unwrap();
        let expected: Vec<f32> = data.iter().map(|x| 2.0 * x + 1.0).collect();
        assert_eq!(
            answer["outputs"][0]["data"],
            json!(expected),
            "opcode {opcode}: {answer}"
        );
    }
    // An unfragmented message after them is answered too.
    stream
        .write_all(&masked_frame(0x81, affine([0.0, 0.0, 0.0]).as_bytes()))
        .unwrap();
    let (first, payload) = read_frame(&mut stream);
    assert_eq!(first, 0x81);
    let answer: Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(answer["outputs"][0]["data"], json!([1.0, 1.0, 1.0]));
}

/// What a client sets for its stream reaches plugins on every message: the handshake's query
/// string (as SageMaker's `X-Amzn-SageMaker-Model-Query-String`) and SageMaker's invocation path
/// header, unlisted in the manifest. The hostile guest's `echo` mode refuses each request with
/// the headers it saw, which closes the session with 4400 and that text as the reason. A session
/// header on the handshake is refused: the stream serves no stateful sessions.
#[test]
fn the_query_string_and_invocation_path_reach_plugins() {
    use common::plugins::{digest, guest};
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("plugins.toml");
    std::fs::write(
        &manifest,
        format!(
            "[plugins.echo]\npath = \"{}\"\nsha256 = \"{}\"\nconfig = {{ mode = \"echo\" }}\n\n\
             [models.\"*\"]\nrequest = \"echo\"\n",
            guest("hostile").display(),
            digest("hostile"),
        ),
    )
    .unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models");
    let (_running, addr) = start(
        &examples,
        &[
            ("SAGEMAKER_TRITON_PLUGINS", manifest.to_str().unwrap()),
            ("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "true"),
        ],
    );
    let outcome = python_client(
        "ws_session.py",
        &format!("ws://{addr}{PATH}?lang=en&n=2"),
        &json!({
            "headers": {"X-Amzn-SageMaker-Model-Invocation-Path": "/v2/chat"},
            "steps": [{"text": affine([1.0, 2.0, 3.0])}, {"until_close": true}],
        }),
    );
    let reason = closed_with(&outcome, 4400);
    assert!(
        reason.starts_with(
            "echo: headers=x-amzn-sagemaker-model-query-string=lang=en&n=2;\
             x-amzn-sagemaker-model-invocation-path=/v2/chat"
        ),
        "{reason}"
    );
    let refused = session(
        addr,
        json!({"headers": {"X-Amzn-SageMaker-Session-Id": "NEW_SESSION"}, "steps": []}),
    );
    assert_eq!(refused["refused"], 400, "{refused}");
}
