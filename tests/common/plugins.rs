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

/// The test key the shipped plugins are signed with here, as a platform team signs what it
/// vets (the secret of RFC 8032's first test vector).
pub const SIGNING_SECRET: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";

/// The public key of the test key, for a manifest's `trusted_keys`.
pub fn test_public_key() -> String {
    trident::plugins::platform::signing::public_key(SIGNING_SECRET).unwrap()
}

/// Signs the plugin `dir/wasm` (with `assets`, by name and file in `dir`) with the test key,
/// writing `<wasm>.sig` beside it, where trident looks for it.
pub fn sign(dir: &Path, wasm: &str, assets: &[(&str, &str)]) {
    sign_with_cases(dir, wasm, assets, None);
}

/// [`sign`], covering the cases file `dir/cases` too.
pub fn sign_with_cases(dir: &Path, wasm: &str, assets: &[(&str, &str)], cases: Option<&str>) {
    use trident::plugins::platform::loading::sha256_hex;
    let cases = cases.map(|file| sha256_hex(&std::fs::read(dir.join(file)).unwrap()));
    let bytes = std::fs::read(dir.join(wasm)).unwrap();
    let digests: Vec<(&str, String)> = assets
        .iter()
        .map(|(name, file)| (*name, sha256_hex(&std::fs::read(dir.join(file)).unwrap())))
        .collect();
    let message = trident::plugins::platform::signing::signed_message(
        &bytes,
        digests
            .iter()
            .map(|(name, digest)| (*name, digest.as_str())),
        cases.as_deref(),
    );
    let signature = trident::plugins::platform::signing::sign(&message, SIGNING_SECRET).unwrap();
    std::fs::write(dir.join(format!("{wasm}.sig")), signature).unwrap();
}

/// The path of a built guest, e.g. `csv_request`.
pub fn guest(name: &str) -> PathBuf {
    let path = built_guests().join(format!("{name}.wasm"));
    assert!(path.is_file(), "{} was not built", path.display());
    path
}

/// The sha256 of a built guest, as the manifest pins it.
pub fn digest(name: &str) -> String {
    trident::plugins::platform::loading::sha256_hex(&std::fs::read(guest(name)).unwrap())
}

/// Builds the Python guest whose `app.py` is in `folder` (relative to the repository, e.g.
/// `plugins/python/csv_request`) for `world` with componentize-py (from the virtual environment
/// `scripts/install-guest-tools` makes); the path of the `.wasm`. See [`built_from`].
pub fn python_guest(folder: &str, world: &str) -> PathBuf {
    python_guest_in(folder, "wit", world)
}

/// As [`python_guest`], for a world of the WIT package in `wit` (relative to the repository,
/// e.g. `wit/session`).
pub fn python_guest_in(folder: &str, wit: &str, world: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tool = root.join("target/guest-tools/python/bin/componentize-py");
    built_from(folder, "app.py", "python", &tool, |command, source, out| {
        command
            .arg("-d")
            .arg(root.join(wit))
            .args(["-w", world, "componentize", "-p"])
            .arg(source)
            .args(["app", "-o"])
            .arg(out);
    })
}

/// Builds the JavaScript guest whose `app.js` is in `folder` (e.g. `plugins/js/csv_request`)
/// for `world` with componentize-qjs (QuickJS; installed by `scripts/install-guest-tools`), with
/// synchronous exports (trident's hooks are plain calls, not the component model's async ABI);
/// the path of the `.wasm`. See [`built_from`].
pub fn js_guest(folder: &str, world: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tool = root.join("target/guest-tools/js/node_modules/.bin/componentize-qjs");
    built_from(folder, "app.js", "js", &tool, |command, source, out| {
        command
            .arg("--wit")
            .arg(root.join("wit"))
            .arg("--js")
            .arg(source.join("app.js"))
            .args(["--world", world, "--sync", "--output"])
            .arg(out);
    })
}

/// The component `tool` builds from `<folder>/<file>` into
/// `target/plugins/<language>/<folder with _>.wasm`, built unless it is newer than its source,
/// the WIT and the tool (reinstalled when its pinned version changes). `arguments` adds the
/// tool's arguments, given the source folder and the output path.
fn built_from(
    folder: &str,
    file: &str,
    language: &str,
    tool: &Path,
    arguments: impl FnOnce(&mut Command, &Path, &Path),
) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = root.join(folder);
    let out = root
        .join("target/plugins")
        .join(language)
        .join(format!("{}.wasm", folder.replace('/', "_")));
    let modified = |path: &Path| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    // `None` when an input is missing: build, and let the tool say what is wrong.
    let newest_input = [
        source.join(file),
        root.join("wit/plugin.wit"),
        root.join("wit/session/session.wit"),
        tool.to_owned(),
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
    let mut command = Command::new(tool);
    arguments(&mut command, &source, &out);
    let status = command.stdin(Stdio::null()).status().unwrap_or_else(|e| {
        panic!(
            "run {} ({e}): scripts/install-guest-tools installs it",
            tool.display()
        )
    });
    assert!(
        status.success(),
        "building the {language} guest {folder} failed"
    );
    out
}
