//! The class names a classifier's or a detector's answer carries: the `labels` asset of
//! top-k-labels and detection-boxes (a library both link; no component of its own).

/// The names of the classes.
#[derive(Debug, Clone, PartialEq)]
pub enum Labels {
    /// No labels asset: a class is named by its index.
    Indices,
    /// Class `i` is `names[i]`.
    Names(Vec<String>),
}

impl Labels {
    /// The labels asset: one name per line, or JSON (a list of names, an object of index →
    /// name, or an object with `id2label`).
    pub fn parse(bytes: &[u8]) -> Result<Labels, String> {
        let text = std::str::from_utf8(bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes))
            .map_err(|e| format!("the labels asset is not UTF-8 ({e})"))?;
        let trimmed = text.trim_start();
        if trimmed.starts_with('[') || trimmed.starts_with('{') {
            return Labels::from_json(trimmed);
        }
        let mut names: Vec<String> = text
            .split('\n')
            .map(|line| line.trim().to_owned())
            .collect();
        if names.last().is_some_and(String::is_empty) {
            names.pop();
        }
        if names.is_empty() {
            return Err("the labels asset names no class".into());
        }
        Ok(Labels::Names(names))
    }

    fn from_json(text: &str) -> Result<Labels, String> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| format!("the labels asset is not valid JSON: {e}"))?;
        let value = match value {
            serde_json::Value::Object(mut object) if object.contains_key("id2label") => {
                object.remove("id2label").unwrap_or_default()
            }
            other => other,
        };
        let names = match value {
            serde_json::Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(index, item)| match item {
                    serde_json::Value::String(name) => Ok(name),
                    _ => Err(format!("the labels asset's entry {index} is not a string")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            serde_json::Value::Object(object) => {
                let mut indexed = Vec::with_capacity(object.len());
                for (key, item) in object {
                    let index: usize = key.parse().map_err(|_| {
                        format!("the labels asset's key '{key}' is not a class index")
                    })?;
                    let serde_json::Value::String(name) = item else {
                        return Err(format!("the labels asset's entry '{key}' is not a string"));
                    };
                    indexed.push((index, name));
                }
                if indexed.iter().any(|(index, _)| *index >= indexed.len()) {
                    return Err(format!(
                        "the labels asset's indices must be 0 to {} without gaps",
                        indexed.len().saturating_sub(1)
                    ));
                }
                indexed.sort();
                indexed.into_iter().map(|(_, name)| name).collect()
            }
            _ => return Err("the labels asset's JSON is not a list or an object of labels".into()),
        };
        if names.is_empty() {
            return Err("the labels asset names no class".into());
        }
        Ok(Labels::Names(names))
    }

    /// How many classes the asset names; `None` without one.
    pub fn count(&self) -> Option<usize> {
        match self {
            Labels::Indices => None,
            Labels::Names(names) => Some(names.len()),
        }
    }

    /// Class `index`'s name (its index without names; past the names, its index too).
    pub fn name(&self, index: usize) -> String {
        match self {
            Labels::Indices => index.to_string(),
            Labels::Names(names) => names
                .get(index)
                .cloned()
                .unwrap_or_else(|| index.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_from_lines_and_json() {
        assert_eq!(
            Labels::parse(b"cat\r\ndog\n").unwrap(),
            Labels::Names(vec!["cat".into(), "dog".into()])
        );
        assert_eq!(
            Labels::parse(b"[\"a\",\"b\"]").unwrap(),
            Labels::Names(vec!["a".into(), "b".into()])
        );
        let hf = br#"{"architectures": ["X"], "id2label": {"1": "dog", "0": "cat"}}"#;
        assert_eq!(
            Labels::parse(hf).unwrap(),
            Labels::Names(vec!["cat".into(), "dog".into()])
        );
        assert!(
            Labels::parse(br#"{"0": "cat", "2": "dog"}"#)
                .unwrap_err()
                .contains("without gaps")
        );
        assert!(
            Labels::parse(b"\xff\xfe")
                .unwrap_err()
                .contains("not UTF-8")
        );
        assert!(Labels::parse(b"").unwrap_err().contains("no class"));
    }
}
