//! trident's image, run as SageMaker runs it (`scripts/image run`): what the image holds and how
//! it is labelled, trident as PID 1 answering `/ping` and `/invocations`, a drain on SIGTERM that
//! exits 0 within SageMaker's 30 s, and a killed python stub and a killed serving process
//! survived inside the container with nothing left behind (PID 1 reaps).
//!
//! The image is `TRIDENT_TEST_IMAGE`'s (`scripts/image test` builds it and sets it); without one
//! every check is reported ignored. The contract checks that speak only HTTP run against the image
//! too: `tests/http_contract` with `TRIDENT_CONTRACT_IMAGE`.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod deploy_doc;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use libtest_mimic::Failed;
use serde_json::json;

use common::container::{Container, Volume, image, root_of, tail};
use common::http_client::{post_json, request};
use common::process::{current_serving_process, serving_process, stub_children, supervised_stubs};
use common::{Check, copy_dir, copy_model};
use deploy_doc::deploy_md_local_commands_run;

struct Fixture {
    /// The image under test, and its root file system, unpacked; none without one.
    image: Option<(String, PathBuf)>,
}

impl Fixture {
    /// The image (only checks that need one ask: without one they are ignored).
    fn image(&self) -> &str {
        &self.image.as_ref().expect("a check that needs an image").0
    }

    fn rootfs(&self) -> &Path {
        &self.image.as_ref().expect("a check that needs an image").1
    }
}

/// The one check that reads the Dockerfile rather than an image: it runs everywhere.
const WITHOUT_IMAGE: &str = "both_flavours_carry_the_same_labels_and_entrypoint";

fn main() -> std::process::ExitCode {
    let checks: &[Check<Fixture>] = checks![
        both_flavours_carry_the_same_labels_and_entrypoint,
        image_is_labelled_and_started_as_sagemaker_expects,
        image_holds_the_runtime_and_no_build_leftovers,
        trident_is_pid_1_and_serves_the_example_model,
        sigterm_drains_and_exits_0_within_30_s,
        a_killed_stub_is_survived_and_reaped,
        a_killed_serving_process_is_survived_and_reaped,
        multi_model_endpoint_serves_from_opt_ml_models,
        an_onnx_model_repository_is_served_unchanged,
        deploy_md_local_commands_run,
    ];
    let image = image().map(|image| (image.clone(), root_of(&image)));
    let ignored: Vec<&str> = if image.is_some() {
        Vec::new()
    } else {
        eprintln!(
            "no image to test: {} is not set (scripts/image test builds one and runs these)",
            common::container::IMAGE_VARIABLE
        );
        checks
            .iter()
            .map(|&(name, _)| name)
            .filter(|&name| name != WITHOUT_IMAGE)
            .collect()
    };
    common::run_checks_ignoring(Fixture { image }, checks, &ignored)
}

/// A single-model repository holding the example model (`affine`, python backend).
fn example_repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/affine"),
        &dir.path().join("affine"),
    );
    dir
}

/// `affine`'s answer to [1, 2, 3] must be [3, 5, 7] (scale 2, bias 1).
fn ensure_affine(container: &Container, path: &str) -> Result<(), Failed> {
    let body = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]});
    let response = post_json(container.addr(), path, &body);
    ensure!(
        response.status == 200,
        "{path}: {} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.json()["outputs"][0]["data"] == json!([3.0, 5.0, 7.0]),
        "{}",
        response.text()
    );
    Ok(())
}

fn inspect(image: &str, format: &str) -> Result<String, Failed> {
    let driver = std::env::var("STORAGE_DRIVER").unwrap_or_else(|_| "vfs".into());
    let output = common::command("buildah")
        .args(["--storage-driver", &driver, "inspect", "--type", "image"])
        .args(["--format", format, image])
        .output()?;
    ensure!(
        output.status.success(),
        "buildah inspect: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// The final stages of the Dockerfile, `cpu` and `nvidia` (the default, last), each with its
/// lines.
fn final_stages(dockerfile: &str) -> Vec<(String, Vec<String>)> {
    let mut stages: Vec<(String, Vec<String>)> = Vec::new();
    // Continuation lines joined: one instruction per entry.
    let joined = dockerfile.replace("\\\n", " ");
    for line in joined.lines().map(str::trim) {
        if let Some(from) = line.strip_prefix("FROM ") {
            let name = from.rsplit(" AS ").next().unwrap_or_default().trim();
            stages.push((name.to_string(), Vec::new()));
        } else if let Some((_, lines)) = stages.last_mut()
            && !line.is_empty()
            && !line.starts_with('#')
        {
            lines.push(line.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    stages.retain(|(name, _)| name == "cpu" || name == "nvidia");
    stages
}

fn both_flavours_carry_the_same_labels_and_entrypoint(_: &Fixture) -> Result<(), Failed> {
    let dockerfile =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile"))?;
    let stages = final_stages(&dockerfile);
    let names: Vec<&str> = stages.iter().map(|(name, _)| name.as_str()).collect();
    // nvidia last: `docker build .` with no --target builds it.
    ensure!(names == ["cpu", "nvidia"], "final stages {names:?}");
    let contract = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| {
                [
                    "ENTRYPOINT ",
                    "CMD ",
                    "EXPOSE ",
                    "ENV TRITON_HOME",
                    "ENV MIMALLOC_",
                ]
                .iter()
                .any(|p| l.starts_with(p))
            })
            .cloned()
            .collect()
    };
    for (name, lines) in &stages {
        let labels = lines
            .iter()
            .filter(|l| l.starts_with("LABEL "))
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        for capability in [
            "accept-bind-to-port",
            "multi-models",
            "bidirectional-streaming",
        ] {
            let label = format!("com.amazonaws.sagemaker.capabilities.{capability}=true");
            ensure!(labels.contains(&label), "{name} lacks {label}");
        }
        ensure!(
            contract(lines)
                == [
                    "ENV TRITON_HOME=/opt/tritonserver",
                    "ENV MIMALLOC_ARENA_EAGER_COMMIT=0",
                    "EXPOSE 8080",
                    "ENTRYPOINT [\"/usr/local/bin/trident\"]",
                    "CMD [\"serve\"]",
                ],
            "{name}: {:?}",
            contract(lines)
        );
        ensure!(
            lines
                .iter()
                .any(|l| l.contains("/opt/tritonserver/backends/trident/libtriton_trident.so")),
            "{name} does not install the native backend"
        );
    }
    Ok(())
}

fn image_is_labelled_and_started_as_sagemaker_expects(f: &Fixture) -> Result<(), Failed> {
    let labels = inspect(
        f.image(),
        "{{range $k, $v := .OCIv1.Config.Labels}}{{$k}}={{$v}}\n{{end}}",
    )?;
    for capability in [
        "accept-bind-to-port",
        "multi-models",
        "bidirectional-streaming",
    ] {
        let label = format!("com.amazonaws.sagemaker.capabilities.{capability}=true");
        ensure!(
            labels.lines().any(|line| line == label),
            "no {label}:\n{labels}"
        );
    }
    // SageMaker runs `docker run <image> serve`: the argument replaces CMD, so the entrypoint
    // must be trident itself (a shell would not pass signals on, nor be trident as PID 1).
    let entrypoint = inspect(
        f.image(),
        "{{range .OCIv1.Config.Entrypoint}}{{.}}\n{{end}}",
    )?;
    ensure!(
        entrypoint == "/usr/local/bin/trident",
        "entrypoint {entrypoint:?}"
    );
    let cmd = inspect(f.image(), "{{range .OCIv1.Config.Cmd}}{{.}}\n{{end}}")?;
    ensure!(cmd == "serve", "cmd {cmd:?}");
    let ports = inspect(
        f.image(),
        "{{range $p, $_ := .OCIv1.Config.ExposedPorts}}{{$p}} {{end}}",
    )?;
    ensure!(ports == "8080/tcp", "exposed ports {ports:?}");
    Ok(())
}

fn image_holds_the_runtime_and_no_build_leftovers(f: &Fixture) -> Result<(), Failed> {
    for needed in [
        "usr/local/bin/trident",
        "opt/tritonserver/lib/libtritonserver.so",
        "opt/tritonserver/backends/python/libtriton_python.so",
        "opt/tritonserver/backends/python/triton_python_backend_stub",
        "opt/tritonserver/backends/trident/libtriton_trident.so",
        "opt/tritonserver/backends/onnxruntime/libtriton_onnxruntime.so",
        "opt/tritonserver/backends/onnxruntime/libonnxruntime.so.1",
    ] {
        ensure!(
            f.rootfs().join(needed).exists(),
            "the image has no /{needed}"
        );
    }
    // The vetted plugins a manifest names by path, each as SHA256SUMS lists it.
    let plugins = f.rootfs().join("opt/trident/plugins");
    let sums = std::fs::read_to_string(plugins.join("SHA256SUMS"))
        .map_err(|e| format!("the image has no /opt/trident/plugins/SHA256SUMS: {e}"))?;
    for plugin in [
        "image_tensor",
        "tokenize",
        "detokenize",
        "top_k_labels",
        "text_boxes",
        "detection_boxes",
        "oom_default",
    ] {
        let bytes = std::fs::read(plugins.join(format!("{plugin}.wasm")))
            .map_err(|e| format!("the image has no /opt/trident/plugins/{plugin}.wasm: {e}"))?;
        let digest = trident::plugins::platform::loading::sha256_hex(&bytes);
        ensure!(
            sums.contains(&format!("{digest}  ./{plugin}.wasm")),
            "SHA256SUMS does not list {plugin}.wasm's digest {digest}:\n{sums}"
        );
    }
    for leftover in [
        "root/.cargo",
        "root/.rustup",
        "src",
        "out",
        "usr/local/src/install-triton",
        "usr/local/src/install-onnxruntime",
        "usr/bin/cargo",
        "usr/bin/rustc",
        "usr/bin/gcc",
        "usr/bin/pip3",
        "usr/bin/patchelf",
    ] {
        ensure!(
            !f.rootfs().join(leftover).exists(),
            "the image keeps /{leftover} from its build"
        );
    }
    let apt_lists = std::fs::read_dir(f.rootfs().join("var/lib/apt/lists"))
        .map(|entries| entries.flatten().filter(|e| e.path().is_file()).count())
        .unwrap_or(0);
    ensure!(apt_lists == 0, "the image keeps {apt_lists} apt list files");
    // The build's CA bundle was mounted over /mnt in its RUN steps only.
    let mnt = std::fs::read_dir(f.rootfs().join("mnt"))?.count();
    ensure!(mnt == 0, "the image's /mnt holds {mnt} entries");
    Ok(())
}

fn trident_is_pid_1_and_serves_the_example_model(f: &Fixture) -> Result<(), Failed> {
    let repository = example_repository();
    let mut container = Container::start(f.image(), Volume::Model(repository.path()), &[]);
    let healthy = container.wait_healthy(&[], Duration::from_secs(120));
    eprintln!("cold start, PID 1 to /ping 200: {} ms", healthy.as_millis());
    let status = std::fs::read_to_string(format!("/proc/{}/status", container.pid1))?;
    let namespace_pids = status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>();
    ensure!(
        namespace_pids.last() == Some(&"1"),
        "PID 1 is not trident's supervisor: NSpid {namespace_pids:?}"
    );
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", container.pid1))?;
    ensure!(
        cmdline == b"/usr/local/bin/trident\0serve\0",
        "PID 1 runs {:?}",
        String::from_utf8_lossy(&cmdline)
    );
    ensure_affine(&container, "/invocations")?;
    // The model folder is read-only, as SageMaker mounts it; the model still loads and serves.
    ensure!(
        std::fs::write(container.path("/opt/ml/model/probe"), b"x").is_err(),
        "/opt/ml/model is writable"
    );
    Ok(())
}

fn sigterm_drains_and_exits_0_within_30_s(f: &Fixture) -> Result<(), Failed> {
    let repository = tempfile::tempdir()?;
    copy_model("slow_echo", repository.path(), "slow_echo");
    // Four python instances at the default 16 MiB region fill Docker's 64 MiB /dev/shm, and the
    // auto-complete stub's region may still be there when the last is made (the core makes them
    // at once): a region of 4 MiB each leaves room.
    let shm = [("SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE", "4194304")];
    let mut container = Container::start(f.image(), Volume::Model(repository.path()), &shm);
    container.wait_healthy(&[], Duration::from_secs(120));
    let addr = container.addr();
    let in_flight = std::thread::spawn(move || {
        let body =
            json!({"inputs": [{"name": "MS", "datatype": "INT32", "shape": [1], "data": [2000]}]});
        post_json(addr, "/invocations", &body)
    });
    // The request is inside the model before the signal.
    std::thread::sleep(Duration::from_millis(500));
    let stopped = container.stop();
    let answered = in_flight.join().map_err(|_| "the client thread panicked")?;
    ensure!(
        answered.status == 200 && answered.json()["outputs"][0]["data"] == json!([2000]),
        "the request in flight at SIGTERM: {} {}",
        answered.status,
        answered.text()
    );
    match stopped {
        Ok((status, took)) => {
            eprintln!("SIGTERM to exit: {} ms", took.as_millis());
            ensure!(status.success(), "PID 1 ended with {status}");
        }
        Err(took) => return Err(format!("still running {took:?} after SIGTERM").into()),
    }
    Ok(())
}

/// Waits up to 30 s until the container has no zombie and `ready` holds.
fn settle(container: &Container, ready: &dyn Fn() -> bool) -> Result<(), Failed> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let zombies: Vec<_> = container
            .processes()
            .into_iter()
            .filter(|(_, state, _)| *state == 'Z')
            .collect();
        if zombies.is_empty() && ready() {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "after 30 s: zombies {zombies:?}, processes {:?}; the log's warnings, errors and \
             trident's lines:\n{}",
            container.processes(),
            tail(
                &container
                    .log()
                    .lines()
                    .filter(|l| !l.starts_with('I'))
                    .collect::<Vec<_>>()
                    .join("\n"),
                60
            )
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The recovery's own account, for a failure's log.
const RECOVERY_LOG: (&str, &str) = ("RUST_LOG", "info,trident::engine::triton::recovery=debug");

/// The example model served in a container with the recovery's log, once healthy: the folder it
/// mounts, the container, its serving process and affine's one stub.
fn serving_the_example(f: &Fixture) -> Result<(tempfile::TempDir, Container, u32, u32), Failed> {
    let repository = example_repository();
    let mut container =
        Container::start(f.image(), Volume::Model(repository.path()), &[RECOVERY_LOG]);
    container.wait_healthy(&[], Duration::from_secs(120));
    let serving = serving_process(container.pid1);
    let stubs = stub_children(serving);
    ensure!(stubs.len() == 1, "affine's stubs: {stubs:?}");
    Ok((repository, container, serving, stubs[0]))
}

fn a_killed_stub_is_survived_and_reaped(f: &Fixture) -> Result<(), Failed> {
    let (_repository, container, _, stub) = serving_the_example(f)?;
    let stubs = [stub];
    ensure!(common::send_signal(stubs[0], "KILL"), "kill {}", stubs[0]);
    let addr = container.addr();
    let pid1 = container.pid1;
    // The core brings the model back with a new stub; or, when the kill lands at the wrong moment
    // for the python backend, the serving process aborts and the supervisor starts another.
    settle(&container, &|| {
        let replaced = supervised_stubs(pid1)
            .first()
            .is_some_and(|&pid| pid != stubs[0]);
        replaced && request(addr, "GET", "/ping", &[], b"").status == 200
    })?;
    ensure_affine(&container, "/invocations")?;
    Ok(())
}

fn a_killed_serving_process_is_survived_and_reaped(f: &Fixture) -> Result<(), Failed> {
    let (_repository, container, serving, stub) = serving_the_example(f)?;
    let stubs = [stub];
    let regions_before = shm_regions(&container);
    ensure!(!regions_before.is_empty(), "no python shared memory region");
    ensure!(common::send_signal(serving, "KILL"), "kill {serving}");
    let addr = container.addr();
    let pid1 = container.pid1;
    settle(&container, &|| {
        let replaced = current_serving_process(pid1).is_some_and(|pid| pid != serving);
        replaced && request(addr, "GET", "/ping", &[], b"").status == 200
    })?;
    ensure_affine(&container, "/invocations")?;
    // The dead process's stub was ended and reaped, and its region removed: one stub, the new
    // serving process's, and only its regions.
    let processes = container.processes();
    let stubs_now: Vec<_> = processes
        .iter()
        .filter(|(_, _, name)| name.starts_with("triton_python"))
        .collect();
    ensure!(
        stubs_now.len() == 1 && stubs_now[0].0 != stubs[0],
        "stubs in the container: {processes:?}"
    );
    let regions_after = shm_regions(&container);
    ensure!(
        regions_before.iter().all(|r| !regions_after.contains(r)),
        "regions left: before {regions_before:?}, after {regions_after:?}"
    );
    Ok(())
}

/// The python backend's shared memory regions in the container's /dev/shm.
fn shm_regions(container: &Container) -> Vec<String> {
    std::fs::read_dir(container.path("/dev/shm"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("triton_python_backend_shm_region"))
        .collect()
}

fn multi_model_endpoint_serves_from_opt_ml_models(f: &Fixture) -> Result<(), Failed> {
    let models = tempfile::tempdir()?;
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models/affine"),
        &models.path().join("affine/model"),
    );
    let mut container = Container::start(
        f.image(),
        Volume::Models(models.path()),
        &[("SAGEMAKER_MULTI_MODEL", "true")],
    );
    container.wait_healthy(&[], Duration::from_secs(120));
    let addr = container.addr();
    let load = json!({"model_name": "affine", "url": "/opt/ml/models/affine/model"});
    let loaded = post_json(addr, "/models", &load);
    ensure!(
        loaded.status == 200,
        "load: {} {}",
        loaded.status,
        loaded.text()
    );
    let listed = request(addr, "GET", "/models", &[], b"");
    ensure!(
        listed.json()["models"][0]["modelName"] == "affine",
        "list: {}",
        listed.text()
    );
    ensure_affine(&container, "/models/affine/invoke")?;
    let unloaded = request(addr, "DELETE", "/models/affine", &[], b"");
    ensure!(unloaded.status == 200, "unload: {}", unloaded.status);
    let gone = request(addr, "POST", "/models/affine/invoke", &[], b"{}");
    ensure!(gone.status == 404, "invoke after unload: {}", gone.status);
    Ok(())
}

/// A customer's ONNX repository as Triton's images serve it (PP-OCRv4's text detector, a
/// `model.onnx` and no configuration): the cpu image loads it with its onnxruntime backend and
/// answers as ONNX Runtime's Python does.
fn an_onnx_model_repository_is_served_unchanged(f: &Fixture) -> Result<(), Failed> {
    let pretrained =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-models/ch_PP-OCRv4_det_infer.onnx");
    let repository = tempfile::tempdir()?;
    std::fs::create_dir_all(repository.path().join("detector/1"))?;
    std::fs::copy(&pretrained, repository.path().join("detector/1/model.onnx"))?;
    let mut container = Container::start(f.image(), Volume::Model(repository.path()), &[]);
    container.wait_healthy(&[], Duration::from_secs(120));
    let pixels: Vec<f32> = common::pseudo_random(5, 3 * 32 * 32)
        .into_iter()
        .map(|r| (r % 2000) as f32 / 1000.0 - 1.0)
        .collect();
    let body = json!({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3, 32, 32], "data": pixels}]});
    let response = post_json(container.addr(), "/invocations", &body);
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    let output = &response.json()["outputs"][0];
    ensure!(
        output["name"] == "sigmoid_0.tmp_0" && output["shape"] == json!([1, 1, 32, 32]),
        "{output}"
    );
    let b64 = base64::engine::general_purpose::STANDARD;
    let bytes: Vec<u8> = pixels.iter().flat_map(|v| v.to_le_bytes()).collect();
    let expected = common::process::python_client(
        "onnx_models.py",
        &pretrained.display().to_string(),
        &json!({"inputs": {"x": {"dtype": "FP32", "shape": [1, 3, 32, 32], "b64": b64.encode(bytes)}}}),
    );
    let expected: Vec<f32> = b64
        .decode(
            expected["outputs"]["sigmoid_0.tmp_0"]["b64"]
                .as_str()
                .unwrap_or(""),
        )?
        .as_chunks::<4>()
        .0
        .iter()
        .map(|c| f32::from_le_bytes(*c))
        .collect();
    let got: Vec<f64> = serde_json::from_value(output["data"].clone())?;
    ensure!(
        got.len() == expected.len(),
        "{} values, ONNX Runtime gives {}",
        got.len(),
        expected.len()
    );
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        let (g, e) = (*g as f32, *e);
        let agree = g == e || (g - e).abs() <= (1e-5 * e.abs()).max(1e-6);
        ensure!(agree, "element {i}: {g}, ONNX Runtime gives {e}");
    }
    Ok(())
}
