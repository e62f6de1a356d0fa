//! A text line cut out of the photo and straightened, as RapidOCR's `get_rotate_crop_image`
//! does it with OpenCV: the box's four corners mapped onto an upright rectangle as wide as its
//! longer top or bottom edge and as high as its longer side (`cv2.getPerspectiveTransform`),
//! the photo sampled through that map bicubically with its edge pixels repeated
//! (`warpPerspective`, `INTER_CUBIC`, `BORDER_REPLICATE`, as OpenCV 5 computes it: within a
//! level of it on a pixel in a thousand), and a line taller than 1.5 times its width turned a quarter
//! counter-clockwise (`np.rot90`).
//!
//! Bounded: a crop's sides are at most the photo's diagonal, and its time and memory linear in
//! its pixels.

/// An 8-bit image of three channels, row-major (`height × width × 3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

impl Image {
    fn at(&self, x: usize, y: usize) -> &[u8] {
        let i = (y * self.width + x) * 3;
        &self.pixels[i..i + 3]
    }
}

/// The line inside `corners` (top-left, top-right, bottom-right, bottom-left, in `photo`'s
/// pixels), upright; `None` for a box less than a pixel across.
pub fn crop(photo: &Image, corners: &[[i64; 2]; 4]) -> Option<Image> {
    // numpy's float32 norms, truncated as `int()` truncates them.
    let p = corners.map(|[x, y]| [x as f32, y as f32]);
    let norm = |a: [f32; 2], b: [f32; 2]| ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt();
    let width = norm(p[0], p[1]).max(norm(p[2], p[3])) as usize;
    let height = norm(p[0], p[3]).max(norm(p[1], p[2])) as usize;
    if width == 0 || height == 0 || photo.width == 0 || photo.height == 0 {
        return None;
    }
    let (w, h) = (width as f64, height as f64);
    let upright = [[0.0, 0.0], [w, 0.0], [w, h], [0.0, h]];
    let forward = perspective(&p.map(|[x, y]| [f64::from(x), f64::from(y)]), &upright)?;
    let inverse = invert(&forward)?;
    let straight = warp(photo, &inverse, width, height);
    Some(if height as f64 / width as f64 >= 1.5 {
        quarter_turn(&straight)
    } else {
        straight
    })
}

/// The 3×3 map taking `from`'s four points onto `to`'s (OpenCV's `getPerspectiveTransform`: an
/// 8×8 system solved by OpenCV's LU, partial pivoting on the first largest, in its order of
/// operations, so that the map is OpenCV's to the last bit); `None` when they are degenerate.
fn perspective(from: &[[f64; 2]; 4], to: &[[f64; 2]; 4]) -> Option<[f64; 9]> {
    let mut a = [[0.0f64; 8]; 8];
    let mut b = [0.0f64; 8];
    for i in 0..4 {
        let ([x, y], [u, v]) = (from[i], to[i]);
        a[i] = [x, y, 1.0, 0.0, 0.0, 0.0, -x * u, -y * u];
        a[i + 4] = [0.0, 0.0, 0.0, x, y, 1.0, -x * v, -y * v];
        (b[i], b[i + 4]) = (u, v);
    }
    for i in 0..8 {
        let mut k = i;
        for j in i + 1..8 {
            if a[j][i].abs() > a[k][i].abs() {
                k = j;
            }
        }
        if a[k][i].abs() < f64::EPSILON * 10.0 {
            return None;
        }
        a.swap(i, k);
        b.swap(i, k);
        let d = -1.0 / a[i][i];
        let (pivot_row, pivot_b) = (a[i], b[i]);
        for (row, bj) in a.iter_mut().zip(b.iter_mut()).skip(i + 1) {
            let alpha = row[i] * d;
            for (value, pivot) in row.iter_mut().zip(pivot_row).skip(i + 1) {
                *value += alpha * pivot;
            }
            *bj += alpha * pivot_b;
        }
    }
    for i in (0..8).rev() {
        let mut sum = b[i];
        for k in i + 1..8 {
            sum -= a[i][k] * b[k];
        }
        b[i] = sum / a[i][i];
    }
    let m = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], 1.0];
    m.iter().all(|v| v.is_finite()).then_some(m)
}

/// The inverse of a 3×3 matrix, by its adjugate (as OpenCV's `invert` does for 3×3); `None`
/// when it is singular.
fn invert(m: &[f64; 9]) -> Option<[f64; 9]> {
    let det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6])
        + m[2] * (m[3] * m[7] - m[4] * m[6]);
    if det == 0.0 || !det.is_finite() {
        return None;
    }
    let d = 1.0 / det;
    Some([
        (m[4] * m[8] - m[5] * m[7]) * d,
        (m[2] * m[7] - m[1] * m[8]) * d,
        (m[1] * m[5] - m[2] * m[4]) * d,
        (m[5] * m[6] - m[3] * m[8]) * d,
        (m[0] * m[8] - m[2] * m[6]) * d,
        (m[2] * m[3] - m[0] * m[5]) * d,
        (m[3] * m[7] - m[4] * m[6]) * d,
        (m[1] * m[6] - m[0] * m[7]) * d,
        (m[0] * m[4] - m[1] * m[3]) * d,
    ])
}

/// OpenCV's bicubic weights (`interpolateCubic`, `A = -0.75`) at `x` in `0..1`, in `f32`.
fn cubic(x: f32) -> [f32; 4] {
    const A: f32 = -0.75;
    let c0 = ((A * (x + 1.0) - 5.0 * A) * (x + 1.0) + 8.0 * A) * (x + 1.0) - 4.0 * A;
    let c1 = ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let c2 = ((A + 2.0) * (1.0 - x) - (A + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0;
    [c0, c1, c2, 1.0 - c0 - c1 - c2]
}

/// `photo` sampled at `inverse`'s image of each pixel of a `width`×`height` output: each
/// position's 4×4 neighbours (the edge repeated past it) weighted by [`cubic`] at its exact
/// fraction, as OpenCV 5's `warpPerspective` samples (its earlier versions rounded positions to
/// 1/32 of a pixel), summed and rounded to 8 bits.
fn warp(photo: &Image, inverse: &[f64; 9], width: usize, height: usize) -> Image {
    let (last_x, last_y) = (photo.width as i64 - 1, photo.height as i64 - 1);
    let mut pixels = Vec::with_capacity(width * height * 3);
    let m = inverse;
    for y in 0..height {
        let y = y as f64;
        let (x0, y0, w0) = (m[1] * y + m[2], m[4] * y + m[5], m[7] * y + m[8]);
        for x in 0..width {
            let x = x as f64;
            let w = w0 + m[6] * x;
            let (sx, sy) = if w != 0.0 {
                ((x0 + m[0] * x) / w, (y0 + m[3] * x) / w)
            } else {
                (0.0, 0.0)
            };
            // Positions far outside the photo (a degenerate map) clamp to its edge.
            let (sx, sy) = (
                sx.clamp(-4.0, last_x as f64 + 4.0),
                sy.clamp(-4.0, last_y as f64 + 4.0),
            );
            let (fx, fy) = (sx.floor(), sy.floor());
            let (wx, wy) = (cubic((sx - fx) as f32), cubic((sy - fy) as f32));
            let (ix, iy) = (fx as i64 - 1, fy as i64 - 1);
            let mut sum = [0f64; 3];
            for (row, &weight_y) in wy.iter().enumerate() {
                let py = (iy + row as i64).clamp(0, last_y) as usize;
                for (col, &weight_x) in wx.iter().enumerate() {
                    let px = (ix + col as i64).clamp(0, last_x) as usize;
                    let weight = f64::from(weight_y) * f64::from(weight_x);
                    for (s, v) in sum.iter_mut().zip(photo.at(px, py)) {
                        *s += f64::from(*v) * weight;
                    }
                }
            }
            pixels.extend(sum.map(|s| s.round_ties_even().clamp(0.0, 255.0) as u8));
        }
    }
    Image {
        width,
        height,
        pixels,
    }
}

/// `image` turned a quarter counter-clockwise (`np.rot90`).
fn quarter_turn(image: &Image) -> Image {
    let (w, h) = (image.width, image.height);
    let mut pixels = Vec::with_capacity(w * h * 3);
    for row in 0..w {
        for col in 0..h {
            pixels.extend_from_slice(image.at(w - 1 - row, col));
        }
    }
    Image {
        width: h,
        height: w,
        pixels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gradient(width: usize, height: usize) -> Image {
        let pixels = (0..height)
            .flat_map(|y| {
                (0..width).flat_map(move |x| {
                    [
                        (x * 7 % 256) as u8,
                        (y * 5 % 256) as u8,
                        ((x + y) % 256) as u8,
                    ]
                })
            })
            .collect();
        Image {
            width,
            height,
            pixels,
        }
    }

    #[test]
    fn an_upright_box_is_cut_out_as_it_is() {
        let photo = gradient(40, 30);
        let crop = crop(&photo, &[[5, 4], [25, 4], [25, 14], [5, 14]]).unwrap();
        assert_eq!((crop.width, crop.height), (20, 10));
        for y in 0..10 {
            for x in 0..20 {
                assert_eq!(crop.at(x, y), photo.at(x + 5, y + 4), "at {x},{y}");
            }
        }
    }

    #[test]
    fn the_weights_sum_to_one_and_a_whole_pixel_takes_them_all() {
        assert_eq!(cubic(0.0), [0.0, 1.0, 0.0, 0.0]);
        for x in [0.1f32, 0.25, 0.5, 0.9] {
            assert!((cubic(x).iter().sum::<f32>() - 1.0).abs() < 1e-6);
        }
    }

    #[test]
    fn the_map_takes_each_corner_to_its_place() {
        let from = [[3.0, 7.0], [50.0, 2.0], [55.0, 30.0], [1.0, 28.0]];
        let to = [[0.0, 0.0], [40.0, 0.0], [40.0, 20.0], [0.0, 20.0]];
        let m = perspective(&from, &to).unwrap();
        for (f, t) in from.iter().zip(&to) {
            let w = m[6] * f[0] + m[7] * f[1] + m[8];
            let u = (m[0] * f[0] + m[1] * f[1] + m[2]) / w;
            let v = (m[3] * f[0] + m[4] * f[1] + m[5]) / w;
            assert!(
                (u - t[0]).abs() < 1e-9 && (v - t[1]).abs() < 1e-9,
                "{f:?} → {u},{v}"
            );
        }
        let inverse = invert(&m).unwrap();
        let w = inverse[6] * 40.0 + inverse[7] * 20.0 + inverse[8];
        assert!(((inverse[0] * 40.0 + inverse[1] * 20.0 + inverse[2]) / w - 55.0).abs() < 1e-9);
    }

    #[test]
    fn a_tall_line_is_turned_counter_clockwise() {
        let photo = gradient(30, 60);
        let crop = crop(&photo, &[[0, 0], [10, 0], [10, 30], [0, 30]]).unwrap();
        assert_eq!((crop.width, crop.height), (30, 10));
        // The top-right pixel of the upright cut is the turned image's top-left.
        assert_eq!(crop.at(0, 0), photo.at(9, 0));
        assert_eq!(crop.at(29, 9), photo.at(0, 29));
    }

    #[test]
    fn degenerate_boxes_are_dropped_and_edges_repeat() {
        let photo = gradient(20, 20);
        assert!(crop(&photo, &[[5, 5], [5, 5], [5, 5], [5, 5]]).is_none());
        // A box reaching past the photo repeats its edge pixels.
        let crop = crop(&photo, &[[15, 0], [25, 0], [25, 4], [15, 4]]).unwrap();
        assert_eq!(crop.at(9, 0), photo.at(19, 0));
    }
}
