//! A Hugging Face `preprocessor_config.json`, read as the image settings it means: the keys of
//! [`crate::settings`] that make the tensor the model's own image processor makes (its PIL
//! backend: Pillow's resize, a centre crop whose offset is rounded down, rescale, normalize),
//! so a model folder's file drives the image plugin with no keys written by hand.
//!
//! Read for the processor families most image classifiers use, by the type the file names
//! (`image_processor_type`, or the older `feature_extractor_type`): ViT, CLIP, ConvNeXt, DeiT
//! and BEiT. Each key missing from the file takes its family's default, as `transformers` does.
//! What trident does not understand is refused by name rather than guessed at: another family,
//! a key not in the list below, a `resample` other than bilinear, bicubic or Lanczos, and
//! settings that leave the tensor's size to the image (no resize, a shorter-side resize with no
//! crop).
//!
//! Keys read: `do_resize`, `size` (a number, or `height`/`width`, or `shortest_edge`),
//! `resample`, `do_center_crop`, `crop_size`, `crop_pct` (ConvNeXt), `do_rescale`,
//! `rescale_factor`, `do_normalize`, `image_mean`, `image_std`. Keys that do not change an
//! image's tensor are accepted: the type names, `processor_class`, `do_convert_rgb` (trident
//! always makes RGB), `do_reduce_labels` / `reduce_labels` (segmentation labels only), and
//! `do_pad`, `pad_size`, `data_format`, `input_data_format`, `return_tensors`, `device` where
//! they hold what does nothing (false, null, `channels_first`).

use serde_json::{Map, Value};

/// The largest configuration file read (real ones are under 1 KiB).
pub const MAX_BYTES: usize = 64 * 1024;

/// The processor families read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Vit,
    Clip,
    ConvNext,
    Deit,
    Beit,
}

/// `(type name, family)`: the names `transformers` writes (an image processor's, then the
/// feature extractor's of older files).
const TYPES: [(&str, Family); 10] = [
    ("ViTImageProcessor", Family::Vit),
    ("ViTFeatureExtractor", Family::Vit),
    ("CLIPImageProcessor", Family::Clip),
    ("CLIPFeatureExtractor", Family::Clip),
    ("ConvNextImageProcessor", Family::ConvNext),
    ("ConvNextFeatureExtractor", Family::ConvNext),
    ("DeiTImageProcessor", Family::Deit),
    ("DeiTFeatureExtractor", Family::Deit),
    ("BeitImageProcessor", Family::Beit),
    ("BeitFeatureExtractor", Family::Beit),
];

/// The keys that set the tensor.
const READ: [&str; 11] = [
    "do_resize",
    "size",
    "resample",
    "do_center_crop",
    "crop_size",
    "crop_pct",
    "do_rescale",
    "rescale_factor",
    "do_normalize",
    "image_mean",
    "image_std",
];

/// Keys that never change an image's tensor.
const INERT: [&str; 6] = [
    "image_processor_type",
    "feature_extractor_type",
    "processor_class",
    "do_convert_rgb",
    "do_reduce_labels",
    "reduce_labels",
];

/// Keys accepted while they hold a value that does nothing.
const INERT_WHEN_UNSET: [&str; 6] = [
    "do_pad",
    "pad_size",
    "data_format",
    "input_data_format",
    "return_tensors",
    "device",
];

/// ImageNet's "standard" mean and std, as `transformers` names them (0.5 each).
const STANDARD: [f64; 3] = [0.5, 0.5, 0.5];
const CLIP_MEAN: [f64; 3] = [0.48145466, 0.4578275, 0.40821073];
const CLIP_STD: [f64; 3] = [0.26862954, 0.26130258, 0.27577711];

/// A processor's `size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Size {
    /// Stretched to exactly (width, height).
    Exact(u32, u32),
    /// The shorter side to this length, the aspect ratio kept.
    ShortestEdge(u32),
}

/// What a family does where the file is silent (the PIL processors' class attributes).
struct Defaults {
    size: Size,
    /// Whether a bare number as `size` means a square (`default_to_square`).
    square: bool,
    crop: Option<(u32, u32)>,
    center_crop: bool,
    /// Pillow's filter number.
    resample: i64,
    mean: [f64; 3],
    std: [f64; 3],
}

impl Family {
    fn defaults(self) -> Defaults {
        let (size, square, crop, center_crop, resample, mean, std) = match self {
            Family::Vit => (
                Size::Exact(224, 224),
                true,
                None,
                false,
                2,
                STANDARD,
                STANDARD,
            ),
            Family::Clip => (
                Size::ShortestEdge(224),
                false,
                Some((224, 224)),
                true,
                3,
                CLIP_MEAN,
                CLIP_STD,
            ),
            Family::ConvNext => (
                Size::ShortestEdge(384),
                false,
                None,
                false,
                3,
                STANDARD,
                STANDARD,
            ),
            Family::Deit => (
                Size::Exact(256, 256),
                true,
                Some((224, 224)),
                true,
                3,
                STANDARD,
                STANDARD,
            ),
            Family::Beit => (
                Size::Exact(224, 224),
                true,
                Some((224, 224)),
                false,
                3,
                STANDARD,
                STANDARD,
            ),
        };
        Defaults {
            size,
            square,
            crop,
            center_crop,
            resample,
            mean,
            std,
        }
    }
}

/// The settings keys (`size`, `resize`, `resize_shorter` or `resize_to`, `resample`,
/// `crop_offset`, `scale`, `mean`, `std`) that make the tensor the processor in `json` makes;
/// an error names the key at fault.
pub fn keys(json: &[u8]) -> Result<Vec<(&'static str, String)>, String> {
    if json.len() > MAX_BYTES {
        return Err(format!(
            "it is {} bytes; a preprocessor_config.json is at most {MAX_BYTES}",
            json.len()
        ));
    }
    let value: Value = serde_json::from_slice(json).map_err(|e| format!("it is not JSON: {e}"))?;
    let Value::Object(config) = value else {
        return Err("it is not a JSON object".into());
    };
    let family = family(&config)?;
    for (key, value) in &config {
        let unset = matches!(value, Value::Null | Value::Bool(false))
            || value.as_str() == Some("channels_first");
        if READ.contains(&key.as_str())
            || INERT.contains(&key.as_str())
            || (INERT_WHEN_UNSET.contains(&key.as_str()) && unset)
        {
            continue;
        }
        return Err(if INERT_WHEN_UNSET.contains(&key.as_str()) {
            format!("{key} = {value} is not supported (trident reads it only as false or null)")
        } else {
            format!(
                "`{key}` is not a key trident reads (it reads: {}; and ignores: {})",
                READ.join(", "),
                INERT.join(", ")
            )
        });
    }
    if family != Family::ConvNext && config.contains_key("crop_pct") {
        return Err("crop_pct is read only by ConvNeXt's processor".into());
    }
    let defaults = family.defaults();
    let flag = |key: &str, default: bool| -> Result<bool, String> {
        match config.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(format!("{key} = {other}: give true or false")),
        }
    };
    if !flag("do_resize", true)? {
        return Err(
            "do_resize = false leaves the tensor the image's own size; a model \
                    takes one size: give do_resize = true"
                .into(),
        );
    }
    let size = match config.get("size") {
        None | Some(Value::Null) => defaults.size,
        Some(value) => parse_size("size", value, defaults.square)?,
    };
    let center_crop = flag("do_center_crop", defaults.center_crop)?;
    let crop = match config.get("crop_size") {
        None | Some(Value::Null) => defaults.crop,
        Some(value) => match parse_size("crop_size", value, true)? {
            Size::Exact(w, h) => Some((w, h)),
            Size::ShortestEdge(_) => return Err("crop_size: give height and width".into()),
        },
    };
    let mut keys = Vec::new();
    let crop_to = |keys: &mut Vec<(&'static str, String)>, resized: Size| {
        let crop = match (center_crop, crop) {
            (false, _) => None,
            (true, Some(crop)) => Some(crop),
            (true, None) => return Err("do_center_crop = true with no crop_size".to_owned()),
        };
        match (resized, crop) {
            (Size::Exact(w, h), None) => {
                keys.push(("size", format!("{w}x{h}")));
                keys.push(("resize", "stretch".into()));
            }
            (Size::Exact(w, h), Some((cw, ch))) => {
                if cw > w || ch > h {
                    return Err(format!(
                        "crop_size {cw}x{ch} is larger than the resized {w}x{h} (the processor \
                         would pad it; trident does not)"
                    ));
                }
                keys.push(("size", format!("{cw}x{ch}")));
                keys.push(("resize", "stretch".into()));
                keys.push(("resize_to", format!("{w}x{h}")));
            }
            (Size::ShortestEdge(_), None) => {
                return Err(
                    "size.shortest_edge with no centre crop leaves the tensor the \
                            image's own shape; give do_center_crop and crop_size, or size's \
                            height and width"
                        .into(),
                );
            }
            (Size::ShortestEdge(side), Some((cw, ch))) => {
                if cw > side || ch > side {
                    return Err(format!(
                        "crop_size {cw}x{ch} is larger than the resized shorter side {side} \
                         (the processor would pad it; trident does not)"
                    ));
                }
                keys.push(("size", format!("{cw}x{ch}")));
                keys.push(("resize", "shorter".into()));
                keys.push(("resize_shorter", side.to_string()));
            }
        }
        Ok(())
    };
    if family == Family::ConvNext {
        // ConvNeXt's own resize: under 384, the shorter side to shortest_edge / crop_pct and
        // the centre shortest_edge² cropped; from 384 on, stretched to shortest_edge².
        let Size::ShortestEdge(edge) = size else {
            return Err("ConvNeXt's size must be shortest_edge".into());
        };
        if center_crop {
            return Err(
                "do_center_crop = true: ConvNeXt's processor crops by crop_pct; \
                        trident does not read a second crop"
                    .into(),
            );
        }
        if edge < 384 {
            let crop_pct = match config.get("crop_pct") {
                None | Some(Value::Null) => 224.0 / 256.0,
                Some(value) => match value.as_f64() {
                    Some(p) if p > 0.0 && p <= 1.0 => p,
                    _ => return Err(format!("crop_pct = {value}: give a number in (0, 1]")),
                },
            };
            let shorter = (f64::from(edge) / crop_pct).trunc();
            if shorter > f64::from(crate::settings::MAX_SIDE) {
                return Err(format!(
                    "crop_pct = {crop_pct} makes a resize of {shorter} pixels"
                ));
            }
            keys.push(("size", format!("{edge}x{edge}")));
            keys.push(("resize", "shorter".into()));
            keys.push(("resize_shorter", (shorter as u32).to_string()));
        } else {
            keys.push(("size", format!("{edge}x{edge}")));
            keys.push(("resize", "stretch".into()));
        }
    } else {
        crop_to(&mut keys, size)?;
    }
    let filter = match config.get("resample") {
        None | Some(Value::Null) => defaults.resample,
        Some(value) => value
            .as_i64()
            .ok_or_else(|| format!("resample = {value}: give Pillow's filter number"))?,
    };
    keys.push(("resample", resample(filter)?.into()));
    keys.push(("crop_offset", "floor".into()));
    let scale = if flag("do_rescale", true)? {
        match config.get("rescale_factor") {
            None | Some(Value::Null) => 1.0 / 255.0,
            Some(value) => value
                .as_f64()
                .filter(|f| f.is_finite())
                .ok_or_else(|| format!("rescale_factor = {value}: give a number"))?,
        }
    } else {
        1.0
    };
    keys.push(("scale", format!("{scale}")));
    let (mean, std) = if flag("do_normalize", true)? {
        (
            triple(&config, "image_mean", defaults.mean)?,
            triple(&config, "image_std", defaults.std)?,
        )
    } else {
        ([0.0; 3], [1.0; 3])
    };
    keys.push(("mean", join(mean)));
    keys.push(("std", join(std)));
    Ok(keys)
}

fn family(config: &Map<String, Value>) -> Result<Family, String> {
    let name = ["image_processor_type", "feature_extractor_type"]
        .iter()
        .find_map(|key| config.get(*key).and_then(Value::as_str))
        .ok_or("it names no image_processor_type (nor feature_extractor_type)")?;
    // A processor saved from the PIL backend may keep the suffix.
    let base = name.strip_suffix("Pil").unwrap_or(name);
    TYPES
        .iter()
        .find(|(known, _)| *known == base)
        .map(|(_, family)| *family)
        .ok_or_else(|| {
            format!(
                "its processor {name} is not one trident reads (it reads ViT's, CLIP's, \
                 ConvNeXt's, DeiT's and BEiT's); give the image keys in the manifest instead"
            )
        })
}

/// A `size` or `crop_size`: a number (a square where `square`, else the shorter side), or an
/// object of `height` and `width`, or of `shortest_edge`.
fn parse_size(key: &str, value: &Value, square: bool) -> Result<Size, String> {
    let pixels = |name: &str, value: &Value| -> Result<u32, String> {
        value
            .as_u64()
            .filter(|n| (1..=u64::from(crate::settings::MAX_SIDE)).contains(n))
            .map(|n| n as u32)
            .ok_or_else(|| {
                format!(
                    "{name} = {value}: give 1 to {} pixels",
                    crate::settings::MAX_SIDE
                )
            })
    };
    match value {
        Value::Number(_) => {
            let n = pixels(key, value)?;
            Ok(if square {
                Size::Exact(n, n)
            } else {
                Size::ShortestEdge(n)
            })
        }
        Value::Object(fields) => {
            let field = |name: &str| fields.get(name).filter(|v| !v.is_null());
            if let Some(other) = fields
                .iter()
                .find(|(name, v)| {
                    !v.is_null() && !["height", "width", "shortest_edge"].contains(&name.as_str())
                })
                .map(|(name, _)| name)
            {
                return Err(format!(
                    "{key}.{other} is not read (give height and width, or shortest_edge)"
                ));
            }
            match (field("height"), field("width"), field("shortest_edge")) {
                (Some(h), Some(w), None) => Ok(Size::Exact(
                    pixels(&format!("{key}.width"), w)?,
                    pixels(&format!("{key}.height"), h)?,
                )),
                (None, None, Some(edge)) => Ok(Size::ShortestEdge(pixels(
                    &format!("{key}.shortest_edge"),
                    edge,
                )?)),
                _ => Err(format!(
                    "{key} = {value}: give height and width, or shortest_edge"
                )),
            }
        }
        other => Err(format!(
            "{key} = {other}: give a number of pixels or an object"
        )),
    }
}

/// Pillow's filter numbers as settings names.
fn resample(filter: i64) -> Result<&'static str, String> {
    match filter {
        2 => Ok("bilinear"),
        3 => Ok("bicubic"),
        1 => Ok("lanczos"),
        other => Err(format!(
            "resample = {other} ({}) is not one trident has: give 2 (bilinear), 3 (bicubic) or \
             1 (Lanczos)",
            match other {
                0 => "nearest",
                4 => "box",
                5 => "hamming",
                _ => "not a Pillow filter",
            }
        )),
    }
}

/// Three numbers per channel (one number means the same for each).
fn triple(config: &Map<String, Value>, key: &str, default: [f64; 3]) -> Result<[f64; 3], String> {
    let bad = |value: &Value| format!("{key} = {value}: give three numbers, one per channel");
    match config.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(value @ Value::Number(n)) => {
            let n = n
                .as_f64()
                .filter(|f| f.is_finite())
                .ok_or_else(|| bad(value))?;
            Ok([n; 3])
        }
        Some(value @ Value::Array(items)) => match items.as_slice() {
            [a, b, c] => {
                let mut out = [0.0; 3];
                for (slot, item) in out.iter_mut().zip([a, b, c]) {
                    *slot = item
                        .as_f64()
                        .filter(|f| f.is_finite())
                        .ok_or_else(|| bad(value))?;
                }
                Ok(out)
            }
            _ => Err(bad(value)),
        },
        Some(value) => Err(bad(value)),
    }
}

fn join(values: [f64; 3]) -> String {
    values.map(|v| v.to_string()).join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<Vec<(&'static str, String)>, String> {
        keys(json.as_bytes())
    }

    fn get<'a>(keys: &'a [(&'static str, String)], key: &str) -> Option<&'a str> {
        keys.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Each family's defaults, from `transformers`' PIL processors' class attributes.
    #[test]
    fn each_family_reads_as_its_processor() {
        let vit = read(r#"{"image_processor_type": "ViTImageProcessor"}"#).unwrap();
        assert_eq!(get(&vit, "size"), Some("224x224"));
        assert_eq!(get(&vit, "resize"), Some("stretch"));
        assert_eq!(get(&vit, "resample"), Some("bilinear"));
        assert_eq!(get(&vit, "mean"), Some("0.5,0.5,0.5"));
        let clip = read(r#"{"image_processor_type": "CLIPImageProcessor"}"#).unwrap();
        assert_eq!(
            (get(&clip, "resize"), get(&clip, "resize_shorter")),
            (Some("shorter"), Some("224"))
        );
        assert_eq!(get(&clip, "resample"), Some("bicubic"));
        assert_eq!(get(&clip, "crop_offset"), Some("floor"));
        let convnext = read(
            r#"{"image_processor_type": "ConvNextImageProcessor", "size": {"shortest_edge": 224}}"#,
        )
        .unwrap();
        assert_eq!(get(&convnext, "resize_shorter"), Some("256"));
        assert_eq!(get(&convnext, "size"), Some("224x224"));
        let convnext = read(r#"{"image_processor_type": "ConvNextImageProcessor"}"#).unwrap();
        assert_eq!(
            (get(&convnext, "size"), get(&convnext, "resize")),
            (Some("384x384"), Some("stretch"))
        );
        let deit = read(r#"{"image_processor_type": "DeiTImageProcessor"}"#).unwrap();
        assert_eq!(
            (get(&deit, "size"), get(&deit, "resize_to")),
            (Some("224x224"), Some("256x256"))
        );
        let beit = read(r#"{"image_processor_type": "BeitImageProcessor"}"#).unwrap();
        assert_eq!(
            (get(&beit, "size"), get(&beit, "resize_to")),
            (Some("224x224"), None)
        );
    }

    /// Older files: a feature extractor's type, sizes as bare numbers (square or the shorter
    /// side, by family), a single mean.
    #[test]
    fn older_files_read_as_transformers_reads_them() {
        let clip = read(
            r#"{"feature_extractor_type": "CLIPFeatureExtractor", "size": 224, "crop_size": 224,
                "do_center_crop": true, "resample": 3}"#,
        )
        .unwrap();
        assert_eq!(get(&clip, "resize_shorter"), Some("224"));
        let vit = read(
            r#"{"feature_extractor_type": "ViTFeatureExtractor", "size": 384, "image_mean": 0.5,
                "image_std": [0.5, 0.5, 0.5], "resample": 2}"#,
        )
        .unwrap();
        assert_eq!(get(&vit, "size"), Some("384x384"));
        assert_eq!(get(&vit, "mean"), Some("0.5,0.5,0.5"));
        let beit = read(
            r#"{"feature_extractor_type": "BeitFeatureExtractor", "size": 224, "crop_size": 224,
                "do_center_crop": false, "reduce_labels": false, "resample": 2}"#,
        )
        .unwrap();
        assert_eq!(get(&beit, "resample"), Some("bilinear"));
        let normalized = read(
            r#"{"image_processor_type": "ViTImageProcessor", "do_normalize": false,
                "do_rescale": false}"#,
        )
        .unwrap();
        assert_eq!(
            (get(&normalized, "scale"), get(&normalized, "std")),
            (Some("1"), Some("1,1,1"))
        );
    }

    /// What is not understood is refused by name.
    #[test]
    fn what_trident_does_not_read_is_refused_by_name() {
        for (json, says) in [
            ("[1]", "not a JSON object"),
            ("{", "not JSON"),
            ("{}", "names no image_processor_type"),
            (
                r#"{"image_processor_type": "DetrImageProcessor"}"#,
                "DetrImageProcessor is not one",
            ),
            (
                r#"{"image_processor_type": "ViTImageProcessor", "do_flip_channel_order": true}"#,
                "`do_flip_channel_order` is not a key",
            ),
            (
                r#"{"image_processor_type": "ViTImageProcessor", "do_pad": true}"#,
                "do_pad = true",
            ),
            (
                r#"{"image_processor_type": "ViTImageProcessor", "resample": 0}"#,
                "(nearest)",
            ),
            (
                r#"{"image_processor_type": "ViTImageProcessor", "do_resize": false}"#,
                "do_resize",
            ),
            (
                r#"{"image_processor_type": "CLIPImageProcessor", "do_center_crop": false}"#,
                "shortest_edge with no centre crop",
            ),
            (
                r#"{"image_processor_type": "DeiTImageProcessor", "crop_size": 300}"#,
                "larger than the resized 256x256",
            ),
            (
                r#"{"image_processor_type": "ViTImageProcessor", "size": -3}"#,
                "size = -3",
            ),
            (
                r#"{"image_processor_type": "ViTImageProcessor", "size": 1e9}"#,
                "size = 1000000000",
            ),
            (
                r#"{"image_processor_type": "ViTImageProcessor", "size": {"longest_edge": 5}}"#,
                "size.longest_edge is not read",
            ),
            (
                r#"{"image_processor_type": "ViTImageProcessor", "image_std": [1, 2]}"#,
                "image_std",
            ),
            (
                r#"{"image_processor_type": "ViTImageProcessor", "crop_pct": 0.9}"#,
                "crop_pct",
            ),
            (
                r#"{"image_processor_type": "ConvNextImageProcessor", "size": {"shortest_edge": 224}, "crop_pct": 0}"#,
                "crop_pct = 0",
            ),
        ] {
            let error = read(json).unwrap_err();
            assert!(error.contains(says), "{json}: {error}");
        }
        let huge = format!(
            r#"{{"image_processor_type": "ViTImageProcessor", "x": "{}"}}"#,
            "a".repeat(MAX_BYTES)
        );
        assert!(read(&huge).unwrap_err().contains("at most"));
    }

    /// The keys it writes are settings the image settings accept.
    #[test]
    fn the_keys_are_valid_settings() {
        for kind in ["ViT", "CLIP", "ConvNext", "DeiT", "Beit"] {
            let keys = read(&format!(
                r#"{{"image_processor_type": "{kind}ImageProcessor"}}"#
            ))
            .unwrap();
            let config = |key: &str| get(&keys, key).map(str::to_owned);
            crate::settings::Preprocess::from_config(config).unwrap();
        }
    }
}
