//! Response adapter: a text detector's probability map becomes the boxes of the text lines in
//! the photo, as PaddleOCR's DB post-processing makes them (RapidOCR's defaults for PP-OCRv4):
//! `[{"box": [[x, y], [x, y], [x, y], [x, y]], "score": 0.93}, ...]`, each box's corners from
//! its top-left clockwise in the photo's pixels, the boxes in reading order (top to bottom,
//! then left to right). Paired with image-tensor under `resize = "limit"`, which gives the
//! detector the photo at its own aspect ratio: the boxes are mapped back onto the photo as the
//! client sent it (its size read from the request body's image header, EXIF orientation
//! applied).
//!
//! Config (manifest `config` table; every key optional): `output` (the map: default the
//! model's first output, FP32 shaped `[1, 1, H, W]`, `[1, H, W]` or `[H, W]`), `thresh` (0.3),
//! `box_thresh` (0.5), `unclip_ratio` (1.6), `max_candidates` (1000), `use_dilation` (`true`).
//! See [`db`] for what each does.

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

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({ world: "checked-response-adapter-plugin", path: "../../wit" });

    use std::sync::OnceLock;

    use exports::trident::plugin::lifecycle::Guest as Lifecycle;
    use exports::trident::plugin::model_check::{Guest as ModelCheck, ModelInfo};
    use exports::trident::plugin::response_adapter::{Guest, InferenceResult};
    use trident::plugin::host::config;
    use trident::plugin::types::{Datatype, Invocation, PluginError, Reply};

    struct Plugin;

    /// The output's name (if set) and the settings, read once by `check-config`.
    static SETTINGS: OnceLock<(Option<String>, crate::db::Settings)> = OnceLock::new();

    /// The photo's width and height: the request body's image, read from its header.
    fn photo_size(invocation: &Invocation) -> Result<(u32, u32), PluginError> {
        let sizes = trident_imaging::photo_sizes(
            invocation.content_type.as_deref(),
            &invocation.body,
        )
        .map_err(|e| {
            PluginError::BadRequest(format!(
                "text-boxes maps boxes onto the request's image, and cannot read its size: {e}"
            ))
        })?;
        sizes
            .first()
            .copied()
            .ok_or_else(|| PluginError::BadRequest("the request holds no image".into()))
    }

    impl Guest for Plugin {
        fn adapt_response(
            invocation: Invocation,
            inference: InferenceResult,
        ) -> Result<Reply, PluginError> {
            let (output, settings) = SETTINGS
                .get()
                .ok_or_else(|| PluginError::Internal("text-boxes was not initialised".into()))?;
            let tensor = match output {
                Some(name) => inference.outputs.iter().find(|t| &t.name == name),
                None => inference.outputs.first(),
            }
            .ok_or_else(|| PluginError::Internal("the model returned no probability map".into()))?;
            if tensor.datatype != Datatype::Fp32 {
                return Err(PluginError::Internal(format!(
                    "output '{}' is {:?}, not an FP32 probability map",
                    tensor.name, tensor.datatype
                )));
            }
            let (width, height) = crate::map_size(&tensor.name, &tensor.shape, false)
                .map_err(PluginError::Internal)?
                .expect("a tensor's shape has no -1");
            if width.checked_mul(height).and_then(|n| n.checked_mul(4)) != Some(tensor.data.len()) {
                return Err(PluginError::Internal(format!(
                    "output '{}' holds {} bytes, not {width}x{height} floats",
                    tensor.name,
                    tensor.data.len()
                )));
            }
            let values: Vec<f32> = tensor
                .data
                .as_chunks::<4>()
                .0
                .iter()
                .map(|b| f32::from_le_bytes(*b))
                .collect();
            let photo = photo_size(&invocation)?;
            let map = crate::db::Map {
                values: &values,
                width,
                height,
            };
            let boxes = crate::db::boxes(&map, photo, settings);
            Ok(Reply {
                status: 200,
                content_type: "application/json".into(),
                headers: Vec::new(),
                body: crate::answer(&boxes),
            })
        }
    }

    impl ModelCheck for Plugin {
        fn check_model(model: ModelInfo) -> Result<(), String> {
            let (output, _) = SETTINGS.get().ok_or("text-boxes was not initialised")?;
            let names: Vec<&str> = model.outputs.iter().map(|t| t.name.as_str()).collect();
            let tensor = match output {
                Some(name) => model.outputs.iter().find(|t| &t.name == name),
                None => model.outputs.first(),
            }
            .ok_or_else(|| {
                format!(
                    "it has no output {} (its outputs: {}); set the plugin's `output`",
                    output.as_deref().unwrap_or("at all"),
                    names.join(", ")
                )
            })?;
            if tensor.datatype != Datatype::Fp32 {
                return Err(format!(
                    "output '{}' is {:?}, and a probability map is FP32",
                    tensor.name, tensor.datatype
                ));
            }
            // The configuration's shape leaves out the batch dimension of a batching model.
            crate::map_size(&tensor.name, &tensor.shape, true).map(|_| ())
        }
    }

    impl Lifecycle for Plugin {
        fn check_config() -> Result<(), String> {
            if SETTINGS.get().is_none() {
                let _ = SETTINGS.set(crate::settings(config)?);
            }
            Ok(())
        }
    }

    export!(Plugin);
}
