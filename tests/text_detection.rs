//! The text-detection example end to end (`examples/text-detection`): PP-OCRv4's pretrained
//! detector (from PyPI's rapidocr-onnxruntime wheel) on trident's onnxruntime backend and the
//! real Triton core, behind the image-tensor (`resize = "limit"`) and text-boxes plugins, as
//! `scripts/serve-example text-detection` serves it, over HTTP on 127.0.0.1. Photos of text are
//! made by Pillow and the expected boxes found by RapidOCR's own Python
//! (`tests/clients/text_detection.py`): every box within a few pixels. Then hostile photos and
//! bodies, each a clear 4xx (or an answer, where the photo is valid), the next photo served.

#[macro_use]
mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use libtest_mimic::Failed;
use serde_json::{Value, json};

use common::Check;
use common::http_client::{HttpResponse, invoke};
use common::plugins::guest;
use common::process::{Running, python_client, serve_with};

const EXAMPLE: &str = "examples/text-detection";

/// How far a corner may be from RapidOCR's, in pixels of the image the detector sees (1 at
/// most, measured on these photos; on a photo brought down to 2000 pixels a side, that many
/// pixels scaled up: 2 measured on the 12 MP photo): RapidOCR resizes with OpenCV, without
/// antialiasing, where trident resizes as Pillow does, so the detector's map differs a little.
const TOLERANCE: i64 = 2;

struct Fixture {
    addr: SocketAddr,
    _running: Running,
    /// The example's copy (models, plugins, manifest).
    _dir: tempfile::TempDir,
    /// The photos tests/clients/text_detection.py made.
    photos: tempfile::TempDir,
    /// RapidOCR's boxes for each photo, by name.
    reference: serde_json::Map<String, Value>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn main() -> std::process::ExitCode {
    let checks: &[Check<Fixture>] = checks![
        every_photo_gets_the_boxes_rapidocr_finds,
        the_readme_answer_is_what_the_example_answers,
        base64_json_answers_as_the_raw_photo_does,
        hostile_photos_are_refused_and_the_next_photo_is_served,
        a_model_whose_input_is_fixed_is_refused_at_start,
    ];
    common::run_checks(start(), checks)
}

fn start() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_example(dir.path(), |m| m);
    let (running, addr) = serve_with(
        &dir.path().join("models"),
        &[("SAGEMAKER_TRITON_PLUGINS", manifest.as_os_str())],
    );
    let photos = tempfile::tempdir().unwrap();
    python_client(
        "text_detection.py",
        &format!("photos:{}", photos.path().display()),
        &Value::Null,
    );
    let reference = python_client(
        "text_detection.py",
        &format!("reference:{}", photos.path().display()),
        &Value::Null,
    );
    Fixture {
        addr,
        _running: running,
        _dir: dir,
        photos,
        reference: reference.as_object().unwrap().clone(),
    }
}

/// The example in `dir` as the serve script writes it: the detector's config and the
/// pretrained model at `models/detector/1/model.onnx`, the two plugins built from `plugins/`,
/// the manifest with their digests (changed by `change`); the manifest's path.
fn write_example(dir: &Path, change: impl Fn(String) -> String) -> PathBuf {
    let model = root().join("target/test-models/ch_PP-OCRv4_det_infer.onnx");
    assert!(
        model.is_file(),
        "no {}: run scripts/install-test-clients",
        model.display()
    );
    let detector = dir.join("models/detector");
    std::fs::create_dir_all(detector.join("1")).unwrap();
    std::fs::copy(
        root().join(EXAMPLE).join("models/detector/config.pbtxt"),
        detector.join("config.pbtxt"),
    )
    .unwrap();
    if std::fs::hard_link(&model, detector.join("1/model.onnx")).is_err() {
        std::fs::copy(&model, detector.join("1/model.onnx")).unwrap();
    }
    let mut manifest =
        std::fs::read_to_string(root().join(EXAMPLE).join("plugins.toml.in")).unwrap();
    for (name, placeholder) in [
        ("image_tensor", "@IMAGE_TENSOR@"),
        ("text_boxes", "@TEXT_BOXES@"),
    ] {
        let wasm = dir.join(format!("{name}.wasm"));
        std::fs::copy(guest(name), &wasm).unwrap();
        let digest =
            trident::plugins::platform::loading::sha256_hex(&std::fs::read(&wasm).unwrap());
        manifest = manifest.replace(placeholder, &digest);
    }
    let path = dir.join("plugins.toml");
    std::fs::write(&path, change(manifest)).unwrap();
    path
}

fn photo(f: &Fixture, name: &str) -> Vec<u8> {
    std::fs::read(f.photos.path().join(name)).unwrap()
}

fn content_type(name: &str) -> &'static str {
    if name.ends_with(".jpg") {
        "image/jpeg"
    } else {
        "image/png"
    }
}

/// The boxes of an answer: `[[[x, y] × 4], ...]`, each score checked to be a probability.
fn boxes(answer: &HttpResponse) -> Result<Vec<[[i64; 2]; 4]>, Failed> {
    if answer.status != 200 {
        return Err(format!("{}: {}", answer.status, answer.text()).into());
    }
    let entries: Vec<Value> = serde_json::from_slice(&answer.body)
        .map_err(|e| format!("not a list of boxes ({e}): {}", answer.text()))?;
    entries
        .iter()
        .map(|entry| {
            let score = entry["score"].as_f64().unwrap_or(-1.0);
            if !(0.5..=1.0).contains(&score) {
                return Err(format!("score {score} outside box_thresh..1: {entry}").into());
            }
            serde_json::from_value(entry["box"].clone())
                .map_err(|e| format!("not a box of four corners ({e}): {entry}").into())
        })
        .collect()
}

/// `got` and `expected` hold the same boxes in the same order, every corner within
/// `tolerance` pixels on each axis.
fn same_boxes(
    what: &str,
    got: &[[[i64; 2]; 4]],
    expected: &[[[i64; 2]; 4]],
    tolerance: i64,
) -> Result<(), Failed> {
    if got.len() != expected.len() {
        return Err(format!(
            "{what}: {} boxes, RapidOCR finds {}:\n got {got:?}\nwant {expected:?}",
            got.len(),
            expected.len()
        )
        .into());
    }
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        let far = g
            .iter()
            .zip(e)
            .any(|(a, b)| (a[0] - b[0]).abs() > tolerance || (a[1] - b[1]).abs() > tolerance);
        if far {
            return Err(format!("{what}: box {i} is {g:?}, RapidOCR's {e:?}").into());
        }
    }
    Ok(())
}

fn reference(f: &Fixture, name: &str) -> Vec<[[i64; 2]; 4]> {
    serde_json::from_value(f.reference[name].clone()).unwrap()
}

/// Every photo (lines at several sizes, light on dark, a textured background, a portrait
/// page, a block turned by 7°, a small label, a JPEG, a phone's 12 MP photo): the boxes RapidOCR
/// finds, in its order.
fn every_photo_gets_the_boxes_rapidocr_finds(f: &Fixture) -> Result<(), Failed> {
    let mut names: Vec<&String> = f.reference.keys().collect();
    names.sort();
    assert!(names.len() >= 8, "{names:?}");
    for name in names {
        let expected = reference(f, name);
        if expected.is_empty() {
            return Err(format!("RapidOCR finds no text in {name}: the photo is wrong").into());
        }
        let bytes = photo(f, name);
        let (width, height) = trident_imaging::decode::dimensions(
            &bytes,
            &trident_imaging::Limits {
                max_pixels: u64::MAX,
                ..Default::default()
            },
        )
        .unwrap();
        let tolerance = TOLERANCE * i64::from(width.max(height).div_ceil(2000));
        let got = boxes(&invoke(f.addr, content_type(name), &bytes))?;
        same_boxes(name, &got, &expected, tolerance)?;
    }
    Ok(())
}

/// The README's answer for the small label is what the example answers (corners within a
/// pixel, scores within 0.01: another machine's ONNX Runtime may differ in the last bits), and
/// what RapidOCR finds.
fn the_readme_answer_is_what_the_example_answers(f: &Fixture) -> Result<(), Failed> {
    let readme = std::fs::read_to_string(root().join(EXAMPLE).join("README.md")).unwrap();
    let shown = readme
        .lines()
        .skip_while(|line| !line.contains("label.png"))
        .find_map(|line| line.strip_prefix("# ["))
        .ok_or("the README shows no answer after its label.png command")?;
    let shown: Vec<Value> = serde_json::from_str(&format!("[{shown}"))
        .map_err(|e| format!("the README's answer is not JSON ({e})"))?;
    let answer = invoke(f.addr, "image/png", &photo(f, "label.png"));
    let served: Vec<Value> = serde_json::from_slice(&answer.body).unwrap();
    let corners = |v: &[Value]| -> Vec<[[i64; 2]; 4]> {
        v.iter()
            .map(|b| serde_json::from_value(b["box"].clone()).unwrap())
            .collect()
    };
    same_boxes("the README", &corners(&served), &corners(&shown), 1)?;
    for (s, r) in served.iter().zip(&shown) {
        let (s, r) = (s["score"].as_f64().unwrap(), r["score"].as_f64().unwrap());
        if (s - r).abs() > 0.01 {
            return Err(format!("the README shows score {r}, the example answers {s}").into());
        }
    }
    same_boxes(
        "label.png",
        &corners(&served),
        &reference(f, "label.png"),
        TOLERANCE,
    )
}

fn base64_json_answers_as_the_raw_photo_does(f: &Fixture) -> Result<(), Failed> {
    use base64::Engine as _;
    let raw = invoke(f.addr, "image/png", &photo(f, "receipt.png"));
    let encoded = base64::engine::general_purpose::STANDARD.encode(photo(f, "receipt.png"));
    let body = json!({ "instances": [{ "b64": encoded }] }).to_string();
    let json = invoke(f.addr, "application/json", body.as_bytes());
    if boxes(&raw)? != boxes(&json)? {
        return Err(format!("raw {} but JSON {}", raw.text(), json.text()).into());
    }
    Ok(())
}

/// A PNG of `width`×`height` filled with `colour`.
fn plain_png(width: u32, height: u32, colour: [u8; 3]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    trident_imaging::image::RgbImage::from_pixel(
        width,
        height,
        trident_imaging::image::Rgb(colour),
    )
    .write_to(&mut out, trident_imaging::image::ImageFormat::Png)
    .unwrap();
    out.into_inner()
}

/// Each hostile body gets its status and a message that says what is wrong; after each, the
/// receipt is answered with RapidOCR's boxes.
fn hostile_photos_are_refused_and_the_next_photo_is_served(f: &Fixture) -> Result<(), Failed> {
    use base64::Engine as _;
    let receipt = photo(f, "receipt.png");
    let expected = reference(f, "receipt.png");
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut truncated = receipt.clone();
    truncated.truncate(receipt.len() / 2);
    // A PNG header that claims 60000×60000 pixels.
    let mut huge = plain_png(8, 8, [0, 0, 0]);
    huge[16..20].copy_from_slice(&60000u32.to_be_bytes());
    huge[20..24].copy_from_slice(&60000u32.to_be_bytes());
    let two =
        json!({ "instances": [{ "b64": b64(&receipt) }, { "b64": b64(&receipt) }] }).to_string();
    let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        (
            "two photos in one body",
            "application/json",
            two.into_bytes(),
            400,
            "one image per request",
        ),
        (
            "a 4000x20 strip",
            "image/png",
            plain_png(4000, 20, [255, 255, 255]),
            400,
            "aspect ratio",
        ),
        (
            "half a PNG",
            "image/png",
            truncated,
            400,
            "cannot be decoded",
        ),
        ("a 60000x60000 header", "image/png", huge, 400, "pixels"),
        ("an empty body", "image/png", Vec::new(), 400, ""),
        (
            "not an image",
            "image/png",
            b"not an image".to_vec(),
            415,
            "the body is not an image of a format this endpoint takes",
        ),
        (
            "a GIF without a frame",
            "image/gif",
            b"GIF89a\x01\x00\x01\x00\x00\x00\x00;".to_vec(),
            400,
            "the GIF image cannot be decoded",
        ),
        ("text", "text/plain", b"hello".to_vec(), 400, "JSON"),
        (
            "JSON without images",
            "application/json",
            br#"{"instances": []}"#.to_vec(),
            400,
            "no image",
        ),
    ];
    for (what, content_type, body, status, says) in cases {
        let answer = invoke(f.addr, content_type, &body);
        if answer.status != status || !answer.text().contains(says) {
            return Err(format!(
                "{what}: {} {}, expected {status} saying '{says}'",
                answer.status,
                answer.text()
            )
            .into());
        }
        let next = boxes(&invoke(f.addr, "image/png", &receipt))?;
        same_boxes(&format!("after {what}"), &next, &expected, TOLERANCE)?;
    }
    // Valid photos with no text: an empty answer, not an error.
    for (what, body) in [
        ("a blank page", plain_png(640, 480, [255, 255, 255])),
        ("one pixel", plain_png(1, 1, [0, 0, 0])),
        ("a black page", plain_png(300, 300, [0, 0, 0])),
    ] {
        let answer = invoke(f.addr, "image/png", &body);
        if answer.status != 200 || answer.json() != json!([]) {
            return Err(format!("{what}: {} {}", answer.status, answer.text()).into());
        }
    }
    // Noise the detector may read as thousands of specks, and a photo just over max_pixels
    // (25 MP): each answered (the candidates capped, the post-processing linear), or refused
    // naming the limit, and the receipt served after.
    let noise: Vec<u8> = common::pseudo_random(58, 1200 * 1200)
        .iter()
        .flat_map(|r| if r % 3 == 0 { [0u8; 3] } else { [255u8; 3] })
        .collect();
    let mut png = std::io::Cursor::new(Vec::new());
    trident_imaging::image::RgbImage::from_raw(1200, 1200, noise)
        .unwrap()
        .write_to(&mut png, trident_imaging::image::ImageFormat::Png)
        .unwrap();
    let answer = invoke(f.addr, "image/png", png.get_ref());
    if answer.status != 200 || !answer.json().is_array() {
        return Err(format!("noise: {} {}", answer.status, answer.text()).into());
    }
    let answer = invoke(f.addr, "image/png", &plain_png(5001, 5000, [255, 255, 255]));
    if answer.status != 400
        || !answer
            .text()
            .contains("at most 25000000 pixels (set by max_pixels)")
    {
        return Err(format!("25 MP: {} {}", answer.status, answer.text()).into());
    }
    let next = boxes(&invoke(f.addr, "image/png", &receipt))?;
    same_boxes("after noise", &next, &expected, TOLERANCE)
}

/// A detector whose configuration fixes its input's height and width (the model's are open,
/// so the backend takes it, as Triton's does) cannot take photos at their own size: the start
/// is refused, naming the input and the setting.
fn a_model_whose_input_is_fixed_is_refused_at_start(_: &Fixture) -> Result<(), Failed> {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_example(dir.path(), |m| m);
    std::fs::write(
        dir.path().join("models/detector/config.pbtxt"),
        "backend: \"onnxruntime\"\nmax_batch_size: 4\n\
         input [ { name: \"x\", data_type: TYPE_FP32, dims: [ 3, 640, 640 ] } ]\n\
         output [ { name: \"sigmoid_0.tmp_0\", data_type: TYPE_FP32, dims: [ 1, -1, -1 ] } ]\n",
    )
    .unwrap();
    let (_, log) = common::process::start_refused(&dir.path().join("models"), &manifest);
    if !(log.contains("'x'") && log.contains("resize = 'limit'")) {
        return Err(format!("the refusal does not name the input and the setting:\n{log}").into());
    }
    Ok(())
}
