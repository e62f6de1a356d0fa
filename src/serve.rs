//! `trident serve`'s serving process: configuration → Triton core → HTTP server, until SIGTERM
//! (the supervisor around it: [`crate::supervisor`]).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use tokio::net::TcpListener;

use crate::artifacts::{ImageBackends, Prepared};
use crate::config::process::{ProcessRole, Supervision};
use crate::config::{Config, Mode};
use crate::engine::triton::{self, ModelControl, Server, ServerConfig, Triton, TritonEngine};
use crate::http::{self, AppState};
use crate::mme::journal::Journal;
use crate::plugins::PluginHost;
use crate::supervisor;

/// Why serving stopped with an error.
pub type ServeError = Box<dyn std::error::Error + Send + Sync>;

/// The Triton core's options for a trident configuration; `prepared` is what the core reads
/// for a single-model endpoint's artifact, `None` when it was refused (the core then starts
/// with no model).
pub fn core_config(config: &Config, prepared: Option<&Prepared>) -> ServerConfig {
    let (repository, startup_models) = match &config.mode {
        Mode::SingleModel {
            repository,
            default_model,
        } => (
            prepared.map_or_else(|| repository.clone(), |p| p.repository.clone()),
            prepared
                .map(|_| default_model.clone())
                .into_iter()
                .collect(),
        ),
        Mode::MultiModel { repository, .. } => (repository.clone(), Vec::new()),
    };
    let model_load_threads = matches!(config.mode, Mode::MultiModel { .. })
        .then_some(crate::mme::registry::CORE_LOAD_THREADS);
    ServerConfig {
        model_repositories: vec![repository],
        model_control: ModelControl::Explicit { startup_models },
        logging: config.core.logging.clone(),
        backend_config: backend_config(config),
        model_namespacing: config.core.model_namespacing,
        buffer_manager_threads: config.core.buffer_manager_threads,
        model_load_threads,
        exit_timeout: CORE_EXIT_TIMEOUT,
        model_load_gpu_limits: config
            .core
            .model_load_gpu_limit
            .map(|fraction| gpu_ids().into_iter().map(|id| (id, fraction)).collect())
            .unwrap_or_default(),
        ..ServerConfig::default()
    }
}

/// How long the core's stop may wait for its models to unload, once the requests have drained
/// and the sessions ended (Triton's default is 30 s): a model brought back after its process
/// died leaves instances whose unload never finishes, and SageMaker kills the container 30 s
/// after its SIGTERM. With the sessions' ENDs before it, it fits within the supervisor's margin
/// after the drain's grace period ([`supervisor::STOP_MARGIN`], checked here); what a cut-short
/// stop leaves, the supervisor ends.
pub const CORE_EXIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

// A stop's ENDs and the core's stop end before the supervisor's SIGKILL, with 2 s to spare.
const _: () = assert!(
    crate::sessions::END_WITHIN.as_secs() + CORE_EXIT_TIMEOUT.as_secs() + 2
        <= supervisor::STOP_MARGIN.as_secs()
);

/// The python backend's setting that names its shared memory regions.
const SHM_PREFIX_SETTING: &str = "shm-region-prefix-name";

/// The backends' settings: the configuration's, and for a supervised serving process the
/// prefix of its shared memory regions ([`Supervision::shm_region_prefix`]), which its
/// supervisor removes when it dies (a prefix of the user's own is replaced, with a warning).
fn backend_config(config: &Config) -> Vec<crate::engine::BackendSetting> {
    let mut settings = config.core.backend_config.clone();
    if let ProcessRole::Supervised(supervision) = &config.process {
        let before = settings.len();
        settings.retain(|s| !(s.backend == "python" && s.setting == SHM_PREFIX_SETTING));
        if settings.len() != before {
            tracing::warn!(
                "--backend-config=python,{SHM_PREFIX_SETTING} is trident's own under its \
                 supervisor (it removes a dead serving process's regions by it); yours is not used"
            );
        }
        settings.push(crate::engine::BackendSetting::new(
            "python",
            SHM_PREFIX_SETTING,
            supervision.shm_region_prefix(),
        ));
    }
    settings
}

/// The GPUs of this machine, by their `/dev/nvidia<N>` device files.
fn gpu_ids() -> Vec<i32> {
    let mut ids: Vec<i32> = std::fs::read_dir("/dev")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter_map(|name| name.strip_prefix("nvidia")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}

/// Starts the core on a thread of its own, named `triton-core`: the threads the core makes are
/// named after the thread that makes them, so in `top -H` or a profile they read as the core's.
async fn start_core(triton: &'static Triton, core: ServerConfig) -> Result<Server, ServeError> {
    let (sender, started) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("triton-core".into())
        .spawn(move || drop(sender.send(Server::start(triton, &core))))?;
    Ok(started.await??)
}

/// Shows on `/metrics` how python models and the serving process are confined.
fn record_isolation(state: &AppState<TritonEngine>) {
    let artifacts = &state.config.artifacts;
    state.metrics.set_python_isolation(
        artifacts.python_isolation.name(),
        artifacts.landlock.abi().unwrap_or(0),
    );
    if let Some(enforced) = crate::confine::serving::enforced() {
        state
            .metrics
            .set_serving_isolation(artifacts.serving_isolation.name(), enforced.name());
    }
}

/// Runs the server until SIGTERM or Ctrl-C, then drains and stops the core. As the serving
/// process of a supervisor ([`crate::supervisor`]): on the supervisor's listener, with the
/// models a predecessor had, and asking to be replaced when the core cannot bring a model back.
pub async fn run(config: Config) -> Result<(), ServeError> {
    let supervision = match &config.process {
        ProcessRole::Supervised(supervision) => Some(supervision.clone()),
        ProcessRole::Supervisor(_) | ProcessRole::Alone => None,
    };
    if let Some(supervision) = &supervision {
        supervisor::follow_supervisor(supervision)?;
    }
    // Listened for before the slow start: a SIGHUP while the models load is held and reloads
    // the plugins once serving, instead of ending the process.
    let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .inspect_err(|error| {
            tracing::warn!(%error, "cannot listen for SIGHUP; plugin reload only through POST /plugins/reload");
        })
        .ok();
    let plugins = load_plugins(&config).await?;
    // Connections wait in the listener's backlog while the core loads the models.
    let listener = listener(&config, supervision.as_ref()).await?;
    let (state, prepared) = with_core(config, plugins).await?;
    if let Some(host) = state.plugins.load_full() {
        state
            .check_served_model(&host)
            .await
            .map_err(|e| format!("plugin manifest: {e}"))?;
    }
    state.prepare_sessions().await;
    record_isolation(&state);
    if let Some(supervision) = &supervision {
        resume(&state, supervision).await;
    }
    if let Some(hangup) = hangup {
        tokio::spawn(reload_on_sighup(Arc::clone(&state), hangup));
    }
    if let Some(port) = state.config.http.metrics_port {
        let address = std::net::SocketAddr::new(state.config.http.listen.ip(), port);
        let listener = TcpListener::bind(address)
            .await
            .map_err(|e| format!("cannot listen for metrics on {address}: {e}"))?;
        tracing::info!(address = %listener.local_addr()?, "serving metrics");
        tokio::spawn(http::serve_metrics(listener, Arc::clone(&state)));
    }
    tracing::info!("serving");
    if let Some(supervision) = &supervision {
        supervisor::say_serving(supervision);
    }
    let replace = Arc::new(OnceLock::new());
    let stop = {
        let (engine, replace) = (state.engine.clone(), Arc::clone(&replace));
        let supervised = supervision.is_some();
        async move {
            tokio::select! {
                () = shutdown_signal() => {}
                why = unrecoverable(&engine), if supervised => drop(replace.set(why)),
            }
        }
    };
    let grace = state.config.http.shutdown_grace;
    http::serve(listener, Arc::clone(&state), stop, grace).await;
    if let Some(why) = replace.get() {
        // The core is not stopped: stopping waits on the instances whose process died, which
        // never finish. The supervisor ends what this process leaves and starts a new one.
        tracing::error!(
            why,
            "the core cannot bring a model back: exiting for the supervisor to start a new serving process"
        );
        std::process::exit(i32::from(supervisor::RESTART_EXIT_CODE));
    }
    // Open sessions end first: the core would wait for each open sequence as for a request.
    if let Some(sessions) = &state.sessions {
        sessions.shutdown().await;
    }
    // Stopping the core waits for its own in-flight work; keep it off the async workers. The
    // artifact's private tree goes once the core no longer reads it.
    tokio::task::spawn_blocking(move || {
        drop(state);
        if let Some(staged) = prepared.and_then(|p| p.staged).and_then(Arc::into_inner) {
            staged.remove_now();
        }
    })
    .await?;
    tracing::info!("stopped");
    Ok(())
}

/// The plugins of the configuration's manifest, if it names one.
async fn load_plugins(config: &Config) -> Result<Option<Arc<PluginHost>>, ServeError> {
    let Some(path) = &config.plugins else {
        return Ok(None);
    };
    let manifest = crate::plugins::host::secure_mode::container_manifest(
        path,
        config.artifacts.secure_mode.as_ref(),
    )?;
    let host = PluginHost::load(&manifest).await?;
    tracing::info!(manifest = %path.display(), plugins = host.plugins().count(), "plugins loaded");
    Ok(Some(Arc::new(host)))
}

/// The server's state over a started core: the Triton library loaded, its start-up models
/// loaded, the installation folder and the artifacts' private trees hidden from error bodies;
/// and what the core reads for a single-model endpoint's artifact (kept until the end).
async fn with_core(
    mut config: Config,
    plugins: Option<Arc<PluginHost>>,
) -> Result<(Arc<AppState<TritonEngine>>, Option<Prepared>), ServeError> {
    let triton = triton::library::load(config.core.triton_home.as_deref())?;
    let prepared = check_artifacts(&mut config, triton).await?;
    let refusal = prepared.as_ref().err().cloned();
    let prepared = prepared.ok().flatten();
    if let Mode::MultiModel { repository, .. } = &config.mode {
        std::fs::create_dir_all(repository).map_err(|e| {
            format!(
                "cannot make the multi-model repository {} (--multi-model-repository): {e}",
                repository.display()
            )
        })?;
    }
    let core = core_config(&config, prepared.as_ref());
    let staging =
        crate::artifacts::staging::StagingArea::folder_under(&config.artifacts.staging_dir);
    // The installation folder (…/lib/libtritonserver.so → …) is hidden from error bodies.
    let triton_folder = triton
        .path()
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    let server = start_core(triton, core).await?;
    let engine = TritonEngine::new(server).with_reload_deadline(config.core.model_load_timeout);
    let mut state = AppState::new(engine, config)
        .with_plugins(plugins)
        .with_refusal(refusal);
    if let Some(folder) = &triton_folder {
        state = state.hiding(folder, "<triton>");
    }
    state = state.hiding(&staging, "<private copy>");
    Ok((Arc::new(state), prepared))
}

/// The backends folder the Triton core uses when it is given none.
const TRITON_DEFAULT_BACKENDS: &str = "/opt/tritonserver/backends";

/// Completes the configuration's artifact policy with what the image has (its backends) and
/// the untrusted channels' check, then prepares a single-model endpoint's repository
/// ([`crate::artifacts::ArtifactPolicy::prepare`]; `Ok(None)` on a multi-model endpoint): a
/// refusal is what `/ping` and `/invocations` answer, and the core starts without the model.
/// Reads the file system on the blocking pool.
async fn check_artifacts(
    config: &mut Config,
    triton: &'static Triton,
) -> Result<Result<Option<Prepared>, String>, ServeError> {
    let policy = config.artifacts.clone();
    // Without a home the core looks in its own default folder, and so does the check.
    let backends = triton.home().map_or_else(
        || std::path::PathBuf::from(TRITON_DEFAULT_BACKENDS),
        |home| home.join("backends"),
    );
    let (repository, models_root) = match &config.mode {
        Mode::SingleModel { repository, .. } => (Some(repository.clone()), None),
        Mode::MultiModel { models_root, .. } => (None, Some(models_root.clone())),
    };
    let (policy, prepared) = tokio::task::spawn_blocking(move || {
        let mut policy = policy;
        policy.image = Arc::new(ImageBackends::in_folder(&backends));
        policy.stub_launcher = crate::confine::launcher_installed(&backends);
        if !policy.stub_launcher && policy.python_isolation != crate::confine::PythonIsolation::Off
        {
            tracing::warn!(
                backends = %backends.display(),
                "the python backend's stub is not trident's launcher: python models {}",
                if policy.python_isolation == crate::confine::PythonIsolation::Required {
                    "are refused"
                } else {
                    "run unconfined"
                }
            );
        }
        policy.check_channels(models_root.as_deref());
        let prepared = repository
            .map(|repository| policy.prepare(&repository))
            .transpose();
        (policy, prepared)
    })
    .await?;
    if let Err(refusal) = &prepared {
        tracing::error!(%refusal, "the model is not loaded; /ping answers unhealthy");
    }
    config.artifacts = policy;
    Ok(prepared.map_err(|r| r.to_string()))
}

/// The supervisor's listener for its serving process; else bound here.
async fn listener(
    config: &Config,
    supervision: Option<&Supervision>,
) -> Result<TcpListener, ServeError> {
    if let Some(supervision) = supervision {
        let listener = supervisor::listener::take()?;
        tracing::info!(
            restarts = supervision.restarts,
            "serving process: on the supervisor's listener"
        );
        return Ok(listener);
    }
    let listener = TcpListener::bind(config.http.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.http.listen))?;
    tracing::info!(address = %listener.local_addr()?, "listening");
    Ok(listener)
}

/// Takes up where a serving process that ended abnormally left off: counts the restart and, on
/// a multi-model endpoint, loads the models it had and keeps the journal from now on.
async fn resume(state: &Arc<AppState<TritonEngine>>, supervision: &Supervision) {
    state.metrics.set_restarts(supervision.restarts);
    if matches!(state.config.mode, Mode::MultiModel { .. }) {
        let journal = Journal::in_folder(&supervision.state_dir);
        let models = journal.read();
        if !models.is_empty() {
            http::models::restore(state, models).await;
        }
        state.registry.keep_journal(journal);
    }
}

/// Resolves, with why, once the core cannot bring back a model whose process died (every
/// reload failed, or one has not finished within the load timeout).
async fn unrecoverable(engine: &TritonEngine) -> String {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tick.tick().await;
        if let Some(why) = engine.cannot_recover() {
            return why;
        }
    }
}

/// SIGHUP reloads the plugin manifest; a manifest that fails to load leaves the old plugins.
async fn reload_on_sighup(
    state: Arc<AppState<TritonEngine>>,
    mut hangup: tokio::signal::unix::Signal,
) {
    while hangup.recv().await.is_some() {
        if let Err(error) = state.reload_plugins().await {
            tracing::error!(%error, "plugin reload failed; the previous plugins stay in service");
        }
    }
}

async fn shutdown_signal() {
    let mut terminate =
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(signal) => signal,
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM; stopping on Ctrl-C only");
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupt received"),
    }
}
