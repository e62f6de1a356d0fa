//! Plugin assets and warm state on the real host: a hostile guest (`tests/guests/hostile`,
//! mode `greeting`) keeps an asset its check-config read and changes it in every call; each call
//! must see it as the load read it. Assets that are missing, swapped, too large, outside the
//! manifest's folder or not covered by the signature refuse the load, naming the asset.

use std::path::Path;

use libtest_mimic::Failed;
use trident::plugins::platform::manifest::Manifest;
use trident::plugins::{PluginHost, PluginInvocation, Refusal};

use super::{Fixture, plugin};
use crate::common::Check;
use crate::common::plugins::guest;

pub(super) const CHECKS: &[Check<Fixture>] = checks![
    every_call_starts_from_the_state_check_config_built_from_its_asset,
    assets_that_cannot_be_trusted_refuse_the_load,
    a_signature_covers_the_assets,
];

/// A manifest in `dir` with the hostile guest in `mode`, reading `assets` (TOML inline table
/// entries), routed as every model's request adapter; written as `name.toml`.
fn manifest(dir: &Path, name: &str, mode: &str, top: &str, assets: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "{top}{}[models.\"*\"]\nrequest = \"g\"\n",
        plugin(
            "g",
            "hostile",
            &format!("config = {{ mode = \"{mode}\" }}\nassets = {{ {assets} }}")
        )
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn asset(name: &str, file: &str, bytes: &[u8]) -> String {
    let digest = trident::plugins::platform::loading::sha256_hex(bytes);
    format!("{name} = {{ path = \"{file}\", sha256 = \"{digest}\" }}")
}

fn load(f: &Fixture, path: &Path) -> Result<PluginHost, String> {
    let manifest = Manifest::load(path).map_err(|e| e.to_string())?;
    f.runtime
        .block_on(PluginHost::load(&manifest))
        .map_err(|e| e.to_string())
}

/// A request to model `m` with body `1`, as a plugin sees it.
fn invocation() -> PluginInvocation {
    PluginInvocation::new(
        "/invocations",
        "m",
        &Default::default(),
        &http::HeaderMap::new(),
        &[],
        b"1",
        None,
    )
}

/// What the request adapter routed to model `m` makes of [`invocation`].
fn adapt(
    f: &Fixture,
    host: &PluginHost,
) -> Result<trident::plugins::HookResult<trident::plugins::AdaptedRequest>, Failed> {
    let selection = host.select("m", None, None).ok_or("no adapter selected")?;
    let plugin = selection.request.ok_or("no request adapter")?;
    Ok(f.runtime
        .block_on(host.adapt_request(&plugin, &invocation())))
}

/// The message the greeting guest refuses a request with.
fn call(f: &Fixture, host: &PluginHost) -> Result<String, Failed> {
    match adapt(f, host)? {
        Ok(Err(Refusal::Internal(message))) => Ok(message),
        other => Err(format!("the greeting guest answered {other:?}").into()),
    }
}

fn every_call_starts_from_the_state_check_config_built_from_its_asset(
    f: &Fixture,
) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("greeting.txt"), "hello")?;
    let path = manifest(
        dir.path(),
        "greeting",
        "greeting",
        "",
        &asset("greeting", "greeting.txt", b"hello"),
    );
    let host = load(f, &path)?;
    // Each call changes the kept greeting; the next one must not see the change.
    for _ in 0..5 {
        let message = call(f, &host)?;
        ensure!(message == "greeting: hello", "{message}");
    }
    // The asset was read once, at load: the file changing after it changes nothing served.
    std::fs::write(dir.path().join("greeting.txt"), "changed")?;
    let message = call(f, &host)?;
    ensure!(
        message == "greeting: hello",
        "after the file changed: {message}"
    );

    // A check-config that prints leaves a WASI stream open: the state cannot be copied, and
    // each instance initialises itself instead; the plugin serves the same.
    let path = manifest(dir.path(), "printing", "print-at-load", "", "");
    let mut loaded = None;
    let logged = super::logged_during("g", || loaded = Some(load(f, &path)));
    let host = loaded.ok_or("not loaded")??;
    ensure!(
        logged
            .iter()
            .any(|line| line.contains("cannot be copied")
                && line.contains("left a WASI resource open")),
        "the fallback was not taken: {logged:?}"
    );
    let adapted = adapt(f, &host)?;
    ensure!(matches!(adapted, Ok(Ok(_))), "{adapted:?}");
    Ok(())
}

fn assets_that_cannot_be_trusted_refuse_the_load(f: &Fixture) -> Result<(), Failed> {
    let root = tempfile::tempdir()?;
    let dir = root.path().join("manifest");
    std::fs::create_dir(&dir)?;
    std::fs::write(dir.join("greeting.txt"), "hello")?;
    std::fs::write(root.path().join("secret.txt"), "s3cret")?;
    std::os::unix::fs::symlink("../secret.txt", dir.join("link.txt"))?;
    let big = std::fs::File::create(dir.join("big.txt"))?;
    big.set_len(33 << 20)?;
    drop(big);
    let refused = |name: &str, assets: String, says: &str| -> Result<(), Failed> {
        let path = manifest(&dir, name, "greeting", "", &assets);
        match load(f, &path) {
            Ok(_) => Err(format!("{name}: loaded").into()),
            Err(error) if error.contains(says) => Ok(()),
            Err(error) => Err(format!("{name}: {error}").into()),
        }
    };
    refused(
        "missing",
        asset("greeting", "gone.txt", b"hello"),
        "asset 'greeting' (gone.txt): cannot read it",
    )?;
    refused(
        "swapped",
        asset("greeting", "greeting.txt", b"other"),
        "asset 'greeting' (greeting.txt): sha256 mismatch",
    )?;
    refused(
        "link",
        asset("greeting", "link.txt", b"s3cret"),
        "(link.txt): is not a file in the manifest's folder",
    )?;
    refused(
        "big",
        asset("greeting", "big.txt", b""),
        "(big.txt): is 34603008 bytes; an asset may have at most 33554432",
    )?;
    refused(
        "outside",
        asset("greeting", "../secret.txt", b"s3cret"),
        "must name a file beside the manifest",
    )?;
    // The guest's own check: no asset of the name it reads.
    refused("none", String::new(), "no greeting asset")?;
    Ok(())
}

fn a_signature_covers_the_assets(f: &Fixture) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("greeting.txt"), "hello")?;
    std::fs::write(dir.path().join("other.txt"), "other")?;
    let secret = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    let public = trident::plugins::platform::signing::public_key(secret)?;
    let wasm = std::fs::read(guest("hostile"))?;
    let sign = |assets: &[(&str, &[u8])]| -> Result<(), Failed> {
        let digests: Vec<(String, String)> = assets
            .iter()
            .map(|(name, bytes)| {
                (
                    (*name).to_owned(),
                    trident::plugins::platform::loading::sha256_hex(bytes),
                )
            })
            .collect();
        let message = trident::plugins::platform::signing::signed_message(
            &wasm,
            digests.iter().map(|(n, d)| (n.as_str(), d.as_str())),
            None,
        );
        let signature = trident::plugins::platform::signing::sign(&message, secret)?;
        std::fs::write(dir.path().join("signature"), signature)?;
        Ok(())
    };
    let top = format!("require_signatures = true\ntrusted_keys = [\"{public}\"]\n");
    let with_signature = |assets: &str| -> Result<std::path::PathBuf, Failed> {
        let signature = std::fs::read_to_string(dir.path().join("signature"))?;
        let path = manifest(dir.path(), "signed", "greeting", &top, assets);
        let text = std::fs::read_to_string(&path)?.replace(
            "config = {",
            &format!("signature = \"{signature}\"\nconfig = {{"),
        );
        std::fs::write(&path, text)?;
        Ok(path)
    };
    let hello = asset("greeting", "greeting.txt", b"hello");
    sign(&[("greeting", b"hello")])?;
    let host = load(f, &with_signature(&hello)?)?;
    ensure!(call(f, &host)? == "greeting: hello", "the signed plugin");
    // The same signed plugin with other labels: its signature does not cover them.
    let other = asset("greeting", "other.txt", b"other");
    let error = load(f, &with_signature(&other)?)
        .err()
        .ok_or("a signed plugin with a swapped asset loaded")?;
    ensure!(
        error.contains("over the .wasm, asset 'greeting' as they are now")
            && error.contains("changed since it was signed"),
        "{error}"
    );
    // A signature of the .wasm alone does not cover a plugin that reads assets.
    sign(&[])?;
    let error = load(f, &with_signature(&hello)?)
        .err()
        .ok_or("a signature without the assets covered them")?;
    ensure!(error.contains("covers the .wasm alone"), "{error}");
    Ok(())
}
