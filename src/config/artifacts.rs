//! The artifacts section: SageMaker Secure Mode and the native-code boundary, resolved into an
//! [`ArtifactPolicy`] (what it forbids: [`crate::artifacts`]).

use std::path::PathBuf;

use super::args::ServeArgs;
use super::{ConfigError, flag};
use crate::artifacts::controls::{
    NATIVE_CODE_ENV, PLUGIN_KEYS_ENV, PLUGIN_REQUIRE_CASES_ENV, SECURE_MODE_ENV,
    SECURITY_CONTROLS_ENV, UNTRUSTED_CHANNELS_ENV,
};
use crate::artifacts::{ArtifactPolicy, Control, NativeCode, SecureMode};
use crate::confine::serving::{SERVING_ISOLATION_ENV, parse_writable};
use crate::confine::{ISOLATION_ENV, Isolation, PythonIsolation};

impl ServeArgs {
    /// The artifact policy. Under Secure Mode the controls and the untrusted channels must be
    /// set (as in SageMaker's other containers), every control must be one trident enforces (a
    /// control it would silently skip is a start-up error instead), and every channel a folder.
    pub(super) fn artifact_policy(&self, multi_model: bool) -> Result<ArtifactPolicy, ConfigError> {
        let native_code = match self.artifact_native_code.as_deref().map(str::trim) {
            None | Some("") if multi_model => NativeCode::Refused,
            None | Some("") => NativeCode::Allowed,
            Some("allow") => NativeCode::Allowed,
            Some("refuse") => NativeCode::Refused,
            Some(other) => {
                return Err(ConfigError(format!(
                    "ERROR: {NATIVE_CODE_ENV} must be allow or refuse, got '{other}'"
                )));
            }
        };
        let secure_mode = if flag(self.secure_mode.trim()) {
            Some(self.secure_mode_settings()?)
        } else {
            None
        };
        let python_isolation = match self.python_isolation.as_deref().map(str::trim) {
            None | Some("") if multi_model || secure_mode.is_some() => PythonIsolation::Required,
            None | Some("") => PythonIsolation::BestEffort,
            Some(value) => PythonIsolation::parse(value).ok_or_else(|| {
                ConfigError(format!(
                    "ERROR: {ISOLATION_ENV} must be required, best-effort or off, got '{value}'"
                ))
            })?,
        };
        let serving_isolation = match self.serving_isolation.as_deref().map(str::trim) {
            None | Some("") => Isolation::BestEffort,
            Some(value) => Isolation::parse(value).ok_or_else(|| {
                ConfigError(format!(
                    "ERROR: {SERVING_ISOLATION_ENV} must be required, best-effort or off, got \
                     '{value}'"
                ))
            })?,
        };
        let serving_writable = parse_writable(self.serving_writable.as_deref().unwrap_or(""))
            .map_err(|e| ConfigError(format!("ERROR: {e}")))?;
        let mut policy = ArtifactPolicy::default();
        policy.python_isolation = python_isolation;
        policy.serving_isolation = serving_isolation;
        policy.serving_writable = serving_writable;
        policy.secure_mode = secure_mode;
        policy.native_code = native_code;
        if let Some(folder) = self
            .artifact_staging_dir
            .clone()
            .filter(|f| !f.as_os_str().is_empty())
        {
            policy.staging_dir = folder;
        }
        Ok(policy)
    }

    fn secure_mode_settings(&self) -> Result<SecureMode, ConfigError> {
        let required = |value: &Option<String>, name: &str| {
            value.clone().ok_or_else(|| {
                ConfigError(format!(
                    "ERROR: {SECURE_MODE_ENV} is true but {name} is not set"
                ))
            })
        };
        let controls = items(&required(&self.security_controls, SECURITY_CONTROLS_ENV)?)
            .map(|name| {
                Control::parse(name).ok_or_else(|| {
                    let known: Vec<&str> = Control::ALL.iter().map(|c| c.name()).collect();
                    ConfigError(format!(
                        "ERROR: {SECURITY_CONTROLS_ENV} names {name}, which trident does not \
                         enforce (it enforces {})",
                        known.join(", ")
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        let untrusted_channels =
            items(&required(&self.untrusted_channels, UNTRUSTED_CHANNELS_ENV)?)
                .map(|channel| {
                    let path = PathBuf::from(channel);
                    if path.is_dir() {
                        Ok(path)
                    } else {
                        Err(ConfigError(format!(
                            "ERROR: {UNTRUSTED_CHANNELS_ENV} names {channel}, which is not a folder"
                        )))
                    }
                })
                .collect::<Result<_, _>>()?;
        let plugin_keys = items(self.plugin_trusted_keys.as_deref().unwrap_or(""))
            .map(|key| {
                crate::plugins::platform::signing::parse_public_key(key)
                    .map(|_| key.to_owned())
                    .map_err(|e| ConfigError(format!("ERROR: {PLUGIN_KEYS_ENV}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let plugin_require_cases = match self.plugin_require_cases.trim() {
            "" => false,
            value if value.eq_ignore_ascii_case("true") => true,
            value if value.eq_ignore_ascii_case("false") => false,
            other => {
                return Err(ConfigError(format!(
                    "ERROR: {PLUGIN_REQUIRE_CASES_ENV} must be true or false, got '{other}'"
                )));
            }
        };
        Ok(SecureMode {
            controls,
            untrusted_channels,
            plugin_keys,
            plugin_require_cases,
        })
    }
}

/// The non-empty items of a comma-separated list, trimmed.
fn items(list: &str) -> impl Iterator<Item = &str> {
    list.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
}
