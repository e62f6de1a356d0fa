//! Response adapter: a classifier's scores become its top `k` labels with their scores, as the
//! Hugging Face pipelines on SageMaker answer them (`[{"label": "tabby", "score": 0.61}, ...]`),
//! or as Triton's classification extension writes them (`"0.61:281:tabby"`).
//!
//! Config (manifest `config` table; every key optional):
//! - `output`: the scores output (default: the model's first output), shaped `[classes]` or
//!   `[batch, classes...]` (the classes are every dimension after the first), of any numeric
//!   datatype;
//! - `k`: how many labels each answer carries, 1 to 1000 (default 5; fewer when the model has
//!   fewer classes);
//! - `softmax`: `true` to turn the scores (logits) into probabilities first (default `false`:
//!   the scores as the model gives them);
//! - `format`: `labels` (default) or `triton`.
//!
//! Asset `labels` (optional): the class names, one per line (line `i` names class `i`, as
//! Triton's label files do), or JSON: a list of names, an object of index → name, or a Hugging
//! Face `config.json` (its `id2label`). Without it, a class is named by its index. A request may
//! override `k` (at most the configured one) and `format` in `X-Amzn-SageMaker-Custom-Attributes`
//! (`top_k=3`, `format=triton`), and `top_k` and `function_to_apply` (`softmax`, `sigmoid`,
//! `none`) in a JSON body's `parameters`, as Hugging Face's inference toolkit's clients send them
//! (`{"inputs": ..., "parameters": {"top_k": 3}}`; they win over the attributes; other
//! parameters are left to the request adapter).
//!
//! The labels are parsed once, in `check-config`: trident keeps the state that leaves, so every
//! call starts with the table built.

pub mod logic;

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({ world: "checked-response-adapter-plugin", path: "../../wit" });

    use std::sync::OnceLock;

    use exports::trident::plugin::lifecycle::Guest as Lifecycle;
    use exports::trident::plugin::model_check::{Guest as ModelCheck, ModelInfo};
    use exports::trident::plugin::response_adapter::{Guest, InferenceResult};
    use trident::plugin::assets;
    use trident::plugin::host::config;
    use trident::plugin::types::{Datatype, Invocation, PluginError, Reply};

    use crate::logic::{Labels, Scores, Settings};

    struct Plugin;

    /// The settings and labels, built once by `check-config`.
    static STATE: OnceLock<(Settings, Labels)> = OnceLock::new();

    fn built() -> Result<(Settings, Labels), String> {
        let settings = Settings::from_config(config)?;
        let labels = match assets::get("labels") {
            Some(bytes) => Labels::parse(&bytes)?,
            None => Labels::Indices,
        };
        Ok((settings, labels))
    }

    fn kind(datatype: Datatype) -> Option<crate::logic::Kind> {
        use crate::logic::Kind;
        Some(match datatype {
            Datatype::Boolean | Datatype::Uint8 => Kind::U8,
            Datatype::Uint16 => Kind::U16,
            Datatype::Uint32 => Kind::U32,
            Datatype::Uint64 => Kind::U64,
            Datatype::Int8 => Kind::I8,
            Datatype::Int16 => Kind::I16,
            Datatype::Int32 => Kind::I32,
            Datatype::Int64 => Kind::I64,
            Datatype::Fp16 => Kind::F16,
            Datatype::Bf16 => Kind::Bf16,
            Datatype::Fp32 => Kind::F32,
            Datatype::Fp64 => Kind::F64,
            Datatype::Bytes => return None,
        })
    }

    impl Guest for Plugin {
        fn adapt_response(
            invocation: Invocation,
            inference: InferenceResult,
        ) -> Result<Reply, PluginError> {
            let (settings, labels) = STATE
                .get()
                .ok_or_else(|| PluginError::Internal("top-k-labels was not initialised".into()))?;
            let request = settings
                .for_request(
                    invocation.custom_attributes.as_deref(),
                    crate::logic::body_parameters(&invocation.body).as_ref(),
                )
                .map_err(PluginError::BadRequest)?;
            let tensor = match &settings.output {
                Some(name) => inference.outputs.iter().find(|t| &t.name == name),
                None => inference.outputs.first(),
            }
            .ok_or_else(|| {
                PluginError::Internal(format!(
                    "the model returned no output {}",
                    settings.output.as_deref().unwrap_or("")
                ))
            })?;
            let kind = kind(tensor.datatype).ok_or_else(|| {
                PluginError::Internal(format!("output '{}' is BYTES, not scores", tensor.name))
            })?;
            let scores = Scores::new(&tensor.name, kind, &tensor.shape, &tensor.data)
                .map_err(PluginError::Internal)?;
            let body =
                crate::logic::answer(&scores, labels, &request).map_err(PluginError::Internal)?;
            Ok(Reply {
                status: 200,
                content_type: "application/json".into(),
                headers: Vec::new(),
                body,
            })
        }
    }

    impl ModelCheck for Plugin {
        fn check_model(model: ModelInfo) -> Result<(), String> {
            let (settings, labels) = STATE.get().ok_or("top-k-labels was not initialised")?;
            let output = match &settings.output {
                Some(name) => model.outputs.iter().find(|t| &t.name == name),
                None => model.outputs.first(),
            };
            let names: Vec<&str> = model.outputs.iter().map(|t| t.name.as_str()).collect();
            let output = output.ok_or_else(|| {
                format!(
                    "it has no output {} (its outputs: {}); set the plugin's `output`",
                    settings.output.as_deref().unwrap_or("at all"),
                    names.join(", ")
                )
            })?;
            if kind(output.datatype).is_none() {
                return Err(format!("output '{}' is BYTES, not scores", output.name));
            }
            crate::logic::check_classes(&output.name, &output.shape, labels)
        }
    }

    impl Lifecycle for Plugin {
        fn check_config() -> Result<(), String> {
            if STATE.get().is_none() {
                let state = built()?;
                let _ = STATE.set(state);
            }
            Ok(())
        }
    }

    export!(Plugin);
}
