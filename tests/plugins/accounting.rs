//! Per-plugin accounting on `/metrics`: each loaded plugin's calls by outcome, CPU time, peak
//! guest memory and slot waits per hook, and an info series with its digest and signer; series
//! only for plugins loaded now (a reload or an unload takes them away).

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    each_plugins_cpu_memory_and_outcomes_are_on_metrics_while_it_is_loaded,
    a_model_artifacts_plugins_are_accounted_until_the_model_is_unloaded,
];

/// The value of the series `name{labels}` on `at`'s `/metrics`, if it is there.
fn value(at: SocketAddr, name: &str, labels: &str) -> Option<f64> {
    let text = get(at, "/metrics").text();
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.parse().ok())
}

/// A counter's or a histogram count's value ([`value`]), whole.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn series(at: SocketAddr, name: &str, labels: &str) -> Option<u64> {
    value(at, name, labels).map(|v| v as u64)
}

fn each_plugins_cpu_memory_and_outcomes_are_on_metrics_while_it_is_loaded(
    f: &Fixture,
) -> Result<(), Failed> {
    let at = f.at("csv");
    let csv = "plugin=\"csv\",model=\"\",hook=\"request\"";
    let before = series(at, "trident_plugin_cpu_seconds_count", csv).unwrap_or(0);
    for _ in 0..5 {
        let answer = send(at, "text/csv", Some("text/csv"), &[], "2\n");
        ensure!(answer.status == 200, "{} {}", answer.status, answer.text());
    }
    let refused = send(at, "text/csv", Some("text/csv"), &[], "x\n");
    ensure!(
        refused.status == 400,
        "{} {}",
        refused.status,
        refused.text()
    );
    let count = series(at, "trident_plugin_cpu_seconds_count", csv).ok_or("no CPU series")?;
    ensure!(count >= before + 6, "{count} calls counted after {before}");
    let cpu = value(at, "trident_plugin_cpu_seconds_sum", csv).ok_or("no CPU sum")?;
    ensure!(
        (f64::MIN_POSITIVE..1.0).contains(&cpu),
        "CPU seconds {cpu} for {count} calls"
    );
    // Every call's guest memory is its instance's at least, and within its 64 MiB limit.
    let memory = value(at, "trident_plugin_peak_memory_bytes_sum", csv).unwrap_or(0.0);
    ensure!(
        (65536.0 * count as f64..=f64::MAX).contains(&memory),
        "{memory} bytes for {count} calls"
    );
    let small = series(
        at,
        "trident_plugin_peak_memory_bytes_bucket",
        &format!("{csv},le=\"67108864\""),
    );
    ensure!(
        small == Some(count),
        "{small:?} of {count} calls within 64 MiB"
    );
    let ok = series(
        at,
        "trident_plugin_hook_calls_total",
        &format!("{csv},outcome=\"ok\""),
    );
    let refusals = series(
        at,
        "trident_plugin_hook_calls_total",
        &format!("{csv},outcome=\"refused\""),
    );
    ensure!(
        ok.unwrap_or(0) >= 5 && refusals.unwrap_or(0) >= 1,
        "{ok:?} ok, {refusals:?} refused"
    );
    let waits = series(at, "trident_plugin_slot_wait_seconds_count", csv);
    ensure!(waits == Some(count), "{waits:?} waits of {count} calls");
    let info = format!(
        "plugin=\"csv\",model=\"\",sha256=\"{}\",signer=\"\",versions=\"0.1.0\"",
        digest("csv_request")
    );
    ensure!(
        series(at, "trident_plugin_info", &info) == Some(1),
        "no info series {info}"
    );
    // The response adapter is accounted apart.
    let out = "plugin=\"out\",model=\"\",hook=\"response\"";
    ensure!(
        series(at, "trident_plugin_cpu_seconds_count", out).unwrap_or(0) >= 5,
        "the response adapter's calls"
    );

    // Failures by kind: the hostile server's plugins that loop and hog.
    let hostile = f.at("hostile");
    for (variant, plugin, outcome) in [("loop", "loop", "timeout"), ("hog", "hog", "memory")] {
        let labels =
            format!("plugin=\"{plugin}\",model=\"\",hook=\"request\",outcome=\"{outcome}\"");
        let before = series(hostile, "trident_plugin_hook_calls_total", &labels).unwrap_or(0);
        let answer = with_variant(f, variant);
        ensure!(
            answer.status >= 500,
            "{variant}: {} {}",
            answer.status,
            answer.text()
        );
        let after = series(hostile, "trident_plugin_hook_calls_total", &labels);
        ensure!(
            after == Some(before + 1),
            "{variant}: {after:?} after {before}"
        );
    }
    still_fine(f)?;

    // Reloaded without the CSV plugins, their series are gone; restored, they are back at zero.
    let path = f.manifests.path().join("csv.toml");
    let good = std::fs::read_to_string(&path)?;
    std::fs::write(&path, "")?;
    let emptied = request(at, "POST", "/plugins/reload", &[], b"");
    std::fs::write(&path, &good)?;
    ensure!(
        emptied.status == 200,
        "{} {}",
        emptied.status,
        emptied.text()
    );
    let text = get(at, "/metrics").text();
    ensure!(
        !text.contains("plugin=\"csv\"") && !text.contains("trident_plugin_info{"),
        "series of unloaded plugins: {}",
        text.lines()
            .filter(|l| l.contains("plugin=\"csv\""))
            .take(3)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let restored = request(at, "POST", "/plugins/reload", &[], b"");
    ensure!(
        restored.status == 200,
        "{} {}",
        restored.status,
        restored.text()
    );
    ensure!(
        series(at, "trident_plugin_cpu_seconds_count", csv) == Some(0),
        "a reloaded plugin starts a new account"
    );
    Ok(())
}

/// A model artifact's own plugins are accounted under the model's name while it is loaded, and
/// their series go with its unload.
fn a_model_artifacts_plugins_are_accounted_until_the_model_is_unloaded(
    f: &Fixture,
) -> Result<(), Failed> {
    let at = f.at("mme_plugins");
    let name = "accounted";
    let root = f.models_root.path().join(name);
    common::copy_model("native_identity_fp32", &root, "model");
    let folder = root.join("model");
    let bytes = std::fs::read(guest("csv_request"))?;
    std::fs::write(folder.join("csv.wasm"), &bytes)?;
    let signature =
        trident::plugins::platform::signing::sign(&bytes, model_plugins::SIGNING_SECRET)?;
    std::fs::write(folder.join("csv.wasm.sig"), signature)?;
    std::fs::write(
        folder.join("plugins.toml"),
        format!(
            "[plugins.csv]\npath = \"csv.wasm\"\nsha256 = \"{}\"\ncontent_types = [\"text/csv\"]\n[models.\"*\"]\nrequest = \"csv\"\n",
            digest("csv_request")
        ),
    )?;
    let body = json!({"model_name": name, "url": folder.display().to_string()}).to_string();
    let loaded = request(at, "POST", "/models", &[], body.as_bytes());
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    for _ in 0..3 {
        let answer = request(
            at,
            "POST",
            &format!("/models/{name}/invoke"),
            &[("Content-Type", "text/csv")],
            b"1,2\n",
        );
        ensure!(answer.status == 200, "{} {}", answer.status, answer.text());
    }
    let labels = format!("plugin=\"csv\",model=\"{name}\",hook=\"request\"");
    let count = series(at, "trident_plugin_cpu_seconds_count", &labels);
    ensure!(count == Some(3), "{count:?} calls of the model's plugin");
    let public = trident::plugins::platform::signing::public_key(model_plugins::SIGNING_SECRET)?;
    let info = format!(
        "plugin=\"csv\",model=\"{name}\",sha256=\"{}\",signer=\"{public}\",versions=\"0.1.0\"",
        digest("csv_request")
    );
    ensure!(
        series(at, "trident_plugin_info", &info) == Some(1),
        "no info series {info}"
    );
    let unloaded = request(at, "DELETE", &format!("/models/{name}"), &[], b"");
    ensure!(
        unloaded.status == 200,
        "{} {}",
        unloaded.status,
        unloaded.text()
    );
    let text = get(at, "/metrics").text();
    ensure!(
        !text.contains(&format!("model=\"{name}\",hook=")),
        "the unloaded model's plugin series stayed"
    );
    Ok(())
}
