//! Loading a manifest's plugins: each read (a regular file within [`MAX_PLUGIN_BYTES`]) with its
//! assets and golden cases, checked against its digests (and signature when required), initialised once by its
//! own configuration check ([`crate::plugins::runtime::snapshot`]), compiled (or read from the verified compile
//! cache) and pre-instantiated; any failure refuses the whole manifest. Every file read, hash and compile runs off the serving threads.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::component::InstancePre;

use super::manifest::{Manifest, PluginSpec, UnreadConfig};
use super::plugin::{LoadError, LoadedPlugin};
use crate::plugins::runtime::compile_cache::CompileCache;
use crate::plugins::runtime::engine::{Pool, Runtime, compile};
use crate::plugins::runtime::hooks::{EXPORTS_NONE, Hooks};
use crate::plugins::runtime::snapshot::{self, InitFailure, Initialized};
use crate::plugins::runtime::store::PluginState;

/// How a host's components came to be compiled: each plugin's, and the component of its
/// initialised state where it has one ([`crate::plugins::runtime::snapshot`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compiled {
    /// Read from the compile cache.
    pub from_cache: usize,
    /// Compiled at this load (and, with a cache, written to it).
    pub compiled: usize,
}

/// A manifest's plugins, loaded, and the engine they run in.
pub struct Loaded {
    /// The engine and linker of the plugins.
    pub runtime: Runtime,
    /// Every plugin, by its name in the manifest.
    pub plugins: BTreeMap<String, Arc<LoadedPlugin>>,
    /// How they came to be compiled.
    pub compiled: Compiled,
    /// What they hold in the process, in bytes ([`footprint`]).
    pub footprint: u64,
}

/// What a host's plugins hold in the process for as long as they are loaded, in bytes: each
/// distinct compiled component's image (its machine code and the data it starts from), mapped
/// once however many plugins share it. A Python plugin's is about 35 MiB (componentize-py's
/// interpreter), a Rust one's well under 1 MiB. What their instances use comes and goes with
/// calls, and is bounded apart: each call by its memory limit, the pages a memory slot keeps
/// between calls by 8 MiB for each of the engine's slots, given back
/// when it has been idle for [`crate::plugins::runtime::threads::IDLE_RELEASE`].
pub fn footprint(plugins: &BTreeMap<String, Arc<LoadedPlugin>>) -> u64 {
    let mut images: Vec<(usize, usize)> = Vec::new();
    for plugin in plugins.values() {
        let range = plugin.pre.component().image_range();
        let image = (range.start as usize, range.end as usize);
        if !images.contains(&image) {
            images.push(image);
        }
    }
    images.iter().map(|(start, end)| (end - start) as u64).sum()
}

/// The plugins of a manifest already initialised and compiled at this load, by what makes
/// them the same ([`same_as`]): a plugin named twice (or sixteen times) with the same bytes,
/// configuration, assets and limits is initialised and compiled once, and its copies share
/// the compiled code.
type Prepared = Vec<(String, (InstancePre<PluginState>, bool))>;

/// What makes two plugins of a manifest initialise to the same component: their bytes, their
/// configuration, their assets and their memory and initialisation limits.
fn same_as(spec: &PluginSpec, assets: &crate::plugins::runtime::assets::Assets) -> String {
    format!(
        "{}|{:?}|{:?}|{}|{}",
        spec.sha256.to_ascii_lowercase(),
        spec.config_strings(),
        assets.digests().collect::<Vec<_>>(),
        spec.memory_limit_mb,
        spec.init_time_limit_ms
    )
}

/// Loads every plugin of `manifest` in an engine whose pool is sized for `pool`: digest,
/// signature, compilation, pre-instantiation and the plugin's own configuration check. Any
/// failure refuses the whole manifest.
pub async fn load_plugins(manifest: &Manifest, pool: Pool) -> Result<Loaded, LoadError> {
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
    let mut components = 0;
    let mut loaded = Ok(());
    let mut prepared = Prepared::new();
    for (name, spec) in &manifest.plugins {
        match load_one(&runtime, manifest, name, spec, &mut prepared).await {
            Ok((plugin, compiled)) => {
                components += compiled;
                plugins.insert(name.clone(), plugin);
            }
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
            compiled: components,
        },
    };
    loaded?;
    let footprint = footprint(&plugins);
    tracing::info!(
        from_cache = compiled.from_cache,
        compiled = compiled.compiled,
        footprint_mib = footprint >> 20,
        "plugins compiled"
    );
    if let Pool::Model { budget_bytes, .. } = pool
        && footprint > budget_bytes
    {
        return Err(LoadError {
            plugin: "*".into(),
            message: format!(
                "its {} plugins would hold {} MiB in the process (their compiled code, \
                 identical components counted once), past this endpoint's {} MiB for one \
                 model's plugins ([model_plugins] budget_mb)",
                plugins.len(),
                footprint.div_ceil(1 << 20),
                budget_bytes >> 20
            ),
        });
    }
    Ok(Loaded {
        runtime,
        plugins,
        compiled,
        footprint,
    })
}

pub use crate::plugins::runtime::digest::sha256_hex;

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
        None => crate::plugins::runtime::compile_cache::default_dir()?,
    };
    CompileCache::open(&dir)
        .inspect_err(|error| tracing::warn!(%error, "plugins will be compiled without a cache"))
        .ok()
}

/// Bytes a plugin's `.wasm` file may have (a componentize-py component is ~18 MB).
pub const MAX_PLUGIN_BYTES: u64 = 256 << 20;

/// The plugin's bytes, read (a regular file within [`MAX_PLUGIN_BYTES`]) and checked against
/// the manifest's digest; the file read and the hashing run off the serving threads.
async fn verified_bytes(spec: &PluginSpec) -> Result<Vec<u8>, String> {
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
    Ok(bytes)
}

/// Checks the plugin's signature, over its bytes and its assets' digests
/// ([`super::signing::signed_message`]), against the manifest's trusted keys.
async fn verify_signature(
    manifest: &Manifest,
    spec: &PluginSpec,
    bytes: &[u8],
    assets: &crate::plugins::runtime::assets::Assets,
    cases: Option<&super::cases::Cases>,
) -> Result<String, String> {
    let signature = match &spec.signature {
        Some(signature) => Some(signature.clone()),
        None => super::signing::read_signature_file(&spec.path).await?,
    };
    let digests: Vec<(&str, &str)> = assets.digests().collect();
    super::signing::verify_bundle(
        bytes,
        &digests,
        cases.map(|cases| cases.sha256.as_str()),
        &spec.path,
        signature.as_deref(),
        &manifest.trusted_keys,
    )
}

async fn load_one(
    runtime: &Runtime,
    manifest: &Manifest,
    name: &str,
    spec: &PluginSpec,
    prepared: &mut Prepared,
) -> Result<(Arc<LoadedPlugin>, usize), String> {
    let bytes = verified_bytes(spec).await?;
    let assets =
        crate::plugins::runtime::assets::read(&manifest.folder, &spec.assets, manifest.secure_mode)
            .await?;
    let cases =
        super::cases::read(&manifest.folder, spec.cases.as_ref(), manifest.secure_mode).await?;
    if manifest.require_cases && cases.is_none() {
        return Err(
            "carries no golden cases, and this endpoint requires them (require_cases, or \
             TRIDENT_PLUGIN_REQUIRE_CASES under Secure Mode): name its cases file in the \
             manifest (cases = { path, sha256 })"
                .into(),
        );
    }
    let signer = match manifest.require_signatures {
        true => Some(verify_signature(manifest, spec, &bytes, &assets, cases.as_deref()).await?),
        false => None,
    };
    let mut limits = runtime.limits(
        name,
        spec.config_strings(),
        assets,
        spec.memory_limit_mb,
        spec.time_limit_ms,
    );
    limits.models = spec.model_access();
    let same = same_as(spec, &limits.assets);
    let earlier = prepared
        .iter()
        .find(|(key, _)| *key == same)
        .map(|(_, done)| done.clone());
    // A plugin loaded with the same bytes, configuration and assets read the same keys.
    let fresh = earlier.is_none();
    let (pre, init_each, components) = match earlier {
        Some((pre, init_each)) => (pre, init_each, 0),
        None => {
            let (pre, init_each) = initialized(runtime, name, &limits, spec, bytes).await?;
            prepared.push((same, (pre.clone(), init_each)));
            // The plugin as built, and its initialised state's component where it has one.
            (pre, init_each, if init_each { 1 } else { 2 })
        }
    };
    let plugin = LoadedPlugin {
        name: Arc::from(name),
        limits,
        content_types: spec.content_types.clone(),
        accept: spec.accept.clone(),
        headers: spec
            .headers
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
        hooks: Hooks::of(&pre, init_each),
        pre,
        init_each,
        cases,
        account: arc_swap::ArcSwap::from_pointee(super::accounting::PluginAccount::default()),
        identity: format!("{name}|{spec:?}"),
        sha256: spec.sha256.to_ascii_lowercase(),
        signer,
    };
    if !plugin.hooks.any() {
        return Err(EXPORTS_NONE.into());
    }
    let plugin = Arc::new(plugin);
    if init_each {
        check_config(runtime, &plugin).await?;
    }
    if fresh {
        refuse_unread_config(name, spec, &plugin.limits.config)?;
    }
    tracing::info!(plugin = name, sha256 = %spec.sha256, "plugin loaded");
    Ok((plugin, components))
}

/// Refuses (or, under `unread_config = "warn"`, logs) the configuration keys the plugin's
/// `check-config` did not ask for ([`crate::plugins::runtime::config`]).
fn refuse_unread_config(
    name: &str,
    spec: &PluginSpec,
    config: &crate::plugins::runtime::config::PluginConfig,
) -> Result<(), String> {
    let Some(why) = config.unread_keys() else {
        return Ok(());
    };
    match spec.unread_config {
        UnreadConfig::Refuse => Err(why),
        UnreadConfig::Warn => {
            tracing::warn!(plugin = name, "{why}");
            Ok(())
        }
    }
}

/// The plugin compiled from its initialised state ([`crate::plugins::runtime::snapshot`]), and whether each
/// instance must initialise itself instead (its configuration then still to be checked). Runs
/// on the blocking pool: compiling takes seconds for a Python guest, and a load must not hold a
/// serving thread.
async fn initialized(
    runtime: &Runtime,
    name: &str,
    limits: &crate::plugins::runtime::store::Limits,
    spec: &PluginSpec,
    bytes: Vec<u8>,
) -> Result<(InstancePre<PluginState>, bool), String> {
    let (engine, linker) = (runtime.engine.clone(), runtime.linker.clone());
    let init_limits = crate::plugins::runtime::store::Limits {
        time_limit_ms: spec.init_time_limit_ms,
        ..limits.clone()
    };
    let (plugin, seed) = (name.to_owned(), runtime.snapshot_seed);
    tokio::task::spawn_blocking(move || {
        match snapshot::initialize(&engine, &linker, &init_limits, seed, &bytes) {
            Ok(Initialized::Snapshot(wasm)) => Ok((compile(&engine, &linker, &wasm)?, false)),
            Ok(Initialized::PerInstance(why)) => {
                tracing::info!(
                    plugin,
                    why,
                    "the plugin's initialised state cannot be copied: each instance initialises itself"
                );
                Ok((compile(&engine, &linker, &bytes)?, true))
            }
            Err(InitFailure::Refused(message)) => {
                Err(format!("refuses its configuration: {message}"))
            }
            Err(InitFailure::Failed(message)) => Err(message),
        }
    })
    .await
    .map_err(|e| format!("compiling failed: {e}"))?
}

/// Runs the plugin's own configuration check once, through the first world it exports, as a
/// call like any other (within the engine's share, off the serving thread if it runs long).
async fn check_config(runtime: &Runtime, plugin: &Arc<LoadedPlugin>) -> Result<(), String> {
    let (engine, called) = (runtime.engine.clone(), Arc::clone(plugin));
    let call = async move {
        match called.hooks.exported().next() {
            Some(hook) => hook.check(&engine, &called.limits).await,
            None => Ok(Ok(())),
        }
    };
    runtime
        .run(&plugin.limits, call)
        .await
        .map_err(|e| e.to_string())?
        .map_err(|message| format!("refuses its configuration: {message}"))
}
