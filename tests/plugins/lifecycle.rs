//! Loading and reloading a manifest: bad digests, signatures, keys and configs refuse the whole
//! set; a reload swaps it or keeps the old one.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    load_refuses_bad_digests_signatures_keys_and_configs,
    reload_swaps_plugins_or_keeps_the_old_set,
];

fn load_refuses_bad_digests_signatures_keys_and_configs(f: &Fixture) -> Result<(), Failed> {
    let dir = f.manifests.path();
    let load = |name: &str, text: String| -> Result<(), String> {
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let manifest = Manifest::load(&path).map_err(|e| e.to_string())?;
        f.runtime
            .block_on(PluginHost::load(&manifest))
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let wrong_digest =
        plugin("csv", "csv_request", "").replace(&digest("csv_request"), &"ab".repeat(32));
    let error = load("digest", wrong_digest)
        .err()
        .ok_or("digest mismatch accepted")?;
    ensure!(error.contains("sha256 mismatch"), "{error}");

    let secret = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    let public = trident::plugins::signing::public_key(secret)?;
    let signed_header = format!("require_signatures = true\ntrusted_keys = [\"{public}\"]\n");
    let error = load(
        "unsigned",
        format!("{signed_header}{}", plugin("csv", "csv_request", "")),
    )
    .err()
    .ok_or("unsigned accepted")?;
    ensure!(error.contains("is not signed"), "{error}");
    let signature = trident::plugins::signing::sign(&std::fs::read(guest("csv_request"))?, secret)?;
    let signed = plugin(
        "csv",
        "csv_request",
        &format!("signature = \"{signature}\""),
    );
    load("signed", format!("{signed_header}{signed}"))
        .map_err(|e| format!("a signed plugin was refused: {e}"))?;
    let other =
        trident::plugins::signing::sign(&std::fs::read(guest("csv_request"))?, &"22".repeat(32))?;
    let wrong_key = plugin("csv", "csv_request", &format!("signature = \"{other}\""));
    let error = load("wrong_key", format!("{signed_header}{wrong_key}"))
        .err()
        .ok_or("untrusted signature accepted")?;
    ensure!(error.contains("not from a trusted key"), "{error}");

    let error = load(
        "unknown",
        format!("{}colour = \"blue\"\n", plugin("csv", "csv_request", "")),
    )
    .err()
    .ok_or("unknown key accepted")?;
    ensure!(error.contains("colour"), "{error}");
    let error = load("refusing", hostile("refuse-config", ""))
        .err()
        .ok_or("refused config accepted")?;
    ensure!(error.contains("refuses its configuration"), "{error}");
    let error = load(
        "bad_datatype",
        plugin("csv", "csv_request", "config = { datatype = \"COMPLEX\" }"),
    )
    .err()
    .ok_or("bad config accepted")?;
    ensure!(error.contains("COMPLEX"), "{error}");
    Ok(())
}

fn reload_swaps_plugins_or_keeps_the_old_set(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("csv");
    let path = f.manifests.path().join("csv.toml");
    let good = std::fs::read_to_string(&path)?;
    let reload = || request(at, "POST", "/plugins/reload", &[], b"");
    let response = reload();
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(response.json()["plugins"] == 2, "{}", response.text());

    // A broken manifest is refused and the old plugins keep serving.
    std::fs::write(&path, format!("{good}\nbogus = 1\n"))?;
    let refused = reload();
    std::fs::write(&path, &good)?;
    ensure!(
        refused.status == 400,
        "{} {}",
        refused.status,
        refused.text()
    );
    ensure!(refused.error().contains("bogus"), "{}", refused.text());
    let still = send(at, "text/csv", Some("text/csv"), &[], "2\n");
    ensure!(
        still.status == 200 && still.text() == "5\n",
        "{} {}",
        still.status,
        still.text()
    );

    // A manifest without adapters for the model: CSV is no longer understood.
    std::fs::write(&path, "")?;
    let emptied = reload();
    std::fs::write(&path, &good)?;
    ensure!(
        emptied.status == 200,
        "{} {}",
        emptied.status,
        emptied.text()
    );
    let plain = send(at, "text/csv", None, &[], "2\n");
    ensure!(
        plain.status == 400,
        "CSV accepted without plugins: {} {}",
        plain.status,
        plain.text()
    );
    ensure!(reload().status == 200, "restoring the manifest failed");
    Ok(())
}
