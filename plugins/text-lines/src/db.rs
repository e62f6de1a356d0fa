//! Differentiable Binarization's post-processing (PaddleOCR's `DBPostProcess`, as RapidOCR
//! runs it): a text detector's probability map becomes boxes in the photo's coordinates.
//!
//! 1. The map is thresholded (`thresh`) and dilated by a 2×2 square (each pixel takes its left,
//!    upper and upper-left neighbours).
//! 2. Each region of the mask (8-connected) and each hole in one (4-connected background the
//!    edge does not reach) is a candidate, in the order a raster scan meets them, at most
//!    `max_candidates`: OpenCV's `findContours(RETR_LIST)`.
//! 3. A candidate's minimum-area rectangle (its convex hull's) with a shorter side under
//!    `min_size` is dropped; so is one whose mean probability inside the rectangle (as
//!    `cv2.fillPoly` fills it) is under `box_thresh`.
//! 4. The rectangle grows by `area × unclip_ratio / perimeter` on every side (pyclipper's
//!    round offset, whose minimum-area rectangle this is), and is dropped if its shorter side is
//!    under `min_size + 2`.
//! 5. Its corners are scaled to the photo (rounded half to even, clipped to it), ordered from
//!    the top-left clockwise, clipped to the last pixel; a box 3 pixels or less across is
//!    dropped. Boxes are sorted top to bottom, and left to right within 10 pixels.
//!
//! Bounded: time and memory linear in the map's pixels. Scoring reads each candidate's
//! bounding box, and candidates stop once the boxes read add up to four maps.

use crate::geometry::{self, Rect};

/// The post-processing's settings: RapidOCR's defaults for PP-OCRv4.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// A pixel is text where its probability is over this.
    pub thresh: f32,
    /// A box is kept where its mean probability is at least this.
    pub box_thresh: f64,
    /// How far a box grows: its area times this, over its perimeter.
    pub unclip_ratio: f64,
    /// The most candidate regions looked at.
    pub max_candidates: usize,
    /// Whether the mask is dilated by a 2×2 square.
    pub dilation: bool,
    /// The shortest side a candidate's rectangle may have.
    pub min_size: f64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            thresh: 0.3,
            box_thresh: 0.5,
            unclip_ratio: 1.6,
            max_candidates: 1000,
            dilation: true,
            min_size: 3.0,
        }
    }
}

/// One box found: its corners in the photo (top-left, top-right, bottom-right, bottom-left)
/// and its mean probability.
#[derive(Debug, Clone, PartialEq)]
pub struct TextBox {
    /// The corners, `[x, y]` in pixels of the photo.
    pub corners: [[i64; 2]; 4],
    /// The mean probability inside the box before it grew.
    pub score: f64,
}

/// The probability map: `width × height` values, row-major.
pub struct Map<'a> {
    /// The probabilities.
    pub values: &'a [f32],
    /// Its width.
    pub width: usize,
    /// Its height.
    pub height: usize,
}

/// The boxes `map` holds, in the coordinates of a photo of `photo` (width, height) pixels.
pub fn boxes(map: &Map, photo: (u32, u32), settings: &Settings) -> Vec<TextBox> {
    let mask = mask(map, settings);
    let mut found = Vec::new();
    let budget = map.values.len().saturating_mul(4);
    let mut read = 0usize;
    for candidate in candidates(&mask, map.width, map.height, settings.max_candidates) {
        let rect = geometry::min_area_rect(&geometry::convex_hull(candidate));
        if rect.short_side() < settings.min_size {
            continue;
        }
        let Some((score, pixels)) = score(map, &rect) else {
            continue;
        };
        read += pixels;
        if read > budget {
            break;
        }
        // A map of NaN or infinite values (a broken model) scores nothing: not a box.
        if !(score >= settings.box_thresh && score.is_finite()) {
            continue;
        }
        let (area, perimeter) = geometry::area_and_perimeter(&rect.corners);
        let distance = if perimeter > 0.0 {
            area * settings.unclip_ratio / perimeter
        } else {
            0.0
        };
        // pyclipper works on the corners truncated to integers.
        let truncated = rect
            .corners
            .map(|[x, y]| [x.trunc() as i64, y.trunc() as i64]);
        let grown =
            geometry::min_area_rect(&geometry::convex_hull(truncated.to_vec())).grown(distance);
        // pyclipper's answer is in integers (rounded half away from zero).
        let rounded = grown
            .corners
            .map(|[x, y]| [x.round() as i64, y.round() as i64]);
        let grown = geometry::min_area_rect(&geometry::convex_hull(rounded.to_vec()));
        if grown.short_side() < settings.min_size + 2.0 {
            continue;
        }
        if let Some(corners) = to_photo(&grown, map, photo) {
            found.push(TextBox { corners, score });
        }
    }
    sort(&mut found);
    found
}

/// The thresholded, dilated mask.
fn mask(map: &Map, settings: &Settings) -> Vec<bool> {
    let above: Vec<bool> = map.values.iter().map(|&p| p > settings.thresh).collect();
    if !settings.dilation {
        return above;
    }
    let (w, h) = (map.width, map.height);
    let mut mask = above.clone();
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            mask[i] = above[i]
                || (x > 0 && above[i - 1])
                || (y > 0 && above[i - w])
                || (x > 0 && y > 0 && above[i - w - 1]);
        }
    }
    mask
}

/// The point sets whose hulls are the candidates' contours' hulls: for each 8-connected region
/// of the mask, its leftmost and rightmost pixel in each row; for each hole (4-connected
/// background the edge does not reach), the leftmost and rightmost mask pixels bordering it in
/// each row. At most `most`, in the order a raster scan meets their first pixel.
fn candidates(mask: &[bool], width: usize, height: usize, most: usize) -> Vec<Vec<[i64; 2]>> {
    // 0: not yet visited; a region's or hole's pixels take its number.
    let mut label = vec![0u32; mask.len()];
    let mut found: Vec<(usize, Vec<[i64; 2]>)> = Vec::new();
    let mut stack = Vec::new();
    let mut pixels = Vec::new();
    let mut next = 1u32;
    for start in 0..mask.len() {
        if label[start] != 0 {
            continue;
        }
        let foreground = mask[start];
        label[start] = next;
        stack.push(start);
        pixels.clear();
        let mut touches_edge = false;
        while let Some(i) = stack.pop() {
            pixels.push(i);
            let (x, y) = ((i % width) as i64, (i / width) as i64);
            touches_edge |= x == 0 || y == 0 || x == width as i64 - 1 || y == height as i64 - 1;
            for (dx, dy) in NEIGHBOURS {
                // The background is 4-connected: only the first four neighbours.
                if !foreground && dx != 0 && dy != 0 {
                    continue;
                }
                let (nx, ny) = (x + dx, y + dy);
                if nx < 0 || ny < 0 || nx >= width as i64 || ny >= height as i64 {
                    continue;
                }
                let j = ny as usize * width + nx as usize;
                if label[j] == 0 && mask[j] == foreground {
                    label[j] = next;
                    stack.push(j);
                }
            }
        }
        next += 1;
        let points = if foreground {
            row_extremes(
                pixels
                    .iter()
                    .map(|&i| ((i % width) as i64, (i / width) as i64)),
            )
        } else if !touches_edge {
            // The hole's border: the mask pixels 4-adjacent to it.
            let border = pixels.iter().flat_map(|&i| {
                let (x, y) = ((i % width) as i64, (i / width) as i64);
                NEIGHBOURS[..4].iter().map(move |(dx, dy)| (x + dx, y + dy))
            });
            row_extremes(border.filter(|&(x, y)| mask[y as usize * width + x as usize]))
        } else {
            continue;
        };
        found.push((start, points));
        if found.len() >= most {
            break;
        }
    }
    found.sort_by_key(|(start, _)| *start);
    found.into_iter().map(|(_, points)| points).collect()
}

/// 4-neighbours first, then the diagonals.
const NEIGHBOURS: [(i64, i64); 8] = [
    (1, 0),
    (-1, 0),
    (0, 1),
    (0, -1),
    (1, 1),
    (1, -1),
    (-1, 1),
    (-1, -1),
];

/// The leftmost and rightmost of `points` in each row (their convex hull is the set's).
fn row_extremes(points: impl Iterator<Item = (i64, i64)>) -> Vec<[i64; 2]> {
    let mut rows: std::collections::BTreeMap<i64, (i64, i64)> = Default::default();
    for (x, y) in points {
        let entry = rows.entry(y).or_insert((x, x));
        entry.0 = entry.0.min(x);
        entry.1 = entry.1.max(x);
    }
    rows.into_iter()
        .flat_map(|(y, (left, right))| [[left, y], [right, y]])
        .collect()
}

/// The mean probability inside `rect` as RapidOCR's `box_score_fast` reads it (the bounding box
/// clipped to the map, the corners truncated within it, the polygon filled edges included),
/// and the pixels of the bounding box read; `None` for a box that covers no pixel.
fn score(map: &Map, rect: &Rect) -> Option<(f64, usize)> {
    let (w, h) = (map.width as f64, map.height as f64);
    let xs = rect.corners.map(|c| c[0]);
    let ys = rect.corners.map(|c| c[1]);
    let clip = |v: f64, most: f64| v.clamp(0.0, most - 1.0);
    let x0 = clip(xs.iter().copied().fold(f64::MAX, f64::min).floor(), w);
    let x1 = clip(xs.iter().copied().fold(f64::MIN, f64::max).ceil(), w);
    let y0 = clip(ys.iter().copied().fold(f64::MAX, f64::min).floor(), h);
    let y1 = clip(ys.iter().copied().fold(f64::MIN, f64::max).ceil(), h);
    let corners = rect
        .corners
        .map(|[x, y]| [(x - x0).trunc(), (y - y0).trunc()]);
    let (cols, rows) = ((x1 - x0) as usize + 1, (y1 - y0) as usize + 1);
    let (mut sum, mut count) = (0.0f64, 0usize);
    for row in 0..rows {
        let Some((left, right)) = span(&corners, row as f64) else {
            continue;
        };
        let left = (left.round().max(0.0) as usize).min(cols - 1);
        let right = (right.round().max(0.0) as usize).min(cols - 1);
        let start = (y0 as usize + row) * map.width + x0 as usize;
        for &p in &map.values[start + left..=start + right] {
            sum += f64::from(p);
        }
        count += right + 1 - left;
    }
    (count > 0).then(|| (sum / count as f64, rows * cols))
}

/// Where the row `y` crosses the convex polygon `corners`: its leftmost and rightmost `x`.
fn span(corners: &[[f64; 2]; 4], y: f64) -> Option<(f64, f64)> {
    let mut range: Option<(f64, f64)> = None;
    let mut widen = |x: f64| {
        range = Some(range.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))));
    };
    for i in 0..4 {
        let (a, b) = (corners[i], corners[(i + 1) % 4]);
        if a[1] == b[1] {
            if a[1] == y {
                widen(a[0]);
                widen(b[0]);
            }
        } else if (a[1].min(b[1])..=a[1].max(b[1])).contains(&y) {
            widen(a[0] + (y - a[1]) * (b[0] - a[0]) / (b[1] - a[1]));
        }
    }
    range
}

/// `rect`'s corners in the photo: scaled, rounded half to even and clipped to it, ordered from
/// the top-left, clipped to its last pixel; `None` for a box 3 pixels or less across.
fn to_photo(rect: &Rect, map: &Map, (photo_w, photo_h): (u32, u32)) -> Option<[[i64; 2]; 4]> {
    let (pw, ph) = (f64::from(photo_w), f64::from(photo_h));
    let scaled = rect.corners.map(|[x, y]| {
        [
            (x / map.width as f64 * pw).round_ties_even().clamp(0.0, pw),
            (y / map.height as f64 * ph)
                .round_ties_even()
                .clamp(0.0, ph),
        ]
    });
    let ordered = geometry::clockwise(scaled).map(|[x, y]| {
        [
            x.min(pw - 1.0).max(0.0) as i64,
            y.min(ph - 1.0).max(0.0) as i64,
        ]
    });
    let length =
        |a: [i64; 2], b: [i64; 2]| (((a[0] - b[0]).pow(2) + (a[1] - b[1]).pow(2)) as f64).sqrt();
    let wide = length(ordered[0], ordered[1]).trunc();
    let tall = length(ordered[0], ordered[3]).trunc();
    (wide > 3.0 && tall > 3.0).then_some(ordered)
}

/// Top to bottom by the top-left corner, then left to right among boxes whose tops are within
/// 10 pixels of each other (RapidOCR's `sorted_boxes`).
fn sort(boxes: &mut [TextBox]) {
    boxes.sort_by_key(|b| (b.corners[0][1], b.corners[0][0]));
    for i in 0..boxes.len().saturating_sub(1) {
        for j in (0..=i).rev() {
            let (upper, lower) = (boxes[j].corners[0], boxes[j + 1].corners[0]);
            if (lower[1] - upper[1]).abs() < 10 && lower[0] < upper[0] {
                boxes.swap(j, j + 1);
            } else {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map of `w`×`h` with `value` inside each of `rects` (`x0, y0, x1, y1`, exclusive ends).
    fn map_with(w: usize, h: usize, rects: &[(usize, usize, usize, usize, f32)]) -> Vec<f32> {
        let mut values = vec![0.0; w * h];
        for &(x0, y0, x1, y1, value) in rects {
            for y in y0..y1 {
                values[y * w + x0..y * w + x1].fill(value);
            }
        }
        values
    }

    /// Boxes and scores as RapidOCR 1.4.4's `DBPostProcess(0.3, 0.5, 1000, 1.6, "fast", True)`
    /// and `TextDetector.filter_tag_det_res` give them for the same maps (read off its Python).
    #[test]
    fn two_lines_become_two_boxes_in_reading_order() {
        let values = map_with(100, 60, &[(10, 30, 90, 40, 0.9), (10, 10, 60, 20, 0.8)]);
        let map = Map {
            values: &values,
            width: 100,
            height: 60,
        };
        let found = boxes(&map, (200, 120), &Settings::default());
        let corners: Vec<_> = found.iter().map(|b| b.corners).collect();
        // Python: [[6, 6], [134, 6], [134, 54], [6, 54]] and [[6, 46], [194, 46], [194, 94],
        // [6, 94]], then clipped to the last pixel.
        assert_eq!(
            corners,
            [
                [[6, 6], [134, 6], [134, 54], [6, 54]],
                [[6, 46], [194, 46], [194, 94], [6, 94]]
            ]
        );
        assert!((found[0].score - 0.713_012_488_343_073_8).abs() < 1e-9);
        assert!((found[1].score - 0.808_080_786_673_977_2).abs() < 1e-9);
    }

    #[test]
    fn faint_small_and_empty_maps_give_nothing() {
        let faint = map_with(50, 50, &[(5, 5, 45, 15, 0.4)]);
        let speck = map_with(50, 50, &[(5, 5, 7, 7, 0.99)]);
        for values in [faint, speck, vec![0.0; 2500], vec![1.0; 2500]] {
            let map = Map {
                values: &values,
                width: 50,
                height: 50,
            };
            let found = boxes(&map, (50, 50), &Settings::default());
            // A full map is one box: the whole photo.
            assert!(found.len() <= 1, "{found:?}");
            if let Some(b) = found.first() {
                assert_eq!(b.corners, [[0, 0], [49, 0], [49, 49], [0, 49]]);
            }
        }
    }

    /// A broken model's NaN or infinite probabilities make no box and no NaN in the answer.
    #[test]
    fn nan_and_infinite_maps_make_no_boxes() {
        for value in [f32::NAN, f32::INFINITY] {
            let mut values = map_with(50, 50, &[(5, 5, 45, 15, 0.9)]);
            values[10 * 50 + 20] = value;
            let map = Map {
                values: &values,
                width: 50,
                height: 50,
            };
            let found = boxes(&map, (50, 50), &Settings::default());
            assert!(found.iter().all(|b| b.score.is_finite()), "{found:?}");
        }
    }

    #[test]
    fn a_hole_is_a_candidate_of_its_own() {
        // A ring: region and hole both make contours, as findContours(RETR_LIST) gives them.
        let mut values = map_with(40, 40, &[(5, 5, 35, 35, 0.9)]);
        for y in 12..28 {
            values[y * 40 + 12..y * 40 + 28].fill(0.0);
        }
        let mask = mask(
            &Map {
                values: &values,
                width: 40,
                height: 40,
            },
            &Settings::default(),
        );
        assert_eq!(candidates(&mask, 40, 40, 1000).len(), 2);
        assert_eq!(candidates(&mask, 40, 40, 1).len(), 1);
        // The hole's mean is under box_thresh; the ring's box is the whole photo (Python:
        // [[0, 0], [40, 0], [40, 40], [0, 40]] at 0.6031217322017103, clipped to 39).
        let map = Map {
            values: &values,
            width: 40,
            height: 40,
        };
        let found = boxes(&map, (40, 40), &Settings::default());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].corners, [[0, 0], [39, 0], [39, 39], [0, 39]]);
        assert!((found[0].score - 0.603_121_732_201_710_3).abs() < 1e-9);
    }
}
