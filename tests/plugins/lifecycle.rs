//! Loading and reloading a manifest: bad digests, signatures, keys and configs refuse the whole
//! set; a reload swaps it or keeps the old one.

use std::os::unix::fs::PermissionsExt;

use trident::plugins::platform::loading::Compiled;

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    load_refuses_bad_digests_signatures_keys_and_configs,
    reload_swaps_plugins_or_keeps_the_old_set,
    compile_cache_serves_restarts_and_recompiles_what_it_cannot_vouch_for,
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
    let public = trident::plugins::platform::signing::public_key(secret)?;
    let signed_header = format!("require_signatures = true\ntrusted_keys = [\"{public}\"]\n");
    let error = load(
        "unsigned",
        format!("{signed_header}{}", plugin("csv", "csv_request", "")),
    )
    .err()
    .ok_or("unsigned accepted")?;
    ensure!(error.contains("is not signed"), "{error}");
    let signature =
        trident::plugins::platform::signing::sign(&std::fs::read(guest("csv_request"))?, secret)?;
    let signed = plugin(
        "csv",
        "csv_request",
        &format!("signature = \"{signature}\""),
    );
    load("signed", format!("{signed_header}{signed}"))
        .map_err(|e| format!("a signed plugin was refused: {e}"))?;
    let other = trident::plugins::platform::signing::sign(
        &std::fs::read(guest("csv_request"))?,
        &"22".repeat(32),
    )?;
    let wrong_key = plugin("csv", "csv_request", &format!("signature = \"{other}\""));
    let error = load("wrong_key", format!("{signed_header}{wrong_key}"))
        .err()
        .ok_or("untrusted signature accepted")?;
    ensure!(error.contains("or by a key not in trusted_keys"), "{error}");

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

    // A config key the plugin does not read (a misspelling) is refused, naming it and the key
    // it most likely meant, in each language's build: Rust's and Python's checks run once in
    // a copied instance, JavaScript's in each instance.
    let python =
        common::plugins::python_guest("plugins/python/csv_request", "request-adapter-plugin");
    let js = common::plugins::js_guest("plugins/js/csv_request", "request-adapter-plugin");
    for (language, entry) in [
        (
            "rust",
            plugin(
                "csv",
                "csv_request",
                "config = { heaedr = \"true\", inptu = \"X\" }",
            ),
        ),
        (
            "python",
            plugin_at(
                "csv",
                &python,
                "config = { heaedr = \"true\", inptu = \"X\" }",
            ),
        ),
        (
            "js",
            plugin_at("csv", &js, "config = { heaedr = \"true\", inptu = \"X\" }"),
        ),
    ] {
        let error = load(&format!("misspelled_{language}"), entry)
            .err()
            .ok_or(format!("{language}: misspelled keys accepted"))?;
        ensure!(
            error.contains("`heaedr` (did you mean `header`?)")
                && error.contains("`inptu` (did you mean `input`?)")
                && error.contains("the keys it reads: datatype, header, input, outputs"),
            "{language}: {error}"
        );
    }
    // A key no plugin key resembles is named as it is.
    let error = load(
        "unread",
        plugin("csv", "csv_request", "config = { colour = \"blue\" }"),
    )
    .err()
    .ok_or("an unread key accepted")?;
    ensure!(
        error.contains("config key `colour` is not read by this plugin"),
        "{error}"
    );
    // A plugin that reads a key only in its calls loads with unread_config = "warn".
    load(
        "warned",
        plugin(
            "csv",
            "csv_request",
            "unread_config = \"warn\"\nconfig = { colour = \"blue\" }",
        ),
    )
    .map_err(|e| format!("unread_config = \"warn\" refused: {e}"))?;
    let error = load(
        "bad_unread_config",
        plugin("csv", "csv_request", "unread_config = \"ignore\""),
    )
    .err()
    .ok_or("unread_config = ignore accepted")?;
    ensure!(error.contains("unread_config"), "{error}");
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

    // So is a misspelled config key, and the old plugins keep serving.
    ensure!(good.contains("datatype = \"FP32\""), "{good}");
    std::fs::write(
        &path,
        good.replace("datatype = \"FP32\"", "datatyp = \"FP32\""),
    )?;
    let refused = reload();
    std::fs::write(&path, &good)?;
    ensure!(
        refused.status == 400
            && refused
                .error()
                .contains("`datatyp` (did you mean `datatype`?)"),
        "{} {}",
        refused.status,
        refused.text()
    );
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

/// Two plugins through a compile cache of their own: compiled at the first load, read at the
/// next; an entry that was corrupted, truncated or planted is never loaded (its plugin compiles
/// again and the load succeeds); a folder others may write to is not used at all.
fn compile_cache_serves_restarts_and_recompiles_what_it_cannot_vouch_for(
    f: &Fixture,
) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let cache = scratch.path().join("cache");
    let path = f.manifests.path().join("cached.toml");
    std::fs::write(
        &path,
        format!(
            "compile_cache = \"{}\"\n{}{}",
            cache.display(),
            plugin("csv", "csv_request", ""),
            plugin("out", "csv_json_response", "")
        ),
    )?;
    let load = || -> Result<Compiled, String> {
        let manifest = Manifest::load(&path).map_err(|e| e.to_string())?;
        f.runtime
            .block_on(PluginHost::load(&manifest))
            .map(|host| host.compiled())
            .map_err(|e| e.to_string())
    };
    let counts = |from_cache, compiled| Compiled {
        from_cache,
        compiled,
    };
    // Each plugin is two components: the plugin as built, which its initialisation runs in,
    // and the component of its initialised state, which serves (plugins::snapshot).
    ensure!(load()? == counts(0, 4), "first load");
    ensure!(load()? == counts(4, 0), "second load");

    let entries = cache_entries(&cache);
    ensure!(entries.len() == 4, "entries: {entries:?}");
    let mut bytes = std::fs::read(&entries[0])?;
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&entries[0], &bytes)?;
    let truncated = std::fs::read(&entries[1])?;
    std::fs::write(&entries[1], &truncated[..truncated.len() / 3])?;
    ensure!(load()? == counts(2, 2), "load after corrupting two entries");
    ensure!(load()? == counts(4, 0), "load after recompiling");

    // An entry planted in the folder of a wasmtime version not in use, and one swapped in
    // under the name of a real entry: neither is vouched for; both are removed.
    let planted = cache.join("modules/wasmtime-0.0.1/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    std::fs::create_dir_all(planted.parent().unwrap())?;
    std::fs::write(&planted, b"not compiled code")?;
    let entries = cache_entries(&cache);
    let real = entries
        .iter()
        .find(|p| !p.starts_with(planted.parent().unwrap()));
    let real = real.ok_or("no real entry")?;
    std::fs::write(real, b"\x7fELF not compiled code")?;
    ensure!(load()? == counts(3, 1), "load after planting entries");
    ensure!(!planted.exists(), "the planted entry is still there");

    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777))?;
    let open = load();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700))?;
    ensure!(open? == counts(0, 4), "a world-writable cache was used");
    Ok(())
}

/// The entry files under a compile cache folder (names without an extension).
fn cache_entries(cache: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![cache.join("modules")];
    while let Some(folder) = pending.pop() {
        for item in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = item.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_none() {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}
