//! Request adapter: JPEG or PNG images (raw, `application/x-image`, or base64 in JSON; one or a
//! batch) become one normalized tensor, as torchvision's `Resize`, `CenterCrop`, `ToTensor` and
//! `Normalize` make it. The work is `trident-imaging` (`imaging/` in the repository), the same
//! code trident offers every guest as host image primitives.
//!
//! Config (manifest `config` table; every key optional, defaults are ImageNet's): `input`
//! (the tensor's name, default `INPUT0`), `outputs` (comma-separated outputs to ask for;
//! default all), and the keys of `trident_imaging::settings`: `size` (`224` or `WxH`), `resize`
//! (`shorter`, default, or `stretch`), `resize_shorter` (default 256 for 224), `layout` (`NCHW`
//! or `NHWC`), `channels` (`RGB` or `BGR`), `datatype` (`FP32`, `FP16`, `UINT8`), `scale`
//! (default 1/255), `mean` and `std` (three numbers each), `batch` (`true`: a batch dimension
//! first), `max_pixels` (default 12000000), `max_image_bytes` (default 16 MiB), `max_images`
//! (default 32).
//!
//! The configuration is read once, in `check-config`; trident keeps the state that leaves.

wit_bindgen::generate!({ world: "request-adapter-plugin", path: "../../wit" });

use std::sync::OnceLock;

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::request_adapter::{Adapted, Guest, TensorRequest};
use trident::plugin::host::config;
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
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

fn settings() -> Result<Settings, String> {
    Ok(Settings {
        input: config("input").unwrap_or_else(|| "INPUT0".into()),
        outputs: config("outputs")
            .map(|list| list.split(',').map(|o| o.trim().to_owned()).filter(|o| !o.is_empty()).collect())
            .unwrap_or_default(),
        preprocess: Preprocess::from_config(config)?,
        limits: Limits::from_config(config)?,
    })
}

impl Guest for Plugin {
    fn adapt_request(invocation: Invocation) -> Result<Adapted, PluginError> {
        let settings = SETTINGS.get().ok_or_else(|| PluginError::Internal("image-tensor was not initialised".into()))?;
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
        let datatype = match settings.preprocess.datatype {
            Element::Fp32 => Datatype::Fp32,
            Element::Fp16 => Datatype::Fp16,
            Element::Uint8 => Datatype::Uint8,
        };
        Ok(Adapted::Tensors(TensorRequest {
            inputs: vec![Tensor {
                name: settings.input.clone(),
                datatype,
                shape: tensor.shape,
                data: tensor.data,
            }],
            outputs: settings.outputs.clone(),
        }))
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
