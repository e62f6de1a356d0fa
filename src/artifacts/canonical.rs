//! The configuration trident writes for a model, from what it parsed: the one the core reads.
//!
//! Under a gate (a Secure Mode control or the native-code boundary) every model folder of the
//! artifact gets one, whether the artifact brought a `config.pbtxt` or not:
//! - only fields of Triton's schema ([`super::config_schema`]); any other is refused;
//! - the backend stated: kept when the configuration states it, else taken from a `platform`
//!   trident knows, else from the model file in its version folders (`model.onnx`,
//!   `model.plan`, `model.pt`, `model.savedmodel`, `model.graphdef`, `model.py`); a model
//!   whose backend cannot be told is refused. The core's own guesses (the
//!   `default_model_filename`'s suffix, a `.python` model name, a folder shaped like a python
//!   model) never come into play;
//! - a `runtime` only where the model's folder holds no file of that name (the core looks
//!   there before the backend's folder; which runtimes the image has is the rules' part), no
//!   repository agents (code the core runs on the folder);
//! - files named only inside the model's folder;
//! - ensemble steps only over models of the same artifact (not another tenant's);
//! - no parameter naming a path outside the model's folder (absolute, or climbing with `..`);
//! - at most [`MAX_INSTANCES`] instances and [`MAX_WARMUP_RUNS`] warm-up runs, on an endpoint
//!   other tenants share.
//!
//! With sessions on, a stateful model whose configuration sets no idle limit gets
//! `sequence_batching.max_sequence_idle_microseconds` raised past the sessions' expiration
//! ([`crate::sessions`]'s idle module says why), so the core loads it once, already aligned.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use super::config_schema::{self, MODEL_CONFIG};
use super::text_format::{Message, Value};

/// The field of `sequence_batching` that bounds a sequence's idle time.
pub const IDLE_FIELD: &str = "max_sequence_idle_microseconds";

/// A model folder of an artifact, as the canonical configuration needs it.
#[derive(Debug, Clone, Copy)]
pub struct ModelFolder<'a> {
    /// The folder's name.
    pub name: &'a str,
    /// The names (lower case) of what its version folders hold.
    pub model_files: &'a BTreeSet<String>,
    /// The names (lower case) of every file anywhere in it.
    pub file_names: &'a BTreeSet<String>,
    /// Every model folder of the artifact (ensemble steps must be among them).
    pub artifact_models: &'a BTreeSet<String>,
}

/// What the canonical configuration is written for.
#[derive(Debug, Clone, Copy)]
pub struct Canonicalize<'t> {
    /// Whether a gate is in force (the schema, the stated backend and the rest apply).
    pub gated: bool,
    /// The idle limit a stateful model is given when its configuration sets none.
    pub idle_limit: Option<Duration>,
    /// The token of this load's private model names: an ensemble step over the artifact's
    /// model `m` is written as [`private_name`]`(m, token)`, the name the core registers that
    /// folder by ([`super::Prepared::names`]). `None`: names stay the folders' (a single-model
    /// endpoint, whose one repository is one tenant's).
    pub private_token: Option<&'t str>,
}

/// The name the core serves a step model `folder` of an artifact by, in the load whose token is
/// `token`: `#` is not a character of any name a client can load a model by
/// (`mme::load_request::check_addressable`), and the token is drawn per load, so no other
/// tenant's model can be, or be reached as, another's step.
pub fn private_name(folder: &str, token: &str) -> String {
    format!("{folder}#{token}")
}

/// The backends of the platforms trident knows (and the platform to keep beside them).
const PLATFORMS: &[(&str, &str)] = &[
    ("onnxruntime_onnx", "onnxruntime"),
    ("tensorrt_plan", "tensorrt"),
    ("pytorch_libtorch", "pytorch"),
    ("tensorflow_savedmodel", "tensorflow"),
    ("tensorflow_graphdef", "tensorflow"),
];

/// The model files whose backend is known: file → (backend, platform to state with it).
const MODEL_FILES: &[(&str, &str, Option<&str>)] = &[
    ("model.onnx", "onnxruntime", None),
    ("model.plan", "tensorrt", None),
    ("model.pt", "pytorch", None),
    (
        "model.savedmodel",
        "tensorflow",
        Some("tensorflow_savedmodel"),
    ),
    ("model.graphdef", "tensorflow", Some("tensorflow_graphdef")),
    ("model.py", "python", None),
];

/// Whether a model file among `model_files` names a backend.
pub fn names_a_backend(model_files: &BTreeSet<String>) -> bool {
    MODEL_FILES
        .iter()
        .any(|(file, _, _)| model_files.contains(*file))
}

impl Canonicalize<'_> {
    /// The configuration to write for `folder`, from the one it has (`None`: none): `Ok(None)`
    /// when the folder's own file stands as it is (no gate, nothing to raise), else the
    /// configuration; `Err` lists why it is refused.
    pub fn config(
        &self,
        config: Option<Message>,
        folder: ModelFolder<'_>,
    ) -> Result<Option<Message>, Vec<String>> {
        if !self.gated {
            return Ok(config.and_then(|mut config| {
                let raised = self.raise_idle_limit(&mut config);
                let renamed = self.rename_steps(&mut config, folder);
                (raised || renamed).then_some(config)
            }));
        }
        let mut config = config.unwrap_or_default();
        let mut problems = config_schema::check(&config, MODEL_CONFIG);
        if let Some(runtime) = config.text("runtime")
            && folder.file_names.contains(&runtime.to_lowercase())
        {
            problems.push(format!(
                "sets runtime {runtime:?}, and the model's folder holds a file of that name, \
                 which the core would load instead of its backend's"
            ));
        }
        if config.has("model_repository_agents") {
            problems.push(
                "sets model_repository_agents: repository agents run code on the model's folder"
                    .to_owned(),
            );
        }
        if let Err(why) = state_backend(&mut config, folder) {
            problems.push(why);
        }
        problems.extend(foreign_steps(&config, folder));
        problems.extend(paths_outside(&config));
        problems.extend(over_bounds(&config));
        self.raise_idle_limit(&mut config);
        self.rename_steps(&mut config, folder);
        if problems.is_empty() {
            Ok(Some(config))
        } else {
            Err(problems)
        }
    }

    /// Writes every ensemble step over a model of the artifact with the load's private name for
    /// it; returns whether any was.
    fn rename_steps(&self, config: &mut Message, folder: ModelFolder<'_>) -> bool {
        let Some(token) = self.private_token else {
            return false;
        };
        let mut renamed = false;
        let steps = config
            .messages_mut("ensemble_scheduling")
            .flat_map(|scheduling| scheduling.messages_mut("step"));
        for step in steps {
            let Some(name) = step.text("model_name").map(str::to_owned) else {
                continue;
            };
            if folder.artifact_models.contains(&name) {
                step.set("model_name", Value::Text(private_name(&name, token)));
                renamed = true;
            }
        }
        renamed
    }

    /// Raises a stateful model's idle limit when sessions are on and the configuration sets
    /// none; returns whether it did.
    fn raise_idle_limit(&self, config: &mut Message) -> bool {
        let Some(limit) = self.idle_limit else {
            return false;
        };
        let Some(batching) = config.message_mut("sequence_batching") else {
            return false;
        };
        if batching.has(IDLE_FIELD) {
            return false;
        }
        let micros = u64::try_from(limit.as_micros()).unwrap_or(u64::MAX);
        batching.set(IDLE_FIELD, Value::Word(micros.to_string()));
        true
    }
}

/// Makes `config` state its backend, or says why it cannot.
fn state_backend(config: &mut Message, folder: ModelFolder<'_>) -> Result<(), String> {
    if config.text("backend").is_some_and(|b| !b.is_empty()) {
        return Ok(());
    }
    match config.text("platform").filter(|p| !p.is_empty()) {
        Some("ensemble") => return Ok(()),
        Some(platform) => {
            let (_, backend) = PLATFORMS
                .iter()
                .find(|(known, _)| *known == platform)
                .ok_or_else(|| {
                    format!("names platform {platform:?}, which trident does not know")
                })?;
            config.set("backend", Value::Text((*backend).to_owned()));
            return Ok(());
        }
        None => {}
    }
    let found: Vec<_> = MODEL_FILES
        .iter()
        .filter(|(file, _, _)| folder.model_files.contains(*file))
        .collect();
    match found.as_slice() {
        [(_, backend, platform)] => {
            config.set("backend", Value::Text((*backend).to_owned()));
            if let Some(platform) = platform {
                config.set("platform", Value::Text((*platform).to_owned()));
            }
            Ok(())
        }
        [] => Err(format!(
            "model {} states no backend, and its version folders hold no model file that \
             names one (set backend in its config.pbtxt)",
            folder.name
        )),
        several => Err(format!(
            "model {} states no backend, and its version folders hold model files of several \
             ({}; set backend in its config.pbtxt)",
            folder.name,
            several
                .iter()
                .map(|(file, _, _)| *file)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The most instances a model may ask for under a gate: each is a thread, or a process of its
/// own for a python model, on an endpoint other tenants share.
pub const MAX_INSTANCES: u64 = 64;

/// The most warm-up runs a model may ask for under a gate (each runs during the load).
pub const MAX_WARMUP_RUNS: u64 = 100;

/// Parameters (the model's, and its execution accelerators') whose value names a path outside
/// the model's folder: an absolute path or one that climbs with `..` (a backend reading or
/// writing there, such as an engine cache, would reach outside the artifact).
fn paths_outside(config: &Message) -> Vec<String> {
    let model = config.messages("parameters").map(|entry| {
        let value = entry.message("value").and_then(|v| v.text("string_value"));
        (entry.text("key"), value)
    });
    let accelerators = config
        .messages("optimization")
        .flat_map(|o| o.messages("execution_accelerators"))
        .flat_map(|e| {
            e.messages("gpu_execution_accelerator")
                .chain(e.messages("cpu_execution_accelerator"))
        })
        .flat_map(|a| a.messages("parameters"))
        .map(|entry| (entry.text("key"), entry.text("value")));
    model
        .chain(accelerators)
        .filter_map(|(key, value)| {
            let value = value?;
            let outside =
                value.starts_with('/') || value.split(['/', '\\']).any(|part| part == "..");
            if outside {
                return Some(format!(
                    "sets parameter {:?} to {value:?}, a path outside the model's folder",
                    key.unwrap_or_default()
                ));
            }
            resolves_outside(value).map(|base| {
                format!(
                    "sets parameter {:?} to {value:?}, which names what exists under {} on this \
                     server (the core resolves a relative path against its working folder)",
                    key.unwrap_or_default(),
                    if base == Path::new("/") {
                        "/"
                    } else {
                        "the working folder"
                    }
                )
            })
        })
        .collect()
}

/// The folder a relative parameter value names an existing file or folder in, as the core or
/// a backend could resolve it: against the serving process's working folder, or `/` (the
/// image's). A value that names nothing there can only be the model's own file (the tree the
/// core reads has links only inside it).
fn resolves_outside(value: &str) -> Option<std::path::PathBuf> {
    let trimmed = value.trim();
    if trimmed.is_empty() || trimmed.parse::<f64>().is_ok() || value.contains('\0') {
        return None;
    }
    let working = std::env::current_dir().ok();
    [Some(std::path::PathBuf::from("/")), working]
        .into_iter()
        .flatten()
        .find(|base| base.join(value).symlink_metadata().is_ok())
}

/// What asks for more than a shared endpoint gives one model: instances, warm-up runs.
fn over_bounds(config: &Message) -> Vec<String> {
    let number = |m: &Message, field: &str| match m.last(field) {
        Some(Value::Word(word)) => word.parse::<u64>().unwrap_or(u64::MAX),
        _ => 1,
    };
    let instances = config
        .messages("instance_group")
        .fold(0u64, |total, group| {
            let gpus = group.all("gpus").count().max(1) as u64;
            total.saturating_add(number(group, "count").saturating_mul(gpus))
        });
    let warmups = config.messages("model_warmup").fold(0u64, |total, warmup| {
        total.saturating_add(number(warmup, "count"))
    });
    let mut problems = warmup_bytes(config);
    if instances > MAX_INSTANCES {
        problems.push(format!(
            "asks for {instances} instances in instance_group, more than {MAX_INSTANCES}"
        ));
    }
    if warmups > MAX_WARMUP_RUNS {
        problems.push(format!(
            "asks for {warmups} warm-up runs in model_warmup, more than {MAX_WARMUP_RUNS}"
        ));
    }
    problems
}

/// The most bytes one warm-up input may describe (its dims' product × its type's size × the
/// sample's batch size): the core makes it, zeros or random, for every instance, at load.
pub const MAX_WARMUP_INPUT_BYTES: u64 = 64 << 20;

/// The bytes of an element of a tensor of `data_type` (a `STRING` element counted as its
/// 4-byte length).
fn element_bytes(data_type: &str) -> u64 {
    match data_type {
        "TYPE_BOOL" | "TYPE_UINT8" | "TYPE_INT8" => 1,
        "TYPE_UINT16" | "TYPE_INT16" | "TYPE_FP16" | "TYPE_BF16" => 2,
        "TYPE_UINT64" | "TYPE_INT64" | "TYPE_FP64" => 8,
        _ => 4,
    }
}

/// The warm-up inputs of `config` larger than [`MAX_WARMUP_INPUT_BYTES`], or with dimensions
/// that are not sizes.
fn warmup_bytes(config: &Message) -> Vec<String> {
    let word = |m: &Message, field: &str| match m.last(field) {
        Some(Value::Word(word)) => Some(word.clone()),
        _ => None,
    };
    let mut problems = Vec::new();
    for warmup in config.messages("model_warmup") {
        let batch = word(warmup, "batch_size").map_or(Some(1), |w| w.parse::<u64>().ok());
        for input in warmup.messages("inputs") {
            let name = input.text("key").unwrap_or_default();
            let Some(value) = input.message("value") else {
                continue;
            };
            let element = element_bytes(&word(value, "data_type").unwrap_or_default());
            let bytes = value
                .all("dims")
                .try_fold(batch.unwrap_or(u64::MAX).max(1), |total, dim| match dim {
                    Value::Word(w) => w.parse::<u64>().ok().map(|d| total.saturating_mul(d)),
                    _ => None,
                })
                .map(|count| count.saturating_mul(element));
            match bytes {
                Some(bytes) if bytes <= MAX_WARMUP_INPUT_BYTES && batch.is_some() => {}
                Some(bytes) => problems.push(format!(
                    "has a warm-up input {name:?} of {bytes} bytes, more than \
                     {MAX_WARMUP_INPUT_BYTES} (made for every instance at load)"
                )),
                None => problems.push(format!(
                    "has a warm-up input {name:?} whose dims or batch size are not sizes"
                )),
            }
        }
    }
    problems
}

/// The ensemble steps of `config` that name a model outside the artifact.
fn foreign_steps(config: &Message, folder: ModelFolder<'_>) -> Vec<String> {
    let steps = config
        .messages("ensemble_scheduling")
        .flat_map(|scheduling| scheduling.messages("step"));
    let mut problems = Vec::new();
    for step in steps {
        let name = step.text("model_name").unwrap_or_default();
        if !folder.artifact_models.contains(name) {
            problems.push(format!(
                "has an ensemble step over model {name:?}, which is not a model of the artifact"
            ));
        }
        if step.text("model_namespace").is_some_and(|n| !n.is_empty()) {
            problems.push("sets an ensemble step's model_namespace".to_owned());
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifacts::text_format::parse;

    fn canonical(
        text: Option<&str>,
        files: &[&str],
        gated: bool,
    ) -> Result<Option<Message>, Vec<String>> {
        let files: BTreeSet<String> = files.iter().map(|f| (*f).to_owned()).collect();
        let models: BTreeSet<String> = ["m", "step"].iter().map(|f| (*f).to_owned()).collect();
        let folder = ModelFolder {
            name: "m",
            model_files: &files,
            file_names: &files,
            artifact_models: &models,
        };
        let canonicalize = Canonicalize {
            gated,
            idle_limit: Some(Duration::from_secs(90)),
            private_token: None,
        };
        canonicalize.config(text.map(|t| parse(t.as_bytes()).unwrap()), folder)
    }

    fn backend(result: &Result<Option<Message>, Vec<String>>) -> Option<String> {
        result
            .as_ref()
            .ok()?
            .as_ref()?
            .text("backend")
            .map(str::to_owned)
    }

    #[test]
    fn the_backend_is_always_stated_under_a_gate() {
        let stated = canonical(Some("backend: \"onnxruntime\""), &["model.py"], true);
        assert_eq!(backend(&stated).as_deref(), Some("onnxruntime"));
        let platform = canonical(Some("platform: \"onnxruntime_onnx\""), &[], true);
        assert_eq!(backend(&platform).as_deref(), Some("onnxruntime"));
        // The core would guess python from default_model_filename; trident reads the files.
        let guessed = canonical(
            Some("default_model_filename: \"model.py\""),
            &["model.py"],
            true,
        );
        assert_eq!(backend(&guessed).as_deref(), Some("python"));
        let none = canonical(None, &["model.onnx"], true);
        assert_eq!(backend(&none).as_deref(), Some("onnxruntime"));
        let saved = canonical(None, &["model.savedmodel"], true)
            .unwrap()
            .unwrap();
        assert_eq!(saved.text("platform"), Some("tensorflow_savedmodel"));
        for (text, files) in [
            (None, &[][..]),
            (None, &["weights.bin"][..]),
            (None, &["model.onnx", "model.py"][..]),
            (Some("platform: \"mystery\""), &["model.onnx"][..]),
        ] {
            assert!(canonical(text, files, true).is_err(), "{text:?} {files:?}");
        }
        assert!(
            canonical(
                Some(
                    "platform: \"ensemble\" ensemble_scheduling { step { model_name: \"step\" } }"
                ),
                &[],
                true
            )
            .is_ok()
        );
    }

    #[test]
    fn what_reaches_outside_the_model_is_refused() {
        let planted = "backend: \"onnxruntime\" runtime: \"libtriton_onnxruntime.so\"";
        assert!(canonical(Some(planted), &[], true).is_ok());
        let refused = canonical(Some(planted), &["libtriton_onnxruntime.so"], true).unwrap_err();
        assert!(
            refused[0].contains("holds a file of that name"),
            "{refused:?}"
        );
        for text in [
            "backend: \"onnxruntime\" model_repository_agents { agents { name: \"../../x\" } }",
            "platform: \"ensemble\" ensemble_scheduling { step { model_name: \"other_tenant\" } }",
            "platform: \"ensemble\" ensemble_scheduling { step { model_name: \"step\" model_namespace: \"x\" } }",
            "backend: \"onnxruntime\" unknown_field: 1",
            "backend: \"onnxruntime\" parameters { key: \"cache\" value { string_value: \"/opt/tritonserver/backends\" } }",
            "backend: \"onnxruntime\" optimization { execution_accelerators { gpu_execution_accelerator [ { name: \"tensorrt\" parameters { key: \"trt_engine_cache_path\" value: \"engines/../../../x\" } } ] } }",
            "backend: \"onnxruntime\" instance_group [ { count: 40 kind: KIND_CPU }, { count: 30 kind: KIND_CPU } ]",
            "backend: \"onnxruntime\" instance_group [ { count: 20 kind: KIND_GPU gpus: [0, 1, 2, 3] } ]",
            "backend: \"onnxruntime\" model_warmup [ { name: \"w\" count: 1000000 } ]",
            "backend: \"onnxruntime\" model_warmup [ { name: \"w\" inputs { key: \"x\" value { data_type: TYPE_FP32 dims: [ 268435456 ] zero_data: true } } } ]",
            "backend: \"onnxruntime\" model_warmup [ { name: \"w\" batch_size: 4 inputs { key: \"x\" value { data_type: TYPE_FP32 dims: [ 8589934592 ] random_data: true } } } ]",
            "backend: \"onnxruntime\" model_warmup [ { name: \"w\" inputs { key: \"x\" value { data_type: TYPE_FP32 dims: [ -1 ] zero_data: true } } } ]",
            // Relative, but naming what exists on the server (the core resolves it against its
            // working folder, `/` in the image).
            "backend: \"onnxruntime\" parameters { key: \"lib\" value { string_value: \"etc/passwd\" } }",
            "backend: \"onnxruntime\" parameters { key: \"lib\" value { string_value: \"./usr/lib\" } }",
        ] {
            let refused = canonical(Some(text), &[], true).unwrap_err();
            assert_eq!(refused.len(), 1, "{text}: {refused:?}");
        }
    }

    #[test]
    fn parameters_inside_the_model_and_modest_asks_pass() {
        let text = "backend: \"python\" \
            parameters { key: \"env\" value { string_value: \"$$TRITON_MODEL_DIRECTORY/env\" } } \
            parameters { key: \"url\" value { string_value: \"https://example.com/a\" } } \
            instance_group [ { count: 8 kind: KIND_CPU } ] model_warmup [ { name: \"w\" count: 10 \
            batch_size: 2 inputs { key: \"x\" value { data_type: TYPE_FP32 dims: [ 3, 224, 224 ] zero_data: true } } } ]";
        assert!(canonical(Some(text), &[], true).is_ok());
    }

    #[test]
    fn the_idle_limit_is_raised_once_and_only_when_unset() {
        let raised = canonical(
            Some("backend: \"python\" sequence_batching { }"),
            &[],
            false,
        )
        .unwrap()
        .unwrap();
        let batching = raised.message("sequence_batching").unwrap();
        assert_eq!(
            batching.last(IDLE_FIELD),
            Some(&Value::Word("90000000".into()))
        );
        let set = "sequence_batching { max_sequence_idle_microseconds: 5 }";
        assert_eq!(canonical(Some(set), &[], false), Ok(None));
        assert_eq!(canonical(Some("backend: \"python\""), &[], false), Ok(None));
        assert_eq!(canonical(None, &[], false), Ok(None));
        let gated = canonical(Some("backend: \"python\" sequence_batching { }"), &[], true)
            .unwrap()
            .unwrap();
        assert!(gated.message("sequence_batching").unwrap().has(IDLE_FIELD));
    }
}
