//! The SageMaker contract (docs/CONTRACT.md) over real HTTP on 127.0.0.1, against the real
//! Triton core: one core for the whole binary, several trident HTTP servers over it, each
//! configured like one kind of deployment (single model, generate, multi-model, restricted...).
//!
//! With `TRIDENT_CONTRACT_IMAGE` naming trident's image (`scripts/image test` sets it), the same
//! checks run against containers of that image instead, one per deployment, each run as SageMaker
//! runs it ([`containers`]); the few that look into the core itself, or need a setting no
//! environment variable reaches, are reported ignored there.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod boundaries;
mod containers;
mod generate;
mod multi_model;
mod single_model;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libtest_mimic::Failed;
use serde_json::{Value, json};
use trident::config::restrictions::parse_restrictions;
use trident::config::{Config, InferenceType, PingMode};
use trident::engine::triton::TritonEngine;
use trident::engine::{Engine, ModelState};
use trident::http::AppState;

use common::http_client::{HttpResponse, get, post, post_json, raw, request};
use common::{Check, configs, copy_model, models_dir};

use trident::protocol::binary_header::BINARY_MIME as BINARY;

struct Fixture {
    /// The containers serving, when the checks run against an image (stopped first, before the
    /// folders they mount are removed).
    _containers: Vec<common::container::Container>,
    /// Folders the containers mount.
    _mounted: Vec<tempfile::TempDir>,
    runtime: tokio::runtime::Runtime,
    /// The core the servers share; none against containers.
    engine: Option<TritonEngine>,
    servers: HashMap<&'static str, SocketAddr>,
    /// Where the checks put multi-model artifacts.
    models_root: tempfile::TempDir,
    /// `models_root` as the servers see it: itself in this process, `/opt/ml/models` in a
    /// container.
    served_root: PathBuf,
}

impl Fixture {
    fn at(&self, name: &str) -> SocketAddr {
        self.servers[name]
    }

    /// The core, for the checks that look into it (never run against a container).
    fn engine(&self) -> &TritonEngine {
        self.engine
            .as_ref()
            .expect("an in-process check (containers::IN_PROCESS_ONLY)")
    }

    /// `path`, under `models_root`, as the servers see it.
    fn served(&self, path: &Path) -> String {
        let inside = path.strip_prefix(self.models_root.path()).unwrap_or(path);
        self.served_root.join(inside).display().to_string()
    }
}

fn main() -> std::process::ExitCode {
    let checks = [
        single_model::CHECKS,
        generate::CHECKS,
        boundaries::CHECKS,
        // Last: its final check leaves a failed load in the shared core, so no server is ready.
        multi_model::CHECKS,
    ]
    .concat();
    match std::env::var("TRIDENT_CONTRACT_IMAGE") {
        Ok(image) if !image.is_empty() => common::run_checks_ignoring(
            containers::start(&image),
            &checks,
            containers::IN_PROCESS_ONLY,
        ),
        _ => common::run_checks(start(), &checks),
    }
}

fn start() -> Fixture {
    let engine = common::start_engine(
        vec![models_dir()],
        // Native models (trident's own backend, in the core's process) wherever the python
        // backend is not the point; python where its behaviour is the subject (a traceback in
        // the error, a text model, slow instances).
        &[
            "native_add_sub",
            "native_identity_fp32",
            "native_repeat",
            "native_text_stream",
            "text_echo",
            "slow_echo",
            "exec_fail",
        ],
    );
    let runtime = common::runtime();
    let models_root = tempfile::tempdir().unwrap();

    let mut deployments: Vec<(&'static str, Config)> = vec![
        ("sme", configs::single_model("native_add_sub")),
        ("identity", configs::single_model("native_identity_fp32")),
        ("failing", configs::single_model("exec_fail")),
        ("decoupled", configs::single_model("native_repeat")),
        (
            "generate",
            Config {
                inference_type: InferenceType::Generate,
                ..configs::single_model("text_echo")
            },
        ),
        (
            "stream",
            Config {
                inference_type: InferenceType::GenerateStream,
                ..configs::single_model("native_text_stream")
            },
        ),
        (
            "live",
            Config {
                ping_mode: PingMode::Live,
                ..configs::single_model("native_add_sub")
            },
        ),
        (
            "small",
            configs::with(configs::single_model("native_add_sub"), |c| {
                c.http.max_body_bytes = 1024;
            }),
        ),
        (
            "restricted",
            configs::with(configs::single_model("native_add_sub"), |c| {
                c.http.restrictions = parse_restrictions([
                    "model-repository:x-admin=let-me-in",
                    "inference:x-key=k1",
                    "health:x-health=h1",
                ])
                .unwrap();
            }),
        ),
    ];
    let mme = |page: usize| {
        configs::with(configs::multi_model(models_root.path()), |c| {
            c.http.list_page_size = page;
        })
    };
    deployments.push(("mme", mme(1000)));
    deployments.push(("mme_paged", mme(2)));

    let mut servers = HashMap::new();
    for (name, config) in deployments {
        let state = Arc::new(AppState::new(engine.clone(), config));
        servers.insert(name, common::serve(&runtime, state));
    }
    Fixture {
        runtime,
        engine: Some(engine),
        servers,
        served_root: models_root.path().to_path_buf(),
        models_root,
        _containers: Vec::new(),
        _mounted: Vec::new(),
    }
}

fn add_sub_json(a: &[i32], b: &[i32]) -> Value {
    json!({
        "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": a},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": b}
        ]
    })
}

fn ensure_sums(response: &HttpResponse, a: &[i32], b: &[i32]) -> Result<(), Failed> {
    ensure!(
        response.status == 200,
        "status {}: {}",
        response.status,
        response.text()
    );
    let json = response.json();
    let outputs = json["outputs"].as_array().ok_or("no outputs")?;
    let find = |name: &str| outputs.iter().find(|o| o["name"] == name).cloned();
    let sum: Vec<i64> = find("OUTPUT0").ok_or("no OUTPUT0")?["data"]
        .as_array()
        .ok_or("no data")?
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    let expected: Vec<i64> = a.iter().zip(b).map(|(x, y)| i64::from(x + y)).collect();
    ensure!(sum == expected, "sums {sum:?} != {expected:?}");
    Ok(())
}
