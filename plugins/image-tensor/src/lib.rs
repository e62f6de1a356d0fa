//! Request adapter: JPEG, PNG, WebP, BMP, GIF or TIFF images (raw, `application/x-image`, or base64 in JSON; one or a
//! batch) become one normalized tensor, as torchvision's `Resize`, `CenterCrop`, `ToTensor` and
//! `Normalize` make it. The work is `trident-imaging` (`imaging/` in the repository), the same
//! code trident offers every guest as host image primitives.
//!
//! Config (manifest `config` table; every key optional, defaults are ImageNet's): `input`
//! (the tensor's name, default `INPUT0`), `outputs` (comma-separated outputs to ask for;
//! default all), and the keys of `trident_imaging::settings`: `size` (`224` or `WxH`), `resize`
//! (`shorter`, default, `stretch`, or `limit`: a detector's input, the image's own size with each
//! side a multiple of `multiple`, default 32, its shorter side brought up to `limit_side`,
//! default 736, or its longer down to it with `limit_type = "max"`, after a cap of `max_side`,
//! default 2000, as RapidOCR sizes PP-OCR's detector input; one image a request, and the model's
//! height and width must be -1; or `letterbox`: the whole image fitted in the size and centred,
//! the margins `pad_value`, default 114, as YOLO's letterbox; `letterbox_up = "false"` keeps a
//! small image unscaled), `resize_shorter` (default 256 for 224), `resize_to` (with `stretch`:
//! the size before a centre crop), `crop_offset` (`round` or `floor`), `resample` (`bilinear`,
//! `bicubic`, `lanczos`, `opencv_bilinear`), `layout` (`NCHW`
//! or `NHWC`), `channels` (`RGB`, `BGR`, or `L`: one channel of luminance), `datatype` (`FP32`, `FP16`, `UINT8`), `scale`
//! (default 1/255), `mean` and `std` (three numbers each, or one for all), `batch` (`true`: a batch dimension
//! first), `max_pixels` (default 25000000), `max_image_bytes` (default 16 MiB), `max_images`
//! (default 32), and `decode_in`: `host` (default) has trident do the pixel work natively
//! through its image primitives (`images.to-tensor`, the same code, safe Rust, about three times
//! faster than inside the sandbox); `sandbox` does it here, in the plugin's own memory and time
//! limits, for a platform that wants the decoders isolated too.
//!
//! **A Hugging Face model's processor, as it is**: an asset named `preprocessor_config` (the
//! model folder's `preprocessor_config.json`, of a ViT, CLIP, ConvNeXt, DeiT or BEiT processor)
//! sets the resize, crop, resample, scale, mean and std as `transformers` applies them
//! (`trident_imaging::processor`); the manifest may add the keys it does not set (`input`,
//! `layout`, `datatype`, the limits), and a key both set is refused.
//!
//! The configuration is read once, in `check-config`; trident keeps the state that leaves. Before
//! a model is served, `check-model` refuses one whose input does not match: no input of that
//! name, another datatype, or another shape (`[-1, 3, H, W]` for a batching model under the
//! defaults, `[3, H, W]` with `batch = "false"`).

wit_bindgen::generate!({ world: "checked-request-adapter-plugin", path: "../../wit" });

use std::sync::OnceLock;

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::model_check::{Guest as ModelCheck, ModelInfo};
use exports::trident::plugin::request_adapter::{Adapted, Guest, TensorRequest};
use trident::plugin::host::config;
use trident::plugin::images::to_tensor;
use trident::plugin::types::{Datatype, Invocation, PluginError, Tensor};
use trident_imaging::settings::Datatype as Element;
use trident_imaging::{Error, Limits, Preprocess};

struct Plugin;

/// What the configuration says, read once.
struct Settings {
    input: String,
    outputs: Vec<String>,
    preprocess: Preprocess,
    limits: Limits,
    /// The image keys as given, for the host's primitives; `None`: the work is done here.
    host: Option<Vec<(String, String)>>,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// The image keys of the `preprocessor_config` asset (a Hugging Face
/// `preprocessor_config.json`), if the manifest gives one; `None` otherwise.
fn processor_keys() -> Result<Option<Vec<(&'static str, String)>>, String> {
    let Some(json) = trident::plugin::assets::get("preprocessor_config") else {
        return Ok(None);
    };
    trident_imaging::processor::keys(&json)
        .map(Some)
        .map_err(|e| format!("the preprocessor_config asset: {e}"))
}

fn settings() -> Result<Settings, String> {
    let processor = processor_keys()?;
    // The manifest's keys, over the processor's: a key both set is refused, so that the file
    // and the manifest never disagree in silence.
    if let Some(keys) = &processor
        && let Some((key, value)) = keys.iter().find(|(key, _)| config(key).is_some())
    {
        return Err(format!(
            "config key `{key}` is also set by the preprocessor_config asset (to {value}); \
             remove it from the manifest"
        ));
    }
    let config = |key: &str| -> Option<String> {
        config(key).or_else(|| {
            processor
                .as_ref()?
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.clone())
        })
    };
    Ok(Settings {
        input: config("input").unwrap_or_else(|| "INPUT0".into()),
        outputs: config("outputs")
            .map(|list| {
                list.split(',')
                    .map(|o| o.trim().to_owned())
                    .filter(|o| !o.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        preprocess: Preprocess::from_config(config)?,
        limits: Limits::from_config(config)?,
        host: match config("decode_in").as_deref() {
            None | Some("host") => Some(
                trident_imaging::settings::KEYS
                    .iter()
                    .filter_map(|key| Some((key.to_string(), config(key)?)))
                    .collect(),
            ),
            Some("sandbox") => None,
            Some(other) => return Err(format!("decode_in = '{other}': give host or sandbox")),
        },
    })
}

impl Guest for Plugin {
    fn adapt_request(invocation: Invocation) -> Result<Adapted, PluginError> {
        let settings = SETTINGS
            .get()
            .ok_or_else(|| PluginError::Internal("image-tensor was not initialised".into()))?;
        let tensor = match &settings.host {
            Some(keys) => to_tensor(
                &settings.input,
                invocation.content_type.as_deref(),
                &invocation.body,
                keys,
            )?,
            None => {
                let tensor = trident_imaging::tensor_from_body(
                    invocation.content_type.as_deref(),
                    &invocation.body,
                    &settings.preprocess,
                    &settings.limits,
                )
                .map_err(|e| match e {
                    Error::BadRequest(m) => PluginError::BadRequest(m),
                    Error::Unsupported(m) => PluginError::UnsupportedMediaType(m),
                })?;
                Tensor {
                    name: settings.input.clone(),
                    datatype: datatype(settings),
                    shape: tensor.shape,
                    data: tensor.data,
                }
            }
        };
        Ok(Adapted::Tensors(TensorRequest {
            inputs: vec![tensor],
            outputs: settings.outputs.clone(),
        }))
    }
}

/// The tensor's datatype in the WIT's terms.
fn datatype(settings: &Settings) -> Datatype {
    match settings.preprocess.datatype {
        Element::Fp32 => Datatype::Fp32,
        Element::Fp16 => Datatype::Fp16,
        Element::Uint8 => Datatype::Uint8,
    }
}

impl ModelCheck for Plugin {
    fn check_model(model: ModelInfo) -> Result<(), String> {
        let settings = SETTINGS.get().ok_or("image-tensor was not initialised")?;
        let names: Vec<&str> = model.inputs.iter().map(|t| t.name.as_str()).collect();
        let input = model
            .inputs
            .iter()
            .find(|t| t.name == settings.input)
            .ok_or_else(|| {
                format!(
                    "it has no input '{}' (its inputs: {}); set the plugin's `input`",
                    settings.input,
                    names.join(", ")
                )
            })?;
        if input.datatype != datatype(settings) {
            return Err(format!(
                "input '{}' is {:?}, and this plugin makes {:?}; set the plugin's `datatype`",
                input.name,
                input.datatype,
                datatype(settings)
            ));
        }
        let (w, h) = settings.preprocess.size;
        if let trident_imaging::settings::Resize::Limit(_) = settings.preprocess.resize {
            // The last two dimensions (NCHW) or the two before the last (NHWC).
            let skip = match settings.preprocess.layout {
                trident_imaging::settings::Layout::Nchw => 0,
                trident_imaging::settings::Layout::Nhwc => 1,
            };
            let mut spatial = input.shape.iter().rev().skip(skip).take(2);
            if input.shape.len() >= 3 && spatial.any(|side| *side != -1) {
                return Err(format!(
                    "input '{}' is shaped {:?}: its height and width are fixed, and resize = \
                     'limit' makes a tensor of each image's own size; give them as -1, or use \
                     resize = 'shorter' or 'stretch' with the model's size",
                    input.name, input.shape
                ));
            }
        }
        let (w, h) = match settings.preprocess.resize {
            trident_imaging::settings::Resize::Limit(_) => (-1, -1),
            _ => (i64::from(w), i64::from(h)),
        };
        let c = settings.preprocess.channels.count() as i64;
        let image: Vec<i64> = match settings.preprocess.layout {
            trident_imaging::settings::Layout::Nchw => vec![c, h, w],
            trident_imaging::settings::Layout::Nhwc => vec![h, w, c],
        };
        let mut expected = image;
        if settings.preprocess.batch {
            expected.insert(0, -1);
        }
        let fits = input.shape.len() == expected.len()
            && input
                .shape
                .iter()
                .zip(&expected)
                .all(|(have, want)| *have == -1 || *want == -1 || have == want);
        if !fits {
            return Err(format!(
                "input '{}' is shaped {:?}, and this plugin makes {:?} (size, layout and batch set it)",
                input.name, input.shape, expected
            ));
        }
        Ok(())
    }
}

impl Lifecycle for Plugin {
    fn check_config() -> Result<(), String> {
        if SETTINGS.get().is_none() {
            let _ = SETTINGS.set(settings()?);
        }
        Ok(())
    }
}

export!(Plugin);
