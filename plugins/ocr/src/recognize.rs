//! The recognizer's side of PP-OCR, as RapidOCR's `TextRecognizer` runs it: the lines' crops
//! ordered by aspect ratio and taken a batch at a time ([`order`]), each brought to the
//! recognizer's height at its own aspect ratio with OpenCV's 8-bit bilinear resize, scaled to
//! -1..1 and padded with zeros to the batch's widest ([`batch`]), and the recognizer's
//! per-step class probabilities read greedily as CTC ([`decode`]) with its character
//! dictionary ([`characters`]).

use crate::warp::Image;

/// The recognizer's input: its height and the narrowest width a batch is padded to
/// (RapidOCR's `rec_img_shape` `[3, 48, 320]`), and the widest a crop is brought to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub height: usize,
    pub min_width: usize,
    /// A crop wider than this at the recognizer's height is squeezed to it (RapidOCR has no
    /// bound): a line of extreme aspect ratio cannot make a tensor past `max_width` columns.
    pub max_width: usize,
}

/// The crops' indices in the order they are recognized: by aspect ratio, narrowest first (a
/// stable sort; ties keep their reading order).
pub fn order(crops: &[Image]) -> Vec<usize> {
    let mut indices: Vec<usize> = (0..crops.len()).collect();
    indices.sort_by(|&a, &b| ratio(&crops[a]).total_cmp(&ratio(&crops[b])));
    indices
}

fn ratio(image: &Image) -> f64 {
    image.width as f64 / image.height as f64
}

/// One batch's input: FP32 `[n, 3, height, width]` as little-endian bytes, and its width.
pub fn batch(crops: &[&Image], shape: &Shape) -> (Vec<u8>, usize) {
    let height = shape.height;
    let widest = crops
        .iter()
        .map(|c| ratio(c))
        .fold(shape.min_width as f64 / height as f64, f64::max);
    let width = ((height as f64 * widest) as usize).clamp(1, shape.max_width.max(1));
    let plane = height * width;
    let mut values = vec![0f32; crops.len() * 3 * plane];
    for (crop, out) in crops.iter().zip(values.chunks_exact_mut(3 * plane)) {
        let resized_w = ((height as f64 * ratio(crop)).ceil() as usize).clamp(1, width);
        let resized = resize_linear(crop, resized_w, height);
        for y in 0..height {
            for x in 0..resized_w {
                let pixel = &resized.pixels[(y * resized_w + x) * 3..][..3];
                for (c, value) in pixel.iter().enumerate() {
                    out[c * plane + y * width + x] = (f32::from(*value) / 255.0 - 0.5) / 0.5;
                }
            }
        }
    }
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    (bytes, width)
}

/// `image` resized to `width`×`height` as `cv2.resize` does by default (bilinear, without
/// antialiasing, in OpenCV's 8-bit fixed point: [`trident_imaging::opencv`]).
pub fn resize_linear(image: &Image, width: usize, height: usize) -> Image {
    use trident_imaging::opencv;
    if (image.width, image.height) == (width, height) {
        return image.clone();
    }
    let columns = opencv::taps(image.width, width, 0..width as i64);
    let rows = opencv::taps(image.height, height, 0..height as i64);
    Image {
        width,
        height,
        pixels: opencv::resize(&image.pixels, image.width, 3, &columns, &rows),
    }
}

/// The recognizer's classes from a dictionary asset (one character a line, as PaddleOCR's
/// `ppocr_keys` files and the recognizer's `character` metadata hold them): the CTC blank
/// first, the lines, and a space last, as RapidOCR's `CTCLabelDecode` makes them.
pub fn characters(asset: &[u8]) -> Result<Vec<String>, String> {
    let text = std::str::from_utf8(asset)
        .map_err(|e| format!("the character dictionary is not UTF-8: {e}"))?;
    let mut classes = vec![String::new()];
    classes.extend(
        text.lines()
            .map(|line| line.trim_end_matches('\r').to_owned()),
    );
    classes.push(" ".to_owned());
    if classes.len() < 3 {
        return Err("the character dictionary is empty".into());
    }
    Ok(classes)
}

/// Each row's text and confidence from the recognizer's output (`rows × steps × classes`
/// probabilities): the most probable class at each step, repeats merged and blanks dropped,
/// the confidence the mean probability of the characters kept (0 for none).
pub fn decode(output: &[f32], steps: usize, classes: &[String]) -> Vec<(String, f64)> {
    let count = classes.len();
    if steps == 0 || count == 0 {
        return Vec::new();
    }
    output
        .chunks_exact(steps * count)
        .map(|row| {
            let (mut text, mut sum, mut kept) = (String::new(), 0.0f64, 0usize);
            let mut previous = None;
            for step in row.chunks_exact(count) {
                // The first of equal maxima, as numpy's argmax.
                let (best, p) =
                    step.iter()
                        .enumerate()
                        .fold(
                            (0, f32::NEG_INFINITY),
                            |m, (i, &v)| {
                                if v > m.1 { (i, v) } else { m }
                            },
                        );
                if best != 0 && previous != Some(best) {
                    text.push_str(&classes[best]);
                    sum += f64::from(p);
                    kept += 1;
                }
                previous = Some(best);
            }
            let confidence = if kept == 0 { 0.0 } else { sum / kept as f64 };
            (text, confidence)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(width: usize, height: usize, f: impl Fn(usize, usize) -> u8) -> Image {
        let f = &f;
        let pixels = (0..height)
            .flat_map(|y| (0..width).flat_map(move |x| [f(x, y); 3]))
            .collect();
        Image {
            width,
            height,
            pixels,
        }
    }

    #[test]
    fn ctc_merges_repeats_and_drops_blanks() {
        let classes: Vec<String> = ["", "a", "b", " "].map(String::from).to_vec();
        // a a blank a b b: "aab", at the mean of the kept steps' probabilities.
        let steps = [
            [0.1, 0.8, 0.1, 0.0],
            [0.1, 0.6, 0.3, 0.0],
            [0.9, 0.1, 0.0, 0.0],
            [0.2, 0.7, 0.1, 0.0],
            [0.0, 0.0, 1.0, 0.0],
            [0.0, 0.1, 0.9, 0.0],
        ];
        let output: Vec<f32> = steps.iter().flatten().copied().collect();
        let decoded = decode(&output, 6, &classes);
        assert_eq!(decoded.len(), 1);
        assert_eq!(decoded[0].0, "aab");
        let expected = (0.8f32 as f64 + 0.7f32 as f64 + 1.0) / 3.0;
        assert!((decoded[0].1 - expected).abs() < 1e-12);
        // All blank: no text, confidence 0.
        let blank = vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0];
        assert_eq!(decode(&blank, 2, &classes), vec![(String::new(), 0.0)]);
    }

    #[test]
    fn the_dictionary_gains_the_blank_and_a_space() {
        let classes = characters("x\r\ny\nz\n".as_bytes()).unwrap();
        assert_eq!(classes, ["", "x", "y", "z", " "]);
        assert!(characters(b"").is_err());
        assert!(characters(&[0xff, b'\n']).is_err());
    }

    #[test]
    fn bilinear_resize_keeps_flat_images_and_halves_steps() {
        let flat = image(13, 7, |_, _| 200);
        let resized = resize_linear(&flat, 31, 48);
        assert!(resized.pixels.iter().all(|&v| v == 200));
        // Doubling a two-pixel ramp: OpenCV's [0, 0, 255, 255] ... with the half-way samples
        // at a quarter and three quarters.
        let ramp = image(2, 1, |x, _| if x == 0 { 0 } else { 200 });
        let wide = resize_linear(&ramp, 4, 1);
        let row: Vec<u8> = wide.pixels.chunks(3).map(|p| p[0]).collect();
        assert_eq!(row, [0, 50, 150, 200]);
    }

    #[test]
    fn a_batch_is_padded_to_its_widest_and_scaled_to_minus_one_to_one() {
        let narrow = image(20, 10, |_, _| 255);
        let wide = image(100, 10, |_, _| 0);
        let shape = Shape {
            height: 48,
            min_width: 320,
            max_width: 2400,
        };
        assert_eq!(order(&[wide.clone(), narrow.clone()]), [1, 0]);
        let (bytes, width) = batch(&[&narrow, &wide], &shape);
        // 48 × 10 = 480 columns for the wider; the narrower fills 96 and is padded with 0.
        assert_eq!(width, 480);
        let values: Vec<f32> = bytes
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(values.len(), 2 * 3 * 48 * 480);
        assert_eq!(values[0], 1.0);
        assert_eq!(values[95], 1.0);
        assert_eq!(values[96], 0.0);
        assert_eq!(values[3 * 48 * 480], -1.0);
        // A line past max_width is squeezed to it.
        let long = image(1000, 10, |_, _| 0);
        let (_, width) = batch(
            &[&long],
            &Shape {
                max_width: 960,
                ..shape
            },
        );
        assert_eq!(width, 960);
    }
}
