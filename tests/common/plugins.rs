//! Builds the WebAssembly guests (example plugins and hostile fixtures) from source for
//! wasm32-wasip2, once per test process.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The folder holding every built `.wasm`.
pub fn built_guests() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let target = root.join("target/plugins");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        for manifest in ["plugins/Cargo.toml", "tests/guests/Cargo.toml"] {
            let status = Command::new(&cargo)
                .args(["build", "--release", "--locked", "--target", "wasm32-wasip2"])
                .arg("--manifest-path")
                .arg(root.join(manifest))
                .arg("--target-dir")
                .arg(&target)
                // Never the test process's own standard input: see `common::command`.
                .stdin(Stdio::null())
                .status()
                .expect("run cargo to build the guests");
            assert!(status.success(), "building {manifest} for wasm32-wasip2 failed (is the target installed? rustup target add wasm32-wasip2)");
        }
        target.join("wasm32-wasip2/release")
    })
}

/// The path of a built guest, e.g. `csv_request`.
pub fn guest(name: &str) -> PathBuf {
    let path = built_guests().join(format!("{name}.wasm"));
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// The sha256 of a built guest, as the manifest pins it.
pub fn digest(name: &str) -> String {
    trident::plugins::host::sha256_hex(&std::fs::read(guest(name)).unwrap())
}

/// Builds the Python guest whose `app.py` is in `folder` (relative to the repository, e.g.
/// `plugins/python/csv_request`) for `world` with componentize-py (from the virtual environment
/// `scripts/install-guest-tools` makes), unless the built component is newer than its source, the
/// WIT and the tool (reinstalled when its pinned version changes); the path of the `.wasm`.
pub fn python_guest(folder: &str, world: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = root.join(folder);
    let out = root
        .join("target/plugins/python")
        .join(format!("{}.wasm", folder.replace('/', "_")));
    let tool = root.join("target/guest-tools/python/bin/componentize-py");
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    // `None` when an input is missing: build, and let the tool say what is wrong.
    let newest_input = [
        source.join("app.py"),
        root.join("wit/plugin.wit"),
        tool.clone(),
    ]
    .iter()
    .map(|path| modified(path))
    .collect::<Option<Vec<_>>>()
    .and_then(|times| times.into_iter().max());
    if let (Some(built), Some(input)) = (modified(&out), newest_input)
        && built > input
    {
        return out;
    }
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let status = Command::new(&tool)
        .arg("-d")
        .arg(root.join("wit"))
        .args(["-w", world, "componentize", "-p"])
        .arg(&source)
        .args(["app", "-o"])
        .arg(&out)
        .stdin(Stdio::null())
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "run {} ({e}): scripts/install-guest-tools installs it",
                tool.display()
            )
        });
    assert!(
        status.success(),
        "building the Python guest {folder} failed"
    );
    out
}
