//! The endpoint survives crashes of the process that runs the Triton core: `trident serve` as a
//! container runs it (a supervisor and its serving process), with
//! - the serving process killed by SIGSEGV, SIGABRT and SIGKILL under traffic: the endpoint
//!   answers again on the same port, with nothing lost but the requests in flight (counted),
//!   no connection refused, and nothing left of the dead process (its stubs, their regions);
//! - a multi-model endpoint with several models, one under a target name and one with its own
//!   plugins: every model loaded before the crash is loaded after it, as it was;
//! - a crash loop: trident exits 1 with a clear line, leaving no process behind;
//! - python stubs killed under traffic on a multi-model endpoint: the model serves again,
//!   brought back by the engine or, when the python backend aborts the process (it does when
//!   a stub dies holding a lock of their shared memory), by a restart;
//! - stateful sessions end with a replaced serving process, and say so.

mod common;

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::http_client::{NoResponse, get, request, try_request};
use common::process::{
    Running, current_serving_process, process_environment, process_name, serve_ready_with,
    serving_process, stub_children, supervised_stubs,
};
use serde_json::json;

fn trident() -> std::process::Command {
    let mut command = common::command(env!("CARGO_BIN_EXE_trident"));
    // The supervisor chooses the serving process's allocator setting unless this is set.
    command.env_remove("MIMALLOC_ARENA_EAGER_COMMIT");
    for (key, _) in std::env::vars() {
        if key.starts_with("SAGEMAKER_") || key.starts_with("TRIDENT_") {
            command.env_remove(key);
        }
    }
    command.env("RUST_LOG", "info");
    command
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models")
}

/// The README model's request and its answer.
fn affine(addr: SocketAddr) -> Result<u16, NoResponse> {
    let body = br#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]}"#;
    let response = try_request(
        addr,
        "POST",
        "/invocations",
        &[("Content-Type", "application/json")],
        body,
    )?;
    if response.status == 200 {
        assert_eq!(
            response.json()["outputs"][0]["data"],
            json!([3.0, 5.0, 7.0]),
            "a wrong answer"
        );
    }
    Ok(response.status)
}

/// Ends process `pid` with `signal` as a crash would. A SIGSEGV sent from outside is sent twice:
/// Rust's runtime catches the first (its stack-overflow check), finds no fault to report and
/// puts the default action back, which is what a real fault, executed again, then meets.
fn crash(pid: u32, signal: &str) {
    assert!(common::send_signal(pid, signal), "kill -{signal} {pid}");
    if signal == "SEGV" {
        std::thread::sleep(Duration::from_millis(50));
        common::send_signal(pid, signal);
    }
}

/// What the traffic got while the serving process was killed and replaced.
#[derive(Debug)]
struct Crash {
    /// From the signal to the first request answered 200 by a new serving process.
    took: Duration,
    /// The statuses of the requests answered meanwhile.
    statuses: Vec<u16>,
    /// The requests that got no response.
    lost: Vec<NoResponse>,
}

/// Sends `signal` to the serving process of `running` while `clients` threads send `request`
/// in a loop, and waits (up to 90 s) for a new serving process to answer one with 200.
fn crash_under_traffic(
    running: &Running,
    signal: &str,
    clients: usize,
    request: &(dyn Fn() -> Result<u16, NoResponse> + Sync),
) -> Crash {
    let supervisor = running.0.id();
    let serving = serving_process(supervisor);
    assert_eq!(
        process_name(serving),
        "trident-serve",
        "the serving process's name"
    );
    assert!(
        process_environment(serving).contains(&"MIMALLOC_ARENA_EAGER_COMMIT=0".to_owned()),
        "the supervisor sets the serving process's allocator to give memory back"
    );
    let stubs = stub_children(serving);
    let regions: Vec<PathBuf> = stubs
        .iter()
        .filter_map(|&pid| common::stub_shm_region(pid))
        .collect();
    let stop = AtomicBool::new(false);
    let outcomes = Mutex::new(Vec::new());
    let took = std::thread::scope(|scope| {
        for _ in 0..clients {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let outcome = request();
                    outcomes.lock().unwrap().push(outcome);
                }
            });
        }
        std::thread::sleep(Duration::from_millis(500));
        let killed = Instant::now();
        crash(serving, signal);
        let took = loop {
            let replaced = current_serving_process(supervisor).is_some_and(|pid| pid != serving);
            if replaced && request() == Ok(200) {
                break killed.elapsed();
            }
            if killed.elapsed() > Duration::from_secs(90) {
                stop.store(true, Ordering::Relaxed);
                panic!("SIG{signal}: not serving again within 90 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        // A moment of traffic on the new process too.
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        took
    });
    let replacement = serving_process(supervisor);
    assert_eq!(
        process_name(replacement),
        "trident-serve",
        "the new serving process's name"
    );
    let (answered, lost): (Vec<_>, Vec<_>) = outcomes
        .into_inner()
        .unwrap()
        .into_iter()
        .partition(Result::is_ok);
    let crash = Crash {
        took,
        statuses: answered.into_iter().flatten().collect(),
        lost: lost.into_iter().filter_map(Result::err).collect(),
    };
    // Nothing of the dead process is left: its stubs ended and reaped, their regions removed.
    for pid in &stubs {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "SIG{signal}: stub {pid} of the dead serving process is left"
        );
    }
    let left: Vec<_> = regions.iter().filter(|r| r.exists()).collect();
    assert!(left.is_empty(), "SIG{signal}: regions left: {left:?}");
    crash
}

/// Only the requests in flight when the process died are lost (one per client at most), none
/// is refused, and every answer is `ok`.
fn assert_only_in_flight_lost(signal: &str, crash: &Crash, clients: usize, ok: u16) {
    let refused: Vec<_> = crash
        .lost
        .iter()
        .filter(|lost| matches!(lost, NoResponse::Refused(_)))
        .collect();
    assert!(refused.is_empty(), "SIG{signal}: refused {refused:?}");
    assert!(
        crash.lost.len() <= clients,
        "SIG{signal}: {} requests lost with {clients} clients: {:?}",
        crash.lost.len(),
        crash.lost
    );
    assert!(
        crash.statuses.iter().all(|&s| s == ok),
        "SIG{signal}: statuses {:?}",
        crash.statuses
    );
}

/// `trident_restarts_total` as `/metrics` says it.
fn restarts(addr: SocketAddr) -> u64 {
    let metrics = get(addr, "/metrics").text();
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("trident_restarts_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no trident_restarts_total in {metrics}"))
}

#[test]
fn a_serving_process_killed_under_traffic_is_replaced_and_serves_again() {
    let (running, addr) = serve_ready_with(trident(), examples(), &[]);
    assert_eq!(restarts(addr), 0);
    for (n, signal) in ["SEGV", "ABRT", "KILL"].into_iter().enumerate() {
        let crash = crash_under_traffic(&running, signal, 4, &|| affine(addr));
        assert_only_in_flight_lost(signal, &crash, 4, 200);
        assert_eq!(get(addr, "/ping").status, 200);
        assert_eq!(restarts(addr), n as u64 + 1);
        eprintln!(
            "SIG{signal}: serving again after {:?}; {} answered, {} lost in flight",
            crash.took,
            crash.statuses.len(),
            crash.lost.len()
        );
    }
    let log = std::fs::read_to_string(running.log()).unwrap();
    for signal in ["11 (SIGSEGV)", "6 (SIGABRT)", "9 (SIGKILL)"] {
        assert!(
            log.contains(&format!("killed by signal {signal}")),
            "the log does not name signal {signal}"
        );
    }
}

/// A multi-model endpoint's artifact: a copy of `model` under `root/name/model`; its url.
fn artifact(root: &Path, name: &str, model: &str) -> PathBuf {
    common::copy_model(model, &root.join(name), "model");
    root.join(name).join("model")
}

fn load(addr: SocketAddr, name: &str, url: &Path, target: Option<&str>) {
    let body = json!({"model_name": name, "url": url}).to_string();
    let headers: Vec<(&str, &str)> = target
        .map(|t| ("X-Amzn-SageMaker-Target-Model", t))
        .into_iter()
        .collect();
    let load = request(addr, "POST", "/models", &headers, body.as_bytes());
    assert_eq!(load.status, 200, "load {name}: {}", load.text());
}

fn listed(addr: SocketAddr) -> Vec<(String, String)> {
    let list = get(addr, "/models").json();
    list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["modelName"].as_str().unwrap().to_owned(),
                m["modelUrl"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn invoke_identity(addr: SocketAddr, name: &str) -> Result<u16, NoResponse> {
    let body = br#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2],"data":[1.5,-2]}]}"#;
    let response = try_request(
        addr,
        "POST",
        &format!("/models/{name}/invoke"),
        &[("Content-Type", "application/json")],
        body,
    )?;
    if response.status == 200 {
        assert_eq!(response.json()["outputs"][0]["data"], json!([1.5, -2.0]));
    }
    Ok(response.status)
}

/// The CSV adapters the `gamma` artifact brings (built guests copied in).
fn with_csv_plugins(folder: &Path) {
    let mut manifest = String::new();
    for (name, guest, extra) in [
        ("csv", "csv_request", "content_types = [\"text/csv\"]"),
        ("out", "csv_json_response", "accept = [\"text/csv\"]"),
    ] {
        std::fs::copy(
            common::plugins::guest(guest),
            folder.join(format!("{guest}.wasm")),
        )
        .unwrap();
        manifest.push_str(&format!(
            "[plugins.{name}]\npath = \"{guest}.wasm\"\nsha256 = \"{}\"\n{extra}\n",
            common::plugins::digest(guest)
        ));
    }
    manifest.push_str("[models.\"*\"]\nrequest = \"csv\"\nresponse = \"out\"\n");
    std::fs::write(folder.join("plugins.toml"), manifest).unwrap();
}

fn invoke_csv(addr: SocketAddr, name: &str) -> (u16, String) {
    let response = request(
        addr,
        "POST",
        &format!("/models/{name}/invoke"),
        &[("Content-Type", "text/csv"), ("Accept", "text/csv")],
        b"1.5,2\n3,4\n",
    );
    (response.status, response.text())
}

/// A multi-model endpoint `trident serve` with its own folders; the models root.
fn serve_multi_model(extra: &[&OsStr]) -> (Running, SocketAddr, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let repository = tempfile::tempdir().unwrap();
    let mut command = trident();
    command.env("SAGEMAKER_MULTI_MODEL", "true");
    let mut args: Vec<&OsStr> = vec![
        OsStr::new("--models-root"),
        root.path().as_os_str(),
        OsStr::new("--multi-model-repository"),
        repository.path().as_os_str(),
    ];
    args.extend_from_slice(extra);
    let (running, addr) = serve_ready_with(command, repository.path(), &args);
    // The repository folder is trident's to fill; it outlives this function with the root.
    std::mem::forget(repository);
    (running, addr, root)
}

#[test]
fn a_multi_model_endpoint_has_every_model_after_a_crash() {
    let (running, addr, root) = serve_multi_model(&[]);
    let alpha = artifact(root.path(), "alpha", "identity_fp32");
    let beta = artifact(root.path(), "beta", "identity_fp32");
    let gamma = artifact(root.path(), "gamma", "identity_fp32");
    with_csv_plugins(&gamma);
    load(addr, "alpha", &alpha, None);
    load(addr, "beta", &beta, Some("beta-served"));
    load(addr, "gamma", &gamma, None);
    let before = listed(addr);
    assert_eq!(before.len(), 3, "{before:?}");
    let csv_before = invoke_csv(addr, "gamma");
    assert_eq!(csv_before.0, 200, "{}", csv_before.1);

    let crash = crash_under_traffic(&running, "KILL", 4, &|| invoke_identity(addr, "alpha"));
    assert_only_in_flight_lost("KILL", &crash, 4, 200);
    assert_eq!(listed(addr), before, "the models after the restart");
    assert_eq!(invoke_identity(addr, "beta"), Ok(200));
    assert_eq!(invoke_csv(addr, "gamma"), csv_before, "gamma's own plugins");
    assert_eq!(get(addr, "/ping").status, 200);
    eprintln!(
        "three models: serving again after {:?}; {} lost in flight",
        crash.took,
        crash.lost.len()
    );

    // An unload is remembered too: after the next crash beta stays unloaded.
    let unload = request(addr, "DELETE", "/models/beta", &[], b"");
    assert_eq!(unload.status, 200, "{}", unload.text());
    let crash = crash_under_traffic(&running, "SEGV", 2, &|| invoke_identity(addr, "gamma"));
    assert_only_in_flight_lost("SEGV", &crash, 2, 200);
    let names: Vec<String> = listed(addr).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["alpha", "gamma"]);
    assert_eq!(get(addr, "/models/beta").status, 404);
    // The target name is free again: beta loads under it.
    load(addr, "beta", &beta, Some("beta-served"));
    assert_eq!(invoke_identity(addr, "beta"), Ok(200));
    assert_eq!(restarts(addr), 2);
}

#[test]
fn a_crash_loop_ends_trident_with_exit_code_1_and_leaves_nothing() {
    let args = [OsStr::new("--max-restarts"), OsStr::new("1")];
    let (mut running, addr) = serve_ready_with(trident(), examples(), &args);
    let first = serving_process(running.0.id());
    crash(first, "SEGV");
    let deadline = Instant::now() + Duration::from_secs(90);
    while affine(addr) != Ok(200) {
        assert!(
            Instant::now() < deadline,
            "not serving again after the first crash"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = serving_process(running.0.id());
    assert_ne!(first, second);
    let stubs = stub_children(second);
    crash(second, "ABRT");
    let status = loop {
        if let Some(status) = running.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "trident did not give up");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(1));
    let log = std::fs::read_to_string(running.log()).unwrap();
    assert!(
        log.contains(
            "the serving process ended abnormally 2 times within 600 s: not restarting it again"
        ),
        "{log}"
    );
    for pid in stubs {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "stub {pid} left"
        );
    }
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still listening"
    );
}

/// Python stubs killed under four clients' traffic on a multi-model endpoint (SIGKILL, then
/// SIGSEGV): the model serves again and `/ping` is 200. The engine reloads it in the serving
/// process; when the python backend aborts that process instead (a stub killed holding the lock
/// of its shared memory: the backend's robust mutex reports the dead owner and the exception it
/// throws is never caught), the supervisor replaces it, with the model. Either way the requests
/// in flight are answered or lost, never refused; unloaded afterwards, the model stays unloaded.
#[test]
fn killed_stubs_under_traffic_are_survived() {
    let (running, addr, root) = serve_multi_model(&[]);
    let url = artifact(root.path(), "phoenix", "slow_echo");
    load(addr, "phoenix", &url, None);
    let body = json!({"inputs": [{"name": "MS", "datatype": "INT32", "shape": [1], "data": [1]}]})
        .to_string();
    let invoke = || {
        try_request(
            addr,
            "POST",
            "/models/phoenix/invoke",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .map_or(0, |r| r.status)
    };
    let supervisor = running.0.id();
    for signal in ["KILL", "SEGV"] {
        let stubs = supervised_stubs(supervisor);
        assert!(!stubs.is_empty(), "no stub of phoenix");
        let serving = serving_process(supervisor);
        let recovered = common::kill_under_traffic(
            &stubs,
            &|| supervised_stubs(supervisor),
            signal,
            4,
            &invoke,
            &|| get(addr, "/ping").status,
            Duration::from_secs(90),
        )
        .unwrap_or_else(|e| panic!("SIG{signal}: {e}"));
        let restarted = current_serving_process(supervisor) != Some(serving);
        assert!(
            recovered
                .statuses
                .iter()
                .all(|s| [200, 400, 503, 0].contains(s)),
            "SIG{signal}: statuses {:?}",
            recovered.statuses
        );
        assert!(
            restarted || !recovered.statuses.contains(&0),
            "SIG{signal}: requests lost without a restart"
        );
        eprintln!(
            "SIG{signal}: serving again after {:?} ({}); {} requests meanwhile",
            recovered.took,
            if restarted {
                "the serving process was replaced"
            } else {
                "reloaded in the serving process"
            },
            recovered.statuses.len()
        );
    }
    let unload = request(addr, "DELETE", "/models/phoenix", &[], b"");
    assert_eq!(unload.status, 200, "{}", unload.text());
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(get(addr, "/models/phoenix").status, 404);
    assert_eq!(get(addr, "/ping").status, 200);
}

/// A model with four instances, one of whose processes is killed under traffic, on a supervised
/// multi-model endpoint: every instance gets a new process and `/ping` stays healthy, also when
/// the three old live ones (retired: the core never retires a generation with a dead process)
/// end later; every region of the ended processes goes. When the python backend aborts the
/// serving process instead, the new one serves all four instances afresh.
#[test]
fn one_dead_process_of_several_is_replaced() {
    let (running, addr, root) = serve_multi_model(&[]);
    let url = artifact(root.path(), "hydra", "slow_echo");
    load(addr, "hydra", &url, None);
    let supervisor = running.0.id();
    let serving = serving_process(supervisor);
    // The stubs name the private copy the core loads from, not the url: found by instance.
    let stubs = common::model_stub_pids("hydra");
    assert_eq!(stubs.len(), 4, "slow_echo has four instances: {stubs:?}");
    let regions: Vec<PathBuf> = stubs
        .iter()
        .filter_map(|&p| common::stub_shm_region(p))
        .collect();
    assert_eq!(regions.len(), 4, "regions of {stubs:?}: {regions:?}");
    let body = json!({"inputs": [{"name": "MS", "datatype": "INT32", "shape": [1], "data": [1]}]})
        .to_string();
    let invoke = || {
        let headers = [("Content-Type", "application/json")];
        try_request(
            addr,
            "POST",
            "/models/hydra/invoke",
            &headers,
            body.as_bytes(),
        )
        .map_or(0, |r| r.status)
    };
    let recovered = common::kill_under_traffic(
        &stubs[..1],
        &|| common::model_stub_pids("hydra"),
        "KILL",
        4,
        &invoke,
        &|| get(addr, "/ping").status,
        Duration::from_secs(90),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let live = common::model_stub_pids("hydra");
    let fresh: Vec<u32> = live
        .iter()
        .copied()
        .filter(|pid| !stubs.contains(pid))
        .collect();
    assert!(
        !live.contains(&stubs[0]) && fresh.len() == 4,
        "after recovery: {live:?}, before: {stubs:?} (the first killed)"
    );
    if current_serving_process(supervisor) == Some(serving) {
        // The retired processes ending later is not a death of the model: nothing is
        // reloaded and /ping stays healthy (the watcher scans each second).
        for &pid in &stubs[1..] {
            assert!(common::send_signal(pid, "KILL"), "kill -KILL {pid}");
        }
        for _ in 0..16 {
            let ping = get(addr, "/ping");
            assert_eq!(ping.status, 200, "/ping after recovery: {}", ping.text());
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    let mut now = common::model_stub_pids("hydra");
    now.sort_unstable();
    let mut serving_now = fresh.clone();
    serving_now.sort_unstable();
    assert_eq!(now, serving_now, "processes after the retired ones ended");
    assert_eq!(invoke(), 200, "hydra after");
    let deadline = Instant::now() + Duration::from_secs(10);
    while regions.iter().any(|r| r.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<_> = regions.iter().filter(|r| r.exists()).collect();
    assert!(
        left.is_empty(),
        "regions of the ended processes left: {left:?}"
    );
    eprintln!(
        "one of four: recovered in {:?}, {} requests meanwhile",
        recovered.took,
        recovered.statuses.len()
    );
}

/// Whether trident's `log` shows a serving process that asked to be replaced because
/// `reason`, or one the python backend aborted first: a stub killed at the wrong moment can make
/// it abort (the supervisor's case too; see the module's doc), about once in a hundred kills here.
fn asked_to_be_replaced(log: &str, reason: &str) -> bool {
    let asked = log.contains("the core cannot bring a model back")
        && log.contains(reason)
        && log.contains("how=\"exit code 75\"");
    asked || log.contains("killed by signal 6 (SIGABRT)")
}

/// A model whose process dies and whose files no longer load, beside one that serves: the
/// engine's reloads fail, so the serving process asks to be replaced; the new one loads every
/// model that still loads, and the endpoint serves them with `/ping` healthy. The lost model is
/// no longer listed (SageMaker loads it again when it is next invoked, and is told why it fails).
#[test]
fn a_model_that_cannot_come_back_is_dropped_by_a_restart() {
    let (running, addr, root) = serve_multi_model(&[]);
    let alpha = artifact(root.path(), "alpha", "identity_fp32");
    let doomed = artifact(root.path(), "doomed", "slow_echo");
    load(addr, "alpha", &alpha, None);
    load(addr, "doomed", &doomed, None);
    // Serving a while, as a model does before it dies (the watcher scans each second).
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::write(
        doomed.join("1/model.py"),
        "class TritonPythonModel:\n    def initialize(self, args):\n        raise RuntimeError('doomed: cannot start again')\n",
    )
    .unwrap();
    let serving = serving_process(running.0.id());
    let stubs = common::model_stub_pids("doomed");
    assert!(!stubs.is_empty(), "no stub of doomed");
    for pid in &stubs {
        assert!(common::send_signal(*pid, "KILL"), "kill -KILL {pid}");
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let replaced = current_serving_process(running.0.id()).is_some_and(|p| p != serving);
        if replaced && invoke_identity(addr, "alpha") == Ok(200) {
            break;
        }
        assert!(Instant::now() < deadline, "not replaced within 120 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let names: Vec<String> = listed(addr).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["alpha"]);
    assert_eq!(get(addr, "/ping").status, 200);
    assert_eq!(restarts(addr), 1);
    let log = std::fs::read_to_string(running.log()).unwrap();
    assert!(
        asked_to_be_replaced(&log, "could not be reloaded"),
        "the log does not tell why the process was replaced"
    );
    let again = request(
        addr,
        "POST",
        "/models",
        &[],
        json!({"model_name": "doomed", "url": doomed})
            .to_string()
            .as_bytes(),
    );
    assert_eq!(again.status, 400, "{}", again.text());
    assert!(
        again.error().contains("cannot start again"),
        "{}",
        again.text()
    );
}

/// The python backend's load that never returns: a reload's new stub killed before its first
/// message leaves the core's load call waiting for good (python backend 24.10 waits for it with
/// no timeout). The recovery is bounded by the load timeout (10 s here): then the serving
/// process asks to be replaced, and the new one serves the model again.
#[test]
fn a_reload_that_never_returns_is_bounded_by_a_restart() {
    let args = [OsStr::new("--model-load-timeout-secs"), OsStr::new("10")];
    let (running, addr, root) = serve_multi_model(&args);
    let url = artifact(root.path(), "phoenix", "slow_echo");
    load(addr, "phoenix", &url, None);
    std::thread::sleep(Duration::from_millis(1500));
    let supervisor = running.0.id();
    let serving = serving_process(supervisor);
    // Every stub of the first serving process, the reload's new ones as soon as they appear.
    let started = Instant::now();
    let mut killed = Vec::new();
    while current_serving_process(supervisor) == Some(serving) {
        for pid in stub_children(serving) {
            if !killed.contains(&pid) {
                common::send_signal(pid, "KILL");
                killed.push(pid);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the serving process was not replaced"
        );
        std::thread::sleep(Duration::from_millis(3));
    }
    let body = json!({"inputs": [{"name": "MS", "datatype": "INT32", "shape": [1], "data": [1]}]})
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let headers = [("Content-Type", "application/json")];
        let invoke = try_request(
            addr,
            "POST",
            "/models/phoenix/invoke",
            &headers,
            body.as_bytes(),
        );
        if invoke.is_ok_and(|r| r.status == 200) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "phoenix not back after the restart"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get(addr, "/ping").status, 200);
    assert_eq!(restarts(addr), 1);
    let log = std::fs::read_to_string(running.log()).unwrap();
    assert!(
        asked_to_be_replaced(&log, "its reload has not finished within 10 s")
            || asked_to_be_replaced(&log, "could not be reloaded"),
        "the log does not say why the process was replaced"
    );
    eprintln!(
        "replaced after {:?}; {} stubs killed",
        started.elapsed(),
        killed.len()
    );
}

/// Sessions live in the serving process, so a restart ends them: a client's old session id is
/// refused with a clear 400 that says so (never a 500, never another session's state), and a
/// new session works at once.
#[test]
fn sessions_end_with_a_replaced_serving_process_and_say_so() {
    let mut command = trident();
    command.env("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "true");
    let (running, addr) = serve_ready_with(command, examples(), &[]);
    let (session, open) = (
        |id: &str, body: &[u8]| in_session(addr, id, body),
        || open_session(addr),
    );
    let inference =
        br#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,3],"data":[1,2,3]}]}"#;
    let old = open();
    assert_eq!(session(&old, inference).status, 200);
    let supervisor = running.0.id();
    let serving = serving_process(supervisor);
    crash(serving, "KILL");
    let deadline = Instant::now() + Duration::from_secs(90);
    while current_serving_process(supervisor).is_none_or(|pid| pid == serving)
        || affine(addr) != Ok(200)
    {
        assert!(Instant::now() < deadline, "not serving again within 90 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let refused = session(&old, inference);
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(refused.error().contains("restarted"), "{}", refused.text());
    let new = open();
    assert_ne!(new, old);
    assert_eq!(session(&new, inference).status, 200);
}

/// Waits (up to `within`) for trident to exit; its exit code.
fn exit_code_within(running: &mut Running, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = running.0.try_wait().unwrap() {
            return status.code();
        }
        assert!(
            Instant::now() < deadline,
            "trident did not exit within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The names in `/dev/shm` that start with `prefix`.
fn regions_named(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.starts_with(prefix))
        .collect()
}

/// How many times the serving process is killed just after its python stub starts.
const CRASH_LOOPS: usize = 50;

/// A serving process that dies moments after it started its python stub (its region just made:
/// a crash during start-up, a crash loop), fifty times in a row: no region of any dead serving
/// process is left in `/dev/shm` (Docker's default is 64 MiB; each is 16 MiB), another server's
/// region is untouched, and after a SIGTERM none is left at all.
#[test]
fn crash_loops_at_start_up_leave_no_shared_memory() {
    let foreign = Path::new("/dev/shm").join(format!(
        "triton_python_backend_shm_region_foreign-{}",
        std::process::id()
    ));
    std::fs::write(&foreign, b"another server's").unwrap();
    // Each crash counts alone in a window of 1 s: restarts at once, no crash-loop exit.
    let args = [
        OsStr::new("--restart-window-secs"),
        OsStr::new("1"),
        OsStr::new("--max-restarts"),
        OsStr::new("5"),
    ];
    let (mut running, addr) = serve_ready_with(trident(), examples(), &args);
    let supervisor = running.0.id();
    let ours = format!("triton_python_backend_shm_region_s{supervisor}-");
    let started = Instant::now();
    let mut previous = None;
    for round in 0..CRASH_LOOPS {
        let deadline = Instant::now() + Duration::from_secs(60);
        let serving = loop {
            if let Some(pid) = current_serving_process(supervisor).filter(|&p| Some(p) != previous)
                && !stub_children(pid).is_empty()
            {
                break pid;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: no new serving process with a stub"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        let region = stub_children(serving)
            .into_iter()
            .find_map(common::stub_shm_region);
        if let Some(region) = &region {
            let name = region.file_name().unwrap().to_string_lossy();
            assert!(
                name.starts_with(&ours),
                "round {round}: the region {name} is not the endpoint's"
            );
        }
        crash(serving, ["KILL", "SEGV", "ABRT"][round % 3]);
        previous = Some(serving);
    }
    let deadline = Instant::now() + Duration::from_secs(90);
    while affine(addr) != Ok(200) {
        assert!(
            Instant::now() < deadline,
            "not serving after the crash loops"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "{CRASH_LOOPS} crashes at start-up in {:?}",
        started.elapsed()
    );
    // What is left of the endpoint's regions belongs to the serving process's live stubs.
    let live: Vec<String> = supervised_stubs(supervisor)
        .into_iter()
        .filter_map(common::stub_shm_region)
        .map(|r| r.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let left: Vec<String> = regions_named(&ours)
        .into_iter()
        .filter(|name| !live.contains(name))
        .collect();
    assert!(
        left.is_empty(),
        "regions of dead serving processes left: {left:?}"
    );
    assert!(common::send_signal(supervisor, "TERM"));
    assert_eq!(
        exit_code_within(&mut running, Duration::from_secs(30)),
        Some(0)
    );
    assert_eq!(
        regions_named(&ours),
        Vec::<String>::new(),
        "regions left after the stop"
    );
    assert!(foreign.exists(), "another server's region was removed");
    std::fs::remove_file(&foreign).unwrap();
}

/// A SIGHUP (plugin reload) while the serving process still loads its model is held until it
/// serves (then reloads, here failing for want of a manifest: logged), and is no crash; a SIGTERM
/// while it loads stops trident at once with exit code 0, leaving nothing behind.
#[test]
fn signals_during_start_up_have_their_meaning() {
    let repository = tempfile::tempdir().unwrap();
    common::copy_model("slow_init", repository.path(), "slow_init");
    let (mut running, addr) = common::process::start_listening(trident(), repository.path(), &[]);
    let supervisor = running.0.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while supervised_stubs(supervisor).is_empty() {
        assert!(Instant::now() < deadline, "the model's stub never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let serving = serving_process(supervisor);
    assert!(common::send_signal(supervisor, "HUP"));
    common::process::wait_ready(addr, &mut running.0);
    assert_eq!(
        current_serving_process(supervisor),
        Some(serving),
        "the SIGHUP ended it"
    );
    assert_eq!(restarts(addr), 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = loop {
        let log = std::fs::read_to_string(running.log()).unwrap();
        if log.contains("plugin reload failed") {
            break log;
        }
        assert!(
            Instant::now() < deadline,
            "the held SIGHUP never reached the serving process"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let serving_at = log
        .find("serving\n")
        .or_else(|| log.find(" serving"))
        .unwrap();
    assert!(
        log.find("plugin reload failed").unwrap() > serving_at,
        "reloaded before serving"
    );
    drop(running);

    // SIGTERM while loading.
    let (mut running, _) = common::process::start_listening(trident(), repository.path(), &[]);
    let supervisor = running.0.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while supervised_stubs(supervisor).is_empty() {
        assert!(Instant::now() < deadline, "the model's stub never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stubs = supervised_stubs(supervisor);
    let stopped = Instant::now();
    assert!(common::send_signal(supervisor, "TERM"));
    assert_eq!(
        exit_code_within(&mut running, Duration::from_secs(10)),
        Some(0)
    );
    eprintln!(
        "SIGTERM while loading: exited 0 after {:?}",
        stopped.elapsed()
    );
    for pid in stubs {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "stub {pid} left"
        );
    }
}

/// After the binary trident was started from is replaced on disk (an upgrade in place, a
/// rebuild), a crash still restarts the serving process: it runs the binary that was started.
#[test]
fn a_restart_runs_the_started_binary_after_the_file_is_replaced() {
    let folder = tempfile::tempdir().unwrap();
    let binary = folder.path().join("trident");
    std::fs::copy(env!("CARGO_BIN_EXE_trident"), &binary).unwrap();
    let mut command = common::command(&binary);
    for (key, _) in std::env::vars() {
        if key.starts_with("SAGEMAKER_") || key.starts_with("TRIDENT_") {
            command.env_remove(key);
        }
    }
    command.env("RUST_LOG", "info");
    let (running, addr) = serve_ready_with(command, examples(), &[]);
    // Replaced: the old file removed, something else at its path.
    std::fs::remove_file(&binary).unwrap();
    std::fs::write(&binary, "#!/bin/sh\nexit 3\n").unwrap();
    let supervisor = running.0.id();
    let serving = serving_process(supervisor);
    crash(serving, "KILL");
    let deadline = Instant::now() + Duration::from_secs(90);
    while current_serving_process(supervisor).is_none_or(|pid| pid == serving)
        || affine(addr) != Ok(200)
    {
        let log = std::fs::read_to_string(running.log()).unwrap_or_default();
        assert!(
            Instant::now() < deadline,
            "not serving again after the binary was replaced: {log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(restarts(addr), 1);
}

/// A stateful python model (Triton's defaults) keeps a session across pauses; its stub killed
/// under the open session: the
/// model is brought back without the session's sequence, so the session's next request is a 400
/// saying the session ended (or, when the backend took the serving process down with the stub,
/// that it is not open after the restart), never the core's words; a new session works; and a
/// SIGTERM with a started session still exits 0 at once.
#[test]
fn a_session_whose_model_is_brought_back_ends_clearly() {
    let repository = tempfile::tempdir().unwrap();
    common::copy_model("stateful_stream", repository.path(), "stateful_stream");
    let mut command = trident();
    command
        .env("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "true")
        .env("SAGEMAKER_TRITON_INFERENCE_TYPE", "generate_stream");
    let (mut running, addr) = serve_ready_with(command, repository.path(), &[]);
    let (session, open) = (
        |id: &str, body: &[u8]| in_session(addr, id, body),
        || open_session(addr),
    );
    let stream = br#"{"TAG": 7, "N": 2}"#;
    let old = open();
    let first = session(&old, stream);
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(
        first.text().matches("data: ").count(),
        2,
        "{}",
        first.text()
    );
    // The model was loaded again at start with its idle limit raised: its old process's end is
    // no death, so nothing brings the model back meanwhile, and the session keeps its sequence
    // past Triton's default 1 s.
    std::thread::sleep(Duration::from_secs(4));
    let again = session(&old, stream);
    assert_eq!(again.status, 200, "{}", again.text());
    let log = std::fs::read_to_string(running.log()).unwrap();
    assert!(!log.contains("a process of the model died"), "{log}");
    let supervisor = running.0.id();
    let stubs = supervised_stubs(supervisor);
    assert!(!stubs.is_empty());
    for &stub in &stubs {
        assert!(common::send_signal(stub, "KILL"));
    }
    // Serving again with new processes.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let live = supervised_stubs(supervisor);
        if !live.is_empty()
            && live.iter().all(|pid| !stubs.contains(pid))
            && get(addr, "/ping").status == 200
        {
            break;
        }
        assert!(Instant::now() < deadline, "the model never came back");
        std::thread::sleep(Duration::from_millis(50));
    }
    let refused = session(&old, stream);
    let message = refused.error();
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(
        message.contains("has ended") || message.contains("not open"),
        "{message}"
    );
    assert!(
        !message.contains("START") && !message.contains("9223372036854775808"),
        "{message}"
    );
    let new = open();
    let served = session(&new, stream);
    assert_eq!(served.status, 200, "{}", served.text());
    let stopping = Instant::now();
    assert!(common::send_signal(supervisor, "TERM"));
    assert_eq!(
        exit_code_within(&mut running, Duration::from_secs(30)),
        Some(0)
    );
    assert!(
        stopping.elapsed() < Duration::from_secs(10),
        "stop took {:?}",
        stopping.elapsed()
    );
}

/// A serving process that dies while it loads again the models of the one before (a crash
/// during restore): the next one restores them all, as they were, and no region of either dead
/// process is left.
#[test]
fn a_crash_while_restoring_is_restored_again() {
    let (running, addr, root) = serve_multi_model(&[]);
    for name in ["alpha", "beta", "gamma"] {
        let url = artifact(root.path(), name, "identity_fp32");
        load(addr, name, &url, None);
    }
    let before = listed(addr);
    let supervisor = running.0.id();
    let first = serving_process(supervisor);
    crash(first, "KILL");
    // The next serving process, killed once it has started a stub but before it serves.
    let deadline = Instant::now() + Duration::from_secs(60);
    let restoring = loop {
        if let Some(pid) = current_serving_process(supervisor).filter(|&p| p != first)
            && !stub_children(pid).is_empty()
        {
            break pid;
        }
        assert!(
            Instant::now() < deadline,
            "no serving process restoring the models"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let log = std::fs::read_to_string(running.log()).unwrap();
    let served = log
        .lines()
        .filter(|line| line.ends_with("trident::serve: serving"))
        .count();
    assert_eq!(served, 1, "the restoring process served already");
    crash(restoring, "SEGV");
    let deadline = Instant::now() + Duration::from_secs(120);
    while listed_or_none(addr).as_ref() != Some(&before) {
        assert!(
            Instant::now() < deadline,
            "the models were not restored again"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for name in ["alpha", "beta", "gamma"] {
        assert_eq!(invoke_identity(addr, name), Ok(200), "{name}");
    }
    assert_eq!(restarts(addr), 2);
    let live: Vec<PathBuf> = supervised_stubs(supervisor)
        .into_iter()
        .filter_map(common::stub_shm_region)
        .collect();
    let ours = format!("triton_python_backend_shm_region_s{supervisor}-");
    let left: Vec<String> = regions_named(&ours)
        .into_iter()
        .filter(|name| !live.iter().any(|r| r.ends_with(name)))
        .collect();
    assert!(
        left.is_empty(),
        "regions of the dead processes left: {left:?}"
    );
}

/// The models `GET /models` lists, or `None` while nothing answers.
fn listed_or_none(addr: SocketAddr) -> Option<Vec<(String, String)>> {
    let response = common::http_client::try_request(addr, "GET", "/models", &[], b"").ok()?;
    (response.status == 200).then(|| listed(addr))
}

/// Sends `body` to `/invocations` on `addr` in session `id` (or `NEW_SESSION`).
fn in_session(addr: SocketAddr, id: &str, body: &[u8]) -> common::http_client::HttpResponse {
    request(
        addr,
        "POST",
        "/invocations",
        &[
            ("Content-Type", "application/json"),
            ("X-Amzn-SageMaker-Session-Id", id),
        ],
        body,
    )
}

/// Opens a session on `addr`; its id.
fn open_session(addr: SocketAddr) -> String {
    let opened = in_session(addr, "NEW_SESSION", br#"{"requestType":"NEW_SESSION"}"#);
    assert_eq!(opened.status, 200, "{}", opened.text());
    let header = opened.header("x-amzn-sagemaker-new-session-id").unwrap();
    header.split_once(';').unwrap().0.to_owned()
}

/// Waits (up to 90 s) for a serving process other than `old` to answer `/ping` with 200.
fn replaced(running: &mut Running, addr: SocketAddr, old: u32) {
    let supervisor = running.0.id();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            running.0.try_wait().unwrap().is_none(),
            "trident exited instead of replacing its serving process: {}",
            std::fs::read_to_string(running.log()).unwrap_or_default()
        );
        if current_serving_process(supervisor).is_some_and(|pid| pid != old)
            && try_request(addr, "GET", "/ping", &[], b"").is_ok_and(|r| r.status == 200)
        {
            return;
        }
        assert!(Instant::now() < deadline, "not serving again within 90 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Once the serving process has served, every end the supervisor did not ask for is replaced:
/// a native library's `exit(1)` in a request (issue 43's case 3: the supervisor took it for a
/// normal end and exited 1), a SIGTERM sent to the serving process alone (it drains and exits
/// 0), and a SIGKILL; the endpoint serves after each, and a SIGTERM to trident still ends it
/// with 0.
#[test]
fn every_end_of_a_serving_process_that_served_is_replaced() {
    let repository = tempfile::tempdir().unwrap();
    common::copy_model("native_identity_fp32", repository.path(), "exits");
    let config = repository.path().join("exits/config.pbtxt");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        r#"parameters { key: "model" value: { string_value: "identity" } }"#,
        r#"parameters [ { key: "model" value: { string_value: "identity" } },
                        { key: "exit_code" value: { string_value: "1" } } ]"#,
    );
    std::fs::write(&config, text).unwrap();
    let (mut running, addr) = serve_ready_with(trident(), repository.path(), &[]);
    let supervisor = running.0.id();
    let body = br#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[1]}]}"#;
    // exit(1) inside a request: the request is lost with its process, the endpoint is not.
    let serving = serving_process(supervisor);
    let lost = try_request(
        addr,
        "POST",
        "/invocations",
        &[("Content-Type", "application/json")],
        body,
    );
    assert!(lost.is_err(), "the request that ends the process: {lost:?}");
    replaced(&mut running, addr, serving);
    assert_eq!(restarts(addr), 1);
    // A SIGTERM to the serving process alone, then a SIGKILL.
    for (n, signal) in ["TERM", "KILL"].into_iter().enumerate() {
        let serving = serving_process(supervisor);
        assert!(common::send_signal(serving, signal));
        replaced(&mut running, addr, serving);
        assert_eq!(restarts(addr), n as u64 + 2, "after SIG{signal}");
    }
    let log = std::fs::read_to_string(running.log()).unwrap();
    assert!(log.contains("exit code 1"), "{log}");
    assert!(common::send_signal(supervisor, "TERM"));
    assert_eq!(
        exit_code_within(&mut running, Duration::from_secs(30)),
        Some(0)
    );
}
