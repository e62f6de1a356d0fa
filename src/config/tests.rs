//! The configuration's unit tests: flags and environment resolved, start-up errors.

use std::path::Path;
use std::time::Duration;

use super::args::ServeArgs;
use super::http::check_metrics_path;
use super::*;
use crate::engine::BackendSetting;
use clap::Parser;

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    args: ServeArgs,
}

#[test]
fn metrics_paths_are_checked() {
    for good in ["/metrics", "/prom/metrics", "/a-b_c.d~e", "/models-metrics"] {
        assert_eq!(check_metrics_path(good).unwrap(), good);
    }
    for bad in [
        "",
        "/",
        "metrics",
        "/metrics?x=1",
        "/met rics",
        "/metrics#a",
        "/../ping",
        "/a/./b",
        "/métrique",
    ] {
        let error = check_metrics_path(bad).unwrap_err().0;
        assert!(error.contains("TRIDENT_METRICS_PATH"), "{bad}: {error}");
    }
    assert!(check_metrics_path(&format!("/{}", "a".repeat(300))).is_err());
}

fn args(repository: &Path, extra: &[&str]) -> ServeArgs {
    let mut argv = vec![
        "trident".to_string(),
        "--model-repository".into(),
        repository.display().to_string(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    Wrapper::try_parse_from(argv).unwrap().args
}

fn repo(folders: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for folder in folders {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    }
    dir
}

#[test]
fn the_only_folder_is_the_default_model() {
    let dir = repo(&["only"]);
    let config = args(dir.path(), &[]).resolve().unwrap();
    assert!(
        matches!(config.mode, Mode::SingleModel { ref default_model, .. } if default_model == "only")
    );
    assert_eq!(config.ping_mode, PingMode::Ready);
    assert_eq!(config.inference_type, InferenceType::Infer);
    assert_eq!(config.http.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
}

#[test]
fn start_up_errors_have_the_entry_script_messages() {
    let cases: Vec<(tempfile::TempDir, Vec<&str>, &str)> = vec![
        (repo(&[]), vec![], "No model found in model repository"),
        (
            repo(&["a", "b"]),
            vec![],
            "More than 1 model directory found",
        ),
        (
            repo(&["a"]),
            vec!["--default-model", "zzz"],
            "Directory with provided SAGEMAKER_TRITON_DEFAULT_MODEL_NAME zzz does not exist",
        ),
        (
            repo(&["a"]),
            vec!["--inference-type", "predict"],
            "Invalid SAGEMAKER_TRITON_INFERENCE_TYPE",
        ),
        (
            repo(&["a"]),
            vec!["--http-restricted-api", "bogus:h=v"],
            "restricted",
        ),
        (
            repo(&["a"]),
            vec!["--additional-args", "--grpc-port=1"],
            "not supported",
        ),
    ];
    for (dir, extra, expected) in cases {
        let error = args(dir.path(), &extra).resolve().unwrap_err();
        assert!(error.0.contains(expected), "{extra:?}: {error}");
    }
    let dir = repo(&["a"]);
    std::fs::write(dir.path().join("config.pbtxt"), "").unwrap();
    let error = args(dir.path(), &[]).resolve().unwrap_err();
    assert!(
        error
            .0
            .contains("Model directory needs to contain the top level folder")
    );
}

#[test]
fn multi_model_pings_live_unless_overridden() {
    let dir = repo(&[]);
    let config = args(dir.path(), &["--multi-model", "true"])
        .resolve()
        .unwrap();
    assert!(matches!(config.mode, Mode::MultiModel { .. }));
    assert_eq!(config.ping_mode, PingMode::Live);
    let config = args(
        dir.path(),
        &["--multi-model", "true", "--override-ping-mode", "ready"],
    )
    .resolve()
    .unwrap();
    assert_eq!(config.ping_mode, PingMode::Ready);
}

#[test]
fn batch_transform_sets_the_body_limit() {
    let dir = repo(&["a"]);
    let config = args(
        dir.path(),
        &["--batch", "true", "--max-payload-in-mb", "20"],
    )
    .resolve()
    .unwrap();
    assert_eq!(config.http.max_body_bytes, 20 * 1024 * 1024);
    assert_eq!(config.batch.unwrap().max_payload_in_mb, 20);
}

#[test]
fn additional_backend_config_overrides() {
    let dir = repo(&["a"]);
    let config = args(
        dir.path(),
        &[
            "--additional-args",
            "--backend-config=python,shm-default-byte-size=1 --log-verbose=2",
        ],
    )
    .resolve()
    .unwrap();
    assert!(config.core.backend_config.contains(&BackendSetting::new(
        "python",
        "shm-default-byte-size",
        1
    )));
    assert_eq!(config.core.backend_config.len(), 2);
    assert_eq!(config.core.logging.verbose, 2);
}

#[test]
fn session_settings_out_of_range_stop_the_start() {
    let dir = repo(&["a"]);
    let on = |extra: &[&str]| {
        let mut all = vec!["--stateful-sessions", "true"];
        all.extend_from_slice(extra);
        args(dir.path(), &all).resolve()
    };
    let settings = on(&[]).unwrap().sessions.unwrap();
    assert_eq!(settings.expiration, Duration::from_secs(1200));
    let longest = crate::sessions::table::MAX_EXPIRATION_SECS.to_string();
    assert!(on(&["--sessions-expiration", &longest]).is_ok());
    for (flag, value, named) in [
        (
            "--sessions-expiration",
            "0",
            "SAGEMAKER_SESSIONS_EXPIRATION",
        ),
        (
            "--sessions-expiration",
            "18446744073709551615",
            "SAGEMAKER_SESSIONS_EXPIRATION",
        ),
        (
            "--sessions-expiration",
            "2592001",
            "SAGEMAKER_SESSIONS_EXPIRATION",
        ),
        ("--max-sessions", "0", "TRIDENT_MAX_SESSIONS"),
    ] {
        let error = on(&[flag, value]).unwrap_err().0;
        assert!(error.contains(named), "{flag} {value}: {error}");
    }
    // Off, the settings are not read.
    assert!(
        args(dir.path(), &["--sessions-expiration", "0"])
            .resolve()
            .unwrap()
            .sessions
            .is_none()
    );
}
