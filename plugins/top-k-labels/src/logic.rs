//! What top-k-labels does, apart from the WIT bindings (tested on the host: `cargo test`).

use std::fmt::Write as _;

pub use class_labels::Labels;

/// The most labels one answer may carry.
pub const MAX_K: usize = 1000;

/// How the answer is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `[{"label": ..., "score": ...}, ...]` per row, as Hugging Face pipelines answer.
    Labels,
    /// `["score:index:label", ...]` per row, as Triton's classification extension answers.
    Triton,
}

impl Format {
    fn parse(text: &str) -> Result<Format, String> {
        match text {
            "labels" => Ok(Format::Labels),
            "triton" => Ok(Format::Triton),
            other => Err(format!("format '{other}' is not one of labels, triton")),
        }
    }
}

/// What turns the scores into the answer's scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// The scores as the model gives them.
    None,
    /// A softmax over each row's classes.
    Softmax,
    /// A sigmoid of each score (multi-label classifiers).
    Sigmoid,
}

impl Activation {
    /// Hugging Face's `function_to_apply` names.
    fn parse(text: &str) -> Result<Activation, String> {
        match text {
            "none" => Ok(Activation::None),
            "softmax" => Ok(Activation::Softmax),
            "sigmoid" => Ok(Activation::Sigmoid),
            other => Err(format!(
                "function_to_apply '{other}' is not one of softmax, sigmoid, none"
            )),
        }
    }
}

/// The plugin's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The scores output; `None`: the first.
    pub output: Option<String>,
    /// Labels per answer.
    pub k: usize,
    /// What the scores go through.
    pub activation: Activation,
    /// How answers are written.
    pub format: Format,
}

fn parse_k(text: &str, most: usize) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(k) if (1..=most).contains(&k) => Ok(k),
        _ => Err(format!(
            "k = '{text}': give a whole number from 1 to {most}"
        )),
    }
}

impl Settings {
    /// The settings `config` gives (each key optional).
    pub fn from_config(config: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
        let activation = match config("softmax").as_deref() {
            None | Some("false") => Activation::None,
            Some("true") => Activation::Softmax,
            Some(other) => return Err(format!("softmax = '{other}': give true or false")),
        };
        Ok(Settings {
            output: config("output").filter(|name| !name.is_empty()),
            k: config("k").map_or(Ok(5), |k| parse_k(&k, MAX_K))?,
            activation,
            format: config("format").map_or(Ok(Format::Labels), |f| Format::parse(&f))?,
        })
    }

    /// The settings for one request: `top_k` (at most the configured `k`) and `format` from its
    /// custom attributes (`key=value`, separated by `,` or `;`; other attributes are ignored),
    /// then `top_k` and `function_to_apply` from its body's Hugging Face `parameters`
    /// ([`body_parameters`]; other parameters are the request adapter's).
    pub fn for_request(
        &self,
        attributes: Option<&str>,
        parameters: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<Settings, String> {
        let mut settings = self.attributes(attributes)?;
        let Some(parameters) = parameters else {
            return Ok(settings);
        };
        if let Some(k) = parameters.get("top_k").filter(|k| !k.is_null()) {
            settings.k = k
                .as_u64()
                .and_then(|k| usize::try_from(k).ok())
                .filter(|k| (1..=self.k).contains(k))
                .ok_or_else(|| {
                    format!(
                        "parameters.top_k = {k}: give a whole number from 1 to {}",
                        self.k
                    )
                })?;
        }
        if let Some(function) = parameters.get("function_to_apply").filter(|f| !f.is_null()) {
            settings.activation = function
                .as_str()
                .ok_or_else(|| format!("parameters.function_to_apply = {function}: give a name"))
                .and_then(Activation::parse)
                .map_err(|e| format!("parameters: {e}"))?;
        }
        Ok(settings)
    }

    fn attributes(&self, attributes: Option<&str>) -> Result<Settings, String> {
        let mut settings = self.clone();
        for pair in attributes.unwrap_or("").split([',', ';']) {
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            match key.trim() {
                "top_k" => {
                    settings.k = parse_k(value, self.k)
                        .map_err(|e| format!("custom attribute top_k: {e}"))?
                }
                "format" => {
                    settings.format =
                        Format::parse(value.trim()).map_err(|e| format!("custom attribute {e}"))?
                }
                _ => {}
            }
        }
        Ok(settings)
    }
}

/// Whether a model's scores output `name`, shaped `shape` as its metadata states it (`-1` for
/// a variable dimension; the first is the batch when there are two or more), has as many
/// classes as `labels` names; a count the metadata leaves variable is checked per request.
pub fn check_classes(name: &str, shape: &[i64], labels: &Labels) -> Result<(), String> {
    let classes = match shape {
        [] => return Err(format!("output '{name}' is a scalar, not scores")),
        [classes] => Some(*classes),
        [_, rest @ ..] => rest.iter().try_fold(1i64, |n, d| (*d >= 0).then(|| n * d)),
    };
    match (classes, labels) {
        (Some(classes), Labels::Names(names))
            if classes >= 0 && classes as usize != names.len() =>
        {
            Err(format!(
                "output '{name}' gives {classes} classes and the labels asset names {}",
                names.len()
            ))
        }
        _ => Ok(()),
    }
}

/// The element type of a scores tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Kind {
    U8,
    U16,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F16,
    Bf16,
    F32,
    F64,
}

impl Kind {
    fn size(self) -> usize {
        match self {
            Kind::U8 | Kind::I8 => 1,
            Kind::U16 | Kind::I16 | Kind::F16 | Kind::Bf16 => 2,
            Kind::U32 | Kind::I32 | Kind::F32 => 4,
            Kind::U64 | Kind::I64 | Kind::F64 => 8,
        }
    }

    fn read(self, bytes: &[u8]) -> f64 {
        let array = |n: usize| -> [u8; 8] {
            let mut out = [0u8; 8];
            out[..n].copy_from_slice(&bytes[..n]);
            out
        };
        let b = array(self.size());
        match self {
            Kind::U8 => f64::from(b[0]),
            Kind::I8 => f64::from(b[0] as i8),
            Kind::U16 => f64::from(u16::from_le_bytes([b[0], b[1]])),
            Kind::I16 => f64::from(i16::from_le_bytes([b[0], b[1]])),
            Kind::U32 => f64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Kind::I32 => f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Kind::U64 => u64::from_le_bytes(b) as f64,
            Kind::I64 => i64::from_le_bytes(b) as f64,
            Kind::F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            Kind::F64 => f64::from_le_bytes(b),
            Kind::Bf16 => f64::from(f32::from_bits(
                u32::from(u16::from_le_bytes([b[0], b[1]])) << 16,
            )),
            Kind::F16 => half_to_f64(u16::from_le_bytes([b[0], b[1]])),
        }
    }
}

/// An IEEE 754 half-precision number's value.
fn half_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let fraction = f64::from(bits & 0x3ff);
    sign * match exponent {
        0 => fraction * 2f64.powi(-24),
        31 if fraction == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1.0 + fraction / 1024.0) * 2f64.powi(exponent - 15),
    }
}

/// A scores tensor: `rows` rows of `classes` scores.
#[derive(Debug)]
pub struct Scores<'a> {
    kind: Kind,
    data: &'a [u8],
    /// Rows (the first dimension of a tensor of rank 2 or more; 1 for rank 1).
    pub rows: usize,
    /// Scores per row.
    pub classes: usize,
}

impl<'a> Scores<'a> {
    /// The tensor `name`, checked: rank at least 1, data exactly its shape.
    pub fn new(
        name: &str,
        kind: Kind,
        shape: &[i64],
        data: &'a [u8],
    ) -> Result<Scores<'a>, String> {
        let dims: Vec<usize> = shape
            .iter()
            .map(|&d| usize::try_from(d).unwrap_or(0))
            .collect();
        let (rows, classes) = match dims.as_slice() {
            [] => return Err(format!("output '{name}' is a scalar, not scores")),
            [classes] => (1, *classes),
            [rows, rest @ ..] => (
                *rows,
                rest.iter()
                    .try_fold(1usize, |n, d| n.checked_mul(*d))
                    .unwrap_or(0),
            ),
        };
        if classes == 0 {
            return Err(format!("output '{name}' has no classes (shape {shape:?})"));
        }
        let expected = rows
            .checked_mul(classes)
            .and_then(|n| n.checked_mul(kind.size()));
        if expected != Some(data.len()) {
            return Err(format!(
                "output '{name}' holds {} bytes, not what its shape {shape:?} says",
                data.len()
            ));
        }
        Ok(Scores {
            kind,
            data,
            rows,
            classes,
        })
    }

    fn row(&self, row: usize) -> Vec<f64> {
        let size = self.kind.size();
        let start = row * self.classes * size;
        self.data[start..start + self.classes * size]
            .chunks_exact(size)
            .map(|c| self.kind.read(c))
            .collect()
    }
}

/// The `parameters` object of a JSON request body, as Hugging Face's inference toolkit's clients
/// send it (`{"inputs": ..., "parameters": {"top_k": 3}}`), read without building the rest of
/// the body (an image's base64 is skipped, not copied): `None` for a body that is not a JSON
/// object or has no `parameters` object.
pub fn body_parameters(body: &[u8]) -> Option<serde_json::Map<String, serde_json::Value>> {
    use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
    struct Parameters;
    impl<'de> Visitor<'de> for Parameters {
        type Value = Option<serde_json::Map<String, serde_json::Value>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == "parameters" && found.is_none() {
                    if let serde_json::Value::Object(object) = map.next_value()? {
                        found = Some(object);
                    }
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(found)
        }
    }
    let start = body.iter().position(|b| !b.is_ascii_whitespace())?;
    if body[start] != b'{' {
        return None;
    }
    let mut reader = serde_json::Deserializer::from_slice(body);
    reader.deserialize_map(Parameters).ok().flatten()
}

/// `scores` through a sigmoid.
pub fn sigmoid(scores: &mut [f64]) {
    for score in scores.iter_mut() {
        *score = 1.0 / (1.0 + (-*score).exp());
    }
}

/// `scores` through a softmax (numerically stable: the largest is subtracted first).
pub fn softmax(scores: &mut [f64]) {
    let max = scores
        .iter()
        .copied()
        .filter(|s| !s.is_nan())
        .fold(f64::NEG_INFINITY, f64::max);
    let mut sum = 0.0;
    for score in scores.iter_mut() {
        *score = (*score - max).exp();
        sum += *score;
    }
    for score in scores.iter_mut() {
        *score /= sum;
    }
}

/// The indices of the `k` highest scores, highest first (ties: the lower index first; NaN last).
pub fn top_k(scores: &[f64], k: usize) -> Vec<usize> {
    let order = |a: &usize, b: &usize| {
        let (x, y) = (scores[*a], scores[*b]);
        match (x.is_nan(), y.is_nan()) {
            (false, false) => y.total_cmp(&x).then(a.cmp(b)),
            (nan_x, nan_y) => nan_x.cmp(&nan_y).then(a.cmp(b)),
        }
    };
    let mut indices: Vec<usize> = (0..scores.len()).collect();
    let k = k.min(indices.len());
    if k < indices.len() {
        indices.select_nth_unstable_by(k, order);
        indices.truncate(k);
    }
    indices.sort_by(order);
    indices
}

fn write_score(out: &mut String, score: f64) {
    let score = score as f32;
    if score.is_finite() {
        let _ = write!(out, "{score}");
    } else {
        out.push_str("null");
    }
}

/// The JSON answer for `scores` under `settings`: one row's answer, or a list of each row's.
pub fn answer(
    scores: &Scores<'_>,
    labels: &Labels,
    settings: &Settings,
) -> Result<Vec<u8>, String> {
    if let Labels::Names(names) = labels
        && names.len() != scores.classes
    {
        return Err(format!(
            "the model gives {} classes and the labels asset names {}",
            scores.classes,
            names.len()
        ));
    }
    let mut out = String::new();
    if scores.rows != 1 {
        out.push('[');
    }
    for row in 0..scores.rows {
        if row > 0 {
            out.push(',');
        }
        let mut values = scores.row(row);
        match settings.activation {
            Activation::None => {}
            Activation::Softmax => softmax(&mut values),
            Activation::Sigmoid => sigmoid(&mut values),
        }
        out.push('[');
        for (rank, index) in top_k(&values, settings.k).into_iter().enumerate() {
            if rank > 0 {
                out.push(',');
            }
            let label = serde_json::Value::String(labels.name(index)).to_string();
            match settings.format {
                Format::Labels => {
                    let _ = write!(out, "{{\"label\":{label},\"score\":");
                    write_score(&mut out, values[index]);
                    out.push('}');
                }
                Format::Triton => {
                    let mut text = String::new();
                    write_score(&mut text, values[index]);
                    let text = format!("{text}:{index}:{}", labels.name(index));
                    out.push_str(&serde_json::Value::String(text).to_string());
                }
            }
        }
        out.push(']');
    }
    if scores.rows != 1 {
        out.push(']');
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn settings(k: usize, softmax: bool, format: Format) -> Settings {
        Settings {
            output: None,
            k,
            activation: if softmax {
                Activation::Softmax
            } else {
                Activation::None
            },
            format,
        }
    }

    /// `parameters` read from JSON bodies only, past any other field; a request's `top_k` and
    /// `function_to_apply` over the configuration, refused by name when out of range.
    #[test]
    fn hugging_face_parameters_in_the_body() {
        let body = br#" {"inputs": ["a long text", "another"], "parameters": {"top_k": 2, "function_to_apply": "sigmoid", "truncation": true}}"#;
        let parameters = body_parameters(body).unwrap();
        assert_eq!(parameters["top_k"], 2);
        assert_eq!(body_parameters(b"\xff\xd8\xff\xe0 a JPEG"), None);
        assert_eq!(body_parameters(br#"{"inputs": "x"}"#), None);
        assert_eq!(
            body_parameters(br#"{"inputs": "x", "parameters": 3}"#),
            None
        );
        assert_eq!(body_parameters(b"{\"inputs\": [1, 2"), None);
        let configured = settings(5, false, Format::Labels);
        let request = configured
            .for_request(Some("top_k=4"), Some(&parameters))
            .unwrap();
        assert_eq!((request.k, request.activation), (2, Activation::Sigmoid));
        for (json, says) in [
            (
                r#"{"top_k": 6}"#,
                "parameters.top_k = 6: give a whole number from 1 to 5",
            ),
            (r#"{"top_k": 0}"#, "parameters.top_k = 0"),
            (r#"{"top_k": "2"}"#, "parameters.top_k = \"2\""),
            (
                r#"{"function_to_apply": "relu"}"#,
                "function_to_apply 'relu' is not one of",
            ),
        ] {
            let parameters: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(json).unwrap();
            let error = configured.for_request(None, Some(&parameters)).unwrap_err();
            assert!(error.contains(says), "{json}: {error}");
        }
        let data = f32s(&[0.0, 2.0]);
        let scores = Scores::new("out", Kind::F32, &[1, 2], &data).unwrap();
        let answer = answer(&scores, &Labels::Indices, &request).unwrap();
        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        let sigmoid_of_2 = 1.0 / (1.0 + (-2.0f64).exp());
        assert!((answer[0]["score"].as_f64().unwrap() - sigmoid_of_2).abs() < 1e-6);
        assert!((answer[1]["score"].as_f64().unwrap() - 0.5).abs() < 1e-6);
    }

    #[test]
    fn top_k_with_softmax_in_both_formats() {
        let data = f32s(&[1.0, 3.0, 2.0, 3.0]);
        let scores = Scores::new("out", Kind::F32, &[1, 4], &data).unwrap();
        let labels = Labels::Names(vec!["a".into(), "b".into(), "c".into(), "d".into()]);
        let plain = answer(&scores, &labels, &settings(2, false, Format::Labels)).unwrap();
        assert_eq!(
            String::from_utf8(plain).unwrap(),
            r#"[{"label":"b","score":3},{"label":"d","score":3}]"#
        );
        let soft = answer(&scores, &labels, &settings(4, true, Format::Labels)).unwrap();
        let soft: serde_json::Value = serde_json::from_slice(&soft).unwrap();
        let total: f64 = soft
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["score"].as_f64().unwrap())
            .sum();
        assert!((total - 1.0).abs() < 1e-6, "{soft}");
        let triton = answer(&scores, &labels, &settings(1, false, Format::Triton)).unwrap();
        assert_eq!(String::from_utf8(triton).unwrap(), r#"["3:1:b"]"#);
    }

    #[test]
    fn a_batch_answers_a_list_per_row_and_mismatched_labels_are_refused() {
        let data = f32s(&[0.0, 1.0, 1.0, 0.0]);
        let scores = Scores::new("out", Kind::F32, &[2, 2], &data).unwrap();
        let body = answer(
            &scores,
            &Labels::Indices,
            &settings(1, false, Format::Labels),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"[[{"label":"1","score":1}],[{"label":"0","score":1}]]"#
        );
        let three = Labels::Names(vec!["a".into(), "b".into(), "c".into()]);
        assert!(
            answer(&scores, &three, &settings(1, false, Format::Labels))
                .unwrap_err()
                .contains("2 classes")
        );
        assert!(
            Scores::new("out", Kind::F32, &[2, 3], &data)
                .unwrap_err()
                .contains("not what its shape")
        );
    }

    #[test]
    fn nan_sorts_last_and_is_written_null_and_half_floats_read() {
        let scores = [f64::NAN, 0.5, 0.25];
        assert_eq!(top_k(&scores, 3), vec![1, 2, 0]);
        assert_eq!(half_to_f64(0x3c00), 1.0);
        assert_eq!(half_to_f64(0xc000), -2.0);
        let data: Vec<u8> = [0x3c00u16, 0x7e00]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let scores = Scores::new("out", Kind::F16, &[2], &data).unwrap();
        let body = answer(
            &scores,
            &Labels::Indices,
            &settings(2, false, Format::Labels),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"[{"label":"0","score":1},{"label":"1","score":null}]"#
        );
    }

    #[test]
    fn a_model_with_another_class_count_is_refused_at_load() {
        let labels = Labels::Names(vec!["a".into(), "b".into()]);
        assert!(check_classes("out", &[-1, 2], &labels).is_ok());
        assert!(check_classes("out", &[2], &labels).is_ok());
        assert!(check_classes("out", &[-1, -1], &labels).is_ok());
        assert!(
            check_classes("out", &[-1, 3], &labels)
                .unwrap_err()
                .contains("3 classes")
        );
        assert!(check_classes("out", &[-1, 3], &Labels::Indices).is_ok());
    }

    #[test]
    fn requests_may_lower_k_and_pick_the_format() {
        let base = settings(5, false, Format::Labels);
        let request = base
            .for_request(Some("top_k=2; format=triton, other=x"), None)
            .unwrap();
        assert_eq!((request.k, request.format), (2, Format::Triton));
        assert!(
            base.for_request(Some("top_k=6"), None)
                .unwrap_err()
                .contains("1 to 5")
        );
        assert!(base.for_request(Some("format=xml"), None).is_err());
        assert_eq!(base.for_request(None, None).unwrap(), base);
    }
}
