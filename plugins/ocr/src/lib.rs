//! Pipeline: the text of a photo, read by two models of the endpoint (PP-OCR's detector and
//! recognizer), as RapidOCR reads it. A photo in (JPEG, PNG, WebP, BMP, GIF or TIFF; raw, or
//! base64 in JSON), every line of text out, in reading order:
//! `[{"text": "Total 42", "score": 0.98, "box": [[x, y], [x, y], [x, y], [x, y]]}, ...]`, each
//! box's corners from its top-left clockwise in the photo's pixels (EXIF orientation applied).
//!
//! 1. The photo becomes the detector's input, as image-tensor's `resize = "limit"` makes it
//!    (trident's native image primitives): its shorter side brought up to `limit_side` (736),
//!    a longer side over `max_side` (2000) brought down first, each a multiple of 32.
//! 2. `detector` (a model name) answers a probability map, which PaddleOCR's DB
//!    post-processing turns into boxes ([`text_lines::db`], the text-boxes plugin's code).
//! 3. Each box is cut out of the photo and straightened ([`warp`]).
//! 4. The crops go to `recognizer` a batch at a time ([`recognize`]), and its answer is read
//!    with the character dictionary (the asset `characters`). Lines whose confidence is under
//!    `text_score` are left out.
//!
//! Config (every key optional): `detector` (`"detector"`), `recognizer` (`"recognizer"`),
//! `limit_side` (736), `limit_type` (`min`), `max_side` (2000), the detector's `thresh` (0.3),
//! `box_thresh` (0.5), `unclip_ratio` (1.6), `max_candidates` (1000), `use_dilation`
//! (`true`) and output `det_output` (its first), `rec_batch` (6 crops a call), `rec_height`
//! (48), `rec_width` (320, the narrowest a batch is padded to), `rec_max_width` (2400),
//! `text_score` (0.5), `max_lines` (256: a photo with more boxes is refused, 400). The manifest
//! entry names both models (`models = [...]`); a request makes one call of the detector and one
//! of the recognizer for every `rec_batch` lines (44 at most by default, under the manifest's
//! default `max_model_calls` of 64).
//!
//! What differs from RapidOCR: crops are cut from the photo as sent, where RapidOCR cuts them
//! from its copy brought down to 2000 pixels a side; a line more than `rec_max_width /
//! rec_height` times as wide as it is high is squeezed to that; there is no direction
//! classifier (text upside down is not read).

pub mod recognize;
pub mod warp;

/// The pipeline's settings, read once from the configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub detector: String,
    pub recognizer: String,
    /// The image primitive's keys for the detector's input.
    pub det_input: Vec<(String, String)>,
    pub det_output: Option<String>,
    pub db: text_lines::db::Settings,
    pub rec_batch: usize,
    pub rec_shape: recognize::Shape,
    /// The most lines a photo may hold: past it, 400 (noise read as specks, or a page too
    /// dense for one request); each `rec_batch` of them is a model call.
    pub max_lines: usize,
    pub text_score: f64,
}

/// The settings `config` gives (it reads one key); an error names the key.
pub fn settings(config: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
    let (_, db) = text_lines::settings(|key| match key {
        "output" => None,
        _ => config(key),
    })?;
    let count = |key: &str, default: usize, most: usize| -> Result<usize, String> {
        match config(key) {
            None => Ok(default),
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if (1..=most).contains(&n) => Ok(n),
                _ => Err(format!("{key} = '{v}': give 1 to {most}")),
            },
        }
    };
    let mut det_input = vec![
        ("resize".to_owned(), "limit".to_owned()),
        ("resample".to_owned(), "opencv_bilinear".to_owned()),
        ("channels".to_owned(), "BGR".to_owned()),
        ("mean".to_owned(), "0.5".to_owned()),
        ("std".to_owned(), "0.5".to_owned()),
    ];
    for key in ["limit_side", "limit_type", "max_side"] {
        if let Some(value) = config(key) {
            det_input.push((key.to_owned(), value));
        }
    }
    let rec_height = count("rec_height", 48, 256)?;
    let rec_shape = recognize::Shape {
        height: rec_height,
        min_width: count("rec_width", 320, 4096)?,
        max_width: count("rec_max_width", 2400, 8192)?,
    };
    if rec_shape.max_width < rec_shape.min_width {
        return Err(format!(
            "rec_max_width = {} is under rec_width = {}",
            rec_shape.max_width, rec_shape.min_width
        ));
    }
    let text_score = match config("text_score") {
        None => 0.5,
        Some(v) => match v.trim().parse::<f64>() {
            Ok(s) if (0.0..=1.0).contains(&s) => s,
            _ => return Err(format!("text_score = '{v}': give a number from 0 to 1")),
        },
    };
    Ok(Settings {
        detector: config("detector").unwrap_or_else(|| "detector".into()),
        recognizer: config("recognizer").unwrap_or_else(|| "recognizer".into()),
        det_input,
        det_output: config("det_output"),
        db,
        rec_batch: count("rec_batch", 6, 64)?,
        max_lines: count("max_lines", 256, 10_000)?,
        rec_shape,
        text_score,
    })
}

/// One line read: its box, text and confidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub corners: [[i64; 2]; 4],
    pub text: String,
    pub score: f64,
}

/// The answer's JSON: one object per line.
pub fn answer(lines: &[Line]) -> Vec<u8> {
    let lines: Vec<serde_json::Value> = lines
        .iter()
        .map(|line| {
            serde_json::json!({
                "text": line.text,
                "score": (line.score * 1e4).round() / 1e4,
                "box": line.corners,
            })
        })
        .collect();
    serde_json::to_vec(&lines).expect("JSON of strings and numbers")
}

#[cfg(target_arch = "wasm32")]
mod component;
