//! What every request handler shares.

use std::sync::Arc;

use super::redact::Redactor;
use crate::config::{Config, Mode};
use crate::engine::ModelState;
use crate::metrics::Metrics;
use crate::mme::registry::{ModelRegistry, UnloadTiming};
use arc_swap::ArcSwapOption;

use crate::plugins::PluginHost;
use crate::sessions::Sessions;

/// The name `/invocations` uses when no default model is configured (as Triton's frontend).
pub const UNSPECIFIED_MODEL: &str = "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME";

/// Shared state of the HTTP server.
pub struct AppState<E> {
    /// The engine requests run on.
    pub engine: E,
    /// The resolved configuration the server runs with.
    pub config: Config,
    /// The models loaded through `/models` (multi-model endpoints; empty otherwise).
    pub registry: Arc<ModelRegistry>,
    /// The model `/invocations` serves.
    pub default_model: String,
    /// Loaded WebAssembly plugins, if a manifest was given; swapped whole on reload, while
    /// requests in flight keep the set they started with.
    pub plugins: ArcSwapOption<PluginHost>,
    /// What requests, plugin calls and model loads are counted in (`GET /metrics`).
    pub metrics: Metrics,
    /// Hides the server's folders in error bodies.
    pub redactor: Redactor,
    /// Open `/invocations-bidirectional-stream` streams (as many as `max_connections`).
    pub bidi_streams: Arc<tokio::sync::Semaphore>,
    /// Open stateful sessions; `None` when sessions are off.
    pub sessions: Option<Arc<Sessions<E>>>,
    /// Turns `true` when the server starts shutting down: open sessions close (1001).
    pub shutting_down: tokio::sync::watch::Sender<bool>,
    /// Why a single-model endpoint's artifact was refused at start ([`crate::artifacts`]): its
    /// model never loaded, `/ping` is unhealthy and its routes answer 503 with this.
    pub refused: Option<String>,
}

impl<E: crate::engine::Engine> AppState<E> {
    /// Loads the manifest again and swaps the plugin set in. On any error the old set stays and
    /// the error is returned. Returns how many plugins are now loaded.
    pub async fn reload_plugins(&self) -> Result<usize, String> {
        let Some(path) = &self.config.plugins else {
            return Err(
                "no plugin manifest is configured (--plugins or SAGEMAKER_TRITON_PLUGINS)".into(),
            );
        };
        let manifest = crate::plugins::host::secure_mode::container_manifest(
            path,
            self.config.artifacts.secure_mode.as_ref(),
        )?;
        let host = PluginHost::load(&manifest)
            .await
            .map_err(|e| e.to_string())?;
        self.check_served_model(&host).await?;
        let count = host.plugins().count();
        if let Some(earlier) = self.plugins.load_full() {
            host.continue_from(&earlier);
        }
        let mut loaded = self.registry.plugin_names();
        loaded.extend(host.plugins().map(|plugin| plugin.name.to_string()));
        self.plugins.store(Some(Arc::new(host)));
        // The series of plugins the reload took away go with them.
        self.metrics
            .forget_plugins(|plugin| loaded.contains(plugin));
        tracing::info!(manifest = %path.display(), plugins = count, "plugins reloaded");
        Ok(count)
    }

    /// Checks the models `host`'s adapters would serve with those that export `model-check`
    /// (`plugins::model_check`): a single-model endpoint's model, or every model loaded on a
    /// multi-model endpoint whose artifact brought no plugins of its own; the first refusal,
    /// naming the plugin and the model. A model that is not loaded (refused, or failed) is not
    /// checked: `/ping` says why it cannot serve. Multi-model loads are checked as they load
    /// (`mme::load`), with the manifest serving then.
    ///
    /// On a single-model endpoint, every model a plugin may call (its `models`) is one the
    /// core has (the repository is fixed): a misspelled name refuses the start or the reload,
    /// naming the plugin and the model, instead of failing every request. Such a model is
    /// loaded here, beside the default model (the core loads only that one itself), so a
    /// pipeline's models serve from the start; one that fails to load refuses the start or the
    /// reload the same way; none is loaded from an artifact the security check refused. A
    /// reload that drops a pipeline leaves its models loaded. (On a multi-model
    /// endpoint the models a pipeline calls may be loaded later; a call before is `unavailable`.)
    pub async fn check_served_model(&self, host: &PluginHost) -> Result<(), String> {
        if let Mode::SingleModel { .. } = &self.config.mode {
            for (plugin, model) in host.called_models() {
                match self.engine.model_state(model) {
                    Ok(Some(ModelState::Ready)) => {}
                    // The artifact was refused: nothing of it is loaded (`/ping` says why).
                    Ok(Some(_)) if self.refused.is_some() => {}
                    Ok(Some(_)) => self.engine.load_model(model).await.map_err(|e| {
                        format!(
                            "plugin '{plugin}' may call model '{model}', which did not load: {e}"
                        )
                    })?,
                    _ => {
                        return Err(format!(
                            "plugin '{plugin}' may call model '{model}' (its models), which this \
                             endpoint's repository does not have"
                        ));
                    }
                }
            }
        }
        let served: Vec<String> = match &self.config.mode {
            Mode::SingleModel { default_model, .. } => vec![default_model.clone()],
            Mode::MultiModel { .. } => {
                let (models, _) = self.registry.list(None, usize::MAX);
                models
                    .into_iter()
                    .filter(|model| model.plugins.is_none())
                    .map(|model| model.target)
                    .collect()
            }
        };
        for model in served {
            if let Ok(metadata) = self.engine.model_metadata(&model) {
                host.check_model(&model, &metadata).await?;
            }
        }
        Ok(())
    }

    /// Before a single-model endpoint serves: its model's sessions learn of it (its sequence
    /// idle limit aligned with the session expiration, `sessions::idle`). Multi-model loads do
    /// the same for each model as it loads.
    pub async fn prepare_sessions(&self) {
        if let (
            Some(sessions),
            Mode::SingleModel {
                repository,
                default_model,
            },
        ) = (&self.sessions, &self.config.mode)
        {
            sessions
                .model_loaded(default_model, &repository.join(default_model))
                .await;
        }
    }

    /// Whether an engine error message means out-of-memory: the OOM plugin's verdict when one
    /// is configured (and answers), else the built-in list.
    pub async fn is_out_of_memory(&self, message: &str) -> bool {
        if let Some(plugins) = self.plugins.load_full()
            && let Some(verdict) = plugins.is_out_of_memory(message).await
        {
            return verdict;
        }
        crate::mme::oom::is_out_of_memory(message)
    }

    /// Serves with `plugins` from the start (they can still be swapped by a reload).
    pub fn with_plugins(self, plugins: Option<Arc<PluginHost>>) -> AppState<E> {
        self.plugins.store(plugins);
        self
    }

    /// Hides `folder` from error bodies as `label`, beside the folders the configuration names.
    pub fn hiding(mut self, folder: &std::path::Path, label: &'static str) -> AppState<E> {
        self.redactor.hide(folder, label);
        self
    }

    /// Records why the single-model endpoint's artifact was refused at start.
    pub fn with_refusal(mut self, refused: Option<String>) -> AppState<E> {
        self.refused = refused;
        self
    }

    /// The state of a server on `engine` with `config`, without plugins: `/invocations` serves
    /// the configured default model, or on a multi-model endpoint [`UNSPECIFIED_MODEL`].
    pub fn new(engine: E, config: Config) -> AppState<E> {
        let (default_model, models_root) = match &config.mode {
            Mode::SingleModel { default_model, .. } => (
                default_model.clone(),
                crate::config::DEFAULT_MODELS_ROOT.into(),
            ),
            Mode::MultiModel { models_root, .. } => {
                (UNSPECIFIED_MODEL.to_owned(), models_root.clone())
            }
        };
        let sessions = config
            .sessions
            .map(|settings| Arc::new(Sessions::new(settings, engine.clone())));
        AppState {
            engine,
            registry: Arc::new(
                ModelRegistry::new(models_root, UnloadTiming::default())
                    .with_artifact_policy(config.artifacts.clone()),
            ),
            default_model,
            plugins: ArcSwapOption::empty(),
            metrics: Metrics::default(),
            redactor: Redactor::for_config(&config),
            bidi_streams: Arc::new(tokio::sync::Semaphore::new(
                config.http.client_limits.max_connections,
            )),
            shutting_down: tokio::sync::watch::Sender::new(false),
            refused: None,
            sessions,
            config,
        }
    }
}
