//! The OCR example end to end (`examples/ocr`): PP-OCRv4's pretrained detector and recognizer
//! (from PyPI's rapidocr-onnxruntime wheel) on trident's onnxruntime backend and the real
//! Triton core, behind one pipeline plugin (`plugins/ocr`) that calls both, as
//! `scripts/serve-example ocr` serves it, over HTTP on 127.0.0.1. Photos of text are made by
//! Pillow and read by RapidOCR's own Python (`tests/clients/ocr.py`), and the answers compared:
//!
//! - the lines and their boxes: the same lines in the same order, every corner within a few
//!   pixels (trident's DB post-processing is RapidOCR's up to a pixel: pyclipper rounds its
//!   offset polygons to whole pixels; and JPEG decoders differ by a level);
//! - the crops and the recognizer: what RapidOCR's own cropping and recognizer read in the boxes
//!   trident found is trident's text, character for character, each confidence within 0.01;
//! - the text RapidOCR reads end to end, but for spaces: where a box moves by a pixel the
//!   recognizer's space between two words (of the Chinese model, which rarely sees them) can
//!   come or go, as it does between RapidOCR's own runs on a photo shifted by a pixel.
//!
//! Then hostile photos and bodies, each a clear 4xx, the next photo read.

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

const EXAMPLE: &str = "examples/ocr";

/// How far a corner may be from RapidOCR's, in pixels: 1 measured on PNG photos; 3 on the
/// JPEG, whose pixels trident's decoder and Pillow's libjpeg make a level apart here and there.
const TOLERANCE: i64 = 3;

struct Fixture {
    addr: SocketAddr,
    _running: Running,
    /// The example's copy (models, plugin, dictionary, manifest).
    _dir: tempfile::TempDir,
    /// The photos tests/clients/ocr.py made.
    photos: tempfile::TempDir,
    /// RapidOCR's lines for each photo, by name.
    reference: serde_json::Map<String, Value>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn main() -> std::process::ExitCode {
    let checks: &[Check<Fixture>] = checks![
        every_photo_reads_as_rapidocr_reads_it,
        base64_json_reads_as_the_raw_photo_does,
        hostile_photos_are_refused_and_the_next_photo_is_read,
        a_missing_dictionary_or_a_wrong_one_is_named,
    ];
    common::run_checks(start(), checks)
}

fn start() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_example(dir.path(), |m| m);
    let (running, addr) = serve(dir.path(), &manifest);
    let photos = tempfile::tempdir().unwrap();
    python_client(
        "ocr.py",
        &format!("photos:{}", photos.path().display()),
        &Value::Null,
    );
    let reference = python_client(
        "ocr.py",
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

/// The example in `dir` served as the serve script serves it: `/invocations` on the detector's
/// route.
fn serve(dir: &Path, manifest: &Path) -> (Running, SocketAddr) {
    serve_with(
        &dir.join("models"),
        &[
            ("SAGEMAKER_TRITON_PLUGINS", manifest.as_os_str()),
            ("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", "detector".as_ref()),
        ],
    )
}

/// The example in `dir` as the serve script writes it: both models' configs and pretrained
/// files at `models/<name>/1/model.onnx`, the plugin built from `plugins/ocr`, the dictionary,
/// the manifest with their digests (changed by `change`); the manifest's path.
fn write_example(dir: &Path, change: impl Fn(String) -> String) -> PathBuf {
    for (model, file) in [
        ("detector", "ch_PP-OCRv4_det_infer.onnx"),
        ("recognizer", "ch_PP-OCRv4_rec_infer.onnx"),
    ] {
        let onnx = root().join("target/test-models").join(file);
        assert!(
            onnx.is_file(),
            "no {}: run scripts/install-test-clients",
            onnx.display()
        );
        let folder = dir.join("models").join(model);
        std::fs::create_dir_all(folder.join("1")).unwrap();
        std::fs::copy(
            root()
                .join(EXAMPLE)
                .join("models")
                .join(model)
                .join("config.pbtxt"),
            folder.join("config.pbtxt"),
        )
        .unwrap();
        if std::fs::hard_link(&onnx, folder.join("1/model.onnx")).is_err() {
            std::fs::copy(&onnx, folder.join("1/model.onnx")).unwrap();
        }
    }
    std::fs::copy(
        root().join("target/test-models/ppocr_keys_v4.txt"),
        dir.join("ppocr_keys_v4.txt"),
    )
    .unwrap();
    std::fs::copy(guest("ocr"), dir.join("ocr.wasm")).unwrap();
    let digest = |file: &str| {
        trident::plugins::platform::loading::sha256_hex(&std::fs::read(dir.join(file)).unwrap())
    };
    let manifest = std::fs::read_to_string(root().join(EXAMPLE).join("plugins.toml.in"))
        .unwrap()
        .replace("@OCR@", &digest("ocr.wasm"))
        .replace("@CHARACTERS@", &digest("ppocr_keys_v4.txt"));
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

/// One line of an answer.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
struct Line {
    #[serde(rename = "box")]
    corners: [[i64; 2]; 4],
    text: String,
    score: f64,
}

/// The lines of an answer, each score checked to be a probability of at least `text_score`.
fn lines(answer: &HttpResponse) -> Result<Vec<Line>, Failed> {
    if answer.status != 200 {
        return Err(format!("{}: {}", answer.status, answer.text()).into());
    }
    let lines: Vec<Line> = serde_json::from_slice(&answer.body)
        .map_err(|e| format!("not a list of lines ({e}): {}", answer.text()))?;
    match lines.iter().find(|l| !(0.5..=1.0).contains(&l.score)) {
        Some(line) => Err(format!("score outside text_score..1: {line:?}").into()),
        None => Ok(lines),
    }
}

fn reference(f: &Fixture, name: &str) -> Vec<Line> {
    serde_json::from_value(f.reference[name].clone()).unwrap()
}

fn far(a: &[[i64; 2]; 4], b: &[[i64; 2]; 4], tolerance: i64) -> bool {
    a.iter()
        .zip(b)
        .any(|(p, q)| (p[0] - q[0]).abs() > tolerance || (p[1] - q[1]).abs() > tolerance)
}

/// `got` holds RapidOCR's lines, in its order: boxes within the tolerance, text equal but for
/// spaces (see the module's documentation).
fn same_lines(what: &str, got: &[Line], expected: &[Line]) -> Result<(), Failed> {
    let texts = |lines: &[Line]| -> Vec<String> { lines.iter().map(|l| l.text.clone()).collect() };
    if got.len() != expected.len() {
        return Err(format!(
            "{what}: {} lines, RapidOCR reads {}:\n got {:?}\nwant {:?}",
            got.len(),
            expected.len(),
            texts(got),
            texts(expected)
        )
        .into());
    }
    let unspaced = |text: &str| text.replace(' ', "");
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        if far(&g.corners, &e.corners, TOLERANCE) || unspaced(&g.text) != unspaced(&e.text) {
            return Err(format!("{what}: line {i} is {g:?}, RapidOCR's {e:?}").into());
        }
    }
    Ok(())
}

/// Every photo (lines at several sizes, light on dark, a textured background, a portrait page,
/// a block turned by 7°, a small label, a blurred JPEG, pages of 1, 8 and 32 lines): RapidOCR's
/// lines end to end, and RapidOCR's reading of trident's own boxes exactly.
fn every_photo_reads_as_rapidocr_reads_it(f: &Fixture) -> Result<(), Failed> {
    let mut names: Vec<&String> = f.reference.keys().collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    let mut answers = serde_json::Map::new();
    let mut boxes = serde_json::Map::new();
    for name in &names {
        let expected = reference(f, name);
        if expected.is_empty() {
            return Err(format!("RapidOCR reads no text in {name}: the photo is wrong").into());
        }
        let got = lines(&invoke(f.addr, content_type(name), &photo(f, name)))?;
        same_lines(name, &got, &expected)?;
        boxes.insert(
            name.to_string(),
            json!(got.iter().map(|l| l.corners).collect::<Vec<_>>()),
        );
        answers.insert(
            name.to_string(),
            json!(
                got.iter()
                    .map(|l| (l.text.clone(), l.score))
                    .collect::<Vec<_>>()
            ),
        );
    }
    // RapidOCR's crops and recognizer on trident's boxes: trident's text, to the character.
    let read = python_client(
        "ocr.py",
        &format!("recognize:{}", f.photos.path().display()),
        &Value::Object(boxes),
    );
    for name in names {
        let got: Vec<(String, f64)> = serde_json::from_value(answers[name.as_str()].clone())?;
        let expected = read[name.as_str()].as_array().ok_or("no reading")?;
        // Lines under text_score are left out of trident's answer: compare those it kept.
        let kept: Vec<(String, f64)> = expected
            .iter()
            .map(|r| {
                (
                    r["text"].as_str().unwrap_or("").to_owned(),
                    r["score"].as_f64().unwrap_or(0.0),
                )
            })
            .filter(|(_, score)| *score >= 0.5)
            .collect();
        if got.len() != kept.len()
            || got
                .iter()
                .zip(&kept)
                .any(|((t, s), (u, r))| t != u || (s - r).abs() > 0.01)
        {
            return Err(format!(
                "{name}: trident reads {got:?}; RapidOCR reads its boxes as {kept:?}"
            )
            .into());
        }
    }
    Ok(())
}

fn base64_json_reads_as_the_raw_photo_does(f: &Fixture) -> Result<(), Failed> {
    use base64::Engine as _;
    let raw = invoke(f.addr, "image/png", &photo(f, "receipt.png"));
    let encoded = base64::engine::general_purpose::STANDARD.encode(photo(f, "receipt.png"));
    let body = json!({ "instances": [{ "b64": encoded }] }).to_string();
    let json = invoke(f.addr, "application/json", body.as_bytes());
    if lines(&raw)? != lines(&json)? {
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

/// A body sent to the example, the statuses it may get and what the answer must say.
struct Hostile {
    what: &'static str,
    content_type: &'static str,
    body: Vec<u8>,
    statuses: &'static [u16],
    says: &'static str,
}

/// Broken, huge, odd and noisy bodies.
fn hostile_bodies(receipt: &[u8]) -> Vec<Hostile> {
    let mut truncated = receipt.to_vec();
    truncated.truncate(receipt.len() / 2);
    // A PNG header that claims 60000×60000 pixels.
    let mut huge = plain_png(8, 8, [0, 0, 0]);
    huge[16..20].copy_from_slice(&60000u32.to_be_bytes());
    huge[20..24].copy_from_slice(&60000u32.to_be_bytes());
    // Noise the detector reads as specks: read (a few lines), or past max_lines a 400 naming
    // it, and never more model calls than the manifest allows.
    let noise: Vec<u8> = common::pseudo_random(60, 1200 * 1200)
        .iter()
        .flat_map(|r| if r % 3 == 0 { [0u8; 3] } else { [255u8; 3] })
        .collect();
    let mut speckled = std::io::Cursor::new(Vec::new());
    trident_imaging::image::RgbImage::from_raw(1200, 1200, noise)
        .unwrap()
        .write_to(&mut speckled, trident_imaging::image::ImageFormat::Png)
        .unwrap();
    let case = |what, content_type, body, statuses, says| Hostile {
        what,
        content_type,
        body,
        statuses,
        says,
    };
    vec![
        case(
            "a 4000x20 strip",
            "image/png",
            plain_png(4000, 20, [255; 3]),
            &[400],
            "aspect ratio",
        ),
        case(
            "half a PNG",
            "image/png",
            truncated,
            &[400],
            "cannot be decoded",
        ),
        case("a 60000x60000 header", "image/png", huge, &[400], "pixels"),
        case("an empty body", "image/png", Vec::new(), &[400], ""),
        case(
            "not an image",
            "image/png",
            b"not an image".to_vec(),
            &[415],
            "not an image",
        ),
        // Not a type the pipeline takes: it passes by to the detector, as a v2 request.
        case("text", "text/plain", b"hello".to_vec(), &[400], "JSON"),
        case(
            "JSON without images",
            "application/json",
            br#"{"instances": []}"#.to_vec(),
            &[400],
            "no image",
        ),
        case(
            "a 25 MP page",
            "image/png",
            plain_png(5001, 5000, [255; 3]),
            &[400],
            "max_pixels",
        ),
        case("noise", "image/png", speckled.into_inner(), &[200, 400], ""),
    ]
}

/// Each hostile body gets its status and a message that says what is wrong; after each, the
/// receipt is read as RapidOCR reads it.
fn hostile_photos_are_refused_and_the_next_photo_is_read(f: &Fixture) -> Result<(), Failed> {
    let receipt = photo(f, "receipt.png");
    let expected = reference(f, "receipt.png");
    for case in hostile_bodies(&receipt) {
        let answer = invoke(f.addr, case.content_type, &case.body);
        let refused_noise = case.what == "noise" && answer.status == 400;
        if !case.statuses.contains(&answer.status)
            || !answer.text().contains(case.says)
            || (refused_noise && !answer.text().contains("max_lines"))
        {
            return Err(format!(
                "{}: {} {}, expected {:?} saying '{}'",
                case.what,
                answer.status,
                answer.text(),
                case.statuses,
                case.says
            )
            .into());
        }
        let next = lines(&invoke(f.addr, "image/png", &receipt))?;
        same_lines(&format!("after {}", case.what), &next, &expected)?;
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
    Ok(())
}

/// A dictionary of the wrong size (another recognizer's) answers 500 naming the asset and the
/// shapes; a manifest without one fails every photo with 500 naming it; the endpoint serves on.
fn a_missing_dictionary_or_a_wrong_one_is_named(f: &Fixture) -> Result<(), Failed> {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_example(dir.path(), |m| m);
    std::fs::write(dir.path().join("ppocr_keys_v4.txt"), "a\nb\nc\n").unwrap();
    let digest = trident::plugins::platform::loading::sha256_hex(b"a\nb\nc\n");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let pinned = text
        .lines()
        .find(|l| l.starts_with("assets"))
        .unwrap()
        .to_owned();
    let changed = format!(
        "assets = {{ characters = {{ path = \"ppocr_keys_v4.txt\", sha256 = \"{digest}\" }} }}"
    );
    std::fs::write(&manifest, text.replace(&pinned, &changed)).unwrap();
    let (_running, addr) = serve(dir.path(), &manifest);
    let answer = invoke(addr, "image/png", &photo(f, "label.png"));
    if answer.status != 500 || !answer.text().contains("'characters'") {
        return Err(format!(
            "a 3-character dictionary: {} {}",
            answer.status,
            answer.text()
        )
        .into());
    }
    std::fs::write(&manifest, text.replace(&pinned, "")).unwrap();
    let (_running, addr) = serve(dir.path(), &manifest);
    let answer = invoke(addr, "image/png", &photo(f, "label.png"));
    if answer.status != 500 || !answer.text().contains("no asset 'characters'") {
        return Err(format!("no dictionary: {} {}", answer.status, answer.text()).into());
    }
    let next = lines(&invoke(f.addr, "image/png", &photo(f, "label.png")))?;
    same_lines("the example after", &next, &reference(f, "label.png"))
}
