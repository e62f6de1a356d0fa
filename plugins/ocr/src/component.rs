//! The pipeline's component: the steps of the crate's documentation over trident's image
//! primitives and the endpoint's models.

wit_bindgen::generate!({ world: "pipeline-plugin", path: "../../wit/models", generate_all });

use std::sync::OnceLock;

use exports::trident::models::pipeline::Guest as Pipeline;
use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use trident::models::models::{CallError, ModelRequest, ModelResponse, infer};
use trident::plugin::assets;
use trident::plugin::host::config;
use trident::plugin::images::to_tensor;
use trident::plugin::types::{Datatype, Invocation, PluginError, Reply, Tensor};

use crate::recognize;
use crate::warp::{self, Image};
use crate::{Line, Settings};

struct Plugin;

/// The settings, read once by `check-config`.
static SETTINGS: OnceLock<Settings> = OnceLock::new();
/// The recognizer's classes, read once from the asset `characters`.
static CLASSES: OnceLock<Vec<String>> = OnceLock::new();

/// The input both PP-OCR models take.
const INPUT: &str = "x";

/// The photo as it was sent (EXIF orientation applied): 8-bit BGR at its own size.
fn photo_settings() -> Vec<(String, String)> {
    let max = trident_imaging::settings::MAX_SIDE.to_string();
    [
        ("resize", "limit"),
        ("limit_type", "max"),
        ("limit_side", max.as_str()),
        ("max_side", max.as_str()),
        ("multiple", "1"),
        ("layout", "NHWC"),
        ("channels", "BGR"),
        ("datatype", "UINT8"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec()
}

/// A model's refusal as the reply the client gets, naming the model.
fn refused(model: &str, error: CallError) -> Reply {
    let (status, message) = match error {
        // The manifest entry does not name a model the configuration calls: the operator's
        // mistake, not the client's.
        CallError::NotAllowed(m) => (500, m),
        CallError::BadRequest(m) => (400, m),
        CallError::Unavailable(m) => (503, m),
        CallError::Failed(m) => (500, m),
    };
    let body = serde_json::json!({ "error": format!("model '{model}': {message}") });
    Reply {
        status,
        content_type: "application/json".into(),
        headers: Vec::new(),
        body: serde_json::to_vec(&body).expect("JSON of a string"),
    }
}

/// `tensor`'s values, checked to be FP32 of the size its shape says.
fn floats(tensor: &Tensor, model: &str) -> Result<Vec<f32>, PluginError> {
    let count = tensor
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?));
    if tensor.datatype != Datatype::Fp32
        || count.and_then(|n| n.checked_mul(4)) != Some(tensor.data.len())
    {
        return Err(PluginError::Internal(format!(
            "model '{model}' answered '{}' as {:?} {:?} in {} bytes, not FP32 of that shape",
            tensor.name,
            tensor.datatype,
            tensor.shape,
            tensor.data.len()
        )));
    }
    Ok(tensor
        .data
        .as_chunks::<4>()
        .0
        .iter()
        .map(|b| f32::from_le_bytes(*b))
        .collect())
}

fn output<'a>(
    response: &'a ModelResponse,
    name: Option<&str>,
    model: &str,
) -> Result<&'a Tensor, PluginError> {
    match name {
        Some(name) => response.outputs.iter().find(|t| t.name == name),
        None => response.outputs.first(),
    }
    .ok_or_else(|| {
        PluginError::Internal(format!(
            "model '{model}' answered no output {}",
            name.unwrap_or("at all")
        ))
    })
}

/// What one request reads, or the reply a model's refusal makes.
fn read(
    invocation: &Invocation,
    s: &Settings,
    classes: &[String],
) -> Result<Result<Vec<Line>, Reply>, PluginError> {
    let content_type = invocation.content_type.as_deref();
    let input = to_tensor(INPUT, content_type, &invocation.body, &s.det_input)?;
    let detected = match infer(&ModelRequest {
        model: s.detector.clone(),
        inputs: vec![input],
        outputs: s.det_output.iter().cloned().collect(),
    }) {
        Ok(response) => response,
        Err(error) => return Ok(Err(refused(&s.detector, error))),
    };
    let map = output(&detected, s.det_output.as_deref(), &s.detector)?;
    let (values, (width, height)) =
        text_lines::map_values(&map.name, &map.shape, &map.data).map_err(PluginError::Internal)?;
    drop(detected);
    let raw = to_tensor("photo", content_type, &invocation.body, &photo_settings())?;
    let [_, h, w, 3] = raw.shape[..] else {
        return Err(PluginError::Internal(format!(
            "the photo came as {:?}, not [1, H, W, 3]",
            raw.shape
        )));
    };
    let photo = Image {
        width: w as usize,
        height: h as usize,
        pixels: raw.data,
    };
    let map = text_lines::db::Map {
        values: &values,
        width,
        height,
    };
    let boxes = text_lines::db::boxes(&map, (photo.width as u32, photo.height as u32), &s.db);
    drop(values);
    if boxes.len() > s.max_lines {
        return Err(PluginError::BadRequest(format!(
            "the photo holds {} text boxes, more than max_lines = {} (the pipeline's config)",
            boxes.len(),
            s.max_lines
        )));
    }
    let (boxes, crops): (Vec<_>, Vec<_>) = boxes
        .iter()
        .filter_map(|b| Some((b.corners, warp::crop(&photo, &b.corners)?)))
        .unzip();
    drop(photo);
    let mut read: Vec<Option<(String, f64)>> = vec![None; crops.len()];
    for chunk in recognize::order(&crops).chunks(s.rec_batch) {
        let members: Vec<&Image> = chunk.iter().map(|&i| &crops[i]).collect();
        let (data, width) = recognize::batch(&members, &s.rec_shape);
        let tensor = Tensor {
            name: INPUT.into(),
            datatype: Datatype::Fp32,
            shape: vec![
                chunk.len() as i64,
                3,
                s.rec_shape.height as i64,
                width as i64,
            ],
            data,
        };
        let response = match infer(&ModelRequest {
            model: s.recognizer.clone(),
            inputs: vec![tensor],
            outputs: Vec::new(),
        }) {
            Ok(response) => response,
            Err(error) => return Ok(Err(refused(&s.recognizer, error))),
        };
        let probabilities = output(&response, None, &s.recognizer)?;
        let shape = &probabilities.shape;
        if shape.len() != 3 || shape[0] != chunk.len() as i64 || shape[2] != classes.len() as i64 {
            return Err(PluginError::Internal(format!(
                "model '{}' answered {:?}; with {} crops and the {} classes of the asset \
                 'characters' (its lines, the blank and a space) it should be [{}, steps, {}]",
                s.recognizer,
                shape,
                chunk.len(),
                classes.len(),
                chunk.len(),
                classes.len()
            )));
        }
        let values = floats(probabilities, &s.recognizer)?;
        let decoded = recognize::decode(&values, shape[1] as usize, classes);
        for (&i, text) in chunk.iter().zip(decoded) {
            read[i] = Some(text);
        }
    }
    Ok(Ok(boxes
        .into_iter()
        .zip(read)
        .filter_map(|(corners, read)| {
            let (text, score) = read?;
            (score >= s.text_score).then_some(Line {
                corners,
                text,
                score,
            })
        })
        .collect()))
}

impl Pipeline for Plugin {
    fn handle(invocation: Invocation) -> Result<Reply, PluginError> {
        let settings = SETTINGS
            .get()
            .ok_or_else(|| PluginError::Internal("ocr was not initialised".into()))?;
        let classes = match CLASSES.get() {
            Some(classes) => classes,
            None => {
                let asset = assets::get("characters").ok_or_else(|| {
                    PluginError::Internal(
                        "the manifest gives ocr no asset 'characters' (the recognizer's \
                         dictionary, one character a line)"
                            .into(),
                    )
                })?;
                let classes = recognize::characters(&asset).map_err(PluginError::Internal)?;
                CLASSES.get_or_init(|| classes)
            }
        };
        Ok(match read(&invocation, settings, classes)? {
            Ok(lines) => Reply {
                status: 200,
                content_type: "application/json".into(),
                headers: Vec::new(),
                body: crate::answer(&lines),
            },
            Err(reply) => reply,
        })
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
