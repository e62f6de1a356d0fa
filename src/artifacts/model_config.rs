//! The fields of a Triton model configuration (`config.pbtxt`) that the artifact rules look
//! at, read from the configuration's tree ([`super::text_format`]): the tree holds every field
//! as the core reads it, whatever its order, spacing or escapes.

use std::collections::BTreeMap;

use super::text_format::Message;

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
        let parameters = config
            .messages("parameters")
            .map(|entry| {
                let value = entry
                    .message("value")
                    .and_then(|v| v.text("string_value"))
                    .unwrap_or_default();
                (
                    entry.text("key").unwrap_or_default().to_owned(),
                    value.to_owned(),
                )
            })
            .collect::<BTreeMap<_, _>>();
        let op_libraries = config
            .messages("model_operations")
            .flat_map(|ops| ops.texts("op_library_filename"))
            .map(str::to_owned)
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
