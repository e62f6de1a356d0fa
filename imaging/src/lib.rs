//! Image pre-processing as SageMaker customers write it for a vision model: JPEG, PNG, WebP, BMP, GIF or TIFF bytes
//! (raw, or base64 in a JSON body, one image or several) become one normalized tensor, the way
//! torchvision's `Resize`, `CenterCrop`, `ToTensor` and `Normalize` make it.
//!
//! - [`body`]: which images a request body holds (`image/jpeg`, `image/png`,
//!   `application/x-image`, or base64 in JSON);
//! - [`decode`]: one image decoded within [`Limits`] (its header is checked before any pixel
//!   is decoded), its EXIF orientation applied, as 8-bit RGB;
//! - [`resize`]: the shorter side resized and the centre cropped (or straight to size), by
//!   Pillow's separable convolution with antialiasing, or by OpenCV's bilinear resize
//!   ([`opencv`]);
//! - [`tensor`]: the pixels as a tensor: RGB or BGR, NCHW or NHWC, FP32, FP16 or UINT8, scaled
//!   and normalized by channel;
//! - [`settings`]: all of it from a plugin's configuration, with safe defaults.
//!
//! Every failure is an [`Error`] a client can read: 400 for an image that is broken or too
//! large, 415 for a body that is not an image this takes. Safe Rust only; the cost of an image
//! is bounded by its pixel count, which is checked before decoding.

#![forbid(unsafe_code)]

pub mod body;
pub mod decode;
pub mod opencv;
pub mod processor;
pub mod resize;
pub mod settings;
pub mod tensor;

pub use settings::{Limits, Preprocess};

/// The `image` crate this is built on (for tools and tests that make images).
pub use image;

/// Why an image cannot be made into a tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The image is broken, too large, or the body malformed: 400.
    BadRequest(String),
    /// The body is not a kind of image this takes: 415.
    Unsupported(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::BadRequest(message) | Error::Unsupported(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}

/// A tensor made from images: its shape and its bytes in Triton's layout (little-endian).
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Its dimensions.
    pub shape: Vec<i64>,
    /// Its elements, little-endian, row-major.
    pub data: Vec<u8>,
    /// The most memory the work held at once beside the body, read off its buffers' sizes:
    /// the images decoded from base64, the largest decoded image with its resized pixels, and
    /// the tensor (for a host that accounts its primitives' memory to the calling plugin).
    pub working_bytes: usize,
}

/// The tensor a request body makes under `preprocess` and `limits`: every image of the body
/// decoded, resized, cropped and normalized, stacked along a batch dimension (when
/// `preprocess.batch`).
pub fn tensor_from_body(
    content_type: Option<&str>,
    body: &[u8],
    preprocess: &Preprocess,
    limits: &Limits,
) -> Result<Tensor, Error> {
    tensor_from_body_within(content_type, body, preprocess, limits, &|| false)
        .map(|tensor| tensor.expect("never out of time"))
}

/// [`tensor_from_body`] for work that has a deadline: `out_of_time` is asked before each
/// image is decoded and before it is resized, and `Ok(None)` returned once it says so (the
/// host's primitives, whose caller's deadline the epoch does not see). One image's decoding is
/// bounded by its pixels and scans ([`decode::decode`]), so the work past the deadline is at
/// most one step.
pub fn tensor_from_body_within(
    content_type: Option<&str>,
    body: &[u8],
    preprocess: &Preprocess,
    limits: &Limits,
    out_of_time: &dyn Fn() -> bool,
) -> Result<Option<Tensor>, Error> {
    let images = body::images(content_type, body, limits)?;
    if !preprocess.batch && images.len() != 1 {
        return Err(Error::BadRequest(format!(
            "this model takes one image per request, and the body holds {}",
            images.len()
        )));
    }
    if let Some(most) = limits.max_batch.filter(|most| images.len() > *most) {
        return Err(Error::BadRequest(format!(
            "the body holds {} images, and at most {most} a request are taken for this model \
             (by its max_batch_size: a larger batch is run as up to 64 requests of it)",
            images.len()
        )));
    }
    if matches!(preprocess.resize, settings::Resize::Limit(_)) && images.len() != 1 {
        return Err(Error::BadRequest(format!(
            "this model takes one image per request (each image's tensor has the image's own \
             size), and the body holds {}",
            images.len()
        )));
    }
    // Under `limit`, the size is the image's: known once it is decoded.
    let mut preprocess = std::borrow::Cow::Borrowed(preprocess);
    let mut data = Vec::new();
    // Images decoded from base64 are held for the whole call; the largest image's buffers
    // for its turn.
    let held: usize = images
        .iter()
        .filter(|bytes| matches!(bytes, std::borrow::Cow::Owned(_)))
        .map(|bytes| bytes.len())
        .sum();
    let mut largest_image = 0usize;
    for (index, bytes) in images.iter().enumerate() {
        let name = |e: Error| match (images.len(), e) {
            (1, e) => e,
            (_, Error::BadRequest(m)) => Error::BadRequest(format!("image {index}: {m}")),
            (_, Error::Unsupported(m)) => Error::Unsupported(format!("image {index}: {m}")),
        };
        if out_of_time() {
            return Ok(None);
        }
        let mut rgb = decode::decode(bytes, limits).map_err(name)?;
        if preprocess.channels == settings::Channels::Gray {
            // Pillow's `convert("L")` before the resize, as a Python pipeline runs it.
            tensor::to_luminance(&mut rgb);
        }
        if out_of_time() {
            return Ok(None);
        }
        if let settings::Resize::Limit(limit) = preprocess.resize {
            let size = limit_size(&limit, rgb.width(), rgb.height(), limits)?;
            preprocess.to_mut().size = size;
        }
        if data.capacity() == 0 {
            data.reserve_exact(tensor::bytes_per_image(&preprocess) * images.len());
        }
        let pixels = resize::resize_crop(&rgb, &preprocess);
        largest_image =
            largest_image.max(rgb.as_raw().len() + pixels.len() * std::mem::size_of::<f32>());
        tensor::write(&pixels, &preprocess, &mut data);
    }
    let working_bytes = held + largest_image + data.capacity();
    let (width, height) = preprocess.size;
    let mut shape = Vec::with_capacity(4);
    if preprocess.batch {
        shape.push(images.len() as i64);
    }
    let (w, h, c) = (
        i64::from(width),
        i64::from(height),
        preprocess.channels.count() as i64,
    );
    match preprocess.layout {
        settings::Layout::Nchw => shape.extend([c, h, w]),
        settings::Layout::Nhwc => shape.extend([h, w, c]),
    }
    Ok(Some(Tensor {
        shape,
        data,
        working_bytes,
    }))
}

/// The width and height of each image `body` holds, EXIF orientation applied, read from their
/// headers with no pixel decoded: what a response adapter needs to map a model's output back
/// onto the photos the client sent. The request adapter has already held the images to its
/// limits; these only keep the reading bounded.
pub fn photo_sizes(content_type: Option<&str>, body: &[u8]) -> Result<Vec<(u32, u32)>, Error> {
    let limits = Limits {
        max_pixels: u64::MAX,
        max_pixels_set_by: "max_pixels",
        max_image_bytes: u64::MAX,
        max_images: usize::MAX,
        max_batch: None,
    };
    body::images(content_type, body, &limits)?
        .iter()
        .map(|image| decode::dimensions(image, &limits))
        .collect()
}

/// The tensor size `limit` gives an image of `width`×`height`, refused where a side would pass
/// [`settings::MAX_SIDE`] or its pixels `limits.max_pixels` (an image of extreme aspect ratio
/// scaled up by `limit_type = "min"`): the tensor is bounded by configuration, whatever the
/// image.
pub fn limit_size(
    limit: &settings::SideLimit,
    width: u32,
    height: u32,
    limits: &Limits,
) -> Result<(u32, u32), Error> {
    let (w, h) = limit.size(width, height);
    let pixels = u64::from(w) * u64::from(h);
    if w.max(h) > settings::MAX_SIDE || pixels > limits.max_pixels {
        return Err(Error::BadRequest(format!(
            "the image is {width}x{height}, which resize = 'limit' (limit_side {}) makes a {w}x{h} \
             tensor: over {} pixels a side or max_pixels {} in all; send an image of a less \
             extreme aspect ratio",
            limit.side,
            settings::MAX_SIDE,
            limits.max_pixels
        )));
    }
    Ok((w, h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        image::DynamicImage::new_rgb8(width, height)
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap();
        out.into_inner()
    }

    /// `resize = "limit"`: the tensor takes the image's own size; one image a request; an
    /// aspect ratio that would make a tensor over the limits is refused by name.
    #[test]
    fn limit_tensors_follow_the_image() {
        let config = |key: &str| (key == "resize").then(|| "limit".to_owned());
        let preprocess = Preprocess::from_config(config).unwrap();
        let limits = Limits::default();
        let tensor = tensor_from_body(Some("image/png"), &png(64, 48), &preprocess, &limits);
        let tensor = tensor.unwrap();
        assert_eq!(tensor.shape, [1, 3, 736, 992]);
        assert_eq!(tensor.data.len(), 3 * 736 * 992 * 4);
        let b64 = |bytes: &[u8]| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(bytes)
        };
        let two = format!(
            r#"{{"instances": [{{"b64": "{}"}}, {{"b64": "{}"}}]}}"#,
            b64(&png(8, 8)),
            b64(&png(8, 8))
        );
        let error = tensor_from_body(
            Some("application/json"),
            two.as_bytes(),
            &preprocess,
            &limits,
        );
        assert!(matches!(error, Err(Error::BadRequest(m)) if m.contains("one image per request")));
        let error = tensor_from_body(Some("image/png"), &png(400, 2), &preprocess, &limits);
        assert!(
            matches!(&error, Err(Error::BadRequest(m)) if m.contains("400x2") && m.contains("aspect ratio")),
            "{error:?}"
        );
    }
}
