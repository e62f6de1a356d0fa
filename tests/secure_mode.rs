//! SageMaker Secure Mode and the native-code boundary against the real core, through
//! `trident serve`: each forbidden kind of artifact refused under its control (single-model at
//! start, multi-model at load), with the file and the control named, nothing of it loaded and
//! the endpoint serving; a signed Python plugin as the one way to customise under all five
//! controls; and, outside Secure Mode, a backend library in a multi-model artifact refused by
//! default and loaded (with its native code) only when allowed.

mod common;

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::http_client::{HttpResponse, get, post_json, request};
use common::process::{Running, serve_ready_with, start_listening, stub_children};
use serde_json::json;

const ALL_CONTROLS: &str = "DISALLOW_CUSTOM_INFERENCE_SCRIPTS,DISALLOW_PICKLE_FILES,\
                            DISALLOW_REQUIREMENTS_TXT,DISALLOW_TRUST_REMOTE_CODE,\
                            DISALLOW_CHAT_TEMPLATE";

/// The platform's signing key in these tests (and a key that is not the platform's).
const PLATFORM_SECRET: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const OTHER_SECRET: &str = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";

/// `trident serve` with only the variables each test sets.
fn trident(env: &[(&str, &OsStr)]) -> Command {
    let mut command = common::command(env!("CARGO_BIN_EXE_trident"));
    for (key, _) in std::env::vars() {
        if key.starts_with("SAGEMAKER_") || key.starts_with("TRIDENT_") {
            command.env_remove(key);
        }
    }
    command.env("RUST_LOG", "info").envs(env.iter().copied());
    command
}

/// Secure Mode's variables with every control and `channel` untrusted.
fn secure_env(channel: &Path) -> Vec<(&'static str, &OsStr)> {
    vec![
        ("SAGEMAKER_SECURE_MODE", OsStr::new("true")),
        ("SAGEMAKER_SECURITY_CONTROLS", OsStr::new(ALL_CONTROLS)),
        ("SAGEMAKER_UNTRUSTED_CHANNELS", channel.as_os_str()),
    ]
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn invoke_identity(addr: SocketAddr, path: &str) -> HttpResponse {
    let body = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1.5, -2]}]});
    post_json(addr, path, &body)
}

/// One forbidden kind of file: where it goes in a model folder, its bytes, and the control
/// that forbids it.
struct Forbidden {
    file: &'static str,
    bytes: &'static [u8],
    control: &'static str,
}

#[rustfmt::skip]
const FORBIDDEN: &[Forbidden] = &[
    Forbidden { file: "1/model.py", bytes: b"import os\n", control: "DISALLOW_CUSTOM_INFERENCE_SCRIPTS" },
    Forbidden { file: "1/weights.pt", bytes: b"PK\x03\x04", control: "DISALLOW_PICKLE_FILES" },
    Forbidden { file: "requirements.txt", bytes: b"torch==2.5\n", control: "DISALLOW_REQUIREMENTS_TXT" },
    Forbidden { file: "1/model.json", bytes: b"{\"model\": \"x\", \"trust_remote_code\": true}", control: "DISALLOW_TRUST_REMOTE_CODE" },
    Forbidden { file: "tokenizer_config.json", bytes: b"{\"chat_template\": \"{% for m in messages %}{{ m }}{% endfor %}\"}", control: "DISALLOW_CHAT_TEMPLATE" },
    // Issue 44: a protocol 0 pickle under a text name, a compressed file (a pickle or anything
    // else inside), a string that Python takes as true.
    Forbidden { file: "1/labels.txt", bytes: b"cos\nsystem\n(S'touch /tmp/pwned'\ntR.", control: "DISALLOW_PICKLE_FILES" },
    Forbidden { file: "1/weights.pkl.gz", bytes: b"\x1f\x8b\x08\x00", control: "allow-list" },
    Forbidden { file: "config.json", bytes: b"{\"trust_remote_code\": \"false\"}", control: "DISALLOW_TRUST_REMOTE_CODE" },
    // Issue 56: pickles by structure, whatever the name or first bytes: PROTO 0, a text
    // stream with no MARK, an INST form under a model file's name, a NumPy header of objects.
    Forbidden { file: "1/tensor.data", bytes: b"\x80\x00cos\nsystem\nS'touch /tmp/pwned'\n\x85R.", control: "DISALLOW_PICKLE_FILES" },
    Forbidden { file: "1/notes.txt", bytes: b"cos\nsystem\nS'touch /tmp/pwned'\n\x85R.", control: "DISALLOW_PICKLE_FILES" },
    Forbidden { file: "1/extra.onnx", bytes: b"(S'touch /tmp/pwned'\niposix\nsystem\n.", control: "DISALLOW_PICKLE_FILES" },
    Forbidden { file: "1/objects.npy", bytes: b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': False, 'shape': (1,), }                                                             \n", control: "DISALLOW_PICKLE_FILES" },
];

#[test]
fn secure_mode_settings_are_checked_at_start() {
    let repository = tempfile::tempdir().unwrap();
    common::copy_model("native_identity_fp32", repository.path(), "m");
    let channel = repository.path().as_os_str();
    let run = |env: &[(&str, &OsStr)]| -> Output {
        trident(env)
            .arg("serve")
            .arg("--model-repository")
            .arg(repository.path())
            .args(["--bind", "127.0.0.1", "--port", "0"])
            .output()
            .unwrap()
    };
    let on = ("SAGEMAKER_SECURE_MODE", OsStr::new("true"));
    let controls = (
        "SAGEMAKER_SECURITY_CONTROLS",
        OsStr::new("DISALLOW_PICKLE_FILES"),
    );
    let channels = ("SAGEMAKER_UNTRUSTED_CHANNELS", channel);
    let cases: Vec<(Vec<(&str, &OsStr)>, &str)> = vec![
        (
            vec![on, channels],
            "SAGEMAKER_SECURE_MODE is true but SAGEMAKER_SECURITY_CONTROLS is not set",
        ),
        (
            vec![on, controls],
            "SAGEMAKER_SECURE_MODE is true but SAGEMAKER_UNTRUSTED_CHANNELS is not set",
        ),
        (
            vec![
                on,
                channels,
                (
                    "SAGEMAKER_SECURITY_CONTROLS",
                    OsStr::new("DISALLOW_PICKLE_FILES, DISALLOW_EVERYTHING"),
                ),
            ],
            "SAGEMAKER_SECURITY_CONTROLS names DISALLOW_EVERYTHING, which trident does not enforce",
        ),
        (
            vec![
                on,
                controls,
                (
                    "SAGEMAKER_UNTRUSTED_CHANNELS",
                    OsStr::new("/nonexistent/channel"),
                ),
            ],
            "SAGEMAKER_UNTRUSTED_CHANNELS names /nonexistent/channel, which is not a folder",
        ),
        (
            vec![
                on,
                controls,
                channels,
                ("TRIDENT_PLUGIN_TRUSTED_KEYS", OsStr::new("abcd")),
            ],
            "TRIDENT_PLUGIN_TRUSTED_KEYS: public key must be 32 bytes",
        ),
        (
            vec![
                on,
                controls,
                channels,
                ("TRIDENT_PLUGIN_REQUIRE_CASES", OsStr::new("maybe")),
            ],
            "TRIDENT_PLUGIN_REQUIRE_CASES must be true or false, got 'maybe'",
        ),
        (
            vec![("TRIDENT_ARTIFACT_NATIVE_CODE", OsStr::new("sometimes"))],
            "TRIDENT_ARTIFACT_NATIVE_CODE must be allow or refuse, got 'sometimes'",
        ),
    ];
    for (env, expected) in cases {
        let output = run(&env);
        let printed = String::from_utf8_lossy(&output.stderr).into_owned()
            + &String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{expected}: {printed}");
        assert!(
            printed.contains(expected),
            "expected '{expected}' in {printed}"
        );
    }
}

/// A single-model endpoint under every control whose repository holds `forbidden` beside (or
/// inside) a native model: its answers to `/ping` and `/invocations`, the log, and the stubs.
fn single_model_refusal(model: &str, forbidden: &Forbidden) {
    let repository = tempfile::tempdir().unwrap();
    common::copy_model(model, repository.path(), "m");
    let file = repository.path().join("m").join(forbidden.file);
    write(&file, forbidden.bytes);
    // An untrusted channel of its own: the refusal is the repository's check, not the channels'.
    let channel = tempfile::tempdir().unwrap();
    let env = secure_env(channel.path());
    let (mut running, addr) = start_listening(trident(&env), repository.path(), &[]);
    let ping = get(addr, "/ping");
    let body = ping.text();
    assert_eq!(ping.status, 400, "{body}");
    // Error bodies name the file inside the artifact.
    let named = format!("<artifact>/m/{}", forbidden.file);
    assert!(
        body.contains(&named) && body.contains(forbidden.control),
        "{body}"
    );
    let invoked = invoke_identity(addr, "/invocations");
    assert_eq!(invoked.status, 503, "{}", invoked.text());
    assert!(invoked.text().contains(&named), "{}", invoked.text());
    // Nothing of it loaded: the core never saw the model, and no python stub runs.
    let log = std::fs::read_to_string(running.log()).unwrap();
    assert!(
        !log.contains("successfully loaded"),
        "the core loaded something:\n{log}"
    );
    assert!(stub_children(running.0.id()).is_empty());
    // The endpoint still answers, the same truth.
    assert_eq!(get(addr, "/ping").status, 400);
    assert!(running.0.try_wait().unwrap().is_none(), "trident exited");
}

#[test]
fn a_single_model_artifact_a_control_forbids_is_not_loaded_and_ping_says_why() {
    std::thread::scope(|scope| {
        for forbidden in FORBIDDEN {
            scope.spawn(|| single_model_refusal("native_identity_fp32", forbidden));
        }
        // A python backend model (its model.py the finding) never starts a stub.
        scope.spawn(|| {
            single_model_refusal(
                "identity_fp32",
                &Forbidden {
                    file: "config.pbtxt",
                    bytes: b"backend: \"python\"\nmax_batch_size: 0\n",
                    control: "DISALLOW_CUSTOM_INFERENCE_SCRIPTS",
                },
            )
        });
    });
}

/// The worked example of docs/secure-mode.md: the Python CSV adapter, signed with
/// the platform's key, on a native model, under all five controls.
#[test]
fn a_signed_python_plugin_adapts_requests_to_a_native_model_under_all_five_controls() {
    let repository = tempfile::tempdir().unwrap();
    common::copy_model("native_identity_fp32", repository.path(), "m");
    let plugins = tempfile::tempdir().unwrap();
    let wasm = plugins.path().join("csv_request.wasm");
    std::fs::copy(
        common::plugins::python_guest("plugins/python/csv_request", "request-adapter-plugin"),
        &wasm,
    )
    .unwrap();
    let bytes = std::fs::read(&wasm).unwrap();
    let digest = trident::plugins::platform::loading::sha256_hex(&bytes);
    let manifest = plugins.path().join("plugins.toml");
    let write_manifest = |secret: Option<&str>, extra: &str| {
        let signature = secret
            .map(|s| {
                format!(
                    "signature = \"{}\"\n",
                    trident::plugins::platform::signing::sign(&bytes, s).unwrap()
                )
            })
            .unwrap_or_default();
        write(
            &manifest,
            format!(
                "[plugins.csv]\npath = \"csv_request.wasm\"\nsha256 = \"{digest}\"\n{signature}\
                 memory_limit_mb = 128\ntime_limit_ms = 1000\ncontent_types = [\"text/csv\"]\n{extra}\n\
                 [models.\"*\"]\nrequest = \"csv\"\n"
            )
            .as_bytes(),
        );
    };
    let platform_key = trident::plugins::platform::signing::public_key(PLATFORM_SECRET).unwrap();
    let mut env = secure_env(repository.path());
    env.push(("TRIDENT_PLUGIN_TRUSTED_KEYS", OsStr::new(&platform_key)));
    env.push(("SAGEMAKER_TRITON_PLUGINS", manifest.as_os_str()));
    let refused = |env: &[(&str, &OsStr)], expected: &str| {
        let output = trident(env)
            .arg("serve")
            .arg("--model-repository")
            .arg(repository.path())
            .args(["--bind", "127.0.0.1", "--port", "0"])
            .output()
            .unwrap();
        let printed = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(1), "{printed}");
        assert!(
            printed.contains(expected),
            "expected '{expected}' in {printed}"
        );
    };
    // Unsigned, signed by another key (which the manifest itself trusts), over the ceiling.
    write_manifest(None, "");
    refused(&env, "is not signed");
    let other_key = trident::plugins::platform::signing::public_key(OTHER_SECRET).unwrap();
    write_manifest(Some(OTHER_SECRET), "");
    let text = std::fs::read_to_string(&manifest).unwrap();
    write(
        &manifest,
        format!("require_signatures = true\ntrusted_keys = [\"{other_key}\"]\n{text}").as_bytes(),
    );
    refused(&env, "or by a key not in trusted_keys");
    write_manifest(Some(PLATFORM_SECRET), "");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("memory_limit_mb = 128", "memory_limit_mb = 512");
    write(&manifest, text.as_bytes());
    refused(
        &env,
        "memory_limit_mb = 512 is over Secure Mode's ceiling of 128",
    );

    // With TRIDENT_PLUGIN_REQUIRE_CASES, a plugin without golden cases is refused, and so is
    // one whose case fails; the one that passes its cases (signed with them) serves.
    env.push(("TRIDENT_PLUGIN_REQUIRE_CASES", OsStr::new("true")));
    write_manifest(Some(PLATFORM_SECRET), "");
    refused(
        &env,
        "carries no golden cases, and this endpoint requires them",
    );
    let with_cases = |last: u32| {
        let cases = format!(
            "[[case]]\nname = \"two rows\"\ncontent_type = \"text/csv\"\nbody = \"1,2\\n3,4\\n\"\n\
             expect = {{ inputs = [{{ shape = [2, 2], data = [1, 2, 3, {last}] }}] }}\n"
        );
        write(&plugins.path().join("csv.cases.toml"), cases.as_bytes());
        let sha = trident::plugins::platform::loading::sha256_hex(cases.as_bytes());
        let message = trident::plugins::platform::signing::signed_message(&bytes, [], Some(&sha));
        let signature =
            trident::plugins::platform::signing::sign(&message, PLATFORM_SECRET).unwrap();
        write_manifest(
            None,
            &format!(
                "signature = \"{signature}\"\ncases = {{ path = \"csv.cases.toml\", sha256 = \"{sha}\" }}"
            ),
        );
    };
    with_cases(5);
    refused(
        &env,
        "plugin 'csv': golden case 'two rows' fails: inputs[0].data[3]: expected 5, got 4.0",
    );
    with_cases(4);
    let (_running, addr) = serve_ready_with(trident(&env), repository.path(), &[]);
    let response = request(
        addr,
        "POST",
        "/invocations",
        &[("Content-Type", "text/csv")],
        b"1,2\n3,4\n",
    );
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(
        response.json()["outputs"][0]["data"],
        json!([1.0, 2.0, 3.0, 4.0])
    );
    assert_eq!(get(addr, "/ping").status, 200);
}

/// A multi-model endpoint with its own folders and `env`; the models root.
fn serve_multi_model(env: &[(&str, &OsStr)]) -> (Running, SocketAddr, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let (running, addr) = serve_multi_model_in(root.path(), env);
    (running, addr, root)
}

/// [`serve_multi_model`] with `root` as its models root.
fn serve_multi_model_in(root: &Path, env: &[(&str, &OsStr)]) -> (Running, SocketAddr) {
    let repository = tempfile::tempdir().unwrap();
    let mut env = env.to_vec();
    env.push(("SAGEMAKER_MULTI_MODEL", OsStr::new("true")));
    let args = [
        OsStr::new("--models-root"),
        root.as_os_str(),
        OsStr::new("--multi-model-repository"),
        repository.path().as_os_str(),
    ];
    let (running, addr) = serve_ready_with(trident(&env), repository.path(), &args);
    std::mem::forget(repository);
    (running, addr)
}

fn load(addr: SocketAddr, name: &str, url: &Path) -> HttpResponse {
    let body = json!({"model_name": name, "url": url}).to_string();
    request(addr, "POST", "/models", &[], body.as_bytes())
}

/// How a refusal names `file` of the artifact at `url`.
fn inside(url: &Path, file: &Path) -> String {
    Path::new("<artifact>")
        .join(file.strip_prefix(url).unwrap())
        .display()
        .to_string()
}

fn listed(addr: SocketAddr) -> Vec<String> {
    let list = get(addr, "/models").json();
    list["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["modelName"].as_str().unwrap().to_owned())
        .collect()
}

/// The image's own backend library, to plant in an artifact under another backend's name.
fn backend_library() -> PathBuf {
    let home = common::triton()
        .home()
        .expect("a Triton home")
        .to_path_buf();
    home.join("backends/trident/libtriton_trident.so")
}

/// An artifact at `<root>/<name>/model` holding the native identity model whose backend is
/// `evil`, served by a copy of the image's own backend library inside the model's folder.
fn evil_backend_artifact(root: &Path, name: &str) -> PathBuf {
    let url = root.join(name).join("model");
    common::copy_model("native_identity_fp32", &url, "evil");
    let config = url.join("evil/config.pbtxt");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("backend: \"trident\"", "backend: \"evil\"");
    std::fs::write(&config, text).unwrap();
    std::fs::copy(backend_library(), url.join("evil/libtriton_evil.so")).unwrap();
    url
}

#[test]
fn multi_model_loads_of_forbidden_artifacts_are_refused_and_the_endpoint_serves() {
    let channel = tempfile::tempdir().unwrap();
    let (_running, addr, root) = serve_multi_model(&secure_env(channel.path()));
    let mut refusals = Vec::new();
    for (i, forbidden) in FORBIDDEN.iter().enumerate() {
        let url = root.path().join(format!("f{i}")).join("model");
        common::copy_model("native_identity_fp32", &url, "m");
        write(&url.join("m").join(forbidden.file), forbidden.bytes);
        refusals.push((
            format!("f{i}"),
            url.clone(),
            url.join("m").join(forbidden.file),
            forbidden.control,
        ));
    }
    let mut extra = |name: &str, url: PathBuf, file: PathBuf, control: &'static str| {
        refusals.push((name.to_owned(), url, file, control));
    };
    // A python model, an execution environment, a TorchScript model, a backend library of its
    // own, a link out of the artifact.
    let python = root.path().join("python/model");
    common::copy_model("identity_fp32", &python, "p");
    extra(
        "python",
        python.clone(),
        python.join("p/1/model.py"),
        "DISALLOW_CUSTOM_INFERENCE_SCRIPTS",
    );
    let env = root.path().join("env/model");
    common::copy_model("native_identity_fp32", &env, "e");
    let config = env.join("e/config.pbtxt");
    let text = std::fs::read_to_string(&config).unwrap()
        + "parameters { key: \"EXECUTION_ENV_PATH\" value: { string_value: \"$$TRITON_MODEL_DIRECTORY/env.tar.gz\" } }\n";
    std::fs::write(&config, text).unwrap();
    extra(
        "env",
        env.clone(),
        config,
        "DISALLOW_CUSTOM_INFERENCE_SCRIPTS",
    );
    let torch = root.path().join("torch/model");
    write(
        &torch.join("t/config.pbtxt"),
        b"platform: \"pytorch_libtorch\"\nmax_batch_size: 0\n",
    );
    write(&torch.join("t/1/model.ts"), b"not really");
    // The platform states the pytorch backend, which this image lacks: the scripts control
    // refuses that before the pickle control's TorchScript rule (a unit test's case).
    extra(
        "torch",
        torch.clone(),
        torch.join("t/config.pbtxt"),
        "DISALLOW_CUSTOM_INFERENCE_SCRIPTS",
    );
    let evil = evil_backend_artifact(root.path(), "evil");
    extra(
        "evil",
        evil.clone(),
        evil.join("evil/config.pbtxt"),
        "DISALLOW_CUSTOM_INFERENCE_SCRIPTS",
    );
    let link = root.path().join("link/model");
    common::copy_model("native_identity_fp32", &link, "l");
    std::os::unix::fs::symlink("/etc/passwd", link.join("l/1.onnx")).unwrap();
    extra(
        "link",
        link.clone(),
        link.join("l/1.onnx"),
        "DISALLOW_CUSTOM_INFERENCE_SCRIPTS",
    );

    for (name, url, file, control) in &refusals {
        let response = load(addr, name, url);
        let text = response.text();
        assert_eq!(response.status, 400, "{name}: {text}");
        assert!(
            text.contains(&inside(url, file)) && text.contains(control),
            "{name}: {text}"
        );
        // The endpoint serves on: nothing listed, and its health unchanged.
        assert!(listed(addr).is_empty(), "{name} was listed");
        assert_eq!(get(addr, "/ping").status, 200, "after {name}");
    }
    // Plugins an artifact brings are held to the platform's keys too: none are set here.
    let adapted = root.path().join("adapted/model");
    common::copy_model("native_identity_fp32", &adapted, "a");
    std::fs::copy(
        common::plugins::guest("csv_request"),
        adapted.join("a/csv_request.wasm"),
    )
    .unwrap();
    let manifest = format!(
        "[plugins.csv]\npath = \"csv_request.wasm\"\nsha256 = \"{}\"\n[models.\"*\"]\nrequest = \"csv\"\n",
        common::plugins::digest("csv_request")
    );
    write(&adapted.join("a/plugins.toml"), manifest.as_bytes());
    let response = load(addr, "adapted", &adapted);
    assert_eq!(response.status, 400, "{}", response.text());
    assert!(
        response.text().contains("is not signed"),
        "{}",
        response.text()
    );
    assert!(listed(addr).is_empty());

    let clean = root.path().join("clean/model");
    common::copy_model("native_identity_fp32", &clean, "c");
    let loaded = load(addr, "clean", &clean);
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    let invoked = invoke_identity(addr, "/models/clean/invoke");
    assert_eq!(invoked.status, 200, "{}", invoked.text());
    assert_eq!(invoked.json()["outputs"][0]["data"], json!([1.5, -2.0]));
}

#[test]
fn a_multi_model_artifact_brings_no_native_code_unless_allowed() {
    // The default: refused, naming the file and the setting; a python model still loads.
    let (_running, addr, root) = serve_multi_model(&[]);
    let evil = evil_backend_artifact(root.path(), "evil");
    let response = load(addr, "evil", &evil);
    let text = response.text();
    assert_eq!(response.status, 400, "{text}");
    assert!(
        text.contains("libtriton_evil.so") && text.contains("TRIDENT_ARTIFACT_NATIVE_CODE=refuse"),
        "{text}"
    );
    let python = root.path().join("python/model");
    common::copy_model("identity_fp32", &python, "p");
    let loaded = load(addr, "python", &python);
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    assert_eq!(invoke_identity(addr, "/models/python/invoke").status, 200);

    // Allowed: the artifact's own library is what serves it (Triton's own behaviour).
    let allow = [("TRIDENT_ARTIFACT_NATIVE_CODE", OsStr::new("allow"))];
    let (running, addr, root) = serve_multi_model(&allow);
    let evil = evil_backend_artifact(root.path(), "evil");
    let loaded = load(addr, "evil", &evil);
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    let invoked = invoke_identity(addr, "/models/evil/invoke");
    assert_eq!(invoked.status, 200, "{}", invoked.text());
    let log = std::fs::read_to_string(running.log()).unwrap();
    assert!(
        log.contains("libtriton_evil.so"),
        "the core did not log the artifact's library"
    );
}

/// Under Secure Mode with the multi-model root as the untrusted channel, one tenant's refused
/// artifact (a pickle, which SageMaker leaves on disk after the 400) refuses no other tenant:
/// not their loads, and not the restore of a restarted serving process (issue 43, case 14: the
/// restarted process found the pickle in the channel, restored 0 of 1 models and refused every
/// load from then on).
#[test]
fn one_tenants_refused_artifact_refuses_no_other_tenant_after_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let (running, addr) = serve_multi_model_in(root.path(), &secure_env(root.path()));
    let good = root.path().join("good/model");
    common::copy_model("native_identity_fp32", &good, "m");
    assert_eq!(load(addr, "good", &good).status, 200);
    let pickled = root.path().join("pickled/model");
    common::copy_model("native_identity_fp32", &pickled, "m");
    write(&pickled.join("m/1/weights.pkl"), b"\x80\x04N.");
    let refused = load(addr, "pickled", &pickled);
    assert_eq!(refused.status, 400, "{}", refused.text());
    let supervisor = running.0.id();
    let serving = common::process::serving_process(supervisor);
    assert!(common::send_signal(serving, "KILL"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    while common::process::current_serving_process(supervisor).is_none_or(|pid| pid == serving)
        || get(addr, "/ping").status != 200
    {
        assert!(std::time::Instant::now() < deadline, "not serving again");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(listed(addr), ["good"], "the restored models");
    let answer = invoke_identity(addr, "/models/good/invoke");
    assert_eq!(answer.status, 200, "{}", answer.text());
    let other = root.path().join("other/model");
    common::copy_model("native_identity_fp32", &other, "m");
    let loaded = load(addr, "other", &other);
    assert_eq!(
        loaded.status,
        200,
        "a later tenant's load: {}",
        loaded.text()
    );
    let again = load(addr, "pickled", &pickled);
    assert_eq!(again.status, 400, "{}", again.text());
    assert!(again.error().contains("weights.pkl"), "{}", again.text());
}

/// Writes an executable `#!/bin/sh` script at `path` that leaves `marker` if it ever runs.
fn script_leaving(path: &Path, marker: &Path) {
    use std::os::unix::fs::PermissionsExt;
    write(
        path,
        format!("#!/bin/sh\ntouch '{}'\n", marker.display()).as_bytes(),
    );
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `model`'s configuration at `url/<folder>` with `edit` applied.
fn edited(url: &Path, folder: &str, model: &str, edit: impl Fn(String) -> String) {
    common::copy_model(model, url, folder);
    let config = url.join(folder).join("config.pbtxt");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, edit(text)).unwrap();
}

/// Issue 44's classes, written as an attacker would, on a multi-model endpoint at its default
/// (the native-code boundary, no Secure Mode): each artifact would run code of its own (a
/// script leaving a marker), load a library or read a file outside itself, or reach another
/// tenant's model, through a route the old deny-list did not see. Each is refused naming what,
/// nothing runs, and the endpoint serves: a python model loads after them from its canonical
/// configuration.
#[test]
fn artifacts_that_would_reach_outside_themselves_are_refused_by_construction() {
    // The markers' folder is writable by the serving process (its box would stop a marker
    // otherwise): what keeps them away must be the refusal.
    let markers = tempfile::tempdir().unwrap();
    let writable = [("TRIDENT_SERVING_WRITABLE", markers.path().as_os_str())];
    let (_running, addr, root) = serve_multi_model(&writable);
    let victim = root.path().join("victim/model");
    common::copy_model("native_identity_fp32", &victim, "victim");
    assert_eq!(load(addr, "victim", &victim).status, 200);
    let mut cases: Vec<(&str, PathBuf, &str)> = Vec::new();
    // The python backend picked by the core from default_model_filename, with a stub of the
    // artifact's own (a shell script) that the python backend would run.
    let url = root.path().join("stub/model");
    write(
        &url.join("p/config.pbtxt"),
        b"max_batch_size: 0\ndefault_model_filename: \"model.py\"\n",
    );
    write(&url.join("p/1/model.txt"), b"not a model");
    script_leaving(
        &url.join("p/triton_python_backend_stub"),
        &markers.path().join("stub"),
    );
    cases.push(("stub", url, "python backend stub"));
    // The same without a stub: no backend stated, none the files name.
    let url = root.path().join("guessed/model");
    write(
        &url.join("g/config.pbtxt"),
        b"max_batch_size: 0\ndefault_model_filename: \"model.py\"\n",
    );
    write(&url.join("g/1/model.txt"), b"not a model");
    cases.push(("guessed", url, "states no backend"));
    // An execution environment named with `value` before `key`, whose activation would run.
    let url = root.path().join("env/model");
    edited(&url, "e", "identity_fp32", |config| {
        config
            + "parameters { value: { string_value: \"$$TRITON_MODEL_DIRECTORY/env.tar.gz\" } \
               key: \"EXECUTION_ENV_PATH\" }\n"
    });
    let env = tempfile::tempdir().unwrap();
    script_leaving(
        &env.path().join("bin/activate"),
        &markers.path().join("env"),
    );
    let tarred = Command::new("tar")
        .arg("-czf")
        .arg(url.join("e/env.tar.gz"))
        .arg("-C")
        .arg(env.path())
        .arg("bin")
        .status()
        .unwrap();
    assert!(tarred.success());
    cases.push(("env", url, "EXECUTION_ENV_PATH"));
    // A repository agent named with `../`.
    let url = root.path().join("agent/model");
    edited(&url, "a", "native_identity_fp32", |config| {
        config + "model_repository_agents { agents [ { name: \"../../../../tmp/agent\" } ] }\n"
    });
    cases.push(("agent", url, "repository agents"));
    // Labels read from outside the artifact (the process's environment, as classification
    // strings).
    let url = root.path().join("labels/model");
    edited(&url, "l", "native_identity_fp32", |config| {
        config.replace(
            "dims: [ -1, -1 ] } ]\ninstance",
            "dims: [ -1, -1 ], label_filename: \"../../../../../../proc/self/environ\" } ]\ninstance",
        )
    });
    cases.push(("labels", url, "label_filename"));
    // An ensemble over another tenant's model.
    let url = root.path().join("ensemble/model");
    write(
        &url.join("ens/config.pbtxt"),
        br#"platform: "ensemble"
max_batch_size: 0
input [ { name: "IN", data_type: TYPE_FP32, dims: [ -1, -1 ] } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ -1, -1 ] } ]
ensemble_scheduling { step [ { model_name: "victim", model_version: -1,
  input_map { key: "INPUT0" value: "IN" } output_map { key: "OUTPUT0" value: "OUT" } } ] }
"#,
    );
    std::fs::create_dir_all(url.join("ens/1")).unwrap();
    cases.push(("ensemble", url, "not a model of the artifact"));

    for (name, url, what) in &cases {
        let response = load(addr, name, url);
        let text = response.text();
        assert_eq!(response.status, 400, "{name}: {text}");
        assert!(text.contains(what), "{name}: {text}");
        assert_eq!(listed(addr), ["victim"], "after {name}");
        assert_eq!(get(addr, "/ping").status, 200, "after {name}");
    }
    let left: Vec<_> = std::fs::read_dir(markers.path())
        .unwrap()
        .flatten()
        .collect();
    assert!(left.is_empty(), "an artifact's code ran: {left:?}");
    // A python model loads from the configuration trident wrote, and serves.
    let python = root.path().join("python/model");
    common::copy_model("identity_fp32", &python, "p");
    let loaded = load(addr, "python", &python);
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    let invoked = invoke_identity(addr, "/models/python/invoke");
    assert_eq!(invoked.status, 200, "{}", invoked.text());
    assert_eq!(invoke_identity(addr, "/models/victim/invoke").status, 200);
}

/// What the old checker refused but the core reads (issue 44's false refusals) loads under
/// Secure Mode's five controls: a configuration with a Latin-1 comment and a `\u00e9` escape, a
/// TensorFlow `saved_model.pbtxt` among the files, a folder of notes beside the model. The
/// core reads the private copy, with the configuration trident wrote; the artifact's own file
/// is left as it was (never written through a hard link), and an unload removes the copy.
#[test]
fn legitimate_artifacts_load_from_their_checked_private_copy() {
    let channel = tempfile::tempdir().unwrap();
    let staging = tempfile::tempdir().unwrap();
    let mut env = secure_env(channel.path());
    env.push(("TRIDENT_ARTIFACT_STAGING_DIR", staging.path().as_os_str()));
    let (_running, addr, root) = serve_multi_model(&env);
    let url = root.path().join("tenant/model");
    common::copy_model("native_identity_fp32", &url, "m");
    let config = url.join("m/config.pbtxt");
    let mut text = b"# caf\xe9 au lait: a Latin-1 comment\n".to_vec();
    text.extend(std::fs::read(&config).unwrap());
    text.extend(b"parameters { key: \"note\" value: { string_value: \"caf\\u00e9\" } }\n");
    std::fs::write(&config, text).unwrap();
    write(
        &url.join("m/1/saved_model.pbtxt"),
        b"saved_model_schema_version: 1\nmeta_graphs { graph_def { node { name: \"x\" op: \"Const\" } } }\n",
    );
    write(
        &url.join("m/notes/README.txt"),
        b"how this model was trained",
    );
    let loaded = load(addr, "tenant", &url);
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    let invoked = invoke_identity(addr, "/models/tenant/invoke");
    assert_eq!(invoked.status, 200, "{}", invoked.text());
    assert_eq!(invoked.json()["outputs"][0]["data"], json!([1.5, -2.0]));
    let trees = || -> Vec<PathBuf> {
        std::fs::read_dir(staging.path())
            .unwrap()
            .flatten()
            .flat_map(|process| std::fs::read_dir(process.path()).unwrap().flatten())
            // The serving process's empty working folder is no tree.
            .filter(|tree| tree.file_name() != "work")
            .map(|tree| tree.path())
            .collect()
    };
    let made = trees();
    assert_eq!(made.len(), 1, "{made:?}");
    let written = std::fs::read_to_string(made[0].join("m/config.pbtxt")).unwrap();
    assert!(written.contains("backend: \"trident\""), "{written}");
    assert!(written.contains("caf\u{e9}"), "{written}");
    assert!(
        !written.contains("Latin-1"),
        "comments are not carried over: {written}"
    );
    let own = std::fs::read(&config).unwrap();
    assert!(
        own.starts_with(b"# caf\xe9 au lait"),
        "the artifact's own file changed"
    );
    let unloaded = request(addr, "DELETE", "/models/tenant", &[], b"");
    assert_eq!(unloaded.status, 200, "{}", unloaded.text());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !trees().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the private copy stayed: {:?}",
            trees()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Four artifacts whose model hangs in its initialisation (a python model sleeping for an
/// hour, outside Secure Mode) leave a fifth load working (issue 44: they held the core's four
/// load threads for good, and every later load answered 504 while `/ping` said 200): each is
/// answered 504 at its time-out, its process is ended, and a native model loads and serves
/// meanwhile and after.
#[test]
fn four_hung_loads_leave_a_fifth_working() {
    let timeout = [("TRIDENT_MODEL_LOAD_TIMEOUT_SECS", OsStr::new("4"))];
    let (running, addr, root) = serve_multi_model(&timeout);
    let hung: Vec<PathBuf> = (0..4)
        .map(|i| {
            let url = root.path().join(format!("hung{i}/model"));
            common::copy_model("slow_init", &url, "h");
            let script = url.join("h/1/model.py");
            let text = std::fs::read_to_string(&script).unwrap();
            std::fs::write(&script, text.replace("time.sleep(6)", "time.sleep(3600)")).unwrap();
            url
        })
        .collect();
    let started = std::time::Instant::now();
    let answers: Vec<u16> = std::thread::scope(|scope| {
        let loads: Vec<_> = hung
            .iter()
            .enumerate()
            .map(|(i, url)| scope.spawn(move || load(addr, &format!("hung{i}"), url).status))
            .collect();
        // A fifth load while the four hang.
        std::thread::sleep(std::time::Duration::from_secs(1));
        let fifth = root.path().join("fifth/model");
        common::copy_model("native_identity_fp32", &fifth, "m");
        let loaded = load(addr, "fifth", &fifth);
        assert_eq!(loaded.status, 200, "{}", loaded.text());
        let invoked = invoke_identity(addr, "/models/fifth/invoke");
        assert_eq!(invoked.status, 200, "{}", invoked.text());
        loads.into_iter().map(|l| l.join().unwrap()).collect()
    });
    assert_eq!(answers, [504; 4]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    // Their processes are ended, the loads undone, the names free; the endpoint serves.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !stub_children(common::process::serving_process(running.0.id())).is_empty()
        || (0..4).any(|i| get(addr, &format!("/models/hung{i}")).status != 404)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the hung loads were not ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(listed(addr), ["fifth"]);
    let after = root.path().join("after/model");
    common::copy_model("native_identity_fp32", &after, "m");
    assert_eq!(load(addr, "after", &after).status, 200);
    assert_eq!(get(addr, "/ping").status, 200);
}

/// A shared library whose constructor writes `marker`, compiled with the system's C compiler.
fn library_leaving(path: &Path, marker: &Path) {
    let source = tempfile::Builder::new().suffix(".c").tempfile().unwrap();
    std::fs::write(
        source.path(),
        format!(
            "#include <stdio.h>\n__attribute__((constructor)) static void planted(void) {{\n\
             FILE* f = fopen(\"{}\", \"w\"); if (f) {{ fputs(\"ran\", f); fclose(f); }} }}\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(path)
        .arg(source.path())
        .status()
        .expect("a C compiler (cc)");
    assert!(built.success());
}

/// Issue 56's native-code routes of the core itself, on a multi-model endpoint at its default:
/// a custom batching library beside a native model's configuration (the core `dlopen`s
/// `batchstrategy.so` into the serving process), native code under another name, and a clean
/// model naming another artifact's library in `TRITON_BATCH_STRATEGY_PATH` relative to the
/// working folder. Each is refused naming what it is, the library's constructor never runs, and
/// the endpoint serves; with the boundary off, the first one's constructor does run (what the
/// refusal stops).
#[test]
fn native_code_the_core_would_load_by_name_or_parameter_is_refused() {
    // Writable by the serving process, whose box would stop a marker otherwise.
    let markers = tempfile::tempdir().unwrap();
    let writable = [("TRIDENT_SERVING_WRITABLE", markers.path().as_os_str())];
    let (_running, addr, root) = serve_multi_model(&writable);
    let strategy = root.path().join("strategy/model");
    common::copy_model("native_identity_fp32", &strategy, "s");
    library_leaving(
        &strategy.join("s/batchstrategy.so"),
        &markers.path().join("strategy"),
    );
    let renamed = root.path().join("renamed/model");
    common::copy_model("native_identity_fp32", &renamed, "r");
    library_leaving(
        &renamed.join("r/1/weights.dat"),
        &markers.path().join("renamed"),
    );
    // The other artifact's library, named relative to the working folder the core resolves
    // against (and to `/`, the image's).
    let planted = strategy.join("s/batchstrategy.so").canonicalize().unwrap();
    let relative = planted.strip_prefix("/").unwrap().display().to_string();
    let named = root.path().join("named/model");
    edited(&named, "n", "native_identity_fp32", |config| {
        config
            + &format!(
                "parameters {{ key: \"TRITON_BATCH_STRATEGY_PATH\" value: {{ string_value: \"{relative}\" }} }}\n"
            )
    });
    let cwd_named = root.path().join("cwd/model");
    edited(&cwd_named, "c", "native_identity_fp32", |config| {
        config
            + &format!(
                "parameters {{ key: \"library\" value: {{ string_value: \"{relative}\" }} }}\n"
            )
    });
    for (name, url, what) in [
        ("strategy", &strategy, "custom batching library"),
        ("renamed", &renamed, "ELF"),
        ("named", &named, "TRITON_BATCH_STRATEGY_PATH"),
        ("cwd", &cwd_named, "names what exists under /"),
    ] {
        let response = load(addr, name, url);
        let text = response.text();
        assert_eq!(response.status, 400, "{name}: {text}");
        assert!(text.contains(what), "{name}: {text}");
        assert!(
            !text.contains(&root.path().display().to_string()),
            "{name}: the refusal names the models root: {text}"
        );
    }
    assert!(!markers.path().join("strategy").exists());
    assert!(!markers.path().join("renamed").exists());
    let clean = root.path().join("clean/model");
    common::copy_model("native_identity_fp32", &clean, "clean");
    assert_eq!(load(addr, "clean", &clean).status, 200);
    assert_eq!(invoke_identity(addr, "/models/clean/invoke").status, 200);
    assert_eq!(get(addr, "/ping").status, 200);

    // Without the boundary the core loads the library into the serving process.
    let allow = [
        ("TRIDENT_ARTIFACT_NATIVE_CODE", OsStr::new("allow")),
        writable[0],
    ];
    let (_allowed, allowed_addr) = serve_multi_model_in(root.path(), &allow);
    let _ = load(allowed_addr, "strategy", &strategy);
    assert!(
        markers.path().join("strategy").exists(),
        "the core did not load batchstrategy.so: the refusal above proves nothing"
    );
}

/// A python model that doubles INPUT0 (FP32) into OUTPUT0, at `folder`.
fn doubling_model(folder: &Path) {
    write(
        &folder.join("config.pbtxt"),
        b"backend: \"python\"\nmax_batch_size: 0\n\
          input [ { name: \"INPUT0\", data_type: TYPE_FP32, dims: [ -1, -1 ] } ]\n\
          output [ { name: \"OUTPUT0\", data_type: TYPE_FP32, dims: [ -1, -1 ] } ]\n",
    );
    write(
        &folder.join("1/model.py"),
        b"import triton_python_backend_utils as pb_utils\n\
          class TritonPythonModel:\n\
          \x20   def execute(self, requests):\n\
          \x20       return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor('OUTPUT0', \
          pb_utils.get_input_tensor_by_name(r, 'INPUT0').as_numpy() * 2)]) for r in requests]\n",
    );
}

/// An ensemble at `folder` of one step over `step` (INPUT0 → OUTPUT0 as IN → OUT).
fn ensemble_over(folder: &Path, step: &str) {
    write(
        &folder.join("config.pbtxt"),
        format!(
            "platform: \"ensemble\"\nmax_batch_size: 0\n\
             input [ {{ name: \"IN\", data_type: TYPE_FP32, dims: [ -1, -1 ] }} ]\n\
             output [ {{ name: \"OUT\", data_type: TYPE_FP32, dims: [ -1, -1 ] }} ]\n\
             ensemble_scheduling {{ step [ {{ model_name: \"{step}\", model_version: -1,\n\
             input_map {{ key: \"INPUT0\" value: \"IN\" }} output_map {{ key: \"OUTPUT0\" value: \"OUT\" }} }} ] }}\n"
        )
        .as_bytes(),
    );
    std::fs::create_dir_all(folder.join("1")).unwrap();
}

fn ensemble_out(addr: SocketAddr, name: &str) -> Vec<f64> {
    let body =
        json!({"inputs": [{"name": "IN", "datatype": "FP32", "shape": [1, 2], "data": [1.5, -2]}]});
    let response = post_json(addr, &format!("/models/{name}/invoke"), &body);
    assert_eq!(response.status, 200, "{name}: {}", response.text());
    response.json()["outputs"][0]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// Issue 56, case 4: the core resolves ensemble steps by global name, so every model folder of
/// a multi-model artifact is served under a name private to its load. A victim's ensemble over
/// its own `pre` runs its own `pre`, though another tenant loaded a model as `pre` first; an
/// attacker's ensemble over a decoy folder named like the victim's model runs the decoy, never
/// the victim's model; and neither private name shows in the list.
#[test]
fn ensemble_steps_resolve_only_within_their_own_load() {
    let (_running, addr, root) = serve_multi_model(&[]);
    // Another tenant, loaded first as `pre`: it doubles.
    let squatter = root.path().join("squatter/model");
    doubling_model(&squatter.join("pre"));
    assert_eq!(load(addr, "pre", &squatter).status, 200);
    // The victim: an ensemble over its own identity `pre`, and a plain model `secret`.
    let victim = root.path().join("victim/model");
    ensemble_over(&victim.join("ens"), "pre");
    common::copy_model("native_identity_fp32", &victim, "pre");
    let loaded = load(addr, "victim", &victim);
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    assert_eq!(ensemble_out(addr, "victim"), [1.5, -2.0]);
    let secret = root.path().join("secret/model");
    common::copy_model("native_identity_fp32", &secret, "secret");
    assert_eq!(load(addr, "secret", &secret).status, 200);
    // The attacker: an ensemble over a decoy folder named like the victim's model.
    let attacker = root.path().join("attacker/model");
    ensemble_over(&attacker.join("ens"), "secret");
    doubling_model(&attacker.join("secret"));
    let loaded = load(addr, "attacker", &attacker);
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    assert_eq!(ensemble_out(addr, "attacker"), [3.0, -4.0]);
    // The squatter still doubles; the victim's ensemble still runs its own step.
    assert_eq!(invoke_identity(addr, "/models/secret/invoke").status, 200);
    assert_eq!(ensemble_out(addr, "victim"), [1.5, -2.0]);
    let mut names = listed(addr);
    names.sort();
    assert_eq!(names, ["attacker", "pre", "secret", "victim"]);
    // Unloading the victim leaves the others serving.
    let unloaded = request(addr, "DELETE", "/models/victim", &[], b"");
    assert_eq!(unloaded.status, 200, "{}", unloaded.text());
    assert_eq!(ensemble_out(addr, "attacker"), [3.0, -4.0]);
    assert_eq!(get(addr, "/ping").status, 200);
}

/// Issue 56, case 8: layouts the core loads and serves that Secure Mode refused. Each is first
/// served by the core with no gate (the native-code boundary off, no Secure Mode), then under all
/// five controls: a warm-up sample of raw tensor bytes, the files `huggingface-cli download
/// --local-dir` leaves, and a configuration with a vertical tab, a surrogate pair and `\400`.
#[test]
fn layouts_the_core_serves_load_under_secure_mode() {
    let layouts = tempfile::tempdir().unwrap();
    let warmup = layouts.path().join("warmup/model");
    edited(&warmup, "w", "native_identity_fp32", |config| {
        config
            + "model_warmup [ { name: \"raw\" batch_size: 1 inputs { key: \"INPUT0\" value: { \
               data_type: TYPE_FP32 dims: [ 1, 2 ] input_data_file: \"raw_in\" } } } ]\n"
    });
    let floats: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|f| f.to_le_bytes())
        .collect();
    write(&warmup.join("w/warmup/raw_in"), &floats);
    let hub = layouts.path().join("hub/model");
    common::copy_model("native_identity_fp32", &hub, "h");
    write(
        &hub.join("h/.cache/huggingface/download/1/model.onnx.metadata"),
        b"0123abcd\n\"etag\"\n1733480000.0\n",
    );
    write(
        &hub.join("h/.cache/huggingface/download/1/model.onnx.lock"),
        b"",
    );
    write(&hub.join("h/.cache/huggingface/.gitignore"), b"*\n");
    let escapes = layouts.path().join("escapes/model");
    edited(&escapes, "e", "native_identity_fp32", |config| {
        config.replace("max_batch_size: 0\n", "max_batch_size: 0\x0b\n")
            + "parameters { key: \"note\" value: { string_value: \"\\ud83d\\ude00 \\400\" } }\n"
    });
    let cases = [("warmup", &warmup), ("hub", &hub), ("escapes", &escapes)];

    let channel = tempfile::tempdir().unwrap();
    let allow = vec![("TRIDENT_ARTIFACT_NATIVE_CODE", OsStr::new("allow"))];
    for (how, env) in [
        ("without a gate", allow),
        ("under Secure Mode", secure_env(channel.path())),
    ] {
        let (_running, addr) = serve_multi_model_in(layouts.path(), &env);
        for (name, url) in cases {
            let loaded = load(addr, name, url);
            assert_eq!(loaded.status, 200, "{name} {how}: {}", loaded.text());
            let invoked = invoke_identity(addr, &format!("/models/{name}/invoke"));
            assert_eq!(invoked.status, 200, "{name} {how}: {}", invoked.text());
        }
    }
}

/// Issue 56, case 5: an execution environment whose links are each inside on their own, where
/// the native-code boundary lets environments through: a chain of links that ends above the
/// folder, and a member written through a link. Each artifact is refused naming its archive and
/// the link; a clean environment's refusal-free check is the unit tests'.
#[test]
fn environments_written_through_their_own_links_are_refused() {
    let allow = [("TRIDENT_ARTIFACT_NATIVE_CODE", OsStr::new("allow"))];
    let (_running, addr, root) = serve_multi_model(&allow);
    let tar = |dir: &Path, args: &[&str]| {
        let status = Command::new("tar")
            .current_dir(dir)
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "tar {args:?}");
    };
    let with_environment = |name: &str, build: &dyn Fn(&Path, &Path)| {
        let url = root.path().join(name).join("model");
        edited(&url, "p", "identity_fp32", |config| {
            config
                + "parameters { key: \"EXECUTION_ENV_PATH\" value: { string_value: \
                   \"$$TRITON_MODEL_DIRECTORY/env.tar.gz\" } }\n"
        });
        let work = tempfile::tempdir().unwrap();
        build(work.path(), &url.join("p/env.tar.gz"));
        url
    };
    // d/s -> .. and d/t -> s/..: each inside when read alone; t ends above the folder.
    let chain = with_environment("chain", &|work, archive| {
        std::fs::create_dir(work.join("d")).unwrap();
        std::os::unix::fs::symlink("..", work.join("d/s")).unwrap();
        std::os::unix::fs::symlink("s/..", work.join("d/t")).unwrap();
        tar(work, &["-czf", archive.to_str().unwrap(), "d"]);
    });
    // l -> real, then a member l/escape appended through it.
    let through = with_environment("through", &|work, archive| {
        std::fs::create_dir(work.join("real")).unwrap();
        std::fs::write(work.join("real/escape"), b"x").unwrap();
        std::os::unix::fs::symlink("real", work.join("l")).unwrap();
        let plain = work.join("env.tar");
        tar(work, &["-cf", plain.to_str().unwrap(), "l"]);
        tar(work, &["-rf", plain.to_str().unwrap(), "l/escape"]);
        let gz = Command::new("gzip")
            .args(["-c"])
            .arg(&plain)
            .output()
            .unwrap();
        std::fs::write(archive, gz.stdout).unwrap();
    });
    for (name, url) in [("chain", &chain), ("through", &through)] {
        let response = load(addr, name, url);
        let text = response.text();
        assert_eq!(response.status, 400, "{name}: {text}");
        assert!(
            text.contains("env.tar.gz") && text.contains("link"),
            "{name}: {text}"
        );
    }
    assert_eq!(get(addr, "/ping").status, 200);
}

/// An execution environment is unpacked by trident into the model's private tree, and the
/// python backend is pointed at that folder (it uses a folder as it is): the model runs in it
/// (its activate script sets the environment's home, the model reads its files), the home is the
/// folder trident made, not one the backend unpacked into, and the artifact is untouched.
#[test]
fn execution_environments_are_unpacked_by_trident_and_the_model_runs_in_them() {
    let allow = [("TRIDENT_ARTIFACT_NATIVE_CODE", OsStr::new("allow"))];
    let (_running, addr, root) = serve_multi_model(&allow);
    let url = root.path().join("envmodel/model");
    write(
        &url.join("m/config.pbtxt"),
        b"backend: \"python\"\nmax_batch_size: 0\n\
          input [ { name: \"IN\", data_type: TYPE_STRING, dims: [ 1 ] } ]\n\
          output [ { name: \"OUT\", data_type: TYPE_STRING, dims: [ 1 ] } ]\n\
          parameters { key: \"EXECUTION_ENV_PATH\" value: { string_value: \
          \"$$TRITON_MODEL_DIRECTORY/env.tar.gz\" } }\n",
    );
    write(
        &url.join("m/1/model.py"),
        b"import os\nimport numpy as np\nimport triton_python_backend_utils as pb_utils\n\n\
          class TritonPythonModel:\n    def execute(self, requests):\n\
          \x20       home = os.environ.get('ENV_HOME', '')\n\
          \x20       text = home + '|' + open(home + '/share/value.txt').read()\n\
          \x20       out = pb_utils.Tensor('OUT', np.array([text.encode()], dtype=np.object_))\n\
          \x20       return [pb_utils.InferenceResponse(output_tensors=[out]) for _ in requests]\n",
    );
    let work = tempfile::tempdir().unwrap();
    write(
        &work.path().join("bin/activate"),
        b"ENV_HOME=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")/..\" && pwd)\"\nexport ENV_HOME\n",
    );
    write(
        &work.path().join("share/value.txt"),
        b"from the environment",
    );
    std::fs::create_dir_all(work.path().join("lib")).unwrap();
    let archive = url.join("m/env.tar.gz");
    let status = Command::new("tar")
        .current_dir(work.path())
        .arg("-czf")
        .arg(&archive)
        .args(["bin", "lib", "share"])
        .status()
        .unwrap();
    assert!(status.success());
    let before = std::fs::read_dir(url.join("m")).unwrap().count();

    let response = load(addr, "envmodel", &url);
    assert_eq!(response.status, 200, "{}", response.text());
    let body =
        json!({"inputs": [{"name": "IN", "datatype": "BYTES", "shape": [1], "data": ["x"]}]});
    let response = post_json(addr, "/models/envmodel/invoke", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let out = response.json()["outputs"][0]["data"][0]
        .as_str()
        .unwrap()
        .to_owned();
    let (home, value) = out.split_once('|').unwrap();
    assert_eq!(value, "from the environment");
    assert!(
        home.ends_with("/.trident-environment") && home.contains("/trident-artifacts-"),
        "the environment's home is {home}"
    );
    assert_eq!(std::fs::read_dir(url.join("m")).unwrap().count(), before);
    assert_eq!(get(addr, "/ping").status, 200);
}
