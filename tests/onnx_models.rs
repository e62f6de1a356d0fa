//! The onnxruntime backend (backend/src/onnxruntime/), over real HTTP on 127.0.0.1 against the
//! real Triton core, on pretrained networks no one here wrote: PP-OCRv4's text detection and
//! recognition, from PyPI's rapidocr-onnxruntime wheel (scripts/install-test-clients fetches
//! them, pinned by digest). Every output is compared with ONNX Runtime's own Python
//! `InferenceSession` on the same inputs (tests/clients/onnx_models.py), single and batched,
//! through `/invocations` and multi-model loads; repositories are read as Triton's onnxruntime
//! backend reads them (docs/CONTRACT.md); broken models and bad requests are clear errors, and
//! the next request is served.

#[macro_use]
mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use libtest_mimic::Failed;
use serde_json::{Value, json};

use common::http_client::{HttpResponse, get, request};
use common::process::python_client;
use common::{Check, configs};
use trident::protocol::binary_header::BINARY_MIME as BINARY;

const DETECTION: &str = "ch_PP-OCRv4_det_infer.onnx";
const RECOGNITION: &str = "ch_PP-OCRv4_rec_infer.onnx";

struct Fixture {
    servers: common::servers::Servers,
    /// The pretrained models (target/test-models).
    pretrained: PathBuf,
    /// The small models tests/clients/onnx_models.py built.
    small: tempfile::TempDir,
    /// The core's repository (kept until the core stops).
    _repository: tempfile::TempDir,
    /// Where multi-model loads come from.
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
        text_detection_matches_onnx_runtime_single_and_batched,
        text_recognition_matches_onnx_runtime_with_a_configuration_of_its_own,
        resnet50_matches_onnx_runtime_through_a_multi_model_load,
        a_bert_base_sized_encoder_matches_onnx_runtime_with_padding,
        every_type_the_backend_carries_round_trips,
        a_multi_model_load_serves_a_bare_model_onnx_and_unloads,
        configurations_are_read_as_triton_reads_them,
        broken_models_fail_their_load_clearly_and_the_endpoint_serves_on,
        external_data_is_read_beside_the_model_and_nowhere_else,
        bad_requests_are_400_and_the_next_request_is_served,
        a_run_whose_client_left_is_stopped_and_its_instance_serves_again,
    ];
    common::run_checks(start(), checks)
}

fn start() -> Fixture {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pretrained = root.join("target/test-models");
    assert!(
        pretrained.join(DETECTION).is_file(),
        "no {}: run scripts/install-test-clients",
        pretrained.join(DETECTION).display()
    );
    let small = tempfile::tempdir().unwrap();
    python_client(
        "onnx_models.py",
        &format!("build:{}", small.path().display()),
        &json!({}),
    );
    python_client(
        "onnx_models.py",
        &format!("resnet50:{}", small.path().join("resnet50.onnx").display()),
        &json!({}),
    );
    python_client(
        "onnx_models.py",
        &format!("bert:{}", small.path().join("bert.onnx").display()),
        &json!({}),
    );
    let repository = tempfile::tempdir().unwrap();
    // Detection as a customer drops it in: a model.onnx and nothing else (Triton's auto-complete).
    place_file(
        &pretrained.join(DETECTION),
        &repository.path().join("det/1/model.onnx"),
    );
    // Recognition with a configuration of its own.
    place_file(
        &pretrained.join(RECOGNITION),
        &repository.path().join("rec/1/model.onnx"),
    );
    std::fs::write(
        repository.path().join("rec/config.pbtxt"),
        r#"platform: "onnxruntime_onnx"
max_batch_size: 8
input [ { name: "x", data_type: TYPE_FP32, dims: [ 3, 48, -1 ] } ]
output [ { name: "softmax_11.tmp_0", data_type: TYPE_FP32, dims: [ -1, 6625 ] } ]
dynamic_batching { }
"#,
    )
    .unwrap();
    place_file(
        &small.path().join("types.onnx"),
        &repository.path().join("types/1/model.onnx"),
    );
    let engine = common::start_engine(
        vec![repository.path().to_path_buf()],
        &["det", "rec", "types"],
    );
    let mut servers = common::servers::Servers::new(engine);
    let models_root = tempfile::tempdir().unwrap();
    let repo = repository.path().to_path_buf();
    servers.add("det", configs::single_model_in(repo.clone(), "det"));
    servers.add("rec", configs::single_model_in(repo.clone(), "rec"));
    servers.add("types", configs::single_model_in(repo, "types"));
    servers.add("mme", configs::multi_model(models_root.path()));
    Fixture {
        servers,
        pretrained,
        small,
        _repository: repository,
        models_root,
    }
}

/// Puts `from` at `to` (a hard link where the file system allows: the networks are hundreds of
/// megabytes), making its folders.
fn place_file(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

/// A tensor as both sides carry it: Triton's datatype, shape, raw little-endian bytes (BYTES:
/// the strings).
#[derive(Debug, Clone, PartialEq)]
struct Tensor {
    dtype: String,
    shape: Vec<i64>,
    data: Vec<u8>,
    strings: Vec<String>,
}

impl Tensor {
    fn fp32(shape: &[i64], values: &[f32]) -> Tensor {
        Tensor {
            dtype: "FP32".into(),
            shape: shape.to_vec(),
            data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            strings: Vec::new(),
        }
    }

    fn floats(&self) -> Vec<f32> {
        self.data
            .as_chunks::<4>()
            .0
            .iter()
            .map(|c| f32::from_le_bytes(*c))
            .collect()
    }

    /// The bytes Triton's binary format carries (BYTES: each string length-prefixed).
    fn wire(&self) -> Vec<u8> {
        if self.dtype != "BYTES" || self.strings.is_empty() {
            return self.data.clone();
        }
        let mut out = Vec::new();
        for s in &self.strings {
            out.extend_from_slice(&(s.len() as u32).to_le_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        out
    }
}

/// Pseudo-random values in [-1, 1), `count` of them, from `seed`.
fn values(seed: u64, count: usize) -> Vec<f32> {
    common::pseudo_random(seed, count)
        .into_iter()
        .map(|r| (r % 20_000) as f32 / 10_000.0 - 1.0)
        .collect()
}

/// Posts `inputs` to `path` in Triton's binary format, every output asked back in binary.
fn infer_raw(at: SocketAddr, path: &str, inputs: &[(&str, &Tensor)]) -> HttpResponse {
    let mut tail = Vec::new();
    let described: Vec<Value> = inputs
        .iter()
        .map(|(name, t)| {
            let bytes = t.wire();
            tail.extend_from_slice(&bytes);
            json!({"name": name, "datatype": t.dtype, "shape": t.shape,
                   "parameters": {"binary_data_size": bytes.len()}})
        })
        .collect();
    let header =
        json!({"inputs": described, "parameters": {"binary_data_output": true}}).to_string();
    let mut body = header.clone().into_bytes();
    body.extend_from_slice(&tail);
    let content_type = format!("{BINARY};json-header-size={}", header.len());
    request(at, "POST", path, &[("Content-Type", &content_type)], &body)
}

/// [`infer_raw`], expecting 200: the outputs by name.
fn infer(
    at: SocketAddr,
    path: &str,
    inputs: &[(&str, &Tensor)],
) -> Result<HashMap<String, Tensor>, Failed> {
    let response = infer_raw(at, path, inputs);
    ensure!(
        response.status == 200,
        "{path}: {} {}",
        response.status,
        response.text()
    );
    let content_type = response.header("content-type").ok_or("no content type")?;
    let size: usize = content_type
        .strip_prefix(&format!("{BINARY};json-header-size="))
        .ok_or_else(|| format!("content type {content_type}"))?
        .parse()?;
    let header: Value = serde_json::from_slice(&response.body[..size])?;
    let mut at_byte = size;
    let mut outputs = HashMap::new();
    for output in header["outputs"].as_array().ok_or("no outputs")? {
        let length = output["parameters"]["binary_data_size"]
            .as_u64()
            .ok_or_else(|| format!("{output}: not binary"))? as usize;
        let data = response.body[at_byte..at_byte + length].to_vec();
        at_byte += length;
        let dtype = output["datatype"].as_str().unwrap_or("").to_string();
        let mut strings = Vec::new();
        if dtype == "BYTES" {
            let mut rest = &data[..];
            while rest.len() >= 4 {
                let n = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
                strings.push(String::from_utf8_lossy(&rest[4..4 + n]).into_owned());
                rest = &rest[4 + n..];
            }
        }
        outputs.insert(
            output["name"].as_str().unwrap_or("").to_string(),
            Tensor {
                dtype,
                shape: serde_json::from_value(output["shape"].clone())?,
                data: if strings.is_empty() { data } else { Vec::new() },
                strings,
            },
        );
    }
    Ok(outputs)
}

/// ONNX Runtime's own Python answer for `inputs` on `model`.
fn reference(model: &Path, inputs: &[(&str, &Tensor)]) -> HashMap<String, Tensor> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let request: serde_json::Map<String, Value> = inputs
        .iter()
        .map(|(name, t)| {
            (
                name.to_string(),
                json!({"dtype": t.dtype, "shape": t.shape, "b64": b64.encode(&t.data),
                       "strings": t.strings}),
            )
        })
        .collect();
    let answer = python_client(
        "onnx_models.py",
        &model.display().to_string(),
        &json!({"inputs": request}),
    );
    answer["outputs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, t)| {
            let strings: Vec<String> =
                serde_json::from_value(t["strings"].clone()).unwrap_or_default();
            let data = t["b64"]
                .as_str()
                .map(|s| b64.decode(s).unwrap())
                .unwrap_or_default();
            let tensor = Tensor {
                dtype: t["dtype"].as_str().unwrap().to_string(),
                shape: serde_json::from_value(t["shape"].clone()).unwrap(),
                data,
                strings,
            };
            (name.clone(), tensor)
        })
        .collect()
}

/// Checks `got` against ONNX Runtime's `expected` within 1e-5 relative (a 1e-6 floor where
/// values are near zero).
fn close(what: &str, got: &Tensor, expected: &Tensor) -> Result<(), Failed> {
    ensure!(
        got.shape == expected.shape && got.dtype == expected.dtype,
        "{what}: {} {:?}, ONNX Runtime gives {} {:?}",
        got.dtype,
        got.shape,
        expected.dtype,
        expected.shape
    );
    let (a, b) = (got.floats(), expected.floats());
    // NaN agrees with nothing: a NaN on either side fails.
    let apart = |x: f32, y: f32| {
        let agree = x == y || (x - y).abs() <= (1e-5 * y.abs()).max(1e-6);
        !agree
    };
    if let Some(i) = (0..a.len()).find(|&i| apart(a[i], b[i])) {
        return Err(format!(
            "{what}: element {i} is {} where ONNX Runtime gives {}",
            a[i], b[i]
        )
        .into());
    }
    Ok(())
}

/// Rows `from..to` of a batched FP32 tensor.
fn rows(t: &Tensor, from: usize, to: usize) -> Tensor {
    let per_row = t.data.len() / t.shape[0] as usize;
    let mut shape = t.shape.clone();
    shape[0] = (to - from) as i64;
    Tensor {
        dtype: t.dtype.clone(),
        shape,
        data: t.data[from * per_row..to * per_row].to_vec(),
        strings: Vec::new(),
    }
}

/// Joins FP32 tensors along the batch dimension.
fn stack(parts: &[Tensor]) -> Tensor {
    let mut shape = parts[0].shape.clone();
    shape[0] = parts.iter().map(|p| p.shape[0]).sum();
    Tensor {
        dtype: parts[0].dtype.clone(),
        shape,
        data: parts.iter().flat_map(|p| p.data.clone()).collect(),
        strings: Vec::new(),
    }
}

fn text_detection_matches_onnx_runtime_single_and_batched(f: &Fixture) -> Result<(), Failed> {
    let model = f.pretrained.join(DETECTION);
    let image = |seed| Tensor::fp32(&[1, 3, 64, 96], &values(seed, 3 * 64 * 96));
    let single = image(1);
    let got = infer(f.at("det"), "/invocations", &[("x", &single)])?;
    let expected = reference(&model, &[("x", &single)]);
    close(
        "one image",
        &got["sigmoid_0.tmp_0"],
        &expected["sigmoid_0.tmp_0"],
    )?;

    // Four clients at once (the dynamic batcher joins what is queued) and one request of two
    // rows: each answer is its own rows, as ONNX Runtime gives them.
    let images: Vec<Tensor> = (10..14).map(image).collect();
    let expected = reference(&model, &[("x", &stack(&images))]);
    let answers: Vec<Result<HashMap<String, Tensor>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = images
            .iter()
            .map(|t| {
                s.spawn(|| {
                    infer(f.at("det"), "/invocations", &[("x", t)]).map_err(|e| format!("{e:?}"))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, answer) in answers.into_iter().enumerate() {
        let answer = answer?;
        close(
            &format!("client {i} of 4"),
            &answer["sigmoid_0.tmp_0"],
            &rows(&expected["sigmoid_0.tmp_0"], i, i + 1),
        )?;
    }
    let two = stack(&images[..2]);
    let got = infer(f.at("det"), "/invocations", &[("x", &two)])?;
    close(
        "a request of two images",
        &got["sigmoid_0.tmp_0"],
        &rows(&expected["sigmoid_0.tmp_0"], 0, 2),
    )
}

fn text_recognition_matches_onnx_runtime_with_a_configuration_of_its_own(
    f: &Fixture,
) -> Result<(), Failed> {
    let model = f.pretrained.join(RECOGNITION);
    let crops = Tensor::fp32(&[2, 3, 48, 320], &values(7, 2 * 3 * 48 * 320));
    let got = infer(f.at("rec"), "/invocations", &[("x", &crops)])?;
    let expected = reference(&model, &[("x", &crops)]);
    let output = "softmax_11.tmp_0";
    ensure!(
        got[output].shape == [2, 40, 6625],
        "shape {:?}",
        got[output].shape
    );
    close("two crops", &got[output], &expected[output])?;
    // Each row's distribution sums to one: a real softmax came back, not a copy of something.
    let sum: f32 = got[output].floats()[..6625].iter().sum();
    let sums_to_one = (sum - 1.0).abs() < 1e-3;
    ensure!(sums_to_one, "the first step's probabilities sum to {sum}");
    Ok(())
}

fn resnet50_matches_onnx_runtime_through_a_multi_model_load(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let model = f.small.path().join("resnet50.onnx");
    let loaded = load(at, "resnet", &artifact(f, "resnet", &model, None));
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    let images = Tensor::fp32(&[3, 3, 224, 224], &values(61, 3 * 3 * 224 * 224));
    let expected = reference(&model, &[("input", &images)]);
    let one = rows(&images, 0, 1);
    let got = infer(at, "/models/resnet/invoke", &[("input", &one)])?;
    close(
        "one image",
        &got["logits"],
        &rows(&expected["logits"], 0, 1),
    )?;
    let two = rows(&images, 1, 3);
    let got = infer(at, "/models/resnet/invoke", &[("input", &two)])?;
    close(
        "two images",
        &got["logits"],
        &rows(&expected["logits"], 1, 3),
    )?;
    let unloaded = request(at, "DELETE", "/models/resnet", &[], b"");
    ensure!(
        unloaded.status == 200,
        "{} {}",
        unloaded.status,
        unloaded.text()
    );
    Ok(())
}

/// An INT64 tensor.
fn int64(shape: &[i64], values: &[i64]) -> Tensor {
    Tensor {
        dtype: "INT64".into(),
        shape: shape.to_vec(),
        data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        strings: Vec::new(),
    }
}

fn a_bert_base_sized_encoder_matches_onnx_runtime_with_padding(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let model = f.small.path().join("bert.onnx");
    let loaded = load(at, "bert", &artifact(f, "bert", &model, None));
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    // Two sentences of 24 tokens, the second padded after 9.
    let ids: Vec<i64> = common::pseudo_random(71, 48)
        .into_iter()
        .map(|r| i64::from(r % 30_000) + 100)
        .collect();
    let mask: Vec<i64> = (0..48).map(|i| i64::from(i < 24 || i % 24 < 9)).collect();
    let (ids, mask) = (int64(&[2, 24], &ids), int64(&[2, 24], &mask));
    let inputs = [("input_ids", &ids), ("attention_mask", &mask)];
    let expected = reference(&model, &inputs);
    let got = infer(at, "/models/bert/invoke", &inputs)?;
    close(
        "two sentences",
        &got["last_hidden_state"],
        &expected["last_hidden_state"],
    )?;
    let one = [
        ("input_ids", &rows(&ids, 1, 2)),
        ("attention_mask", &rows(&mask, 1, 2)),
    ];
    let expected = reference(&model, &one);
    let got = infer(at, "/models/bert/invoke", &one)?;
    close(
        "the padded sentence alone",
        &got["last_hidden_state"],
        &expected["last_hidden_state"],
    )?;
    let unloaded = request(at, "DELETE", "/models/bert", &[], b"");
    ensure!(
        unloaded.status == 200,
        "{} {}",
        unloaded.status,
        unloaded.text()
    );
    Ok(())
}

fn every_type_the_backend_carries_round_trips(f: &Fixture) -> Result<(), Failed> {
    let random = common::pseudo_random(3, 6);
    let mut inputs: Vec<(String, Tensor)> = Vec::new();
    for (dtype, size) in [
        ("FP32", 4),
        ("FP16", 2),
        ("INT8", 1),
        ("INT32", 4),
        ("INT64", 8),
    ] {
        let data = (0..6 * size)
            .map(|i| (random[i / size] >> (i % 4 * 8)) as u8)
            .collect();
        inputs.push((
            format!("in_{dtype}"),
            Tensor {
                dtype: dtype.into(),
                shape: vec![2, 3],
                data,
                strings: Vec::new(),
            },
        ));
    }
    inputs.push((
        "in_BOOL".into(),
        Tensor {
            dtype: "BOOL".into(),
            shape: vec![2, 3],
            data: random.iter().map(|r| (r & 1) as u8).collect(),
            strings: Vec::new(),
        },
    ));
    inputs.push((
        "in_STRING".into(),
        Tensor {
            dtype: "BYTES".into(),
            shape: vec![2, 3],
            data: Vec::new(),
            strings: ["", "a", "naïve", "λ x", "tab\there", "end"]
                .map(String::from)
                .to_vec(),
        },
    ));
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let got = infer(f.at("types"), "/invocations", &named)?;
    let expected = reference(&f.small.path().join("types.onnx"), &named);
    for (name, sent) in &inputs {
        let out = name.replace("in_", "out_");
        let back = got.get(&out).ok_or_else(|| format!("no {out}"))?;
        ensure!(back == sent, "{out}: {back:?}, sent {sent:?}");
        ensure!(
            back.shape == expected[&out].shape && back.wire() == expected[&out].wire(),
            "{out}: ONNX Runtime gives {:?}",
            expected[&out]
        );
    }
    // A string the ONNX side cannot hold (not UTF-8) is refused, naming the input, and the
    // next request is served.
    let mut bad = inputs.clone();
    let strings = &mut bad.iter_mut().find(|(n, _)| n == "in_STRING").unwrap().1;
    strings.strings.clear();
    for element in [&b"ok"[..], b"\xff\xfe", b"", b"", b"", b""] {
        strings
            .data
            .extend_from_slice(&(element.len() as u32).to_le_bytes());
        strings.data.extend_from_slice(element);
    }
    let bad_named: Vec<(&str, &Tensor)> = bad.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let refused = infer_raw(f.at("types"), "/invocations", &bad_named);
    ensure!(
        refused.status == 400 && refused.error().contains("in_STRING"),
        "not UTF-8: {} {}",
        refused.status,
        refused.text()
    );
    infer(f.at("types"), "/invocations", &named)?;
    Ok(())
}

/// Puts `model_file` into a multi-model artifact folder `<root>/<name>/model/1/model.onnx`,
/// with `config` (if any); returns the folder to load.
fn artifact(f: &Fixture, name: &str, model_file: &Path, config: Option<&str>) -> String {
    let folder = f.models_root.path().join(name).join("model");
    place_file(model_file, &folder.join("1/model.onnx"));
    if let Some(config) = config {
        std::fs::write(folder.join("config.pbtxt"), config).unwrap();
    }
    folder.display().to_string()
}

fn load(at: SocketAddr, name: &str, url: &str) -> HttpResponse {
    let body = json!({"model_name": name, "url": url}).to_string();
    request(at, "POST", "/models", &[], body.as_bytes())
}

/// A detection request through the multi-model endpoint's `name`, compared with ONNX Runtime.
fn detect_through(f: &Fixture, name: &str, seed: u64) -> Result<(), Failed> {
    let image = Tensor::fp32(&[1, 3, 32, 32], &values(seed, 3 * 32 * 32));
    let got = infer(
        f.at("mme"),
        &format!("/models/{name}/invoke"),
        &[("x", &image)],
    )?;
    let expected = reference(&f.pretrained.join(DETECTION), &[("x", &image)]);
    close(name, &got["sigmoid_0.tmp_0"], &expected["sigmoid_0.tmp_0"])
}

fn a_multi_model_load_serves_a_bare_model_onnx_and_unloads(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let url = artifact(f, "ocr", &f.pretrained.join(DETECTION), None);
    let loaded = load(at, "ocr", &url);
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    detect_through(f, "ocr", 21)?;
    let unloaded = request(at, "DELETE", "/models/ocr", &[], b"");
    ensure!(
        unloaded.status == 200,
        "{} {}",
        unloaded.status,
        unloaded.text()
    );
    ensure!(
        get(at, "/models/ocr").status == 404,
        "unloaded, still listed"
    );
    Ok(())
}

fn configurations_are_read_as_triton_reads_them(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let det = f.pretrained.join(DETECTION);
    // Triton's documented session options and graph level: accepted, and the answers unchanged.
    let tuned = r#"platform: "onnxruntime_onnx"
max_batch_size: 2
optimization { graph { level: 2 } }
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
parameters { key: "inter_op_thread_count" value: { string_value: "1" } }
parameters { key: "execution_mode" value: { string_value: "1" } }
parameters { key: "enable_mem_arena" value: { string_value: "off" } }
parameters { key: "enable_mem_pattern" value: { string_value: "false" } }
"#;
    let loaded = load(at, "tuned", &artifact(f, "tuned", &det, Some(tuned)));
    ensure!(
        loaded.status == 200,
        "tuned: {} {}",
        loaded.status,
        loaded.text()
    );
    detect_through(f, "tuned", 31)?;

    // default_model_filename names the file.
    let folder = f.models_root.path().join("named/model");
    place_file(&det, &folder.join("1/detector.onnx"));
    std::fs::write(
        folder.join("config.pbtxt"),
        "backend: \"onnxruntime\"\ndefault_model_filename: \"detector.onnx\"\n",
    )?;
    let loaded = load(at, "named", &folder.display().to_string());
    ensure!(
        loaded.status == 200,
        "named: {} {}",
        loaded.status,
        loaded.text()
    );
    detect_through(f, "named", 32)?;

    // What disagrees with the model, or asks what this backend does not do, fails the load
    // naming the tensor or the setting; the endpoint serves on.
    let refused = [
        (
            "outputs",
            "platform: \"onnxruntime_onnx\"\nmax_batch_size: 4\ninput [ { name: \"x\", data_type: TYPE_FP32, dims: [ 3, -1, -1 ] } ]\noutput [ { name: \"sigmoid_0.tmp_0\", data_type: TYPE_FP32, dims: [ 1, 640, 640 ] } ]\n",
            "tensor 'sigmoid_0.tmp_0'",
        ),
        (
            "dtype",
            "platform: \"onnxruntime_onnx\"\nmax_batch_size: 4\ninput [ { name: \"x\", data_type: TYPE_INT64, dims: [ 3, -1, -1 ] } ]\noutput [ { name: \"sigmoid_0.tmp_0\", data_type: TYPE_FP32, dims: [ 1, -1, -1 ] } ]\n",
            "configuration expects datatype TYPE_INT64 for input 'x'",
        ),
        (
            "name",
            "platform: \"onnxruntime_onnx\"\nmax_batch_size: 4\ninput [ { name: \"image\", data_type: TYPE_FP32, dims: [ 3, -1, -1 ] } ]\noutput [ { name: \"sigmoid_0.tmp_0\", data_type: TYPE_FP32, dims: [ 1, -1, -1 ] } ]\n",
            "unexpected inference input 'image', allowed inputs are: x",
        ),
        (
            "gpu",
            "platform: \"onnxruntime_onnx\"\noptimization { execution_accelerators { gpu_execution_accelerator : [ { name : \"tensorrt\" } ] } }\n",
            "gpu_execution_accelerator asks for 'tensorrt'",
        ),
        (
            "threads",
            "platform: \"onnxruntime_onnx\"\nparameters { key: \"intra_op_thread_count\" value: { string_value: \"many\" } }\n",
            "intra_op_thread_count",
        ),
        (
            "escape",
            "platform: \"onnxruntime_onnx\"\ndefault_model_filename: \"../../model/1/model.onnx\"\n",
            "default_model_filename",
        ),
    ];
    for (name, config, says) in refused {
        let failed = load(at, name, &artifact(f, name, &det, Some(config)));
        ensure!(
            failed.status == 400 && failed.error().contains(says),
            "{name}: {} {} (expected 400 saying {says})",
            failed.status,
            failed.text()
        );
        ensure!(
            get(at, &format!("/models/{name}")).status == 404,
            "{name}: listed"
        );
        detect_through(f, "tuned", 33)?;
    }
    Ok(())
}

fn broken_models_fail_their_load_clearly_and_the_endpoint_serves_on(
    f: &Fixture,
) -> Result<(), Failed> {
    let at = f.at("mme");
    let det = std::fs::read(f.pretrained.join(DETECTION))?;
    let scratch = tempfile::tempdir()?;
    let cases: [(&str, Vec<u8>); 4] = [
        (
            "corrupt",
            values(5, 4096)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ),
        ("truncated", det[..det.len() / 2].to_vec()),
        ("empty", Vec::new()),
        (
            "unknown_op",
            std::fs::read(f.small.path().join("unknown_op.onnx"))?,
        ),
    ];
    let loaded = load(
        at,
        "steady",
        &artifact(f, "steady", &f.pretrained.join(DETECTION), None),
    );
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    for (name, bytes) in cases {
        let file = scratch.path().join(format!("{name}.onnx"));
        std::fs::write(&file, &bytes)?;
        let failed = load(at, name, &artifact(f, name, &file, None));
        ensure!(
            failed.status == 400 && failed.error().contains("ONNX Runtime"),
            "{name}: {} {}",
            failed.status,
            failed.text()
        );
        ensure!(
            get(at, "/ping").status == 200,
            "{name}: ping failed after it"
        );
        detect_through(f, "steady", 41)?;
    }
    Ok(())
}

fn external_data_is_read_beside_the_model_and_nowhere_else(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let url = artifact(f, "external", &f.small.path().join("external.onnx"), None);
    std::fs::copy(
        f.small.path().join("weights.bin"),
        Path::new(&url).join("1/weights.bin"),
    )?;
    let loaded = load(at, "external", &url);
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    let x = Tensor::fp32(&[1, 4], &[10.0, 10.0, 10.0, 10.0]);
    let got = infer(at, "/models/external/invoke", &[("x", &x)])?;
    ensure!(
        got["y"].floats() == [10.0, 11.0, 12.0, 13.0],
        "{:?}",
        got["y"].floats()
    );
    // Weights named outside the model's folder: refused by ONNX Runtime, the load fails clearly.
    let url = artifact(f, "outside", &f.small.path().join("escape.onnx"), None);
    std::fs::copy(
        f.small.path().join("weights.bin"),
        Path::new(&url).join("weights.bin"),
    )?;
    let failed = load(at, "outside", &url);
    ensure!(
        failed.status == 400 && failed.error().contains("escapes model directory"),
        "{} {}",
        failed.status,
        failed.text()
    );
    infer(at, "/models/external/invoke", &[("x", &x)])?;
    Ok(())
}

fn bad_requests_are_400_and_the_next_request_is_served(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("det");
    let good = Tensor::fp32(&[1, 3, 32, 32], &values(51, 3 * 32 * 32));
    let wrong_type = Tensor {
        dtype: "INT32".into(),
        ..good.clone()
    };
    let wrong_rank = Tensor::fp32(&[1, 3, 32], &values(52, 3 * 32));
    let too_many = Tensor::fp32(&[5, 3, 8, 8], &values(53, 5 * 3 * 64));
    // Sides the network's strides do not divide, and no pixels at all: ONNX Runtime refuses
    // them mid-graph.
    let odd = Tensor::fp32(&[1, 3, 33, 33], &values(54, 3 * 33 * 33));
    let empty = Tensor::fp32(&[1, 3, 0, 0], &[]);
    let cases: [(&str, &str, &Tensor); 6] = [
        ("wrong type", "x", &wrong_type),
        ("wrong rank", "x", &wrong_rank),
        ("wrong name", "image", &good),
        ("batch above max_batch_size 4", "x", &too_many),
        ("33 by 33 pixels", "x", &odd),
        ("no pixels", "x", &empty),
    ];
    for (what, name, tensor) in cases {
        let response = infer_raw(at, "/invocations", &[(name, tensor)]);
        ensure!(
            response.status == 400 && !response.error().is_empty(),
            "{what}: {} {}",
            response.status,
            response.text()
        );
        infer(at, "/invocations", &[("x", &good)]).map_err(|e| format!("after {what}: {e:?}"))?;
    }
    Ok(())
}

fn a_run_whose_client_left_is_stopped_and_its_instance_serves_again(
    f: &Fixture,
) -> Result<(), Failed> {
    let at = f.at("mme");
    // One instance, so a run that never ends would hold it for good.
    let config =
        "platform: \"onnxruntime_onnx\"\ninstance_group [ { kind: KIND_CPU, count: 1 } ]\n";
    let url = artifact(f, "spin", &f.small.path().join("spin.onnx"), Some(config));
    let loaded = load(at, "spin", &url);
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    let (n, x) = (int64(&[1], &[3]), Tensor::fp32(&[1], &[1.0]));
    let small = [("n", &n), ("x", &x)];
    let got = infer(at, "/models/spin/invoke", &small)?;
    ensure!(got["y"].floats() == [4.0], "{:?}", got["y"].floats());

    // 10^15 iterations: days of work. The client leaves after half a second.
    let body = json!({"inputs": [
        {"name": "n", "datatype": "INT64", "shape": [1], "data": [1_000_000_000_000_000i64]},
        {"name": "x", "datatype": "FP32", "shape": [1], "data": [0.0]}
    ]})
    .to_string();
    {
        use std::io::Write;
        let mut stream = std::net::TcpStream::connect(at)?;
        write!(
            stream,
            "POST /models/spin/invoke HTTP/1.1\r\nHost: {at}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )?;
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let started = std::time::Instant::now();
    let got = infer(at, "/models/spin/invoke", &small)?;
    ensure!(got["y"].floats() == [4.0], "{:?}", got["y"].floats());
    ensure!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the instance came back after {:?}",
        started.elapsed()
    );
    let unloaded = request(at, "DELETE", "/models/spin", &[], b"");
    ensure!(
        unloaded.status == 200,
        "{} {}",
        unloaded.status,
        unloaded.text()
    );
    Ok(())
}
