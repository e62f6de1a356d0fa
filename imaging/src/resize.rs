//! Resizing as Pillow does it (`Image.resize(..., BILINEAR)`, what torchvision's `Resize` runs
//! on a PIL image): a separable convolution with the triangle filter, widened by the scale when
//! shrinking (antialiasing), horizontal pass first. Only the pixels of the crop are computed:
//! the shorter side resized and the centre cropped cost what the crop costs. Pillow rounds to
//! 8 bits between and after the passes; here both passes stay in `f32`, so values differ from
//! Pillow's by at most about one level.

use image::RgbImage;

use crate::settings::{Preprocess, Resize};

/// One output coordinate's input taps: the first input index and the weights from it.
struct Taps {
    first: usize,
    weights: Vec<f32>,
}

/// The taps of the output coordinates `window` of an axis resized from `input` to `output`
/// samples (Pillow's `precompute_coeffs` with the bilinear filter). Coordinates outside
/// `0..output` (a crop larger than the resized image) have no taps: they are zero.
fn taps(input: usize, output: usize, window: std::ops::Range<i64>) -> Vec<Taps> {
    let scale = input as f64 / output as f64;
    let filter_scale = scale.max(1.0);
    let support = filter_scale;
    window
        .map(|out| {
            if out < 0 || out >= output as i64 {
                return Taps {
                    first: 0,
                    weights: Vec::new(),
                };
            }
            let center = (out as f64 + 0.5) * scale;
            let first = (center - support + 0.5).floor().max(0.0) as usize;
            let last = ((center + support + 0.5).floor() as usize).min(input);
            let mut weights: Vec<f64> = (first..last)
                .map(|i| {
                    let x = (i as f64 - center + 0.5) / filter_scale;
                    (1.0 - x.abs()).max(0.0)
                })
                .collect();
            let total: f64 = weights.iter().sum();
            if total > 0.0 {
                weights.iter_mut().for_each(|w| *w /= total);
            }
            Taps {
                first,
                weights: weights.into_iter().map(|w| w as f32).collect(),
            }
        })
        .collect()
}

/// The full size an image of `width`×`height` is resized to, and the window of it the tensor
/// keeps: `(full width, full height, left, top)`.
fn geometry(width: u32, height: u32, preprocess: &Preprocess) -> (usize, usize, i64, i64) {
    let (crop_w, crop_h) = preprocess.size;
    match preprocess.resize {
        Resize::Stretch => (crop_w as usize, crop_h as usize, 0, 0),
        Resize::Shorter(side) => {
            // torchvision: the longer side is int(side * long / short).
            let (w, h) = if width <= height {
                let long = u64::from(side) * u64::from(height) / u64::from(width);
                (side as usize, long as usize)
            } else {
                let long = u64::from(side) * u64::from(width) / u64::from(height);
                (long as usize, side as usize)
            };
            // torchvision's CenterCrop: the offset rounded half to even.
            let offset = |full: usize, crop: u32| {
                ((full as f64 - f64::from(crop)) / 2.0).round_ties_even() as i64
            };
            (w.max(1), h.max(1), offset(w, crop_w), offset(h, crop_h))
        }
    }
}

/// The image resized and cropped to `preprocess.size`: `height × width × 3` values in 0..255,
/// row-major, RGB.
pub fn resize_crop(image: &RgbImage, preprocess: &Preprocess) -> Vec<f32> {
    let (in_w, in_h) = (image.width() as usize, image.height() as usize);
    let (full_w, full_h, left, top) = geometry(image.width(), image.height(), preprocess);
    let (crop_w, crop_h) = (preprocess.size.0 as usize, preprocess.size.1 as usize);
    let columns = taps(in_w, full_w, left..left + crop_w as i64);
    let rows = taps(in_h, full_h, top..top + crop_h as i64);
    // The input rows the vertical pass reads.
    let used = rows.iter().filter(|t| !t.weights.is_empty());
    let first_row = used.clone().map(|t| t.first).min().unwrap_or(0);
    let end_row = used.map(|t| t.first + t.weights.len()).max().unwrap_or(0);
    let pixels = image.as_raw();
    // Horizontal pass over the rows read: (end_row - first_row) × crop_w × 3.
    let mut across = vec![0f32; (end_row.saturating_sub(first_row)) * crop_w * 3];
    for (row_index, y) in (first_row..end_row).enumerate() {
        let line = &pixels[y * in_w * 3..(y + 1) * in_w * 3];
        let out = &mut across[row_index * crop_w * 3..(row_index + 1) * crop_w * 3];
        for (x, tap) in columns.iter().enumerate() {
            let mut sum = [0f32; 3];
            for (k, weight) in tap.weights.iter().enumerate() {
                let at = (tap.first + k) * 3;
                sum[0] += weight * f32::from(line[at]);
                sum[1] += weight * f32::from(line[at + 1]);
                sum[2] += weight * f32::from(line[at + 2]);
            }
            out[x * 3..x * 3 + 3].copy_from_slice(&sum);
        }
    }
    // Vertical pass into the crop.
    let stride = crop_w * 3;
    let mut out = vec![0f32; crop_h * stride];
    for (y, tap) in rows.iter().enumerate() {
        let target = &mut out[y * stride..(y + 1) * stride];
        for (k, weight) in tap.weights.iter().enumerate() {
            let source = tap.first + k - first_row;
            let line = &across[source * stride..(source + 1) * stride];
            for (value, &input) in target.iter_mut().zip(line) {
                *value += weight * input;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Preprocess, Resize};

    fn preprocess(size: u32, resize: Resize) -> Preprocess {
        Preprocess {
            size: (size, size),
            resize,
            ..Preprocess::default()
        }
    }

    #[test]
    fn a_flat_image_stays_flat_at_any_scale() {
        let image = RgbImage::from_pixel(640, 480, image::Rgb([10, 200, 30]));
        for p in [
            preprocess(224, Resize::Shorter(256)),
            preprocess(50, Resize::Stretch),
        ] {
            let out = resize_crop(&image, &p);
            assert_eq!(out.len(), (p.size.0 * p.size.1 * 3) as usize);
            for pixel in out.chunks(3) {
                assert!(
                    (pixel[0] - 10.0).abs() < 1e-3 && (pixel[1] - 200.0).abs() < 1e-3,
                    "{pixel:?}"
                );
            }
        }
    }

    #[test]
    fn the_shorter_side_and_centre_crop_follow_torchvision() {
        // 640x480 → 341x256 (int(256 * 640 / 480)), crop offset round((341 - 224) / 2) = 58.
        assert_eq!(
            geometry(640, 480, &preprocess(224, Resize::Shorter(256))),
            (341, 256, 58, 16)
        );
        assert_eq!(
            geometry(480, 640, &preprocess(224, Resize::Shorter(256))),
            (256, 341, 16, 58)
        );
        // A left-to-right ramp keeps its order after resizing.
        let image = RgbImage::from_fn(100, 10, |x, _| image::Rgb([(x * 2) as u8, 0, 0]));
        let out = resize_crop(&image, &preprocess(10, Resize::Stretch));
        let reds: Vec<f32> = out.chunks(3).take(10).map(|p| p[0]).collect();
        assert!(reds.windows(2).all(|w| w[0] < w[1]), "{reds:?}");
        // Pillow's antialiased shrink of the ramp: each output is its 10-pixel neighbourhood's
        // triangle-weighted mean, here 2 * (10 * i + 4.5).
        assert!((reds[3] - 69.0).abs() < 0.5, "{reds:?}");
    }

    #[test]
    fn a_crop_larger_than_the_image_is_zero_padded() {
        let image = RgbImage::from_pixel(4, 2, image::Rgb([255, 255, 255]));
        let mut p = preprocess(4, Resize::Shorter(4));
        p.size = (4, 10);
        let out = resize_crop(&image, &p);
        assert_eq!(out.len(), 4 * 10 * 3);
        assert!(out.contains(&0.0) && out.iter().any(|v| (*v - 255.0).abs() < 1e-3));
    }
}
