//! The `images` interface: image pre-processing trident runs natively for guests in any
//! language, with the code of the image-tensor plugin (`trident-imaging`, safe Rust). A call
//! is bounded like the guest that makes it: an image may have at most as many pixels as an
//! eighth of the plugin's memory limit in bytes (decoding and converting take about seven bytes a
//! pixel, outside the guest's memory), and the tensor it returns is copied into the guest's
//! memory, within its limit. The work runs on a primitive thread, bounded by the call's
//! deadline ([`super::pool`]).

use std::collections::BTreeMap;

use crate::plugins::wit::bindings::types::{Datatype, PluginError, Tensor};

/// Bytes of the host's memory one pixel of a decoded image may take, for the pixel ceiling.
const BYTES_PER_PIXEL: u64 = 8;

/// The tensor of the `images` interface's `to-tensor`, for a guest whose memory limit is
/// `memory_limit_bytes`, with the most of the host's memory the work held at once; `None`
/// once `out_of_time` says so (asked between images).
pub(in crate::plugins) fn to_tensor(
    memory_limit_bytes: u64,
    max_batch: Option<usize>,
    name: String,
    content_type: Option<&str>,
    body: &[u8],
    settings: &[(String, String)],
    out_of_time: &dyn Fn() -> bool,
) -> Result<Option<(Tensor, usize)>, PluginError> {
    if let Some((key, _)) = settings
        .iter()
        .find(|(key, _)| !trident_imaging::settings::KEYS.contains(&key.as_str()))
    {
        return Err(PluginError::Internal(format!(
            "images.to-tensor: '{key}' is not a setting ({})",
            trident_imaging::settings::KEYS.join(", ")
        )));
    }
    let settings: BTreeMap<&str, &str> = settings
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    let config = |key: &str| settings.get(key).map(|value| (*value).to_owned());
    let internal = |message: String| PluginError::Internal(format!("images.to-tensor: {message}"));
    let preprocess = trident_imaging::Preprocess::from_config(config).map_err(internal)?;
    let mut limits = trident_imaging::Limits::from_config(config).map_err(internal)?;
    let share = (memory_limit_bytes / BYTES_PER_PIXEL).max(1);
    if share < limits.max_pixels {
        limits.max_pixels = share;
        limits.max_pixels_set_by = "the plugin's memory_limit_mb: trident decodes an image of \
            at most an eighth of it in bytes";
    }
    limits.max_batch = max_batch;
    let tensor = trident_imaging::tensor_from_body_within(
        content_type,
        body,
        &preprocess,
        &limits,
        out_of_time,
    )
    .map_err(|error| match error {
        trident_imaging::Error::BadRequest(message) => PluginError::BadRequest(message),
        trident_imaging::Error::Unsupported(message) => PluginError::UnsupportedMediaType(message),
    })?;
    let datatype = match preprocess.datatype {
        trident_imaging::settings::Datatype::Fp32 => Datatype::Fp32,
        trident_imaging::settings::Datatype::Fp16 => Datatype::Fp16,
        trident_imaging::settings::Datatype::Uint8 => Datatype::Uint8,
    };
    Ok(tensor.map(|tensor| {
        let made = Tensor {
            name,
            datatype,
            shape: tensor.shape,
            data: tensor.data,
        };
        (made, tensor.working_bytes)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_settings_and_pixels_past_the_memory_share_are_refused() {
        let png = {
            let image = trident_imaging::image::RgbImage::new(100, 100);
            let mut out = std::io::Cursor::new(Vec::new());
            image
                .write_to(&mut out, trident_imaging::image::ImageFormat::Png)
                .unwrap();
            out.into_inner()
        };
        let setting = |key: &str, value: &str| vec![(key.to_owned(), value.to_owned())];
        let error = to_tensor(
            64 << 20,
            None,
            "x".into(),
            None,
            &png,
            &setting("colour", "red"),
            &|| false,
        );
        assert!(matches!(error, Err(PluginError::Internal(m)) if m.contains("'colour'")));
        let tensor = to_tensor(
            64 << 20,
            None,
            "x".into(),
            None,
            &png,
            &setting("size", "8"),
            &|| false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(tensor.0.shape, vec![1, 3, 8, 8]);
        // The host held the decoded image (30,000 bytes), its pixels and the tensor.
        assert_eq!(tensor.1, 30_000 + 2 * 8 * 8 * 3 * 4, "{}", tensor.1);
        // 10,000 pixels need 80,000 bytes of the host: a 64 KiB guest may not ask for them.
        let error = to_tensor(64 << 10, None, "x".into(), None, &png, &[], &|| false).unwrap_err();
        assert!(matches!(error, PluginError::BadRequest(m) if m.contains("8192 pixels")));
        // Out of time before the first image: no answer.
        let stopped = to_tensor(64 << 20, None, "x".into(), None, &png, &[], &|| true);
        assert!(matches!(stopped, Ok(None)), "{stopped:?}");
        // More images than the model's max_batch_size: refused before any is decoded.
        let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &png);
        let body = serde_json::json!(vec![encoded; 3]).to_string();
        let error = to_tensor(
            64 << 20,
            Some(2),
            "x".into(),
            Some("application/json"),
            body.as_bytes(),
            &[],
            &|| panic!("nothing is decoded"),
        )
        .unwrap_err();
        assert!(
            matches!(&error, PluginError::BadRequest(m) if m.contains("3 images, and at most 2 a request are taken for this model")),
            "{error:?}"
        );
    }
}
