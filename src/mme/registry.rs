//! The models a multi-model endpoint has loaded: name → (Triton model name, repository), and the
//! load and unload procedures that keep it consistent with the engine under concurrent calls.
//!
//! A name is reserved before any slow work starts, so two loads of one name cannot race (the
//! second gets 409), and an unload or invoke only ever sees fully loaded models.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::journal::{Entry, Journal};
use super::layout::{Layout, find_model};
use super::url::validate;
use crate::artifacts::{ArtifactPolicy, Prepared};
use crate::engine::{Engine, EngineError};
use crate::plugins::PluginHost;
use crate::sessions::Sessions;

/// A loaded model.
#[derive(Debug, Clone)]
pub struct LoadedModel {
    /// The name SageMaker uses (`model_name` of the load call).
    pub name: String,
    /// The name the engine serves it under (`X-Amzn-SageMaker-Target-Model`, else `name`).
    pub target: String,
    /// The url of its load call.
    pub url: String,
    /// The artifact's repository, reported as its `modelUrl`.
    pub repository: PathBuf,
    /// What the core reads for it (the repository registered, and its private tree).
    pub prepared: Prepared,
    /// The plugins its artifact brought ([`crate::plugins::host::model_plugins`]), used instead of
    /// the container's for its invocations and dropped with it.
    pub plugins: Option<Arc<PluginHost>>,
}

#[derive(Debug, Clone)]
enum Slot {
    Loading { target: String },
    Ready(LoadedModel),
    Unloading(LoadedModel),
}

impl Slot {
    fn target(&self) -> &str {
        match self {
            Slot::Loading { target } => target,
            Slot::Ready(m) | Slot::Unloading(m) => &m.target,
        }
    }
}

/// Why a multi-model call failed; each maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MmeError {
    /// 400
    #[error("{0}")]
    BadRequest(String),
    /// 404
    #[error("{0}")]
    NotFound(String),
    /// 409
    #[error("{0}")]
    Conflict(String),
    /// 500
    #[error("{0}")]
    Internal(String),
    /// The engine refused a load: 409 when the name exists, 507 when out-of-memory, else 400.
    #[error("{0}")]
    Engine(EngineError),
}

/// A load's artifact, resolved once ([`ModelRegistry::resolve`]).
#[derive(Debug, Clone)]
pub struct Artifact {
    /// The url of the load call, as given.
    pub url: String,
    /// Where its model is: the artifact's repository and the model's folder in it.
    pub layout: Layout,
    /// What the core reads for it: the repository to register ([`ArtifactPolicy::prepare`]).
    pub prepared: Prepared,
}

impl Artifact {
    /// The model's folder in the artifact (the one holding its own `config.pbtxt`).
    pub fn model_folder(&self) -> PathBuf {
        self.layout.repository.join(&self.layout.folder)
    }

    /// The model's folder in what the core reads, where its plugins are read too (under a
    /// gate, the checked private tree).
    pub fn loaded_folder(&self) -> PathBuf {
        self.prepared.repository.join(&self.layout.folder)
    }
}

/// Timing of the unload wait.
#[derive(Debug, Clone, Copy)]
pub struct UnloadTiming {
    /// How often the engine's index is polled (Triton's frontend: 500 ms).
    pub poll: Duration,
    /// How long to wait at most (SageMaker gives up after 360 s).
    pub timeout: Duration,
}

impl Default for UnloadTiming {
    fn default() -> Self {
        UnloadTiming {
            poll: Duration::from_millis(5),
            timeout: Duration::from_secs(350),
        }
    }
}

/// The multi-model endpoint's registry.
pub struct ModelRegistry {
    models_root: PathBuf,
    unload: UnloadTiming,
    slots: Mutex<BTreeMap<String, Slot>>,
    /// Where the loaded models are written down for a restarted serving process, if anywhere.
    journal: OnceLock<Journal>,
    /// What an artifact may bring; every load's artifact is checked against it.
    artifacts: ArtifactPolicy,
    /// Loads the core runs at once ([`MAX_LOADS_IN_FLIGHT`]).
    in_flight: tokio::sync::Semaphore,
    /// Loads that outlasted their time-out and have not finished yet.
    abandoned: std::sync::atomic::AtomicUsize,
}

/// The load threads the core of a multi-model endpoint has (Triton's default is 4).
pub const CORE_LOAD_THREADS: u32 = 8;

/// The most loads trident asks the core for at once: one fewer than its load threads, so that
/// loads hanging in a model's initialisation (until their time-out ends them) never hold every
/// thread, and the reload of a model whose process died always finds one. Loads past this
/// wait their turn within their own time-out.
pub const MAX_LOADS_IN_FLIGHT: usize = CORE_LOAD_THREADS as usize - 1;

impl ModelRegistry {
    /// An empty registry whose load urls must lie under `models_root`, waiting for unloads as
    /// `unload` says.
    pub fn new(models_root: impl Into<PathBuf>, unload: UnloadTiming) -> ModelRegistry {
        ModelRegistry {
            models_root: models_root.into(),
            unload,
            slots: Mutex::new(BTreeMap::new()),
            journal: OnceLock::new(),
            artifacts: ArtifactPolicy::default(),
            in_flight: tokio::sync::Semaphore::new(MAX_LOADS_IN_FLIGHT),
            abandoned: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Counts a load that outlasted its time-out, until [`ModelRegistry::abandoned_load_ended`].
    pub fn load_abandoned(&self) {
        self.abandoned
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Counts the end of a load [`ModelRegistry::load_abandoned`] counted.
    pub fn abandoned_load_ended(&self) {
        self.abandoned
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Why no model can load, when every load slot is held by a load that outlasted its
    /// time-out (a model whose initialisation hangs where no process can be ended for it): what
    /// `/ping` answers then, since the endpoint can no longer do what it is for.
    pub fn cannot_load(&self) -> Option<String> {
        let abandoned = self.abandoned.load(std::sync::atomic::Ordering::Relaxed);
        (abandoned >= MAX_LOADS_IN_FLIGHT).then(|| {
            format!(
                "no model can load: all {MAX_LOADS_IN_FLIGHT} load slots are held by loads that \
                 outlasted their time-out and have not finished"
            )
        })
    }

    /// Holds every artifact a load resolves to `policy` ([`crate::artifacts`]).
    pub fn with_artifact_policy(mut self, policy: ArtifactPolicy) -> ModelRegistry {
        self.artifacts = policy;
        self
    }

    /// Writes the loaded models down in `journal` after every change from now on.
    pub fn keep_journal(&self, journal: Journal) {
        let slots = self.slots();
        if self.journal.set(journal).is_ok() {
            self.write_journal(&slots);
        }
    }

    /// Writes the ready models to the journal, if one is kept; called with the slots locked, so
    /// writes happen in the order of the changes. A failed write is logged: the endpoint keeps
    /// serving, and only a restart would miss the change.
    fn write_journal(&self, slots: &BTreeMap<String, Slot>) {
        let Some(journal) = self.journal.get() else {
            return;
        };
        let models = slots
            .values()
            .filter_map(|slot| match slot {
                Slot::Ready(model) | Slot::Unloading(model) => Some(Entry {
                    name: model.name.clone(),
                    url: model.url.clone(),
                    target: model.target.clone(),
                }),
                Slot::Loading { .. } => None,
            })
            .collect();
        if let Err(error) = journal.write(models) {
            tracing::error!(%error, "cannot write the loaded models' journal; a restart would not load the last change");
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a model is loaded, loading or unloading under `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.slots().contains_key(name)
    }

    /// The names of the plugins every model loaded, loading or unloading brought.
    pub fn plugin_names(&self) -> std::collections::HashSet<String> {
        self.slots()
            .values()
            .filter_map(|slot| match slot {
                Slot::Ready(model) | Slot::Unloading(model) => model.plugins.as_ref(),
                Slot::Loading { .. } => None,
            })
            .flat_map(|host| host.plugins().map(|plugin| plugin.name.to_string()))
            .collect()
    }

    /// The plugins of every model loaded or unloading whose artifact brought some, by model
    /// name.
    pub fn plugin_hosts(&self) -> Vec<(String, Arc<PluginHost>)> {
        self.slots()
            .iter()
            .filter_map(|(name, slot)| match slot {
                Slot::Ready(model) | Slot::Unloading(model) => {
                    Some((name.clone(), Arc::clone(model.plugins.as_ref()?)))
                }
                Slot::Loading { .. } => None,
            })
            .collect()
    }

    /// The loaded model called `name`.
    pub fn get(&self, name: &str) -> Option<LoadedModel> {
        match self.slots().get(name) {
            Some(Slot::Ready(model)) => Some(model.clone()),
            _ => None,
        }
    }

    /// Loaded models in name order, at most `page_size` from `page_token` (the first name of
    /// the page); with the token of the next page when there is one.
    pub fn list(
        &self,
        page_token: Option<&str>,
        page_size: usize,
    ) -> (Vec<LoadedModel>, Option<String>) {
        let slots = self.slots();
        let mut ready = slots
            .range::<str, _>((
                page_token.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Included),
                std::ops::Bound::Unbounded,
            ))
            .filter_map(|(_, slot)| match slot {
                Slot::Ready(model) => Some(model),
                _ => None,
            });
        let page: Vec<LoadedModel> = ready.by_ref().take(page_size.max(1)).cloned().collect();
        let next = ready.next().map(|model| model.name.clone());
        (page, next)
    }

    /// The artifact a load of `url` loads: the url checked against the models root, and its
    /// model found in the folder, once (the plugins read from it and the repository registered
    /// are the same folder). It reads the file system: call it off the serving threads.
    pub fn resolve(&self, url: &str) -> Result<Artifact, MmeError> {
        self.resolve_named(url, None)
    }

    /// [`ModelRegistry::resolve`] for a load of `name`, which holds its reservation: a private
    /// tree is made at the name's one path ([`crate::artifacts::staging`]).
    pub fn resolve_as(&self, url: &str, name: &str) -> Result<Artifact, MmeError> {
        self.resolve_named(url, Some(name))
    }

    fn resolve_named(&self, url: &str, name: Option<&str>) -> Result<Artifact, MmeError> {
        let checked = validate(url, &self.models_root).map_err(|e| MmeError::BadRequest(e.0))?;
        let layout = find_model(&checked.path).map_err(|e| MmeError::BadRequest(e.0))?;
        let prepared = match name {
            Some(name) => self.artifacts.prepare_as(&layout.repository, name),
            None => self.artifacts.prepare(&layout.repository),
        }
        .map_err(|refusal| {
            tracing::warn!(url, %refusal, "model artifact refused");
            MmeError::BadRequest(refusal.to_string())
        })?;
        Ok(Artifact {
            url: url.to_owned(),
            layout,
            prepared,
        })
    }

    /// Reserves `name` for a load served by the engine as `target`: a 409 when the name is
    /// loaded, loading or unloading, or the target is another name's. The name stays reserved
    /// until the reservation is completed ([`ModelRegistry::load_reserved`]) or dropped (a
    /// refused, failed or abandoned load), so everything slow a load does runs under it.
    pub fn reserve(&self, name: &str, target: &str) -> Result<Reservation<'_>, MmeError> {
        let mut slots = self.slots();
        match slots.get(name) {
            Some(Slot::Ready(_)) => {
                return Err(MmeError::Conflict(format!(
                    "Model {name} is already loaded."
                )));
            }
            Some(Slot::Loading { .. } | Slot::Unloading(_)) => {
                return Err(MmeError::Conflict(format!(
                    "Model {name} is being loaded or unloaded; retry when that is done."
                )));
            }
            None => {}
        }
        if slots.values().any(|slot| slot.target() == target) {
            return Err(MmeError::Conflict(format!(
                "Model {target} is already loaded under another name."
            )));
        }
        slots.insert(
            name.to_owned(),
            Slot::Loading {
                target: target.to_owned(),
            },
        );
        Ok(Reservation {
            registry: self,
            name: name.to_owned(),
            target: target.to_owned(),
            completed: false,
        })
    }

    /// Waits for one of the [`MAX_LOADS_IN_FLIGHT`] load slots: the whole of a load (the
    /// artifact's check and copy, its plugins, the core's load) runs holding one.
    pub async fn load_turn(&self) -> Result<tokio::sync::SemaphorePermit<'_>, MmeError> {
        self.in_flight
            .acquire()
            .await
            .map_err(|closed| MmeError::Internal(format!("no load can start: {closed}")))
    }

    /// Loads `artifact` as `name`, served by the engine as `target` (or `name`), with the
    /// plugins it brought: reserves the name, waits for a load slot and loads it
    /// ([`ModelRegistry::load_reserved`]).
    pub async fn load<E: Engine>(
        &self,
        engine: &E,
        sessions: Option<&Sessions<E>>,
        name: &str,
        artifact: &Artifact,
        target: Option<&str>,
        plugins: Option<Arc<PluginHost>>,
    ) -> Result<(), MmeError> {
        let reservation = self.reserve(name, &served_as(name, target))?;
        let _turn = self.load_turn().await?;
        self.load_reserved(engine, sessions, reservation, artifact, plugins)
            .await
    }

    /// Has the engine load `artifact` for `reservation`, with the plugins it brought; before
    /// it serves, `sessions` learn of it (an earlier load's sessions of the name end; its idle
    /// limit is aligned). Call it holding a load slot ([`ModelRegistry::load_turn`]).
    pub async fn load_reserved<E: Engine>(
        &self,
        engine: &E,
        sessions: Option<&Sessions<E>>,
        mut reservation: Reservation<'_>,
        artifact: &Artifact,
        plugins: Option<Arc<PluginHost>>,
    ) -> Result<(), MmeError> {
        let target = reservation.target.clone();
        let core_layout = Layout {
            repository: artifact.prepared.repository.clone(),
            folder: artifact.layout.folder.clone(),
        };
        let mapping = artifact
            .prepared
            .name_mapping(&artifact.layout.folder, &target);
        self.load_into_core(engine, &core_layout, &mapping, &target)
            .await?;
        if let Some(sessions) = sessions {
            sessions
                .model_loaded(&target, &artifact.model_folder())
                .await;
        }
        let mut slots = self.slots();
        slots.insert(
            reservation.name.clone(),
            Slot::Ready(LoadedModel {
                name: reservation.name.clone(),
                target,
                url: artifact.url.clone(),
                repository: artifact.layout.repository.clone(),
                prepared: artifact.prepared.clone(),
                plugins,
            }),
        );
        reservation.completed = true;
        self.write_journal(&slots);
        Ok(())
    }

    async fn load_into_core<E: Engine>(
        &self,
        engine: &E,
        layout: &Layout,
        mapping: &[(String, String)],
        target: &str,
    ) -> Result<(), MmeError> {
        engine
            .register_repository(&layout.repository, mapping)
            .await
            .map_err(MmeError::Engine)?;
        if let Err(error) = engine.load_model(target).await {
            // Nothing may leak: a failed load leaves neither the model's entry in the engine
            // (which would make the name ambiguous for the next load) nor its repository.
            if let Err(e) = engine.unload_model(target).await {
                tracing::debug!(error = %e, model = target, "unloading a failed model failed");
            }
            if let Err(e) = engine.unregister_repository(&layout.repository).await {
                tracing::warn!(error = %e, repository = %layout.repository.display(),
                    "unregistering the repository of a failed load failed");
            }
            return Err(MmeError::Engine(error));
        }
        tracing::info!(model = target, repository = %layout.repository.display(), "model loaded");
        Ok(())
    }

    /// Unloads `name` and its dependents, waits until the engine reports it unloaded, and
    /// unregisters its repository. Its sessions end first (no new request reaches it once it
    /// is unloading; the ENDs do).
    pub async fn unload<E: Engine>(
        &self,
        engine: &E,
        sessions: Option<&Sessions<E>>,
        name: &str,
    ) -> Result<(), MmeError> {
        let model = {
            let mut slots = self.slots();
            match slots.get(name) {
                Some(Slot::Ready(model)) => {
                    let model = model.clone();
                    slots.insert(name.to_owned(), Slot::Unloading(model.clone()));
                    model
                }
                _ => return Err(not_loaded(name)),
            }
        };
        if let Some(sessions) = sessions {
            sessions.end_model(&model.target).await;
        }
        if let Err(error) = engine.unload_model(&model.target).await {
            self.slots().insert(name.to_owned(), Slot::Ready(model));
            return Err(MmeError::BadRequest(error.message));
        }
        let waited = self.wait_unloaded(engine, &model.target).await;
        if let Err(e) = engine
            .unregister_repository(&model.prepared.repository)
            .await
        {
            tracing::warn!(error = %e, repository = %model.prepared.repository.display(),
                "unregistering the repository of an unloaded model failed");
        }
        {
            let mut slots = self.slots();
            slots.remove(name);
            self.write_journal(&slots);
        }
        waited?;
        tracing::info!(model = model.target, "model unloaded");
        Ok(())
    }

    async fn wait_unloaded<E: Engine>(&self, engine: &E, target: &str) -> Result<(), MmeError> {
        let deadline = Instant::now() + self.unload.timeout;
        loop {
            let state = engine
                .model_state(target)
                .map_err(|e| MmeError::Internal(e.message))?;
            match state {
                None => return Ok(()),
                Some(state) if state.is_unloaded() => return Ok(()),
                Some(_) if Instant::now() >= deadline => {
                    return Err(MmeError::Internal(format!(
                        "Model {target} did not unload within {} s",
                        self.unload.timeout.as_secs()
                    )));
                }
                Some(_) => tokio::time::sleep(self.unload.poll).await,
            }
        }
    }
}

/// A name reserved for a load ([`ModelRegistry::reserve`]); dropped before it is completed,
/// the name is free again.
pub struct Reservation<'a> {
    registry: &'a ModelRegistry,
    name: String,
    target: String,
    completed: bool,
}

impl std::fmt::Debug for Reservation<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("name", &self.name)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.completed {
            return;
        }
        let mut slots = self.registry.slots();
        if matches!(slots.get(&self.name), Some(Slot::Loading { target }) if *target == self.target)
        {
            slots.remove(&self.name);
        }
    }
}

/// The name the engine serves a load of `name` as: its target when given, else `name`.
pub fn served_as(name: &str, target: Option<&str>) -> String {
    target.filter(|t| !t.is_empty()).unwrap_or(name).to_owned()
}

/// The 404 for a name that is not loaded.
pub fn not_loaded(name: &str) -> MmeError {
    MmeError::NotFound(format!("Model {name} is not loaded."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry_with(names: &[&str]) -> ModelRegistry {
        let registry = ModelRegistry::new("/opt/ml/models", UnloadTiming::default());
        for name in names {
            registry.slots().insert(
                name.to_string(),
                Slot::Ready(LoadedModel {
                    name: name.to_string(),
                    target: name.to_string(),
                    url: format!("/opt/ml/models/{name}"),
                    repository: PathBuf::from(format!("/opt/ml/models/{name}")),
                    prepared: Prepared {
                        repository: PathBuf::from(format!("/opt/ml/models/{name}")),
                        staged: None,
                        names: Vec::new(),
                    },
                    plugins: None,
                }),
            );
        }
        registry
    }

    #[test]
    fn list_pages_in_name_order() {
        let registry = registry_with(&["c", "a", "d", "b", "e"]);
        let names = |page: &[LoadedModel]| page.iter().map(|m| m.name.clone()).collect::<Vec<_>>();
        let (page, next) = registry.list(None, 2);
        assert_eq!(names(&page), ["a", "b"]);
        assert_eq!(next.as_deref(), Some("c"));
        let (page, next) = registry.list(next.as_deref(), 2);
        assert_eq!(names(&page), ["c", "d"]);
        let (page, next) = registry.list(next.as_deref(), 2);
        assert_eq!(names(&page), ["e"]);
        assert_eq!(next, None);
        let (page, next) = registry.list(None, 100);
        assert_eq!(page.len(), 5);
        assert_eq!(next, None);
    }

    #[test]
    fn models_still_loading_are_not_listed_or_found() {
        let registry = registry_with(&["a"]);
        registry
            .slots()
            .insert("b".into(), Slot::Loading { target: "b".into() });
        assert_eq!(registry.list(None, 10).0.len(), 1);
        assert!(registry.get("b").is_none());
        assert!(registry.get("a").is_some());
    }

    // The load and unload procedures over the scripted engine: the 409s, the rollback of a
    // failed load and the unload that never finishes, in milliseconds. The same procedures run
    // against the real core in tests/http_contract/multi_model.rs and tests/faults.rs.

    use std::path::Path;

    use crate::engine::ErrorCode;
    use crate::engine::fake::{FakeEngine, LoadScript};

    /// An artifact `<root>/<hash>/model` with a `config.pbtxt`; its url.
    fn artifact(root: &Path, hash: &str) -> String {
        let folder = root.join(hash).join("model");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("config.pbtxt"), "backend: \"python\"\n").unwrap();
        folder.display().to_string()
    }

    /// Yields until the engine has been asked `call`.
    async fn until_called(engine: &FakeEngine, call: &str) {
        while !engine.calls().iter().any(|c| c == call) {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_name_or_target_in_use_is_409_while_it_loads_and_after() {
        let root = tempfile::tempdir().unwrap();
        let (url, other) = (artifact(root.path(), "a1"), artifact(root.path(), "b2"));
        let gate = Arc::new(tokio::sync::Notify::new());
        let script = LoadScript {
            gate: Some(Arc::clone(&gate)),
            ..LoadScript::default()
        };
        let engine = FakeEngine::new().on_load("m", script, None);
        let registry = ModelRegistry::new(root.path(), UnloadTiming::default());
        let resolved = registry.resolve(&url).unwrap();
        let (first, ()) = tokio::join!(
            registry.load(&engine, None, "m", &resolved, None, None),
            async {
                until_called(&engine, "load m").await;
                let again = registry
                    .load(
                        &engine,
                        None,
                        "m",
                        &registry.resolve(&url).unwrap(),
                        None,
                        None,
                    )
                    .await;
                assert!(
                    matches!(&again, Err(MmeError::Conflict(m)) if m.contains("being loaded")),
                    "{again:?}"
                );
                let same_target = registry
                    .load(
                        &engine,
                        None,
                        "n",
                        &registry.resolve(&other).unwrap(),
                        Some("m"),
                        None,
                    )
                    .await;
                assert!(
                    matches!(&same_target, Err(MmeError::Conflict(m)) if m.contains("another name")),
                    "{same_target:?}"
                );
                assert!(registry.get("m").is_none(), "listed while it loads");
                gate.notify_one();
            }
        );
        first.unwrap();
        assert_eq!(registry.get("m").unwrap().target, "m");
        let loaded = registry
            .load(
                &engine,
                None,
                "m",
                &registry.resolve(&url).unwrap(),
                None,
                None,
            )
            .await;
        assert!(
            matches!(&loaded, Err(MmeError::Conflict(m)) if m.contains("already loaded")),
            "{loaded:?}"
        );
        assert_eq!(engine.calls(), ["register m", "load m"]);
    }

    #[tokio::test]
    async fn a_failed_load_leaves_nothing_behind_and_the_name_loads_again() {
        let root = tempfile::tempdir().unwrap();
        let url = artifact(root.path(), "a1");
        let failing = LoadScript {
            error: Some(EngineError::new(ErrorCode::Internal, "out of memory")),
            ..LoadScript::default()
        };
        let engine = FakeEngine::new().on_load("m", failing, None);
        let registry = ModelRegistry::new(root.path(), UnloadTiming::default());
        let failed = registry
            .load(
                &engine,
                None,
                "m",
                &registry.resolve(&url).unwrap(),
                None,
                None,
            )
            .await;
        assert!(
            matches!(&failed, Err(MmeError::Engine(e)) if e.message == "out of memory"),
            "{failed:?}"
        );
        assert_eq!(
            engine.calls(),
            ["register m", "load m", "unload m", "unregister m"]
        );
        assert!(registry.get("m").is_none());
        assert!(registry.list(None, 10).0.is_empty());
        let engine = engine.on_load("m", LoadScript::default(), None);
        registry
            .load(
                &engine,
                None,
                "m",
                &registry.resolve(&url).unwrap(),
                None,
                None,
            )
            .await
            .unwrap();
        assert!(registry.get("m").is_some());
    }

    #[tokio::test]
    async fn a_repository_the_engine_already_has_is_refused_and_not_kept() {
        let root = tempfile::tempdir().unwrap();
        let url = artifact(root.path(), "a1");
        let engine = FakeEngine::new();
        engine
            .register_repository(Path::new("/elsewhere"), &[("model".into(), "m".into())])
            .await
            .unwrap();
        let registry = ModelRegistry::new(root.path(), UnloadTiming::default());
        let refused = registry
            .load(
                &engine,
                None,
                "m",
                &registry.resolve(&url).unwrap(),
                None,
                None,
            )
            .await;
        assert!(
            matches!(&refused, Err(MmeError::Engine(e)) if e.code == ErrorCode::AlreadyExists),
            "{refused:?}"
        );
        assert!(registry.slots().is_empty(), "the name stays reserved");
        assert!(!engine.calls().iter().any(|c| c == "load m"));
    }

    #[tokio::test]
    async fn an_unload_that_never_finishes_times_out_and_frees_the_name() {
        let root = tempfile::tempdir().unwrap();
        let url = artifact(root.path(), "a1");
        let stuck = LoadScript {
            never_unloads: true,
            ..LoadScript::default()
        };
        let engine = FakeEngine::new().on_load("m", stuck, None);
        let timing = UnloadTiming {
            poll: Duration::from_millis(1),
            timeout: Duration::from_millis(30),
        };
        let registry = ModelRegistry::new(root.path(), timing);
        registry
            .load(
                &engine,
                None,
                "m",
                &registry.resolve(&url).unwrap(),
                None,
                None,
            )
            .await
            .unwrap();
        let unloaded = registry.unload(&engine, None, "m").await;
        assert!(
            matches!(&unloaded, Err(MmeError::Internal(m)) if m.contains("did not unload")),
            "{unloaded:?}"
        );
        assert!(registry.slots().is_empty());
        assert_eq!(
            engine.calls(),
            ["register m", "load m", "unload m", "unregister m"]
        );
        assert!(matches!(
            registry.unload(&engine, None, "m").await,
            Err(MmeError::NotFound(_))
        ));
    }
}
