//! One `[plugins.<name>]` entry: the file, its digests, its limits and what it may read.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// The most `max_model_mb` may give: 4 GiB of tensors a request.
const MAX_MODEL_MB: u64 = 4096;

use super::{
    AssetSpec, DEFAULT_INIT_TIME_LIMIT_MS, DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TIME_LIMIT_MS,
    MAX_INIT_TIME_LIMIT_MS,
};

/// One plugin.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSpec {
    /// The `.wasm` file; a relative path is resolved against the manifest's folder.
    pub path: PathBuf,
    /// The file's SHA-256, 64 hex digits; a file that does not match is refused.
    pub sha256: String,
    /// Hex ed25519 signature of the `.wasm` file; by default read from `<path>.sig` when present.
    #[serde(default)]
    pub signature: Option<String>,
    /// The linear memory a call may use, in MiB; default 64.
    #[serde(default = "default_memory")]
    pub memory_limit_mb: u64,
    /// How long a call may run, in milliseconds; default 100.
    #[serde(default = "default_time")]
    pub time_limit_ms: u64,
    /// How long the plugin's initialisation (its `check-config`, run once at load, where it
    /// builds its state: [`crate::plugins::runtime::snapshot`]) may run, in milliseconds; default 5000, at most
    /// [`MAX_INIT_TIME_LIMIT_MS`].
    #[serde(default = "default_init_time")]
    pub init_time_limit_ms: u64,
    /// The Content-Types a request adapter serves, matched whole without parameters and
    /// ignoring case (`text/csv` takes `text/csv; charset=utf-8`, not `text/csvx`; `text/*`
    /// takes any text type; `*/*` all); empty: all.
    #[serde(default)]
    pub content_types: Vec<String>,
    /// The Accept values a response adapter serves, matched as `content_types` is against each
    /// media range of the client's `Accept` (a range with `q=0` is refused); empty: all.
    #[serde(default)]
    pub accept: Vec<String>,
    /// Request headers the plugin may see (beyond the SageMaker ones every plugin gets).
    #[serde(default)]
    pub headers: Vec<String>,
    /// The plugin's configuration, which the guest reads through `host.config` (a value other
    /// than a string as its TOML text, [`PluginSpec::config_strings`]).
    #[serde(default)]
    pub config: BTreeMap<String, toml::Value>,
    /// What a load does with a `config` key the plugin's `check-config` did not ask for
    /// ([`crate::plugins::runtime::config`]): `refuse` it (the default: a misspelled key would
    /// leave its default serving), or `warn`, for a plugin that reads a key only in its calls.
    #[serde(default)]
    pub unread_config: UnreadConfig,
    /// Files the plugin reads, by the name it asks for them ([`crate::plugins::runtime::assets`]): each beside
    /// the manifest, pinned by its digest and covered by the plugin's signature.
    #[serde(default)]
    pub assets: BTreeMap<String, AssetSpec>,
    /// Its golden cases ([`super::super::cases`]): a file beside the manifest, pinned by its digest
    /// and covered by the plugin's signature, run at every load before the plugin serves.
    #[serde(default)]
    pub cases: Option<AssetSpec>,
    /// The models its calls may call (`trident:models`), by the names the endpoint serves them
    /// under; empty: none. A model artifact's plugin may name only its own model.
    #[serde(default)]
    pub models: Vec<String>,
    /// The most model calls one request's call of the plugin may make; default 64.
    #[serde(default = "default_max_model_calls")]
    pub max_model_calls: u32,
    /// The most MiB of tensors, in and out together, those calls may move; default 256.
    #[serde(default = "default_max_model_mb")]
    pub max_model_mb: u64,
}

fn default_max_model_calls() -> u32 {
    crate::plugins::runtime::model_calls::DEFAULT_MAX_MODEL_CALLS
}

fn default_max_model_mb() -> u64 {
    crate::plugins::runtime::model_calls::DEFAULT_MAX_MODEL_MB
}

/// What a load does with configuration keys the plugin did not read ([`PluginSpec::unread_config`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnreadConfig {
    /// The load fails, naming each key and what it may have meant.
    #[default]
    Refuse,
    /// The plugin loads; the keys are logged as a warning.
    Warn,
}

pub(super) fn default_memory() -> u64 {
    DEFAULT_MEMORY_LIMIT_MB
}

pub(super) fn default_time() -> u64 {
    DEFAULT_TIME_LIMIT_MS
}

pub(super) fn default_init_time() -> u64 {
    DEFAULT_INIT_TIME_LIMIT_MS
}

impl PluginSpec {
    /// Checks the entry's digests, limits and files, before any file is read.
    pub(super) fn check(&self) -> Result<(), String> {
        if self.sha256.len() != 64 || !self.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("sha256 must be 64 hex digits".into());
        }
        if self.memory_limit_mb == 0 || self.time_limit_ms == 0 || self.init_time_limit_ms == 0 {
            return Err("limits must be above zero".into());
        }
        if self.init_time_limit_ms > MAX_INIT_TIME_LIMIT_MS {
            return Err(format!(
                "init_time_limit_ms = {} is above the most a plugin's initialisation may \
                 take, {MAX_INIT_TIME_LIMIT_MS}",
                self.init_time_limit_ms
            ));
        }
        if self.max_model_calls == 0 || self.max_model_mb == 0 {
            return Err("max_model_calls and max_model_mb must be above zero".into());
        }
        if self.max_model_mb > MAX_MODEL_MB {
            return Err(format!(
                "max_model_mb = {} is above the most a request's model calls may move, \
                 {MAX_MODEL_MB}",
                self.max_model_mb
            ));
        }
        for (index, model) in self.models.iter().enumerate() {
            if !crate::protocol::model_name::is_addressable(model) {
                return Err(format!(
                    "models: {model:?} is not a model name an endpoint serves (letters, digits \
                     and -._~!$&'()*+,;=:@, not '.' or '..')"
                ));
            }
            if self.models[..index].contains(model) {
                return Err(format!("models: '{model}' is listed twice"));
            }
        }
        crate::plugins::runtime::assets::check_specs(&self.assets)?;
        match &self.cases {
            Some(cases) => crate::plugins::runtime::assets::check_spec("cases", cases),
            None => Ok(()),
        }
    }

    /// The models the plugin may call and its per-request budgets, as its calls check them.
    pub fn model_access(&self) -> crate::plugins::runtime::model_calls::ModelAccess {
        crate::plugins::runtime::model_calls::ModelAccess {
            models: self.models.iter().cloned().collect(),
            max_calls: self.max_model_calls,
            max_bytes: self.max_model_mb << 20,
        }
    }

    /// The configuration as strings, as the plugins read it.
    pub fn config_strings(&self) -> BTreeMap<String, String> {
        self.config
            .iter()
            .map(|(key, value)| {
                let text = match value {
                    toml::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (key.clone(), text)
            })
            .collect()
    }
}
