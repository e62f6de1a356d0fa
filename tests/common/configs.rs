//! Server configurations the test crates share: a single model or a multi-model endpoint over a
//! repository, with a short shutdown grace so a test binary stops quickly.

use std::path::{Path, PathBuf};
use std::time::Duration;

use trident::config::{Config, Mode, PingMode};

use super::models_dir;

/// How long a test server waits for in-flight requests when it stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// One model of the test models (`tests/models`) as the default model.
pub fn single_model(model: &str) -> Config {
    single_model_in(models_dir(), model)
}

/// One model of `repository` as the default model.
pub fn single_model_in(repository: PathBuf, model: &str) -> Config {
    let mut config = Config::new(Mode::SingleModel {
        repository,
        default_model: model.into(),
    });
    config.http.shutdown_grace = SHUTDOWN_GRACE;
    config
}

/// A multi-model endpoint over the test models, loading artifacts from `models_root`, with
/// SageMaker's multi-model ping (`live`).
pub fn multi_model(models_root: &Path) -> Config {
    let mut config = Config {
        ping_mode: PingMode::Live,
        ..Config::new(Mode::MultiModel {
            repository: models_dir(),
            models_root: models_root.to_path_buf(),
        })
    };
    config.http.shutdown_grace = SHUTDOWN_GRACE;
    config
}

/// `config` with `change` made to it (a setting of a section, for one deployment).
pub fn with(mut config: Config, change: impl FnOnce(&mut Config)) -> Config {
    change(&mut config);
    config
}
