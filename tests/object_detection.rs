//! Object detection end to end: a pretrained YOLOv8n detector (ultralytics' ONNX export, from
//! PyPI's nudenet wheel: `scripts/install-test-clients`) on trident's onnxruntime backend and the
//! real Triton core, its configuration left to Triton's auto-complete, behind image-tensor
//! (`resize = "letterbox"`, `resample = "opencv_bilinear"`) and detection-boxes, over HTTP on
//! 127.0.0.1. The reference (`tests/clients/detections.py`) runs the same model with ONNX
//! Runtime's Python on the tensor image-tensor makes of each photo and post-processes its real
//! output with OpenCV's non-maximum suppression and ultralytics' box scaling: every detection
//! equal, in order, label, score and box.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use common::http_client::invoke;
use common::plugins::guest;
use common::process::{Running, python_client, serve_with};
use serde_json::{Value, json};

/// So low that suppression decides among many real candidates (the photos are drawings, which
/// the detector scores weakly): about twenty detections a photo.
const CONFIDENCE: &str = "0.0003";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn model() -> PathBuf {
    let model = root().join("target/test-models/yolov8n-320/model.onnx");
    assert!(
        model.is_file(),
        "no {}: run scripts/install-test-clients",
        model.display()
    );
    model
}

/// image-tensor's configuration: the detector's 320x320 letterbox, pixels scaled to 0..1.
const IMAGE_CONFIG: [(&str, &str); 6] = [
    ("input", "images"),
    ("size", "320"),
    ("resize", "letterbox"),
    ("resample", "opencv_bilinear"),
    ("mean", "0"),
    ("std", "1"),
];

/// The repository (`models/detector/1/model.onnx`, no configuration), the two plugins, the
/// labels in `labels` and a manifest pinning them, in `dir`; the manifest's path.
fn write_endpoint(dir: &Path, labels: &Path) -> PathBuf {
    let version = dir.join("models/detector/1");
    std::fs::create_dir_all(&version).unwrap();
    std::fs::copy(model(), version.join("model.onnx")).unwrap();
    let digest = |path: &Path| {
        trident::plugins::platform::loading::sha256_hex(&std::fs::read(path).unwrap())
    };
    for name in ["image_tensor", "detection_boxes"] {
        std::fs::copy(guest(name), dir.join(format!("{name}.wasm"))).unwrap();
    }
    std::fs::copy(labels, dir.join("labels.txt")).unwrap();
    let image_config: Vec<String> = IMAGE_CONFIG
        .iter()
        .map(|(k, v)| format!("{k} = \"{v}\""))
        .collect();
    let manifest = format!(
        r#"[plugins.image]
path = "image_tensor.wasm"
sha256 = "{image}"
content_types = ["image/*", "application/json"]
memory_limit_mb = 256
time_limit_ms = 5000
config = {{ {image_config} }}

[plugins.boxes]
path = "detection_boxes.wasm"
sha256 = "{boxes}"
time_limit_ms = 5000
config = {{ output = "output0", size = "320", confidence = "{CONFIDENCE}" }}
assets = {{ labels = {{ path = "labels.txt", sha256 = "{labels}" }} }}

[models."*"]
request = "image"
response = "boxes"
"#,
        image = digest(&dir.join("image_tensor.wasm")),
        boxes = digest(&dir.join("detection_boxes.wasm")),
        labels = digest(&dir.join("labels.txt")),
        image_config = image_config.join(", "),
    );
    let path = dir.join("plugins.toml");
    std::fs::write(&path, manifest).unwrap();
    path
}

/// The tensor image-tensor makes of `photo` (`trident plugin run`, the endpoint's settings).
fn tensor_of(photo: &str) -> Value {
    let wasm = guest("image_tensor");
    let mut command = common::command(env!("CARGO_BIN_EXE_trident"));
    command.args(["plugin", "run"]).arg(&wasm).args([
        "--hook",
        "request",
        "--body",
        photo,
        "--content-type",
        "image/png",
        "--time-limit-ms",
        "10000",
        "--memory-limit-mb",
        "256",
    ]);
    for (key, value) in IMAGE_CONFIG {
        command.arg("--config").arg(format!("{key}={value}"));
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let line = stdout
        .lines()
        .find(|line| line.trim_start().starts_with('{'))
        .expect("a tensor printed");
    serde_json::from_str(line).unwrap()
}

/// `answer` (one photo's detections) equals `expected` (the reference's): the same count, and in
/// order the same label, a score within 1e-4 and each corner within 0.02 pixels (the answer's
/// hundredths).
fn assert_equal(answer: &Value, expected: &Value, labels: &[String], what: &str) {
    let (got, want) = (answer.as_array().unwrap(), expected.as_array().unwrap());
    assert_eq!(got.len(), want.len(), "{what}: {answer} against {expected}");
    for (rank, (got, want)) in got.iter().zip(want).enumerate() {
        let label = &labels[want["class"].as_u64().unwrap() as usize];
        assert_eq!(
            got["label"],
            label.as_str(),
            "{what} #{rank}: {got} against {want}"
        );
        let score = got["score"].as_f64().unwrap() - want["score"].as_f64().unwrap();
        assert!(score.abs() < 1e-4, "{what} #{rank}: {got} against {want}");
        let corners = ["xmin", "ymin", "xmax", "ymax"].map(|k| got["box"][k].as_f64().unwrap());
        for (g, w) in corners.iter().zip(want["box"].as_array().unwrap()) {
            assert!(
                (g - w.as_f64().unwrap()).abs() <= 0.02,
                "{what} #{rank}: {got} against {want}"
            );
        }
    }
}

#[test]
fn detections_equal_opencvs_on_the_models_real_outputs() {
    let made = tempfile::tempdir().unwrap();
    let photos = python_client(
        "detections.py",
        &format!("photos:{}", made.path().display()),
        &json!({ "model": model() }),
    );
    let labels_path = PathBuf::from(photos["labels"].as_str().unwrap());
    let labels: Vec<String> = std::fs::read_to_string(&labels_path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_endpoint(dir.path(), &labels_path);
    let (_running, addr): (Running, SocketAddr) = serve_with(
        &dir.path().join("models"),
        &[("SAGEMAKER_TRITON_PLUGINS", manifest.as_os_str())],
    );
    let mut answers = Vec::new();
    for photo in photos["photos"].as_array().unwrap() {
        let photo = photo.as_str().unwrap();
        let (width, height) = image_size(photo);
        let expected = python_client(
            "detections.py",
            &format!("expect:{}", model().display()),
            &json!({
                "tensor": tensor_of(photo),
                "photo": [width, height],
                "size": [320, 320],
                "confidence": CONFIDENCE.parse::<f64>().unwrap(),
                "iou": 0.7,
                "max_detections": 300,
            }),
        );
        assert!(
            expected.as_array().unwrap().len() >= 5,
            "{photo}: too few detections to check suppression: {expected}"
        );
        let body = std::fs::read(photo).unwrap();
        let answer = invoke(addr, "image/png", &body);
        assert_eq!(answer.status, 200, "{photo}: {}", answer.text());
        assert_equal(&answer.json(), &expected, &labels, photo);
        answers.push((body, answer.json()));
    }
    // Two photos in one JSON body: a list per photo, each as it was answered alone.
    use base64::Engine as _;
    let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let body = json!({ "instances": [encode(&answers[0].0), encode(&answers[1].0)] }).to_string();
    let answer = invoke(addr, "application/json", body.as_bytes());
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json(), json!([answers[0].1, answers[1].1]));
    // Not an image: refused by name, and the next photo is answered.
    let refused = invoke(addr, "image/png", b"GIF89a, not a PNG at all");
    assert!(matches!(refused.status, 400 | 415), "{}", refused.text());
    let again = invoke(addr, "image/png", &answers[0].0);
    assert_eq!(again.json(), answers[0].1);
}

/// A labels asset that does not name every class the model scores stops the start, naming both
/// counts, instead of answering indices for the classes past it.
#[test]
fn labels_that_do_not_fit_the_model_refuse_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let labels = dir.path().join("short.txt");
    std::fs::write(
        &labels,
        (0..17).map(|i| format!("class {i}\n")).collect::<String>(),
    )
    .unwrap();
    let manifest = write_endpoint(dir.path(), &labels);
    let (status, log) = common::process::start_refused(&dir.path().join("models"), &manifest);
    assert!(status.is_some_and(|s| !s.success()), "started: {log}");
    assert!(
        log.contains("output 'output0' scores 18 classes and the labels asset names 17"),
        "{log}"
    );
}

/// A PNG's width and height, from its header.
fn image_size(path: &str) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}
