//! OpenCV's bilinear resize of 8-bit images (`cv2.resize(image, size)`, `INTER_LINEAR`), to the
//! bit: the resize that ultralytics' letterbox and PaddleOCR's pre-processing run, shared by the
//! image primitives (`resample = "opencv_bilinear"`) and plugins that resize crops of their own
//! (the ocr pipeline's lines).
//!
//! Output `d` of an axis reads input `floor(f)` and the next, `f = (d + 0.5) * scale - 0.5`
//! (in `f32`, clamped to the ends), weighted in 11-bit fixed point (`INTER_RESIZE_COEF_BITS`);
//! the horizontal pass keeps its sums whole, and the vertical pass combines two rows as
//! OpenCV's vectorised code does on x86 and ARM (`VResizeLinearVec_32s8u`: each sum shifted
//! right by 4, multiplied keeping the high 16 bits, added and rounded by 2 bits), which is what
//! `cv2.resize` answers there: equal on every pixel of a 800×600 photo brought to 1184×736.
//! Not OpenCV's: its switch to area averaging for an exact halving of both sides.
//!
//! Time linear in the output's pixels; memory the output and two rows of sums.

use std::ops::Range;

/// The weights' scale: 1 is 2048.
const ONE: f32 = 2048.0;

/// Where one output coordinate reads: input `first` and the next (the last input when
/// `first` is the last), weighted `weights`, summing to about [`ONE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tap {
    /// The first input sample read.
    pub first: usize,
    /// Its weight and the next one's.
    pub weights: [i32; 2],
}

/// The taps of the output coordinates `window` of an axis of `input` samples resized to
/// `output`; `None` for a coordinate outside `0..output` (a letterbox's margin).
pub fn taps(input: usize, output: usize, window: Range<i64>) -> Vec<Option<Tap>> {
    let scale = input as f64 / output as f64;
    window
        .map(|d| {
            if d < 0 || d >= output as i64 || input == 0 {
                return None;
            }
            let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
            let (mut first, mut frac) = (f.floor(), f - f.floor());
            if first < 0.0 {
                (first, frac) = (0.0, 0.0);
            }
            if first >= (input - 1) as f32 {
                (first, frac) = ((input - 1) as f32, 0.0);
            }
            let near = ((1.0 - frac) * ONE).round_ties_even() as i32;
            let far = (frac * ONE).round_ties_even() as i32;
            Some(Tap {
                first: first as usize,
                weights: [near, far],
            })
        })
        .collect()
}

/// `pixels` (`width` pixels a row of `channels` samples, row-major) resized through `columns`
/// and `rows` ([`taps`]): `rows.len()` rows of `columns.len()` pixels, zero where a tap is
/// `None`.
pub fn resize(
    pixels: &[u8],
    width: usize,
    channels: usize,
    columns: &[Option<Tap>],
    rows: &[Option<Tap>],
) -> Vec<u8> {
    let stride = width * channels;
    let height = pixels.len().checked_div(stride).unwrap_or(0);
    let out_stride = columns.len() * channels;
    let horizontal = |y: usize, sums: &mut Vec<i32>| {
        sums.clear();
        let source = &pixels[y * stride..(y + 1) * stride];
        for tap in columns {
            match tap {
                None => sums.extend(std::iter::repeat_n(0, channels)),
                Some(Tap { first, weights }) => {
                    let next = (first + 1).min(width - 1);
                    sums.extend((0..channels).map(|c| {
                        i32::from(source[first * channels + c]) * weights[0]
                            + i32::from(source[next * channels + c]) * weights[1]
                    }));
                }
            }
        }
    };
    let mut out = Vec::with_capacity(rows.len() * out_stride);
    // The horizontal sums of the last two input rows read, by row.
    let mut cached: [(usize, Vec<i32>); 2] = [(usize::MAX, Vec::new()), (usize::MAX, Vec::new())];
    for tap in rows {
        let Some(Tap { first, weights }) = *tap else {
            out.extend(std::iter::repeat_n(0, out_stride));
            continue;
        };
        if height == 0 {
            out.extend(std::iter::repeat_n(0, out_stride));
            continue;
        }
        let next = (first + 1).min(height - 1);
        // The slot holding row `y`'s sums, made in the slot other than `keep` if neither has it.
        let mut slot_of = |y: usize, keep: Option<usize>| -> usize {
            if let Some(slot) = cached.iter().position(|(row, _)| *row == y) {
                return slot;
            }
            // Rows are read in order: the older row (the smaller) goes.
            let slot = match keep {
                Some(kept) => 1 - kept,
                None => usize::from(cached[1].0 < cached[0].0 || cached[1].0 == usize::MAX),
            };
            horizontal(y, &mut cached[slot].1);
            cached[slot].0 = y;
            slot
        };
        let a = slot_of(first, None);
        let b = slot_of(next, Some(a));
        let (top, bottom) = (&cached[a].1, &cached[b].1);
        out.extend(top.iter().zip(bottom).map(|(&a, &b)| {
            let sum = (((a >> 4) * weights[0]) >> 16) + (((b >> 4) * weights[1]) >> 16);
            ((sum + 2) >> 2).clamp(0, 255) as u8
        }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enlarging_a_ramp_gives_opencvs_quarters() {
        // cv2.resize(np.array([[0, 200]], np.uint8), (4, 1)) is [[0, 50, 150, 200]].
        let (columns, rows) = (taps(2, 4, 0..4), taps(1, 1, 0..1));
        assert_eq!(resize(&[0, 200], 2, 1, &columns, &rows), [0, 50, 150, 200]);
    }

    #[test]
    fn a_flat_image_stays_flat_and_margins_are_zero() {
        let pixels = vec![77u8; 13 * 7 * 3];
        let out = resize(&pixels, 13, 3, &taps(13, 31, 0..31), &taps(7, 48, 0..48));
        assert_eq!(out.len(), 31 * 48 * 3);
        assert!(out.iter().all(|&v| v == 77));
        let columns = taps(13, 20, -2..22);
        assert_eq!((columns[0], columns[1], columns[23]), (None, None, None));
        let out = resize(&pixels, 13, 3, &columns, &taps(7, 5, 0..5));
        assert_eq!(&out[..6], &[0; 6]);
        assert_eq!(out[6], 77);
    }

    #[test]
    fn shrinking_reads_the_two_nearest_pixels() {
        // A third of 0, 90, 0, ...: each output lands on a 90.
        let row: Vec<u8> = (0..9).map(|x| if x % 3 == 1 { 90 } else { 0 }).collect();
        let out = resize(&row, 9, 1, &taps(9, 3, 0..3), &taps(1, 1, 0..1));
        assert_eq!(out, [90, 90, 90]);
    }
}
