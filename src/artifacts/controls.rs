//! What can forbid a kind of file in a model artifact: SageMaker Secure Mode's security controls,
//! and trident's own native-code boundary.

use std::fmt;

/// The environment variable that turns Secure Mode on (`true`).
pub const SECURE_MODE_ENV: &str = "SAGEMAKER_SECURE_MODE";
/// The environment variable listing the controls Secure Mode enforces.
pub const SECURITY_CONTROLS_ENV: &str = "SAGEMAKER_SECURITY_CONTROLS";
/// The environment variable listing the folders whose files are untrusted.
pub const UNTRUSTED_CHANNELS_ENV: &str = "SAGEMAKER_UNTRUSTED_CHANNELS";
/// The environment variable that says whether artifacts may bring native code into the serving
/// process (`allow` or `refuse`).
pub const NATIVE_CODE_ENV: &str = "TRIDENT_ARTIFACT_NATIVE_CODE";

/// The environment variable with the platform's plugin signing keys (hex ed25519, comma-separated).
pub const PLUGIN_KEYS_ENV: &str = "TRIDENT_PLUGIN_TRUSTED_KEYS";

/// The environment variable that, under Secure Mode, refuses every plugin that carries no
/// golden cases (`true`).
pub const PLUGIN_REQUIRE_CASES_ENV: &str = "TRIDENT_PLUGIN_REQUIRE_CASES";

/// One of SageMaker Secure Mode's security controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Control {
    /// No code of the artifact's own: scripts, python models, execution environments, native
    /// libraries, backends the image does not have.
    CustomInferenceScripts,
    /// No pickle-based files (they run code when loaded).
    PickleFiles,
    /// No `requirements.txt`.
    RequirementsTxt,
    /// No `trust_remote_code`.
    TrustRemoteCode,
    /// No Jinja chat templates.
    ChatTemplate,
}

impl Control {
    /// Every control, in the order the docs list them.
    pub const ALL: [Control; 5] = [
        Control::CustomInferenceScripts,
        Control::PickleFiles,
        Control::RequirementsTxt,
        Control::TrustRemoteCode,
        Control::ChatTemplate,
    ];

    /// The control's name in `SAGEMAKER_SECURITY_CONTROLS`.
    pub fn name(self) -> &'static str {
        match self {
            Control::CustomInferenceScripts => "DISALLOW_CUSTOM_INFERENCE_SCRIPTS",
            Control::PickleFiles => "DISALLOW_PICKLE_FILES",
            Control::RequirementsTxt => "DISALLOW_REQUIREMENTS_TXT",
            Control::TrustRemoteCode => "DISALLOW_TRUST_REMOTE_CODE",
            Control::ChatTemplate => "DISALLOW_CHAT_TEMPLATE",
        }
    }

    /// The control named `name`.
    pub fn parse(name: &str) -> Option<Control> {
        Control::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// What forbids a rule's finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Gate {
    /// A Secure Mode control.
    Secure(Control),
    /// The native-code boundary (`TRIDENT_ARTIFACT_NATIVE_CODE=refuse`).
    NativeCode,
    /// Secure Mode's allow-list of kinds of file ([`super::allow_list`]), in force with any
    /// control.
    AllowList,
    /// What no setting allows: an artifact reaching outside itself.
    Always,
    /// `TRIDENT_PYTHON_ISOLATION=required` on a host whose kernel cannot confine python models.
    PythonIsolation,
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gate::Secure(control) => {
                write!(
                    f,
                    "Secure Mode's {} ({SECURITY_CONTROLS_ENV})",
                    control.name()
                )
            }
            Gate::NativeCode => write!(
                f,
                "{NATIVE_CODE_ENV}=refuse (the default on a multi-model endpoint)"
            ),
            Gate::Always => write!(f, "trident in every configuration"),
            Gate::PythonIsolation => write!(
                f,
                "{}=required (the default under Secure Mode and on a multi-model endpoint)",
                crate::confine::ISOLATION_ENV
            ),
            Gate::AllowList => write!(
                f,
                "Secure Mode's allow-list of kinds of file ({SECURE_MODE_ENV}; SECURITY.md lists them)"
            ),
        }
    }
}
