//! Classifier: a stand-in for an image classifier such as ResNet-50, with its tensors (input
//! `INPUT0`, FP32 `[3, H, W]` per image, normalized with ImageNet's mean and std; output
//! `OUTPUT0`, FP32, one score per class) and a cost of one pass over the input. Class `k` has a
//! colour of its own ([`prototype`]); an image's score for it is minus the squared distance
//! between the image's mean colour and that colour, so a red image's best classes are the
//! reddest. The example's labels name each class by its colour.

use std::borrow::Cow;

use crate::dtype::DataType;
use crate::error::BackendError;
use crate::models::required;
use crate::request::Input;
use crate::response::Output;

/// ImageNet's per-channel mean and std, which the input was normalized with.
const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// Class `k`'s colour, RGB in 0..255: its decimal digits, last first, each a level of one
/// channel (2, 30, ..., 254), so 1,000 classes have 1,000 colours 28 levels apart.
pub fn prototype(k: usize) -> [u8; 3] {
    let level = |digit: usize| (digit % 10 * 28 + 2) as u8;
    [level(k), level(k / 10), level(k / 100)]
}

/// The scores of every image of the request for `classes` classes; `batching`: the input's
/// first dimension is the batch.
pub fn outputs<'r>(
    requested: &[String],
    inputs: &[Input<'r>],
    classes: usize,
    batching: bool,
) -> Result<Vec<Output<'r>>, BackendError> {
    if let Some(other) = requested.iter().find(|name| *name != "OUTPUT0") {
        return Err(BackendError::invalid(format!(
            "classifier has no output {other}: OUTPUT0 (the class scores)"
        )));
    }
    let input = required(inputs, "INPUT0")?;
    if input.dtype != DataType::F32 {
        return Err(BackendError::invalid(format!(
            "classifier: INPUT0 is {:?}, not FP32",
            input.dtype
        )));
    }
    let image_dims = if batching {
        input.shape.get(1..)
    } else {
        Some(&input.shape[..])
    };
    let (channels, pixels) = match image_dims {
        Some([c, h, w]) => (*c, h.saturating_mul(*w)),
        _ => (0, 0),
    };
    if channels != 3 || pixels <= 0 {
        return Err(BackendError::invalid(format!(
            "classifier: INPUT0 is {:?}, not {}[3, height, width]",
            input.shape,
            if batching { "[batch] + " } else { "" }
        )));
    }
    let per_image = 3 * pixels as usize;
    let values: Vec<f32> = input
        .data
        .as_chunks::<4>()
        .0
        .iter()
        .map(|c| f32::from_le_bytes(*c))
        .collect();
    let images = values.len() / per_image;
    let prototypes: Vec<[f32; 3]> = (0..classes)
        .map(|k| {
            let rgb = prototype(k);
            std::array::from_fn(|c| (f32::from(rgb[c]) / 255.0 - MEAN[c]) / STD[c])
        })
        .collect();
    let mut data = Vec::with_capacity(images * classes * 4);
    for image in values.chunks_exact(per_image) {
        let mean: [f32; 3] = std::array::from_fn(|c| {
            let plane = &image[c * pixels as usize..(c + 1) * pixels as usize];
            (plane.iter().map(|v| f64::from(*v)).sum::<f64>() / pixels as f64) as f32
        });
        for colour in &prototypes {
            let distance: f32 = (0..3).map(|c| (mean[c] - colour[c]).powi(2)).sum();
            data.extend_from_slice(&(-distance).to_le_bytes());
        }
    }
    let shape = if batching {
        vec![images as i64, classes as i64]
    } else {
        vec![classes as i64]
    };
    Ok(vec![Output {
        name: "OUTPUT0".into(),
        dtype: DataType::F32,
        shape,
        data: Cow::Owned(data),
    }])
}
