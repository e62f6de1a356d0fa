//! What a case expects against what the plugin answered: the differences, each naming where it
//! is (`inputs[0].data[3]: expected 2088, got 2089`), at most [`super::MAX_REPORTED`].

use serde::Deserialize;
use serde_json::Value;

/// How near a number must be to the one a case expects: `|got - expected| <= absolute +
/// relative * |expected|`, numpy's `isclose` (whose defaults these are). Integers on both sides
/// compare exactly.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    /// The absolute part.
    #[serde(default = "default_absolute")]
    pub absolute: f64,
    /// The part relative to the expected value.
    #[serde(default = "default_relative")]
    pub relative: f64,
}

fn default_absolute() -> f64 {
    1e-8
}

fn default_relative() -> f64 {
    1e-5
}

impl Default for Tolerance {
    fn default() -> Tolerance {
        Tolerance {
            absolute: default_absolute(),
            relative: default_relative(),
        }
    }
}

impl Tolerance {
    /// Refuses a tolerance that is negative or not a number.
    pub fn check(&self) -> Result<(), String> {
        for (name, value) in [("absolute", self.absolute), ("relative", self.relative)] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(format!(
                    "tolerance {name} = {value}: give a number of zero or more"
                ));
            }
        }
        Ok(())
    }

    fn accepts(&self, got: f64, expected: f64) -> bool {
        (got - expected).abs() <= self.absolute + self.relative * expected.abs()
    }
}

/// The differences between what a case `expected` and what the plugin answered (`got`):
/// none when it matches. A key the case leaves out is not checked.
pub fn differences(expected: &Value, got: &Value, tolerance: Tolerance) -> Vec<String> {
    let mut found = Differences {
        list: Vec::new(),
        more: 0,
    };
    // A refusal where a success was expected says so once, with the plugin's message.
    let status = |v: &Value| v.get("status").and_then(Value::as_u64);
    if status(expected).is_none() && status(got).is_some_and(|s| s != 200) {
        let message = got.get("message").and_then(Value::as_str).unwrap_or("");
        return vec![format!(
            "expected an answer, the plugin refused it: {} {message}",
            status(got).unwrap_or_default()
        )];
    }
    walk("", expected, got, tolerance, &mut found);
    if found.more > 0 {
        found.list.push(format!("and {} more", found.more));
    }
    found.list
}

struct Differences {
    list: Vec<String>,
    more: usize,
}

impl Differences {
    fn add(&mut self, path: &str, why: String) {
        if self.list.len() < super::MAX_REPORTED {
            let at = if path.is_empty() { "the answer" } else { path };
            self.list.push(format!("{at}: {why}"));
        } else {
            self.more += 1;
        }
    }
}

fn walk(path: &str, expected: &Value, got: &Value, tolerance: Tolerance, found: &mut Differences) {
    match (expected, got) {
        (Value::Object(expected), Value::Object(got)) => {
            for (key, want) in expected {
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match got.get(key) {
                    Some(value) if key == "message" && want.is_string() => {
                        let (want, value) = (want.as_str().unwrap_or(""), value.as_str());
                        if !value.is_some_and(|v| v.contains(want)) {
                            found.add(
                                &at,
                                format!(
                                    "expected a message containing {}, got {}",
                                    shown(&Value::from(want)),
                                    shown(got.get(key).unwrap_or(&Value::Null))
                                ),
                            );
                        }
                    }
                    Some(value) => walk(&at, want, value, tolerance, found),
                    None => found.add(
                        &at,
                        format!("expected {}, the answer has none", shown(want)),
                    ),
                }
            }
        }
        (Value::Array(expected), Value::Array(got)) => {
            if expected.len() != got.len() {
                found.add(
                    path,
                    format!(
                        "expected {} items, got {}: {}",
                        expected.len(),
                        got.len(),
                        shown(&Value::Array(got.clone()))
                    ),
                );
                return;
            }
            for (index, (want, value)) in expected.iter().zip(got).enumerate() {
                walk(&format!("{path}[{index}]"), want, value, tolerance, found);
            }
        }
        (Value::Number(want), Value::Number(value)) => {
            let exact = match (want.as_i64(), value.as_i64(), want.as_u64(), value.as_u64()) {
                (Some(a), Some(b), _, _) => Some(a == b),
                (_, _, Some(a), Some(b)) => Some(a == b),
                _ if (want.is_f64() || value.is_f64()) => None,
                // One side past i64, the other negative.
                _ => Some(false),
            };
            let same = exact.unwrap_or_else(|| match (want.as_f64(), value.as_f64()) {
                (Some(want), Some(value)) => tolerance.accepts(value, want),
                _ => false,
            });
            if !same {
                found.add(path, format!("expected {want}, got {value}"));
            }
        }
        _ if expected == got => {}
        _ => found.add(
            path,
            format!("expected {}, got {}", shown(expected), shown(got)),
        ),
    }
}

/// A value as a difference shows it: its JSON, cut at 120 characters.
fn shown(value: &Value) -> String {
    const MAX: usize = 120;
    let text = value.to_string();
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn diff(expected: Value, got: Value) -> Vec<String> {
        differences(&expected, &got, Tolerance::default())
    }

    #[test]
    fn what_the_case_gives_is_checked_and_nothing_else() {
        let got = json!({"status": 200, "inputs": [{"name": "X", "datatype": "FP32", "shape": [2], "data": [0.1, 2]}], "outputs": []});
        assert!(
            diff(
                json!({"inputs": [{"name": "X", "data": [0.1, 2.0]}]}),
                got.clone()
            )
            .is_empty()
        );
        // FP32's 0.1 read back as a double is within the default tolerance.
        assert!(
            diff(
                json!({"inputs": [{"data": [0.100000001490116, 2]}]}),
                got.clone()
            )
            .is_empty()
        );
        assert_eq!(
            diff(json!({"inputs": [{"data": [0.2, 2]}]}), got.clone()),
            ["inputs[0].data[0]: expected 0.2, got 0.1"]
        );
        assert_eq!(
            diff(json!({"inputs": [{"shape": [1, 2]}]}), got.clone()),
            ["inputs[0].shape: expected 2 items, got 1: [2]"]
        );
        assert_eq!(
            diff(json!({"inputs": [{"datatype": "INT64"}]}), got.clone()),
            ["inputs[0].datatype: expected \"INT64\", got \"FP32\""]
        );
        assert_eq!(
            diff(json!({"json": {"a": 1}}), got),
            ["json: expected {\"a\":1}, the answer has none"]
        );
    }

    #[test]
    fn integers_match_exactly_and_floats_within_the_tolerance() {
        assert_eq!(diff(json!([1]), json!([2])).len(), 1);
        assert_eq!(diff(json!([u64::MAX]), json!([-1])).len(), 1);
        assert!(diff(json!([1.0]), json!([1])).is_empty());
        assert!(diff(json!([1000.0]), json!([1000.009])).is_empty());
        assert_eq!(diff(json!([1000.0]), json!([1000.02])).len(), 1);
        let strict = Tolerance {
            absolute: 0.0,
            relative: 0.0,
        };
        assert_eq!(
            differences(&json!([0.5]), &json!([0.5000001]), strict).len(),
            1
        );
        assert!(
            Tolerance {
                absolute: -1.0,
                relative: 0.0
            }
            .check()
            .is_err()
        );
        assert!(
            Tolerance {
                absolute: 0.0,
                relative: f64::NAN
            }
            .check()
            .is_err()
        );
    }

    #[test]
    fn refusals_are_named_and_messages_match_by_containing() {
        let refused = json!({"status": 400, "message": "row 2: not a number"});
        assert_eq!(
            diff(json!({"inputs": []}), refused.clone()),
            ["expected an answer, the plugin refused it: 400 row 2: not a number"]
        );
        assert!(
            diff(
                json!({"status": 400, "message": "not a number"}),
                refused.clone()
            )
            .is_empty()
        );
        assert_eq!(
            diff(json!({"status": 415}), refused.clone()),
            ["status: expected 415, got 400"]
        );
        assert_eq!(diff(json!({"message": "a date"}), refused).len(), 1);
    }

    #[test]
    fn the_report_is_bounded() {
        let expected = Value::from((0..100).collect::<Vec<i32>>());
        let got = Value::from((1..101).collect::<Vec<i32>>());
        let found = diff(expected, got);
        assert_eq!(found.len(), super::super::MAX_REPORTED + 1);
        assert_eq!(found.last().unwrap(), "and 95 more");
        let long = diff(json!("a"), Value::from("b".repeat(1000)));
        assert!(long[0].len() < 200, "{}", long[0]);
    }
}
