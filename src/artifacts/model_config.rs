//! The fields of a Triton model configuration (`config.pbtxt`) that the artifact rules look
//! at, read from the configuration's tree ([`super::text_format`]): the tree holds every field
//! as the core reads it, whatever its order, spacing or escapes.

use std::collections::BTreeMap;

use super::text_format::{Message, Value};

/// What the rules read from one configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelConfigFacts {
    /// The top-level `backend`, when set.
    pub backend: Option<String>,
    /// The top-level `platform`, when set.
    pub platform: Option<String>,
    /// The top-level `runtime` (the backend's library or script), when set.
    pub runtime: Option<String>,
    /// Every `parameters` entry: its `key` and `string_value`.
    pub parameters: BTreeMap<String, String>,
    /// Every `op_library_filename` (custom operation libraries the backend loads).
    pub op_libraries: Vec<String>,
}

impl ModelConfigFacts {
    /// The facts of `config`.
    pub fn of(config: &Message) -> ModelConfigFacts {
        let mut parameters = BTreeMap::new();
        for entry in config.all("parameters") {
            let Value::Message(entry) = entry else {
                continue;
            };
            let value = entry
                .message("value")
                .and_then(|v| v.text("string_value"))
                .unwrap_or_default();
            parameters.insert(
                entry.text("key").unwrap_or_default().to_owned(),
                value.to_owned(),
            );
        }
        let op_libraries = config
            .all("model_operations")
            .filter_map(|ops| match ops {
                Value::Message(ops) => Some(ops),
                _ => None,
            })
            .flat_map(|ops| ops.all("op_library_filename"))
            .filter_map(|name| match name {
                Value::Text(name) => Some(name.clone()),
                _ => None,
            })
            .collect();
        ModelConfigFacts {
            backend: config.text("backend").map(str::to_owned),
            platform: config.text("platform").map(str::to_owned),
            runtime: config.text("runtime").map(str::to_owned),
            parameters,
            op_libraries,
        }
    }
}
