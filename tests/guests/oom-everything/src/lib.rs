//! An OOM policy that calls every error out-of-memory, so a test can tell the plugin decided.

wit_bindgen::generate!({ world: "oom-plugin", path: "../../../wit" });

struct Plugin;

impl exports::trident::plugin::oom_classifier::Guest for Plugin {
    fn is_out_of_memory(_message: String) -> bool {
        true
    }
}

impl exports::trident::plugin::lifecycle::Guest for Plugin {
    fn check_config() -> Result<(), String> {
        Ok(())
    }
}

export!(Plugin);
