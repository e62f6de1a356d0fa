//! The SageMaker contract (../shared/CONTRACT.md) over real HTTP on 127.0.0.1, against the real
//! Triton core: one core for the whole binary, several trident HTTP servers over it, each
//! configured like one kind of deployment (single model, generate, multi-model, restricted...).

#[macro_use]
mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libtest_mimic::Failed;
use serde_json::{Value, json};
use trident::config::restrictions::parse_restrictions;
use trident::config::{Config, InferenceType, Mode, PingMode};
use trident::engine::triton::TritonEngine;
use trident::engine::{Engine, ModelState};
use trident::http::AppState;

use common::http_client::{HttpResponse, get, post, post_json, raw, request};
use common::{copy_model, models_dir};

const BINARY: &str = "application/vnd.sagemaker-triton.binary+json";

struct Fixture {
    runtime: tokio::runtime::Runtime,
    engine: TritonEngine,
    servers: HashMap<&'static str, SocketAddr>,
    models_root: tempfile::TempDir,
}

impl Fixture {
    fn at(&self, name: &str) -> SocketAddr {
        self.servers[name]
    }
}

fn main() -> std::process::ExitCode {
    let checks: &[common::Check<Fixture>] = &[
        (
            "ping_is_200_with_an_empty_body",
            ping_is_200_with_an_empty_body,
        ),
        (
            "infer_json_gives_exact_values",
            infer_json_gives_exact_values,
        ),
        (
            "infer_binary_request_and_outputs",
            infer_binary_request_and_outputs,
        ),
        (
            "malformed_binary_headers_are_400_and_server_keeps_serving",
            malformed_binary_headers_are_400_and_server_keeps_serving,
        ),
        ("bad_inference_bodies_are_400", bad_inference_bodies_are_400),
        ("unknown_default_model_is_404", unknown_default_model_is_404),
        (
            "decoupled_model_is_refused_on_infer",
            decoupled_model_is_refused_on_infer,
        ),
        (
            "generate_answers_one_flat_object",
            generate_answers_one_flat_object,
        ),
        (
            "generate_stream_sends_one_event_per_response",
            generate_stream_sends_one_event_per_response,
        ),
        (
            "unknown_routes_are_404_and_wrong_methods_405",
            unknown_routes_are_404_and_wrong_methods_405,
        ),
        (
            "bodies_over_the_limit_are_413",
            bodies_over_the_limit_are_413,
        ),
        (
            "bodies_in_too_many_chunks_are_400",
            bodies_in_too_many_chunks_are_400,
        ),
        (
            "hostile_shapes_are_400_and_the_model_keeps_serving",
            hostile_shapes_are_400_and_the_model_keeps_serving,
        ),
        (
            "error_bodies_hide_server_paths",
            error_bodies_hide_server_paths,
        ),
        (
            "restricted_apis_need_their_header",
            restricted_apis_need_their_header,
        ),
        ("execution_parameters", execution_parameters),
        (
            "mme_load_list_get_invoke_unload",
            mme_load_list_get_invoke_unload,
        ),
        ("mme_list_pages", mme_list_pages),
        (
            "mme_refuses_bad_urls_and_bodies",
            mme_refuses_bad_urls_and_bodies,
        ),
        (
            "mme_target_model_header_is_remembered",
            mme_target_model_header_is_remembered,
        ),
        ("mme_ensemble_is_detected", mme_ensemble_is_detected),
        (
            "mme_out_of_memory_is_507_and_failures_400",
            mme_out_of_memory_is_507_and_failures_400,
        ),
        (
            "mme_concurrent_loads_invokes_unloads",
            mme_concurrent_loads_invokes_unloads,
        ),
        (
            "mme_load_finishes_when_the_client_leaves",
            mme_load_finishes_when_the_client_leaves,
        ),
        (
            "ping_ready_fails_but_live_passes_after_a_failed_load",
            ping_ready_fails_but_live_passes_after_a_failed_load,
        ),
    ];
    common::run_checks(start(), checks)
}

fn base_config(mode: Mode) -> Config {
    Config {
        shutdown_grace: Duration::from_secs(5),
        ..Config::new(mode)
    }
}

fn single(model: &str) -> Config {
    base_config(Mode::SingleModel {
        repository: models_dir(),
        default_model: model.into(),
    })
}

fn start() -> Fixture {
    let engine = common::start_engine(
        vec![models_dir()],
        &[
            "add_sub",
            "identity_fp32",
            "repeat_int32",
            "text_echo",
            "text_stream",
            "slow_echo",
            "exec_fail",
        ],
    );
    let runtime = common::runtime();
    let models_root = tempfile::tempdir().unwrap();

    let mut configs: Vec<(&'static str, Config)> = vec![
        ("sme", single("add_sub")),
        ("identity", single("identity_fp32")),
        ("failing", single("exec_fail")),
        ("decoupled", single("repeat_int32")),
        (
            "generate",
            Config {
                inference_type: InferenceType::Generate,
                ..single("text_echo")
            },
        ),
        (
            "stream",
            Config {
                inference_type: InferenceType::GenerateStream,
                ..single("text_stream")
            },
        ),
        (
            "live",
            Config {
                ping_mode: PingMode::Live,
                ..single("add_sub")
            },
        ),
        (
            "small",
            Config {
                max_body_bytes: 1024,
                ..single("add_sub")
            },
        ),
        (
            "restricted",
            Config {
                restrictions: parse_restrictions([
                    "model-repository:x-admin=let-me-in",
                    "inference:x-key=k1",
                    "health:x-health=h1",
                ])
                .unwrap(),
                ..single("add_sub")
            },
        ),
    ];
    let mme = |page: usize| Config {
        ping_mode: PingMode::Live,
        list_page_size: page,
        ..base_config(Mode::MultiModel {
            repository: models_dir(),
            models_root: models_root.path().to_path_buf(),
        })
    };
    configs.push(("mme", mme(1000)));
    configs.push(("mme_paged", mme(2)));

    let mut servers = HashMap::new();
    for (name, config) in configs {
        let state = Arc::new(AppState::new(engine.clone(), config));
        servers.insert(name, common::serve(&runtime, state));
    }
    Fixture {
        runtime,
        engine,
        servers,
        models_root,
    }
}

fn add_sub_json(a: &[i32], b: &[i32]) -> Value {
    json!({
        "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": a},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": b}
        ]
    })
}

fn ensure_sums(response: &HttpResponse, a: &[i32], b: &[i32]) -> Result<(), Failed> {
    ensure!(
        response.status == 200,
        "status {}: {}",
        response.status,
        response.text()
    );
    let json = response.json();
    let outputs = json["outputs"].as_array().ok_or("no outputs")?;
    let find = |name: &str| outputs.iter().find(|o| o["name"] == name).cloned();
    let sum: Vec<i64> = find("OUTPUT0").ok_or("no OUTPUT0")?["data"]
        .as_array()
        .ok_or("no data")?
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    let expected: Vec<i64> = a.iter().zip(b).map(|(x, y)| i64::from(x + y)).collect();
    ensure!(sum == expected, "sums {sum:?} != {expected:?}");
    Ok(())
}

fn ping_is_200_with_an_empty_body(f: &Fixture) -> Result<(), Failed> {
    for server in ["sme", "live", "mme"] {
        let response = get(f.at(server), "/ping");
        ensure!(response.status == 200, "{server}: {}", response.status);
        ensure!(
            response.body.is_empty(),
            "{server}: body {}",
            response.text()
        );
    }
    Ok(())
}

fn infer_json_gives_exact_values(f: &Fixture) -> Result<(), Failed> {
    let a: Vec<i32> = common::pseudo_random(5, 16)
        .iter()
        .map(|&v| (v % 1000) as i32 - 500)
        .collect();
    let b: Vec<i32> = (0..16).map(|i| i * 3 - 7).collect();
    let response = post_json(f.at("sme"), "/invocations", &add_sub_json(&a, &b));
    ensure!(
        response.header("content-type") == Some("application/json"),
        "{:?}",
        response.headers
    );
    ensure_sums(&response, &a, &b)?;
    let json = response.json();
    ensure!(
        json["model_name"] == "add_sub" && json["model_version"] == "1",
        "{json}"
    );
    let difference = json["outputs"][1]["data"].as_array().ok_or("no OUTPUT1")?;
    ensure!(
        difference[0].as_i64() == Some(i64::from(a[0] - b[0])),
        "{json}"
    );
    Ok(())
}

/// A tritonclient-style binary request: JSON header, then raw tensors; binary output requested.
fn infer_binary_request_and_outputs(f: &Fixture) -> Result<(), Failed> {
    let values: Vec<f32> = (0..4096).map(|i| i as f32 * 0.25 - 100.0).collect();
    let tensor: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let header = json!({
        "inputs": [{"name": "INPUT0", "shape": [1, 4096], "datatype": "FP32",
                    "parameters": {"binary_data_size": tensor.len()}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": true}}]
    })
    .to_string();
    let mut body = header.clone().into_bytes();
    body.extend_from_slice(&tensor);
    let content_type = format!("{BINARY};json-header-size={}", header.len());
    let response = request(
        f.at("identity"),
        "POST",
        "/invocations",
        &[("Content-Type", &content_type)],
        &body,
    );
    ensure!(
        response.status == 200,
        "{}: {}",
        response.status,
        response.text()
    );
    let content_type = response.header("content-type").ok_or("no content type")?;
    let size: usize = content_type
        .strip_prefix(&format!("{BINARY};json-header-size="))
        .ok_or_else(|| format!("content type {content_type}"))?
        .parse()?;
    let json: Value = serde_json::from_slice(&response.body[..size])?;
    ensure!(
        json["outputs"][0]["parameters"]["binary_data_size"] == tensor.len(),
        "{json}"
    );
    ensure!(response.body[size..] == tensor[..], "binary output differs");

    // The same tensor as JSON comes back as JSON numbers equal to the float32 values.
    let response = post_json(
        f.at("identity"),
        "/invocations",
        &json!({"inputs": [{"name": "INPUT0", "shape": [1, 4096], "datatype": "FP32", "data": values}]}),
    );
    ensure!(response.status == 200, "{}", response.text());
    let data = response.json()["outputs"][0]["data"].clone();
    let back: Vec<f32> = data
        .as_array()
        .ok_or("no data")?
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    ensure!(back == values, "JSON round trip differs");
    Ok(())
}

fn malformed_binary_headers_are_400_and_server_keeps_serving(f: &Fixture) -> Result<(), Failed> {
    let body = br#"{"inputs":[]}"#;
    for content_type in [
        format!("text/plain;{BINARY};json-header-size=13"),
        format!("{BINARY};json-header-size=abc"),
        format!("{BINARY};json-header-size=-5"),
        format!("{BINARY};json-header-size=14"),
        format!("{BINARY};json-header-size=4294967296"),
        format!("{BINARY};json-header-size=99999999999999999999999999"),
    ] {
        let response = request(
            f.at("sme"),
            "POST",
            "/invocations",
            &[("Content-Type", &content_type)],
            body,
        );
        ensure!(
            response.status == 400,
            "{content_type}: {} {}",
            response.status,
            response.text()
        );
        ensure!(!response.error().is_empty(), "{content_type}: empty error");
        let ping = get(f.at("sme"), "/ping");
        ensure!(
            ping.status == 200,
            "ping after {content_type}: {}",
            ping.status
        );
    }
    Ok(())
}

fn bad_inference_bodies_are_400(f: &Fixture) -> Result<(), Failed> {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"{\"inputs\":[".to_vec(), "failed to parse"),
        (b"not json".to_vec(), "failed to parse"),
        (b"".to_vec(), "failed to parse"),
        (
            json!({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[1]}]}).to_string().into_bytes(),
            "elements",
        ),
        (
            add_sub_json(&[0; 16], &[0; 16]).to_string().replace("\"INT32\"", "\"FP32\"").into_bytes(),
            "FP32",
        ),
        (
            json!({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,8],"data":[0,0,0,0,0,0,0,0]},
                             {"name":"INPUT1","datatype":"INT32","shape":[1,8],"data":[0,0,0,0,0,0,0,0]}]}).to_string().into_bytes(),
            "shape",
        ),
    ];
    for (body, expected) in cases {
        let response = post(f.at("sme"), "/invocations", &body);
        let shown = String::from_utf8_lossy(&body)
            .chars()
            .take(60)
            .collect::<String>();
        ensure!(
            response.status == 400,
            "{shown}: {} {}",
            response.status,
            response.text()
        );
        let error = response.error();
        ensure!(error.contains(expected), "{shown}: {error}");
    }
    ensure!(
        get(f.at("sme"), "/ping").status == 200,
        "not serving after bad bodies"
    );
    Ok(())
}

fn unknown_default_model_is_404(f: &Fixture) -> Result<(), Failed> {
    let response = post_json(
        f.at("mme"),
        "/invocations",
        &add_sub_json(&[0; 16], &[0; 16]),
    );
    ensure!(
        response.status == 404,
        "{} {}",
        response.status,
        response.text()
    );
    let error = response.error();
    ensure!(
        error.contains("unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"),
        "message: {error}"
    );
    Ok(())
}

fn decoupled_model_is_refused_on_infer(f: &Fixture) -> Result<(), Failed> {
    let body = json!({"inputs":[{"name":"N","datatype":"INT32","shape":[1],"data":[3]}]});
    let response = post_json(f.at("decoupled"), "/invocations", &body);
    ensure!(
        response.status == 501,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error().contains("decoupled transaction policy"),
        "{}",
        response.text()
    );
    Ok(())
}

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
    Ok(())
}

fn unknown_routes_are_404_and_wrong_methods_405(f: &Fixture) -> Result<(), Failed> {
    for path in [
        "/",
        "/pingx",
        "/invocations/x",
        "/models/a/b/c",
        "/v2/models/add_sub/infer",
    ] {
        let response = get(f.at("sme"), path);
        ensure!(response.status == 404, "{path}: {}", response.status);
        ensure!(!response.error().is_empty(), "{path}");
    }
    let cases = [
        ("POST", "/ping", "GET"),
        ("GET", "/invocations", "POST"),
        ("PUT", "/models", "GET, POST"),
        ("POST", "/models/x", "GET, DELETE"),
        ("GET", "/models/x/invoke", "POST"),
        ("DELETE", "/execution-parameters", "GET"),
    ];
    for (method, path, allow) in cases {
        let response = request(f.at("sme"), method, path, &[], b"");
        ensure!(
            response.status == 405,
            "{method} {path}: {}",
            response.status
        );
        ensure!(
            response.header("allow") == Some(allow),
            "{method} {path}: {:?}",
            response.headers
        );
    }
    Ok(())
}

fn bodies_over_the_limit_are_413(f: &Fixture) -> Result<(), Failed> {
    let big = vec![b' '; 2048];
    let response = post(f.at("small"), "/invocations", &big);
    ensure!(
        response.status == 413,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(response.error().contains("1024"), "{}", response.text());
    // Chunked, without Content-Length: refused while reading.
    let mut chunked = format!(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        big.len()
    )
    .into_bytes();
    chunked.extend_from_slice(&big);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let response = raw(f.at("small"), &chunked);
    ensure!(
        response.status == 413,
        "chunked: {} {}",
        response.status,
        response.text()
    );
    ensure_sums(
        &post_json(
            f.at("small"),
            "/invocations",
            &add_sub_json(&[1; 16], &[2; 16]),
        ),
        &[1; 16],
        &[2; 16],
    )
}

/// `body` sent chunked, `chunk` bytes per chunk.
fn chunked_request(body: &[u8], chunk: usize) -> Vec<u8> {
    let mut bytes = b"POST /invocations HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
        Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        .to_vec();
    for piece in body.chunks(chunk) {
        bytes.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        bytes.extend_from_slice(piece);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"0\r\n\r\n");
    bytes
}

/// More than 65,536 non-empty chunks is 400 with Triton's message, whatever the body; as many
/// as the bound allows are read as usual.
fn bodies_in_too_many_chunks_are_400(f: &Fixture) -> Result<(), Failed> {
    let request = add_sub_json(&[1; 16], &[2; 16]).to_string();
    // The same JSON, padded with whitespace to 65,537 bytes.
    let padded = |len: usize| format!("{request}{}", " ".repeat(len - request.len()));
    let response = raw(f.at("sme"), &chunked_request(padded(65_537).as_bytes(), 1));
    ensure!(
        response.status == 400,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error()
            == "Chunked request body exceeds maximum of 65536 non-empty chunks. Send fewer or \
                larger HTTP chunks.",
        "{}",
        response.text()
    );
    let at_the_bound = raw(f.at("sme"), &chunked_request(padded(65_536).as_bytes(), 1));
    ensure_sums(&at_the_bound, &[1; 16], &[2; 16])?;
    // One chunk, and a body with a length in many TCP writes, are not chunk-counted.
    ensure_sums(
        &raw(
            f.at("sme"),
            &chunked_request(padded(200_000).as_bytes(), 200_000),
        ),
        &[1; 16],
        &[2; 16],
    )
}

/// Shapes that hold no data but describe enormous tensors (the python backend's stub died of
/// `[0, 2^63-1]`), and negative dimensions: 400 naming the input and the shape, from v2 JSON
/// and the binary extension alike, and the model serves the next request.
fn hostile_shapes_are_400_and_the_model_keeps_serving(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("identity");
    let good = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1.5, -2.0]}]});
    let shapes = [
        json!([0, i64::MAX]),
        json!([i64::MAX, 0]),
        json!([0, 1_i64 << 41]),
        json!([0, 1 << 30, 1 << 30]),
        json!([1 << 21, 1 << 20]),
        json!([-1, 2]),
        json!([0, -5]),
    ];
    for shape in &shapes {
        let hostile =
            json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape, "data": []}]});
        let header = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape,
            "parameters": {"binary_data_size": 0}}]})
        .to_string();
        let binary = format!(
            "application/vnd.sagemaker-triton.binary+json;json-header-size={}",
            header.len()
        );
        let sent = [
            ("json", post_json(at, "/invocations", &hostile)),
            (
                "binary",
                request(
                    at,
                    "POST",
                    "/invocations",
                    &[("Content-Type", binary.as_str())],
                    header.as_bytes(),
                ),
            ),
        ];
        for (how, response) in sent {
            let wanted = format!(
                "input 'INPUT0' has an invalid shape {:?}",
                shape
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_i64().unwrap())
                    .collect::<Vec<_>>()
            );
            ensure!(
                response.status == 400 && response.error().contains(&wanted),
                "{shape} as {how}: {} {}",
                response.status,
                response.text()
            );
            let next = post_json(at, "/invocations", &good);
            ensure!(
                next.status == 200 && next.json()["outputs"][0]["data"] == json!([1.5, -2.0]),
                "after {shape} as {how}: {} {}",
                next.status,
                next.text()
            );
            ensure!(
                get(at, "/ping").status == 200,
                "ping after {shape} as {how}"
            );
        }
    }
    // Zero-element tensors within the bound still reach the model.
    let empty = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [0, 1 << 20], "data": []}]});
    let response = post_json(at, "/invocations", &empty);
    ensure!(
        response.status == 200 && response.json()["outputs"][0]["shape"] == json!([0, 1 << 20]),
        "{} {}",
        response.status,
        response.text()
    );
    Ok(())
}

fn error_bodies_hide_server_paths(f: &Fixture) -> Result<(), Failed> {
    let body =
        json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1.0]}]});
    let failed = post_json(f.at("failing"), "/invocations", &body);
    ensure!(failed.status >= 400, "exec_fail answered {}", failed.status);
    let error = failed.error();
    ensure!(
        error.contains("exec_fail: this model always fails"),
        "the model's own message is kept: {error}"
    );
    let repository = models_dir().display().to_string();
    ensure!(
        !error.contains(&repository) && !error.contains(env!("CARGO_MANIFEST_DIR")),
        "the error names a server folder: {error}"
    );
    ensure!(
        error.contains("<model repository>/exec_fail/1/model.py"),
        "the traceback keeps the file inside the repository: {error}"
    );
    let ping = get(f.at("failing"), "/ping");
    ensure!(ping.status == 200, "ping after: {}", ping.status);
    Ok(())
}

fn restricted_apis_need_their_header(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("restricted");
    let body = add_sub_json(&[1; 16], &[1; 16]).to_string();
    // (method, path, body, the header and value that open it)
    type Case<'a> = (&'a str, &'a str, &'a [u8], (&'a str, &'a str));
    // Every route of every category.
    let cases: [Case; 8] = [
        ("GET", "/ping", b"", ("x-health", "h1")),
        ("POST", "/invocations", body.as_bytes(), ("x-key", "k1")),
        ("GET", "/models", b"", ("x-admin", "let-me-in")),
        ("POST", "/models", b"{}", ("x-admin", "let-me-in")),
        ("GET", "/models/none", b"", ("x-admin", "let-me-in")),
        ("DELETE", "/models/none", b"", ("x-admin", "let-me-in")),
        ("POST", "/plugins/reload", b"", ("x-admin", "let-me-in")),
        ("POST", "/models/none/invoke", b"{}", ("x-key", "k1")),
    ];
    for (method, path, body, (header, value)) in cases {
        let refused = request(at, method, path, &[], body);
        ensure!(refused.status == 403, "{method} {path}: {}", refused.status);
        let error = refused.error();
        ensure!(
            error.contains("This API is restricted") && error.contains(header),
            "{error}"
        );
        let wrong = request(at, method, path, &[(header, "wrong-secret")], body);
        ensure!(
            wrong.status == 403,
            "{method} {path} with a wrong value: {}",
            wrong.status
        );
        ensure!(
            !wrong.text().contains("wrong-secret") && !wrong.text().contains(value),
            "the refusal echoes a header value: {}",
            wrong.text()
        );
        let allowed = request(at, method, path, &[(header, value)], body);
        ensure!(
            allowed.status != 403,
            "{method} {path} with the header: {}",
            allowed.status
        );
    }
    Ok(())
}

fn execution_parameters(f: &Fixture) -> Result<(), Failed> {
    let response = get(f.at("sme"), "/execution-parameters");
    ensure!(response.status == 200, "{}", response.status);
    ensure!(
        response.json()
            == json!({"MaxConcurrentTransforms":1,"BatchStrategy":"MULTI_RECORD","MaxPayloadInMB":6}),
        "{}",
        response.text()
    );
    Ok(())
}

/// Puts test model `model` at `<root>/<hash>/model` (config.pbtxt at the url root).
fn place(root: &Path, hash: &str, model: &str) -> String {
    let url = root.join(hash).join("model");
    std::fs::create_dir_all(url.parent().unwrap()).unwrap();
    copy_model(model, url.parent().unwrap(), "model");
    url.display().to_string()
}

fn load(at: SocketAddr, name: &str, url: &str, target: Option<&str>) -> HttpResponse {
    let body = json!({"model_name": name, "url": url}).to_string();
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(target) = target {
        headers.push(("X-Amzn-SageMaker-Target-Model", target));
    }
    request(at, "POST", "/models", &headers, body.as_bytes())
}

fn invoke_sums(at: SocketAddr, name: &str) -> Result<(), Failed> {
    let a: Vec<i32> = (0..16).collect();
    let b = vec![10; 16];
    ensure_sums(
        &post_json(at, &format!("/models/{name}/invoke"), &add_sub_json(&a, &b)),
        &a,
        &b,
    )
}

fn listed(at: SocketAddr) -> Vec<(String, String)> {
    let json = get(at, "/models").json();
    json["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["modelName"].as_str().unwrap().into(),
                m["modelUrl"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn mme_load_list_get_invoke_unload(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let root = f.models_root.path();
    let url = place(root, "adder1", "add_sub");
    let response = load(at, "adder1", &url, None);
    ensure!(
        response.status == 200 && response.body.is_empty(),
        "load: {} {}",
        response.status,
        response.text()
    );
    let repository = root.join("adder1").display().to_string();
    ensure!(
        listed(at) == [("adder1".to_string(), repository.clone())],
        "{:?}",
        listed(at)
    );
    let got = get(at, "/models/adder1");
    ensure!(got.status == 200, "get {}", got.status);
    ensure!(
        got.json() == json!({"modelName": "adder1", "modelUrl": repository}),
        "{}",
        got.text()
    );
    invoke_sums(at, "adder1")?;

    let again = load(at, "adder1", &url, None);
    ensure!(
        again.status == 409,
        "second load: {} {}",
        again.status,
        again.text()
    );

    let started = Instant::now();
    let unloaded = request(at, "DELETE", "/models/adder1", &[], b"");
    ensure!(
        unloaded.status == 200 && unloaded.body.is_empty(),
        "unload: {} {}",
        unloaded.status,
        unloaded.text()
    );
    ensure!(
        started.elapsed() < Duration::from_secs(20),
        "unload took {:?}",
        started.elapsed()
    );
    ensure!(listed(at).is_empty(), "{:?}", listed(at));
    for (method, path) in [
        ("GET", "/models/adder1"),
        ("DELETE", "/models/adder1"),
        ("POST", "/models/adder1/invoke"),
    ] {
        let response = request(at, method, path, &[], b"{}");
        ensure!(
            response.status == 404,
            "{method} {path}: {}",
            response.status
        );
    }
    // Nothing leaked: the same url loads again under the same name.
    ensure!(
        load(at, "adder1", &url, None).status == 200,
        "reload failed"
    );
    invoke_sums(at, "adder1")?;
    ensure!(
        request(at, "DELETE", "/models/adder1", &[], b"").status == 200,
        "second unload"
    );
    Ok(())
}

fn mme_list_pages(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme_paged");
    let root = f.models_root.path();
    let names = ["page_a", "page_b", "page_c"];
    for name in names {
        let response = load(at, name, &place(root, name, "identity_fp32"), None);
        ensure!(response.status == 200, "load {name}: {}", response.text());
    }
    let first = get(at, "/models").json();
    ensure!(
        first["models"].as_array().map(Vec::len) == Some(2),
        "{first}"
    );
    let token = first["nextPageToken"]
        .as_str()
        .ok_or("no nextPageToken")?
        .to_owned();
    let second = get(at, &format!("/models?next_page_token={token}")).json();
    ensure!(
        second["models"].as_array().map(Vec::len) == Some(1),
        "{second}"
    );
    ensure!(second.get("nextPageToken").is_none(), "{second}");
    let mut seen: Vec<String> = first["models"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["models"].as_array().unwrap())
        .map(|m| m["modelName"].as_str().unwrap().to_owned())
        .collect();
    seen.sort();
    ensure!(seen == names, "{seen:?}");
    for name in names {
        ensure!(
            request(at, "DELETE", &format!("/models/{name}"), &[], b"").status == 200,
            "unload {name}"
        );
    }
    Ok(())
}

fn mme_refuses_bad_urls_and_bodies(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let root = f.models_root.path();
    let good = place(root, "urlcheck", "add_sub");
    let outside = tempfile::tempdir()?;
    copy_model("add_sub", outside.path(), "model");
    std::fs::create_dir_all(root.join("escape"))?;
    std::os::unix::fs::symlink(outside.path().join("model"), root.join("escape/model"))?;
    let r = root.display();
    for url in [
        format!("{r}/urlcheck/model/../../../etc/model"),
        format!("{r}/../x/model"),
        "/dev/shm/abc/model".to_string(),
        "/proc/self/cwd/model".to_string(),
        format!("{}/model", outside.path().display()),
        format!("{r}/urlcheck"),
        format!("{r}/url-check/model"),
        format!("{r}/escape/model"),
        format!("{r}/missing/model"),
        "relative/model".to_string(),
    ] {
        let response = load(at, "urlcheck", &url, None);
        ensure!(
            response.status == 400,
            "{url}: {} {}",
            response.status,
            response.text()
        );
        ensure!(!response.error().is_empty(), "{url}");
    }
    for body in [
        r#"{"model_name":"urlcheck","url""#.to_string(),
        r#"{"model_name":5,"url":"x"}"#.to_string(),
        format!(r#"{{"model_name":"urlcheck","url":["{good}"]}}"#),
        r#"{"url":"x"}"#.to_string(),
        "[]".to_string(),
        String::new(),
    ] {
        let response = request(at, "POST", "/models", &[], body.as_bytes());
        ensure!(
            response.status == 400,
            "{body}: {} {}",
            response.status,
            response.text()
        );
        ensure!(get(at, "/ping").status == 200, "not serving after {body}");
    }
    ensure!(listed(at).is_empty(), "{:?}", listed(at));
    // The good url still loads after all that.
    ensure!(
        load(at, "urlcheck", &good, None).status == 200,
        "good url refused"
    );
    ensure!(
        request(at, "DELETE", "/models/urlcheck", &[], b"").status == 200,
        "unload"
    );
    Ok(())
}

fn mme_target_model_header_is_remembered(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let url = place(f.models_root.path(), "targeted", "add_sub");
    let response = load(at, "targeted", &url, Some("my-model.tar.gz"));
    ensure!(response.status == 200, "{}", response.text());
    ensure!(
        f.engine
            .model_state("my-model.tar.gz")?
            .is_some_and(|s| s == ModelState::Ready),
        "not loaded under the target name"
    );
    ensure!(
        listed(at).iter().any(|(n, _)| n == "targeted"),
        "{:?}",
        listed(at)
    );
    invoke_sums(at, "targeted")?;
    let started = Instant::now();
    let unloaded = request(at, "DELETE", "/models/targeted", &[], b"");
    ensure!(unloaded.status == 200, "{}", unloaded.text());
    ensure!(
        started.elapsed() < Duration::from_secs(20),
        "unload waited {:?}",
        started.elapsed()
    );
    ensure!(
        f.engine.model_state("my-model.tar.gz")? != Some(ModelState::Ready),
        "still loaded"
    );
    Ok(())
}

fn mme_ensemble_is_detected(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let url = f.models_root.path().join("ens1/model");
    copy_model("add_sub", &url, "adder_step");
    std::fs::create_dir_all(url.join("pipeline/1"))?;
    std::fs::write(
        url.join("pipeline/config.pbtxt"),
        r#"platform: "ensemble"
max_batch_size: 0
input [ { name: "A", data_type: TYPE_INT32, dims: [ -1, 16 ] }, { name: "B", data_type: TYPE_INT32, dims: [ -1, 16 ] } ]
output [ { name: "SUM", data_type: TYPE_INT32, dims: [ -1, 16 ] } ]
ensemble_scheduling { step [ { model_name: "adder_step", model_version: -1,
  input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" }
  output_map { key: "OUTPUT0" value: "A_PLUS_B" } },
  { model_name: "adder_step", model_version: -1,
  input_map { key: "INPUT0" value: "A_PLUS_B" } input_map { key: "INPUT1" value: "B" }
  output_map { key: "OUTPUT0" value: "SUM" } } ] }
"#,
    )?;
    let response = load(at, "ens1", &url.display().to_string(), None);
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        listed(at) == [("ens1".to_string(), url.display().to_string())],
        "{:?}",
        listed(at)
    );
    let body = json!({"inputs": [
        {"name": "A", "datatype": "INT32", "shape": [1, 16], "data": vec![2; 16]},
        {"name": "B", "datatype": "INT32", "shape": [1, 16], "data": vec![3; 16]}]});
    let response = post_json(at, "/models/ens1/invoke", &body);
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.json()["outputs"][0]["data"] == json!(vec![8; 16]),
        "{}",
        response.text()
    );
    // The steps' parameters arrive merged; each key is answered once.
    let repeated = common::duplicate_keys(&response.text());
    ensure!(
        repeated.is_empty(),
        "keys {repeated:?} repeated in {}",
        response.text()
    );
    ensure!(
        request(at, "DELETE", "/models/ens1", &[], b"").status == 200,
        "unload"
    );
    Ok(())
}

fn mme_out_of_memory_is_507_and_failures_400(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let root = f.models_root.path();
    let oom = load(at, "oom1", &place(root, "oom1", "oom_init"), None);
    ensure!(oom.status == 507, "oom: {} {}", oom.status, oom.text());
    ensure!(oom.error().contains("CUDA out of memory"), "{}", oom.text());
    let failing = load(at, "flaky", &place(root, "flaky_bad", "init_fail"), None);
    ensure!(
        failing.status == 400,
        "failing: {} {}",
        failing.status,
        failing.text()
    );
    ensure!(
        failing.error().contains("refuses to initialise"),
        "{}",
        failing.text()
    );
    ensure!(listed(at).is_empty(), "{:?}", listed(at));
    // The same name loads a correct model afterwards: the failed load left nothing behind.
    let good = load(at, "flaky", &place(root, "flaky_good", "add_sub"), None);
    ensure!(good.status == 200, "good: {} {}", good.status, good.text());
    invoke_sums(at, "flaky")?;
    // Invoke errors on the MME path are 400.
    let bad = post(at, "/models/flaky/invoke", b"{oops");
    ensure!(bad.status == 400, "bad invoke: {}", bad.status);
    ensure!(
        request(at, "DELETE", "/models/flaky", &[], b"").status == 200,
        "unload"
    );
    Ok(())
}

fn mme_concurrent_loads_invokes_unloads(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let root = f.models_root.path().to_path_buf();
    let names: Vec<String> = (0..4).map(|i| format!("conc{i}")).collect();
    let urls: Vec<String> = names.iter().map(|n| place(&root, n, "add_sub")).collect();
    // Load all at once.
    let outcomes: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .zip(&urls)
            .map(|(n, u)| s.spawn(move || load(at, n, u, None).status))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    ensure!(outcomes.iter().all(|&s| s == 200), "loads: {outcomes:?}");
    // Invoke two while unloading the other two.
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (i, name) in names.iter().enumerate() {
            handles.push(s.spawn(move || {
                if i % 2 == 0 {
                    (0..5).try_for_each(|_| {
                        invoke_sums(at, name).map_err(|e| format!("{name}: {e:?}"))
                    })
                } else {
                    let status = request(at, "DELETE", &format!("/models/{name}"), &[], b"").status;
                    if status == 200 {
                        Ok(())
                    } else {
                        Err(format!("unload {name}: {status}"))
                    }
                }
            }));
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for result in results {
        result.map_err(Failed::from)?;
    }
    let mut left: Vec<String> = listed(at).into_iter().map(|(n, _)| n).collect();
    left.sort();
    ensure!(left == ["conc0", "conc2"], "{left:?}");
    for name in ["conc0", "conc2"] {
        ensure!(
            request(at, "DELETE", &format!("/models/{name}"), &[], b"").status == 200,
            "unload {name}"
        );
    }
    ensure!(listed(at).is_empty(), "{:?}", listed(at));
    Ok(())
}

/// A client that sends a load and hangs up at once: the load still completes, so the name is
/// not left reserved and the model can be listed, used and unloaded.
fn mme_load_finishes_when_the_client_leaves(f: &Fixture) -> Result<(), Failed> {
    use std::io::Write;
    let at = f.at("mme");
    let url = place(f.models_root.path(), "leaver", "add_sub");
    let body = json!({"model_name": "leaver", "url": url}).to_string();
    let mut stream = std::net::TcpStream::connect(at)?;
    write!(
        stream,
        "POST /models HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    std::thread::sleep(Duration::from_millis(50));
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !listed(at).iter().any(|(n, _)| n == "leaver") {
        ensure!(
            Instant::now() < deadline,
            "the abandoned load never completed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    invoke_sums(at, "leaver")?;
    ensure!(
        request(at, "DELETE", "/models/leaver", &[], b"").status == 200,
        "unload"
    );
    Ok(())
}

fn ping_ready_fails_but_live_passes_after_a_failed_load(f: &Fixture) -> Result<(), Failed> {
    let error = f.runtime.block_on(f.engine.load_model("init_fail")).err();
    ensure!(error.is_some(), "init_fail loaded");
    let ready = get(f.at("sme"), "/ping");
    ensure!(ready.status == 400, "ready-mode ping: {}", ready.status);
    ensure!(ready.error().contains("not ready"), "{}", ready.text());
    let live = get(f.at("live"), "/ping");
    ensure!(live.status == 200, "live-mode ping: {}", live.status);
    Ok(())
}
