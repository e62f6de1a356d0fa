//! `trident serve` as a process: the entry script's start-up checks (messages, exit code 1) and
//! a SIGTERM under load that loses no accepted request.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::copy_model;
use common::http_client::{get, post_json, request, try_request};
use common::process::{
    Running, free_port, listening_address, serve_ready, serve_ready_with, serving_process,
    stub_children, supervised_stubs, wait_ready_with,
};

fn trident() -> Command {
    without_sagemaker_environment(common::command(env!("CARGO_BIN_EXE_trident")))
}

/// `command` (trident, or a shell that execs it) with only what each test sets: no SageMaker
/// variables from the environment running the tests.
fn without_sagemaker_environment(mut command: Command) -> Command {
    for (key, _) in std::env::vars() {
        if key.starts_with("SAGEMAKER_") {
            command.env_remove(key);
        }
    }
    command.env("RUST_LOG", "info");
    command
}

fn serve_output(repository: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    trident()
        .arg("serve")
        .arg("--model-repository")
        .arg(repository)
        .args(["--bind", "127.0.0.1", "--port", "0"])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run trident")
}

/// The start was refused: exit code 1 and `expected` in what trident printed.
fn assert_refused(output: &Output, expected: &str) {
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(1), "{printed}");
    assert!(
        printed.contains(expected),
        "expected '{expected}' in {printed}"
    );
}

fn repository(folders: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for folder in folders {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    }
    dir
}

#[test]
fn start_up_checks_exit_1_with_the_entry_script_messages() {
    let with_config = repository(&["m"]);
    std::fs::write(with_config.path().join("config.pbtxt"), "").unwrap();
    // (repository, environment, expected message)
    type Case = (
        tempfile::TempDir,
        Vec<(&'static str, &'static str)>,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            with_config,
            vec![],
            "Model directory needs to contain the top level folder",
        ),
        (
            repository(&[]),
            vec![],
            "No model found in model repository",
        ),
        (
            repository(&["a", "b"]),
            vec![],
            "More than 1 model directory found in model repository",
        ),
        (
            repository(&["a"]),
            vec![("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", "zzz")],
            "Directory with provided SAGEMAKER_TRITON_DEFAULT_MODEL_NAME zzz does not exist",
        ),
        (
            repository(&["a"]),
            vec![("SAGEMAKER_TRITON_INFERENCE_TYPE", "classify")],
            "Invalid SAGEMAKER_TRITON_INFERENCE_TYPE",
        ),
        (
            repository(&["a"]),
            vec![("SAGEMAKER_TRITON_HTTP_RESTRICTED_API", "everything:k=v")],
            "malformed restricted API",
        ),
        // A huge expiration once panicked every NEW_SESSION (after it took a slot).
        (
            repository(&["a"]),
            vec![
                ("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "true"),
                ("SAGEMAKER_SESSIONS_EXPIRATION", "18446744073709551615"),
            ],
            "SAGEMAKER_SESSIONS_EXPIRATION must be 1 to 2592000 seconds",
        ),
        (
            repository(&["a"]),
            vec![
                ("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "true"),
                ("SAGEMAKER_SESSIONS_EXPIRATION", "0"),
            ],
            "SAGEMAKER_SESSIONS_EXPIRATION must be 1 to 2592000 seconds",
        ),
    ];
    for (dir, env, expected) in cases {
        assert_refused(&serve_output(dir.path(), &[], &env), expected);
    }
}

#[test]
fn sigterm_under_load_answers_every_accepted_request_then_exits_0() {
    let repo = tempfile::tempdir().unwrap();
    copy_model("slow_echo", repo.path(), "slow_echo");
    let (mut running, addr) = serve_ready(trident(), repo.path());

    let body = serde_json::json!({"inputs": [{"name": "MS", "datatype": "INT32", "shape": [1], "data": [1500]}]});
    let started = Instant::now();
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let requests: Vec<_> = (0..6)
            .map(|_| scope.spawn(|| post_json(addr, "/invocations", &body).status))
            .collect();
        std::thread::sleep(Duration::from_millis(400));
        assert!(common::send_signal(running.0.id(), "TERM"));
        requests.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(
        statuses, [200; 6],
        "every request accepted before SIGTERM is answered"
    );

    let deadline = started + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = running.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "trident did not exit within 30 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still accepting after exit"
    );
}

/// The README's first command serves `examples/models`; its curl line gets this answer, and the
/// metrics port counts it.
#[test]
fn the_readme_example_serves_its_answer() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models");
    let metrics_port = free_port();
    let mut command = trident();
    command.env(
        "SAGEMAKER_SAFE_PORT_RANGE",
        format!("{metrics_port}-{metrics_port}"),
    );
    let (_running, addr) = serve_ready(command, &examples);
    let body = serde_json::json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]});
    let response = post_json(addr, "/invocations", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let json = response.json();
    assert_eq!(json["model_name"], "affine");
    assert_eq!(
        json["outputs"][0]["data"],
        serde_json::json!([3.0, 5.0, 7.0])
    );

    let metrics = get(([127, 0, 0, 1], metrics_port).into(), "/metrics");
    assert_eq!(metrics.status, 200);
    let text = metrics.text();
    for expected in [
        "trident_requests_total{route=\"invocations\",model=\"affine\"} 1",
        "trident_request_duration_seconds_count{route=\"invocations\",model=\"affine\"} 1",
        "trident_responses_total{route=\"ping\",status=\"200\"}",
    ] {
        assert!(text.contains(expected), "no {expected} in {text}");
    }
}

/// Metrics on the main port, where SageMaker scrapes them: at the configured path, under the
/// `health` restriction like `/ping`; and every log line of a request names its
/// `X-Amzn-SageMaker-Inference-Id` (made safe for a log line).
#[test]
fn metrics_on_the_main_port_and_inference_ids_in_the_log() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models");
    let log = tempfile::NamedTempFile::new().unwrap();
    let child = trident()
        .arg("serve")
        .arg("--model-repository")
        .arg(&examples)
        .args(["--bind", "127.0.0.1", "--port", "0"])
        .env(
            "SAGEMAKER_TRITON_HTTP_RESTRICTED_API",
            "health:X-Health=yes",
        )
        .env("TRIDENT_METRICS_PATH", "/observability/metrics")
        .env("RUST_LOG", "trident=debug")
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .expect("start trident");
    let mut running = Running::logging(child, log);
    let addr = listening_address(&mut running);
    let health = [("X-Health", "yes")];
    wait_ready_with(addr, &mut running.0, &health);

    let good = serde_json::json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]});
    assert_eq!(post_json(addr, "/invocations", &good).status, 200);
    let path = "/observability/metrics";
    let metrics = request(addr, "GET", path, &health, b"");
    assert_eq!(metrics.status, 200, "{}", metrics.text());
    assert!(
        metrics
            .text()
            .contains("trident_requests_total{route=\"invocations\",model=\"affine\"} 1"),
        "{}",
        metrics.text()
    );
    let refused = get(addr, path);
    assert_eq!(refused.status, 403);
    assert!(
        refused.error().contains("This API is restricted"),
        "{}",
        refused.text()
    );
    let wrong_value = request(addr, "GET", path, &[("X-Health", "no")], b"");
    assert_eq!(wrong_value.status, 403);
    assert_eq!(request(addr, "POST", path, &health, b"").status, 405);
    assert_eq!(request(addr, "GET", "/metrics", &health, b"").status, 404);
    let scraped = request(addr, "GET", path, &health, b"").text();
    // The scrapes before this one are counted: one answered, two 403s, one 405.
    for counted in [
        "trident_requests_total{route=\"metrics\",model=\"\"} 4",
        "trident_request_errors_total{route=\"metrics\",model=\"\"} 3",
    ] {
        assert!(scraped.contains(counted), "no {counted} in {scraped}");
    }

    // A request that is refused, with an ordinary id and with a hostile one.
    for (id, logged) in [
        ("sm-4f2a-9", "sm-4f2a-9".to_string()),
        (
            &*format!("a\"b\\c d{}", "x".repeat(300)),
            format!("a?b?c?d{}…", "x".repeat(121)),
        ),
    ] {
        let bad = request(
            addr,
            "POST",
            "/invocations",
            &[
                ("Content-Type", "application/json"),
                ("X-Amzn-SageMaker-Inference-Id", id),
            ],
            b"{not json",
        );
        assert_eq!(bad.status, 400, "{}", bad.text());
        let marker = format!("request{{inference_id={logged}}}");
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let text = std::fs::read_to_string(running.log()).unwrap();
            if text
                .lines()
                .any(|line| line.contains(&marker) && line.contains("request refused"))
            {
                break;
            }
            assert!(Instant::now() < deadline, "no {marker} line in {text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let after = post_json(addr, "/invocations", &good);
    assert_eq!(after.status, 200, "{}", after.text());
}

/// A plugin manifest that cannot be used stops the start, naming the problem.
#[test]
fn a_bad_plugin_manifest_stops_the_start() {
    let dir = repository(&["a"]);
    let manifest = dir.path().join("plugins.toml");
    let digest = "0".repeat(64);
    for (text, expected) in [
        ("colour = \"blue\"\n".to_string(), "colour"),
        (
            format!("[plugins.x]\npath = \"missing.wasm\"\nsha256 = \"{digest}\"\n"),
            "missing.wasm",
        ),
    ] {
        std::fs::write(&manifest, text).unwrap();
        let env = [("SAGEMAKER_TRITON_PLUGINS", manifest.to_str().unwrap())];
        assert_refused(&serve_output(dir.path(), &[], &env), expected);
    }
}

/// The serving process's role is the supervisor's to give: the variables it sets, set by
/// anyone else, stop the start with a clear message (exit 1) instead of serving on whatever
/// standard input is.
#[test]
fn the_serving_process_role_cannot_be_faked() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models");
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().to_str().unwrap();
    let own_pid = std::process::id().to_string();
    for (env, expected) in [
        (
            vec![("TRIDENT_SUPERVISOR_PID", "1")],
            "are set by trident's supervisor, together",
        ),
        (
            vec![("TRIDENT_STATE_DIR", state_dir)],
            "are set by trident's supervisor, together",
        ),
        (
            vec![
                ("TRIDENT_SUPERVISOR_PID", "1"),
                ("TRIDENT_STATE_DIR", state_dir),
            ],
            "the supervisor (pid 1) is not this process's parent",
        ),
        (
            vec![
                ("TRIDENT_SUPERVISOR_PID", own_pid.as_str()),
                ("TRIDENT_STATE_DIR", state_dir),
            ],
            "standard input is not the supervisor's listening socket",
        ),
    ] {
        assert_refused(&serve_output(&examples, &[], &env), expected);
    }
}

/// The descriptors a process has open: number → what it points at (a path, `socket:[N]`, ...).
fn open_descriptors(pid: u32) -> Vec<(u32, String)> {
    let mut open: Vec<(u32, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let fd = entry.file_name().to_str()?.parse().ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            Some((fd, target.to_string_lossy().into_owned()))
        })
        .collect();
    open.sort();
    open
}

/// The python stub the core starts for a model holds none of trident's descriptors: not its
/// sockets (the listener, a client's connection) and not one trident inherited without
/// close-on-exec (descriptor 9 here, opened by the shell that execs trident), only the standard
/// streams and what the stub opens itself (its shared memory).
#[test]
fn backend_processes_inherit_only_the_standard_streams() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models");
    let inherited = tempfile::NamedTempFile::new().unwrap();
    let inherited_path = inherited.path().to_string_lossy().into_owned();
    let mut shell = without_sagemaker_environment(common::command("sh"));
    shell
        .arg("-c")
        .arg(r#"exec 9<"$0" && exec "$@""#)
        .arg(&inherited_path)
        .arg(env!("CARGO_BIN_EXE_trident"));
    let (running, addr) = serve_ready(shell, &examples);
    let trident_pid = serving_process(running.0.id());
    let trident_open = open_descriptors(trident_pid);
    assert!(
        trident_open.contains(&(9, inherited_path.clone())),
        "the set-up failed: trident did not inherit descriptor 9: {trident_open:?}"
    );
    // A client connection held open while the stub is inspected.
    let _connection = std::net::TcpStream::connect(addr).unwrap();
    let body = serde_json::json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]});
    assert_eq!(post_json(addr, "/invocations", &body).status, 200);

    let stubs: Vec<u32> = stub_children(trident_pid);
    assert!(!stubs.is_empty(), "no python stub among trident's children");
    let trident_open = open_descriptors(trident_pid);
    for stub in stubs {
        let stub_open = open_descriptors(stub);
        for fd in 0..3 {
            assert!(
                stub_open.iter().any(|(n, _)| *n == fd),
                "stub {stub} has no descriptor {fd}: {stub_open:?}"
            );
        }
        // Sockets and pipes are named by their inode: the same name is the same object.
        let leaked: Vec<_> = stub_open
            .iter()
            .filter(|(fd, target)| {
                *fd > 2
                    && (*target == inherited_path
                        || ((target.starts_with("socket:") || target.starts_with("pipe:"))
                            && trident_open.iter().any(|(_, t)| t == target)))
            })
            .collect();
        assert!(
            leaked.is_empty(),
            "stub {stub} inherited trident's descriptors {leaked:?} (all: {stub_open:?}; trident: {trident_open:?})"
        );
    }
}

/// The README's example as the README runs it (repository `examples/models`, relative to the
/// working folder): the request that killed the python backend's stub (`[0, 2^63-1]`, no data)
/// is refused and the model keeps serving; then its stub is killed under four clients'
/// traffic, and trident reloads the model: requests succeed again, `/ping` is 200, and the
/// killed stubs' shared memory regions are gone from `/dev/shm`.
#[test]
fn the_readme_example_survives_a_hostile_shape_and_a_killed_process() {
    let mut command = trident();
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    let (running, addr) = serve_ready(command, "examples/models");
    let good = serde_json::json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]});
    let answers = |response: &common::http_client::HttpResponse| {
        response.status == 200
            && response.json()["outputs"][0]["data"] == serde_json::json!([3.0, 5.0, 7.0])
    };

    let hostile = serde_json::json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [0, i64::MAX], "data": []}]});
    let refused = post_json(addr, "/invocations", &hostile);
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(
        refused
            .error()
            .contains("input 'INPUT0' has an invalid shape [0, 9223372036854775807]"),
        "{}",
        refused.text()
    );
    assert!(answers(&post_json(addr, "/invocations", &good)));
    assert_eq!(get(addr, "/ping").status, 200);

    let stubs: Vec<u32> = supervised_stubs(running.0.id());
    assert!(!stubs.is_empty(), "no python stub among trident's children");
    let regions: Vec<PathBuf> = stubs
        .iter()
        .filter_map(|&pid| common::stub_shm_region(pid))
        .collect();
    assert_eq!(
        regions.len(),
        stubs.len(),
        "a stub without a shared memory region"
    );
    let recovered = common::kill_under_traffic(
        &stubs,
        &|| supervised_stubs(running.0.id()),
        "KILL",
        4,
        // No response (0): the python backend aborted the serving process, which the
        // supervisor replaces (the kill's window, not trident's: see tests/crashes.rs).
        &|| {
            let body = good.to_string();
            let headers = [("Content-Type", "application/json")];
            try_request(addr, "POST", "/invocations", &headers, body.as_bytes())
                .map_or(0, |r| r.status)
        },
        &|| get(addr, "/ping").status,
        Duration::from_secs(90),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(answers(&post_json(addr, "/invocations", &good)));
    // New processes serve it (a killed one may linger as a zombie: Triton cannot tear down an
    // instance whose process died).
    let serving: Vec<u32> = supervised_stubs(running.0.id());
    assert!(
        !serving.is_empty() && serving.iter().all(|pid| !stubs.contains(pid)),
        "stubs after recovery {serving:?}, killed {stubs:?}"
    );
    // The dead stubs' shared memory regions do not outlive them in /dev/shm.
    let deadline = Instant::now() + Duration::from_secs(10);
    while regions.iter().any(|r| r.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<_> = regions.iter().filter(|r| r.exists()).collect();
    assert!(left.is_empty(), "regions of killed stubs left: {left:?}");
    eprintln!(
        "recovered in {:?}; {} requests meanwhile",
        recovered.took,
        recovered.statuses.len()
    );
}

/// The sequence-sum model with Triton's default idle limit (its configuration sets none).
fn default_idle_sequence_model(repository: &Path, folder: &str) {
    copy_model("native_sequence_sum", repository, folder);
    let config = repository.join(folder).join("config.pbtxt");
    let text = std::fs::read_to_string(&config).unwrap();
    let set = "sequence_batching { max_sequence_idle_microseconds: 60000000 }";
    assert!(text.contains(set));
    std::fs::write(&config, text.replace(set, "sequence_batching { }")).unwrap();
}

/// Opens a session on `addr`; its id.
fn open_session(addr: std::net::SocketAddr) -> String {
    open_session_at(addr, "/invocations")
}

/// Opens a session on `addr`'s inference route `path`; its id.
fn open_session_at(addr: std::net::SocketAddr, path: &str) -> String {
    let opened = request(
        addr,
        "POST",
        path,
        &[("X-Amzn-SageMaker-Session-Id", "NEW_SESSION")],
        br#"{"requestType":"NEW_SESSION"}"#,
    );
    assert_eq!(opened.status, 200, "{}", opened.text());
    let header = opened.header("x-amzn-sagemaker-new-session-id").unwrap();
    header.split_once(';').unwrap().0.to_owned()
}

/// Adds `value` in session `id`; the model's running sum.
fn add_in_session(addr: std::net::SocketAddr, id: &str, value: i32) -> i64 {
    add_in_session_at(addr, "/invocations", id, value)
}

/// Adds `value` in session `id` on `addr`'s inference route `path`; the model's running sum.
fn add_in_session_at(addr: std::net::SocketAddr, path: &str, id: &str, value: i32) -> i64 {
    let body = format!(
        r#"{{"inputs":[{{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[{value}]}}]}}"#
    );
    let response = request(
        addr,
        "POST",
        path,
        &[
            ("Content-Type", "application/json"),
            ("X-Amzn-SageMaker-Session-Id", id),
        ],
        body.as_bytes(),
    );
    assert_eq!(response.status, 200, "{}", response.text());
    response.json()["outputs"][0]["data"][0].as_i64().unwrap()
}

/// Sends SIGTERM to `running` and waits (up to `within`) for it to exit, with code 0; how long
/// it took, and its log.
fn stopped_with_0(running: &mut Running, within: Duration) -> (Duration, String) {
    let stopping = Instant::now();
    assert!(common::send_signal(running.0.id(), "TERM"));
    let status = loop {
        if let Some(status) = running.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopping.elapsed() < within,
            "trident did not stop within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = stopping.elapsed();
    let log = std::fs::read_to_string(running.log()).unwrap();
    assert_eq!(status.code(), Some(0), "after {took:?}: {log}");
    (took, log)
}

/// `trident serve` as SageMaker runs it, with sessions on a stateful model whose configuration
/// sets no idle limit (Triton's 1 s): the model is loaded once, a session keeps its sum across a
/// 3 s pause, and SIGTERM
/// with 32 open sessions, as many as the model's sequence slots (30 of them started in the
/// model), ends them and exits 0 within 5 s,
/// where the core used to wait for every open sequence until SageMaker's SIGKILL.
#[test]
fn sigterm_with_open_sessions_ends_them_and_exits_0_at_once() {
    let repository = tempfile::tempdir().unwrap();
    default_idle_sequence_model(repository.path(), "counter");
    let mut command = trident();
    command.env("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "true");
    let (mut running, addr) = serve_ready(command, repository.path());
    let kept = open_session(addr);
    assert_eq!(add_in_session(addr, &kept, 2), 2);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        add_in_session(addr, &kept, 3),
        5,
        "the sum after a 3 s pause"
    );
    let ids: Vec<String> = (0..31).map(|_| open_session(addr)).collect();
    for id in ids.iter().take(29) {
        assert_eq!(add_in_session(addr, id, 1), 1);
    }
    let (took, log) = stopped_with_0(&mut running, Duration::from_secs(30));
    assert!(
        took < Duration::from_secs(5),
        "the stop took {took:?}: {log}"
    );
    assert!(
        log.contains("open sessions ended for the shutdown"),
        "{log}"
    );
    // The model was loaded once, its first load already carrying the raised idle limit (issue
    // 43, case 4: it was loaded a second time to raise it, doubling start-up time and memory).
    assert_eq!(loads_of(&log, "counter"), 1, "{log}");
    assert!(!log.contains("loaded again"), "{log}");
    eprintln!("SIGTERM with 32 open sessions: exit 0 after {took:?}");
}

/// The loads of a stateful model (Triton's default idle limit) that carry the raised limit:
/// its lines in the core's log (issue 43, case 4: each was loaded twice when sessions were on).
fn loads_of(log: &str, model: &str) -> usize {
    let named = format!("{model}'");
    log.lines()
        .filter(|line| line.contains("successfully loaded '") && line.contains(&named))
        .count()
}

/// A multi-model load of a stateful model whose configuration sets no idle limit, with
/// sessions on and the endpoint's defaults (the native-code boundary: the core reads the
/// artifact's private copy): loaded once, already carrying the raised idle limit, so a session
/// keeps its sum across a 3 s pause (Triton's default limit is 1 s).
#[test]
fn a_multi_model_stateful_load_is_loaded_once_with_the_sessions_idle_limit() {
    let (root, repository) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = root.path().join("hash").join("model");
    default_idle_sequence_model(&url, "counter");
    let mut command = trident();
    command
        .env("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "true")
        .env("SAGEMAKER_MULTI_MODEL", "true");
    let args = [
        std::ffi::OsStr::new("--models-root"),
        root.path().as_os_str(),
        std::ffi::OsStr::new("--multi-model-repository"),
        repository.path().as_os_str(),
    ];
    let (mut running, addr) = serve_ready_with(command, repository.path(), &args);
    let body = serde_json::json!({"model_name": "counter", "url": url}).to_string();
    let loaded = request(addr, "POST", "/models", &[], body.as_bytes());
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    let path = "/models/counter/invoke";
    let id = open_session_at(addr, path);
    assert_eq!(add_in_session_at(addr, path, &id, 2), 2);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        add_in_session_at(addr, path, &id, 3),
        5,
        "after a 3 s pause"
    );
    let (_, log) = stopped_with_0(&mut running, Duration::from_secs(30));
    assert_eq!(loads_of(&log, "counter"), 1, "{log}");
    assert!(!log.contains("loaded again"), "{log}");
}

/// SIGTERM at the default grace with a session request that outlives the drain (issue 43, case
/// 7: the drain, the session's END and the core's stop outlasted the supervisor's margin, which
/// killed the serving process: exit 1): trident exits 0 within SageMaker's 30 s.
#[test]
fn sigterm_with_a_session_request_outliving_the_drain_exits_0_within_30_s() {
    let repository = tempfile::tempdir().unwrap();
    copy_model("native_sequence_sum", repository.path(), "slow_counter");
    let config = repository.path().join("slow_counter/config.pbtxt");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        r#"parameters { key: "model" value: { string_value: "sequence_sum" } }"#,
        r#"parameters [ { key: "model" value: { string_value: "sequence_sum" } },
                        { key: "delay_ms" value: { string_value: "120000" } } ]"#,
    );
    std::fs::write(&config, text).unwrap();
    let mut command = trident();
    command.env("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "true");
    let (mut running, addr) = serve_ready(command, repository.path());
    let id = open_session(addr);
    let body = r#"{"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[1]}]}"#;
    let in_flight = std::thread::spawn(move || {
        try_request(
            addr,
            "POST",
            "/invocations",
            &[
                ("Content-Type", "application/json"),
                ("X-Amzn-SageMaker-Session-Id", &id),
            ],
            body.as_bytes(),
        )
    });
    std::thread::sleep(Duration::from_secs(1));
    let (took, log) = stopped_with_0(&mut running, Duration::from_secs(40));
    assert!(
        took < Duration::from_secs(30),
        "the stop took {took:?}: {log}"
    );
    assert!(
        !log.contains("outlived its grace period"),
        "the supervisor killed it: {log}"
    );
    let _ = in_flight.join();
    eprintln!("SIGTERM with a session request outliving the drain: exit 0 after {took:?}");
}
