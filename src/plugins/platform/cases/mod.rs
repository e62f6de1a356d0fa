//! Golden cases: invocations a plugin carries with what it must answer, run before it serves.
//!
//! A manifest names a plugin's cases file beside its `.wasm` (`cases = { path, sha256 }`),
//! pinned by digest and covered by its signature ([`crate::plugins::platform::signing::signed_message`]). trident
//! runs every case when the plugin loads, at start and at every reload (`SIGHUP`,
//! `POST /plugins/reload`, a multi-model load), through the host that serves requests, with the
//! plugin's own memory and time limits, before the plugin serves anything. A case that fails
//! refuses the load, naming the case and the first differences; at a reload the plugins already
//! loaded keep serving. `trident plugin test` runs the same cases where the author builds.
//!
//! ```toml
//! [tolerance]                       # for every case; numpy's isclose, with its defaults
//! absolute = 1e-8
//! relative = 1e-5
//!
//! [[case]]
//! name = "two rows"
//! hook = "request"                  # request (default), response, generate-request,
//!                                   # generate-response, stream, oom, pipeline
//! content_type = "text/csv"
//! accept = "application/json"       # optional, as are model (default "model") and headers
//! headers = { "x-tenant" = "a" }
//! custom_attributes = "top_k=2"     # X-Amzn-SageMaker-Custom-Attributes, as a client sends it
//! body = "1,2\n3,4\n"               # or body_base64, or body_file; none: an empty body
//! # response: the model's outputs, KServe v2 tensors; generate-response and stream: the model's
//! # responses, a list of objects (`[{ TEXT = "a" }, { TEXT = "b" }]`)
//! # outputs = [{ name = "OUTPUT0", datatype = "FP32", shape = [1, 2], data = [0.5, 0.5] }]
//! expect = { inputs = [{ name = "INPUT0", datatype = "FP32", shape = [2, 2], data = [1, 2, 3, 4] }] }
//! ```
//!
//! A plugin that calls models (`trident:models`) is tested without them: the case gives each
//! call's answer, in the order the calls come (`models`, each the model the call must name and
//! its outputs as a response case's); a call past them, or of another model, is `unavailable`.
//!
//! ```toml
//! [[case]]
//! name = "one line"
//! hook = "pipeline"                 # expects what a response case does
//! content_type = "image/png"
//! body_file = "line"
//! models = [
//!   { model = "det", outputs = [{ name = "MAP", datatype = "FP32", shape = [1, 1, 2, 2], data = [0, 1, 1, 0] }] },
//!   { model = "rec", outputs = [{ name = "LOGITS", datatype = "FP32", shape = [1, 1, 2], data = [0.1, 0.9] }] },
//! ]
//! expect = { status = 200, json = { lines = ["a"] } }
//! ```
//!
//! A case too large for the file (a photo, the 150,528 floats of an image adapter's tensor) takes
//! it from a file beside the manifest, named in `[files]` and pinned there by its digest, so that
//! the plugin's signature over the cases file covers it: `body_file = "cat"` sends a file as the
//! body, and `data_file = "cat_tensor"` in an expected tensor (or output) gives its `data` (and
//! its `shape`, when the case gives none) from a NumPy `.npy` file ([`npy`]), compared within
//! the tolerance as any number:
//!
//! ```toml
//! [files]
//! cat = { path = "cat.jpg", sha256 = "<sha256>" }
//! cat_tensor = { path = "cat_input.npy", sha256 = "<sha256>" }  # numpy.save of the reference
//!
//! [[case]]
//! name = "a cat, every value"
//! content_type = "image/jpeg"
//! body_file = "cat"
//! tolerance = { absolute = 1e-3, relative = 0 }
//! expect = { inputs = [{ name = "INPUT0", datatype = "FP32", data_file = "cat_tensor" }] }
//! ```
//!
//! What a case expects is compared with what the plugin answered ([`outcome`]: a JSON value of
//! the same shape for every hook) by [`compare`]: each key the case gives must be there and
//! match, keys it leaves out are not checked; lists match item for item; numbers match within
//! the tolerance (integers exactly); strings match whole, except `message`, which the plugin's
//! message must contain. A refusal is `{ status = 400, message = "..." }`.

pub mod compare;
pub mod npy;
pub mod outcome;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

pub use self::compare::Tolerance;
use crate::plugins::runtime::assets::AssetSpec;

/// The largest cases file.
pub const MAX_CASES_BYTES: u64 = 1 << 20;
/// The most cases one plugin may carry (each runs at every load, within the plugin's time
/// limit: the load takes at most this many calls' time more).
pub const MAX_CASES: usize = 64;
/// The differences a failing case reports.
pub const MAX_REPORTED: usize = 5;
/// The most files (`[files]`) one cases file may name.
pub const MAX_CASE_FILES: usize = 16;
/// The most bytes the files of one cases file may hold together (they are kept with the plugin
/// for the cases of every load). A `.npy` reference is compared as JSON numbers, about eight
/// times its bytes while its case runs: 8 MiB holds a 12 MP photo, or a dozen 224x224 FP32
/// references, and keeps that within 64 MiB.
pub const MAX_CASE_FILES_BYTES: u64 = 8 << 20;

/// The hooks a case can call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CaseHook {
    /// The request adapter: expects `inputs` (and `outputs`, the outputs it asks for).
    #[default]
    Request,
    /// The response adapter on the case's `outputs`: expects `status`, `content_type`,
    /// `headers`, `body` or `json`.
    Response,
    /// The generate request adapter: expects `stream`, and `json` or `inputs`.
    GenerateRequest,
    /// The generate response adapter on the case's `outputs` (responses): as `response`.
    GenerateResponse,
    /// The stream adapter, once per response of `outputs` and once at the end: expects
    /// `events` (each a JSON value where the payload is JSON, else its text).
    Stream,
    /// The OOM classifier, on the engine error message the case's `body` gives: expects
    /// `out_of_memory` (true or false).
    Oom,
    /// The pipeline (`trident:models`), its model calls answered by the case's `models`:
    /// expects what `response` does.
    Pipeline,
}

impl CaseHook {
    /// The hook it calls, and the name of the interface that exports it.
    pub fn export(self) -> (crate::plugins::platform::accounting::Hook, &'static str) {
        use crate::plugins::platform::accounting::Hook;
        match self {
            CaseHook::Request => (Hook::Request, "request-adapter"),
            CaseHook::Response => (Hook::Response, "response-adapter"),
            CaseHook::GenerateRequest => (Hook::GenerateRequest, "generate-request-adapter"),
            CaseHook::GenerateResponse => (Hook::GenerateResponse, "generate-response-adapter"),
            CaseHook::Stream => (Hook::Stream, "stream-adapter"),
            CaseHook::Oom => (Hook::Oom, "oom-classifier"),
            CaseHook::Pipeline => (Hook::Pipeline, "pipeline"),
        }
    }
}

/// One case: an invocation, and what the plugin must answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Names the case in errors and reports.
    pub name: String,
    /// The hook it calls.
    #[serde(default)]
    pub hook: CaseHook,
    /// The model name the invocation carries.
    #[serde(default = "default_model")]
    pub model: String,
    /// The request's `Content-Type`.
    #[serde(default)]
    pub content_type: Option<String>,
    /// The request's `Accept`.
    #[serde(default)]
    pub accept: Option<String>,
    /// Other request headers (the plugin sees those its manifest entry lets it see; SageMaker's
    /// are read as a request's are).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `X-Amzn-SageMaker-Custom-Attributes`, as a client sends it (`top_k=2, format=triton`).
    #[serde(default)]
    pub custom_attributes: Option<String>,
    /// The request body, as text.
    #[serde(default)]
    pub body: Option<String>,
    /// The request body, base64 (for bytes that are not text).
    #[serde(default)]
    pub body_base64: Option<String>,
    /// The request body: the file of `[files]` so named (a photo, too large for the cases file).
    #[serde(default)]
    pub body_file: Option<String>,
    /// For the response hooks: the model's outputs (`response`: KServe v2 output tensors;
    /// `generate-response`, `stream`: a list of response objects).
    #[serde(default)]
    pub outputs: Option<toml::Value>,
    /// The answers of the plugin's model calls (`trident:models`), in the order they come.
    #[serde(default)]
    pub models: Vec<ModelAnswer>,
    /// This case's tolerance, instead of the file's.
    #[serde(default)]
    pub tolerance: Option<Tolerance>,
    /// What the plugin must answer ([`compare`]).
    pub expect: toml::Table,
}

fn default_model() -> String {
    "model".into()
}

/// A model's answer a case gives one of the plugin's model calls.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelAnswer {
    /// The model the call must name.
    pub model: String,
    /// Its outputs: KServe v2 output tensors, as a response case's `outputs`.
    pub outputs: toml::Value,
}

/// The most model answers one case may give.
pub const MAX_MODEL_ANSWERS: usize = 256;

/// A cases file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct CasesFile {
    #[serde(default)]
    tolerance: Tolerance,
    #[serde(default, rename = "case")]
    cases: Vec<Case>,
    #[serde(default)]
    files: BTreeMap<String, AssetSpec>,
}

/// A plugin's cases, read and checked, and the digest of their file.
#[derive(Debug, Clone, PartialEq)]
pub struct Cases {
    /// The cases, in file order.
    pub cases: Vec<Case>,
    /// The tolerance of cases that give none.
    pub tolerance: Tolerance,
    /// The file's SHA-256 (lower-case hex), which the plugin's signature covers.
    pub sha256: String,
    /// The files its cases take bodies and reference tensors from (`[files]`), each pinned by
    /// its digest in the cases file.
    pub files: BTreeMap<String, AssetSpec>,
    /// Their contents, read with the cases ([`read`]).
    pub contents: BTreeMap<String, Arc<Vec<u8>>>,
}

impl Cases {
    /// The cases in `bytes` (a cases file's contents); an error says which case is wrong and why.
    pub fn parse(bytes: &[u8]) -> Result<Cases, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_owned())?;
        let file: CasesFile = toml::from_str(text).map_err(|e| e.to_string())?;
        if file.cases.is_empty() {
            return Err("holds no [[case]]".into());
        }
        if file.cases.len() > MAX_CASES {
            return Err(format!(
                "holds {} cases; a plugin may carry at most {MAX_CASES}",
                file.cases.len()
            ));
        }
        file.tolerance.check()?;
        if file.files.len() > MAX_CASE_FILES {
            return Err(format!(
                "names {} files; a cases file may name at most {MAX_CASE_FILES}",
                file.files.len()
            ));
        }
        crate::plugins::runtime::assets::check_specs(&file.files)
            .map_err(|why| format!("[files]: {why}"))?;
        let mut names = std::collections::BTreeSet::new();
        for case in &file.cases {
            let fail = |why: String| format!("case '{}': {why}", case.name.escape_debug());
            if case.name.trim().is_empty() || !names.insert(case.name.as_str()) {
                return Err(fail("each case needs a name of its own".into()));
            }
            if let Some(tolerance) = &case.tolerance {
                tolerance.check().map_err(fail)?;
            }
            outcome::check(case).map_err(fail)?;
            let named = |name: &str| match file.files.contains_key(name) {
                true => Ok(()),
                false => Err(fail(format!(
                    "names the file '{}', which [files] does not",
                    name.escape_debug()
                ))),
            };
            if let Some(name) = &case.body_file {
                if case.body.is_some() || case.body_base64.is_some() {
                    return Err(fail("give one of body, body_base64 and body_file".into()));
                }
                named(name)?;
            }
            let mut referenced = Vec::new();
            data_files(&toml::Value::Table(case.expect.clone()), &mut referenced);
            if let Some(outputs) = &case.outputs {
                data_files(outputs, &mut referenced);
            }
            for answer in &case.models {
                data_files(&answer.outputs, &mut referenced);
            }
            for name in referenced {
                named(&name)?;
            }
        }
        Ok(Cases {
            cases: file.cases,
            tolerance: file.tolerance,
            sha256: crate::plugins::runtime::digest::sha256_hex(bytes),
            files: file.files,
            contents: BTreeMap::new(),
        })
    }

    /// The request body of `case`: its text, base64 or file.
    pub fn body(&self, case: &Case) -> Result<Vec<u8>, String> {
        match &case.body_file {
            Some(name) => self
                .contents
                .get(name)
                .map(|bytes| bytes.to_vec())
                .ok_or_else(|| format!("the file '{name}' was not read")),
            None => outcome::body(case),
        }
    }

    /// What `case` expects, as JSON, its `data_file`s replaced by the files' values.
    pub fn expected(&self, case: &Case) -> Result<Value, String> {
        let mut value = outcome::expected(case);
        self.with_files(&mut value)?;
        Ok(value)
    }

    /// The model outputs `case` gives a response hook, as JSON, its `data_file`s replaced.
    pub fn outputs(&self, case: &Case) -> Result<Value, String> {
        let mut value = case
            .outputs
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| e.to_string())?
            .unwrap_or(Value::Null);
        self.with_files(&mut value)?;
        Ok(value)
    }

    /// The model answers `case` gives, in order: each model's name and its outputs as the
    /// engine's response, their `data_file`s replaced.
    pub fn model_answers(
        &self,
        case: &Case,
    ) -> Result<Vec<(String, Vec<crate::engine::OutputTensor>)>, String> {
        case.models
            .iter()
            .enumerate()
            .map(|(index, answer)| {
                let mut value = serde_json::to_value(&answer.outputs).map_err(|e| e.to_string())?;
                self.with_files(&mut value)?;
                let outputs = outcome::output_tensors(&value)
                    .map_err(|e| format!("models[{index}] ('{}'): {e}", answer.model))?;
                Ok((answer.model.clone(), outputs))
            })
            .collect()
    }

    /// Replaces every object's `data_file` with `data` (and `shape`, where it has none) read
    /// from the named `.npy` file; a `shape` the file's does not match is an error.
    fn with_files(&self, value: &mut Value) -> Result<(), String> {
        match value {
            Value::Object(object) => {
                if let Some(name) = object.remove("data_file") {
                    let name = name.as_str().ok_or("data_file: give a file's name")?;
                    let bytes = self
                        .contents
                        .get(name)
                        .ok_or_else(|| format!("the file '{name}' was not read"))?;
                    let array = npy::read(bytes).map_err(|why| format!("file '{name}': {why}"))?;
                    let shape = Value::from(array.shape.clone());
                    match object.get("shape") {
                        Some(given) if *given != shape => {
                            return Err(format!(
                                "file '{name}' is of shape {shape}, where the case says {given}"
                            ));
                        }
                        Some(_) => {}
                        None => {
                            object.insert("shape".into(), shape);
                        }
                    }
                    object.insert("data".into(), Value::Array(array.values));
                }
                object.values_mut().try_for_each(|v| self.with_files(v))
            }
            Value::Array(items) => items.iter_mut().try_for_each(|v| self.with_files(v)),
            _ => Ok(()),
        }
    }
}

/// The files `value`'s `data_file` keys name, at any depth.
fn data_files(value: &toml::Value, out: &mut Vec<String>) {
    match value {
        toml::Value::Table(table) => {
            for (key, value) in table {
                match (key.as_str(), value) {
                    ("data_file", toml::Value::String(name)) => out.push(name.clone()),
                    _ => data_files(value, out),
                }
            }
        }
        toml::Value::Array(items) => items.iter().for_each(|v| data_files(v, out)),
        _ => {}
    }
}

/// Reads a plugin's cases file (`spec`, resolved against the manifest's `folder`) as its assets
/// are read: a regular file inside the folder, pinned by digest, a kind Secure Mode allows.
pub async fn read(
    folder: &Path,
    spec: Option<&AssetSpec>,
    secure_mode: bool,
) -> Result<Option<Arc<Cases>>, String> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let bytes = crate::plugins::runtime::assets::read_one(
        folder,
        "cases",
        spec,
        (MAX_CASES_BYTES, "a cases file"),
        secure_mode,
    )
    .await?;
    let mut cases = Cases::parse(&bytes).map_err(|why| {
        format!(
            "cases ({}): {why}",
            crate::plugins::runtime::assets::shown_path(&spec.path, folder)
        )
    })?;
    let mut total = 0u64;
    for (name, file) in &cases.files {
        // Named relative to the manifest's folder, as assets are.
        let file = AssetSpec {
            path: folder.join(&file.path),
            ..file.clone()
        };
        let bytes = crate::plugins::runtime::assets::read_one(
            folder,
            &format!("cases file '{name}'"),
            &file,
            (
                MAX_CASE_FILES_BYTES - total,
                "a case's file (the files of a cases file together)",
            ),
            secure_mode,
        )
        .await?;
        total += bytes.len() as u64;
        cases.contents.insert(name.clone(), Arc::new(bytes));
    }
    Ok(Some(Arc::new(cases)))
}
