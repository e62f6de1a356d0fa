//! Resizing as Pillow does it (`Image.resize(..., BILINEAR)`, what torchvision's `Resize` runs
//! on a PIL image): a separable convolution with the triangle filter, widened by the scale when
//! shrinking (antialiasing). Only the pixels of the crop are computed: the shorter side resized
//! and the centre cropped cost what the crop costs. Pillow rounds to 8 bits between and after
//! the passes; here both bilinear passes stay in `f32`, so values differ from Pillow's by at
//! most about one level. Bicubic and Lanczos ([`Resample`]), whose lobes overshoot, run as
//! Pillow runs them: the horizontal pass first, each pass rounded and clamped to 8 bits.
//!
//! The passes run in the order that costs less. Usually that is the vertical pass first, one
//! output row at a time: each row is a weighted sum of a few whole input rows (contiguous, so
//! the compiler vectorises it, WebAssembly's SIMD included), and then only the crop's rows get
//! the horizontal pass; memory past the output is one input row of `f32`s. Horizontal first
//! (for images much wider than the crop's rows are tall) keeps the rows the crop reads at the
//! crop's width, as Pillow does.

use image::RgbImage;

use crate::settings::{Preprocess, Resample, Resize};

/// A filter's support (the half-width of its window at scale 1) and its kernel, as Pillow's
/// `Resample.c` defines them.
fn filter(resample: Resample) -> (f64, fn(f64) -> f64) {
    fn triangle(x: f64) -> f64 {
        (1.0 - x.abs()).max(0.0)
    }
    fn cubic(x: f64) -> f64 {
        const A: f64 = -0.5;
        let x = x.abs();
        if x < 1.0 {
            ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            (((x - 5.0) * x + 8.0) * x - 4.0) * A
        } else {
            0.0
        }
    }
    fn sinc(x: f64) -> f64 {
        match x == 0.0 {
            true => 1.0,
            false => (x * std::f64::consts::PI).sin() / (x * std::f64::consts::PI),
        }
    }
    fn lanczos(x: f64) -> f64 {
        match (-3.0..3.0).contains(&x) {
            true => sinc(x) * sinc(x / 3.0),
            false => 0.0,
        }
    }
    match resample {
        Resample::Bilinear | Resample::OpenCvBilinear => (1.0, triangle),
        Resample::Bicubic => (2.0, cubic),
        Resample::Lanczos => (3.0, lanczos),
    }
}

/// One axis's taps for the output coordinates of a window: output `i` is the weighted sum of
/// the `n` input samples from `first[i]`, with `weights[i * n..(i + 1) * n]`. Every coordinate
/// has exactly `n` weights (zero-padded, `first` moved back where the end of the input would be
/// passed) so that the inner loops have one length and one bounds check.
struct Axis {
    n: usize,
    first: Vec<usize>,
    weights: Vec<f32>,
}

impl Axis {
    /// The taps of the output coordinates `window` of an axis resized from `input` to `output`
    /// samples with `resample` (Pillow's `precompute_coeffs`). Coordinates outside `0..output`
    /// (a crop larger than the resized image) have zero weights.
    fn new(input: usize, output: usize, window: std::ops::Range<i64>, resample: Resample) -> Axis {
        let (reach, kernel) = filter(resample);
        let scale = input as f64 / output as f64;
        // OpenCV's INTER_LINEAR does not widen the filter when shrinking (no antialiasing).
        let filter_scale = match resample {
            Resample::OpenCvBilinear => 1.0,
            _ => scale.max(1.0),
        };
        let support = reach * filter_scale;
        let spans: Vec<Option<(usize, Vec<f64>)>> = window
            .map(|out| {
                if out < 0 || out >= output as i64 {
                    return None;
                }
                let center = (out as f64 + 0.5) * scale;
                let first = (center - support + 0.5).floor().max(0.0) as usize;
                let last = ((center + support + 0.5).floor() as usize).min(input);
                let mut weights: Vec<f64> = (first..last)
                    .map(|i| kernel((i as f64 - center + 0.5) / filter_scale))
                    .collect();
                let total: f64 = weights.iter().sum();
                if total != 0.0 {
                    weights.iter_mut().for_each(|w| *w /= total);
                }
                Some((first, weights))
            })
            .collect();
        // At most `input`: every span lies in 0..input.
        let n = spans
            .iter()
            .flatten()
            .map(|(_, w)| w.len())
            .max()
            .unwrap_or(0)
            .max(1)
            .min(input);
        let mut axis = Axis {
            n,
            first: Vec::with_capacity(spans.len()),
            weights: Vec::with_capacity(spans.len() * n),
        };
        for span in spans {
            let (first, weights) = span.unwrap_or((0, Vec::new()));
            let start = first.min(input - n);
            let pad = first - start;
            axis.first.push(start);
            axis.weights.extend(std::iter::repeat_n(0.0, pad));
            axis.weights.extend(weights.iter().map(|&w| w as f32));
            axis.weights
                .extend(std::iter::repeat_n(0.0, n - pad - weights.len()));
        }
        axis
    }

    /// The input samples this axis reads: `start..end`.
    fn used(&self) -> (usize, usize) {
        let start = self.first.iter().copied().min().unwrap_or(0);
        let end = self.first.iter().map(|f| f + self.n).max().unwrap_or(0);
        (start, end)
    }

    fn taps(&self, i: usize) -> (usize, &[f32]) {
        (self.first[i], &self.weights[i * self.n..(i + 1) * self.n])
    }
}

/// The full size an image of `width`×`height` is resized to, and the window of it the tensor
/// keeps: `(full width, full height, left, top)`.
fn geometry(width: u32, height: u32, preprocess: &Preprocess) -> (usize, usize, i64, i64) {
    let (crop_w, crop_h) = preprocess.size;
    match preprocess.resize {
        // `limit`'s size is the image's own, set by the caller (`tensor_from_body_within`).
        Resize::Limit(_) => (crop_w as usize, crop_h as usize, 0, 0),
        Resize::Letterbox { up, .. } => {
            let ((w, h), (left, top)) = letterbox(width, height, (crop_w, crop_h), up);
            (w as usize, h as usize, -i64::from(left), -i64::from(top))
        }
        Resize::Stretch { to: (w, h) } => {
            let (w, h) = (w as usize, h as usize);
            let offset = preprocess.crop_offset;
            (w, h, offset.of(w, crop_w), offset.of(h, crop_h))
        }
        Resize::Shorter(side) => {
            // torchvision: the longer side is int(side * long / short).
            let (w, h) = if width <= height {
                let long = u64::from(side) * u64::from(height) / u64::from(width);
                (side as usize, long as usize)
            } else {
                let long = u64::from(side) * u64::from(width) / u64::from(height);
                (long as usize, side as usize)
            };
            let offset = preprocess.crop_offset;
            (
                w.max(1),
                h.max(1),
                offset.of(w, crop_w),
                offset.of(h, crop_h),
            )
        }
    }
}

/// Where a `width`×`height` image lies in a letterbox of `size`: its scaled `(width, height)`
/// and the `(left, top)` margins, as ultralytics' `LetterBox` computes them (the scale that fits,
/// at most 1 unless `up`; each side rounded half to even; the odd pixel of a margin at the
/// bottom or right).
pub fn letterbox(width: u32, height: u32, size: (u32, u32), up: bool) -> ((u32, u32), (u32, u32)) {
    let (w, h) = (f64::from(width), f64::from(height));
    let mut ratio = (f64::from(size.0) / w).min(f64::from(size.1) / h);
    if !up {
        ratio = ratio.min(1.0);
    }
    // At least one pixel, at most the size (a rounding up cannot pass it).
    let scaled = |side: f64, most: u32| ((side * ratio).round_ties_even() as u32).clamp(1, most);
    let (new_w, new_h) = (scaled(w, size.0), scaled(h, size.1));
    ((new_w, new_h), ((size.0 - new_w) / 2, (size.1 - new_h) / 2))
}

/// The image resized and cropped to `preprocess.size`: `height × width × 3` values in 0..255,
/// row-major, RGB.
pub fn resize_crop(image: &RgbImage, preprocess: &Preprocess) -> Vec<f32> {
    let (in_w, in_h) = (image.width() as usize, image.height() as usize);
    let (full_w, full_h, left, top) = geometry(image.width(), image.height(), preprocess);
    let (crop_w, crop_h) = (preprocess.size.0 as usize, preprocess.size.1 as usize);
    let resample = preprocess.resample;
    let (window_x, window_y) = (left..left + crop_w as i64, top..top + crop_h as i64);
    let mut out = if resample == Resample::OpenCvBilinear {
        let columns = crate::opencv::taps(in_w, full_w, window_x);
        let rows = crate::opencv::taps(in_h, full_h, window_y);
        let resized = crate::opencv::resize(image.as_raw(), in_w, 3, &columns, &rows);
        resized.into_iter().map(f32::from).collect()
    } else {
        let columns = Axis::new(in_w, full_w, window_x, resample);
        let rows = Axis::new(in_h, full_h, window_y, resample);
        resize_unpadded(image, (columns, rows), crop_w, resample)
    };
    if let Resize::Letterbox { pad, .. } = preprocess.resize {
        // The margins: outside the image's taps (zero weights), filled with the pad level.
        let (left, top) = (-left as usize, -top as usize);
        let fill = f32::from(pad);
        for (y, row) in out.chunks_exact_mut(crop_w * 3).enumerate() {
            for (x, value) in row.as_chunks_mut::<3>().0.iter_mut().enumerate() {
                if y < top || y >= top + full_h || x < left || x >= left + full_w {
                    *value = [fill; 3];
                }
            }
        }
    }
    out
}

/// [`resize_crop`]'s passes, over the taps of its columns and rows.
fn resize_unpadded(
    image: &RgbImage,
    (columns, rows): (Axis, Axis),
    crop_w: usize,
    resample: Resample,
) -> Vec<f32> {
    let in_w = image.width() as usize;
    let crop_h = rows.first.len();
    if !matches!(resample, Resample::Bilinear | Resample::OpenCvBilinear) {
        // Pillow's order and 8-bit rounding: the overshoot of the lobes is clamped as there.
        let mut out = resize_horizontal_first(image.as_raw(), in_w, &columns, &rows, crop_w, true);
        out.iter_mut().for_each(|value| *value = to_8_bits(*value));
        return out;
    }
    let (col_start, col_end) = columns.used();
    let (row_start, row_end) = rows.used();
    // Multiply-adds of each order: vertical first runs over every column the crop reads, for
    // each of its rows; horizontal first over every row the crop reads. The vertical pass is
    // vectorised, so it counts half.
    let vertical_first = crop_h * (rows.n * (col_end - col_start) / 2 + crop_w * columns.n);
    let horizontal_first = (row_end - row_start) * crop_w * columns.n + crop_h * crop_w * rows.n;
    if vertical_first <= horizontal_first {
        resize_vertical_first(image.as_raw(), in_w, &columns, &rows, crop_w)
    } else {
        resize_horizontal_first(image.as_raw(), in_w, &columns, &rows, crop_w, false)
    }
}

/// A value as Pillow's 8-bit passes leave it: rounded half up, clamped to 0..255. (Clamped
/// first, the rounding is a truncation to an integer, which the compiler vectorises; `floor`
/// is a call into libm on the baseline x86-64, and it was a third of a bicubic resize.)
#[inline(always)]
fn to_8_bits(value: f32) -> f32 {
    // Exact: a value in 0..=255.5 fits an i32, and every integer up to 255 an f32.
    (value + 0.5).clamp(0.0, 255.0) as i32 as f32
}

/// A pixel of a row the horizontal pass reads: RGB (the vertical-first order's row), or RGB and
/// a zero (the horizontal-first order's, a vector of four).
trait Pixel: Sized {
    /// The sum of `source`'s pixels weighted by `weights`, as RGB.
    fn weighted(weights: &[f32], source: &[Self]) -> [f32; 3];
}

impl Pixel for [f32; 3] {
    #[inline(always)]
    fn weighted(weights: &[f32], source: &[[f32; 3]]) -> [f32; 3] {
        let mut sum = [0f32; 3];
        for (weight, input) in weights.iter().zip(source) {
            sum[0] += weight * input[0];
            sum[1] += weight * input[1];
            sum[2] += weight * input[2];
        }
        sum
    }
}

/// A multiply-add of four channels a tap, alternating between two sums (so that each waits on
/// the one before it half as often).
impl Pixel for [f32; 4] {
    #[inline(always)]
    fn weighted(weights: &[f32], source: &[[f32; 4]]) -> [f32; 3] {
        let (mut even, mut odd) = ([0f32; 4], [0f32; 4]);
        let (weight_pairs, last_weight) = weights.as_chunks::<2>();
        let (pixel_pairs, last_pixel) = source.as_chunks::<2>();
        for (w, p) in weight_pairs.iter().zip(pixel_pairs) {
            for c in 0..4 {
                even[c] += w[0] * p[0][c];
                odd[c] += w[1] * p[1][c];
            }
        }
        if let ([w], [p]) = (last_weight, last_pixel) {
            for c in 0..4 {
                even[c] += w * p[c];
            }
        }
        [even[0] + odd[0], even[1] + odd[1], even[2] + odd[2]]
    }
}

/// The horizontal taps `columns` applied to `line` (pixels from input column `offset`), into
/// `out` (`columns`' outputs × 3). The tap counts of common scales get their own loop, unrolled
/// by the compiler.
fn horizontal<P: Pixel>(line: &[P], offset: usize, columns: &Axis, out: &mut [f32]) {
    match columns.n {
        1 => horizontal_n::<1, P>(line, offset, columns, out),
        2 => horizontal_n::<2, P>(line, offset, columns, out),
        3 => horizontal_n::<3, P>(line, offset, columns, out),
        4 => horizontal_n::<4, P>(line, offset, columns, out),
        5 => horizontal_n::<5, P>(line, offset, columns, out),
        6 => horizontal_n::<6, P>(line, offset, columns, out),
        7 => horizontal_n::<7, P>(line, offset, columns, out),
        8 => horizontal_n::<8, P>(line, offset, columns, out),
        9 => horizontal_n::<9, P>(line, offset, columns, out),
        10 => horizontal_n::<10, P>(line, offset, columns, out),
        11 => horizontal_n::<11, P>(line, offset, columns, out),
        12 => horizontal_n::<12, P>(line, offset, columns, out),
        n => {
            let outputs = out.as_chunks_mut::<3>().0.iter_mut();
            for ((pixel, weights), &first) in outputs
                .zip(columns.weights.chunks_exact(n))
                .zip(&columns.first)
            {
                *pixel = P::weighted(weights, &line[first - offset..][..n]);
            }
        }
    }
}

fn horizontal_n<const N: usize, P: Pixel>(
    line: &[P],
    offset: usize,
    columns: &Axis,
    out: &mut [f32],
) {
    let outputs = out.as_chunks_mut::<3>().0.iter_mut();
    let (taps, _) = columns.weights.as_chunks::<N>();
    for ((pixel, weights), &first) in outputs.zip(taps).zip(&columns.first) {
        let (source, _) = line[first - offset..].as_chunks::<N>();
        *pixel = P::weighted(weights, &source[0]);
    }
}

/// Each output row: the weighted sum of its input rows over the columns the crop reads, then
/// the horizontal pass over that one row.
#[inline(never)]
fn resize_vertical_first(
    pixels: &[u8],
    in_w: usize,
    columns: &Axis,
    rows: &Axis,
    crop_w: usize,
) -> Vec<f32> {
    let (col_start, col_end) = columns.used();
    let width = (col_end - col_start) * 3;
    let mut line = vec![0f32; width];
    let mut sources: Vec<&[u8]> = Vec::with_capacity(rows.n);
    let stride = crop_w * 3;
    let mut out = vec![0f32; rows.first.len() * stride];
    for (y, target) in out.chunks_exact_mut(stride).enumerate() {
        let (first, weights) = rows.taps(y);
        sources.clear();
        sources.extend((first..first + rows.n).map(|row| {
            let at = (row * in_w + col_start) * 3;
            &pixels[at..at + width]
        }));
        weighted_rows(weights, &sources, &mut line);
        horizontal(line.as_chunks::<3>().0, col_start, columns, target);
    }
    out
}

/// `out` as the sum of the rows `sources` weighted by `weights`: sixteen columns at a time,
/// every row summed before the one store (fixed-size arrays the compiler keeps in vector
/// registers, WebAssembly's SIMD included).
#[inline(always)]
fn weighted_rows<T: Copy>(weights: &[f32], sources: &[&[T]], out: &mut [f32])
where
    f32: From<T>,
{
    let (chunks, rest) = out.as_chunks_mut::<16>();
    for (j, chunk) in chunks.iter_mut().enumerate() {
        let mut sum = [0f32; 16];
        for (&weight, source) in weights.iter().zip(sources) {
            let (values, _) = source[j * 16..].as_chunks::<16>();
            for (value, &input) in sum.iter_mut().zip(&values[0]) {
                *value += weight * f32::from(input);
            }
        }
        *chunk = sum;
    }
    let done = chunks.len() * 16;
    for (i, value) in rest.iter_mut().enumerate() {
        *value = weights
            .iter()
            .zip(sources)
            .map(|(&weight, source)| weight * f32::from(source[done + i]))
            .sum();
    }
}

/// Each input row the crop reads through the horizontal pass, then each output row the
/// weighted sum of those: for images much wider than the crop's rows are tall, and for every
/// filter but bilinear (`round`: the horizontal pass's values rounded to 8 bits, as Pillow's).
///
/// The horizontal pass reads each row as four-channel pixels (RGB and a zero), so that a tap
/// is one multiply-add of a vector of four, alternating between two sums: bicubic and Lanczos
/// shrinking a photo have from eight to tens of taps a pixel.
#[inline(never)]
fn resize_horizontal_first(
    pixels: &[u8],
    in_w: usize,
    columns: &Axis,
    rows: &Axis,
    crop_w: usize,
    round: bool,
) -> Vec<f32> {
    let (row_start, row_end) = rows.used();
    let (col_start, col_end) = columns.used();
    let stride = crop_w * 3;
    let mut across = vec![0f32; (row_end - row_start) * stride];
    let mut line = vec![[0f32; 4]; col_end - col_start];
    for (y, target) in (row_start..row_end).zip(across.chunks_exact_mut(stride)) {
        let source = &pixels[(y * in_w + col_start) * 3..(y * in_w + col_end) * 3];
        for (value, pixel) in line.iter_mut().zip(source.as_chunks::<3>().0) {
            *value = [pixel[0].into(), pixel[1].into(), pixel[2].into(), 0.0];
        }
        horizontal(&line, col_start, columns, target);
        if round {
            target
                .iter_mut()
                .for_each(|value| *value = to_8_bits(*value));
        }
    }
    let mut out = vec![0f32; rows.first.len() * stride];
    let mut sources: Vec<&[f32]> = Vec::with_capacity(rows.n);
    for (y, target) in out.chunks_exact_mut(stride).enumerate() {
        let (first, weights) = rows.taps(y);
        sources.clear();
        sources.extend(
            (first - row_start..first - row_start + rows.n)
                .map(|row| &across[row * stride..(row + 1) * stride]),
        );
        weighted_rows(weights, &sources, target);
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
            preprocess(50, Resize::Stretch { to: (50, 50) }),
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
        let out = resize_crop(&image, &preprocess(10, Resize::Stretch { to: (10, 10) }));
        let reds: Vec<f32> = out.chunks(3).take(10).map(|p| p[0]).collect();
        assert!(reds.windows(2).all(|w| w[0] < w[1]), "{reds:?}");
        // Pillow's antialiased shrink of the ramp: each output is its 10-pixel neighbourhood's
        // triangle-weighted mean, here 2 * (10 * i + 4.5).
        assert!((reds[3] - 69.0).abs() < 0.5, "{reds:?}");
    }

    /// ultralytics' `LetterBox` arithmetic: the fitting scale, sides rounded half to even, the
    /// odd pixel of a margin below and to the right; and the margins filled with the pad level.
    #[test]
    fn letterboxes_fit_centre_and_pad_as_ultralytics() {
        assert_eq!(
            letterbox(640, 427, (640, 640), true),
            ((640, 427), (0, 106))
        );
        assert_eq!(
            letterbox(1280, 720, (640, 640), true),
            ((640, 360), (0, 140))
        );
        assert_eq!(letterbox(303, 224, (640, 640), true), ((640, 473), (0, 83)));
        assert_eq!(
            letterbox(100, 50, (640, 640), false),
            ((100, 50), (270, 295))
        );
        assert_eq!(letterbox(1, 9000, (64, 64), true), ((1, 64), (31, 0)));
        let image = RgbImage::from_pixel(40, 20, image::Rgb([10, 200, 30]));
        let p = Preprocess {
            size: (20, 20),
            resize: Resize::Letterbox { pad: 114, up: true },
            ..Preprocess::default()
        };
        let out = resize_crop(&image, &p);
        let pixel = |x: usize, y: usize| &out[(y * 20 + x) * 3..(y * 20 + x) * 3 + 3];
        // 40x20 → 20x10, rows 5..15.
        for (y, inside) in [
            (0, false),
            (4, false),
            (5, true),
            (14, true),
            (15, false),
            (19, false),
        ] {
            let want: &[f32] = if inside {
                &[10.0, 200.0, 30.0]
            } else {
                &[114.0; 3]
            };
            for x in 0..20 {
                let got = pixel(x, y);
                assert!(
                    got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-3),
                    "({x}, {y}): {got:?}"
                );
            }
        }
    }

    /// OpenCV's INTER_LINEAR reads the two nearest pixels however much it shrinks: halving a
    /// row of 0, 100, 0, 100 gives 50s (each output between a pair), where the antialiased
    /// triangle of `bilinear` gives the same; a third gives the one pixel it lands on.
    #[test]
    fn opencv_bilinear_does_not_antialias() {
        let image = RgbImage::from_fn(9, 1, |x, _| {
            let v = if x % 3 == 1 { 90 } else { 0 };
            image::Rgb([v, v, v])
        });
        let p = |resample| Preprocess {
            size: (3, 1),
            resize: Resize::Stretch { to: (3, 1) },
            resample,
            ..Preprocess::default()
        };
        // Output x's centre is input 3x + 1: OpenCV takes that pixel alone (90); the widened
        // triangle spreads it over its neighbours.
        let opencv = resize_crop(&image, &p(Resample::OpenCvBilinear));
        assert!(
            opencv.chunks(3).all(|px| (px[0] - 90.0).abs() < 1e-3),
            "{opencv:?}"
        );
        let pillow = resize_crop(&image, &p(Resample::Bilinear));
        assert!(pillow.chunks(3).all(|px| px[0] < 60.0), "{pillow:?}");
    }

    #[test]
    fn both_orders_of_the_passes_agree() {
        // A noisy image, so that every tap matters.
        let image = RgbImage::from_fn(97, 61, |x, y| {
            let v = (x * 7919 + y * 104_729) % 251;
            image::Rgb([v as u8, (v * 3 % 256) as u8, (255 - v) as u8])
        });
        for (size, resize) in [
            ((224, 224), Resize::Shorter(256)),
            ((40, 30), Resize::Shorter(48)),
            ((13, 200), Resize::Stretch { to: (13, 200) }),
            ((300, 5), Resize::Stretch { to: (300, 5) }),
            ((97, 61), Resize::Stretch { to: (97, 61) }),
        ] {
            let p = Preprocess {
                size,
                resize,
                ..Preprocess::default()
            };
            let (full_w, full_h, left, top) = geometry(97, 61, &p);
            let columns = Axis::new(
                97,
                full_w,
                left..left + i64::from(size.0),
                Resample::Bilinear,
            );
            let rows = Axis::new(61, full_h, top..top + i64::from(size.1), Resample::Bilinear);
            let a = resize_vertical_first(image.as_raw(), 97, &columns, &rows, size.0 as usize);
            let b = resize_horizontal_first(
                image.as_raw(),
                97,
                &columns,
                &rows,
                size.0 as usize,
                false,
            );
            assert_eq!(a.len(), (size.0 * size.1 * 3) as usize);
            assert!(
                a.iter().zip(&b).all(|(a, b)| (a - b).abs() < 1e-2),
                "{size:?}"
            );
            // The identity keeps every pixel.
            if size == (97, 61) {
                let raw: Vec<f32> = image.as_raw().iter().map(|&v| f32::from(v)).collect();
                assert!(a.iter().zip(&raw).all(|(a, b)| (a - b).abs() < 1e-3));
            }
        }
    }

    /// The horizontal-first pass (its four-channel multiply-adds, two sums, rounding between
    /// the passes) against the plainest reading of Pillow's two 8-bit passes over the same
    /// taps, in `f64`: bicubic and Lanczos, shrinking (tens of taps) and enlarging (odd counts).
    #[test]
    fn the_horizontal_first_pass_is_pillows_two_passes() {
        let (in_w, in_h) = (203, 151);
        let image = RgbImage::from_fn(in_w, in_h, |x, y| {
            let v = (x * 7919 + y * 104_729) % 251;
            image::Rgb([v as u8, (v * 3 % 256) as u8, (255 - v) as u8])
        });
        let pixels = image.as_raw();
        for resample in [Resample::Bicubic, Resample::Lanczos] {
            for (out_w, out_h) in [(24, 17), (101, 75), (400, 301), (7, 150)] {
                let columns = Axis::new(in_w as usize, out_w, 0..out_w as i64, resample);
                let rows = Axis::new(in_h as usize, out_h, 0..out_h as i64, resample);
                let got =
                    resize_horizontal_first(pixels, in_w as usize, &columns, &rows, out_w, true);
                let pillow = |value: f64| (value + 0.5).floor().clamp(0.0, 255.0);
                let (row_start, row_end) = rows.used();
                let across: Vec<Vec<f64>> = (row_start..row_end)
                    .map(|y| {
                        (0..out_w * 3)
                            .map(|i| {
                                let (first, weights) = columns.taps(i / 3);
                                pillow(
                                    weights
                                        .iter()
                                        .enumerate()
                                        .map(|(k, &w)| {
                                            let at = (y * in_w as usize + first + k) * 3 + i % 3;
                                            f64::from(w) * f64::from(pixels[at])
                                        })
                                        .sum(),
                                )
                            })
                            .collect()
                    })
                    .collect();
                let mut differ = 0;
                for y in 0..out_h {
                    let (first, weights) = rows.taps(y);
                    for i in 0..out_w * 3 {
                        let want = pillow(
                            weights
                                .iter()
                                .enumerate()
                                .map(|(k, &w)| f64::from(w) * across[first + k - row_start][i])
                                .sum(),
                        );
                        let value = to_8_bits(got[y * out_w * 3 + i]);
                        assert!(
                            (f64::from(value) - want).abs() <= 1.0,
                            "{resample:?} {out_w}x{out_h}"
                        );
                        differ += usize::from(f64::from(value) != want);
                    }
                }
                // Only sums within float rounding of a half can land on the other level.
                assert!(
                    differ * 500 <= out_w * out_h * 3,
                    "{resample:?} {out_w}x{out_h}: {differ}"
                );
            }
        }
    }

    #[test]
    fn taps_have_one_length_and_stay_inside_the_input() {
        for (input, output) in [(640, 341), (5, 224), (1, 7), (224, 224), (1000, 3)] {
            let axis = Axis::new(input, output, -2..output as i64 + 2, Resample::Bilinear);
            assert!(axis.n >= 1 && axis.n <= input);
            assert_eq!(axis.weights.len(), axis.first.len() * axis.n);
            for i in 0..axis.first.len() {
                let (first, weights) = axis.taps(i);
                assert!(first + axis.n <= input);
                let total: f32 = weights.iter().sum();
                let inside = (2..output + 2).contains(&i);
                assert!(
                    (total - if inside { 1.0 } else { 0.0 }).abs() < 1e-4,
                    "{input} {output} {i}"
                );
            }
        }
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
