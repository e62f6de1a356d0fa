//! Loaded plugins and the calls into them. Each plugin is read, checked against its digest (and
//! signature when required), compiled once and pre-instantiated at load; every call runs in a
//! fresh instance in a new limited store (made ahead of time, [`super::warm`]), so no state
//! survives from one request to the next.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;

use super::boundary::{AdaptedRequest, HookResult, PluginInvocation, PluginReply, converted};
use super::compile_cache::CompileCache;
use super::convert;
use super::manifest::{Manifest, ModelPlugins, PluginSpec};
use super::model_plugins::ModelPluginPolicy;
use super::runtime::{Limits, Pool, Runtime};
use super::variants::{Weighted, choose};

mod generate;
mod hooks;
use hooks::Hooks;

use super::bindings::request::exports::trident::plugin::request_adapter::Adapted;
use super::bindings::response::exports::trident::plugin::response_adapter::InferenceResult;
use crate::engine::InferResponse;

/// A plugin, compiled and pre-instantiated.
pub struct LoadedPlugin {
    /// The plugin's name in the manifest's `[plugins]`.
    pub name: Arc<str>,
    limits: Limits,
    content_types: Vec<String>,
    accept: Vec<String>,
    /// Lower-cased names of the request headers the plugin may see.
    pub headers: Vec<String>,
    /// The worlds it exports, each ready to call ([`hooks`]).
    hooks: Hooks,
}

/// Whether a header value (`Content-Type`, or an `Accept` list) names a media type of `list`
/// (every type when `list` is empty). Types compare without their parameters and case: an entry
/// `text/csv` takes `text/csv; charset=utf-8` but not `text/csvx`; `type/*` takes any subtype
/// and `*/*` anything. Each media range of an `Accept` list counts, except those with `q=0`
/// (refused by the client).
fn media_matches(list: &[String], value: Option<&str>) -> bool {
    if list.is_empty() {
        return true;
    }
    let value = value.unwrap_or("");
    value.split(',').any(|range| {
        let mut parts = range.split(';');
        let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = parts.any(|p| {
            p.split_once('=').is_some_and(|(name, q)| {
                name.trim().eq_ignore_ascii_case("q") && q.trim().parse::<f32>() == Ok(0.0)
            })
        });
        !refused
            && list.iter().any(|entry| {
                let entry = entry.to_ascii_lowercase();
                entry == "*/*"
                    || entry == essence
                    || entry
                        .strip_suffix('*')
                        .is_some_and(|kind| kind.ends_with('/') && essence.starts_with(kind))
            })
    })
}

impl LoadedPlugin {
    /// The manifest's `content_types` for this plugin (empty: every type).
    pub fn content_types(&self) -> &[String] {
        &self.content_types
    }

    /// Whether the manifest's `content_types` for this plugin include `content_type` (every
    /// type when it lists none).
    pub fn accepts_content_type(&self, content_type: Option<&str>) -> bool {
        media_matches(&self.content_types, content_type)
    }

    /// Whether this request adapter takes a body of `content_type`.
    pub fn serves_content_type(&self, content_type: Option<&str>) -> bool {
        self.hooks.request.is_some() && media_matches(&self.content_types, content_type)
    }

    /// Whether this response adapter's `accept` list explicitly names `accept`.
    pub fn claims_accept(&self, accept: Option<&str>) -> bool {
        self.hooks.response.is_some()
            && !self.accept.is_empty()
            && accept.is_some()
            && media_matches(&self.accept, accept)
    }

    /// Whether this response adapter answers a request that accepts `accept`.
    pub fn serves_accept(&self, accept: Option<&str>) -> bool {
        self.hooks.response.is_some() && (accept.is_none() || media_matches(&self.accept, accept))
    }
    /// What trident withheld from this plugin since it was loaded.
    pub fn counters(&self) -> &super::counters::PluginCounters {
        &self.limits.counters
    }
}

/// The adapters chosen for one request.
#[derive(Clone, Default)]
pub struct Selection {
    /// The A/B variant, when the model has variants.
    pub variant: Option<String>,
    /// The request adapter, if the model (or its variant) has one.
    pub request: Option<Arc<LoadedPlugin>>,
    /// The response adapter, if the model (or its variant) has one.
    pub response: Option<Arc<LoadedPlugin>>,
}

#[derive(Clone)]
struct Arm {
    request: Option<Arc<LoadedPlugin>>,
    response: Option<Arc<LoadedPlugin>>,
}

enum Routing {
    Single(Arm),
    Variants {
        weights: Vec<Weighted>,
        arms: Vec<Arm>,
    },
}

/// The plugin the manifest names for a role, refused when it does not export what the role
/// calls.
fn named(
    plugin: Option<Arc<LoadedPlugin>>,
    exports: impl Fn(&LoadedPlugin) -> bool,
    role: &str,
    hook: &str,
) -> Result<Option<Arc<LoadedPlugin>>, LoadError> {
    match plugin {
        Some(plugin) if !exports(&plugin) => Err(LoadError {
            plugin: plugin.name.to_string(),
            message: format!("named as {role} but does not export {hook}"),
        }),
        plugin => Ok(plugin),
    }
}

/// Every plugin of a manifest, ready to call.
pub struct PluginHost {
    runtime: Runtime,
    plugins: BTreeMap<String, Arc<LoadedPlugin>>,
    models: BTreeMap<String, Routing>,
    oom: Option<Arc<LoadedPlugin>>,
    openai_chat: Option<Arc<LoadedPlugin>>,
    requests: AtomicU64,
    compiled: Compiled,
    model_policy: ModelPluginPolicy,
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost")
            .field("plugins", &self.plugins.keys().collect::<Vec<_>>())
            .field("models", &self.models.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// How a host's plugins came to be compiled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compiled {
    /// Read from the compile cache.
    pub from_cache: usize,
    /// Compiled at this load (and, with a cache, written to it).
    pub compiled: usize,
}

/// A plugin that cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plugin '{plugin}': {message}")]
pub struct LoadError {
    /// The plugin's name in the manifest; `*` when the WebAssembly runtime could not start.
    pub plugin: String,
    /// Why it cannot be loaded.
    pub message: String,
}

/// How a model's requests reach its adapters: one arm, or weighted variants.
fn routing(
    model: &str,
    spec: &ModelPlugins,
    get: impl Fn(&Option<String>) -> Option<Arc<LoadedPlugin>>,
) -> Result<Routing, LoadError> {
    if spec.variants.is_empty() {
        let arm = Arm {
            request: get(&spec.request),
            response: get(&spec.response),
        };
        check_arm(model, &arm)?;
        return Ok(Routing::Single(arm));
    }
    let mut arms = Vec::new();
    for variant in &spec.variants {
        let arm = Arm {
            request: get(&variant.request),
            response: get(&variant.response),
        };
        check_arm(model, &arm)?;
        arms.push(arm);
    }
    let weights = spec
        .variants
        .iter()
        .map(|v| Weighted {
            name: v.name.clone(),
            weight: v.weight,
        })
        .collect();
    Ok(Routing::Variants { weights, arms })
}

/// Each plugin of an arm exports the hook the arm uses it for.
fn check_arm(model: &str, arm: &Arm) -> Result<(), LoadError> {
    let roles = [
        (
            &arm.request,
            "request adapter",
            arm.request
                .as_ref()
                .is_none_or(|p| p.hooks.request.is_some() || p.hooks.generate_request.is_some()),
        ),
        (
            &arm.response,
            "response adapter",
            arm.response.as_ref().is_none_or(|p| {
                p.hooks.response.is_some()
                    || p.hooks.generate_response.is_some()
                    || p.hooks.stream.is_some()
            }),
        ),
    ];
    for (plugin, role, exported) in roles {
        if !exported {
            return Err(LoadError {
                plugin: plugin
                    .as_ref()
                    .map(|p| p.name.to_string())
                    .unwrap_or_default(),
                message: format!("model '{model}' uses it as a {role}, which it does not export"),
            });
        }
    }
    Ok(())
}

/// The lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl PluginHost {
    /// Loads every plugin of the container's `manifest`: digest, signature, compilation,
    /// pre-instantiation and the plugin's own configuration check. Any failure refuses the
    /// whole manifest.
    pub async fn load(manifest: &Manifest) -> Result<PluginHost, LoadError> {
        PluginHost::load_in(manifest, Pool::Container).await
    }

    /// [`PluginHost::load`], in an engine whose pool is sized for `pool`.
    pub async fn load_in(manifest: &Manifest, pool: Pool) -> Result<PluginHost, LoadError> {
        let max_memory = manifest
            .plugins
            .values()
            .map(|spec| spec.memory_limit_mb)
            .max()
            .unwrap_or(super::manifest::DEFAULT_MEMORY_LIMIT_MB);
        let max_memory = usize::try_from(max_memory.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        let cache = open_cache_off_thread(manifest).await;
        let runtime = Runtime::new(max_memory, cache.as_ref(), pool).map_err(|e| LoadError {
            plugin: "*".into(),
            message: format!("cannot start the WebAssembly runtime: {e}"),
        })?;
        let mut plugins = BTreeMap::new();
        let mut loaded = Ok(());
        for (name, spec) in &manifest.plugins {
            match load_one(&runtime, manifest, name, spec).await {
                Ok(plugin) => drop(plugins.insert(name.clone(), plugin)),
                Err(message) => {
                    loaded = Err(LoadError {
                        plugin: name.clone(),
                        message,
                    });
                    break;
                }
            }
        }
        // What compiled before a failure is as good as any other entry: recorded either way.
        let cache = seal_off_thread(cache).await;
        let compiled = match &cache {
            Some(cache) => {
                let (from_cache, compiled) = cache.hits_and_misses();
                Compiled {
                    from_cache,
                    compiled,
                }
            }
            None => Compiled {
                from_cache: 0,
                compiled: plugins.len(),
            },
        };
        loaded?;
        tracing::info!(
            from_cache = compiled.from_cache,
            compiled = compiled.compiled,
            "plugins compiled"
        );
        let get = |name: &Option<String>| name.as_ref().map(|n| Arc::clone(&plugins[n]));
        let mut models = BTreeMap::new();
        for (model, spec) in &manifest.models {
            models.insert(model.clone(), routing(model, spec, get)?);
        }
        let oom = named(
            get(&manifest.oom),
            |p| p.hooks.oom.is_some(),
            "the oom policy",
            "oom-classifier",
        )?;
        let openai_chat = named(
            get(&manifest.openai_chat),
            LoadedPlugin::adapts_generate_requests,
            "the openai_chat plugin",
            "generate-request-adapter",
        )?;
        Ok(PluginHost {
            runtime,
            plugins,
            models,
            oom,
            openai_chat,
            requests: AtomicU64::new(0),
            compiled,
            model_policy: ModelPluginPolicy::of(manifest),
        })
    }

    /// What this (the container's) manifest lets model artifacts' own plugins do.
    pub fn model_policy(&self) -> &ModelPluginPolicy {
        &self.model_policy
    }

    /// How many of the plugins were read from the compile cache and how many compiled.
    pub fn compiled(&self) -> Compiled {
        self.compiled
    }

    /// The loaded plugins, by name.
    pub fn plugins(&self) -> impl Iterator<Item = &Arc<LoadedPlugin>> {
        self.plugins.values()
    }

    /// The adapters for a request to `model` (its own entry, else `*`), choosing a variant when
    /// the model has several.
    pub fn select(
        &self,
        model: &str,
        target_variant: Option<&str>,
        inference_id: Option<&str>,
    ) -> Option<Selection> {
        let routing = self.models.get(model).or_else(|| self.models.get("*"))?;
        Some(match routing {
            Routing::Single(arm) => Selection {
                variant: None,
                request: arm.request.clone(),
                response: arm.response.clone(),
            },
            Routing::Variants { weights, arms } => {
                // A cheap, well-spread sequence for requests without an inference id.
                let random = self
                    .requests
                    .fetch_add(1, Ordering::Relaxed)
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let index = choose(weights, target_variant, inference_id, random >> 11);
                Selection {
                    variant: Some(weights[index].name.clone()),
                    request: arms[index].request.clone(),
                    response: arms[index].response.clone(),
                }
            }
        })
    }

    /// The adapters of OpenAI's chat completions route: the `openai_chat` plugin for the
    /// request and the answer, or `None` when the manifest names none.
    pub fn openai_chat(&self) -> Option<Selection> {
        let plugin = self.openai_chat.as_ref()?;
        Some(Selection {
            variant: None,
            request: Some(Arc::clone(plugin)),
            response: Some(Arc::clone(plugin)),
        })
    }

    /// Calls a request adapter.
    pub async fn adapt_request(
        &self,
        plugin: &Arc<LoadedPlugin>,
        invocation: &PluginInvocation,
    ) -> HookResult<AdaptedRequest> {
        let (session, invocation) = (invocation.session.clone(), Arc::clone(&invocation.wit));
        let adapted = self
            .call(
                plugin,
                session,
                |hooks| hooks.request.as_ref(),
                move |instance, store| {
                    Box::pin(async move {
                        instance
                            .trident_plugin_request_adapter()
                            .call_adapt_request(store, &invocation)
                            .await
                    })
                },
            )
            .await;
        converted(adapted, |adapted| match adapted {
            Adapted::Tensors(tensors) => AdaptedRequest::Tensors {
                inputs: tensors
                    .inputs
                    .into_iter()
                    .map(convert::input_from_wit)
                    .collect(),
                outputs: tensors.outputs,
            },
            Adapted::V2Json(json) => AdaptedRequest::V2Json(json),
        })
    }

    /// Calls a response adapter with the model's `response`.
    pub async fn adapt_response(
        &self,
        plugin: &Arc<LoadedPlugin>,
        invocation: &PluginInvocation,
        response: &InferResponse,
    ) -> HookResult<PluginReply> {
        let (session, invocation) = (invocation.session.clone(), Arc::clone(&invocation.wit));
        let result = InferenceResult {
            model_name: response.model_name.clone(),
            model_version: response.model_version.to_string(),
            outputs: response
                .outputs
                .iter()
                .map(convert::output_to_wit)
                .collect(),
        };
        let reply = self
            .call(
                plugin,
                session,
                |hooks| hooks.response.as_ref(),
                move |instance, store| {
                    Box::pin(async move {
                        instance
                            .trident_plugin_response_adapter()
                            .call_adapt_response(store, &invocation, &result)
                            .await
                    })
                },
            )
            .await;
        converted(reply, PluginReply::from)
    }

    /// The configured OOM policy's verdict on an engine error message; `None` when no OOM
    /// plugin is configured or it failed (the caller then uses the built-in list).
    pub async fn is_out_of_memory(&self, message: &str) -> Option<bool> {
        let plugin = self.oom.as_ref()?;
        plugin.hooks.oom.as_ref()?;
        let message = message.to_owned();
        let verdict = self
            .call(
                plugin,
                None,
                |hooks| hooks.oom.as_ref(),
                move |instance, store| {
                    Box::pin(async move {
                        instance
                            .trident_plugin_oom_classifier()
                            .call_is_out_of_memory(store, &message)
                            .await
                    })
                },
            )
            .await;
        match verdict {
            Ok(verdict) => Some(verdict),
            Err(error) => {
                tracing::warn!(%error, "the OOM plugin failed; using the built-in list");
                None
            }
        }
    }
}

/// [`open_cache`] on the blocking pool: opening hashes every entry (each is verified before
/// use), which must not hold a serving thread, like every file read and compile of a load.
async fn open_cache_off_thread(manifest: &Manifest) -> Option<CompileCache> {
    let manifest = manifest.clone();
    tokio::task::spawn_blocking(move || open_cache(&manifest))
        .await
        .unwrap_or(None)
}

/// Seals `cache` (hashing the entries this load wrote) on the blocking pool.
async fn seal_off_thread(cache: Option<CompileCache>) -> Option<CompileCache> {
    tokio::task::spawn_blocking(move || {
        if let Some(cache) = &cache {
            cache.seal();
        }
        cache
    })
    .await
    .unwrap_or(None)
}

/// The manifest's compile cache, opened; none when it is turned off or unusable (a warning
/// says why: plugins are then compiled at every start).
fn open_cache(manifest: &Manifest) -> Option<CompileCache> {
    let dir = match &manifest.compile_cache {
        Some(dir) if dir.as_os_str().is_empty() => return None,
        Some(dir) => dir.clone(),
        None => super::compile_cache::default_dir()?,
    };
    CompileCache::open(&dir)
        .inspect_err(|error| tracing::warn!(%error, "plugins will be compiled without a cache"))
        .ok()
}

/// Bytes a plugin's `.wasm` file may have (a componentize-py component is ~18 MB).
pub const MAX_PLUGIN_BYTES: u64 = 256 << 20;

/// The plugin's bytes, read (a regular file within [`MAX_PLUGIN_BYTES`]), checked against the
/// manifest's digest and, when the manifest requires it, a trusted signature; every file read
/// and the hashing run off the serving threads.
async fn verified_bytes(manifest: &Manifest, spec: &PluginSpec) -> Result<Vec<u8>, String> {
    let bytes = crate::files::read(&spec.path, MAX_PLUGIN_BYTES)
        .await
        .map_err(|e| e.to_string())?;
    // Hashing hundreds of megabytes takes a while too: on the blocking pool.
    let (digest, bytes) = tokio::task::spawn_blocking(move || (sha256_hex(&bytes), bytes))
        .await
        .map_err(|e| format!("hashing failed: {e}"))?;
    if !digest.eq_ignore_ascii_case(&spec.sha256) {
        return Err(format!(
            "sha256 mismatch for {}: the manifest pins {}, the file is {digest}",
            spec.path.display(),
            spec.sha256
        ));
    }
    if manifest.require_signatures {
        let signature = match &spec.signature {
            Some(signature) => Some(signature.clone()),
            None => super::signing::read_signature_file(&spec.path).await?,
        };
        super::signing::verify_plugin(
            &bytes,
            &spec.path,
            signature.as_deref(),
            &manifest.trusted_keys,
        )?;
    }
    Ok(bytes)
}

async fn load_one(
    runtime: &Runtime,
    manifest: &Manifest,
    name: &str,
    spec: &PluginSpec,
) -> Result<Arc<LoadedPlugin>, String> {
    let bytes = verified_bytes(manifest, spec).await?;
    // Compiling (seconds for a Python guest) runs on the blocking pool: a load must not hold
    // a serving thread.
    let (engine, linker) = (runtime.engine.clone(), runtime.linker.clone());
    let pre = tokio::task::spawn_blocking(move || {
        let component =
            Component::new(&engine, &bytes).map_err(|e| format!("not a valid component: {e}"))?;
        linker
            .instantiate_pre(&component)
            .map_err(|e| format!("imports something trident does not offer: {e}"))
    })
    .await
    .map_err(|e| format!("compiling failed: {e}"))??;
    let plugin = LoadedPlugin {
        name: Arc::from(name),
        limits: runtime.limits(
            name,
            spec.config_strings(),
            spec.memory_limit_mb,
            spec.time_limit_ms,
        ),
        content_types: spec.content_types.clone(),
        accept: spec.accept.clone(),
        headers: spec
            .headers
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
        hooks: Hooks::of(&pre),
    };
    if !plugin.hooks.any() {
        return Err(hooks::EXPORTS_NONE.into());
    }
    let plugin = Arc::new(plugin);
    hooks::check_config(runtime, &plugin).await?;
    tracing::info!(plugin = name, sha256 = %spec.sha256, "plugin loaded");
    Ok(plugin)
}

#[cfg(test)]
mod tests {
    use super::media_matches;

    #[test]
    fn media_types_match_without_parameters_and_not_by_prefix() {
        let csv = vec!["text/csv".to_owned()];
        assert!(media_matches(&csv, Some("text/csv")));
        assert!(media_matches(&csv, Some("Text/CSV; charset=utf-8")));
        assert!(!media_matches(&csv, Some("text/csvx")));
        assert!(!media_matches(&csv, Some("text/cs")));
        assert!(!media_matches(&csv, None));
        assert!(media_matches(&[], None));
        let json = vec!["application/json".to_owned()];
        assert!(!media_matches(&json, Some("application/jsonlines")));
        // Accept lists: any range counts, except one the client refuses with q=0.
        assert!(media_matches(
            &csv,
            Some("application/json, text/csv;q=0.5")
        ));
        assert!(!media_matches(&csv, Some("application/json, text/csv;q=0")));
        assert!(!media_matches(&csv, Some("*/*")));
        // Wildcards on the plugin's side.
        assert!(media_matches(&["text/*".to_owned()], Some("text/plain")));
        assert!(!media_matches(
            &["text/*".to_owned()],
            Some("textual/plain")
        ));
        assert!(media_matches(&["*/*".to_owned()], Some("image/png")));
    }
}
