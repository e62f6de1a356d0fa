//! WebAssembly plugins end to end: real compiled guests, real Triton, real HTTP on 127.0.0.1.
//! Example adapters, A/B variants, the OOM policy, and hostile guests written to break the rules.

#[macro_use]
mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libtest_mimic::Failed;
use serde_json::json;
use trident::config::{Config, Mode};
use trident::engine::triton::TritonEngine;
use trident::http::AppState;
use trident::plugins::PluginHost;
use trident::plugins::manifest::Manifest;

use common::http_client::{get, request};
use common::models_dir;
use common::plugins::{digest, guest};

struct Fixture {
    runtime: tokio::runtime::Runtime,
    servers: HashMap<&'static str, (SocketAddr, Arc<AppState<TritonEngine>>)>,
    manifests: tempfile::TempDir,
    models_root: tempfile::TempDir,
}

impl Fixture {
    fn at(&self, name: &str) -> SocketAddr {
        self.servers[name].0
    }
}

/// What trident logged while the tests ran (the test binary's tracing output).
static LOG: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

struct LogCapture;

impl std::io::Write for LogCapture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        LOG.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log lines about `plugin` written while `during` ran.
fn logged_during(plugin: &str, during: impl FnOnce()) -> Vec<String> {
    let start = LOG.lock().unwrap().len();
    during();
    let log = LOG.lock().unwrap();
    let marker = format!("plugin=\"{plugin}\"");
    String::from_utf8_lossy(&log[start..])
        .lines()
        .filter(|line| line.contains(&marker))
        .map(str::to_owned)
        .collect()
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_writer(|| LogCapture)
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .init();
    let checks: &[common::Check<Fixture>] = &[
        ("csv_in_csv_out", csv_in_csv_out),
        ("csv_in_json_out", csv_in_json_out),
        (
            "v2_requests_bypass_the_adapters",
            v2_requests_bypass_the_adapters,
        ),
        (
            "bad_csv_is_400_from_the_plugin",
            bad_csv_is_400_from_the_plugin,
        ),
        ("json_lines_and_instances", json_lines_and_instances),
        (
            "ab_split_stickiness_header_and_metrics",
            ab_split_stickiness_header_and_metrics,
        ),
        (
            "oom_plugin_agrees_with_the_built_in_list",
            oom_plugin_agrees_with_the_built_in_list,
        ),
        ("hostile_loop_is_interrupted", hostile_loop_is_interrupted),
        ("hostile_hog_is_refused", hostile_hog_is_refused),
        ("hostile_trap_is_a_500", hostile_trap_is_a_500),
        (
            "hostile_bad_tensor_is_a_clean_error",
            hostile_bad_tensor_is_a_clean_error,
        ),
        (
            "hostile_shape_is_refused_before_the_model",
            hostile_shape_is_refused_before_the_model,
        ),
        (
            "hostile_snoop_sees_no_files_environment_or_network",
            hostile_snoop_sees_no_files_environment_or_network,
        ),
        (
            "every_call_gets_a_fresh_instance",
            every_call_gets_a_fresh_instance,
        ),
        ("chatty_output_is_captured", chatty_output_is_captured),
        (
            "a_flood_of_output_is_cut_at_the_call_budget",
            a_flood_of_output_is_cut_at_the_call_budget,
        ),
        (
            "reply_framing_and_trident_headers_stay_trident_s",
            reply_framing_and_trident_headers_stay_trident_s,
        ),
        (
            "oversized_reply_headers_are_a_500",
            oversized_reply_headers_are_a_500,
        ),
        (
            "load_refuses_bad_digests_signatures_keys_and_configs",
            load_refuses_bad_digests_signatures_keys_and_configs,
        ),
        (
            "reload_swaps_plugins_or_keeps_the_old_set",
            reload_swaps_plugins_or_keeps_the_old_set,
        ),
        (
            "plugins_see_sagemaker_headers_and_only_allowed_others",
            plugins_see_sagemaker_headers_and_only_allowed_others,
        ),
        ("mme_loads_ask_the_oom_plugin", mme_loads_ask_the_oom_plugin),
    ];
    common::run_checks(start(), checks)
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/models")
}

fn config() -> Config {
    Config::new(Mode::SingleModel {
        repository: examples_dir(),
        default_model: "affine".into(),
    })
}

/// A `[plugins.<name>]` table for a built guest.
fn plugin(name: &str, wasm: &str, extra: &str) -> String {
    format!(
        "[plugins.{name}]\npath = \"{}\"\nsha256 = \"{}\"\n{extra}\n",
        guest(wasm).display(),
        digest(wasm)
    )
}

fn hostile(mode: &str, extra: &str) -> String {
    plugin(
        mode.replace('-', "_").as_str(),
        "hostile",
        &format!(
            "config = {{ mode = \"{mode}\", target = \"{}\" }}\n{extra}",
            canary().local_addr().unwrap()
        ),
    )
}

/// A listener on 127.0.0.1 that no plugin may reach (the snoop plugin tries).
fn canary() -> &'static std::net::TcpListener {
    static CANARY: std::sync::OnceLock<std::net::TcpListener> = std::sync::OnceLock::new();
    CANARY.get_or_init(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        listener
    })
}

fn manifests() -> Vec<(&'static str, String)> {
    let csv = plugin(
        "csv",
        "csv_request",
        "content_types = [\"text/csv\"]\nconfig = { input = \"INPUT0\", datatype = \"FP32\" }",
    );
    let out = plugin(
        "out",
        "csv_json_response",
        "accept = [\"text/csv\", \"application/json\", \"application/jsonlines\"]",
    );
    let jsonl = plugin(
        "jsonl",
        "jsonl_request",
        "content_types = [\"application/jsonlines\", \"application/json\"]",
    );
    let oom = plugin("oom", "oom_default", "");
    let hostiles = [
        "loop",
        "hog",
        "trap",
        "bad-tensor",
        "huge-shape",
        "snoop",
        "chatty",
        "echo",
        "count",
        "flood",
        "flood-stdout",
        "frame-lie",
        "many-headers",
        "big-header",
        "bad-attributes",
    ];
    // These modes misbehave in the reply: the variant uses the guest as its response adapter.
    let replies = ["frame-lie", "many-headers", "big-header", "bad-attributes"];
    let mut hostile_manifest: String = hostiles
        .iter()
        .map(|mode| match *mode {
            "loop" => hostile(mode, "time_limit_ms = 200"),
            "hog" => hostile(mode, "memory_limit_mb = 32"),
            "echo" => hostile(mode, "headers = [\"X-Tenant\"]"),
            "flood" => hostile(mode, "time_limit_ms = 300"),
            // Time to build 100,000 headers: the reply itself is what is tested.
            "many-headers" => hostile(mode, "time_limit_ms = 5000"),
            _ => hostile(mode, ""),
        })
        .collect();
    hostile_manifest.push_str("[models.affine]\nvariants = [\n");
    for mode in hostiles {
        let name = mode.replace('-', "_");
        let response = if replies.contains(&mode) {
            format!(", response = \"{name}\"")
        } else {
            String::new()
        };
        hostile_manifest.push_str(&format!(
            "  {{ name = \"{mode}\", weight = 1, request = \"{name}\"{response} }},\n"
        ));
    }
    hostile_manifest.push_str("]\n");
    vec![
        (
            "csv",
            format!("{csv}{out}[models.affine]\nrequest = \"csv\"\nresponse = \"out\"\n"),
        ),
        (
            "jsonl",
            format!("{jsonl}{out}[models.affine]\nrequest = \"jsonl\"\nresponse = \"out\"\n"),
        ),
        (
            "ab",
            format!(
                "{csv}{out}[models.affine]\nvariants = [\n  {{ name = \"a\", weight = 30, request = \"csv\", response = \"out\" }},\n  {{ name = \"b\", weight = 70, request = \"csv\", response = \"out\" }},\n]\n"
            ),
        ),
        ("oom", format!("oom = \"oom\"\n{oom}")),
        ("hostile", hostile_manifest),
    ]
}

fn start() -> Fixture {
    let engine = common::start_engine(vec![examples_dir(), models_dir()], &["affine"]);
    let runtime = common::runtime();
    let manifest_dir = tempfile::tempdir().unwrap();
    let models_root = tempfile::tempdir().unwrap();
    let mut servers = HashMap::new();
    let mut list = manifests();
    list.push((
        "oom_mme",
        format!(
            "oom = \"everything\"\n{}",
            plugin("everything", "oom_everything", "")
        ),
    ));
    for (name, text) in list {
        let path = manifest_dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let manifest = Manifest::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let host = runtime
            .block_on(PluginHost::load(&manifest))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let mode = if name == "oom_mme" {
            Mode::MultiModel {
                repository: models_dir(),
                models_root: models_root.path().to_path_buf(),
            }
        } else {
            config().mode
        };
        let state = AppState::new(
            engine.clone(),
            Config {
                plugins: Some(path.clone()),
                ..Config::new(mode)
            },
        )
        .with_plugins(Some(Arc::new(host)));
        let state = Arc::new(state);
        servers.insert(name, (common::serve(&runtime, Arc::clone(&state)), state));
    }
    Fixture {
        runtime,
        servers,
        manifests: manifest_dir,
        models_root,
    }
}

fn send(
    at: SocketAddr,
    content_type: &str,
    accept: Option<&str>,
    extra: &[(&str, &str)],
    body: &str,
) -> common::http_client::HttpResponse {
    let mut headers = vec![("Content-Type", content_type)];
    if let Some(accept) = accept {
        headers.push(("Accept", accept));
    }
    headers.extend_from_slice(extra);
    request(at, "POST", "/invocations", &headers, body.as_bytes())
}

fn csv_in_csv_out(f: &Fixture) -> Result<(), Failed> {
    let response = send(
        f.at("csv"),
        "text/csv",
        Some("text/csv"),
        &[],
        "1,2,3\n4,5,6\n",
    );
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.header("content-type") == Some("text/csv"),
        "{:?}",
        response.headers
    );
    // affine: 2x + 1
    ensure!(
        response.text() == "3,5,7\n9,11,13\n",
        "{:?}",
        response.text()
    );
    Ok(())
}

fn csv_in_json_out(f: &Fixture) -> Result<(), Failed> {
    let response = send(
        f.at("csv"),
        "text/csv",
        Some("application/json"),
        &[],
        "0.5\n-1\n",
    );
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        predictions(&response) == [[2.0], [-1.0]],
        "{}",
        response.text()
    );
    let lines = send(
        f.at("csv"),
        "text/csv",
        Some("application/jsonlines"),
        &[],
        "1,1\n",
    );
    ensure!(lines.text() == "[3,3]\n", "{:?}", lines.text());
    Ok(())
}

/// `{"predictions": [[...], ...]}` as numbers.
fn predictions(response: &common::http_client::HttpResponse) -> Vec<Vec<f64>> {
    let json = response.json();
    json["predictions"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|row| {
                    row.as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_f64().unwrap())
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn v2_requests_bypass_the_adapters(f: &Fixture) -> Result<(), Failed> {
    let body = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1, 2]}]});
    let response = send(
        f.at("csv"),
        "application/json",
        None,
        &[],
        &body.to_string(),
    );
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.json()["outputs"][0]["data"] == json!([3.0, 5.0]),
        "{}",
        response.text()
    );
    Ok(())
}

fn bad_csv_is_400_from_the_plugin(f: &Fixture) -> Result<(), Failed> {
    for (body, expected) in [
        ("1,2\n3\n", "line 2 has 1 fields"),
        ("1,x\n", "'x' is not a valid"),
        ("\n\n", "no rows"),
    ] {
        let response = send(f.at("csv"), "text/csv", None, &[], body);
        ensure!(
            response.status == 400,
            "{body:?}: {} {}",
            response.status,
            response.text()
        );
        ensure!(
            response.error().contains(expected),
            "{body:?}: {}",
            response.text()
        );
    }
    ensure!(get(f.at("csv"), "/ping").status == 200, "not serving");
    Ok(())
}

fn json_lines_and_instances(f: &Fixture) -> Result<(), Failed> {
    let lines = send(
        f.at("jsonl"),
        "application/jsonlines",
        Some("text/csv"),
        &[],
        "[1,2]\n[3,4]\n",
    );
    ensure!(lines.status == 200, "{} {}", lines.status, lines.text());
    ensure!(lines.text() == "3,5\n7,9\n", "{:?}", lines.text());
    let instances = send(
        f.at("jsonl"),
        "application/json",
        None,
        &[],
        r#"{"instances": [[0], [10]]}"#,
    );
    ensure!(
        instances.status == 200,
        "{} {}",
        instances.status,
        instances.text()
    );
    ensure!(
        predictions(&instances) == [[1.0], [21.0]],
        "{}",
        instances.text()
    );
    let bad = send(
        f.at("jsonl"),
        "application/json",
        None,
        &[],
        r#"{"rows": []}"#,
    );
    ensure!(bad.status == 400, "{} {}", bad.status, bad.text());
    Ok(())
}

fn ab_split_stickiness_header_and_metrics(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("ab");
    let mut counts: HashMap<String, usize> = HashMap::new();
    let total = 400;
    for i in 0..total {
        let id = format!("inference-{i}");
        let response = send(
            at,
            "text/csv",
            Some("text/csv"),
            &[("X-Amzn-SageMaker-Inference-Id", &id)],
            "1\n",
        );
        ensure!(
            response.status == 200,
            "{} {}",
            response.status,
            response.text()
        );
        let variant = response
            .header("x-trident-variant")
            .ok_or("no variant header")?
            .to_owned();
        *counts.entry(variant).or_default() += 1;
    }
    let b = counts.get("b").copied().unwrap_or(0) as f64 / total as f64;
    ensure!(
        (0.62..=0.78).contains(&b),
        "b served {b:.2} of requests (weight 0.70): {counts:?}"
    );
    // Sticky on the inference id.
    let first = send(
        at,
        "text/csv",
        None,
        &[("X-Amzn-SageMaker-Inference-Id", "sticky-1")],
        "1\n",
    );
    let variant = first
        .header("x-trident-variant")
        .ok_or("no header")?
        .to_owned();
    for _ in 0..10 {
        let again = send(
            at,
            "text/csv",
            None,
            &[("X-Amzn-SageMaker-Inference-Id", "sticky-1")],
            "1\n",
        );
        ensure!(
            again.header("x-trident-variant") == Some(variant.as_str()),
            "not sticky"
        );
    }
    // The target variant wins.
    for target in ["a", "b"] {
        let response = send(
            at,
            "text/csv",
            None,
            &[
                ("X-Amzn-SageMaker-Target-Variant", target),
                ("X-Amzn-SageMaker-Inference-Id", "sticky-1"),
            ],
            "1\n",
        );
        ensure!(
            response.header("x-trident-variant") == Some(target),
            "target {target}: {:?}",
            response.headers
        );
    }
    let metrics = f.servers["ab"].1.metrics.render();
    for variant in ["a", "b"] {
        let line = format!(
            "trident_plugin_calls_total{{plugin=\"csv\",hook=\"request\",variant=\"{variant}\",outcome=\"ok\"}}"
        );
        ensure!(metrics.contains(&line), "no {line} in\n{metrics}");
    }
    Ok(())
}

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

fn with_variant(f: &Fixture, variant: &str) -> common::http_client::HttpResponse {
    send(
        f.at("hostile"),
        "text/csv",
        None,
        &[("X-Amzn-SageMaker-Target-Variant", variant)],
        "1\n",
    )
}

/// A healthy request right after a hostile one: the server and the model are fine.
fn still_fine(f: &Fixture) -> Result<(), Failed> {
    let response = send(f.at("csv"), "text/csv", Some("text/csv"), &[], "1\n");
    ensure!(
        response.status == 200 && response.text() == "3\n",
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        get(f.at("hostile"), "/ping").status == 200,
        "hostile server not serving"
    );
    Ok(())
}

fn hostile_loop_is_interrupted(f: &Fixture) -> Result<(), Failed> {
    let started = Instant::now();
    let response = with_variant(f, "loop");
    let took = started.elapsed();
    ensure!(
        response.status == 504,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error().contains("time limit of 200 ms"),
        "{}",
        response.text()
    );
    ensure!(
        took >= Duration::from_millis(190) && took < Duration::from_secs(3),
        "took {took:?}"
    );
    still_fine(f)
}

fn hostile_hog_is_refused(f: &Fixture) -> Result<(), Failed> {
    let response = with_variant(f, "hog");
    ensure!(
        response.status == 500,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error().contains("memory limit of 32 MiB"),
        "{}",
        response.text()
    );
    still_fine(f)
}

fn hostile_trap_is_a_500(f: &Fixture) -> Result<(), Failed> {
    let response = with_variant(f, "trap");
    ensure!(
        response.status == 500,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error().contains("plugin 'trap' failed"),
        "{}",
        response.text()
    );
    still_fine(f)
}

fn hostile_bad_tensor_is_a_clean_error(f: &Fixture) -> Result<(), Failed> {
    let response = with_variant(f, "bad-tensor");
    ensure!(
        (400..500).contains(&response.status),
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(!response.error().is_empty(), "no message");
    still_fine(f)
}

/// A request adapter's tensor passes the same shape rule as a client's: refused before the
/// model, which serves the next request.
fn hostile_shape_is_refused_before_the_model(f: &Fixture) -> Result<(), Failed> {
    let response = with_variant(f, "huge-shape");
    ensure!(
        response.status == 400
            && response
                .error()
                .contains("input 'INPUT0' has an invalid shape [0, 9223372036854775807]"),
        "{} {}",
        response.status,
        response.text()
    );
    still_fine(f)
}

fn hostile_snoop_sees_no_files_environment_or_network(f: &Fixture) -> Result<(), Failed> {
    let response = with_variant(f, "snoop");
    ensure!(
        response.status == 500,
        "{} {}",
        response.status,
        response.text()
    );
    let error = response.error();
    ensure!(
        error.contains("snoop: file=Err"),
        "the plugin read a file: {error}"
    );
    ensure!(
        error.contains("env=0"),
        "the plugin saw environment variables: {error}"
    );
    ensure!(
        error.contains("net=Some(Err") && error.contains("dns=Err"),
        "the plugin reached the network: {error}"
    );
    ensure!(
        canary().accept().is_err(),
        "a plugin connected to the test's listener"
    );
    still_fine(f)
}

fn every_call_gets_a_fresh_instance(f: &Fixture) -> Result<(), Failed> {
    // Instances are made ahead of time, but each serves one call: guest memory never carries
    // anything from one request to the next.
    for _ in 0..6 {
        let response = with_variant(f, "count");
        let error = response.error();
        ensure!(
            error.contains("count: calls=1"),
            "an instance served more than one call: {} {error}",
            response.status
        );
    }
    still_fine(f)
}

fn chatty_output_is_captured(f: &Fixture) -> Result<(), Failed> {
    let mut response = None;
    let lines = logged_during("chatty", || response = Some(with_variant(f, "chatty")));
    let response = response.unwrap();
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    for stream in ["stdout", "stderr"] {
        ensure!(
            lines
                .iter()
                .any(|l| l.contains(&format!("hello from the plugin's {stream}"))),
            "no {stream} line logged: {lines:?}"
        );
    }
    still_fine(f)
}

/// The counters trident keeps for one plugin of the hostile server.
fn counters_of(f: &Fixture, plugin: &str) -> (u64, u64) {
    let host = f.servers["hostile"].1.plugins.load_full().unwrap();
    let loaded = host.plugins().find(|p| &*p.name == plugin).unwrap();
    (
        loaded.counters().output_dropped_bytes(),
        loaded.counters().reply_headers_dropped(),
    )
}

/// A guest logging in a loop until its deadline, and one printing 128 KiB: each call puts at
/// most its output budget into the log, then one "truncated" line; the rest is counted.
fn a_flood_of_output_is_cut_at_the_call_budget(f: &Fixture) -> Result<(), Failed> {
    let budget = trident::plugins::counters::OUTPUT_BUDGET_BYTES;
    for (mode, status) in [("flood", 504), ("flood-stdout", 200)] {
        let plugin = mode.replace('-', "_");
        let dropped_before = counters_of(f, &plugin).0;
        let mut response = None;
        let lines = logged_during(&plugin, || response = Some(with_variant(f, mode)));
        let response = response.unwrap();
        ensure!(
            response.status == status,
            "{mode}: {} {}",
            response.status,
            response.text()
        );
        let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
        // Each log line adds the timestamp, level and fields to what the guest wrote.
        ensure!(
            bytes < budget * 2,
            "{mode}: {bytes} bytes logged for one call (budget {budget})"
        );
        ensure!(
            lines
                .iter()
                .filter(|l| l.contains("plugin output truncated"))
                .count()
                == 1,
            "{mode}: not one truncation line in {} lines",
            lines.len()
        );
        let dropped = counters_of(f, &plugin).0 - dropped_before;
        ensure!(
            dropped > (64 * 2048 - budget) as u64 / 2,
            "{mode}: {dropped} bytes counted as dropped"
        );
    }
    still_fine(f)
}

/// One response read off a connection that stays open.
struct Exchange {
    status: String,
    /// Lower-cased names, in the order sent.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Sends a request on a connection it keeps open and reads one response by its
/// `Content-Length`.
fn keep_alive_exchange(
    stream: &mut std::net::TcpStream,
    variant: &str,
) -> Result<Exchange, Failed> {
    use std::io::{BufRead, Read, Write};
    let request = format!(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\n\
         X-Amzn-SageMaker-Target-Variant: {variant}\r\nContent-Length: 2\r\n\r\n1\n"
    );
    stream.write_all(request.as_bytes())?;
    let mut reader = std::io::BufReader::new(stream.try_clone()?);
    let mut status = String::new();
    reader.read_line(&mut status)?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').ok_or("a malformed header line")?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .ok_or("no content-length")?
        .1
        .parse()?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Exchange {
        status: status.trim_end().to_owned(),
        headers,
        body,
    })
}

/// A reply claiming a length, chunking, a closed connection and a variant: the client gets the
/// 5-byte body with its true length on a connection that stays usable, the variant trident
/// chose, and the headers the plugin may set (custom attributes among them).
fn reply_framing_and_trident_headers_stay_trident_s(f: &Fixture) -> Result<(), Failed> {
    let dropped_before = counters_of(f, "frame_lie").1;
    let mut stream = std::net::TcpStream::connect(f.at("hostile"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    for _ in 0..2 {
        let Exchange {
            status,
            headers,
            body,
        } = keep_alive_exchange(&mut stream, "frame-lie")?;
        ensure!(status.contains(" 200 "), "{status}");
        ensure!(body == b"hello", "{:?}", String::from_utf8_lossy(&body));
        let values = |name: &str| -> Vec<&str> {
            headers
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .collect()
        };
        ensure!(values("content-length") == ["5"], "{headers:?}");
        for name in [
            "transfer-encoding",
            "connection",
            "keep-alive",
            "upgrade",
            "proxy-authenticate",
        ] {
            ensure!(values(name).is_empty(), "{name} passed: {headers:?}");
        }
        ensure!(values("x-trident-variant") == ["frame-lie"], "{headers:?}");
        ensure!(values("cache-control") == ["no-store"], "{headers:?}");
        ensure!(
            values("x-amzn-sagemaker-custom-attributes") == ["score=0.9, trace=abc"],
            "{headers:?}"
        );
        ensure!(values("content-type") == ["text/plain"], "{headers:?}");
    }
    // The same connection goes on serving: the second exchange above, and a v2 request.
    let dropped = counters_of(f, "frame_lie").1 - dropped_before;
    ensure!(
        dropped == 14,
        "{dropped} headers counted as dropped (7 per reply)"
    );
    still_fine(f)
}

/// Header blocks over the bound, and custom attributes over SageMaker's: a 500 naming the
/// plugin, and the server serves on.
fn oversized_reply_headers_are_a_500(f: &Fixture) -> Result<(), Failed> {
    for (mode, expected) in [
        ("many-headers", "100000 headers (at most 64)"),
        ("big-header", "bytes of headers (at most 16384)"),
        (
            "bad-attributes",
            "x-amzn-sagemaker-custom-attributes header",
        ),
    ] {
        let response = with_variant(f, mode);
        ensure!(
            response.status == 500,
            "{mode}: {} {}",
            response.status,
            response.text()
        );
        let plugin = mode.replace('-', "_");
        ensure!(
            response.error().contains(&format!("plugin '{plugin}'"))
                && response.error().contains(expected),
            "{mode}: {}",
            response.text()
        );
        still_fine(f)?;
    }
    Ok(())
}

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

fn plugins_see_sagemaker_headers_and_only_allowed_others(f: &Fixture) -> Result<(), Failed> {
    let response = send(
        f.at("hostile"),
        "text/csv",
        None,
        &[
            ("X-Amzn-SageMaker-Target-Variant", "echo"),
            ("X-Amzn-SageMaker-Custom-Attributes", "trace=on"),
            ("X-Amzn-SageMaker-Inference-Id", "id-7"),
            ("X-Tenant", "acme"),
            ("X-Secret", "hunter2"),
        ],
        "1\n",
    );
    ensure!(
        response.status == 400,
        "{} {}",
        response.status,
        response.text()
    );
    let echo = response.error();
    for expected in [
        "route=/invocations",
        "model=affine",
        "custom=Some(\"trace=on\")",
        "variant=Some(\"echo\")",
        "id=Some(\"id-7\")",
        "headers=x-tenant=acme",
    ] {
        ensure!(echo.contains(expected), "{expected} missing from {echo}");
    }
    ensure!(
        !echo.contains("hunter2"),
        "the plugin saw a header it was not given: {echo}"
    );
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
