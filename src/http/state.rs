//! What every request handler shares.

use std::sync::Arc;

use crate::config::{Config, Mode};
use crate::metrics::Metrics;
use crate::mme::registry::{ModelRegistry, UnloadTiming};

/// The name `/invocations` uses when no default model is configured (as Triton's frontend).
pub const UNSPECIFIED_MODEL: &str = "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME";

/// Decides whether an engine error message means out-of-memory (507).
pub type OomClassifier = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Shared state of the HTTP server.
pub struct AppState<E> {
    pub engine: E,
    pub config: Config,
    pub registry: ModelRegistry,
    /// The model `/invocations` serves.
    pub default_model: String,
    pub is_oom: OomClassifier,
    pub metrics: Metrics,
}

impl<E> AppState<E> {
    pub fn new(engine: E, config: Config) -> AppState<E> {
        let (default_model, models_root) = match &config.mode {
            Mode::SingleModel { default_model, .. } => (
                default_model.clone(),
                crate::mme::url::DEFAULT_MODELS_ROOT.into(),
            ),
            Mode::MultiModel { models_root, .. } => {
                (UNSPECIFIED_MODEL.to_owned(), models_root.clone())
            }
        };
        AppState {
            engine,
            registry: ModelRegistry::new(models_root, UnloadTiming::default()),
            default_model,
            is_oom: Arc::new(crate::mme::oom::is_out_of_memory),
            metrics: Metrics::default(),
            config,
        }
    }
}
