//! Plugins that travel with their model on a multi-model endpoint. A model artifact may carry a
//! `plugins.toml` beside its `config.pbtxt`: a plugin manifest whose `.wasm` files are in the
//! artifact too. `POST /models` loads them with the model (the load fails with 400, naming the
//! plugin, and nothing is loaded, when one cannot be), `POST /models/{name}/invoke` uses them
//! instead of the container's, and unloading the model drops them.
//!
//! The container's manifest stays in charge. Its `require_signatures`, `trusted_keys` and
//! `require_cases` apply to a model's plugins (whose golden cases run at the model's load), its `compile_cache` and OOM policy are the only ones, and its
//! `[model_plugins]` rules say whether artifacts may bring plugins and the most memory and time
//! their plugins may ask for: a model's manifest can narrow the limits, never widen them. It
//! may not set those keys itself, route any model but its own (`[models."*"]`), or name a file
//! outside the model's folder. Each model's plugins run in an engine of their own, so one
//! customer's plugins never share a pool with another's.

use std::path::{Path, PathBuf};

use super::PluginHost;
use crate::plugins::platform::manifest::{Manifest, ModelPluginRules};
use crate::plugins::runtime::engine::Pool;

/// The manifest a model artifact may carry, beside its `config.pbtxt`.
pub const MODEL_MANIFEST: &str = "plugins.toml";

/// The most plugins a model's manifest may name: each is compiled at the model's load and keeps
/// instances ready in the model's 32-slot pool, so a manifest of hundreds (one file named under
/// many names) would spend the endpoint's CPU on compiles and leave its own calls no slots.
pub const MAX_MODEL_PLUGINS: usize = 16;

/// The manifest keys only the container's manifest may set.
const CONTAINER_KEYS: [&str; 6] = [
    "require_signatures",
    "require_cases",
    "trusted_keys",
    "oom",
    "compile_cache",
    "model_plugins",
];

/// What the container's manifest (or its absence) says about the plugins models bring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelPluginPolicy {
    /// The container's `[model_plugins]` rules.
    pub rules: ModelPluginRules,
    /// The container's `require_signatures`, which a model's plugins must meet too.
    pub require_signatures: bool,
    /// The container's `trusted_keys`, which a model's plugins are checked against too.
    pub trusted_keys: Vec<String>,
    /// The container's `require_cases`, which a model's plugins must meet too.
    pub require_cases: bool,
    /// The container's `compile_cache`, as it wrote it.
    pub compile_cache: Option<PathBuf>,
    /// Whether Secure Mode holds models' plugins ([`super::secure_mode::hold_model_policy`]).
    pub secure_mode: bool,
}

impl ModelPluginPolicy {
    /// The policy the container's manifest sets.
    pub fn of(container: &Manifest) -> ModelPluginPolicy {
        ModelPluginPolicy {
            rules: container.model_plugins.clone(),
            require_signatures: container.require_signatures,
            trusted_keys: container.trusted_keys.clone(),
            require_cases: container.require_cases,
            compile_cache: container.compile_cache.clone(),
            secure_mode: container.secure_mode,
        }
    }
}

/// Loads the plugins of the model whose folder (the one holding `config.pbtxt`) is `model_dir`:
/// none when it has no `plugins.toml`; an error a client can read (400) when it has one that
/// cannot be used. The artifact's files are read off the serving threads, each within
/// [`crate::files::READ_DEADLINE`].
pub async fn load(
    model_dir: &Path,
    policy: &ModelPluginPolicy,
) -> Result<Option<PluginHost>, String> {
    let fail = |message: String| format!("the model's {MODEL_MANIFEST}: {message}");
    let manifest_path = model_dir.join(MODEL_MANIFEST);
    let (dir, owned_policy) = (model_dir.to_owned(), policy.clone());
    let manifest =
        crate::files::off_thread(&manifest_path, move || read_manifest(&dir, &owned_policy))
            .await
            .map_err(|e| fail(e.to_string()))??;
    let Some(manifest) = manifest else {
        return Ok(None);
    };
    let pool = Pool::Model {
        concurrency: policy.rules.calls_at_once(),
        budget_bytes: policy.rules.budget_mb.saturating_mul(1 << 20),
    };
    PluginHost::load_in(&manifest, pool)
        .await
        .map(Some)
        .map_err(|e| fail(e.to_string()))
}

/// The model's manifest, checked against `policy` (file system calls: run off the serving
/// threads).
fn read_manifest(model_dir: &Path, policy: &ModelPluginPolicy) -> Result<Option<Manifest>, String> {
    let path = model_dir.join(MODEL_MANIFEST);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Ok(None);
    };
    let fail = |message: String| format!("the model's {MODEL_MANIFEST}: {message}");
    if !meta.is_file() {
        // A link could point anywhere, and a parse error would quote what it points at.
        return Err(fail("is not a plain file".into()));
    }
    if !policy.rules.allowed {
        return Err(fail(
            "this endpoint does not take plugins from model artifacts".into(),
        ));
    }
    let text = crate::files::read_regular_text(
        &path,
        crate::plugins::platform::manifest::MAX_MANIFEST_BYTES,
    )
    .map_err(|e| fail(e.to_string()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| fail(e.to_string()))?;
    if let Some(key) = CONTAINER_KEYS.iter().find(|key| table.contains_key(**key)) {
        return Err(fail(format!(
            "`{key}` is the container's to set, not a model's"
        )));
    }
    let mut manifest = Manifest::from_text(&path, &text).map_err(|e| fail(e.message))?;
    // A limit the model's manifest leaves out is the default, or the ceiling when lower.
    let given = |plugin: &str, key: &str| {
        table
            .get("plugins")
            .and_then(|plugins| plugins.get(plugin))
            .is_some_and(|spec| spec.get(key).is_some())
    };
    let rules = &policy.rules;
    for (name, spec) in &mut manifest.plugins {
        if !given(name, "memory_limit_mb") {
            spec.memory_limit_mb = spec.memory_limit_mb.min(rules.memory_limit_mb);
        }
        if !given(name, "time_limit_ms") {
            spec.time_limit_ms = spec.time_limit_ms.min(rules.time_limit_ms);
        }
        if !given(name, "init_time_limit_ms") {
            spec.init_time_limit_ms = spec.init_time_limit_ms.min(rules.init_time_limit_ms);
        }
    }
    check(&manifest, model_dir, rules).map_err(fail)?;
    manifest.require_signatures = policy.require_signatures;
    manifest.trusted_keys = policy.trusted_keys.clone();
    manifest.require_cases = policy.require_cases;
    manifest.compile_cache = policy.compile_cache.clone();
    manifest.secure_mode = policy.secure_mode;
    Ok(Some(manifest))
}

/// A model's manifest routes only its own model, names only files in its folder, calls no
/// model (`models`: the names a tenant could reach are other tenants' models, and the name its
/// own model serves under is the load's to choose), and asks for no more than the container's
/// ceilings.
fn check(manifest: &Manifest, model_dir: &Path, rules: &ModelPluginRules) -> Result<(), String> {
    if let Some(model) = manifest.models.keys().find(|model| *model != "*") {
        return Err(format!(
            "[models.{model}]: a model's plugins serve only that model; route them with \
             [models.\"*\"]"
        ));
    }
    if !manifest.models.contains_key("*") {
        return Err("routes no plugins: add [models.\"*\"] with request or response".into());
    }
    if manifest.plugins.len() > MAX_MODEL_PLUGINS {
        return Err(format!(
            "names {} plugins; a model's manifest may name at most {MAX_MODEL_PLUGINS}",
            manifest.plugins.len()
        ));
    }
    let folder = model_dir.canonicalize().map_err(|e| e.to_string())?;
    for (name, spec) in &manifest.plugins {
        let inside = spec
            .path
            .canonicalize()
            .is_ok_and(|path| path.starts_with(&folder));
        if !inside {
            return Err(format!(
                "plugin '{name}': {} is not a file in the model's folder",
                spec.path
                    .strip_prefix(model_dir)
                    .unwrap_or(&spec.path)
                    .display()
            ));
        }
        if !spec.models.is_empty() {
            return Err(format!(
                "plugin '{name}': models = [...]: a model artifact's plugins may not call \
                 models; a pipeline is the container's manifest's to configure"
            ));
        }
        if spec.memory_limit_mb > rules.memory_limit_mb {
            return Err(format!(
                "plugin '{name}': memory_limit_mb = {} is above this endpoint's {}",
                spec.memory_limit_mb, rules.memory_limit_mb
            ));
        }
        if spec.time_limit_ms > rules.time_limit_ms {
            return Err(format!(
                "plugin '{name}': time_limit_ms = {} is above this endpoint's {}",
                spec.time_limit_ms, rules.time_limit_ms
            ));
        }
        if spec.init_time_limit_ms > rules.init_time_limit_ms {
            return Err(format!(
                "plugin '{name}': init_time_limit_ms = {} is above this endpoint's {} \
                 ([model_plugins] init_time_limit_ms)",
                spec.init_time_limit_ms, rules.init_time_limit_ms
            ));
        }
    }
    Ok(())
}
