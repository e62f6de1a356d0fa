//! `[model_plugins]`: the container's rules for the plugins a model artifact brings.

use serde::Deserialize;

use super::plugin_spec::{default_init_time, default_memory, default_time};
use super::{DEFAULT_INIT_TIME_LIMIT_MS, DEFAULT_MEMORY_LIMIT_MB, DEFAULT_TIME_LIMIT_MS};

/// Default for `[model_plugins] budget_mb`: room for fourteen distinct Python plugins (35 MiB
/// of compiled interpreter each) or hundreds of Rust ones.
pub const DEFAULT_MODEL_PLUGIN_BUDGET_MB: u64 = 512;

fn default_budget() -> u64 {
    DEFAULT_MODEL_PLUGIN_BUDGET_MB
}

/// The container's rules for the plugins a model artifact brings on a multi-model endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPluginRules {
    /// Whether a model artifact may bring plugins at all (a load with a `plugins.toml` is
    /// refused when not).
    #[serde(default = "allowed")]
    pub allowed: bool,
    /// The most memory a model's plugin may ask for.
    #[serde(default = "default_memory")]
    pub memory_limit_mb: u64,
    /// The longest time limit a model's plugin may ask for.
    #[serde(default = "default_time")]
    pub time_limit_ms: u64,
    /// The longest initialisation (`init_time_limit_ms`, its `check-config` at the model's
    /// load) a model's plugin may ask for: every plugin's initialisation and golden cases run
    /// within the model's load time-out too.
    #[serde(default = "default_init_time")]
    pub init_time_limit_ms: u64,
    /// The most one model's plugins may hold in the process, in MiB: their compiled code,
    /// identical components counted once ([`super::super::loading::footprint`]). A load past it is
    /// refused, naming both.
    #[serde(default = "default_budget")]
    pub budget_mb: u64,
    /// How many calls of one model's plugins may run at once, each model on its own
    /// ([`crate::plugins::runtime::scheduler`]); by default half the cores, at least one, so that no one model's
    /// guests can hold every core ([`ModelPluginRules::calls_at_once`]).
    #[serde(default)]
    pub concurrency: Option<usize>,
}

fn allowed() -> bool {
    true
}

impl ModelPluginRules {
    /// How many calls of one model's plugins run at once: `concurrency`, else half the cores
    /// (rounded up).
    pub fn calls_at_once(&self) -> usize {
        self.concurrency.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .div_ceil(2)
                .min(crate::plugins::runtime::engine::MAX_MODEL_CONCURRENCY)
        })
    }
}

impl Default for ModelPluginRules {
    fn default() -> Self {
        ModelPluginRules {
            allowed: true,
            memory_limit_mb: DEFAULT_MEMORY_LIMIT_MB,
            time_limit_ms: DEFAULT_TIME_LIMIT_MS,
            init_time_limit_ms: DEFAULT_INIT_TIME_LIMIT_MS,
            budget_mb: DEFAULT_MODEL_PLUGIN_BUDGET_MB,
            concurrency: None,
        }
    }
}
