//! The rule table: what each control (and the native-code boundary) forbids in a model
//! artifact, one row per kind of file. A new control, or a new kind of file under an old one,
//! is a new row.

use super::ImageBackends;
use super::controls::{Control, Gate};
use super::walk::Entry;

/// One kind of forbidden file.
pub struct Rule {
    /// What forbids it (the first of these that is in force is named in the refusal).
    pub gates: &'static [Gate],
    /// What the file is, for the refusal: `<path> <what>`.
    pub what: &'static str,
    /// Whether `entry` is one.
    pub finds: fn(&Entry, &ImageBackends) -> bool,
}

const SCRIPTS: Gate = Gate::Secure(Control::CustomInferenceScripts);
const PICKLE: Gate = Gate::Secure(Control::PickleFiles);
const REQUIREMENTS: Gate = Gate::Secure(Control::RequirementsTxt);
const REMOTE_CODE: Gate = Gate::Secure(Control::TrustRemoteCode);
const CHAT_TEMPLATE: Gate = Gate::Secure(Control::ChatTemplate);

/// Every gate: what no rule can check is refused under any of them.
const ANY: &[Gate] = &[
    SCRIPTS,
    PICKLE,
    REQUIREMENTS,
    REMOTE_CODE,
    CHAT_TEMPLATE,
    Gate::NativeCode,
    Gate::AllowList,
];
/// Native code in the serving process: forbidden by the scripts control and by the boundary.
const NATIVE: &[Gate] = &[SCRIPTS, Gate::NativeCode];

/// The rules, in the order refusals list their findings.
#[rustfmt::skip]
pub const RULES: &[Rule] = &[
    Rule { gates: ANY, what: "cannot be checked", finds: |e, _| e.unreadable.is_some() },
    Rule { gates: NATIVE, what: "is a backend library (the core would load it into the serving process)", finds: is_backend_library },
    Rule { gates: ANY, what: "is a custom batching library (the core would load batchstrategy.so into the serving process)", finds: |e, _| e.name.starts_with("batchstrategy") },
    Rule { gates: ANY, what: "sets TRITON_BATCH_STRATEGY_PATH (a custom batching library the core would load into the serving process)", finds: |e, _| config(e).is_some_and(|c| c.parameters.keys().any(|k| k.eq_ignore_ascii_case(BATCH_STRATEGY_PARAMETER))) },
    Rule { gates: ANY, what: "is native code by its contents (an ELF file, whatever its name)", finds: |e, _| e.head.starts_with(b"\x7fELF") },
    Rule { gates: NATIVE, what: "names a backend that is not one of the image's", finds: foreign_backend },
    Rule { gates: NATIVE, what: "names a backend runtime that is not one of the image's", finds: foreign_runtime },
    Rule { gates: NATIVE, what: "names a custom operation library (op_library_filename)", finds: |e, _| config(e).is_some_and(|c| !c.op_libraries.is_empty()) },
    Rule { gates: &[SCRIPTS], what: "is native code (a shared library or executable)", finds: is_native },
    Rule { gates: &[SCRIPTS], what: "is a Python script", finds: |e, _| has_extension(e, &["py", "pyc", "pyo", "pyw", "pyz"]) },
    Rule { gates: &[SCRIPTS], what: "configures a python backend model", finds: |e, _| backend(e) == Some("python") },
    Rule { gates: NATIVE, what: "is a python backend stub (the python backend would run it as the model's process)", finds: |e, _| e.name == "triton_python_backend_stub" },
    Rule { gates: NATIVE, what: "sets an execution environment (EXECUTION_ENV_PATH: an archive of native code the python backend unpacks and runs)", finds: |e, _| config(e).is_some_and(|c| c.parameters.contains_key("EXECUTION_ENV_PATH")) },
    Rule { gates: &[PICKLE], what: "is a pickle-based file (.bin .pt .pth .ckpt .pkl .pickle .joblib)", finds: |e, _| !e.raw_data && has_extension(e, &["bin", "pt", "pth", "ckpt", "pkl", "pickle", "joblib"]) },
    Rule { gates: &[PICKLE], what: "holds a pickle (by its contents)", finds: holds_pickle },
    Rule { gates: &[PICKLE], what: "configures a TorchScript model (a zip archive of pickles)", finds: is_torchscript_config },
    Rule { gates: &[REQUIREMENTS], what: "is a requirements.txt", finds: |e, _| e.name == "requirements.txt" },
    Rule { gates: &[REMOTE_CODE], what: "sets trust_remote_code", finds: trusts_remote_code },
    Rule { gates: &[CHAT_TEMPLATE], what: "is or holds a Jinja chat template", finds: has_chat_template },
];

/// The model parameter naming a custom batching library for the core to load.
const BATCH_STRATEGY_PARAMETER: &str = "TRITON_BATCH_STRATEGY_PATH";

fn config(entry: &Entry) -> Option<&super::model_config::ModelConfigFacts> {
    entry.config.as_ref()
}

fn backend(entry: &Entry) -> Option<&str> {
    config(entry)?.backend.as_deref()
}

fn has_extension(entry: &Entry, extensions: &[&str]) -> bool {
    entry
        .name
        .rsplit_once('.')
        .is_some_and(|(_, extension)| extensions.contains(&extension))
}

/// A shared library by its name (`.so`, `.so.1.2`).
fn is_shared_library_name(name: &str) -> bool {
    name.ends_with(".so") || name.contains(".so.")
}

fn is_native(entry: &Entry, _: &ImageBackends) -> bool {
    entry.head.starts_with(b"\x7fELF") || is_shared_library_name(&entry.name)
}

/// What the core looks for in a model's folder before its backends folder:
/// `libtriton_<backend>.so`.
fn is_backend_library(entry: &Entry, image: &ImageBackends) -> bool {
    entry.name.starts_with("libtriton") && is_native(entry, image)
}

fn foreign_backend(entry: &Entry, image: &ImageBackends) -> bool {
    backend(entry).is_some_and(|name| !name.is_empty() && !image.has_backend(name))
}

fn foreign_runtime(entry: &Entry, image: &ImageBackends) -> bool {
    config(entry)
        .and_then(|c| c.runtime.as_deref())
        .is_some_and(|runtime| !runtime.is_empty() && !image.has_runtime(backend(entry), runtime))
}

fn is_torchscript_config(entry: &Entry, _: &ImageBackends) -> bool {
    config(entry).is_some_and(|c| {
        c.backend.as_deref() == Some("pytorch") || c.platform.as_deref() == Some("pytorch_libtorch")
    })
}

/// A pickle by its first bytes: protocol 1 to 5's opcode, protocol 0's first opcodes, a zip whose first entry is a pickle
/// (`torch.save`'s archives, TorchScript), or a NumPy array of Python objects.
fn holds_pickle(entry: &Entry, _: &ImageBackends) -> bool {
    let head = &entry.head;
    let pickle_opcode = (head.first() == Some(&0x80)
        && head.get(1).is_some_and(|v| (1..=5).contains(v)))
        || super::allow_list::is_text_pickle(head);
    let zip_of_pickles = head.starts_with(b"PK\x03\x04")
        && first_zip_entry(head).is_some_and(|name| name.ends_with(b".pkl"));
    let numpy_objects = head
        .strip_prefix(b"\x93NUMPY")
        .is_some_and(super::pickle::npy_holds_objects);
    pickle_opcode || zip_of_pickles || numpy_objects
}

/// The name of a zip archive's first entry, from its local header.
fn first_zip_entry(head: &[u8]) -> Option<&[u8]> {
    let length = usize::from(u16::from_le_bytes([*head.get(26)?, *head.get(27)?]));
    head.get(30..30 + length)
}

/// Whether a Python consumer would take `value` as true: any string but the empty one (so
/// `"false"` too, as `bool("false")` is), any number but 0, any non-empty list or object.
fn truthy_to_python(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::Null => false,
        serde_json::Value::Bool(b) => *b,
        serde_json::Value::String(s) => !s.is_empty(),
        serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
        serde_json::Value::Array(items) => !items.is_empty(),
        serde_json::Value::Object(map) => !map.is_empty(),
    }
}

fn trusts_remote_code(entry: &Entry, _: &ImageBackends) -> bool {
    let in_json = entry
        .json
        .as_ref()
        .and_then(|m| m.get("trust_remote_code"))
        .is_some_and(truthy_to_python);
    // A parameter is a string: only the empty one reads as false to every consumer.
    let in_config = config(entry)
        .and_then(|c| c.parameters.get("trust_remote_code"))
        .is_some_and(|v| !v.is_empty());
    in_json || in_config
}

fn has_chat_template(entry: &Entry, _: &ImageBackends) -> bool {
    let in_json = entry
        .json
        .as_ref()
        .is_some_and(|m| m.contains_key("chat_template"));
    let in_config = config(entry).is_some_and(|c| c.parameters.contains_key("chat_template"));
    in_json || in_config || has_extension(entry, &["jinja", "jinja2", "j2"])
}
