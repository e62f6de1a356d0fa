//! Pipelines (`trident:models`): a plugin that answers a request whole by calling the endpoint's
//! models (`tests/guests/pipeline-chain` over the `affine` model, `OUTPUT0 = 2 * INPUT0 + 1`),
//! and every bound of its calls: a model it may not call, a loop of calls, a tensor past its
//! bytes, a trap midway, a tensor the model refuses, a client that leaves midway. After each,
//! the next request is answered and nothing is left in the core.

use super::*;
use trident::engine::{Engine, InFlight};

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    a_pipeline_chains_model_calls_and_v2_clients_still_reach_the_model,
    every_bound_of_a_pipelines_model_calls_holds_and_the_endpoint_serves_on,
    a_client_that_leaves_mid_pipeline_cancels_its_model_calls,
    a_pipeline_naming_a_model_the_endpoint_lacks_is_refused_at_reload,
    a_pipelines_model_calls_are_accounted_on_metrics,
    golden_cases_stand_in_for_a_pipelines_models,
];

/// The pipelines of the `pipeline` server: one per mode of the guest, each a variant of the
/// `affine` model's entry (chosen with the target-variant header; `chain` serves by default).
pub(super) fn manifest() -> String {
    let pipeline = |name: &str, extra: &str| {
        plugin(
            name,
            "pipeline_chain",
            &format!("content_types = [\"application/json\"]\nmodels = [\"affine\"]\n{extra}"),
        )
    };
    let entries = [
        ("chain", "config = { times = \"3\" }"),
        (
            "calls_loop",
            "max_model_calls = 10\nconfig = { mode = \"loop\" }",
        ),
        (
            "forbidden",
            "config = { mode = \"forbidden\", other = \"secret\" }",
        ),
        (
            "huge",
            "max_model_mb = 4\nconfig = { mode = \"huge\", mb = \"8\" }",
        ),
        ("midway_trap", "config = { mode = \"trap\" }"),
        ("wrong_dtype", "config = { mode = \"wrong-dtype\" }"),
        (
            "leaves",
            "max_model_calls = 100000000\ntime_limit_ms = 60000\nconfig = { mode = \"loop\" }",
        ),
    ];
    // Time to spare on a loaded machine; the client that leaves gives its loop a minute.
    let mut text: String = entries
        .iter()
        .map(|(name, extra)| match extra.contains("time_limit_ms") {
            true => pipeline(name, extra),
            false => pipeline(name, &format!("time_limit_ms = 5000\n{extra}")),
        })
        .collect();
    text.push_str("[models.affine]\nvariants = [\n");
    for (name, _) in entries {
        let weight = if name == "chain" { 1000 } else { 1 };
        text.push_str(&format!(
            "  {{ name = \"{name}\", weight = {weight}, pipeline = \"{name}\" }},\n"
        ));
    }
    text.push_str("]\n");
    text
}

fn pipeline(f: &Fixture, variant: &str, body: &str) -> common::http_client::HttpResponse {
    send(
        f.at("pipeline"),
        "application/json",
        None,
        &[("X-Amzn-SageMaker-Target-Variant", variant)],
        body,
    )
}

/// The numbers of a chain's answer.
fn values(answer: &serde_json::Value) -> Vec<f64> {
    answer["values"]
        .as_array()
        .map(|values| {
            values
                .iter()
                .filter_map(serde_json::Value::as_f64)
                .collect()
        })
        .unwrap_or_default()
}

/// The chain answers (three calls: 1 → 3 → 7 → 15), the core holds nothing after it, and
/// `ping` says the server serves.
fn serves_after(f: &Fixture, what: &str) -> Result<(), Failed> {
    let response = pipeline(f, "chain", "[1, 2, 3]");
    ensure!(
        response.status == 200,
        "after {what}: {} {}",
        response.status,
        response.text()
    );
    let answer = response.json();
    ensure!(
        values(&answer) == [15.0, 23.0, 31.0] && answer["calls"] == 3,
        "after {what}: {answer}"
    );
    let engine = &f.servers["pipeline"].1.engine;
    let deadline = Instant::now() + Duration::from_secs(30);
    while engine.in_flight() != InFlight::default() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    ensure!(
        engine.in_flight() == InFlight::default(),
        "after {what}: left in the core: {:?}",
        engine.in_flight()
    );
    ensure!(
        get(f.at("pipeline"), "/ping").status == 200,
        "after {what}: ping"
    );
    Ok(())
}

fn a_pipeline_chains_model_calls_and_v2_clients_still_reach_the_model(
    f: &Fixture,
) -> Result<(), Failed> {
    serves_after(f, "nothing")?;
    let response = pipeline(f, "chain", "[0.5]");
    ensure!(values(&response.json()) == [11.0], "{}", response.text());
    ensure!(
        response.header("x-trident-variant") == Some("chain"),
        "{:?}",
        response.header("x-trident-variant")
    );
    // The plugin's own refusal of its body.
    let refused = pipeline(f, "chain", "not numbers");
    ensure!(
        refused.status == 400,
        "{} {}",
        refused.status,
        refused.text()
    );
    // A KServe v2 request is not the pipeline's: it reaches the model itself.
    let v2 = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1.0, 2.0]}]});
    let direct = send(
        f.at("pipeline"),
        "application/json",
        None,
        &[],
        &v2.to_string(),
    );
    ensure!(direct.status == 200, "{} {}", direct.status, direct.text());
    ensure!(
        direct.json()["outputs"][0]["data"] == json!([3.0, 5.0]),
        "{}",
        direct.text()
    );
    serves_after(f, "a v2 request")
}

fn every_bound_of_a_pipelines_model_calls_holds_and_the_endpoint_serves_on(
    f: &Fixture,
) -> Result<(), Failed> {
    // (variant, status, what the error must say)
    let cases = [
        (
            "calls_loop",
            500,
            "budget of 10 model calls per request (max_model_calls)",
        ),
        ("forbidden", 403, "model 'secret' may not be called"),
        (
            "huge",
            500,
            "budget of 4 MiB of model tensors per request (max_model_mb)",
        ),
        ("midway_trap", 500, "plugin 'midway_trap' failed"),
        ("wrong_dtype", 400, "model 'affine'"),
    ];
    for (variant, status, says) in cases {
        let response = pipeline(f, variant, "[1]");
        ensure!(
            response.status == status && response.text().contains(says),
            "{variant}: {} {} (wanted {status} saying {says:?})",
            response.status,
            response.text()
        );
        serves_after(f, variant)?;
    }
    Ok(())
}

fn a_client_that_leaves_mid_pipeline_cancels_its_model_calls(f: &Fixture) -> Result<(), Failed> {
    use std::io::Write;
    let at = f.at("pipeline");
    {
        let mut stream = std::net::TcpStream::connect(at)?;
        write!(
            stream,
            "POST /invocations HTTP/1.1\r\nHost: {at}\r\nContent-Type: application/json\r\n\
             X-Amzn-SageMaker-Target-Variant: leaves\r\nContent-Length: 3\r\n\r\n[1]"
        )?;
        std::thread::sleep(Duration::from_millis(500));
    }
    // The loop calls the model back to back for up to a minute unless its call was stopped:
    // once it is, the core stays empty.
    serves_after(f, "a client that left")?;
    let engine = &f.servers["pipeline"].1.engine;
    for _ in 0..50 {
        ensure!(
            engine.in_flight() == InFlight::default(),
            "the left pipeline still calls the model: {:?}",
            engine.in_flight()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// A reload whose pipeline may call a model the repository does not have (a misspelling) is
/// refused, naming both, and the pipelines loaded before serve on.
fn a_pipeline_naming_a_model_the_endpoint_lacks_is_refused_at_reload(
    f: &Fixture,
) -> Result<(), Failed> {
    let at = f.at("pipeline");
    let path = f.manifests.path().join("pipeline.toml");
    let good = std::fs::read_to_string(&path)?;
    let reload = || request(at, "POST", "/plugins/reload", &[], b"");
    ensure!(reload().status == 200, "the manifest as it is reloads");
    let misspelt = good.replacen(
        "models = [\"affine\"]",
        "models = [\"affine\", \"afine\"]",
        1,
    );
    ensure!(misspelt != good, "{good}");
    std::fs::write(&path, misspelt)?;
    let refused = reload();
    std::fs::write(&path, &good)?;
    ensure!(
        refused.status == 400
            && refused
                .error()
                .contains("plugin 'chain' may call model 'afine'"),
        "{} {}",
        refused.status,
        refused.text()
    );
    serves_after(f, "a refused reload")
}

/// The value of `name{labels}` on the pipeline server's `/metrics`, if it is there.
fn metric(f: &Fixture, name: &str, labels: &str) -> Option<f64> {
    let text = get(f.at("pipeline"), "/metrics").text();
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.parse().ok())
}

/// Each pipeline request's model calls are counted in its plugin's account: three calls of
/// two FP32 values each way per chain request; a plugin that calls no model has no such series.
fn a_pipelines_model_calls_are_accounted_on_metrics(f: &Fixture) -> Result<(), Failed> {
    let labels = "plugin=\"chain\",model=\"\",hook=\"pipeline\"";
    let calls = |name| metric(f, name, labels).unwrap_or(0.0);
    let (before_calls, before_bytes) = (
        calls("trident_plugin_model_calls_total"),
        calls("trident_plugin_model_bytes_total"),
    );
    let before_waits = calls("trident_plugin_model_seconds_count");
    for _ in 0..4 {
        let response = pipeline(f, "chain", "[1, 2]");
        ensure!(
            response.status == 200,
            "{} {}",
            response.status,
            response.text()
        );
    }
    let made = calls("trident_plugin_model_calls_total") - before_calls;
    let moved = calls("trident_plugin_model_bytes_total") - before_bytes;
    let waits = calls("trident_plugin_model_seconds_count") - before_waits;
    // Four requests of three calls, each sending and receiving two FP32 values.
    ensure!(
        made == 12.0 && moved == 12.0 * 16.0 && waits == 4.0,
        "calls {made}, bytes {moved}, waits {waits}"
    );
    let csv = get(f.at("csv"), "/metrics").text();
    ensure!(
        !csv.contains("trident_plugin_model_calls_total"),
        "a server whose plugins call no model shows model series"
    );
    Ok(())
}

/// A pipeline's golden cases run without its models: each call gets the case's next answer (a
/// chain of two calls passes on the second answer), a call the case does not answer is
/// `unavailable` (the guest's 503), and a case that expects otherwise refuses the load.
fn golden_cases_stand_in_for_a_pipelines_models(f: &Fixture) -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let answer = |data: &str| {
        format!(
            "{{ model = \"affine\", outputs = [{{ name = \"OUTPUT0\", datatype = \"FP32\", \
             shape = [1, 2], data = {data} }}] }}"
        )
    };
    let load = |final_values: &str| -> Result<(), String> {
        let cases = format!(
            "[[case]]\nname = \"two calls, stood in\"\nhook = \"pipeline\"\n\
             content_type = \"application/json\"\nbody = \"[1, 2]\"\n\
             models = [{}, {}]\nexpect = {{ status = 200, json = {{ values = {final_values}, calls = 2 }} }}\n\n\
             [[case]]\nname = \"a call past the answers\"\nhook = \"pipeline\"\n\
             content_type = \"application/json\"\nbody = \"[1, 2]\"\n\
             models = [{}]\nexpect = {{ status = 503 }}\n",
            answer("[10, 20]"),
            answer("[30, 40]"),
            answer("[10, 20]"),
        );
        let cases_path = dir.path().join("chain.cases.toml");
        std::fs::write(&cases_path, &cases).map_err(|e| e.to_string())?;
        let digest = trident::plugins::platform::loading::sha256_hex(cases.as_bytes());
        let manifest = format!(
            "{}cases = {{ path = \"chain.cases.toml\", sha256 = \"{digest}\" }}\n",
            plugin(
                "chain",
                "pipeline_chain",
                "models = [\"affine\"]\ntime_limit_ms = 5000\nconfig = { times = \"2\" }"
            )
        );
        let path = dir.path().join("plugins.toml");
        std::fs::write(&path, manifest).map_err(|e| e.to_string())?;
        let manifest = Manifest::load(&path).map_err(|e| e.to_string())?;
        f.runtime
            .block_on(PluginHost::load(&manifest))
            .map(drop)
            .map_err(|e| e.to_string())
    };
    load("[30, 40]").map_err(|e| format!("the right cases refused: {e}"))?;
    // `trident plugin test` runs them where the author builds, given the models (`--model`);
    // without it the plugin may call none, and its calls are refused.
    let plugin_test = |models: &[&str]| {
        let mut command = common::command(env!("CARGO_BIN_EXE_trident"));
        command
            .args(["plugin", "test"])
            .arg(guest("pipeline_chain"))
            .arg("--cases")
            .arg(dir.path().join("chain.cases.toml"))
            .args(["--config", "times=2", "--time-limit-ms", "5000"]);
        for model in models {
            command.args(["--model", model]);
        }
        command.output()
    };
    let passed = plugin_test(&["affine"])?;
    let stdout = String::from_utf8_lossy(&passed.stdout);
    ensure!(
        passed.status.success() && stdout.contains("2 passed, 0 failed"),
        "{stdout}"
    );
    let refused = plugin_test(&[])?;
    let stdout = String::from_utf8_lossy(&refused.stdout);
    ensure!(
        !refused.status.success() && stdout.contains("status: expected 200, got 403"),
        "{stdout}"
    );
    let refused = load("[10, 20]").err().ok_or("a wrong case passed")?;
    ensure!(
        refused.contains("golden case 'two calls, stood in' fails"),
        "{refused}"
    );
    Ok(())
}
