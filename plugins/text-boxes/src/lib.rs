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
//! See `text_lines::db` for what each does.

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
    static SETTINGS: OnceLock<(Option<String>, text_lines::db::Settings)> = OnceLock::new();

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
            let (values, (width, height)) =
                text_lines::map_values(&tensor.name, &tensor.shape, &tensor.data)
                    .map_err(PluginError::Internal)?;
            let photo = photo_size(&invocation)?;
            let map = text_lines::db::Map {
                values: &values,
                width,
                height,
            };
            let boxes = text_lines::db::boxes(&map, photo, settings);
            Ok(Reply {
                status: 200,
                content_type: "application/json".into(),
                headers: Vec::new(),
                body: text_lines::answer(&boxes),
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
            text_lines::map_size(&tensor.name, &tensor.shape, true).map(|_| ())
        }
    }

    impl Lifecycle for Plugin {
        fn check_config() -> Result<(), String> {
            if SETTINGS.get().is_none() {
                let _ = SETTINGS.set(text_lines::settings(config)?);
            }
            Ok(())
        }
    }

    export!(Plugin);
}
