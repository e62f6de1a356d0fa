//! Every status the router and its handlers answer, over real HTTP on loopback, on the scripted
//! engine ([`crate::engine::fake`]): milliseconds each. The same statuses are checked against
//! the real core in `tests/http_contract/`; `status.rs` tests each mapping on its own.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::AppState;
use crate::config::restrictions::parse_restrictions;
use crate::config::{Config, Mode};
use crate::engine::fake::{FakeEngine, FakeModel};
use crate::engine::{EngineError, ErrorCode, InferRequest, InferResponse};
use crate::sessions::SessionSettings;

/// A server over the fake engine, on its own runtime (stopped when dropped).
struct Server {
    _runtime: tokio::runtime::Runtime,
    address: SocketAddr,
}

/// The fake engine's models: `echo` answers with no outputs; `broken` fails as the model's
/// own error says; `hungry` fails out of memory; `seq` is stateful.
fn engine() -> FakeEngine {
    let metadata = json!({"name": "m", "inputs": [{"name": "X", "datatype": "FP32", "shape": [1]}],
                          "outputs": []});
    let answer = |model: &'static str| {
        move |_: &InferRequest| {
            vec![Ok(InferResponse {
                model_name: model.to_owned(),
                model_version: 1,
                id: None,
                parameters: Vec::new(),
                outputs: Vec::new(),
            })]
        }
    };
    let failing = |message: &'static str| {
        move |_: &InferRequest| vec![Err(EngineError::new(ErrorCode::Internal, message))]
    };
    let mut seq = FakeModel::new(metadata.clone(), answer("seq"));
    seq.stateful = true;
    FakeEngine::new()
        .with_model("echo", FakeModel::new(metadata.clone(), answer("echo")))
        .with_model(
            "broken",
            FakeModel::new(metadata.clone(), failing("it broke")),
        )
        .with_model(
            "hungry",
            FakeModel::new(metadata, failing("CUDA out of memory")),
        )
        .with_model("seq", seq)
}

fn serve(config: Config) -> Server {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let state = Arc::new(AppState::new(engine(), config));
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    runtime.spawn(super::serve(
        listener,
        state,
        std::future::pending(),
        Duration::ZERO,
    ));
    Server {
        _runtime: runtime,
        address,
    }
}

fn single(model: &str) -> Config {
    let mut config = Config::new(Mode::SingleModel {
        repository: std::env::temp_dir(),
        default_model: model.into(),
    });
    config.http.worker_threads = Some(1);
    config
}

/// What a request got: its status, its headers (lower-case names) and its body.
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }

    /// The `error` of a JSON error body.
    fn error(&self) -> String {
        let json: Value = serde_json::from_slice(&self.body).unwrap_or(Value::Null);
        json["error"].as_str().unwrap_or_default().to_owned()
    }
}

/// One request, `Connection: close`, read to its end.
fn send(server: &Server, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut stream = TcpStream::connect(server.address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let mut body = raw[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = unchunk(&body);
    }
    Answer { status, head, body }
}

fn unchunk(mut raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line = raw.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..line]).unwrap(), 16).unwrap();
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&raw[line + 2..line + 2 + size]);
        raw = &raw[line + 2 + size + 2..];
    }
}

const INFER: &str =
    r#"{"inputs": [{"name": "X", "datatype": "FP32", "shape": [1], "data": [1.0]}]}"#;

#[test]
fn routes_refuse_unknown_paths_and_wrong_methods() {
    let server = serve(single("echo"));
    let answer = send(&server, "GET", "/nope", &[], "");
    assert_eq!(
        (answer.status, answer.error()),
        (404, "no route for /nope".into())
    );
    let answer = send(&server, "PUT", "/models", &[], "");
    assert_eq!(answer.status, 405);
    assert_eq!(answer.header("allow"), Some("GET, POST"));
    let answer = send(&server, "POST", "/metrics", &[], "");
    assert_eq!((answer.status, answer.header("allow")), (405, Some("GET")));
    assert_eq!(send(&server, "GET", "/ping", &[], "").status, 200);
    assert_eq!(send(&server, "GET", "/metrics", &[], "").status, 200);
}

#[test]
fn inference_statuses_follow_the_failure() {
    let echo = serve(single("echo"));
    assert_eq!(send(&echo, "POST", "/invocations", &[], INFER).status, 200);
    let malformed = send(&echo, "POST", "/invocations", &[], "{");
    assert_eq!(malformed.status, 400, "{}", malformed.error());
    let shape = INFER.replace("[1.0]", "[1.0, 2.0]");
    assert_eq!(send(&echo, "POST", "/invocations", &[], &shape).status, 400);
    // The model's own failure is 400; out of memory, 507.
    let broken = serve(single("broken"));
    let answer = send(&broken, "POST", "/invocations", &[], INFER);
    assert_eq!(answer.status, 400);
    assert!(answer.error().contains("it broke"), "{}", answer.error());
    let hungry = serve(single("hungry"));
    assert_eq!(
        send(&hungry, "POST", "/invocations", &[], INFER).status,
        507
    );
    // The server serves on after each.
    assert_eq!(send(&echo, "POST", "/invocations", &[], INFER).status, 200);
}

#[test]
fn limits_and_restrictions_are_4xx() {
    let mut config = single("echo");
    config.http.max_body_bytes = 16;
    config.http.restrictions = parse_restrictions(["inference:x-key=k"]).unwrap();
    let server = serve(config);
    let answer = send(&server, "POST", "/invocations", &[], INFER);
    assert_eq!(
        (answer.status, answer.error()),
        (
            403,
            "This API is restricted, expecting header 'x-key'".into()
        )
    );
    let answer = send(&server, "POST", "/invocations", &[("x-key", "k")], INFER);
    assert_eq!(answer.status, 413, "{}", answer.error());
    // The health category is not restricted here.
    assert_eq!(send(&server, "GET", "/ping", &[], "").status, 200);
}

#[test]
fn routes_without_what_they_need_say_so() {
    let server = serve(single("echo"));
    let answer = send(&server, "GET", "/invocations-bidirectional-stream", &[], "");
    assert_eq!(answer.status, 426, "{}", answer.error());
    let answer = send(&server, "POST", "/v1/chat/completions", &[], "{}");
    assert_eq!(answer.status, 404);
    assert!(answer.error().contains("openai_chat"), "{}", answer.error());
    let answer = send(&server, "POST", "/plugins/reload", &[], "");
    assert_eq!(answer.status, 400);
    assert!(
        answer.error().contains("SAGEMAKER_TRITON_PLUGINS"),
        "{}",
        answer.error()
    );
}

#[test]
fn multi_model_refusals_name_the_model() {
    let root = tempfile::tempdir().unwrap();
    let mut config = Config::new(Mode::MultiModel {
        repository: root.path().join("repository"),
        models_root: root.path().to_path_buf(),
    });
    config.http.worker_threads = Some(1);
    let server = serve(config);
    let answer = send(&server, "GET", "/models/absent", &[], "");
    assert_eq!(answer.status, 404);
    assert!(answer.error().contains("absent"), "{}", answer.error());
    let answer = send(&server, "POST", "/models/absent/invoke", &[], INFER);
    assert_eq!(answer.status, 404);
    assert_eq!(send(&server, "POST", "/models", &[], "{").status, 400);
    let answer = send(&server, "DELETE", "/models/absent", &[], "");
    assert_eq!(answer.status, 404, "{}", answer.error());
    let body = json!({"model_name": "m", "url": "/etc"}).to_string();
    assert_eq!(send(&server, "POST", "/models", &[], &body).status, 400);
}

#[test]
fn session_refusals_are_4xx_and_the_router_answers_controls() {
    let mut config = single("seq");
    config.sessions = Some(SessionSettings {
        expiration: Duration::from_secs(60),
        max_sessions: 1,
        store_bytes: 1024,
        reclaim_idle: Duration::from_secs(3600),
    });
    let server = serve(config);
    let header = "X-Amzn-SageMaker-Session-Id";
    let opened = send(
        &server,
        "POST",
        "/invocations",
        &[(header, "NEW_SESSION")],
        "",
    );
    assert_eq!(
        opened.status,
        200,
        "{}",
        String::from_utf8_lossy(&opened.body)
    );
    let id = opened.header("x-amzn-sagemaker-new-session-id").unwrap();
    let id = id.split(';').next().unwrap().to_owned();
    assert_eq!(
        send(&server, "POST", "/invocations", &[(header, &id)], INFER).status,
        200
    );
    // One session at most: the next is 429.
    let full = send(
        &server,
        "POST",
        "/invocations",
        &[(header, "NEW_SESSION")],
        "",
    );
    assert_eq!(full.status, 429, "{}", full.error());
    assert_eq!(
        send(&server, "POST", "/invocations", &[(header, "nope")], INFER).status,
        400
    );
    // A route that changes something refuses the header.
    assert_eq!(
        send(&server, "POST", "/plugins/reload", &[(header, &id)], "").status,
        400
    );
    let close = r#"{"requestType": "CLOSE"}"#;
    assert_eq!(
        send(&server, "POST", "/invocations", &[(header, &id)], close).status,
        200
    );
    assert_eq!(
        send(&server, "POST", "/invocations", &[(header, &id)], INFER).status,
        400
    );
}
