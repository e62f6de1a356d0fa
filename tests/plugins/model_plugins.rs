//! Plugins that travel with their model on a multi-model endpoint: an artifact's own
//! `plugins.toml` is loaded with it, used for its invocations, dropped on unload, and held to
//! the container's rules (signatures, limit ceilings, the keys only the container sets).

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    a_model_brings_its_own_plugins_and_drops_them_on_unload,
    model_plugins_that_break_the_rules_fail_the_load,
    artifact_files_that_are_fifos_fail_their_load_and_stall_nothing,
    a_model_whose_plugin_loops_does_not_slow_another,
    a_model_cannot_use_another_models_plugin_files,
    a_model_unloaded_while_its_plugin_loops_leaves_the_endpoint_serving,
    a_models_plugins_are_held_to_its_budget_and_copies_compiled_once,
    a_load_is_bounded_whole_by_its_time_out,
];

/// The load time-out of the `mme_slow` server.
pub(super) const SLOW_LOAD_TIMEOUT: Duration = Duration::from_secs(3);

/// The secret key the `mme_plugins` server's container manifest trusts (its public half).
pub(super) const SIGNING_SECRET: &str =
    "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";

/// An artifact `name` under the models root: the identity model, the built guests `guests`
/// copied beside its `config.pbtxt` (signed with [`SIGNING_SECRET`] when `signed`), and
/// `manifest` as its `plugins.toml` when given; its URL.
fn artifact(
    f: &Fixture,
    name: &str,
    guests: &[&str],
    signed: bool,
    manifest: Option<&str>,
) -> Result<String, Failed> {
    let root = f.models_root.path().join(name);
    common::copy_model("native_identity_fp32", &root, "model");
    let folder = root.join("model");
    for guest_name in guests {
        let bytes = std::fs::read(guest(guest_name))?;
        std::fs::write(folder.join(format!("{guest_name}.wasm")), &bytes)?;
        if signed {
            let signature = trident::plugins::platform::signing::sign(&bytes, SIGNING_SECRET)?;
            std::fs::write(folder.join(format!("{guest_name}.wasm.sig")), signature)?;
        }
    }
    if let Some(manifest) = manifest {
        std::fs::write(folder.join("plugins.toml"), manifest)?;
    }
    Ok(folder.display().to_string())
}

/// A `[plugins.<name>]` table for a guest copied into an artifact (by its file name).
fn entry(name: &str, guest_name: &str, extra: &str) -> String {
    format!(
        "[plugins.{name}]\npath = \"{guest_name}.wasm\"\nsha256 = \"{}\"\n{extra}\n",
        digest(guest_name)
    )
}

/// The CSV adapters routed for the artifact's own model.
fn csv_manifest(extra: &str) -> String {
    format!(
        "{}{}[models.\"*\"]\nrequest = \"csv\"\nresponse = \"out\"\n",
        entry(
            "csv",
            "csv_request",
            &format!("content_types = [\"text/csv\"]\n{extra}")
        ),
        entry("out", "csv_json_response", "accept = [\"text/csv\"]")
    )
}

fn load(f: &Fixture, name: &str, url: &str) -> common::http_client::HttpResponse {
    let body = json!({"model_name": name, "url": url}).to_string();
    request(f.at("mme_plugins"), "POST", "/models", &[], body.as_bytes())
}

fn invoke_csv(f: &Fixture, name: &str, csv: &str) -> common::http_client::HttpResponse {
    request(
        f.at("mme_plugins"),
        "POST",
        &format!("/models/{name}/invoke"),
        &[("Content-Type", "text/csv"), ("Accept", "text/csv")],
        csv.as_bytes(),
    )
}

fn unload(f: &Fixture, name: &str) -> Result<(), Failed> {
    let response = request(
        f.at("mme_plugins"),
        "DELETE",
        &format!("/models/{name}"),
        &[],
        b"",
    );
    ensure!(
        response.status == 200,
        "unload {name}: {} {}",
        response.status,
        response.text()
    );
    Ok(())
}

fn a_model_brings_its_own_plugins_and_drops_them_on_unload(f: &Fixture) -> Result<(), Failed> {
    let manifest = csv_manifest("");
    let own = artifact(
        f,
        "own",
        &["csv_request", "csv_json_response"],
        true,
        Some(&manifest),
    )?;
    let plain = artifact(f, "plain", &[], false, None)?;
    let later = artifact(f, "later", &[], false, None)?;
    let loaded = load(f, "own", &own);
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    let answer = invoke_csv(f, "own", "1,2\n3,4\n");
    ensure!(
        answer.status == 200 && answer.text() == "1,2\n3,4\n",
        "{} {}",
        answer.status,
        answer.text()
    );

    // Another model on the endpoint has no plugins: its CSV is not understood.
    ensure!(load(f, "plain", &plain).status == 200, "plain load");
    let refused = invoke_csv(f, "plain", "1,2\n");
    ensure!(
        refused.status == 400,
        "{} {}",
        refused.status,
        refused.text()
    );

    // Unloaded, its plugins go with it: the same name from an artifact without plugins.
    unload(f, "own")?;
    ensure!(load(f, "own", &later).status == 200, "reload");
    let refused = invoke_csv(f, "own", "1,2\n");
    ensure!(
        refused.status == 400,
        "{} {}",
        refused.status,
        refused.text()
    );
    unload(f, "own")?;
    unload(f, "plain")
}

fn model_plugins_that_break_the_rules_fail_the_load(f: &Fixture) -> Result<(), Failed> {
    let outside = guest("csv_request");
    let cases: Vec<(&str, bool, String, String)> = vec![
        ("unsigned", false, csv_manifest(""), "is not signed".into()),
        (
            "digest",
            true,
            csv_manifest("").replace(&digest("csv_request"), &"ab".repeat(32)),
            "plugin 'csv': sha256 mismatch".into(),
        ),
        (
            "memory",
            true,
            csv_manifest("memory_limit_mb = 64"),
            "plugin 'csv': memory_limit_mb = 64 is above this endpoint's 32".into(),
        ),
        (
            "time",
            true,
            csv_manifest("time_limit_ms = 1000"),
            "time_limit_ms = 1000 is above this endpoint's 200".into(),
        ),
        (
            "keys",
            true,
            format!("require_signatures = false\n{}", csv_manifest("")),
            "`require_signatures` is the container's to set".into(),
        ),
        (
            "outside",
            true,
            csv_manifest("").replace(
                "path = \"csv_request.wasm\"",
                &format!("path = \"{}\"", outside.display()),
            ),
            format!(
                "plugin 'csv': {} is not a file in the model's folder",
                outside.display()
            ),
        ),
        (
            "escape",
            true,
            csv_manifest("").replace(
                "path = \"csv_request.wasm\"",
                "path = \"../../../csv_request.wasm\"",
            ),
            "is not a file in the model's folder".into(),
        ),
        (
            "routes",
            true,
            csv_manifest("").replace("[models.\"*\"]", "[models.other]"),
            "serve only that model".into(),
        ),
        (
            "config",
            true,
            csv_manifest("config = { datatype = \"COMPLEX\" }"),
            "COMPLEX".into(),
        ),
        (
            // A tenant's plugin calling models: the names it could reach are other tenants'.
            "calls",
            true,
            csv_manifest("models = [\"plain\"]"),
            "plugin 'csv': models = [...]: a model artifact's plugins may not call models".into(),
        ),
        (
            "broken",
            true,
            "[plugins\n".into(),
            "the model's plugins.toml".into(),
        ),
        (
            "many",
            true,
            format!(
                "{}{}",
                (0..17)
                    .map(|index| entry(&format!("csv{index}"), "csv_request", ""))
                    .collect::<String>(),
                "[models.\"*\"]\nrequest = \"csv0\"\n"
            ),
            "names 17 plugins; a model's manifest may name at most 16".into(),
        ),
    ];
    for (name, signed, manifest, expected) in cases {
        let url = artifact(
            f,
            name,
            &["csv_request", "csv_json_response"],
            signed,
            Some(&manifest),
        )?;
        let response = load(f, name, &url);
        ensure!(
            response.status == 400 && response.error().contains(&expected),
            "{name}: {} {}",
            response.status,
            response.text()
        );
        let listed = get(f.at("mme_plugins"), &format!("/models/{name}"));
        ensure!(
            listed.status == 404,
            "{name} was left loaded: {}",
            listed.text()
        );
    }
    // The endpoint still loads and serves a model with good plugins.
    let manifest = csv_manifest("");
    let good = artifact(
        f,
        "good",
        &["csv_request", "csv_json_response"],
        true,
        Some(&manifest),
    )?;
    ensure!(load(f, "good", &good).status == 200, "good load");
    let answer = invoke_csv(f, "good", "5\n");
    ensure!(
        answer.text() == "5\n",
        "{} {}",
        answer.status,
        answer.text()
    );
    unload(f, "good")
}

/// An artifact whose plugin or signature file is a FIFO nobody writes to (or any file a read
/// would block on): its load fails with a 400 naming the file (in seconds: what takes time is
/// verifying the compile cache, not the FIFO), and meanwhile, with such loads in flight, the
/// endpoint answers `/ping` and other models' invocations at once. (Before, the
/// load read the FIFO on a serving thread and waited for a writer; three such loads on 2 cores
/// stopped the endpoint.)
fn artifact_files_that_are_fifos_fail_their_load_and_stall_nothing(
    f: &Fixture,
) -> Result<(), Failed> {
    let manifest = csv_manifest("");
    let neighbour = artifact(
        f,
        "neighbour",
        &["csv_request", "csv_json_response"],
        true,
        Some(&manifest),
    )?;
    let loaded = load(f, "neighbour", &neighbour);
    ensure!(loaded.status == 200, "neighbour: {}", loaded.text());
    let mut urls = Vec::new();
    for (name, fifo) in [
        ("fifo_wasm", "csv_request.wasm"),
        ("fifo_sig", "csv_request.wasm.sig"),
        ("fifo_wasm2", "csv_json_response.wasm"),
    ] {
        let url = artifact(
            f,
            name,
            &["csv_request", "csv_json_response"],
            true,
            Some(&manifest),
        )?;
        let path = std::path::Path::new(&url).join(fifo);
        std::fs::remove_file(&path)?;
        let made = common::command("mkfifo").arg(&path).status()?;
        ensure!(made.success(), "mkfifo {}", path.display());
        urls.push((name, fifo, url));
    }
    std::thread::scope(|scope| -> Result<(), Failed> {
        let loads: Vec<_> = urls
            .iter()
            .map(|(name, fifo, url)| {
                scope.spawn(move || {
                    let started = Instant::now();
                    (*name, *fifo, load(f, name, url), started.elapsed())
                })
            })
            .collect();
        for _ in 0..5 {
            let started = Instant::now();
            let ping = get(f.at("mme_plugins"), "/ping");
            let answer = invoke_csv(f, "neighbour", "1,2\n");
            ensure!(
                ping.status == 200
                    && answer.status == 200
                    && started.elapsed() < Duration::from_secs(2),
                "with FIFO loads in flight: ping {}, invoke {} {}, {:?}",
                ping.status,
                answer.status,
                answer.text(),
                started.elapsed()
            );
        }
        for joined in loads {
            let (name, fifo, response, took) = joined.join().expect("load thread");
            ensure!(
                response.status == 400
                    && response
                        .error()
                        .contains(&format!("{fifo} is not a regular file (it is a FIFO)"))
                    && took < Duration::from_secs(60),
                "{name}: {} {} after {took:?}",
                response.status,
                response.text()
            );
            let listed = get(f.at("mme_plugins"), &format!("/models/{name}"));
            ensure!(
                listed.status == 404,
                "{name} was left loaded: {}",
                listed.text()
            );
        }
        Ok(())
    })?;
    unload(f, "neighbour")
}

/// Loads two artifacts of the identity model: `spinner`, whose request adapter is the hostile
/// guest looping to its time limit, and `steady`, with the CSV adapters; `spinner`'s url.
fn load_spinner_and_steady(f: &Fixture, spinner: &str, steady: &str) -> Result<String, Failed> {
    let spin = format!(
        "{}[models.\"*\"]\nrequest = \"spin\"\n",
        entry(
            "spin",
            "hostile",
            "content_types = [\"text/csv\"]\nconfig = { mode = \"loop\" }"
        )
    );
    let spinner_url = artifact(f, spinner, &["hostile"], true, Some(&spin))?;
    let steady_url = artifact(
        f,
        steady,
        &["csv_request", "csv_json_response"],
        true,
        Some(&csv_manifest("")),
    )?;
    for (name, url) in [(spinner, &spinner_url), (steady, &steady_url)] {
        let loaded = load(f, name, url);
        ensure!(
            loaded.status == 200,
            "{name}: {} {}",
            loaded.status,
            loaded.text()
        );
    }
    Ok(spinner_url)
}

type Answers = Vec<(u16, String)>;

/// `clients` threads sending CSV to `model` back to back until `stop`; each one's answers.
fn looping_clients<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    f: &'scope Fixture,
    model: &'scope str,
    clients: usize,
    stop: &'scope std::sync::atomic::AtomicBool,
) -> Vec<std::thread::ScopedJoinHandle<'scope, Answers>> {
    (0..clients)
        .map(|_| {
            scope.spawn(move || {
                let mut answers = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let answer = invoke_csv(f, model, "1,2\n");
                    answers.push((answer.status, answer.text()));
                }
                answers
            })
        })
        .collect()
}

/// Every looping client's answers.
fn joined(loops: Vec<std::thread::ScopedJoinHandle<'_, Answers>>) -> Answers {
    loops
        .into_iter()
        .flat_map(|handle| handle.join().expect("a looping client"))
        .collect()
}

/// The median of `count` CSV requests to `model`, one at a time, each answered correctly.
fn median_csv_latency(f: &Fixture, model: &str, count: usize) -> Result<Duration, Failed> {
    let mut took = Vec::with_capacity(count);
    for index in 0..count {
        let csv = format!("{index},2\n");
        let started = Instant::now();
        let answer = invoke_csv(f, model, &csv);
        took.push(started.elapsed());
        ensure!(
            answer.status == 200 && answer.text() == csv,
            "{model}: {} {}",
            answer.status,
            answer.text()
        );
    }
    took.sort();
    Ok(took[count / 2])
}

/// One model's plugin looping to its time limit at full concurrency leaves another model's
/// requests as fast as they were, within a wide margin: the loops run on the guest threads
/// within the model's share, not on the threads serving connections. (When guests ran on the
/// serving threads, the other model's median went from about 1 ms to over 100 ms.) The bound
/// compares two medians measured in the same run, so a slow machine slows both.
fn a_model_whose_plugin_loops_does_not_slow_another(f: &Fixture) -> Result<(), Failed> {
    load_spinner_and_steady(f, "spinner", "steady")?;
    let looped = invoke_csv(f, "spinner", "1,2\n");
    ensure!(looped.status == 504, "{} {}", looped.status, looped.text());

    let quiet = median_csv_latency(f, "steady", 60)?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (noisy, answers) = std::thread::scope(|scope| -> Result<_, Failed> {
        let loops = looping_clients(scope, f, "spinner", 6, &stop);
        std::thread::sleep(Duration::from_millis(300));
        let noisy = median_csv_latency(f, "steady", 60);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let answers: Vec<u16> = joined(loops).iter().map(|(status, _)| *status).collect();
        Ok((noisy?, answers))
    })?;
    ensure!(
        !answers.is_empty() && answers.iter().all(|status| *status == 504),
        "the looping model's answers: {answers:?}"
    );
    let bound = (quiet * 4).max(quiet + Duration::from_millis(20));
    ensure!(
        noisy <= bound,
        "another model's median went from {quiet:?} to {noisy:?} beside the loops (bound {bound:?})"
    );
    unload(f, "spinner")?;
    unload(f, "steady")
}

/// An artifact whose plugin and signature are links to another model's files (valid bytes,
/// valid signature) is refused: a model's plugins are files in its own folder.
fn a_model_cannot_use_another_models_plugin_files(f: &Fixture) -> Result<(), Failed> {
    let manifest = csv_manifest("");
    let owner = artifact(
        f,
        "owner",
        &["csv_request", "csv_json_response"],
        true,
        Some(&manifest),
    )?;
    let loaded = load(f, "owner", &owner);
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    let borrower = artifact(f, "borrower", &[], false, Some(&manifest))?;
    for file in [
        "csv_request.wasm",
        "csv_request.wasm.sig",
        "csv_json_response.wasm",
        "csv_json_response.wasm.sig",
    ] {
        std::os::unix::fs::symlink(
            Path::new(&owner).join(file),
            Path::new(&borrower).join(file),
        )?;
    }
    let refused = load(f, "borrower", &borrower);
    ensure!(
        refused.status == 400
            && refused
                .error()
                .contains("is not a file in the model's folder"),
        "{} {}",
        refused.status,
        refused.text()
    );
    let answer = invoke_csv(f, "owner", "5,6\n");
    ensure!(
        answer.status == 200 && answer.text() == "5,6\n",
        "{} {}",
        answer.status,
        answer.text()
    );
    unload(f, "owner")
}

/// Unloading a model while its plugin loops in several calls at once: the unload answers, the
/// calls in flight end with a clean error each, the name loads again, and another model serves
/// throughout.
fn a_model_unloaded_while_its_plugin_loops_leaves_the_endpoint_serving(
    f: &Fixture,
) -> Result<(), Failed> {
    let spinner = load_spinner_and_steady(f, "spinner2", "steady2")?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let answers = std::thread::scope(|scope| -> Result<Vec<(u16, String)>, Failed> {
        let loops = looping_clients(scope, f, "spinner2", 4, &stop);
        std::thread::sleep(Duration::from_millis(500));
        let unloaded = unload(f, "spinner2");
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let answers = joined(loops);
        unloaded?;
        Ok(answers)
    })?;
    // Each call answered: the loop's time limit, or the model is gone.
    for (status, text) in &answers {
        ensure!(
            (*status == 504 && text.contains("time limit of 100 ms")) || *status == 404,
            "{status} {text}"
        );
    }
    ensure!(
        answers.iter().any(|(status, _)| *status == 404),
        "no call saw the model gone: {answers:?}"
    );
    let answer = invoke_csv(f, "steady2", "7,8\n");
    ensure!(
        answer.status == 200 && answer.text() == "7,8\n",
        "{} {}",
        answer.status,
        answer.text()
    );
    let again = load(f, "spinner2", &spinner);
    ensure!(
        again.status == 200,
        "reload: {} {}",
        again.status,
        again.text()
    );
    unload(f, "spinner2")?;
    unload(f, "steady2")
}

/// One model's plugins are held to `[model_plugins] budget_mb` (2 MiB on this server), counted
/// at load: sixteen copies of one plugin (the same bytes, configuration, assets and limits) are
/// initialised and compiled once and share its compiled image, well within it; sixteen
/// configurations of it are sixteen images, past it, and the load is refused naming the
/// setting, with nothing loaded. (Before, every copy was compiled and kept: 16 copies of the
/// Python CSV adapter held 650 MB per model.)
fn a_models_plugins_are_held_to_its_budget_and_copies_compiled_once(
    f: &Fixture,
) -> Result<(), Failed> {
    let manifest = |configured: bool| {
        let mut text = String::new();
        for index in 0..16 {
            let config = if configured {
                // A key the adapter does not read, allowed by `unread_config`: each copy's
                // configuration differs, so each is a plugin of its own.
                format!("unread_config = \"warn\"\nconfig = {{ copy = \"{index}\" }}\n")
            } else {
                String::new()
            };
            text.push_str(&entry(
                &format!("csv{index}"),
                "csv_request",
                &format!("content_types = [\"text/csv\"]\n{config}"),
            ));
        }
        text + "[models.\"*\"]\nrequest = \"csv0\"\n"
    };
    let copies = artifact(f, "copies", &["csv_request"], true, Some(&manifest(false)))?;
    let started = Instant::now();
    let loaded = load(f, "copies", &copies);
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    let state = &f.servers["mme_plugins"].1;
    let hosts = state.registry.plugin_hosts();
    let (_, host) = hosts
        .iter()
        .find(|(name, _)| name == "copies")
        .ok_or("the copies' plugins are not kept")?;
    let compiled = host.compiled();
    ensure!(
        compiled.compiled + compiled.from_cache <= 2,
        "16 copies compiled {compiled:?} components (the plugin and its initialised state: 2)"
    );
    ensure!(
        host.footprint_bytes() < 1 << 20,
        "16 copies hold {} bytes",
        host.footprint_bytes()
    );
    let answer = request(
        f.at("mme_plugins"),
        "POST",
        "/models/copies/invoke",
        &[("Content-Type", "text/csv")],
        b"1,2\n",
    );
    ensure!(answer.status == 200, "{} {}", answer.status, answer.text());
    let configured = artifact(
        f,
        "configured",
        &["csv_request"],
        true,
        Some(&manifest(true)),
    )?;
    let refused = load(f, "configured", &configured);
    ensure!(
        refused.status == 400
            && refused.error().contains("its 16 plugins would hold")
            && refused.error().contains(
                "past this endpoint's 2 MiB for one model's plugins ([model_plugins] budget_mb)"
            ),
        "{} {} (after {:?})",
        refused.status,
        refused.text(),
        started.elapsed()
    );
    let listed = get(f.at("mme_plugins"), "/models/configured");
    ensure!(listed.status == 404, "configured: {}", listed.status);
    unload(f, "copies")
}

/// The whole of a load is within the load time-out (3 s on `mme_slow`), its plugins' slow
/// initialisation included: three plugins each busy 1.5 s in `check-config` (within their
/// 2 s `init_time_limit_ms`) are answered 504 at the time-out, the load dropped where it stood
/// and its name free again at once; meanwhile `/ping` answers. (Before, plugins loaded before
/// the time-out started and outside it: such a load answered 200 after 4.5 s, and after 181 s
/// with three plugins spinning 50 s.)
fn a_load_is_bounded_whole_by_its_time_out(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme_slow");
    let mut manifest = String::new();
    for index in 0..3 {
        manifest.push_str(&entry(
            &format!("slow{index}"),
            "hostile",
            // `copy` (unread, allowed by unread_config) makes each a plugin of its own.
            &format!(
                "unread_config = \"warn\"\n\
                 config = {{ mode = \"spin-config\", spin_ms = \"1500\", copy = \"{index}\" }}\n"
            ),
        ));
    }
    manifest.push_str("[models.\"*\"]\nrequest = \"slow0\"\n");
    let slow = artifact(f, "slow_init", &["hostile"], true, Some(&manifest))?;
    let load_at = |name: &str, url: &str| {
        let body = json!({"model_name": name, "url": url}).to_string();
        request(at, "POST", "/models", &[], body.as_bytes())
    };
    let pinged = std::thread::scope(|scope| {
        let loading = scope.spawn(|| {
            let started = Instant::now();
            (load_at("slow", &slow), started.elapsed())
        });
        let mut pings = Vec::new();
        while !loading.is_finished() {
            let started = Instant::now();
            pings.push((get(at, "/ping").status, started.elapsed()));
            std::thread::sleep(Duration::from_millis(100));
        }
        let (answer, took) = loading.join().expect("load thread");
        (answer, took, pings)
    });
    let (answer, took, pings) = pinged;
    ensure!(
        answer.status == 504 && answer.error().contains("did not load within 3 s"),
        "{} {} after {took:?}",
        answer.status,
        answer.text()
    );
    ensure!(
        took < SLOW_LOAD_TIMEOUT + Duration::from_millis(1500),
        "answered after {took:?}, the time-out is {SLOW_LOAD_TIMEOUT:?}"
    );
    ensure!(
        pings
            .iter()
            .all(|(status, took)| *status == 200 && *took < Duration::from_secs(1)),
        "pings during the load: {pings:?}"
    );
    // The name is free at once: a load of it now is the model's own, not a 409.
    let plain = artifact(f, "slow_plain", &[], false, None)?;
    let loaded = load_at("slow", &plain);
    ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
    let listed = get(at, "/models/slow");
    ensure!(
        listed.status == 200 && listed.text().contains("slow_plain"),
        "{} {}",
        listed.status,
        listed.text()
    );
    let unloaded = request(at, "DELETE", "/models/slow", &[], b"");
    ensure!(unloaded.status == 200, "{}", unloaded.text());
    Ok(())
}
