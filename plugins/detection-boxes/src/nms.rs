//! A YOLO detector's raw output to boxes, as ultralytics' `non_max_suppression` and
//! `scale_boxes` make them: candidates over the confidence threshold, non-maximum suppression
//! per class (or across classes), at most `max_detections` kept, and each box mapped from the
//! letterboxed input back onto the photo.

/// How the output lays out its candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// ultralytics' YOLOv8 and later: `[1, 4 + classes, candidates]`, each candidate's centre x,
    /// centre y, width and height in input pixels, then one score per class.
    Yolov8,
    /// YOLOv5 and YOLOv7: `[1, candidates, 5 + classes]`, the box, an objectness, then one
    /// probability per class (a class's score is their product).
    Yolov5,
}

/// What the post-processing keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The output's layout.
    pub format: Format,
    /// A candidate is kept when its best score is over this (ultralytics' `conf`, 0.25).
    pub confidence: f32,
    /// A box overlapping a better one of its class by more than this (intersection over union)
    /// is dropped (ultralytics' `iou`, 0.7).
    pub iou: f32,
    /// At most this many boxes an image (ultralytics' `max_det`, 300).
    pub max_detections: usize,
    /// Suppression across classes instead of within each (`agnostic_nms`).
    pub class_agnostic: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            format: Format::Yolov8,
            confidence: 0.25,
            iou: 0.7,
            max_detections: 300,
            class_agnostic: false,
        }
    }
}

/// At most this many candidates enter the suppression, the best first (ultralytics' `max_nms`):
/// its cost is quadratic in the candidates.
pub const MAX_CANDIDATES: usize = 30_000;

/// One detection: corners `[x1, y1, x2, y2]`, its score and class.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    /// Left, top, right, bottom.
    pub corners: [f32; 4],
    /// The class's score.
    pub score: f32,
    /// The class's index.
    pub class: usize,
}

/// The raw output: its values (row-major) and its two last dimensions.
pub struct Output<'a> {
    /// The values, `rows × columns`.
    pub values: &'a [f32],
    /// The output's second-to-last dimension.
    pub rows: usize,
    /// Its last dimension.
    pub columns: usize,
}

impl Output<'_> {
    /// How many classes and candidates the output holds in `format`, or why it cannot.
    pub fn counts(&self, format: Format) -> Result<(usize, usize), String> {
        let (features, candidates) = match format {
            Format::Yolov8 => (self.rows, self.columns),
            Format::Yolov5 => (self.columns, self.rows),
        };
        let head = match format {
            Format::Yolov8 => 4,
            Format::Yolov5 => 5,
        };
        if features <= head {
            return Err(format!(
                "the output is [{}, {}]: a {format:?} output has {head} box values and at least \
                 one class per candidate",
                self.rows, self.columns
            ));
        }
        Ok((features - head, candidates))
    }

    fn get(&self, format: Format, feature: usize, candidate: usize) -> f32 {
        match format {
            Format::Yolov8 => self.values[feature * self.columns + candidate],
            Format::Yolov5 => self.values[candidate * self.columns + feature],
        }
    }
}

/// The detections in `output`, in the input's pixels, best first.
pub fn detect(output: &Output, settings: &Settings) -> Result<Vec<Detection>, String> {
    let format = settings.format;
    let (classes, count) = output.counts(format)?;
    if output.values.len() != output.rows * output.columns {
        return Err("the output's values do not fill its shape".into());
    }
    let mut candidates: Vec<Detection> = Vec::new();
    for candidate in 0..count {
        let at = |feature: usize| output.get(format, feature, candidate);
        let (objectness, first) = match format {
            Format::Yolov8 => (1.0, 4),
            Format::Yolov5 => (at(4), 5),
        };
        let (mut class, mut best) = (0, f32::NEG_INFINITY);
        for c in 0..classes {
            let score = at(first + c) * objectness;
            if score > best {
                (class, best) = (c, score);
            }
        }
        // NaN scores are never over the threshold.
        if best > settings.confidence {
            let (cx, cy, w, h) = (at(0), at(1), at(2), at(3));
            let corners = [cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0];
            if corners.iter().all(|v| v.is_finite()) {
                candidates.push(Detection {
                    corners,
                    score: best,
                    class,
                });
            }
        }
    }
    // Best first; equal scores keep the output's order (a stable sort), as torch's does.
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
    candidates.truncate(MAX_CANDIDATES);
    let mut kept: Vec<Detection> = Vec::new();
    for candidate in candidates {
        if kept.len() == settings.max_detections {
            break;
        }
        let suppressed = kept.iter().any(|k| {
            (settings.class_agnostic || k.class == candidate.class)
                && iou(&k.corners, &candidate.corners) > settings.iou
        });
        if !suppressed {
            kept.push(candidate);
        }
    }
    Ok(kept)
}

/// Intersection over union of two boxes (0 where either has no area).
pub fn iou(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    let area = |r: &[f32; 4]| (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0);
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = w * h;
    let union = area(a) + area(b) - inter;
    if union <= 0.0 { 0.0 } else { inter / union }
}

/// `detections` mapped from a letterbox of `input` (width, height) back onto a photo of
/// `photo` (width, height), as ultralytics' `scale_boxes` maps them (the letterbox's gain and
/// margins, each margin rounded as `LetterBox` rounds it), clipped to the photo. `up`: whether
/// the letterbox enlarged photos smaller than it (image-tensor's `letterbox_up`).
pub fn onto_photo(detections: &mut [Detection], input: (u32, u32), photo: (u32, u32), up: bool) {
    let (iw, ih) = (f64::from(input.0), f64::from(input.1));
    let (pw, ph) = (f64::from(photo.0), f64::from(photo.1));
    let mut gain = (ih / ph).min(iw / pw);
    if !up {
        gain = gain.min(1.0);
    }
    let pad_x = ((iw - pw * gain) / 2.0 - 0.1).round_ties_even();
    let pad_y = ((ih - ph * gain) / 2.0 - 0.1).round_ties_even();
    for detection in detections {
        let [x1, y1, x2, y2] = detection.corners.map(f64::from);
        let x = |v: f64| ((v - pad_x) / gain).clamp(0.0, pw) as f32;
        let y = |v: f64| ((v - pad_y) / gain).clamp(0.0, ph) as f32;
        detection.corners = [x(x1), y(y1), x(x2), y(y2)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A YOLOv8 output of `candidates` (box, class scores), laid out `[4 + classes, n]`.
    fn yolov8(candidates: &[([f32; 4], &[f32])]) -> (Vec<f32>, usize, usize) {
        let classes = candidates[0].1.len();
        let (rows, columns) = (4 + classes, candidates.len());
        let mut values = vec![0.0; rows * columns];
        for (i, (b, scores)) in candidates.iter().enumerate() {
            for (f, v) in b.iter().chain(scores.iter()).enumerate() {
                values[f * columns + i] = *v;
            }
        }
        (values, rows, columns)
    }

    #[test]
    fn overlapping_boxes_of_a_class_are_suppressed_and_other_classes_kept() {
        let (values, rows, columns) = yolov8(&[
            ([100.0, 100.0, 50.0, 50.0], &[0.9, 0.0]),
            ([102.0, 101.0, 50.0, 50.0], &[0.8, 0.0]), // same class, IoU ~0.9: dropped
            ([102.0, 101.0, 50.0, 50.0], &[0.0, 0.7]), // another class: kept
            ([300.0, 300.0, 20.0, 20.0], &[0.3, 0.0]), // far away: kept
            ([300.0, 300.0, 20.0, 20.0], &[0.2, 0.0]), // under the threshold
            ([f32::NAN, 1.0, 1.0, 1.0], &[0.99, 0.0]), // not a box
        ]);
        let output = Output {
            values: &values,
            rows,
            columns,
        };
        let found = detect(&output, &Settings::default()).unwrap();
        let summary: Vec<(usize, f32)> = found.iter().map(|d| (d.class, d.score)).collect();
        assert_eq!(summary, [(0, 0.9), (1, 0.7), (0, 0.3)]);
        assert_eq!(found[0].corners, [75.0, 75.0, 125.0, 125.0]);
        let agnostic = Settings {
            class_agnostic: true,
            ..Settings::default()
        };
        assert_eq!(detect(&output, &agnostic).unwrap().len(), 2);
        let one = Settings {
            max_detections: 1,
            ..Settings::default()
        };
        assert_eq!(detect(&output, &one).unwrap().len(), 1);
    }

    #[test]
    fn yolov5_scores_are_objectness_times_class() {
        // [n, 5 + classes]: box, objectness, classes.
        let values = [
            10.0, 10.0, 4.0, 4.0, 0.5, 0.9, 0.1, // 0.45 for class 0
            50.0, 50.0, 4.0, 4.0, 0.2, 0.9, 0.1, // 0.18: under 0.25
        ];
        let output = Output {
            values: &values,
            rows: 2,
            columns: 7,
        };
        let settings = Settings {
            format: Format::Yolov5,
            ..Settings::default()
        };
        let found = detect(&output, &settings).unwrap();
        assert_eq!(found.len(), 1);
        assert!((found[0].score - 0.45).abs() < 1e-6);
        let narrow = Output {
            values: &values[..10],
            rows: 2,
            columns: 5,
        };
        assert!(
            detect(&narrow, &settings)
                .unwrap_err()
                .contains("at least one class")
        );
    }

    /// ultralytics' `scale_boxes` on a 640x427 photo in a 320x320 letterbox: gain 0.5, rows
    /// padded by round((320 - 213.5) / 2 - 0.1) = 53.
    #[test]
    fn boxes_return_onto_the_photo() {
        let mut found = vec![Detection {
            corners: [0.0, 53.0, 320.0, 266.5],
            score: 1.0,
            class: 0,
        }];
        onto_photo(&mut found, (320, 320), (640, 427), true);
        assert_eq!(found[0].corners, [0.0, 0.0, 640.0, 427.0]);
        let mut outside = vec![Detection {
            corners: [-10.0, 0.0, 400.0, 10.0],
            score: 1.0,
            class: 0,
        }];
        onto_photo(&mut outside, (320, 320), (640, 427), true);
        assert_eq!(outside[0].corners, [0.0, 0.0, 640.0, 0.0]);
    }

    #[test]
    fn iou_of_boxes() {
        assert_eq!(iou(&[0.0, 0.0, 2.0, 2.0], &[1.0, 0.0, 3.0, 2.0]), 2.0 / 6.0);
        assert_eq!(iou(&[0.0, 0.0, 1.0, 1.0], &[2.0, 2.0, 3.0, 3.0]), 0.0);
        assert_eq!(iou(&[0.0, 0.0, 0.0, 0.0], &[0.0, 0.0, 0.0, 0.0]), 0.0);
    }
}
