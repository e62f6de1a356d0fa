//! Python models boxed by the kernel (src/confine/), against the real core on a multi-model
//! endpoint: a tenant's python model that tries to read another tenant's artifact and private
//! tree, plant a file in the Triton installation or the staging folder, signal or trace the
//! serving process or the other tenant's stub, or open the other tenant's shared memory is
//! stopped at each, while its own files and scratch folder work, and both tenants serve on.
//! With `TRIDENT_PYTHON_ISOLATION=off` the same probe reads the other tenant's files (what the
//! box is for); with a Triton installation whose stub is not trident's launcher, a python model
//! is refused by name under `required`.

mod common;

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use common::http_client::{HttpResponse, get, post_json, request};
use common::process::{Running, serve_ready_with};
use serde_json::{Value, json};

/// `trident serve` on a multi-model endpoint at `root`, staging its private trees in `staging`,
/// with only the variables given.
fn serve(root: &Path, staging: &Path, env: &[(&str, &OsStr)]) -> (Running, SocketAddr) {
    let repository = tempfile::tempdir().unwrap();
    let mut command = common::command(env!("CARGO_BIN_EXE_trident"));
    for (key, _) in std::env::vars() {
        if key.starts_with("SAGEMAKER_") || key.starts_with("TRIDENT_") {
            command.env_remove(key);
        }
    }
    command
        .env("RUST_LOG", "info")
        .env("SAGEMAKER_MULTI_MODEL", "true")
        .env("TRIDENT_ARTIFACT_STAGING_DIR", staging)
        .envs(env.iter().copied());
    let args = [
        OsStr::new("--models-root"),
        root.as_os_str(),
        OsStr::new("--multi-model-repository"),
        repository.path().as_os_str(),
    ];
    let started = serve_ready_with(command, repository.path(), &args);
    std::mem::forget(repository);
    started
}

fn load(addr: SocketAddr, name: &str, url: &Path) -> HttpResponse {
    let body = json!({"model_name": name, "url": url}).to_string();
    request(addr, "POST", "/models", &[], body.as_bytes())
}

/// Two tenants under `root`: `victim` (add_sub, with a secret beside it) and `prober`.
fn tenants(root: &Path) -> (PathBuf, PathBuf) {
    let victim = root.join("victim/model");
    common::copy_model("add_sub", &victim, "add_sub");
    std::fs::write(victim.join("add_sub/secret.txt"), "the victim's secret").unwrap();
    let prober = root.join("prober/model");
    common::copy_model("confinement_probe", &prober, "probe");
    (victim, prober)
}

/// What each attempt gave, from the probe model loaded as `prober`.
fn probe(addr: SocketAddr, attempts: &[(&str, String)]) -> Vec<String> {
    let attempts = serde_json::to_string(attempts).unwrap();
    let body = json!({"inputs": [{"name": "ATTEMPTS", "datatype": "BYTES", "shape": [1], "data": [attempts]}]});
    let response = post_json(addr, "/models/prober/invoke", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    let results = response.json()["outputs"][0]["data"][0]
        .as_str()
        .unwrap()
        .to_owned();
    serde_json::from_str(&results).unwrap()
}

fn add_sub_serves(addr: SocketAddr) {
    let ones: Vec<i32> = vec![1; 16];
    let body = json!({"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": ones},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": ones},
    ]});
    let response = post_json(addr, "/models/victim/invoke", &body);
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.json()["outputs"][0]["data"][0], 2);
}

/// The file named `name` somewhere under `folder`.
fn find(folder: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(folder).ok()?.flatten() {
        let path = entry.path();
        if entry.file_name() == name {
            return Some(path);
        }
        if entry.file_type().is_ok_and(|t| t.is_dir())
            && let Some(found) = find(&path, name)
        {
            return Some(found);
        }
    }
    None
}

#[test]
fn a_python_model_is_boxed_away_from_other_tenants_the_image_and_the_serving_process() {
    let root = tempfile::tempdir().unwrap();
    let staging = tempfile::tempdir().unwrap();
    let (victim, prober) = tenants(root.path());
    let (_running, addr) = serve(root.path(), staging.path(), &[]);
    for (name, url) in [("victim", &victim), ("prober", &prober)] {
        let response = load(addr, name, url);
        assert_eq!(response.status, 200, "{name}: {}", response.text());
    }
    add_sub_serves(addr);
    let victim_stub = *common::model_stub_pids("victim")
        .first()
        .expect("the victim's stub");
    let region = common::stub_shm_region(victim_stub).expect("the victim's region");
    let private_secret = find(staging.path(), "secret.txt").expect("the victim's private tree");
    let home = common::triton().home().unwrap().to_path_buf();
    let planted_home = home.join("backends/python/planted_by_a_tenant.so");
    let planted_staging = staging.path().join("planted");
    let path = |p: &Path| p.display().to_string();

    let attempts: Vec<(&str, String)> = vec![
        ("read", path(&victim.join("add_sub/secret.txt"))),
        ("read", path(&private_secret)),
        ("list", path(root.path())),
        ("list", path(staging.path())),
        ("write", path(&planted_home)),
        ("write", path(&planted_staging)),
        ("read", "/proc/parent/environ".to_owned()),
        ("read", format!("/proc/{victim_stub}/environ")),
        ("signal", "parent".to_owned()),
        ("signal", victim_stub.to_string()),
        ("ptrace", "parent".to_owned()),
        ("ptrace", victim_stub.to_string()),
        ("read", path(&region)),
        ("write", path(&region)),
        ("list", "/dev/shm".to_owned()),
    ];
    // "/proc/parent/..." is not a path the probe resolves: give it the real one.
    let serving = serving_pid("victim");
    let attempts: Vec<(&str, String)> = attempts
        .into_iter()
        .map(|(action, target)| {
            (
                action,
                target.replace("/proc/parent/", &format!("/proc/{serving}/")),
            )
        })
        .collect();
    let results = probe(addr, &attempts);
    for ((action, target), result) in attempts.iter().zip(&results) {
        assert_ne!(result, "ok", "{action} {target} was allowed");
    }
    assert!(!planted_home.exists() && !planted_staging.exists());
    let region_bytes = std::fs::metadata(&region).unwrap().len();
    assert!(region_bytes > 0);

    // What the model may do: its own files, its scratch folder, asking whether the serving
    // process lives (the stub does every second).
    let own = [
        ("read", "own-file".to_owned()),
        ("write", "scratch".to_owned()),
        ("read", "scratch".to_owned()),
        ("alive", "parent".to_owned()),
    ];
    assert_eq!(probe(addr, &own), vec!["ok"; own.len()]);

    // Both tenants serve on, and /ping is healthy.
    add_sub_serves(addr);
    assert_eq!(get(addr, "/ping").status, 200);
    let metrics = get(addr, "/metrics").text();
    assert!(
        metrics.contains("trident_python_isolation{setting=\"required\""),
        "{metrics}"
    );
}

#[test]
fn unconfined_the_same_probe_reads_another_tenant_so_the_box_is_what_stops_it() {
    let root = tempfile::tempdir().unwrap();
    let staging = tempfile::tempdir().unwrap();
    let (victim, prober) = tenants(root.path());
    let off = [("TRIDENT_PYTHON_ISOLATION", OsStr::new("off"))];
    let (_running, addr) = serve(root.path(), staging.path(), &off);
    for (name, url) in [("victim", &victim), ("prober", &prober)] {
        assert_eq!(load(addr, name, url).status, 200);
    }
    let secret = victim.join("add_sub/secret.txt").display().to_string();
    assert_eq!(probe(addr, &[("read", secret)]), vec!["ok"]);
}

#[test]
fn a_triton_installation_without_the_launcher_refuses_python_models_by_name() {
    // A Triton home of links to the real one, but for a python backend stub that is the plain
    // binary's script (as a stock installation has).
    let real = common::triton().home().unwrap().to_path_buf();
    let home = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&real).unwrap().flatten() {
        if entry.file_name() != "backends" {
            std::os::unix::fs::symlink(entry.path(), home.path().join(entry.file_name())).unwrap();
        }
    }
    let backends = home.path().join("backends");
    std::fs::create_dir_all(backends.join("python")).unwrap();
    std::os::unix::fs::symlink(real.join("backends/trident"), backends.join("trident")).unwrap();
    for entry in std::fs::read_dir(real.join("backends/python"))
        .unwrap()
        .flatten()
    {
        let name = entry.file_name();
        if name != "triton_python_backend_stub" {
            std::os::unix::fs::symlink(entry.path(), backends.join("python").join(&name)).unwrap();
        }
    }
    let stub = backends.join("python/triton_python_backend_stub");
    std::fs::write(
        &stub,
        "#!/bin/sh\nexec \"$(dirname \"$0\")/triton_python_backend_stub.bin\" \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let root = tempfile::tempdir().unwrap();
    let staging = tempfile::tempdir().unwrap();
    let (victim, _) = tenants(root.path());
    let env = [("TRITON_HOME", home.path().as_os_str())];
    let (_running, addr) = serve(root.path(), staging.path(), &env);
    let response = load(addr, "victim", &victim);
    let text = response.text();
    assert_eq!(response.status, 400, "{text}");
    assert!(
        text.contains("TRIDENT_PYTHON_ISOLATION") && text.contains("launcher"),
        "{text}"
    );
    assert_eq!(get(addr, "/ping").status, 200);
    let _: Value = get(addr, "/models").json();
}

/// The serving process's pid: the parent of the first stub of `model`.
fn serving_pid(model: &str) -> u32 {
    let stub = *common::model_stub_pids(model).first().expect("a stub");
    std::fs::read_to_string(format!("/proc/{stub}/stat"))
        .unwrap()
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

/// The serving process's own box (src/confine/serving.rs), seen through a python model that
/// runs in no box of its own (`TRIDENT_PYTHON_ISOLATION=off`): what it starts cannot plant a
/// file in the Triton installation (wherever it lies, under `/tmp` too), an artifact, the
/// temporary folder or any folder outside those the serving process writes; the private trees
/// still link the artifacts' files (no copy); the serving
/// process works in an empty folder of its own. With `TRIDENT_SERVING_ISOLATION=off` the same
/// write lands, so the box is what stops it.
#[test]
fn what_the_serving_process_starts_writes_only_where_the_serving_process_must() {
    // Nothing here is under the temporary folder, which the serving process may write.
    let outside_root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let root = tempfile::tempdir_in(outside_root).unwrap();
    let staging = tempfile::tempdir_in(outside_root).unwrap();
    let outside = tempfile::tempdir_in(outside_root).unwrap();
    let (victim, prober) = tenants(root.path());
    let off = [("TRIDENT_PYTHON_ISOLATION", OsStr::new("off"))];
    let (running, addr) = serve(root.path(), staging.path(), &off);
    for (name, url) in [("victim", &victim), ("prober", &prober)] {
        let response = load(addr, name, url);
        assert_eq!(response.status, 200, "{name}: {}", response.text());
    }
    let home = common::triton().home().unwrap().to_path_buf();
    // Named by this run, so that a file an earlier, failing run left cannot pass for one.
    let run = std::process::id();
    let planted = [
        home.join(format!("backends/python/planted_by_a_backend_{run}.so")),
        outside.path().join("planted"),
        prober.join("probe/planted"),
        staging
            .path()
            .join("..")
            .join(format!("planted_beside_staging_{run}")),
        // The temporary folder itself: only folders may be made there.
        std::env::temp_dir().join(format!("planted_by_a_backend_{run}")),
    ];
    let path = |p: &Path| p.display().to_string();
    let attempts: Vec<(&str, String)> = planted.iter().map(|p| ("write", path(p))).collect();
    let results = probe(addr, &attempts);
    for ((_, target), result) in attempts.iter().zip(&results) {
        assert_ne!(result, "ok", "writing {target} was allowed");
    }
    assert!(planted.iter().all(|p| !p.exists()));
    // What it may write: its scratch (the temporary folder), /dev/null, an existing file of its
    // own artifact (the artifact's files are the private tree's: trident's check reads them
    // before the core does, and nothing in the image writes them).
    let may = [
        ("write", "scratch".to_owned()),
        ("read", "scratch".to_owned()),
        ("write", "/dev/null".to_owned()),
    ];
    assert_eq!(probe(addr, &may), vec!["ok"; may.len()]);

    // The private tree links the artifact's files even so.
    let original = victim.join("add_sub/secret.txt");
    let private = find(staging.path(), "secret.txt").expect("the victim's private tree");
    let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
    assert_eq!(
        inode(&private),
        inode(&original),
        "{} was copied",
        private.display()
    );

    // It works in an empty folder of its own, under its staging folder.
    let serving = serving_pid("prober");
    let cwd = std::fs::read_link(format!("/proc/{serving}/cwd")).unwrap();
    assert!(cwd.starts_with(staging.path()), "{}", cwd.display());
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0);

    add_sub_serves(addr);
    assert_eq!(get(addr, "/ping").status, 200);
    let metrics = get(addr, "/metrics").text();
    assert!(
        metrics.contains("trident_serving_isolation{setting=\"best-effort\",enforced=\"full\"}")
            || metrics.contains("enforced=\"partial\""),
        "{metrics}"
    );
    drop(running);

    // Unconfined, the same write lands.
    let unconfined = [
        ("TRIDENT_PYTHON_ISOLATION", OsStr::new("off")),
        ("TRIDENT_SERVING_ISOLATION", OsStr::new("off")),
    ];
    let (_running, addr) = serve(root.path(), staging.path(), &unconfined);
    assert_eq!(load(addr, "prober", &prober).status, 200);
    let target = path(&planted[1]);
    assert_eq!(probe(addr, &[("write", target)]), vec!["ok"]);
    assert!(planted[1].exists());
}
