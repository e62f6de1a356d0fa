//! The plugin manifest (TOML): unknown keys, limits, variants, references between sections.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trident::plugins::platform::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(manifest) = Manifest::parse(text)
    {
        for spec in manifest.plugins.values() {
            assert_eq!(spec.sha256.len(), 64);
            assert!(spec.memory_limit_mb > 0 && spec.time_limit_ms > 0);
        }
    }
});
