//! A multi-model load from start to end (and an unload, which ends the model's sessions first), for `POST /models` and for the models a restarted
//! serving process loads again: the name reserved, then in one load slot and within the load
//! time-out, the artifact resolved once, off the serving threads (the url checked, its model
//! found, its private tree made); the plugins it brings read from that same folder (compiled,
//! initialised, their cases run); the core's load, run to the end in a task of its own (a
//! client that leaves does not cut it short, which would leave the name reserved and the
//! repository registered); and what a load that outlasts the load time-out becomes. The HTTP side (`http::models`) only parses the body, counts the
//! outcome and maps it to a status.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::registry::{Artifact, MmeError, ModelRegistry, served_as};
use crate::engine::Engine;
use crate::plugins::PluginHost;
use crate::plugins::host::model_plugins::{self, ModelPluginPolicy};
use crate::sessions::Sessions;

/// What a load that outlasts the load time-out becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout {
    /// The caller is answered now, and the load is undone when the core finishes it (the core
    /// cannot abandon a load); until then the name stays reserved (409). `POST /models`.
    Undo,
    /// The load goes on and serves once it finishes (models loaded again after a restart).
    KeepLoading,
}

/// Why a load did not end loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadFailure {
    /// Refused or failed, with why.
    #[error("{0}")]
    Refused(MmeError),
    /// Still loading after the time-out, then undone or left to finish as [`OnTimeout`] says.
    #[error("model {name} did not load within {} s", timeout.as_secs())]
    TimedOut {
        /// The model's name.
        name: String,
        /// The load time-out.
        timeout: Duration,
    },
}

/// What one load asks for.
pub struct LoadPlan {
    /// The name SageMaker uses.
    pub name: String,
    /// The url of the load call.
    pub url: String,
    /// The name the engine serves it under (`X-Amzn-SageMaker-Target-Model`), when given.
    pub target: Option<String>,
}

/// The container's plugins as a load meets them.
#[derive(Default)]
pub struct ContainerPlugins {
    /// What an artifact's own plugins may do.
    pub policy: ModelPluginPolicy,
    /// The container's manifest, whose adapters routed to the model serve it when its artifact
    /// brings no plugins: they check it as it loads, as they check a single-model endpoint's
    /// model at start.
    pub host: Option<Arc<PluginHost>>,
}

/// Whose adapters check a model just loaded.
enum Checking {
    /// Its artifact's own (`plugins.toml` in the artifact).
    Artifact(Arc<PluginHost>),
    /// The container manifest's, routed to its name.
    Container(Arc<PluginHost>),
}

/// Where a load stands, for its time-out: before the core has it, a load can be dropped; once
/// the core has started it, it cannot be (its end is awaited or undone).
#[derive(Debug, Default)]
struct Handoff {
    /// The core's load has started.
    in_core: bool,
    /// The caller stopped waiting before it did: it must not start.
    abandoned: bool,
}

impl Handoff {
    fn lock(handoff: &std::sync::Mutex<Handoff>) -> std::sync::MutexGuard<'_, Handoff> {
        handoff.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Loads `plan` with `registry` into `engine`, all of it bounded by `timeout` and run holding
/// one of the registry's load slots: the name reserved first (a 409 at once), then the
/// artifact resolved (checked, and its private tree made), its plugins read under
/// `container.policy` (compiled, initialised, their golden cases run), and the core's load.
/// Past `timeout` a load still before the core is dropped where it stands (for
/// [`OnTimeout::Undo`]; a step already running, one plugin's compile, ends on its own and is
/// thrown away), and one in the core becomes what `on_timeout` says. The adapters that will
/// serve the model then check it (`plugins::model_check`).
pub async fn load<E: Engine>(
    registry: &Arc<ModelRegistry>,
    engine: &E,
    sessions: Option<&Arc<Sessions<E>>>,
    plan: LoadPlan,
    container: &ContainerPlugins,
    timeout: Duration,
    on_timeout: OnTimeout,
) -> Result<(), LoadFailure> {
    let served = served_as(&plan.name, plan.target.as_deref());
    let (mut loading, handoff) = start(registry, engine, sessions, &plan, container, timeout);
    let name = plan.name;
    match tokio::time::timeout(timeout, &mut loading).await {
        Ok(Ok(Ok(own))) => {
            let checking = match (own, &container.host) {
                (Some(own), _) => Some(Checking::Artifact(own)),
                (None, Some(host)) => Some(Checking::Container(Arc::clone(host))),
                (None, None) => None,
            };
            check_with_plugins(registry, engine, sessions, &name, &served, checking).await
        }
        Ok(Ok(Err(refused))) => Err(LoadFailure::Refused(refused)),
        Ok(Err(failed)) => Err(LoadFailure::Refused(MmeError::Internal(format!(
            "the load task failed: {failed}"
        )))),
        Err(_) => {
            let in_core = {
                let mut stands = Handoff::lock(&handoff);
                if !stands.in_core && on_timeout == OnTimeout::Undo {
                    stands.abandoned = true;
                }
                stands.in_core
            };
            if !in_core && on_timeout == OnTimeout::Undo {
                // Before the core: dropped where it stands, its name and slot with it.
                loading.abort();
                tracing::warn!(
                    model = name,
                    "a load still checking its artifact or loading its plugins outlasted its \
                     time-out and was dropped"
                );
            } else {
                abandon(registry, engine, &name, &served, loading, on_timeout);
            }
            Err(LoadFailure::TimedOut { name, timeout })
        }
    }
}

/// What a load's task answers: the plugins its artifact brought, loaded with it.
type Loading = tokio::task::JoinHandle<Result<Option<Arc<PluginHost>>, MmeError>>;

/// Starts the load of `plan` in a task of its own: reserve, wait for a slot, resolve, load the
/// plugins, then the core's load unless the returned [`Handoff`] says the caller gave up first.
fn start<E: Engine>(
    registry: &Arc<ModelRegistry>,
    engine: &E,
    sessions: Option<&Arc<Sessions<E>>>,
    plan: &LoadPlan,
    container: &ContainerPlugins,
    timeout: Duration,
) -> (Loading, Arc<std::sync::Mutex<Handoff>>) {
    let (registry, engine, sessions) = (Arc::clone(registry), engine.clone(), sessions.cloned());
    let (name, url) = (plan.name.clone(), plan.url.clone());
    let (served, policy) = (
        served_as(&name, plan.target.as_deref()),
        container.policy.clone(),
    );
    let handoff = Arc::new(std::sync::Mutex::new(Handoff::default()));
    let stands = Arc::clone(&handoff);
    let loading = tokio::spawn(async move {
        let reservation = registry.reserve(&name, &served)?;
        let _turn = registry.load_turn().await?;
        let artifact = resolve(&registry, &url, &name, timeout).await?;
        let plugins = plugins(&artifact, &policy).await?;
        {
            let mut stands = Handoff::lock(&stands);
            if stands.abandoned {
                return Err(MmeError::Internal("the load was abandoned".into()));
            }
            stands.in_core = true;
        }
        registry
            .load_reserved(
                &engine,
                sessions.as_deref(),
                reservation,
                &artifact,
                plugins.clone(),
            )
            .await?;
        Ok(plugins)
    });
    (loading, handoff)
}

/// A load that outlasted its time-out in the core (or, to be kept loading, anywhere): for
/// [`OnTimeout::Undo`] its backend processes are ended, and either way its end is awaited.
fn abandon<E: Engine>(
    registry: &Arc<ModelRegistry>,
    engine: &E,
    name: &str,
    served: &str,
    loading: Loading,
    on_timeout: OnTimeout,
) {
    if on_timeout == OnTimeout::Undo {
        // A model hanging in its initialisation would never let the core finish the load
        // (nor free its load thread): its processes are ended, so the load fails.
        let ended = engine.end_abandoned_load(served);
        if ended > 0 {
            tracing::warn!(
                model = name,
                processes = ended,
                "ended the backend processes of a load that outlasted its time-out"
            );
        }
    }
    finish_abandoned(
        Arc::clone(registry),
        engine.clone(),
        name.to_owned(),
        loading,
        on_timeout,
    );
}

/// The check of the model just loaded as `served` by the adapters that will serve it
/// (`plugins::model_check`): a refusal unloads it again and answers 400 naming the manifest and
/// the plugin.
async fn check_with_plugins<E: Engine>(
    registry: &Arc<ModelRegistry>,
    engine: &E,
    sessions: Option<&Arc<Sessions<E>>>,
    name: &str,
    served: &str,
    checking: Option<Checking>,
) -> Result<(), LoadFailure> {
    let Some(checking) = checking else {
        return Ok(());
    };
    let Ok(metadata) = engine.model_metadata(served) else {
        return Ok(());
    };
    let (plugins, whose) = match &checking {
        Checking::Artifact(host) => (
            host,
            format!("the model's {}", model_plugins::MODEL_MANIFEST),
        ),
        Checking::Container(host) => (host, "the container's plugin manifest".to_owned()),
    };
    let Err(refusal) = plugins.check_model(served, &metadata).await else {
        return Ok(());
    };
    if let Err(error) = unload(registry, engine, sessions, name).await {
        tracing::error!(model = name, %error, "unloading a model its plugins refused failed");
    }
    Err(LoadFailure::Refused(MmeError::BadRequest(format!(
        "{whose}: {refusal}"
    ))))
}

/// Unloads `name` with `registry` from `engine`, its sessions ending first, in a task of its
/// own: a client that leaves does not cut it short (which would leave the name unloading, or
/// the model's sessions open for the next load of the name).
pub async fn unload<E: Engine>(
    registry: &Arc<ModelRegistry>,
    engine: &E,
    sessions: Option<&Arc<Sessions<E>>>,
    name: &str,
) -> Result<(), MmeError> {
    let (registry, engine, name) = (Arc::clone(registry), engine.clone(), name.to_owned());
    let sessions = sessions.cloned();
    tokio::spawn(async move { registry.unload(&engine, sessions.as_deref(), &name).await })
        .await
        .unwrap_or_else(|e| Err(MmeError::Internal(format!("the unload task failed: {e}"))))
}

/// After a load timed out: counts it abandoned until its task ends ([`ModelRegistry::cannot_load`]),
/// and for [`OnTimeout::Undo`] unloads the model if the load succeeded after all, so the
/// endpoint ends as the client was told (not loaded).
fn finish_abandoned<E: Engine, T: Send + 'static>(
    registry: Arc<ModelRegistry>,
    engine: E,
    name: String,
    loading: tokio::task::JoinHandle<Result<T, MmeError>>,
    on_timeout: OnTimeout,
) {
    registry.load_abandoned();
    tokio::spawn(async move {
        let loaded = matches!(loading.await, Ok(Ok(_)));
        registry.abandoned_load_ended();
        if !loaded || on_timeout == OnTimeout::KeepLoading {
            return;
        }
        // Nothing served it, so it has no sessions.
        match registry.unload(&engine, None, &name).await {
            Ok(()) => {
                tracing::warn!(model = name, "undid a load that finished after its timeout")
            }
            Err(error) => {
                tracing::error!(model = name, %error, "undoing a timed-out load failed")
            }
        }
    });
}

/// The artifact at `url` for the model `name`, resolved (checked, and its private tree made
/// where one is) on the blocking pool within the load time-out, and never less than the file
/// deadline: a hung file system costs this load an error, not the endpoint.
async fn resolve(
    registry: &Arc<ModelRegistry>,
    url: &str,
    name: &str,
    timeout: Duration,
) -> Result<Artifact, MmeError> {
    let (owned, owned_url, owned_name) = (Arc::clone(registry), url.to_owned(), name.to_owned());
    let within = timeout.max(crate::files::READ_DEADLINE);
    crate::files::off_thread_within(Path::new(url), within, move || {
        owned.resolve_as(&owned_url, &owned_name)
    })
    .await
    .map_err(|e| MmeError::BadRequest(e.to_string()))?
}

/// The plugins `artifact` brings, loaded under the container's `policy`: a 400 naming the
/// plugin when one cannot be used, before anything reaches the engine.
async fn plugins(
    artifact: &Artifact,
    policy: &ModelPluginPolicy,
) -> Result<Option<Arc<PluginHost>>, MmeError> {
    let host = model_plugins::load(&artifact.loaded_folder(), policy)
        .await
        .map_err(MmeError::BadRequest)?;
    Ok(host.map(Arc::new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fake::{FakeEngine, LoadScript};
    use crate::mme::registry::UnloadTiming;

    fn plan(name: &str, url: &str) -> LoadPlan {
        LoadPlan {
            name: name.into(),
            url: url.into(),
            target: None,
        }
    }

    /// Waits (a few seconds at most) until `done` holds.
    async fn until(done: impl Fn() -> bool) {
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            while !done() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "never happened");
    }

    #[tokio::test]
    async fn a_load_past_its_timeout_is_undone_or_kept_as_asked() {
        let root = tempfile::tempdir().unwrap();
        let mut urls = Vec::new();
        for hash in ["a1", "b2"] {
            let folder = root.path().join(hash).join("model");
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("config.pbtxt"), "backend: \"python\"\n").unwrap();
            urls.push(folder.display().to_string());
        }
        let (undo, keep) = (
            Arc::new(tokio::sync::Notify::new()),
            Arc::new(tokio::sync::Notify::new()),
        );
        let gated = |gate: &Arc<tokio::sync::Notify>| LoadScript {
            gate: Some(Arc::clone(gate)),
            ..LoadScript::default()
        };
        let engine =
            FakeEngine::new()
                .on_load("u", gated(&undo), None)
                .on_load("k", gated(&keep), None);
        let registry = Arc::new(ModelRegistry::new(root.path(), UnloadTiming::default()));
        let container = ContainerPlugins::default();
        let short = Duration::from_millis(20);

        let undone = load(
            &registry,
            &engine,
            None,
            plan("u", &urls[0]),
            &container,
            short,
            OnTimeout::Undo,
        );
        assert!(matches!(undone.await, Err(LoadFailure::TimedOut { .. })));
        assert!(registry.get("u").is_none());
        assert!(
            registry.cannot_load().is_none(),
            "one abandoned load of 7 slots"
        );
        undo.notify_one();
        until(|| engine.calls().iter().any(|c| c == "unregister u")).await;
        until(|| registry.list(None, 10).0.is_empty()).await;
        let kept = load(
            &registry,
            &engine,
            None,
            plan("k", &urls[1]),
            &container,
            short,
            OnTimeout::KeepLoading,
        );
        assert!(matches!(kept.await, Err(LoadFailure::TimedOut { .. })));
        keep.notify_one();
        until(|| registry.get("k").is_some()).await;
        assert!(!engine.calls().iter().any(|c| c == "unload k"));

        // A url outside the models root is refused before anything reaches the engine.
        let outside = load(
            &registry,
            &engine,
            None,
            plan("x", "/etc/model"),
            &container,
            short,
            OnTimeout::Undo,
        );
        assert!(matches!(
            outside.await,
            Err(LoadFailure::Refused(MmeError::BadRequest(_)))
        ));
        assert!(!engine.calls().iter().any(|c| c.ends_with(" x")));
    }

    /// Loads hanging past their time-out in every load slot make the endpoint say it cannot
    /// load (what `/ping` answers); the first to finish gives a slot back.
    #[tokio::test]
    async fn hung_loads_in_every_slot_are_reported_until_one_ends() {
        use crate::mme::registry::MAX_LOADS_IN_FLIGHT;
        let root = tempfile::tempdir().unwrap();
        let gate = Arc::new(tokio::sync::Notify::new());
        let mut engine = FakeEngine::new();
        let mut urls = Vec::new();
        for i in 0..MAX_LOADS_IN_FLIGHT {
            let folder = root.path().join(format!("h{i}")).join("model");
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("config.pbtxt"), "backend: \"python\"\n").unwrap();
            urls.push(folder.display().to_string());
            let script = LoadScript {
                gate: Some(Arc::clone(&gate)),
                ..LoadScript::default()
            };
            engine = engine.on_load(&format!("h{i}"), script, None);
        }
        let registry = Arc::new(ModelRegistry::new(root.path(), UnloadTiming::default()));
        let container = ContainerPlugins::default();
        for (i, url) in urls.iter().enumerate() {
            let plan = plan(&format!("h{i}"), url);
            let short = Duration::from_millis(20);
            let outcome = load(
                &registry,
                &engine,
                None,
                plan,
                &container,
                short,
                OnTimeout::Undo,
            );
            assert!(matches!(outcome.await, Err(LoadFailure::TimedOut { .. })));
        }
        let why = registry.cannot_load().expect("every slot held");
        assert!(why.contains("no model can load"), "{why}");
        gate.notify_one();
        until(|| registry.cannot_load().is_none()).await;
    }
}
