//! `POST /models`: the body, then its url against a models root on disk (normalisation,
//! forbidden prefixes, the url form, symlink escapes).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use trident::mme::load_request::parse_load_request;
use trident::mme::url::validate;

/// A models root with one model and a symlink pointing out of the root.
fn models_root() -> &'static PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        // A fixed place, so seeds can name urls inside it; creating it again is harmless.
        let root = std::env::temp_dir().join("trident-fuzz-mme");
        let model = root.join("abc").join("model");
        std::fs::create_dir_all(model.join("m/1")).unwrap();
        std::fs::write(model.join("m/config.pbtxt"), "backend: \"python\"\n").unwrap();
        let _ = std::os::unix::fs::symlink("/etc", root.join("escape"));
        root
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(request) = parse_load_request(data) else {
        return;
    };
    assert!(!request.model_name.is_empty() && !request.url.is_empty());
    let root = models_root();
    if let Ok(url) = validate(&request.url, root) {
        let canonical_root = root.canonicalize().unwrap();
        assert!(
            url.path.starts_with(root) || url.path.starts_with(&canonical_root),
            "{} accepted outside {}",
            url.path.display(),
            root.display()
        );
        if let Ok(real) = url.path.canonicalize() {
            assert!(
                real.starts_with(&canonical_root),
                "{} escapes",
                real.display()
            );
        }
    }
});
