//! Response adapter: a YOLO detector's raw output becomes the objects in each photo, as
//! ultralytics' predictor post-processes it (confidence threshold, non-maximum suppression per
//! class, at most `max_detections`) and answered as Hugging Face's object-detection pipeline
//! answers: `[{"score": 0.93, "label": "dog", "box": {"xmin": 12.5, "ymin": 40.0, "xmax":
//! 310.25, "ymax": 402.0}}, ...]` per photo (a list of those for a batch), best first, in the
//! photo's pixels. Paired with image-tensor under `resize = "letterbox"` (with `resample =
//! "opencv_bilinear"`, as ultralytics resizes): the boxes are mapped back out of the letterbox
//! onto each photo as the client sent it (its size read from the request body's image header,
//! EXIF orientation applied).
//!
//! Config (manifest `config` table; every key optional): `output` (default the model's first),
//! `format` (`yolov8`, default: ultralytics' YOLOv8/YOLO11 export, `[n, 4 + classes,
//! candidates]`; `yolov5`: `[n, candidates, 5 + classes]` with an objectness), `size` (the
//! letterbox's `WxH` or side, as image-tensor's `size`; default 640), `letterbox_up` (as
//! image-tensor's, default `true`), `confidence` (0.25), `iou` (0.7), `max_detections` (300),
//! `class_agnostic` (`false`). Asset `labels` (optional): the class names, as top-k-labels
//! reads them (one per line, or JSON); without it a class is named by its index.

pub mod nms;

/// The plugin's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The output read; `None`: the first.
    pub output: Option<String>,
    /// The post-processing's settings.
    pub nms: nms::Settings,
    /// The letterbox's (width, height): the model's input size.
    pub size: (u32, u32),
    /// Whether the letterbox enlarges small photos.
    pub up: bool,
}

/// The settings the configuration gives (`config` reads one key); an error names the key.
pub fn settings(config: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
    let mut nms = nms::Settings::default();
    let fraction = |key: &str, value: &str| -> Result<f32, String> {
        match value.trim().parse::<f32>() {
            Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
            _ => Err(format!("{key} = '{value}': give a number from 0 to 1")),
        }
    };
    let flag = |key: &str, value: &str| match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{key} = '{value}': give true or false")),
    };
    if let Some(v) = config("format") {
        nms.format = match v.as_str() {
            "yolov8" => nms::Format::Yolov8,
            "yolov5" => nms::Format::Yolov5,
            _ => return Err(format!("format = '{v}': give yolov8 or yolov5")),
        };
    }
    if let Some(v) = config("confidence") {
        nms.confidence = fraction("confidence", &v)?;
    }
    if let Some(v) = config("iou") {
        nms.iou = fraction("iou", &v)?;
    }
    if let Some(v) = config("max_detections") {
        nms.max_detections = match v.trim().parse::<usize>() {
            Ok(n @ 1..=10_000) => n,
            _ => return Err(format!("max_detections = '{v}': give 1 to 10000")),
        };
    }
    if let Some(v) = config("class_agnostic") {
        nms.class_agnostic = flag("class_agnostic", &v)?;
    }
    let side = |text: &str| match text.trim().parse::<u32>() {
        Ok(n @ 1..=8192) => Ok(n),
        _ => Err(format!("size = '{text}': give 1 to 8192 pixels, or WxH")),
    };
    let size = match config("size") {
        None => (640, 640),
        Some(v) => match v.split_once(['x', 'X']) {
            Some((w, h)) => (side(w)?, side(h)?),
            None => (side(&v)?, side(&v)?),
        },
    };
    let up = match config("letterbox_up") {
        None => true,
        Some(v) => flag("letterbox_up", &v)?,
    };
    Ok(Settings {
        output: config("output").filter(|o| !o.is_empty()),
        nms,
        size,
        up,
    })
}

/// The output's images and its two last dimensions from its shape: `[n, a, b]` or `[a, b]`
/// (one image). In a model's configuration (`variable`), -1 stands for a dimension known only
/// at run time.
pub fn output_dims(name: &str, shape: &[i64], variable: bool) -> Result<(usize, i64, i64), String> {
    let shaped = || format!("output '{name}' is shaped {shape:?}; a detector's is [n, a, b]");
    let dim = |d: i64| {
        if variable && d == -1 {
            Ok(-1)
        } else if d > 0 {
            Ok(d)
        } else {
            Err(shaped())
        }
    };
    match shape {
        [a, b] => Ok((1, dim(*a)?, dim(*b)?)),
        [n, a, b] => Ok((usize::try_from(dim(*n)?).unwrap_or(1), dim(*a)?, dim(*b)?)),
        _ => Err(shaped()),
    }
}

/// The answer's JSON: per photo, its detections as Hugging Face's object-detection pipeline
/// writes them (coordinates to the hundredth of a pixel); a list of those where the request
/// held several photos.
pub fn answer(
    photos: &[Vec<nms::Detection>],
    labels: &class_labels::Labels,
    batch: bool,
) -> Vec<u8> {
    let round = |v: f32| (f64::from(v) * 100.0).round() / 100.0;
    let per_photo: Vec<serde_json::Value> = photos
        .iter()
        .map(|found| {
            found
                .iter()
                .map(|d| {
                    let [xmin, ymin, xmax, ymax] = d.corners.map(round);
                    serde_json::json!({
                        "score": (f64::from(d.score) * 1e4).round() / 1e4,
                        "label": labels.name(d.class),
                        "box": {"xmin": xmin, "ymin": ymin, "xmax": xmax, "ymax": ymax},
                    })
                })
                .collect()
        })
        .collect();
    let value = match (batch, per_photo.as_slice()) {
        (false, [one]) => one.clone(),
        _ => serde_json::Value::Array(per_photo),
    };
    serde_json::to_vec(&value).expect("JSON of numbers and strings")
}

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({ world: "checked-response-adapter-plugin", path: "../../wit" });

    use std::sync::OnceLock;

    use class_labels::Labels;
    use exports::trident::plugin::lifecycle::Guest as Lifecycle;
    use exports::trident::plugin::model_check::{Guest as ModelCheck, ModelInfo};
    use exports::trident::plugin::response_adapter::{Guest, InferenceResult};
    use trident::plugin::assets;
    use trident::plugin::host::config;
    use trident::plugin::types::{Datatype, Invocation, PluginError, Reply};

    struct Plugin;

    /// The settings and labels, read once by `check-config`.
    static STATE: OnceLock<(crate::Settings, Labels)> = OnceLock::new();

    /// The output's values as `f32`s (FP32 or FP16).
    fn floats(datatype: Datatype, data: &[u8]) -> Option<Vec<f32>> {
        match datatype {
            Datatype::Fp32 => Some(
                data.as_chunks::<4>()
                    .0
                    .iter()
                    .map(|b| f32::from_le_bytes(*b))
                    .collect(),
            ),
            Datatype::Fp16 => Some(
                data.as_chunks::<2>()
                    .0
                    .iter()
                    .map(|b| half_to_f32(u16::from_le_bytes(*b)))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// IEEE 754 half precision to `f32`.
    fn half_to_f32(bits: u16) -> f32 {
        let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
        let exponent = i32::from((bits >> 10) & 0x1f);
        let fraction = f32::from(bits & 0x3ff);
        sign * match exponent {
            0 => fraction * 2f32.powi(-24),
            31 if fraction == 0.0 => f32::INFINITY,
            31 => f32::NAN,
            e => (1.0 + fraction / 1024.0) * 2f32.powi(e - 15),
        }
    }

    impl Guest for Plugin {
        fn adapt_response(
            invocation: Invocation,
            inference: InferenceResult,
        ) -> Result<Reply, PluginError> {
            let (settings, labels) = STATE.get().ok_or_else(|| {
                PluginError::Internal("detection-boxes was not initialised".into())
            })?;
            let tensor = match &settings.output {
                Some(name) => inference.outputs.iter().find(|t| &t.name == name),
                None => inference.outputs.first(),
            }
            .ok_or_else(|| {
                PluginError::Internal("the model returned no detections output".into())
            })?;
            let values = floats(tensor.datatype, &tensor.data).ok_or_else(|| {
                PluginError::Internal(format!(
                    "output '{}' is {:?}, not FP32 or FP16 detections",
                    tensor.name, tensor.datatype
                ))
            })?;
            let (images, rows, columns) = crate::output_dims(&tensor.name, &tensor.shape, false)
                .map_err(PluginError::Internal)?;
            let (rows, columns) = (rows as usize, columns as usize);
            if images
                .checked_mul(rows)
                .and_then(|n| n.checked_mul(columns))
                != Some(values.len())
            {
                return Err(PluginError::Internal(format!(
                    "output '{}' holds {} values, not its shape's",
                    tensor.name,
                    values.len()
                )));
            }
            let photos =
                trident_imaging::photo_sizes(invocation.content_type.as_deref(), &invocation.body)
                    .map_err(|e| {
                        PluginError::BadRequest(format!(
                            "detection-boxes maps boxes onto the request's images, and cannot \
                             read their sizes: {e}"
                        ))
                    })?;
            if photos.len() != images {
                return Err(PluginError::Internal(format!(
                    "the request holds {} images and the output {images}",
                    photos.len()
                )));
            }
            let mut found = Vec::with_capacity(images);
            for (image, photo) in photos.iter().enumerate() {
                let per_image = rows * columns;
                let output = crate::nms::Output {
                    values: &values[image * per_image..(image + 1) * per_image],
                    rows,
                    columns,
                };
                let mut detections =
                    crate::nms::detect(&output, &settings.nms).map_err(PluginError::Internal)?;
                crate::nms::onto_photo(&mut detections, settings.size, *photo, settings.up);
                found.push(detections);
            }
            let batch = tensor.shape.len() == 3 && photos.len() != 1;
            Ok(Reply {
                status: 200,
                content_type: "application/json".into(),
                headers: Vec::new(),
                body: crate::answer(&found, labels, batch),
            })
        }
    }

    impl ModelCheck for Plugin {
        fn check_model(model: ModelInfo) -> Result<(), String> {
            let (settings, labels) = STATE.get().ok_or("detection-boxes was not initialised")?;
            let names: Vec<&str> = model.outputs.iter().map(|t| t.name.as_str()).collect();
            let tensor = match &settings.output {
                Some(name) => model.outputs.iter().find(|t| &t.name == name),
                None => model.outputs.first(),
            }
            .ok_or_else(|| {
                format!(
                    "it has no output {} (its outputs: {}); set the plugin's `output`",
                    settings.output.as_deref().unwrap_or("at all"),
                    names.join(", ")
                )
            })?;
            if !matches!(tensor.datatype, Datatype::Fp32 | Datatype::Fp16) {
                return Err(format!(
                    "output '{}' is {:?}, and detections are FP32 or FP16",
                    tensor.name, tensor.datatype
                ));
            }
            // The configuration's shape leaves out the batch dimension of a batching model.
            let (_, rows, columns) = crate::output_dims(&tensor.name, &tensor.shape, true)?;
            let features = match settings.nms.format {
                crate::nms::Format::Yolov8 => rows,
                crate::nms::Format::Yolov5 => columns,
            };
            let head = match settings.nms.format {
                crate::nms::Format::Yolov8 => 4,
                crate::nms::Format::Yolov5 => 5,
            };
            if features != -1 {
                if features <= head {
                    return Err(format!(
                        "output '{}' is shaped {:?}: a {:?} output has {head} box values and a \
                         score per class per candidate; set the plugin's `format`",
                        tensor.name, tensor.shape, settings.nms.format
                    ));
                }
                if let Some(count) = labels.count()
                    && count as i64 != features - head
                {
                    return Err(format!(
                        "output '{}' scores {} classes and the labels asset names {count}",
                        tensor.name,
                        features - head
                    ));
                }
            }
            // A model input of fixed height and width must be the letterbox's size.
            for input in &model.inputs {
                if let [.., h, w] = input.shape.as_slice()
                    && input.shape.len() >= 3
                    && *h > 0
                    && *w > 0
                    && (*w, *h) != (i64::from(settings.size.0), i64::from(settings.size.1))
                {
                    return Err(format!(
                        "input '{}' is {w}x{h}, and this plugin maps boxes out of a {}x{} \
                         letterbox; set the plugin's `size`",
                        input.name, settings.size.0, settings.size.1
                    ));
                }
            }
            Ok(())
        }
    }

    impl Lifecycle for Plugin {
        fn check_config() -> Result<(), String> {
            if STATE.get().is_none() {
                let settings = crate::settings(config)?;
                let labels = match assets::get("labels") {
                    Some(bytes) => Labels::parse(&bytes)?,
                    None => Labels::Indices,
                };
                let _ = STATE.set((settings, labels));
            }
            Ok(())
        }
    }

    export!(Plugin);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_read_and_bad_values_named() {
        let from = |pairs: &'static [(&'static str, &'static str)]| {
            settings(move |key: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| (*v).to_owned())
            })
        };
        let default = from(&[]).unwrap();
        assert_eq!((default.size, default.up), ((640, 640), true));
        let set = from(&[
            ("format", "yolov5"),
            ("size", "320"),
            ("confidence", "0.1"),
            ("iou", "0.45"),
            ("max_detections", "10"),
            ("class_agnostic", "true"),
        ])
        .unwrap();
        assert_eq!(set.size, (320, 320));
        assert_eq!(set.nms.format, nms::Format::Yolov5);
        assert!(set.nms.class_agnostic);
        for (pairs, says) in [
            (&[("format", "yolov9000")][..], "format = 'yolov9000'"),
            (&[("confidence", "2")][..], "confidence = '2'"),
            (&[("iou", "x")][..], "iou = 'x'"),
            (&[("max_detections", "0")][..], "max_detections = '0'"),
            (&[("size", "0x3")][..], "size = '0'"),
            (&[("class_agnostic", "yes")][..], "class_agnostic = 'yes'"),
        ] {
            let error = from(pairs).unwrap_err();
            assert!(error.contains(says), "{pairs:?}: {error}");
        }
    }

    #[test]
    fn shapes_and_answers() {
        assert_eq!(
            output_dims("o", &[1, 84, 8400], false).unwrap(),
            (1, 84, 8400)
        );
        assert_eq!(output_dims("o", &[84, 8400], false).unwrap(), (1, 84, 8400));
        assert_eq!(output_dims("o", &[-1, 22, -1], true).unwrap(), (1, 22, -1));
        assert!(output_dims("o", &[1, 1, 84, 8400], false).is_err());
        assert!(output_dims("o", &[1, 0, 3], false).is_err());
        let found = vec![vec![nms::Detection {
            corners: [1.234, 2.0, 3.0, 4.567],
            score: 0.876_54,
            class: 1,
        }]];
        let labels = class_labels::Labels::Names(vec!["cat".into(), "dog".into()]);
        let one: serde_json::Value =
            serde_json::from_slice(&answer(&found, &labels, false)).unwrap();
        assert_eq!(
            one,
            serde_json::json!([{"score": 0.8765, "label": "dog",
                "box": {"xmin": 1.23, "ymin": 2.0, "xmax": 3.0, "ymax": 4.57}}])
        );
        let batch: serde_json::Value =
            serde_json::from_slice(&answer(&found, &labels, true)).unwrap();
        assert_eq!(batch[0], one);
    }
}
