//! Plane geometry for boxes: convex hulls, minimum-area rotated rectangles (OpenCV's
//! `minAreaRect`, by rotating calipers), polygon area and perimeter, and the corner order
//! PaddleOCR's post-processing gives a box.

/// A point in pixels: `[x, y]`.
pub type Point = [f64; 2];

/// The convex hull of `points` (Andrew's monotone chain), counter-clockwise in image
/// coordinates, without repeated or collinear points. Time `O(n log n)`.
pub fn convex_hull(mut points: Vec<[i64; 2]>) -> Vec<[i64; 2]> {
    points.sort_unstable();
    points.dedup();
    if points.len() < 3 {
        return points;
    }
    let cross = |o: [i64; 2], a: [i64; 2], b: [i64; 2]| {
        (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])
    };
    let mut hull: Vec<[i64; 2]> = Vec::with_capacity(points.len() + 1);
    for pass in 0..2 {
        let start = hull.len();
        let ordered: Box<dyn Iterator<Item = &[i64; 2]>> = if pass == 0 {
            Box::new(points.iter())
        } else {
            Box::new(points.iter().rev())
        };
        for &point in ordered {
            while hull.len() >= start + 2
                && cross(hull[hull.len() - 2], hull[hull.len() - 1], point) <= 0
            {
                hull.pop();
            }
            hull.push(point);
        }
        // The last point of each chain is the first of the next.
        hull.pop();
    }
    hull
}

/// A rotated rectangle: its corners in polygon order and its two side lengths.
#[derive(Debug, Clone, PartialEq)]
pub struct Rect {
    /// The four corners, each adjacent to the next.
    pub corners: [Point; 4],
    /// The length of the side from corner 0 to corner 1.
    pub width: f64,
    /// The length of the side from corner 1 to corner 2.
    pub height: f64,
}

impl Rect {
    /// The shorter side.
    pub fn short_side(&self) -> f64 {
        self.width.min(self.height)
    }

    /// The rectangle grown by `distance` on every side (what offsetting it with round joins
    /// and taking the result's minimum-area rectangle gives).
    pub fn grown(&self, distance: f64) -> Rect {
        let [a, b, _, d] = self.corners;
        let unit = |from: Point, to: Point, length: f64| {
            if length > 0.0 {
                [(to[0] - from[0]) / length, (to[1] - from[1]) / length]
            } else {
                [0.0, 0.0]
            }
        };
        let mut along = unit(a, b, self.width);
        let mut across = unit(a, d, self.height);
        // A degenerate side takes the direction perpendicular to the other.
        if self.width == 0.0 && self.height == 0.0 {
            (along, across) = ([1.0, 0.0], [0.0, 1.0]);
        } else if self.width == 0.0 {
            along = [-across[1], across[0]];
        } else if self.height == 0.0 {
            across = [-along[1], along[0]];
        }
        let origin = [
            a[0] - distance * (along[0] + across[0]),
            a[1] - distance * (along[1] + across[1]),
        ];
        let (width, height) = (self.width + 2.0 * distance, self.height + 2.0 * distance);
        let at = |s: f64, t: f64| {
            [
                origin[0] + s * along[0] + t * across[0],
                origin[1] + s * along[1] + t * across[1],
            ]
        };
        Rect {
            corners: [
                at(0.0, 0.0),
                at(width, 0.0),
                at(width, height),
                at(0.0, height),
            ],
            width,
            height,
        }
    }
}

/// The rectangle of least area that holds `hull` (a convex polygon, as [`convex_hull`] gives
/// it): one of its sides lies on an edge of the hull. Time `O(n²)` in the hull's vertices,
/// which for pixel coordinates within a side `L` are `O(L^(2/3))`.
pub fn min_area_rect(hull: &[[i64; 2]]) -> Rect {
    let points: Vec<Point> = hull.iter().map(|p| [p[0] as f64, p[1] as f64]).collect();
    match points.len() {
        0 => {
            return Rect {
                corners: [[0.0; 2]; 4],
                width: 0.0,
                height: 0.0,
            };
        }
        1 => {
            return Rect {
                corners: [points[0]; 4],
                width: 0.0,
                height: 0.0,
            };
        }
        _ => {}
    }
    let mut best: Option<(f64, Rect)> = None;
    for i in 0..points.len() {
        let (p, q) = (points[i], points[(i + 1) % points.len()]);
        let length = ((q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2)).sqrt();
        if length == 0.0 {
            continue;
        }
        let u = [(q[0] - p[0]) / length, (q[1] - p[1]) / length];
        let n = [-u[1], u[0]];
        let (mut s0, mut s1, mut t0, mut t1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for point in &points {
            let s = point[0] * u[0] + point[1] * u[1];
            let t = point[0] * n[0] + point[1] * n[1];
            (s0, s1, t0, t1) = (s0.min(s), s1.max(s), t0.min(t), t1.max(t));
        }
        let area = (s1 - s0) * (t1 - t0);
        if best.as_ref().is_none_or(|(a, _)| area < *a - 1e-9) {
            let at = |s: f64, t: f64| [s * u[0] + t * n[0], s * u[1] + t * n[1]];
            let rect = Rect {
                corners: [at(s0, t0), at(s1, t0), at(s1, t1), at(s0, t1)],
                width: s1 - s0,
                height: t1 - t0,
            };
            best = Some((area, rect));
        }
    }
    best.map(|(_, rect)| rect)
        .expect("two distinct points make an edge")
}

/// The area and perimeter of the polygon `corners` (shoelace formula).
pub fn area_and_perimeter(corners: &[Point]) -> (f64, f64) {
    let mut twice_area = 0.0;
    let mut perimeter = 0.0;
    for (i, p) in corners.iter().enumerate() {
        let q = corners[(i + 1) % corners.len()];
        twice_area += p[0] * q[1] - q[0] * p[1];
        perimeter += ((q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2)).sqrt();
    }
    (twice_area.abs() / 2.0, perimeter)
}

/// `corners` as top-left, top-right, bottom-right, bottom-left, as PaddleOCR orders a box
/// (imutils' `order_points`): the two leftmost by `x` are the left side, the upper of them
/// first.
pub fn clockwise<T: Copy + PartialOrd>(corners: [[T; 2]; 4]) -> [[T; 2]; 4] {
    let mut by_x = corners;
    by_x.sort_by(|a, b| a[0].partial_cmp(&b[0]).unwrap_or(std::cmp::Ordering::Equal));
    let by_y = |a: [T; 2], b: [T; 2]| if b[1] < a[1] { (b, a) } else { (a, b) };
    let (top_left, bottom_left) = by_y(by_x[0], by_x[1]);
    let (top_right, bottom_right) = by_y(by_x[2], by_x[3]);
    [top_left, top_right, bottom_right, bottom_left]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hull_drops_inner_and_collinear_points() {
        let hull = convex_hull(vec![[0, 0], [2, 0], [4, 0], [4, 3], [0, 3], [2, 1], [0, 0]]);
        assert_eq!(hull, [[0, 0], [4, 0], [4, 3], [0, 3]]);
        assert_eq!(convex_hull(vec![[1, 1], [1, 1]]), [[1, 1]]);
    }

    #[test]
    fn axis_aligned_and_rotated_rectangles() {
        let rect = min_area_rect(&convex_hull(vec![[10, 5], [30, 5], [30, 9], [10, 9]]));
        assert_eq!(
            (rect.width.max(rect.height), rect.short_side()),
            (20.0, 4.0)
        );
        // A 45° bar: its rectangle follows it, not the axes.
        let bar: Vec<[i64; 2]> = (0..20).flat_map(|i| [[i, i], [i + 1, i]]).collect();
        let rect = min_area_rect(&convex_hull(bar));
        let (area, _) = area_and_perimeter(&rect.corners);
        assert!(area < 20.0, "{rect:?}");
        let grown = rect.grown(2.0);
        assert!((grown.width - rect.width - 4.0).abs() < 1e-9);
        assert!((grown.height - rect.height - 4.0).abs() < 1e-9);
    }

    #[test]
    fn corners_are_ordered_from_the_top_left() {
        let ordered = clockwise([[10, 9], [30, 5], [10, 5], [30, 9]]);
        assert_eq!(ordered, [[10, 5], [30, 5], [30, 9], [10, 9]]);
        assert_eq!(
            area_and_perimeter(&[[0.0, 0.0], [4.0, 0.0], [4.0, 3.0], [0.0, 3.0]]),
            (12.0, 14.0)
        );
    }
}
