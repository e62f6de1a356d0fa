//! Golden cases gating activation: a plugin's cases run at every load, in each language, for
//! every hook; one that fails keeps the plugin out (at start, at a reload, at a multi-model
//! load) while the plugins already serving go on; the signature covers them; `require_cases`
//! refuses plugins without them; `trident plugin test` shows every case.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    cases_gate_the_load_in_each_language,
    cases_cover_every_hook,
    a_plugin_that_loops_or_hogs_in_its_case_is_refused_within_its_limits,
    cases_files_that_cannot_be_trusted_are_refused_by_name,
    a_signature_covers_the_cases,
    require_cases_refuses_plugins_without_them,
    a_reload_whose_case_fails_keeps_the_plugins_serving,
    a_model_whose_plugin_fails_its_case_is_not_loaded,
    plugin_test_prints_every_case_and_fails_on_a_difference,
    cases_hold_every_value_of_a_tensor_and_set_custom_attributes,
];

/// Cases of the CSV request adapters (any language), configured with `datatype = "FP32"`;
/// `last` is the last element the first case expects (4 passes).
fn csv_cases(last: f64) -> String {
    format!(
        r#"
[[case]]
name = "two rows"
content_type = "text/csv"
body = "1,2\n3,4.5\n"
expect = {{ inputs = [{{ name = "INPUT0", datatype = "FP32", shape = [2, 2], data = [1, 2, 3, {last}] }}] }}

[[case]]
name = "a word is refused"
content_type = "text/csv"
body = "1,x\n"
expect = {{ status = 400, message = "'x' is not a valid" }}
"#
    )
}

/// Writes `cases` into `dir` as `name`; the manifest's `cases = { ... }` for it.
fn cases_entry(dir: &Path, name: &str, cases: &str) -> String {
    std::fs::write(dir.join(name), cases).unwrap();
    format!(
        "cases = {{ path = \"{name}\", sha256 = \"{}\" }}",
        trident::plugins::platform::loading::sha256_hex(cases.as_bytes())
    )
}

/// Loads the manifest `text`, written into `dir`, as the server does at start.
fn load_in(f: &Fixture, dir: &Path, text: &str) -> Result<PluginHost, String> {
    let path = dir.join("plugins.toml");
    std::fs::write(&path, text).unwrap();
    let manifest = Manifest::load(&path).map_err(|e| e.to_string())?;
    f.runtime
        .block_on(PluginHost::load(&manifest))
        .map_err(|e| e.to_string())
}

/// The CSV request adapters in Rust, Python and JavaScript.
fn csv_adapters() -> [(&'static str, PathBuf); 3] {
    [
        ("rust", guest("csv_request")),
        (
            "python",
            common::plugins::python_guest("plugins/python/csv_request", "request-adapter-plugin"),
        ),
        (
            "javascript",
            common::plugins::js_guest("plugins/js/csv_request", "request-adapter-plugin"),
        ),
    ]
}

fn cases_gate_the_load_in_each_language(f: &Fixture) -> Result<(), Failed> {
    for (language, wasm) in csv_adapters() {
        let dir = tempfile::tempdir()?;
        // Time to spare on a loaded machine: a Python call there outlasted the default 100 ms
        // (the check is about the cases, not speed).
        let config = "time_limit_ms = 5000\nconfig = { datatype = \"FP32\" }";
        let passing = cases_entry(dir.path(), "csv.cases.toml", &csv_cases(4.5));
        let host = load_in(
            f,
            dir.path(),
            &plugin_at("csv", &wasm, &format!("{config}\n{passing}")),
        )
        .map_err(|e| format!("{language}: passing cases refused: {e}"))?;
        ensure!(host.plugins().count() == 1, "{language}");
        // The cases' calls are not in the account the plugin serves with.
        let account = host.plugins().next().map(|p| {
            p.account
                .load()
                .snapshot(trident::plugins::platform::accounting::Hook::Request)
                .outcomes
        });
        ensure!(account == Some([0; 5]), "{language}: {account:?}");

        let failing = cases_entry(dir.path(), "csv.cases.toml", &csv_cases(5.0));
        let error = load_in(
            f,
            dir.path(),
            &plugin_at("csv", &wasm, &format!("{config}\n{failing}")),
        )
        .err()
        .ok_or_else(|| format!("{language}: a failing case was accepted"))?;
        ensure!(
            error
                == "plugin 'csv': golden case 'two rows' fails: inputs[0].data[3]: expected 5, got 4.5",
            "{language}: {error}"
        );
    }
    Ok(())
}

/// A response adapter (Python), the generate request, generate response and stream hooks (the
/// chat plugin) and the OOM classifier, each with a passing case and a failing one.
fn cases_cover_every_hook(f: &Fixture) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let out = common::plugins::python_guest(
        "plugins/python/csv_json_response",
        "response-adapter-plugin",
    );
    let response = |body: &str| {
        format!(
            r#"
[[case]]
name = "csv out"
hook = "response"
accept = "text/csv"
outputs = [{{ name = "OUTPUT0", datatype = "FP32", shape = [2, 2], data = [1.5, 2, 3, 0.1] }}]
expect = {{ status = 200, content_type = "text/csv", body = "{body}" }}

[[case]]
name = "json out"
hook = "response"
accept = "application/json"
outputs = {{ outputs = [{{ name = "OUTPUT0", datatype = "FP32", shape = [1, 2], data = [0.25, 1] }}] }}
expect = {{ content_type = "application/json", json = {{ predictions = [[0.25, 1.0]] }} }}
"#
        )
    };
    // Time to spare on a loaded machine, as above.
    let entry = format!(
        "time_limit_ms = 5000\n{}",
        cases_entry(dir.path(), "out.cases.toml", &response("1.5,2\\n3,0.1\\n"))
    );
    load_in(f, dir.path(), &plugin_at("out", &out, &entry))
        .map_err(|e| format!("the response adapter's cases: {e}"))?;
    let entry = format!(
        "time_limit_ms = 5000\n{}",
        cases_entry(dir.path(), "out.cases.toml", &response("1.5,2\\n3,0.2\\n"))
    );
    let error = load_in(f, dir.path(), &plugin_at("out", &out, &entry)).err();
    ensure!(
        error.as_deref()
            == Some(
                "plugin 'out': golden case 'csv out' fails: body: expected \"1.5,2\\n3,0.2\\n\", \
                 got \"1.5,2\\n3,0.1\\n\""
            ),
        "{error:?}"
    );

    let chat = |stream_end: &str| {
        format!(
            r#"
[[case]]
name = "a prompt"
hook = "generate-request"
body = '{{"model": "m", "messages": [{{"role": "user", "content": "hi there"}}], "stream": true}}'
expect = {{ stream = true, json = {{ PROMPT = "user: hi there\nassistant:" }} }}

[[case]]
name = "no messages"
hook = "generate-request"
body = '{{"messages": []}}'
expect = {{ status = 400, message = "'messages' must be a non-empty list" }}

[[case]]
name = "one answer"
hook = "generate-response"
body = '{{"messages": [{{"role": "user", "content": "hi"}}]}}'
outputs = [{{ TEXT = "Echo: " }}, {{ TEXT = "hi" }}]
expect = {{ status = 200, json = {{ object = "chat.completion", choices = [{{ message = {{ content = "Echo: hi" }} }}] }} }}

[[case]]
name = "a stream"
hook = "stream"
body = '{{"messages": [{{"role": "user", "content": "hi"}}], "stream": true}}'
outputs = [{{ TEXT = "Echo: " }}, {{ TEXT = "hi" }}]
expect = {{ events = [{{ created = 0 }}, {{ choices = [{{ delta = {{ content = "hi" }} }}] }}, {{}}, "{stream_end}"] }}
"#
        )
    };
    let entry = cases_entry(dir.path(), "chat.cases.toml", &chat("[DONE]"));
    load_in(f, dir.path(), &plugin("chat", "openai_chat", &entry))
        .map_err(|e| format!("the chat plugin's cases: {e}"))?;
    let entry = cases_entry(dir.path(), "chat.cases.toml", &chat("[END]"));
    let error = load_in(f, dir.path(), &plugin("chat", "openai_chat", &entry)).err();
    ensure!(
        error.as_deref()
            == Some(
                "plugin 'chat': golden case 'a stream' fails: events[3]: expected \"[END]\", got \"[DONE]\""
            ),
        "{error:?}"
    );
    // The OOM classifier on engine error messages.
    let oom = |verdict: bool| {
        format!(
            "[[case]]\nname = \"cuda\"\nhook = \"oom\"\nbody = \"CUDA out of memory. Tried to allocate 2 GiB\"\n\
             expect = {{ out_of_memory = {verdict} }}\n\n\
             [[case]]\nname = \"a shape\"\nhook = \"oom\"\nbody = \"unexpected shape for input 'INPUT0'\"\n\
             expect = {{ out_of_memory = false }}\n"
        )
    };
    let entry = cases_entry(dir.path(), "oom.cases.toml", &oom(true));
    load_in(f, dir.path(), &plugin("oom", "oom_default", &entry))
        .map_err(|e| format!("the OOM plugin's cases: {e}"))?;
    let entry = cases_entry(dir.path(), "oom.cases.toml", &oom(false));
    let error = load_in(f, dir.path(), &plugin("oom", "oom_default", &entry)).err();
    ensure!(
        error.as_deref()
            == Some(
                "plugin 'oom': golden case 'cuda' fails: out_of_memory: expected false, got true"
            ),
        "{error:?}"
    );
    Ok(())
}

/// A case is a call like any other: a plugin that loops in it is stopped at its time limit, one
/// that hogs memory at its memory limit, and the load is refused saying so at the first case
/// that fails: 64 cases of a plugin that loops cost the load one time limit, not 64.
fn a_plugin_that_loops_or_hogs_in_its_case_is_refused_within_its_limits(
    f: &Fixture,
) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let cases: String = (0..64)
        .map(|i| {
            let name = if i == 0 {
                "any".to_owned()
            } else {
                format!("case {i}")
            };
            format!("[[case]]\nname = \"{name}\"\nbody = \"1\"\nexpect = {{ inputs = [] }}\n")
        })
        .collect();
    for (mode, limit, why) in [
        (
            "loop",
            "time_limit_ms = 200",
            "exceeded its time limit of 200 ms",
        ),
        ("hog", "memory_limit_mb = 32", "memory"),
    ] {
        let entry = cases_entry(dir.path(), "hostile.cases.toml", &cases);
        let started = Instant::now();
        let error = load_in(f, dir.path(), &hostile(mode, &format!("{limit}\n{entry}")))
            .err()
            .ok_or_else(|| format!("{mode}: accepted"))?;
        ensure!(
            error.contains("golden case 'any' fails: expected an answer, the plugin refused it")
                && error.contains(why),
            "{mode}: {error}"
        );
        // All 64 would take 12.8 s at 200 ms each.
        ensure!(
            started.elapsed() < Duration::from_secs(6),
            "{mode}: the load took {:?}",
            started.elapsed()
        );
    }
    still_fine(f)
}

/// Cases files that are not what the manifest pins, lead out of its folder, are too large, or
/// do not parse are refused, naming the plugin, the file and what is wrong.
fn cases_files_that_cannot_be_trusted_are_refused_by_name(f: &Fixture) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let folder = dir.path().join("m");
    std::fs::create_dir(&folder)?;
    let config = "config = { datatype = \"FP32\" }";
    let csv = |cases: &str| plugin("csv", "csv_request", &format!("{config}\n{cases}"));
    let good = csv_cases(4.5);
    let digest = trident::plugins::platform::loading::sha256_hex(good.as_bytes());
    std::fs::write(folder.join("good.toml"), &good)?;
    std::fs::write(dir.path().join("outside.toml"), &good)?;
    std::os::unix::fs::symlink("../outside.toml", folder.join("link.toml"))?;
    let big = format!("# {}\n{good}", "x".repeat(1 << 20));
    std::fs::write(folder.join("big.toml"), &big)?;
    let big_digest = trident::plugins::platform::loading::sha256_hex(big.as_bytes());
    let entry =
        |path: &str, sha: &str| format!("cases = {{ path = \"{path}\", sha256 = \"{sha}\" }}");
    let refused = [
        (
            entry("good.toml", &"ab".repeat(32)),
            "cases (good.toml): sha256 mismatch",
        ),
        (
            entry("link.toml", &digest),
            "cases (link.toml): is not a file in the manifest's folder",
        ),
        (
            entry("../outside.toml", &digest),
            "cases: path ../outside.toml must name a file beside the manifest",
        ),
        (
            entry("big.toml", &big_digest),
            "cases (big.toml): is 1048893 bytes; a cases file may have at most 1048576",
        ),
        (
            entry("gone.toml", &digest),
            "cases (gone.toml): cannot read it",
        ),
    ];
    for (cases, why) in refused {
        let error = load_in(f, &folder, &csv(&cases))
            .err()
            .ok_or_else(|| format!("accepted: {cases}"))?;
        ensure!(
            error.contains("plugin 'csv': ") && error.contains(why),
            "{cases}: {error}"
        );
    }
    for (text, why) in [
        (
            "[[case]]\nname = \"a\"\nexpect = {}\ncolour = 1\n".to_owned(),
            "unknown field `colour`",
        ),
        (
            "[[case]]\nname = \"a\"\nexpect = {}\n[[case]]\nname = \"a\"\nexpect = {}\n".to_owned(),
            "case 'a': each case needs a name of its own",
        ),
        (
            "[[case]]\nname = \"a\"\nbody = \"1\"\nbody_base64 = \"MQ==\"\nexpect = {}\n"
                .to_owned(),
            "case 'a': give body or body_base64, not both",
        ),
        (
            "[[case]]\nname = \"a\"\nhook = \"response\"\nexpect = {}\n".to_owned(),
            "case 'a': this hook needs outputs",
        ),
        (
            "[[case]]\nname = \"a\"\nheaders = { \"bad name\" = \"v\" }\nexpect = {}\n".to_owned(),
            "is not a header name",
        ),
        (
            "[tolerance]\nrelative = -1.0\n[[case]]\nname = \"a\"\nexpect = {}\n".to_owned(),
            "tolerance relative = -1",
        ),
        ("".to_owned(), "holds no [[case]]"),
        (
            (0..65)
                .map(|i| format!("[[case]]\nname = \"c{i}\"\nexpect = {{}}\n"))
                .collect(),
            "holds 65 cases; a plugin may carry at most 64",
        ),
    ] {
        let cases = cases_entry(&folder, "bad.toml", &text);
        let error = load_in(f, &folder, &csv(&cases))
            .err()
            .ok_or_else(|| format!("accepted: {text:.80}"))?;
        ensure!(
            error.starts_with("plugin 'csv': cases (bad.toml): ") && error.contains(why),
            "{why}: {error}"
        );
    }
    // A case whose hook the plugin does not export says so.
    let cases = cases_entry(
        &folder,
        "hook.toml",
        "[[case]]\nname = \"a\"\nhook = \"stream\"\noutputs = []\nexpect = {}\n",
    );
    let error = load_in(f, &folder, &csv(&cases)).err();
    ensure!(
        error.as_deref()
            == Some(
                "plugin 'csv': golden case 'a' fails: the plugin does not export stream-adapter"
            ),
        "{error:?}"
    );
    Ok(())
}

/// With signatures required, the signature covers the cases: a plugin signed with its cases
/// loads; the same plugin with other cases (pinned in the manifest, passing) is refused.
fn a_signature_covers_the_cases(f: &Fixture) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    std::fs::copy(guest("csv_request"), dir.path().join("csv.wasm"))?;
    let public = trident::plugins::platform::signing::public_key(common::plugins::SIGNING_SECRET)?;
    let top = format!("require_signatures = true\ntrusted_keys = [\"{public}\"]\n");
    let manifest = |cases: &str| {
        format!(
            "{top}[plugins.csv]\npath = \"csv.wasm\"\nsha256 = \"{}\"\nconfig = {{ datatype = \"FP32\" }}\n{cases}\n",
            digest("csv_request")
        )
    };
    let signed = cases_entry(dir.path(), "csv.cases.toml", &csv_cases(4.5));
    common::plugins::sign_with_cases(dir.path(), "csv.wasm", &[], Some("csv.cases.toml"));
    load_in(f, dir.path(), &manifest(&signed))
        .map_err(|e| format!("signed with its cases: {e}"))?;

    let other = format!("{}\n# another case set\n", csv_cases(4.5));
    let swapped = cases_entry(dir.path(), "csv.cases.toml", &other);
    let error = load_in(f, dir.path(), &manifest(&swapped)).err();
    ensure!(
        error.as_deref().is_some_and(|e| e.starts_with(
            "plugin 'csv': its signature does not verify with any trusted key over the .wasm, \
             the cases file as they are now: one of them changed since it was signed"
        )),
        "{error:?}"
    );
    // Nor do the cases' signature and the plugin's own differ: dropping the cases is refused too.
    let error = load_in(f, dir.path(), &manifest("")).err();
    ensure!(
        error.as_deref().is_some_and(|e| e.starts_with(
            "plugin 'csv': its signature does not verify with any trusted key over the .wasm as \
             they are now"
        )),
        "{error:?}"
    );
    Ok(())
}

fn require_cases_refuses_plugins_without_them(f: &Fixture) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let config = "config = { datatype = \"FP32\" }";
    let error = load_in(
        f,
        dir.path(),
        &format!(
            "require_cases = true\n{}",
            plugin("csv", "csv_request", config)
        ),
    )
    .err()
    .ok_or("a plugin without cases was accepted")?;
    ensure!(
        error.starts_with("plugin 'csv': carries no golden cases, and this endpoint requires them"),
        "{error}"
    );
    let cases = cases_entry(dir.path(), "csv.cases.toml", &csv_cases(4.5));
    load_in(
        f,
        dir.path(),
        &format!(
            "require_cases = true\n{}",
            plugin("csv", "csv_request", &format!("{config}\n{cases}"))
        ),
    )
    .map_err(|e| format!("a plugin with cases was refused: {e}"))?;
    Ok(())
}

/// `POST /plugins/reload` with a manifest whose plugin fails its case: 400 naming the case,
/// and the plugins already loaded serve on; with the case mended the reload takes.
fn a_reload_whose_case_fails_keeps_the_plugins_serving(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("csv");
    let path = f.manifests.path().join("csv.toml");
    let good = std::fs::read_to_string(&path)?;
    let with_cases = |last: &str| {
        let cases = format!(
            "[[case]]\nname = \"two\"\ncontent_type = \"text/csv\"\nbody = \"2\\n\"\n\
             expect = {{ inputs = [{{ name = \"INPUT0\", data = [{last}] }}] }}\n"
        );
        let entry = cases_entry(f.manifests.path(), "csv.cases.toml", &cases);
        good.replacen(
            "config = { input = \"INPUT0\", datatype = \"FP32\" }",
            &format!("config = {{ input = \"INPUT0\", datatype = \"FP32\" }}\n{entry}"),
            1,
        )
    };
    let reload = || request(at, "POST", "/plugins/reload", &[], b"");
    std::fs::write(&path, with_cases("3"))?;
    let refused = reload();
    ensure!(
        refused.status == 400
            && refused.error()
                == "plugin 'csv': golden case 'two' fails: inputs[0].data[0]: expected 3, got 2.0",
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

    std::fs::write(&path, with_cases("2"))?;
    let taken = reload();
    std::fs::write(&path, &good)?;
    ensure!(taken.status == 200, "{} {}", taken.status, taken.text());
    let served = send(at, "text/csv", Some("text/csv"), &[], "2\n");
    ensure!(
        served.status == 200 && served.text() == "5\n",
        "{} {}",
        served.status,
        served.text()
    );
    ensure!(reload().status == 200, "restoring the manifest failed");
    Ok(())
}

/// A model artifact whose plugin fails its case: the load answers 400 naming the case, and the
/// model is not loaded; with passing cases (signed with them) it loads and serves.
fn a_model_whose_plugin_fails_its_case_is_not_loaded(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme_plugins");
    for (name, last, loads) in [("cased_bad", "9", false), ("cased_good", "1", true)] {
        let folder = f.models_root.path().join(name).join("model");
        common::copy_model(
            "native_identity_fp32",
            &f.models_root.path().join(name),
            "model",
        );
        std::fs::copy(guest("csv_request"), folder.join("csv.wasm"))?;
        let cases = format!(
            "[[case]]\nname = \"one\"\ncontent_type = \"text/csv\"\nbody = \"1\\n\"\n\
             expect = {{ inputs = [{{ data = [{last}] }}] }}\n"
        );
        let entry = cases_entry(&folder, "csv.cases.toml", &cases);
        let secret = model_plugins::SIGNING_SECRET;
        let wasm = std::fs::read(folder.join("csv.wasm"))?;
        let message = trident::plugins::platform::signing::signed_message(
            &wasm,
            [],
            Some(&trident::plugins::platform::loading::sha256_hex(
                cases.as_bytes(),
            )),
        );
        std::fs::write(
            folder.join("csv.wasm.sig"),
            trident::plugins::platform::signing::sign(&message, secret)?,
        )?;
        std::fs::write(
            folder.join("plugins.toml"),
            format!(
                "[plugins.csv]\npath = \"csv.wasm\"\nsha256 = \"{}\"\ncontent_types = [\"text/csv\"]\n{entry}\n[models.\"*\"]\nrequest = \"csv\"\n",
                digest("csv_request")
            ),
        )?;
        let body = json!({"model_name": name, "url": folder.display().to_string()}).to_string();
        let loaded = request(at, "POST", "/models", &[], body.as_bytes());
        let listed = request(at, "GET", &format!("/models/{name}"), &[], b"");
        if loads {
            ensure!(loaded.status == 200, "{} {}", loaded.status, loaded.text());
            let answer = request(
                at,
                "POST",
                &format!("/models/{name}/invoke"),
                &[("Content-Type", "text/csv")],
                b"1\n",
            );
            ensure!(answer.status == 200, "{} {}", answer.status, answer.text());
            ensure!(
                request(at, "DELETE", &format!("/models/{name}"), &[], b"").status == 200,
                "unload"
            );
        } else {
            ensure!(
                loaded.status == 400
                    && loaded.text().contains(
                        "golden case 'one' fails: inputs[0].data[0]: expected 9, got 1.0"
                    ),
                "{} {}",
                loaded.status,
                loaded.text()
            );
            ensure!(
                listed.status == 404,
                "the model is listed: {} {}",
                listed.status,
                listed.text()
            );
        }
    }
    Ok(())
}

/// `trident plugin test`: every case of a plugin, `ok` or `FAIL` with its differences, in each
/// language; exit 1 when one fails; `--manifest` tests a manifest's plugins as the server
/// loads them.
fn plugin_test_prints_every_case_and_fails_on_a_difference(_: &Fixture) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let test = |args: &[&OsStr]| -> Result<(bool, String, String), Failed> {
        let output = common::command(env!("CARGO_BIN_EXE_trident"))
            .args(["plugin", "test"])
            .args(args)
            .output()?;
        Ok((
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ))
    };
    let passing = dir.path().join("passing.toml");
    std::fs::write(&passing, csv_cases(4.5))?;
    let failing = dir.path().join("failing.toml");
    std::fs::write(
        &failing,
        format!(
            "{}\n[[case]]\nname = \"ints\"\ncontent_type = \"text/csv\"\nbody = \"7\"\n\
             expect = {{ inputs = [{{ datatype = \"INT64\", data = [8] }}] }}\n",
            csv_cases(5.0)
        ),
    )?;
    for (language, wasm) in csv_adapters() {
        let common_args = |cases: &Path| -> Vec<std::ffi::OsString> {
            vec![
                wasm.clone().into(),
                "--cases".into(),
                cases.into(),
                "--config".into(),
                "datatype=FP32".into(),
                "--time-limit-ms".into(),
                "10000".into(),
            ]
        };
        let args = common_args(&passing);
        let (ok, stdout, stderr) = test(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>())?;
        ensure!(
            ok && stdout
                .contains("  ok    two rows\n  ok    a word is refused\n2 passed, 0 failed"),
            "{language}: {stdout}{stderr}"
        );
        let args = common_args(&failing);
        let (ok, stdout, stderr) = test(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>())?;
        ensure!(
            !ok && stdout.contains(
                "  FAIL  two rows\n        inputs[0].data[3]: expected 5, got 4.5\n  ok    a word is refused\n  FAIL  ints\n        inputs[0].data[0]: expected 8, got 7.0\n        inputs[0].datatype: expected \"INT64\", got \"FP32\"\n1 passed, 2 failed"
            ) && stderr.contains("a golden case failed"),
            "{language}: {stdout}{stderr}"
        );
    }
    // A manifest, loaded as the server loads it.
    let entry = cases_entry(dir.path(), "csv.cases.toml", &csv_cases(5.0));
    let manifest = dir.path().join("plugins.toml");
    std::fs::write(
        &manifest,
        format!(
            "{}{}",
            plugin(
                "csv",
                "csv_request",
                &format!("config = {{ datatype = \"FP32\" }}\n{entry}")
            ),
            plugin("out", "csv_json_response", "")
        ),
    )?;
    let (ok, stdout, stderr) = test(&["--manifest".as_ref(), manifest.as_os_str()])?;
    ensure!(
        !ok && stdout.contains("plugin csv:\n  FAIL  two rows\n") && !stdout.contains("plugin out"),
        "{stdout}{stderr}"
    );
    let (ok, _, stderr) = test(&[guest("csv_request").as_os_str()])?;
    ensure!(!ok && stderr.contains("--cases"), "{stderr}");
    Ok(())
}

/// An image adapter held to every value of its tensor: a photo Pillow made, sent as the body
/// from a file, and numpy's tensor of it as a `.npy` reference (`data_file`), both beside the
/// cases and pinned there. The adapter passes; the same adapter reading the channels as BGR (red
/// and blue swapped) is refused naming a value; a changed reference is refused by its digest.
/// Custom attributes per case hold a response adapter's `top_k`.
fn cases_hold_every_value_of_a_tensor_and_set_custom_attributes(f: &Fixture) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let (png, npy) = (dir.path().join("photo.png"), dir.path().join("photo.npy"));
    let made = common::process::python_client(
        "reference_tensor.py",
        "",
        &serde_json::json!({ "png": png, "npy": npy }),
    );
    ensure!(
        made["shape"] == serde_json::json!([1, 3, 224, 224]),
        "{made}"
    );
    let sha = |path: &Path| {
        trident::plugins::platform::loading::sha256_hex(&std::fs::read(path).unwrap())
    };
    let cases = format!(
        r#"
[files]
photo = {{ path = "photo.png", sha256 = "{}" }}
tensor = {{ path = "photo.npy", sha256 = "{}" }}

[[case]]
name = "every value of a photo"
content_type = "image/png"
body_file = "photo"
tolerance = {{ absolute = 1e-5, relative = 0 }}
expect = {{ inputs = [{{ name = "INPUT0", datatype = "FP32", data_file = "tensor" }}] }}
"#,
        sha(&png),
        sha(&npy)
    );
    let entry = cases_entry(dir.path(), "image.cases.toml", &cases);
    let image = |channels: &str| {
        plugin(
            "image",
            "image_tensor",
            &format!(
                "config = {{ input = \"INPUT0\", size = \"224\", resize_shorter = \"224\", \
                 channels = \"{channels}\" }}\n{entry}"
            ),
        )
    };
    load_in(f, dir.path(), &image("RGB")).map_err(|e| format!("the reference refused: {e}"))?;
    let error = load_in(f, dir.path(), &image("BGR"))
        .err()
        .ok_or("red and blue swapped passed its cases")?;
    ensure!(
        error.contains("golden case 'every value of a photo' fails: inputs[0].data[0]: expected"),
        "{error}"
    );
    // The reference changed after the cases were pinned: refused by its digest, by name.
    let mut changed = std::fs::read(&npy)?;
    let last = changed.len() - 1;
    changed[last] ^= 1;
    std::fs::write(&npy, changed)?;
    let error = load_in(f, dir.path(), &image("RGB"))
        .err()
        .ok_or("a changed reference accepted")?;
    ensure!(
        error.contains("cases file 'tensor'") && error.contains("sha256"),
        "{error}"
    );

    // Custom attributes, as a client sends them: top_k over the plugin's k, and past it.
    std::fs::write(dir.path().join("labels.txt"), "a\nb\nc\nd\n")?;
    let labels = format!(
        "assets = {{ labels = {{ path = \"labels.txt\", sha256 = \"{}\" }} }}",
        sha(&dir.path().join("labels.txt"))
    );
    let top_k = |expect: &str| {
        format!(
            r#"
[[case]]
name = "top two"
hook = "response"
custom_attributes = "top_k=2"
outputs = [{{ name = "OUTPUT0", datatype = "FP32", shape = [1, 4], data = [0.1, 0.4, 0.3, 0.2] }}]
expect = {expect}

[[case]]
name = "more than k"
hook = "response"
custom_attributes = "top_k=4"
outputs = [{{ name = "OUTPUT0", datatype = "FP32", shape = [1, 4], data = [0.1, 0.4, 0.3, 0.2] }}]
expect = {{ status = 400, message = "top_k" }}
"#
        )
    };
    let labels_plugin = |cases: &str| {
        let entry = cases_entry(dir.path(), "labels.cases.toml", cases);
        plugin(
            "labels",
            "top_k_labels",
            &format!("config = {{ output = \"OUTPUT0\", k = \"3\" }}\n{labels}\n{entry}"),
        )
    };
    let two = r#"{ json = [{ label = "b" }, { label = "c" }] }"#;
    load_in(f, dir.path(), &labels_plugin(&top_k(two)))
        .map_err(|e| format!("top_k=2 as a case's attribute: {e}"))?;
    let three = r#"{ json = [{ label = "b" }, { label = "c" }, { label = "d" }] }"#;
    let error = load_in(f, dir.path(), &labels_plugin(&top_k(three)))
        .err()
        .ok_or("the case's top_k was not applied")?;
    ensure!(error.contains("golden case 'top two' fails"), "{error}");
    Ok(())
}
