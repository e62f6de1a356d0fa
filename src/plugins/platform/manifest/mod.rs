//! The plugin manifest (TOML): which WebAssembly plugins to load, pinned by digest, with their
//! limits and configuration, and which models use them. Unknown keys are refused by name.
//!
//! ```toml
//! require_signatures = false          # true: every plugin needs a trusted ed25519 signature
//! trusted_keys = []                   # hex public keys
//! require_cases = false               # true: every plugin must carry golden cases
//! oom = "oom"                         # the plugin deciding which errors are out-of-memory
//! openai_chat = "chat"                # the generate adapter serving /v1/chat/completions and
//!                                     # /openai/v1/chat/completions (on the default model)
//! compile_cache = "/var/cache/trident" # compiled plugins kept between starts ("" for none;
//!                                     # default ~/.cache/trident/plugins)
//!
//! [model_plugins]                     # what a multi-model artifact's own plugins.toml may do
//! allowed = true
//! memory_limit_mb = 64                # ceilings its plugins' limits may not exceed
//! time_limit_ms = 100
//! init_time_limit_ms = 5000           # and on its initialisation at the model's load
//! budget_mb = 512                     # what one model's plugins may hold in the process
//! concurrency = 1                     # calls of one model's plugins at once (default: half
//!                                     # the cores, at least 1; at most 16)
//!
//! [plugins.csv]
//! path = "csv_request.wasm"           # relative to the manifest
//! sha256 = "<64 hex digits>"
//! memory_limit_mb = 64
//! time_limit_ms = 100
//! init_time_limit_ms = 5000           # its check-config, run once at load (builds its state)
//! content_types = ["text/csv"]        # request adapters: Content-Types it serves (empty: all)
//! accept = []                         # response adapters: Accept values it serves (empty: all)
//! headers = ["x-tenant"]              # other request headers it may read
//! config = { input = "INPUT0", datatype = "FP32" }
//! assets = { labels = { path = "labels.txt", sha256 = "<64 hex digits>" } }
//!                                     # files the plugin reads (`assets.get("labels")`),
//!                                     # beside the manifest; see `crate::plugins::runtime::assets`
//! cases = { path = "csv.cases.toml", sha256 = "<64 hex digits>" }
//!                                     # golden cases, run before it serves (`super::cases`)
//! models = []                         # models its calls may call (`trident:models`; not in a
//!                                     # model artifact's manifest)
//! max_model_calls = 64                # model calls per request
//! max_model_mb = 256                  # MiB of tensors in and out per request
//!
//! [models.add_sub]                    # a model name, or "*" for every model
//! request = "csv"
//! response = "csv_out"
//! # or, for an A/B test, weighted variants instead of request/response:
//! # variants = [ { name = "a", weight = 90, request = "csv" }, { name = "b", weight = 10, request = "csv2" } ]
//! # or a pipeline, which answers the model's requests whole, calling models: pipeline = "ocr"
//! # and, to compare a candidate with what serves, on 10% of requests after their answer:
//! # shadow = { request = "csv2", sample = 0.1 }       # see `super::shadow`
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use crate::plugins::runtime::assets::AssetSpec;
pub use model_rules::{DEFAULT_MODEL_PLUGIN_BUDGET_MB, ModelPluginRules};
pub use plugin_spec::{PluginSpec, UnreadConfig};
pub use routes::{ModelPlugins, ShadowSpec, VariantSpec};

mod model_rules;
mod plugin_spec;
mod routes;

/// Bytes a plugin manifest may have.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Default linear memory limit per call.
pub const DEFAULT_MEMORY_LIMIT_MB: u64 = 64;
/// Default time limit per call.
pub const DEFAULT_TIME_LIMIT_MS: u64 = 100;
/// Default time limit of a plugin's initialisation at load.
pub const DEFAULT_INIT_TIME_LIMIT_MS: u64 = 5000;
/// The longest time limit a plugin's initialisation may ask for.
pub const MAX_INIT_TIME_LIMIT_MS: u64 = 60_000;

/// A parsed, checked manifest.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Whether every plugin needs a valid signature from one of `trusted_keys`; default false.
    #[serde(default)]
    pub require_signatures: bool,
    /// Whether every plugin must carry golden cases ([`super::cases`]); default false.
    #[serde(default)]
    pub require_cases: bool,
    /// The hex ed25519 public keys whose signatures are trusted.
    #[serde(default)]
    pub trusted_keys: Vec<String>,
    /// The plugin, by name, that decides which engine errors are out-of-memory; it must export
    /// `oom-classifier`. Absent: the built-in list decides.
    #[serde(default)]
    pub oom: Option<String>,
    /// The plugin, by name, that serves OpenAI's chat completions route
    /// (`/v1/chat/completions`, `/openai/v1/chat/completions`) on the default model; it must
    /// export the generate request adapter (and the generate response or stream adapter for
    /// its answers). Absent: the route answers 404.
    #[serde(default)]
    pub openai_chat: Option<String>,
    /// Where compiled plugins are kept between starts (relative to the manifest); absent: the
    /// default folder ([`crate::plugins::runtime::compile_cache::default_dir`]); empty: no cache.
    #[serde(default)]
    pub compile_cache: Option<PathBuf>,
    /// What the plugins a model artifact brings may do ([`crate::plugins::host::model_plugins`]).
    #[serde(default)]
    pub model_plugins: ModelPluginRules,
    /// The plugins, by name (`[plugins.<name>]`).
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginSpec>,
    /// The adapters of each model, by model name (`[models.<name>]`); `*` serves every model
    /// without an entry of its own.
    #[serde(default)]
    pub models: BTreeMap<String, ModelPlugins>,
    /// Whether Secure Mode holds these plugins (set by [`crate::plugins::host::secure_mode`], never by the
    /// manifest): their assets must then be kinds of file Secure Mode allows.
    #[serde(skip)]
    pub secure_mode: bool,
    /// The folder the plugins' assets must stay inside: the manifest's (set when it is read).
    #[serde(skip)]
    pub folder: PathBuf,
}

/// A manifest that cannot be used, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugin manifest {path}: {message}")]
pub struct ManifestError {
    /// The manifest's path, as it was given.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl Manifest {
    /// Reads and checks a manifest file (a regular file of at most [`MAX_MANIFEST_BYTES`]);
    /// plugin paths are resolved against its folder.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text = crate::files::read_regular_text(path, MAX_MANIFEST_BYTES).map_err(|e| {
            ManifestError {
                path: path.display().to_string(),
                message: e.to_string(),
            }
        })?;
        Manifest::from_text(path, &text)
    }

    /// Checks `text`, the manifest read from `path`; plugin paths are resolved against its
    /// folder.
    pub fn from_text(path: &Path, text: &str) -> Result<Manifest, ManifestError> {
        let fail = |message: String| ManifestError {
            path: path.display().to_string(),
            message,
        };
        let mut manifest = Manifest::parse(text).map_err(fail)?;
        // A bare file name (`plugins.toml`) has the empty path for its parent: the current
        // folder, which a canonical path needs spelled as `.`.
        let base = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        if let Some(cache) = &mut manifest.compile_cache
            && cache.is_relative()
            && !cache.as_os_str().is_empty()
        {
            *cache = base.join(&*cache);
        }
        for spec in manifest.plugins.values_mut() {
            if spec.path.is_relative() {
                spec.path = base.join(&spec.path);
            }
            for asset in spec.assets.values_mut().chain(spec.cases.as_mut()) {
                asset.path = base.join(&asset.path);
            }
        }
        base.clone_into(&mut manifest.folder);
        Ok(manifest)
    }

    /// Parses and checks manifest text.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let manifest: Manifest = toml::from_str(text).map_err(|e| e.to_string())?;
        manifest.check()?;
        Ok(manifest)
    }

    fn check(&self) -> Result<(), String> {
        let most = crate::plugins::runtime::engine::MAX_MODEL_CONCURRENCY;
        if let Some(calls) = self.model_plugins.concurrency
            && !(1..=most).contains(&calls)
        {
            return Err(format!(
                "[model_plugins] concurrency = {calls}: give 1 to {most} calls at once"
            ));
        }
        if self.model_plugins.budget_mb == 0 {
            return Err("[model_plugins] budget_mb = 0: give at least 1 MiB".into());
        }
        let init = self.model_plugins.init_time_limit_ms;
        if !(1..=MAX_INIT_TIME_LIMIT_MS).contains(&init) {
            return Err(format!(
                "[model_plugins] init_time_limit_ms = {init}: give 1 to {MAX_INIT_TIME_LIMIT_MS}"
            ));
        }
        for (name, spec) in &self.plugins {
            if name.is_empty() {
                return Err("a plugin needs a name: [plugins.\"\"] is not one".into());
            }
            spec.check()
                .map_err(|message| format!("plugin '{name}': {message}"))?;
        }
        self.check_routes()?;
        if self.require_signatures && self.trusted_keys.is_empty() {
            return Err("require_signatures is set but trusted_keys is empty".into());
        }
        Ok(())
    }

    /// `plugin`, named by `model`'s route in `role`, is in `[plugins]`.
    fn known(&self, role: &str, model: &str, plugin: &Option<String>) -> Result<(), String> {
        match plugin {
            Some(p) if !self.plugins.contains_key(p) => Err(format!(
                "model '{model}': {role} plugin '{p}' is not in [plugins]"
            )),
            _ => Ok(()),
        }
    }

    /// Every plugin a route names is in `[plugins]`, and each model's entry gives one kind of
    /// route: adapters, a pipeline, or variants of either.
    fn check_routes(&self) -> Result<(), String> {
        self.known("oom", "*", &self.oom)?;
        self.known("openai_chat", "*", &self.openai_chat)?;
        for (model, plugins) in &self.models {
            self.known("request", model, &plugins.request)?;
            self.known("response", model, &plugins.response)?;
            self.known("pipeline", model, &plugins.pipeline)?;
            one_role(
                model,
                "",
                &plugins.pipeline,
                plugins.request.is_some() || plugins.response.is_some(),
            )?;
            self.check_shadow(model, plugins)?;
            if plugins.variants.is_empty() {
                continue;
            }
            if plugins.request.is_some() || plugins.response.is_some() || plugins.pipeline.is_some()
            {
                return Err(format!(
                    "model '{model}': give either request/response (or pipeline) or variants, \
                     not both"
                ));
            }
            let mut names: Vec<&str> = Vec::new();
            for variant in &plugins.variants {
                self.known("request", model, &variant.request)?;
                self.known("response", model, &variant.response)?;
                self.known("pipeline", model, &variant.pipeline)?;
                one_role(
                    model,
                    &format!(", variant '{}'", variant.name),
                    &variant.pipeline,
                    variant.request.is_some() || variant.response.is_some(),
                )?;
                if variant.weight == 0 {
                    return Err(format!(
                        "model '{model}': variant '{}' has weight 0",
                        variant.name
                    ));
                }
                if names.contains(&variant.name.as_str()) {
                    return Err(format!(
                        "model '{model}': variant '{}' is listed twice",
                        variant.name
                    ));
                }
                names.push(&variant.name);
            }
        }
        Ok(())
    }

    /// `model`'s shadow, if it has one: its candidates known, its settings sane, and no
    /// pipeline beside it (a shadow compares adapters).
    fn check_shadow(&self, model: &str, plugins: &ModelPlugins) -> Result<(), String> {
        let Some(shadow) = &plugins.shadow else {
            return Ok(());
        };
        let pipelines =
            plugins.pipeline.is_some() || plugins.variants.iter().any(|v| v.pipeline.is_some());
        if pipelines {
            return Err(format!(
                "model '{model}': a shadow compares adapters; a pipeline's requests cannot be \
                 shadowed"
            ));
        }
        self.known("shadow request", model, &shadow.request)?;
        self.known("shadow response", model, &shadow.response)?;
        shadow
            .check()
            .map_err(|why| format!("model '{model}': shadow: {why}"))
    }
}

/// A route gives a pipeline or adapters (`adapters`: it names a request or response adapter),
/// not both.
fn one_role(
    model: &str,
    arm: &str,
    pipeline: &Option<String>,
    adapters: bool,
) -> Result<(), String> {
    match pipeline.is_some() && adapters {
        true => Err(format!(
            "model '{model}'{arm}: a pipeline answers requests whole; give either pipeline or \
             request/response, not both"
        )),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    fn manifest(extra: &str) -> Result<Manifest, String> {
        Manifest::parse(&format!(
            "[plugins.csv]\npath = \"csv.wasm\"\nsha256 = \"{DIGEST}\"\nconfig = {{ input = \"X\", rows = 3 }}\n{extra}"
        ))
    }

    /// `--manifest plugins.toml`, a bare file name, reads its plugins and assets from the
    /// current folder (its parent is the empty path, which the folder check cannot resolve).
    #[test]
    fn a_bare_file_name_is_in_the_current_folder() {
        let text = format!(
            "[plugins.csv]\npath = \"csv.wasm\"\nsha256 = \"{DIGEST}\"\n\
             assets = {{ labels = {{ path = \"labels.txt\", sha256 = \"{DIGEST}\" }} }}\n"
        );
        let m = Manifest::from_text(Path::new("plugins.toml"), &text).unwrap();
        assert_eq!(m.folder, Path::new("."));
        assert!(m.folder.canonicalize().is_ok());
        assert_eq!(m.plugins["csv"].path, Path::new("./csv.wasm"));
        let m = Manifest::from_text(Path::new("conf/plugins.toml"), &text).unwrap();
        assert_eq!(m.folder, Path::new("conf"));
    }

    #[test]
    fn a_complete_manifest_parses_with_defaults() {
        let m = manifest("[models.add_sub]\nrequest = \"csv\"\n").unwrap();
        let csv = &m.plugins["csv"];
        assert_eq!(csv.memory_limit_mb, DEFAULT_MEMORY_LIMIT_MB);
        assert_eq!(csv.time_limit_ms, DEFAULT_TIME_LIMIT_MS);
        assert_eq!(csv.config_strings()["input"], "X");
        assert_eq!(csv.config_strings()["rows"], "3");
        assert_eq!(m.models["add_sub"].request.as_deref(), Some("csv"));
    }

    #[test]
    fn model_plugin_concurrency_is_one_to_sixteen_or_half_the_cores() {
        for calls in [0, 17, 1000] {
            let error =
                Manifest::parse(&format!("[model_plugins]\nconcurrency = {calls}\n")).unwrap_err();
            assert!(error.contains("give 1 to 16 calls at once"), "{error}");
        }
        let rules = Manifest::parse("[model_plugins]\nconcurrency = 3\n")
            .unwrap()
            .model_plugins;
        assert_eq!(rules.calls_at_once(), 3);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let default = ModelPluginRules::default().calls_at_once();
        assert_eq!(default, cores.div_ceil(2).min(16));
        assert!(default >= 1);
    }

    #[test]
    fn unknown_keys_are_refused_by_name() {
        let error =
            manifest("[models.m]\nrequest = \"csv\"\nresponse_plugin = \"x\"\n").unwrap_err();
        assert!(error.contains("response_plugin"), "{error}");
        let error = Manifest::parse("verbose = true\n").unwrap_err();
        assert!(error.contains("verbose"), "{error}");
        let error = manifest("").and_then(|_| {
            Manifest::parse(&format!(
                "[plugins.x]\npath = \"a\"\nsha256 = \"{DIGEST}\"\nmemory = 5\n"
            ))
        });
        assert!(error.unwrap_err().contains("memory"));
    }

    #[test]
    fn inconsistent_manifests_are_refused() {
        for (extra, expected) in [
            (
                "[models.m]\nrequest = \"nope\"\n",
                "'nope' is not in [plugins]",
            ),
            (
                "[models.m]\nrequest = \"csv\"\nvariants = [{ name = \"a\", weight = 1 }]\n",
                "not both",
            ),
            (
                "[models.m]\npipeline = \"csv\"\nshadow = { request = \"csv\", sample = 0.5 }\n",
                "a pipeline's requests cannot be shadowed",
            ),
            (
                "[models.m]\nvariants = [{ name = \"a\", weight = 0 }]\n",
                "weight 0",
            ),
            (
                "[models.m]\nvariants = [{ name = \"a\", weight = 1 }, { name = \"a\", weight = 1 }]\n",
                "twice",
            ),
            (
                "[models.m]\nrequest = \"csv\"\nshadow = { request = \"nope\", sample = 0.1 }\n",
                "model 'm': shadow request plugin 'nope' is not in [plugins]",
            ),
            (
                "[models.m]\nrequest = \"csv\"\nshadow = { sample = 0.1 }\n",
                "model 'm': shadow: name a candidate request or response adapter",
            ),
            (
                "[models.m]\nshadow = { request = \"csv\", sample = 0.0 }\n",
                "sample = 0: give the share of requests shadowed, above 0 and at most 1",
            ),
            (
                "[models.m]\nshadow = { request = \"csv\", sample = 1.5 }\n",
                "sample = 1.5",
            ),
            (
                "[models.m]\nshadow = { request = \"csv\", sample = nan }\n",
                "sample = NaN",
            ),
            (
                "[models.m]\nshadow = { request = \"csv\", sample = 0.5, tolerance = { absolute = -1.0 } }\n",
                "tolerance absolute = -1",
            ),
            (
                "[models.m]\nshadow = { request = \"csv\", sample = 0.5, colour = 1 }\n",
                "colour",
            ),
            (
                "[plugins.\"\"]\npath = \"a\"\nsha256 = \"abc\"\n",
                "a plugin needs a name",
            ),
        ] {
            let error = manifest(extra).unwrap_err();
            assert!(error.contains(expected), "{extra}: {error}");
        }
        let error = Manifest::parse("require_signatures = true\n").unwrap_err();
        assert!(error.contains("trusted_keys"), "{error}");
        let error = Manifest::parse("oom = \"nope\"\n").unwrap_err();
        assert!(error.contains("'nope'"), "{error}");
        let error = Manifest::parse("[plugins.x]\npath = \"a\"\nsha256 = \"abc\"\n").unwrap_err();
        assert!(error.contains("64 hex digits"));
    }

    /// A pipeline route alone (no adapters beside it, known, unshadowed), and a plugin's model
    /// names and budgets.
    #[test]
    fn pipeline_routes_and_model_keys_are_checked() {
        for (extra, expected) in [
            (
                "[models.m]\npipeline = \"csv\"\nrequest = \"csv\"\n",
                "give either pipeline or request/response",
            ),
            (
                "[models.m]\nvariants = [{ name = \"a\", weight = 1, pipeline = \"csv\", response = \"csv\" }]\n",
                "model 'm', variant 'a': a pipeline answers requests whole",
            ),
            (
                "[models.m]\npipeline = \"nope\"\n",
                "pipeline plugin 'nope' is not in [plugins]",
            ),
            (
                "models = [\"a/b\"]\n",
                "models: \"a/b\" is not a model name",
            ),
            ("models = [\"\"]\n", "models: \"\" is not a model name"),
            ("models = [\"a\", \"a\"]\n", "models: 'a' is listed twice"),
            (
                "max_model_calls = 0\n",
                "max_model_calls and max_model_mb must be above zero",
            ),
            ("max_model_mb = 5000\n", "max_model_mb = 5000 is above"),
        ] {
            let error = manifest(extra).unwrap_err();
            assert!(error.contains(expected), "{extra}: {error}");
        }
        let fine = manifest(
            "models = [\"det\", \"rec-v2\"]\nmax_model_calls = 8\n[models.m]\npipeline = \"csv\"\n",
        )
        .unwrap();
        assert_eq!(fine.models["m"].pipeline.as_deref(), Some("csv"));
        assert_eq!(fine.plugins["csv"].model_access().max_calls, 8);
    }
}
