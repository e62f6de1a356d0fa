//! `trident serve`: configuration → Triton core → HTTP server, until SIGTERM.

use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::config::{Config, Mode};
use crate::engine::triton::{self, ModelControl, Server, ServerConfig, Triton, TritonEngine};
use crate::http::{self, AppState};
use crate::plugins::PluginHost;
use crate::plugins::manifest::Manifest;

/// Why serving stopped with an error.
pub type ServeError = Box<dyn std::error::Error + Send + Sync>;

/// The Triton core's options for a trident configuration.
pub fn core_config(config: &Config) -> ServerConfig {
    let (repository, startup_models) = match &config.mode {
        Mode::SingleModel {
            repository,
            default_model,
        } => (repository.clone(), vec![default_model.clone()]),
        Mode::MultiModel { repository, .. } => (repository.clone(), Vec::new()),
    };
    ServerConfig {
        model_repositories: vec![repository],
        model_control: ModelControl::Explicit { startup_models },
        logging: config.core_logging.clone(),
        backend_config: config.backend_config.clone(),
        model_namespacing: config.model_namespacing,
        buffer_manager_threads: config.buffer_manager_threads,
        model_load_gpu_limits: config
            .model_load_gpu_limit
            .map(|fraction| gpu_ids().into_iter().map(|id| (id, fraction)).collect())
            .unwrap_or_default(),
        ..ServerConfig::default()
    }
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

/// Runs the server until SIGTERM or Ctrl-C, then drains and stops the core.
pub async fn run(config: Config) -> Result<(), ServeError> {
    // Bind first: SageMaker expects connections to be accepted right away; they wait in the
    // backlog while the core loads the model.
    let plugins = match &config.plugins {
        Some(path) => {
            let manifest = Manifest::load(path)?;
            let host = PluginHost::load(&manifest).await?;
            tracing::info!(manifest = %path.display(), plugins = host.plugins().count(), "plugins loaded");
            Some(Arc::new(host))
        }
        None => None,
    };
    let listener = TcpListener::bind(config.listen).await?;
    tracing::info!(address = %listener.local_addr()?, "listening");
    let triton = triton::library::load(config.triton_home.as_deref())?;
    if let Mode::MultiModel { repository, .. } = &config.mode {
        std::fs::create_dir_all(repository)?;
    }
    let core = core_config(&config);
    // The installation folder (…/lib/libtritonserver.so → …) is hidden from error bodies.
    let triton_folder = triton
        .path()
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    let server = start_core(triton, core).await?;
    let grace = config.shutdown_grace;
    let metrics_port = config.metrics_port;
    let mut state = AppState::new(TritonEngine::new(server), config).with_plugins(plugins);
    if let Some(folder) = &triton_folder {
        state = state.hiding(folder, "<triton>");
    }
    let state = Arc::new(state);
    tokio::spawn(reload_on_sighup(Arc::clone(&state)));
    if let Some(port) = metrics_port {
        let listener = TcpListener::bind((state.config.listen.ip(), port)).await?;
        tracing::info!(address = %listener.local_addr()?, "serving metrics");
        tokio::spawn(http::serve_metrics(listener, Arc::clone(&state)));
    }
    tracing::info!("serving");
    http::serve(listener, Arc::clone(&state), shutdown_signal(), grace).await;
    // Stopping the core waits for its own in-flight work; keep it off the async workers.
    tokio::task::spawn_blocking(move || drop(state)).await?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGHUP reloads the plugin manifest; a manifest that fails to load leaves the old plugins.
async fn reload_on_sighup(state: Arc<AppState<TritonEngine>>) {
    let Ok(mut hangup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
    else {
        tracing::warn!("cannot listen for SIGHUP; plugin reload only through POST /plugins/reload");
        return;
    };
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
