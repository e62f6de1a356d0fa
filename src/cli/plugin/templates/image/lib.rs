//! {{name}}: a trident request adapter for images. An image (JPEG, PNG, WebP, BMP, GIF or TIFF; raw, or base64 in a JSON body;
//! several make a batch) becomes one normalized tensor, named by the `input` config (default
//! `INPUT0`), made by trident's native image primitives (`images::to_tensor`): decoding, EXIF
//! orientation, resizing, cropping and normalization, with the image-tensor plugin's
//! configuration keys (defaults: torchvision's ImageNet preprocessing). Add your own steps around
//! it; see trident's book, docs/plugins/writing.md.

wit_bindgen::generate!({ world: "request-adapter-plugin", path: "wit" });

use std::sync::OnceLock;

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::request_adapter::{Adapted, Guest, TensorRequest};
use trident::plugin::host::config;
use trident::plugin::images::to_tensor;
use trident::plugin::types::{Invocation, PluginError};

/// The configuration keys handed to `to_tensor` (see docs/plugins/images-and-text.md, "Images in, labels out").
const KEYS: [&str; 14] = [
    "size", "resize", "resize_shorter", "resample", "layout", "channels", "datatype", "scale", "mean",
    "std", "batch", "max_pixels", "max_image_bytes", "max_images",
];

/// The input's name and the settings, read once in `check_config`: every call starts from them.
static SETTINGS: OnceLock<(String, Vec<(String, String)>)> = OnceLock::new();

struct Plugin;

impl Guest for Plugin {
    fn adapt_request(invocation: Invocation) -> Result<Adapted, PluginError> {
        let (input, settings) = SETTINGS.get().ok_or_else(|| PluginError::Internal("not initialised".into()))?;
        let tensor = to_tensor(input, invocation.content_type.as_deref(), &invocation.body, settings)?;
        Ok(Adapted::Tensors(TensorRequest { inputs: vec![tensor], outputs: Vec::new() }))
    }
}

impl Lifecycle for Plugin {
    // Called once when trident loads the plugin: return Err("why") to refuse the configuration.
    fn check_config() -> Result<(), String> {
        let input = config("input").unwrap_or_else(|| "INPUT0".into());
        let settings = KEYS.iter().filter_map(|key| Some((key.to_string(), config(key)?))).collect();
        let _ = SETTINGS.set((input, settings));
        Ok(())
    }
}

export!(Plugin);
