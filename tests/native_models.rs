//! What only native models show, over real HTTP on 127.0.0.1 against the real Triton core:
//! models of trident's own backend (backend/, loaded into the core's process like ONNX or
//! TensorRT models) hand their outputs back through trident's response allocator, batch
//! concurrent requests with Triton's dynamic batcher, stream from inside the process and stop
//! when cancelled, fail their load without taking the endpoint down, and report out-of-memory
//! as SageMaker expects. After each hostile or failing case, a good request still succeeds.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libtest_mimic::Failed;
use serde_json::{Value, json};
use trident::config::{Config, InferenceType};
use trident::engine::{Engine, InFlight, ModelState};

use common::http_client::{get, post_json, request};
use common::{Check, configs, copy_model, models_dir};

use trident::protocol::binary_header::BINARY_MIME as BINARY;

struct Fixture {
    /// The servers and their core (`f.at(name)`, `f.engine`, `f.runtime`).
    servers: common::servers::Servers,
    models_root: tempfile::TempDir,
}

impl std::ops::Deref for Fixture {
    type Target = common::servers::Servers;

    fn deref(&self) -> &common::servers::Servers {
        &self.servers
    }
}

fn main() -> std::process::ExitCode {
    let checks: &[Check<Fixture>] = checks![
        every_dtype_and_size_round_trips_through_the_allocator,
        sixty_four_mebibytes_round_trip_binary,
        dynamic_batching_merges_concurrent_requests_without_mixing_them,
        a_cancelled_native_stream_stops_and_frees_its_instance,
        interleaved_sequences_keep_separate_state_in_the_model,
        out_of_memory_on_invoke_is_507,
        classification_answers_top_classes_with_labels,
        // Last: it leaves a failed load in the shared core, which is then not ready.
        a_failed_native_load_leaves_the_endpoint_serving,
    ];
    common::run_checks(start(), checks)
}

fn start() -> Fixture {
    let engine = common::start_engine(
        vec![models_dir()],
        &["native_identity", "native_repeat", "native_sequence_sum"],
    );
    let mut servers = common::servers::Servers::new(engine);
    let models_root = tempfile::tempdir().unwrap();
    let deployments: Vec<(&'static str, Config)> = vec![
        (
            "identity",
            configs::with(configs::single_model("native_identity"), |c| {
                c.http.max_body_bytes = 80 * 1024 * 1024;
            }),
        ),
        (
            "repeat",
            Config {
                inference_type: InferenceType::GenerateStream,
                ..configs::single_model("native_repeat")
            },
        ),
        ("sequence", configs::single_model("native_sequence_sum")),
        ("broken", configs::single_model("native_load_fail")),
        ("mme", configs::multi_model(models_root.path())),
    ];
    for (name, config) in deployments {
        servers.add(name, config);
    }
    Fixture {
        servers,
        models_root,
    }
}

/// Every data type native_identity declares, with the byte size of one element (BYTES: one
/// serialized four-byte element).
const DTYPES: &[(&str, &str, usize)] = &[
    ("BOOL", "BOOL", 1),
    ("UINT8", "UINT8", 1),
    ("UINT16", "UINT16", 2),
    ("UINT32", "UINT32", 4),
    ("UINT64", "UINT64", 8),
    ("INT8", "INT8", 1),
    ("INT16", "INT16", 2),
    ("INT32", "INT32", 4),
    ("INT64", "INT64", 8),
    ("FP16", "FP16", 2),
    ("FP32", "FP32", 4),
    ("FP64", "FP64", 8),
    ("BF16", "BF16", 2),
    ("STRING", "BYTES", 0),
];

/// Posts `tensor` (`elements` elements of `datatype`) as `INPUT_<suffix>` to the identity
/// deployment in the binary format, asking for `OUTPUT_<suffix>` back in binary.
fn post_binary(
    f: &Fixture,
    suffix: &str,
    datatype: &str,
    elements: usize,
    tensor: &[u8],
) -> common::http_client::HttpResponse {
    let header = json!({
        "inputs": [{"name": format!("INPUT_{suffix}"), "shape": [1, elements], "datatype": datatype,
                    "parameters": {"binary_data_size": tensor.len()}}],
        "outputs": [{"name": format!("OUTPUT_{suffix}"), "parameters": {"binary_data": true}}]
    })
    .to_string();
    let mut body = header.clone().into_bytes();
    body.extend_from_slice(tensor);
    let content_type = format!("{BINARY};json-header-size={}", header.len());
    request(
        f.at("identity"),
        "POST",
        "/invocations",
        &[("Content-Type", &content_type)],
        &body,
    )
}

/// The JSON header and the binary tail of a binary response.
fn split_binary(response: &common::http_client::HttpResponse) -> Result<(Value, &[u8]), Failed> {
    let content_type = response.header("content-type").ok_or("no content type")?;
    let size: usize = content_type
        .strip_prefix(&format!("{BINARY};json-header-size="))
        .ok_or_else(|| format!("content type {content_type}"))?
        .parse()?;
    Ok((
        serde_json::from_slice(&response.body[..size])?,
        &response.body[size..],
    ))
}

/// A tensor of `elements` elements of `size` bytes (BYTES: each a serialized 1-byte string),
/// with bytes that differ element to element and are valid for every type (BOOL: 0 or 1).
fn tensor(dtype: &str, size: usize, elements: usize, seed: u64) -> Vec<u8> {
    let random = common::pseudo_random(seed, elements.max(1));
    match dtype {
        "BOOL" => (0..elements).map(|i| (random[i] & 1) as u8).collect(),
        "STRING" => (0..elements)
            .flat_map(|i| {
                let mut element = 1u32.to_le_bytes().to_vec();
                element.push(b'a' + (random[i] % 26) as u8);
                element
            })
            .collect(),
        _ => (0..elements * size)
            .map(|i| (random[i / size.max(1)] >> (8 * (i % 4))) as u8)
            .collect(),
    }
}

fn every_dtype_and_size_round_trips_through_the_allocator(f: &Fixture) -> Result<(), Failed> {
    for &(suffix, datatype, size) in DTYPES {
        for elements in [0usize, 1, 7, 4096, 300_000] {
            let data = tensor(suffix, size, elements, elements as u64 + size as u64);
            let response = post_binary(f, suffix, datatype, elements, &data);
            ensure!(
                response.status == 200,
                "{datatype} x{elements}: {} {}",
                response.status,
                response.text()
            );
            let (json, tail) = split_binary(&response)?;
            let output = &json["outputs"][0];
            ensure!(
                output["name"] == format!("OUTPUT_{suffix}") && output["datatype"] == datatype,
                "{datatype} x{elements}: {json}"
            );
            ensure!(
                output["shape"] == json!([1, elements]),
                "{datatype} x{elements}: shape {}",
                output["shape"]
            );
            ensure!(
                tail == &data[..],
                "{datatype} x{elements}: {} bytes back, {} sent, or different",
                tail.len(),
                data.len()
            );
        }
    }
    Ok(())
}

fn sixty_four_mebibytes_round_trip_binary(f: &Fixture) -> Result<(), Failed> {
    let elements = 64 * 1024 * 1024;
    let data = tensor("UINT8", 1, elements, 64);
    let response = post_binary(f, "UINT8", "UINT8", elements, &data);
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.error()
    );
    let (_, tail) = split_binary(&response)?;
    ensure!(
        tail.len() == data.len(),
        "{} bytes back of {}",
        tail.len(),
        data.len()
    );
    ensure!(tail == &data[..], "the 64 MiB tensor came back different");
    Ok(())
}

fn dynamic_batching_merges_concurrent_requests_without_mixing_them(
    f: &Fixture,
) -> Result<(), Failed> {
    const CLIENTS: i64 = 8;
    let at = f.at("identity");
    let mut merged = 0;
    // The batcher waits up to 20 ms for company; a round of simultaneous clients is merged
    // unless the machine stalls for that long, so a few rounds make it certain.
    for round in 0..5i64 {
        let barrier = Arc::new(std::sync::Barrier::new(CLIENTS as usize));
        let clients: Vec<_> = (0..CLIENTS)
            .map(|client| {
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let values: Vec<i64> = (0..3).map(|i| round * 1000 + client * 10 + i).collect();
                    let body = json!({
                        "inputs": [{"name": "INPUT_INT64", "datatype": "INT64", "shape": [1, 3], "data": values}],
                        "outputs": [{"name": "OUTPUT_INT64"}, {"name": "BATCH_REQUESTS"}]
                    });
                    barrier.wait();
                    (values, post_json(at, "/invocations", &body))
                })
            })
            .collect();
        for client in clients {
            let (values, response) = client.join().map_err(|_| "a client panicked")?;
            ensure!(
                response.status == 200,
                "{} {}",
                response.status,
                response.text()
            );
            let json = response.json();
            let outputs = json["outputs"].as_array().ok_or("no outputs")?;
            let find = |name: &str| outputs.iter().find(|o| o["name"] == name);
            let back = &find("OUTPUT_INT64").ok_or("no OUTPUT_INT64")?["data"];
            ensure!(
                back == &json!(values),
                "sent {values:?}, got {back}: mixed with another request"
            );
            let requests = find("BATCH_REQUESTS").ok_or("no BATCH_REQUESTS")?["data"][0]
                .as_i64()
                .ok_or("BATCH_REQUESTS is not a number")?;
            ensure!(
                (1..=CLIENTS).contains(&requests),
                "an execution of {requests} requests"
            );
            merged = merged.max(requests);
        }
        if merged > 1 {
            return Ok(());
        }
    }
    Err(format!("5 rounds of {CLIENTS} simultaneous requests, never merged").into())
}

fn a_cancelled_native_stream_stops_and_frees_its_instance(f: &Fixture) -> Result<(), Failed> {
    // 100000 responses, 20 ms apart: over half an hour unless the cancel reaches the model.
    let body = json!({"N": 100_000}).to_string();
    let mut stream = TcpStream::connect(f.at("repeat"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while seen.windows(6).filter(|w| w == b"data: ").count() < 3 {
        let n = stream.read(&mut buffer)?;
        ensure!(
            n > 0,
            "the stream ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buffer[..n]);
    }
    drop(stream);
    // The model has one instance: the next stream starts only once the cancelled one let go.
    let started = Instant::now();
    let response = post_json(f.at("repeat"), "/invocations", &json!({"N": 3}));
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    let text = response.text();
    ensure!(text.matches("data: ").count() == 3, "{text}");
    ensure!(
        started.elapsed() < Duration::from_secs(120),
        "the next stream waited {:?}: the cancelled one kept its instance",
        started.elapsed()
    );
    // Nothing of either stream is left in the core: requests released, output buffers freed.
    let deadline = Instant::now() + Duration::from_secs(30);
    while f.engine.in_flight() != InFlight::default() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    ensure!(
        f.engine.in_flight() == InFlight::default(),
        "left in the core: {:?}",
        f.engine.in_flight()
    );
    Ok(())
}

/// One step of a sequence on the `sequence` deployment: its status and the running sum it answered.
fn step(f: &Fixture, id: u64, value: i32, start: bool, end: bool) -> (u16, String, Option<i64>) {
    let response = post_json(
        f.at("sequence"),
        "/invocations",
        &json!({
            "parameters": {"sequence_id": id, "sequence_start": start, "sequence_end": end},
            "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [value]}]
        }),
    );
    let sum = if response.status == 200 {
        response.json()["outputs"][0]["data"][0].as_i64()
    } else {
        None
    };
    (response.status, response.text(), sum)
}

fn interleaved_sequences_keep_separate_state_in_the_model(f: &Fixture) -> Result<(), Failed> {
    // Two sequences interleaved: each sum is its own (the model keeps them, the core's sequence
    // batcher gives each id a slot and passes its start and end flags). Both are open at once,
    // which needs a slot each: the model batches (32 rows, so 32 slots).
    let steps = [
        (41, 1, true, false, 1),
        (42, 100, true, false, 100),
        (41, 2, false, false, 3),
        (42, 200, false, false, 300),
        (41, 3, false, true, 6),
        (42, -50, false, true, 250),
    ];
    for (id, value, start, end, expected) in steps {
        let (status, text, sum) = step(f, id, value, start, end);
        ensure!(status == 200, "sequence {id}: {status} {text}");
        ensure!(
            sum == Some(expected),
            "sequence {id}: sum {sum:?}, expected {expected}: {text}"
        );
    }
    // An ended sequence is gone: without a new start the core refuses it, with a clear 400.
    let (status, text, _) = step(f, 41, 5, false, false);
    ensure!(
        status == 400,
        "an ended sequence continued: {status} {text}"
    );
    ensure!(text.contains("START"), "{text}");
    // Started again, it begins from zero; a request outside any sequence is refused too.
    let (status, text, sum) = step(f, 41, 5, true, true);
    ensure!(status == 200 && sum == Some(5), "{status} {text}");
    let outside = post_json(
        f.at("sequence"),
        "/invocations",
        &json!({"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [1]}]}),
    );
    ensure!(
        outside.status == 400,
        "no sequence id: {} {}",
        outside.status,
        outside.text()
    );
    Ok(())
}

/// A model of the test models copied under the models root as `folder/model`; its url.
fn place(f: &Fixture, folder: &str, model: &str) -> String {
    let parent = f.models_root.path().join(folder);
    copy_model(model, &parent, "model");
    parent.join("model").display().to_string()
}

fn load(at: SocketAddr, name: &str, url: &str) -> common::http_client::HttpResponse {
    let body = json!({"model_name": name, "url": url}).to_string();
    request(at, "POST", "/models", &[], body.as_bytes())
}

fn invoke_identity_fp32(at: SocketAddr, name: &str) -> common::http_client::HttpResponse {
    post_json(
        at,
        &format!("/models/{name}/invoke"),
        &json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [2.5]}]}),
    )
}

/// Triton's `classification` output parameter (what `tritonclient`'s `class_count` sends; issue
/// 43, case 10: it was refused): the output's top k as `value:index:label` strings, labels from
/// the model's label file, in JSON and as binary; an output of a type with no order is 400.
fn classification_answers_top_classes_with_labels(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let url = place(f, "labelled", "native_identity_fp32");
    let folder = std::path::Path::new(&url);
    let config = folder.join("config.pbtxt");
    let text = std::fs::read_to_string(&config)?.replace(
        r#"output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1, -1 ] } ]"#,
        r#"output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ -1, -1 ], label_filename: "labels.txt" } ]"#,
    );
    ensure!(text.contains("label_filename"), "{text}");
    std::fs::write(&config, text)?;
    std::fs::write(folder.join("labels.txt"), "cat\ndog\nfish\nbird\n")?;
    let loaded = load(at, "labelled", &url);
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    let ask = |parameters: serde_json::Value| {
        post_json(
            at,
            "/models/labelled/invoke",
            &json!({
                "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 4], "data": [0.1, 0.7, 0.15, 0.05]}],
                "outputs": [{"name": "OUTPUT0", "parameters": parameters}],
            }),
        )
    };
    let response = ask(json!({"classification": 2}));
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    let output = &response.json()["outputs"][0];
    ensure!(
        output["datatype"] == "BYTES"
            && output["shape"] == json!([2])
            && output["data"] == json!(["0.700000:1:dog", "0.150000:2:fish"]),
        "{output}"
    );
    let binary = ask(json!({"classification": 1, "binary_data": true}));
    ensure!(binary.status == 200, "{} {}", binary.status, binary.text());
    ensure!(
        binary.body.ends_with(b"\x0e\x00\x00\x000.700000:1:dog"),
        "{:?}",
        binary.text()
    );
    let refused = post_json(
        f.at("identity"),
        "/invocations",
        &json!({
            "inputs": [{"name": "INPUT_FP16", "datatype": "FP16", "shape": [1, 1], "data": [1.0]}],
            "outputs": [{"name": "OUTPUT_FP16", "parameters": {"classification": 1}}],
        }),
    );
    ensure!(
        refused.status == 400 && refused.error().contains("unsupported type 'FP16'"),
        "{} {}",
        refused.status,
        refused.text()
    );
    Ok(())
}

fn out_of_memory_on_invoke_is_507(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let loaded = load(at, "hungry", &place(f, "hungry", "native_oom"));
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    let response = post_json(
        at,
        "/models/hungry/invoke",
        &json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1.0]}]}),
    );
    ensure!(
        response.status == 507,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error().contains("out of memory"),
        "{}",
        response.error()
    );
    let loaded = load(at, "fine", &place(f, "fine", "native_identity_fp32"));
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    let after = invoke_identity_fp32(at, "fine");
    ensure!(
        after.status == 200,
        "after the 507: {} {}",
        after.status,
        after.text()
    );
    ensure!(
        after.json()["outputs"][0]["data"] == json!([2.5]),
        "{}",
        after.text()
    );
    Ok(())
}

fn a_failed_native_load_leaves_the_endpoint_serving(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let failed = load(at, "corrupt", &place(f, "corrupt", "native_load_fail"));
    ensure!(failed.status == 400, "{} {}", failed.status, failed.text());
    ensure!(
        failed.error().contains("the weights are corrupt"),
        "{}",
        failed.error()
    );
    ensure!(
        get(at, "/models/corrupt").status == 404,
        "a failed load is listed"
    );
    ensure!(
        get(at, "/ping").status == 200,
        "the endpoint stopped answering ping"
    );
    let loaded = load(at, "steady", &place(f, "steady", "native_identity_fp32"));
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    ensure!(
        invoke_identity_fp32(at, "steady").status == 200,
        "after a failed load"
    );

    // A single-model endpoint whose model failed its load is not healthy and says why.
    let state = f.load_in_core("native_load_fail");
    ensure!(state.is_err(), "native_load_fail loaded");
    let ping = get(f.at("broken"), "/ping");
    ensure!(
        ping.status != 200,
        "ping {} for a model that cannot serve",
        ping.status
    );
    let invoked = post_json(
        f.at("broken"),
        "/invocations",
        &json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1.0]}]}),
    );
    ensure!(
        (400..600).contains(&invoked.status) && !invoked.error().is_empty(),
        "{} {}",
        invoked.status,
        invoked.text()
    );
    ensure!(
        matches!(
            f.engine.model_state("native_load_fail")?,
            Some(ModelState::Unavailable(_)) | None
        ),
        "state {:?}",
        f.engine.model_state("native_load_fail")
    );
    // The other deployments on this core still infer. (Their /ping follows the core's strict
    // readiness, which a failed model in the shared core turns off: in a container, one core
    // serves one deployment. So this check runs last.)
    let good = post_json(
        f.at("identity"),
        "/invocations",
        &json!({"inputs": [{"name": "INPUT_INT32", "datatype": "INT32", "shape": [1, 1], "data": [7]}],
                "outputs": [{"name": "OUTPUT_INT32"}]}),
    );
    ensure!(
        good.status == 200,
        "the healthy endpoint: {} {}",
        good.status,
        good.text()
    );
    ensure!(
        good.json()["outputs"][0]["data"] == json!([7]),
        "{}",
        good.text()
    );
    Ok(())
}

impl Fixture {
    /// Asks the core to load `model`, as a deployment's start would.
    fn load_in_core(&self, model: &str) -> Result<(), trident::engine::EngineError> {
        self.runtime.block_on(self.engine.load_model(model))
    }
}
