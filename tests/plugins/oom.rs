//! The out-of-memory policy as a plugin: it agrees with the built-in list, and multi-model loads
//! ask it.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    oom_plugin_agrees_with_the_built_in_list,
    mme_loads_ask_the_oom_plugin,
];

const NEAR_MISSES: [&str; 8] = [
    "",
    "out of range",
    "oom",
    "CUDA out-of-memory",
    "memory error",
    "No space left",
    "failed to allocate",
    "Cuda Out Of Mem",
];

fn oom_plugin_agrees_with_the_built_in_list(f: &Fixture) -> Result<(), Failed> {
    let state = &f.servers["oom"].1;
    let plugins = state.plugins.load_full().ok_or("no plugins")?;
    let markers = trident::mme::oom::OUT_OF_MEMORY_MARKERS;
    let cases: Vec<String> = markers
        .iter()
        .map(|m| m.to_string())
        .chain(
            markers
                .iter()
                .map(|m| format!("load failed: {m} on device 0")),
        )
        .chain(NEAR_MISSES.iter().map(|m| m.to_string()))
        .collect();
    for message in cases {
        let plugin = f
            .runtime
            .block_on(plugins.is_out_of_memory(&message))
            .ok_or("the OOM plugin did not answer")?;
        let built_in = trident::mme::oom::is_out_of_memory(&message);
        ensure!(
            plugin == built_in,
            "{message:?}: plugin {plugin}, built-in {built_in}"
        );
    }
    Ok(())
}

/// The configured policy decides: this one calls every failure out-of-memory, so a model whose
/// initialisation merely fails (400 with the built-in list) answers 507.
fn mme_loads_ask_the_oom_plugin(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("oom_mme");
    let url = f.models_root.path().join("oomhash/model");
    common::copy_model("init_fail", url.parent().unwrap(), "model");
    let body = json!({"model_name": "oomhash", "url": url.display().to_string()}).to_string();
    let response = request(at, "POST", "/models", &[], body.as_bytes());
    ensure!(
        response.status == 507,
        "{} {}",
        response.status,
        response.text()
    );
    let metrics = f.servers["oom_mme"].1.metrics.render();
    ensure!(
        metrics.contains("trident_model_loads_total{outcome=\"failure\"} 1"),
        "{metrics}"
    );
    Ok(())
}
