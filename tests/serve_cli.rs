//! `trident serve` as a process: the entry script's start-up checks (messages, exit code 1) and
//! a SIGTERM under load that loses no accepted request.

mod common;

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::copy_model;
use common::http_client::{get, post_json};

fn trident() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_trident"));
    // Only what each test sets: no SageMaker variables from the environment running the tests.
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
    ];
    for (dir, env, expected) in cases {
        assert_refused(&serve_output(dir.path(), &[], &env), expected);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Running(Child);

impl Drop for Running {
    /// SIGTERM first, so trident stops the core and its python stubs; SIGKILL only if it hangs.
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let pid = self.0.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            let deadline = Instant::now() + Duration::from_secs(30);
            while self.0.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_ready(addr: SocketAddr, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("trident exited early: {status}");
        }
        if std::net::TcpStream::connect(addr).is_ok() && get(addr, "/ping").status == 200 {
            return;
        }
        assert!(Instant::now() < deadline, "trident not ready in time");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sigterm_under_load_answers_every_accepted_request_then_exits_0() {
    let repo = tempfile::tempdir().unwrap();
    copy_model("slow_echo", repo.path(), "slow_echo");
    let port = free_port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let child = trident()
        .arg("serve")
        .arg("--model-repository")
        .arg(repo.path())
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start trident");
    let mut running = Running(child);
    wait_ready(addr, &mut running.0);

    let body = serde_json::json!({"inputs": [{"name": "MS", "datatype": "INT32", "shape": [1], "data": [1500]}]});
    let started = Instant::now();
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let requests: Vec<_> = (0..6)
            .map(|_| scope.spawn(|| post_json(addr, "/invocations", &body).status))
            .collect();
        std::thread::sleep(Duration::from_millis(400));
        let pid = running.0.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
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
    let port = free_port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let metrics_port = free_port();
    let child = trident()
        .arg("serve")
        .arg("--model-repository")
        .arg(&examples)
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .env(
            "SAGEMAKER_SAFE_PORT_RANGE",
            format!("{metrics_port}-{metrics_port}"),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start trident");
    let mut running = Running(child);
    wait_ready(addr, &mut running.0);
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
