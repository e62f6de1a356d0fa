//! The deployments of [`super::start`], as containers of trident's image: each its own container,
//! run as SageMaker runs it (`scripts/image run`), configured by SageMaker's environment variables
//! alone, its model at `/opt/ml/model` (the multi-model endpoint's artifacts at
//! `/opt/ml/models`).

use super::*;
use common::container::{Container, Volume};

/// Checks that look into the test's own core, or need a deployment no environment variable
/// makes (the multi-model list's page size): not run against containers.
pub(super) const IN_PROCESS_ONLY: &[&str] = &[
    "mme_list_pages",
    "mme_target_model_header_is_remembered",
    "ping_ready_fails_but_live_passes_after_a_failed_load",
];

/// A deployment: its name, its model (none: the multi-model endpoint) and its variables.
type Deployment = (
    &'static str,
    Option<&'static str>,
    &'static [(&'static str, &'static str)],
);

/// The same names and settings as the in-process servers of [`super::start`].
const DEPLOYMENTS: &[Deployment] = &[
    ("sme", Some("native_add_sub"), &[]),
    ("identity", Some("native_identity_fp32"), &[]),
    ("failing", Some("exec_fail"), &[]),
    ("decoupled", Some("native_repeat"), &[]),
    (
        "generate",
        Some("text_echo"),
        &[("SAGEMAKER_TRITON_INFERENCE_TYPE", "generate")],
    ),
    (
        "stream",
        Some("native_text_stream"),
        &[("SAGEMAKER_TRITON_INFERENCE_TYPE", "generate_stream")],
    ),
    (
        "live",
        Some("native_add_sub"),
        &[("SAGEMAKER_TRITON_PING_MODE", "live")],
    ),
    (
        "small",
        Some("native_add_sub"),
        &[("TRIDENT_MAX_BODY_BYTES", "1024")],
    ),
    (
        "restricted",
        Some("native_add_sub"),
        &[(
            "SAGEMAKER_TRITON_HTTP_RESTRICTED_API",
            "model-repository:x-admin=let-me-in;inference:x-key=k1;health:x-health=h1",
        )],
    ),
    ("mme", None, &[("SAGEMAKER_MULTI_MODEL", "true")]),
];

/// Starts every deployment's container and waits until each answers `/ping` with 200.
pub(super) fn start(image: &str) -> Fixture {
    let models_root = tempfile::tempdir().unwrap();
    // One repository per single-model deployment, as SageMaker unpacks one model artifact.
    let repositories = tempfile::tempdir().unwrap();
    let mut containers = Vec::new();
    let mut servers = HashMap::new();
    for &(name, model, env) in DEPLOYMENTS {
        let container = match model {
            Some(model) => {
                let repository = repositories.path().join(name);
                copy_model(model, &repository, model);
                Container::start(image, Volume::Model(&repository), env)
            }
            None => Container::start(image, Volume::Models(models_root.path()), env),
        };
        containers.push((name, container));
    }
    for (name, container) in &mut containers {
        let headers: &[(&str, &str)] = if *name == "restricted" {
            &[("x-health", "h1")]
        } else {
            &[]
        };
        container.wait_healthy(headers, Duration::from_secs(180));
        servers.insert(*name, container.addr());
    }
    Fixture {
        runtime: common::runtime(),
        engine: None,
        servers,
        models_root,
        served_root: PathBuf::from("/opt/ml/models"),
        _containers: containers.into_iter().map(|(_, c)| c).collect(),
        _mounted: vec![repositories],
    }
}
