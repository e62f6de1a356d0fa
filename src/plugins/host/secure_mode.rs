//! Plugins under SageMaker Secure Mode: the one way to customise a model's payloads there, held
//! to the platform's policy instead of the manifest's.
//!
//! - Every plugin, the container's and every model artifact's, must be signed with one of the
//!   platform's keys (`TRIDENT_PLUGIN_TRUSTED_KEYS`); a manifest's own `require_signatures` and
//!   `trusted_keys` are not used, since the manifest may lie in the untrusted artifact.
//! - A plugin may ask for at most [`MEMORY_CEILING_MB`] of memory and [`TIME_CEILING_MS`] per
//!   call (the defaults, 64 MiB and 100 ms, are within them); a model's plugins get the lower of
//!   these and the container's `[model_plugins]` ceilings.
//! - A plugin's assets, and its cases file, must be kinds of file Secure Mode allows
//!   (`artifacts::allow_list`).
//! - With `TRIDENT_PLUGIN_REQUIRE_CASES=true`, every plugin must carry golden cases
//!   (`plugins::cases`), which pass before it serves.
//! - The manifest's `compile_cache` is not used: a folder the artifact names could hold planted
//!   compiled code. Plugins compile into trident's default cache folder.
//! - Plugins get nothing beyond what the WIT worlds give, as everywhere: no files, no
//!   environment, no network; their output is captured (see `plugins::store`).

use super::model_plugins::ModelPluginPolicy;
use crate::artifacts::SecureMode;
use crate::artifacts::controls::PLUGIN_KEYS_ENV;
use crate::plugins::platform::manifest::Manifest;

/// The most memory a plugin may ask for under Secure Mode.
pub const MEMORY_CEILING_MB: u64 = 128;
/// The longest time limit a plugin may ask for under Secure Mode.
pub const TIME_CEILING_MS: u64 = 1000;

/// Holds the container's manifest to Secure Mode's policy; an error names the plugin and the
/// setting at fault.
pub fn hold_manifest(manifest: &mut Manifest, secure: &SecureMode) -> Result<(), String> {
    if !manifest.plugins.is_empty() && secure.plugin_keys.is_empty() {
        return Err(format!(
            "under Secure Mode every plugin must be signed with one of the platform's keys, and \
             {PLUGIN_KEYS_ENV} sets none"
        ));
    }
    for (name, spec) in &manifest.plugins {
        if spec.memory_limit_mb > MEMORY_CEILING_MB {
            return Err(format!(
                "plugin '{name}': memory_limit_mb = {} is over Secure Mode's ceiling of \
                 {MEMORY_CEILING_MB}",
                spec.memory_limit_mb
            ));
        }
        if spec.time_limit_ms > TIME_CEILING_MS {
            return Err(format!(
                "plugin '{name}': time_limit_ms = {} is over Secure Mode's ceiling of \
                 {TIME_CEILING_MS}",
                spec.time_limit_ms
            ));
        }
    }
    manifest.require_signatures = true;
    manifest.trusted_keys = secure.plugin_keys.clone();
    manifest.require_cases |= secure.plugin_require_cases;
    manifest.secure_mode = true;
    if manifest.compile_cache.take().is_some() {
        tracing::warn!("under Secure Mode the manifest's compile_cache is not used");
    }
    hold_rules(&mut manifest.model_plugins);
    Ok(())
}

/// Holds what model artifacts' plugins may do to Secure Mode's policy.
pub fn hold_model_policy(policy: &mut ModelPluginPolicy, secure: &SecureMode) {
    policy.require_signatures = true;
    policy.trusted_keys = secure.plugin_keys.clone();
    policy.require_cases |= secure.plugin_require_cases;
    policy.secure_mode = true;
    policy.compile_cache = None;
    hold_rules(&mut policy.rules);
}

fn hold_rules(rules: &mut crate::plugins::platform::manifest::ModelPluginRules) {
    rules.memory_limit_mb = rules.memory_limit_mb.min(MEMORY_CEILING_MB);
    rules.time_limit_ms = rules.time_limit_ms.min(TIME_CEILING_MS);
}

/// The container's manifest at `path`, held to Secure Mode when it is on.
pub fn container_manifest(
    path: &std::path::Path,
    secure: Option<&SecureMode>,
) -> Result<Manifest, String> {
    let mut manifest = Manifest::load(path).map_err(|e| e.to_string())?;
    if let Some(secure) = secure {
        hold_manifest(&mut manifest, secure)
            .map_err(|e| format!("plugin manifest {}: {e}", path.display()))?;
    }
    Ok(manifest)
}
