//! Text lines in a text detector's output, shared by the text-boxes plugin (the boxes as a
//! response) and the ocr pipeline (the boxes cropped and read): PaddleOCR's DB post-processing
//! ([`db`]) over the minimum-area rectangles of [`geometry`], its configuration keys
//! ([`settings`]), and the map's size from its shape ([`map_size`]).

pub mod db;
pub mod geometry;

/// The settings the configuration gives (`config` reads one key); an error names the key.
pub fn settings(
    config: impl Fn(&str) -> Option<String>,
) -> Result<(Option<String>, db::Settings), String> {
    let mut settings = db::Settings::default();
    let fraction = |key: &str, value: &str| -> Result<f64, String> {
        match value.trim().parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
            _ => Err(format!("{key} = '{value}': give a number from 0 to 1")),
        }
    };
    if let Some(v) = config("thresh") {
        settings.thresh = fraction("thresh", &v)? as f32;
    }
    if let Some(v) = config("box_thresh") {
        settings.box_thresh = fraction("box_thresh", &v)?;
    }
    if let Some(v) = config("unclip_ratio") {
        settings.unclip_ratio = match v.trim().parse::<f64>() {
            Ok(r) if (0.0..=10.0).contains(&r) => r,
            _ => return Err(format!("unclip_ratio = '{v}': give a number from 0 to 10")),
        };
    }
    if let Some(v) = config("max_candidates") {
        settings.max_candidates = match v.trim().parse::<usize>() {
            Ok(n @ 1..=100_000) => n,
            _ => return Err(format!("max_candidates = '{v}': give 1 to 100000")),
        };
    }
    if let Some(v) = config("use_dilation") {
        settings.dilation = match v.as_str() {
            "true" => true,
            "false" => false,
            _ => return Err(format!("use_dilation = '{v}': give true or false")),
        };
    }
    Ok((config("output"), settings))
}

/// The map's width and height from its shape: the last two dimensions, every one before them
/// 1 (one photo a request). In a model's configuration (`variable`), -1 stands for a dimension
/// known only at run time, and the width and height are then `None`.
pub fn map_size(
    name: &str,
    shape: &[i64],
    variable: bool,
) -> Result<Option<(usize, usize)>, String> {
    let shaped = || {
        format!("output '{name}' is shaped {shape:?}; a map is [1, 1, H, W], [1, H, W] or [H, W]")
    };
    let fits = |d: i64| d == 1 || (variable && d == -1);
    match shape {
        [lead @ .., h, w] if lead.len() <= 2 && lead.iter().all(|d| fits(*d)) => {
            if variable && (*h == -1 || *w == -1) {
                return Ok(None);
            }
            let side = |d: i64| match usize::try_from(d) {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(shaped()),
            };
            Ok(Some((side(*w)?, side(*h)?)))
        }
        _ => Err(shaped()),
    }
}

/// The answer's JSON: one object per box.
pub fn answer(boxes: &[db::TextBox]) -> Vec<u8> {
    let boxes: Vec<serde_json::Value> = boxes
        .iter()
        .map(|b| {
            serde_json::json!({
                "box": b.corners,
                "score": (b.score * 1e4).round() / 1e4,
            })
        })
        .collect();
    serde_json::to_vec(&boxes).expect("JSON of numbers")
}

/// An FP32 map's values and `(width, height)`, from a tensor's name, shape and little-endian
/// bytes; an error names the tensor.
pub fn map_values(
    name: &str,
    shape: &[i64],
    data: &[u8],
) -> Result<(Vec<f32>, (usize, usize)), String> {
    let (width, height) = map_size(name, shape, false)?.expect("variable is false: no -1");
    if width.checked_mul(height).and_then(|n| n.checked_mul(4)) != Some(data.len()) {
        return Err(format!(
            "output '{name}' holds {} bytes, not {width}x{height} floats",
            data.len()
        ));
    }
    let values = data
        .as_chunks::<4>()
        .0
        .iter()
        .map(|b| f32::from_le_bytes(*b))
        .collect();
    Ok((values, (width, height)))
}
