//! SageMaker's stateful sessions end to end, over real HTTP on 127.0.0.1 against the real Triton
//! core: each session is a sequence of the native sequence-sum model (Triton's sequence
//! batcher), so the sums the model answers show whose state a request reached. Close and expiry
//! send the sequence's end, which a deployment without sessions (`probe`, the same model in the
//! same core) sees: the core then refuses to continue the sequence without a start. Every bad
//! session request is a 4xx, and a good request follows it.

#[macro_use]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use libtest_mimic::Failed;
use serde_json::{Value, json};
use std::path::Path;

use trident::config::{Config, InferenceType};
use trident::engine::Engine;
use trident::http::AppState;
use trident::sessions::SessionSettings;

use common::http_client::{HttpResponse, get, request};
use common::plugins::python_guest_in;
use common::{Check, configs, copy_model, models_dir};
use trident::plugins::PluginHost;
use trident::plugins::platform::manifest::Manifest;

/// The first sequence id trident gives a session (then one more per session, in order).
const FIRST_SEQUENCE_ID: u64 = 1 << 63;
/// The single-model deployment's bound on open sessions.
const MAX_SESSIONS: usize = 4;
/// The session-history deployment's bound on one session's plugin store.
const HISTORY_STORE_BYTES: usize = 512;
/// The idle expiration of the deployments whose sessions are left to expire: long enough that
/// a loaded machine's stall between two requests of a check does not expire a session early.
const SHORT_EXPIRATION: Duration = Duration::from_secs(2);
/// The idle expiration of deployments whose sessions must outlive a test's pauses.
const LONG_EXPIRATION: Duration = Duration::from_secs(600);
/// How long a session of the `reclaiming` deployment must be idle before its slot may go to a
/// new one.
const RECLAIM_IDLE: Duration = Duration::from_secs(2);

struct Fixture {
    /// The servers and their core (`f.at(name)`, `f.engine`).
    servers: common::servers::Servers,
    models_root: tempfile::TempDir,
    /// What the stateful streaming model got, a line each (see its config.pbtxt).
    stream_log: std::path::PathBuf,
}

impl std::ops::Deref for Fixture {
    type Target = common::servers::Servers;

    fn deref(&self) -> &common::servers::Servers {
        &self.servers
    }
}

fn main() -> std::process::ExitCode {
    let checks: &[Check<Fixture>] = checks![
        the_core_says_which_models_have_a_sequence_batcher,
        interleaved_sessions_keep_separate_sums,
        closing_a_session_ends_its_sequence_in_the_model,
        expiry_ends_the_sequence_in_the_model_with_no_traffic,
        bad_session_requests_are_4xx_and_the_endpoint_serves,
        the_session_bound_holds,
        sessions_past_a_models_sequence_slots_are_refused_at_once,
        sessions_left_open_give_their_slots_to_new_ones_once_idle,
        sessions_on_an_ensemble_run_in_its_stateful_steps_sequence,
        sessions_are_off_unless_enabled,
        multi_model_sessions_are_per_model_and_expire,
        a_python_plugin_keeps_each_sessions_history_in_its_store,
        a_session_outlives_a_pause_past_tritons_default_idle_limit,
        a_models_shorter_idle_limit_shortens_its_sessions,
        a_session_whose_sequence_the_model_dropped_ends_with_a_clear_400,
        a_stream_holds_its_sessions_turn_to_its_last_event,
        a_close_waits_for_a_running_stream_and_its_end_follows_it,
        a_streaming_session_does_not_expire_mid_stream,
        a_stream_whose_client_leaves_gives_its_turn_back,
        generate_answers_run_in_the_sessions_sequence,
        an_abandoned_unload_ends_the_models_sessions_and_a_new_load_never_sees_them,
    ];
    common::run_checks(start(), checks)
}

/// The sequence-sum model's configuration with Triton's default idle limit (none set).
fn with_default_idle(config: String) -> String {
    let set = "sequence_batching { max_sequence_idle_microseconds: 60000000 }";
    assert!(
        config.contains(set),
        "the sequence model's configuration changed"
    );
    config.replace(set, "sequence_batching { }")
}

/// Copies test model `model` to `repository/folder`, its configuration changed by `edit`.
fn copy_edited(model: &str, repository: &Path, folder: &str, edit: impl Fn(String) -> String) {
    copy_model(model, repository, folder);
    let config = repository.join(folder).join("config.pbtxt");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, edit(text)).unwrap();
}

fn start() -> Fixture {
    // A second sequence model, so sessions that expire quickly have a model of their own; one
    // with Triton's default idle limit; the stateful streaming model, logging what it gets.
    let models_root = tempfile::tempdir().unwrap();
    let repository = models_root.path().join("repository");
    copy_model("native_sequence_sum", &repository, "sequence_expiring");
    // An ensemble whose one step is a stateful model (issue 43, case 5).
    copy_model("native_sequence_sum", &repository, "sum_step");
    let ensemble = repository.join("sum_ensemble");
    std::fs::create_dir_all(ensemble.join("1")).unwrap();
    std::fs::write(
        ensemble.join("config.pbtxt"),
        r#"platform: "ensemble"
max_batch_size: 32
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "SUM", data_type: TYPE_INT32, dims: [ 1 ] } ]
ensemble_scheduling { step [ { model_name: "sum_step", model_version: -1,
  input_map { key: "INPUT" value: "IN" } output_map { key: "OUTPUT" value: "SUM" } } ] }
"#,
    )
    .unwrap();
    // Two sequences at once (the direct strategy over 2 batch rows): the sessions' slot bound.
    copy_edited(
        "native_sequence_sum",
        &repository,
        "sequence_two_slots",
        |config| config.replace("max_batch_size: 32", "max_batch_size: 2"),
    );
    copy_edited(
        "native_sequence_sum",
        &repository,
        "sequence_default",
        with_default_idle,
    );
    let stream_log = models_root.path().join("stream.log");
    copy_edited(
        "stateful_stream",
        &repository,
        "stream_stateful",
        |config| {
            config.replace(
                r#"{ key: "log" value: { string_value: "" } }"#,
                &format!(
                    r#"{{ key: "log" value: {{ string_value: "{}" }} }}"#,
                    stream_log.display()
                ),
            )
        },
    );
    let engine = common::start_engine(
        vec![models_dir(), repository.clone()],
        &[
            "native_sequence_sum",
            "native_identity_fp32",
            "sequence_expiring",
            "sequence_default",
            "stream_stateful",
            "sequence_two_slots",
            "sum_step",
            "sum_ensemble",
        ],
    );
    let with_sessions = |config: Config, settings: SessionSettings| Config {
        sessions: Some(settings),
        ..config
    };
    let deployments: Vec<(&'static str, Config)> = vec![
        (
            "sessions",
            with_sessions(
                configs::single_model("native_sequence_sum"),
                SessionSettings {
                    expiration: Duration::from_secs(600),
                    max_sessions: MAX_SESSIONS,
                    store_bytes: 1024,
                    reclaim_idle: Duration::from_secs(3600),
                },
            ),
        ),
        ("probe", configs::single_model("native_sequence_sum")),
        (
            "ensemble",
            with_sessions(
                configs::single_model_in(repository.clone(), "sum_ensemble"),
                SessionSettings {
                    expiration: LONG_EXPIRATION,
                    max_sessions: 100,
                    store_bytes: 1024,
                    reclaim_idle: Duration::from_secs(3600),
                },
            ),
        ),
        (
            "stateless",
            with_sessions(
                configs::single_model("native_identity_fp32"),
                SessionSettings {
                    expiration: LONG_EXPIRATION,
                    max_sessions: 100,
                    store_bytes: 1024,
                    reclaim_idle: Duration::from_secs(3600),
                },
            ),
        ),
        (
            "two_slots",
            with_sessions(
                configs::single_model_in(repository.clone(), "sequence_two_slots"),
                SessionSettings {
                    expiration: LONG_EXPIRATION,
                    max_sessions: 100,
                    store_bytes: 1024,
                    reclaim_idle: Duration::from_secs(3600),
                },
            ),
        ),
        (
            "reclaiming",
            with_sessions(
                configs::single_model_in(repository.clone(), "sequence_two_slots"),
                SessionSettings {
                    expiration: LONG_EXPIRATION,
                    max_sessions: 100,
                    store_bytes: 1024,
                    reclaim_idle: RECLAIM_IDLE,
                },
            ),
        ),
        (
            "no_model",
            with_sessions(
                configs::single_model("no_such_model"),
                SessionSettings {
                    expiration: LONG_EXPIRATION,
                    max_sessions: 4,
                    store_bytes: 1024,
                    reclaim_idle: Duration::from_secs(3600),
                },
            ),
        ),
        (
            "expiring",
            with_sessions(
                configs::single_model("sequence_expiring"),
                SessionSettings {
                    expiration: SHORT_EXPIRATION,
                    max_sessions: 4,
                    store_bytes: 1024,
                    reclaim_idle: Duration::from_secs(3600),
                },
            ),
        ),
        ("probe_expiring", configs::single_model("sequence_expiring")),
        (
            "default_idle",
            with_sessions(
                configs::single_model_in(repository.clone(), "sequence_default"),
                SessionSettings {
                    expiration: LONG_EXPIRATION,
                    max_sessions: 4,
                    store_bytes: 1024,
                    reclaim_idle: Duration::from_secs(3600),
                },
            ),
        ),
        (
            "streams",
            Config {
                inference_type: InferenceType::GenerateStream,
                ..with_sessions(
                    configs::single_model_in(repository.clone(), "stream_stateful"),
                    SessionSettings {
                        expiration: SHORT_EXPIRATION,
                        max_sessions: 4,
                        store_bytes: 1024,
                        reclaim_idle: Duration::from_secs(3600),
                    },
                )
            },
        ),
        (
            "generate",
            Config {
                inference_type: InferenceType::Generate,
                ..with_sessions(
                    configs::single_model("native_sequence_sum"),
                    SessionSettings {
                        expiration: LONG_EXPIRATION,
                        max_sessions: 4,
                        store_bytes: 1024,
                        reclaim_idle: Duration::from_secs(3600),
                    },
                )
            },
        ),
        (
            "mme_long",
            with_sessions(
                configs::multi_model(models_root.path()),
                SessionSettings {
                    expiration: LONG_EXPIRATION,
                    max_sessions: 64,
                    store_bytes: 1024,
                    reclaim_idle: Duration::from_secs(3600),
                },
            ),
        ),
        (
            "mme",
            with_sessions(
                configs::multi_model(models_root.path()),
                SessionSettings {
                    expiration: SHORT_EXPIRATION,
                    max_sessions: 64,
                    store_bytes: 1024,
                    reclaim_idle: Duration::from_secs(3600),
                },
            ),
        ),
    ];
    let mut servers = common::servers::Servers::new(engine);
    for (name, config) in deployments {
        let state = Arc::new(AppState::new(servers.engine.clone(), config));
        // As `trident serve` does before it serves: the model's idle limit meets the sessions'.
        servers.runtime.block_on(state.prepare_sessions());
        servers.add_state(name, state);
    }
    // The session-history plugin (Python, `trident:session`) on an identity model.
    let manifest = models_root.path().join("plugins.toml");
    let guest = python_guest_in(
        "plugins/python/session_history",
        "wit/session",
        "adapter-plugin",
    );
    std::fs::write(
        &manifest,
        format!(
            "[plugins.history]\npath = \"{}\"\nsha256 = \"{}\"\nmemory_limit_mb = 96\n\
             time_limit_ms = 2000\n\n[models.\"*\"]\nrequest = \"history\"\nresponse = \"history\"\n",
            guest.display(),
            trident::plugins::platform::loading::sha256_hex(&std::fs::read(&guest).unwrap()),
        ),
    )
    .unwrap();
    let manifest = Manifest::load(&manifest).unwrap();
    let plugins = servers
        .runtime
        .block_on(PluginHost::load(&manifest))
        .unwrap();
    let config = Config {
        sessions: Some(SessionSettings {
            expiration: Duration::from_secs(600),
            max_sessions: 16,
            store_bytes: HISTORY_STORE_BYTES,
            reclaim_idle: Duration::from_secs(3600),
        }),
        ..configs::single_model("native_identity_fp32")
    };
    let state = AppState::new(servers.engine.clone(), config).with_plugins(Some(Arc::new(plugins)));
    servers.add_state("history", Arc::new(state));
    Fixture {
        servers,
        models_root,
        stream_log,
    }
}

use trident::sessions::SESSION_HEADER as SESSION;

fn add(value: i32) -> Value {
    json!({"inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [value]}]})
}

fn post(at: SocketAddr, path: &str, session: Option<&str>, body: &[u8]) -> HttpResponse {
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(id) = session {
        headers.push((SESSION, id));
    }
    request(at, "POST", path, &headers, body)
}

/// Opens a session on `path`; its id, after checking the answer's header.
fn open(at: SocketAddr, path: &str) -> Result<String, Failed> {
    let response = post(
        at,
        path,
        Some("NEW_SESSION"),
        br#"{"requestType": "NEW_SESSION"}"#,
    );
    ensure!(
        response.status == 200,
        "NEW_SESSION: {} {}",
        response.status,
        response.text()
    );
    let header = response
        .header("x-amzn-sagemaker-new-session-id")
        .ok_or("no X-Amzn-SageMaker-New-Session-Id")?;
    let (id, expires) = header
        .split_once("; Expires=")
        .ok_or_else(|| format!("not '<id>; Expires=<time>': {header}"))?;
    ensure!(
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    ensure!(
        expires.len() == 20 && expires.ends_with('Z') && expires.as_bytes()[10] == b'T',
        "{expires}"
    );
    let year: u64 = expires[..4].parse().map_err(|_| expires.to_owned())?;
    let now_year = 1970 + SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() / 31_556_952;
    ensure!(year.abs_diff(now_year) <= 1, "{expires}");
    Ok(id.to_owned())
}

fn close(at: SocketAddr, path: &str, id: &str) -> HttpResponse {
    post(at, path, Some(id), br#"{"requestType": "CLOSE"}"#)
}

/// Adds `value` in session `id` on `path`; the model's running sum.
fn step(at: SocketAddr, path: &str, id: &str, value: i32) -> Result<i64, Failed> {
    let response = post(at, path, Some(id), add(value).to_string().as_bytes());
    ensure!(
        response.status == 200,
        "step in {id}: {} {}",
        response.status,
        response.text()
    );
    response.json()["outputs"][0]["data"][0]
        .as_i64()
        .ok_or_else(|| format!("no sum in {}", response.text()).into())
}

/// Continues sequence `id` directly in the core, with no start flag, through the deployment
/// without sessions: 200 while the sequence is open in the model, 400 naming START once it ended.
fn probe(f: &Fixture, id: u64) -> HttpResponse {
    probe_at(f.at("probe"), id)
}

fn probe_at(at: SocketAddr, id: u64) -> HttpResponse {
    let body = json!({
        "parameters": {"sequence_id": id},
        "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [0]}],
    });
    post(at, "/invocations", None, body.to_string().as_bytes())
}

/// A request outside any session on the single-model deployment succeeds (the endpoint serves).
fn still_serves(f: &Fixture) -> Result<(), Failed> {
    let ping = get(f.at("sessions"), "/ping");
    ensure!(ping.status == 200, "ping: {}", ping.status);
    let id = open(f.at("sessions"), "/invocations")?;
    let sum = step(f.at("sessions"), "/invocations", &id, 7)?;
    ensure!(sum == 7, "a fresh session's sum {sum}");
    let closed = close(f.at("sessions"), "/invocations", &id);
    ensure!(closed.status == 200, "{}", closed.text());
    Ok(())
}

fn metric(at: SocketAddr, name: &str) -> Result<u64, Failed> {
    let text = get(at, "/metrics").text();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .ok_or_else(|| format!("no {name} in metrics").into())
}

fn interleaved_sessions_keep_separate_sums(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("sessions");
    let (a, b) = (open(at, "/invocations")?, open(at, "/invocations")?);
    ensure!(a != b, "two sessions, one id");
    let created = metric(at, "trident_sessions_created_total")?;
    for (id, value, expected) in [(&a, 1, 1), (&b, 100, 100), (&a, 2, 3), (&b, 200, 300)] {
        let sum = step(at, "/invocations", id, value)?;
        ensure!(sum == expected, "sum {sum}, expected {expected}");
    }
    // Concurrent requests of one session reach the model one at a time: every sum is distinct
    // and the last is the total.
    let sums: Vec<i64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| scope.spawn(|| step(at, "/invocations", &a, 1).map_err(|e| format!("{e:?}"))))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<Result<i64, String>>>()
    })
    .into_iter()
    .collect::<Result<_, _>>()?;
    let mut sorted = sums.clone();
    sorted.sort_unstable();
    ensure!(sorted == (4..=11).collect::<Vec<_>>(), "{sums:?}");
    for id in [&a, &b] {
        let closed = close(at, "/invocations", id);
        ensure!(closed.status == 200, "{} {}", closed.status, closed.text());
        ensure!(
            closed.header("x-amzn-sagemaker-closed-session-id") == Some(id.as_str()),
            "{:?}",
            closed.headers
        );
    }
    ensure!(
        metric(at, "trident_sessions_open")? == 0,
        "sessions left open"
    );
    ensure!(
        metric(at, "trident_sessions_closed_total")? >= 2 && created >= 2,
        "counts"
    );
    Ok(())
}

fn closing_a_session_ends_its_sequence_in_the_model(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("sessions");
    let before = metric(at, "trident_sessions_created_total")?;
    let id = open(at, "/invocations")?;
    let sequence = FIRST_SEQUENCE_ID + before;
    ensure!(step(at, "/invocations", &id, 5)? == 5, "first step");
    // Open in the model: continuing it directly adds to the session's sum.
    let open_probe = probe(f, sequence);
    ensure!(
        open_probe.status == 200 && open_probe.json()["outputs"][0]["data"][0] == 5,
        "the session's sequence {sequence} is not the one the model keeps: {} {}",
        open_probe.status,
        open_probe.text()
    );
    let closed = close(at, "/invocations", &id);
    ensure!(closed.status == 200, "{} {}", closed.status, closed.text());
    let ended = probe(f, sequence);
    ensure!(
        ended.status == 400 && ended.error().contains("START"),
        "the sequence outlived its session: {} {}",
        ended.status,
        ended.text()
    );
    // The closed id is refused, clearly.
    let after = post(at, "/invocations", Some(&id), add(1).to_string().as_bytes());
    ensure!(
        after.status == 400 && after.error().contains("not open"),
        "{} {}",
        after.status,
        after.text()
    );
    still_serves(f)
}

/// What a bad request is, its path, headers and body, and the status and words it is answered
/// with.
type BadCase = (
    &'static str,
    &'static str,
    Vec<(&'static str, &'static str)>,
    &'static [u8],
    u16,
    &'static str,
);

fn bad_session_requests_are_4xx_and_the_endpoint_serves(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("sessions");
    let cases: Vec<BadCase> = vec![
        (
            "unknown id",
            "/invocations",
            vec![(SESSION, "0123456789abcdef0123456789abcdef")],
            b"{}",
            400,
            "not open",
        ),
        (
            "CLOSE of an unknown id",
            "/invocations",
            vec![(SESSION, "nope")],
            br#"{"requestType":"CLOSE"}"#,
            400,
            "not open",
        ),
        (
            "CLOSE without an id",
            "/invocations",
            vec![],
            br#"{"requestType":"CLOSE"}"#,
            400,
            "X-Amzn-SageMaker-Session-Id",
        ),
        (
            "NEW_SESSION body under an id",
            "/invocations",
            vec![(SESSION, "abc")],
            br#"{"requestType":"NEW_SESSION"}"#,
            400,
            "NEW_SESSION",
        ),
        (
            "NEW_SESSION with a payload",
            "/invocations",
            vec![(SESSION, "NEW_SESSION")],
            br#"{"inputs":[]}"#,
            400,
            "body is",
        ),
        (
            "unknown requestType",
            "/invocations",
            vec![(SESSION, "abc")],
            br#"{"requestType":"DELETE"}"#,
            400,
            "DELETE",
        ),
        (
            "id with a space",
            "/invocations",
            vec![(SESSION, "a b")],
            b"{}",
            400,
            "visible ASCII",
        ),
        (
            "NEW_SESSION on the model repository",
            "/models",
            vec![(SESSION, "NEW_SESSION")],
            br#"{"requestType":"NEW_SESSION"}"#,
            400,
            "served on /invocations",
        ),
        (
            "a session's sequence id outside the session",
            "/invocations",
            vec![],
            br#"{"parameters":{"sequence_id":9223372036854775808,"sequence_start":true},"inputs":[{"name":"INPUT","datatype":"INT32","shape":[1,1],"data":[1]}]}"#,
            400,
            "reserved",
        ),
    ];
    for (what, path, headers, body, status, needle) in cases {
        let mut headers = headers;
        headers.push(("Content-Type", "application/json"));
        let response = request(at, "POST", path, &headers, body);
        ensure!(
            response.status == status && response.error().contains(needle),
            "{what}: {} {}",
            response.status,
            response.text()
        );
        still_serves(f)?;
    }
    // Bytes outside ASCII in the header (sent raw: the client helper writes text).
    let raw = format!(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{SESSION}: caf\u{e9}\x01\r\nContent-Length: 2\r\n\r\n{{}}"
    );
    let response = common::http_client::raw(at, raw.as_bytes());
    ensure!(
        response.status == 400,
        "non-ASCII id: {} {}",
        response.status,
        response.text()
    );
    // A default model the core does not have: NEW_SESSION is 404, as the plain request is
    // (issue 43, case 13: it was 400).
    let missing = f.at("no_model");
    let json = [("Content-Type", "application/json")];
    let plain = request(
        missing,
        "POST",
        "/invocations",
        &json,
        &add(1).to_string().into_bytes(),
    );
    let new = request(
        missing,
        "POST",
        "/invocations",
        &[(SESSION, "NEW_SESSION"), json[0]],
        br#"{"requestType":"NEW_SESSION"}"#,
    );
    ensure!(
        plain.status == 404 && new.status == 404 && new.error().contains("no_such_model"),
        "plain {} {}; NEW_SESSION {} {}",
        plain.status,
        plain.text(),
        new.status,
        new.text()
    );
    still_serves(f)
}

fn the_session_bound_holds(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("sessions");
    let ids: Vec<String> = (0..MAX_SESSIONS)
        .map(|_| open(at, "/invocations"))
        .collect::<Result<_, _>>()?;
    let refused = post(
        at,
        "/invocations",
        Some("NEW_SESSION"),
        br#"{"requestType":"NEW_SESSION"}"#,
    );
    ensure!(
        refused.status == 429 && refused.error().contains("limit of 4"),
        "{} {}",
        refused.status,
        refused.text()
    );
    // Every open session still works, and closing one makes room.
    for id in &ids {
        ensure!(
            step(at, "/invocations", id, 2)? == 2,
            "a session at the bound"
        );
    }
    for id in &ids {
        let closed = close(at, "/invocations", id);
        ensure!(closed.status == 200, "{}", closed.text());
    }
    still_serves(f)
}

/// A stateful model holds as many sequences at once as its sequence batcher has slots; one more
/// waited in the core's backlog with no bound (issue 43, case 2: 32 abandoned sessions made
/// the 33rd's first request wait 20 minutes). Past the slots NEW_SESSION is 429 at once, with
/// when to retry in the header and in the body; a close makes room.
fn sessions_past_a_models_sequence_slots_are_refused_at_once(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("two_slots");
    let held = [open(at, "/invocations")?, open(at, "/invocations")?];
    ensure!(step(at, "/invocations", &held[0], 3)? == 3, "a held slot");
    let asked = Instant::now();
    let refused = post(
        at,
        "/invocations",
        Some("NEW_SESSION"),
        br#"{"requestType":"NEW_SESSION"}"#,
    );
    ensure!(
        refused.status == 429 && refused.error().contains("holds 2 sequences"),
        "{} {}",
        refused.status,
        refused.text()
    );
    ensure!(
        asked.elapsed() < Duration::from_secs(2),
        "{:?}",
        asked.elapsed()
    );
    let header: u64 = refused
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .ok_or("no Retry-After")?;
    ensure!(
        refused.json()["retry_after"] == json!(header) && header > 0,
        "{header}: {}",
        refused.text()
    );
    let closed = close(at, "/invocations", &held[1]);
    ensure!(closed.status == 200, "{}", closed.text());
    let third = open(at, "/invocations")?;
    ensure!(
        step(at, "/invocations", &third, 5)? == 5,
        "the session after a close"
    );
    ensure!(
        step(at, "/invocations", &held[0], 1)? == 4,
        "the held session's sum"
    );
    for id in [&held[0], &third] {
        close(at, "/invocations", id);
    }
    Ok(())
}

/// Sessions opened and never closed cannot hold a model's slots for their whole expiration
/// (issue 55, case 7: 32 of them made every NEW_SESSION a 429 with `Retry-After: 1199`, for 20
/// minutes, renewably): the 429 says when the first will be reclaimable (the 2 s idle time of
/// this deployment), and once it is, a NEW_SESSION takes the slot of the one idle longest. Its
/// sequence ends in the model (the new session's sum starts afresh in the slot), its client's
/// next request is a 400 saying it is not open, and the session used meanwhile keeps its slot
/// and its sum.
fn sessions_left_open_give_their_slots_to_new_ones_once_idle(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("reclaiming");
    let left = open(at, "/invocations")?;
    ensure!(step(at, "/invocations", &left, 7)? == 7, "the left session");
    let used = open(at, "/invocations")?;
    ensure!(step(at, "/invocations", &used, 1)? == 1, "the used session");
    let refused = post(
        at,
        "/invocations",
        Some("NEW_SESSION"),
        br#"{"requestType":"NEW_SESSION"}"#,
    );
    let retry: u64 = refused
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .ok_or("no Retry-After")?;
    ensure!(
        refused.status == 429 && retry <= RECLAIM_IDLE.as_secs() && retry >= 1,
        "{} Retry-After {retry}: {}",
        refused.status,
        refused.text()
    );
    // The used session stays in use; the left one goes idle past the reclaim time.
    let until = Instant::now() + RECLAIM_IDLE + Duration::from_millis(500);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(400));
        ensure!(step(at, "/invocations", &used, 1)? > 1, "the used session");
    }
    let taken = open(at, "/invocations")?;
    ensure!(
        step(at, "/invocations", &taken, 5)? == 5,
        "the new session's sum starts in the reclaimed slot"
    );
    let gone = post(
        at,
        "/invocations",
        Some(&left),
        add(1).to_string().as_bytes(),
    );
    ensure!(
        gone.status == 400 && gone.error().contains("is not open"),
        "{} {}",
        gone.status,
        gone.text()
    );
    let sum = step(at, "/invocations", &used, 1)?;
    ensure!(sum > 2, "the used session kept its sum: {sum}");
    let metrics = get(at, "/metrics").text();
    ensure!(
        metrics.contains("trident_sessions_reclaimed_total 1"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("sessions"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    for id in [&used, &taken] {
        close(at, "/invocations", id);
    }
    Ok(())
}

/// An ensemble over a stateful model is stateful (issue 43, case 5: NEW_SESSION was 200, then
/// every request 400 for want of a correlation id): each session keeps its own sum through the
/// ensemble, and its close ends the step's sequence. A client's own `sequence_id` in the
/// reserved range is refused in a session of a stateless model too.
fn sessions_on_an_ensemble_run_in_its_stateful_steps_sequence(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("ensemble");
    let ensemble_step = |id: &str, value: i32| -> Result<i64, Failed> {
        let body = json!({"inputs": [
            {"name": "IN", "datatype": "INT32", "shape": [1, 1], "data": [value]}]});
        let response = post(at, "/invocations", Some(id), body.to_string().as_bytes());
        ensure!(
            response.status == 200,
            "{} {}",
            response.status,
            response.text()
        );
        // The ensemble echoes its steps' correlation id: the session's, as the unsigned
        // number it is (it read as a negative one).
        let echoed = &response.json()["parameters"]["sequence_id"];
        ensure!(
            echoed.is_null() || echoed.as_u64().is_some_and(|id| id >= 1 << 63),
            "sequence_id echoed as {echoed}"
        );
        Ok(response.json()["outputs"][0]["data"][0]
            .as_i64()
            .unwrap_or(-1))
    };
    let (a, b) = (open(at, "/invocations")?, open(at, "/invocations")?);
    ensure!(ensemble_step(&a, 4)? == 4, "first step of a");
    ensure!(ensemble_step(&b, 10)? == 10, "first step of b");
    ensure!(ensemble_step(&a, 3)? == 7, "a's sum through the ensemble");
    ensure!(ensemble_step(&b, 1)? == 11, "b's sum through the ensemble");
    for id in [&a, &b] {
        let closed = close(at, "/invocations", id);
        ensure!(closed.status == 200, "{}", closed.text());
    }
    // A stateless model's session: the client's sequence_id may not reach a session's.
    let stateless = f.at("stateless");
    let id = open(stateless, "/invocations")?;
    let reserved = json!({
        "parameters": {"sequence_id": 9223372036854775808u64, "sequence_start": true},
        "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 1], "data": [1]}],
    });
    let refused = post(
        stateless,
        "/invocations",
        Some(&id),
        reserved.to_string().as_bytes(),
    );
    ensure!(
        refused.status == 400 && refused.error().contains("reserved"),
        "{} {}",
        refused.status,
        refused.text()
    );
    close(stateless, "/invocations", &id);
    Ok(())
}

fn sessions_are_off_unless_enabled(f: &Fixture) -> Result<(), Failed> {
    // Without sessions the header is ignored: the body runs as it is (here a sequence of its own).
    let body = json!({
        "parameters": {"sequence_id": 5, "sequence_start": true, "sequence_end": true},
        "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [3]}],
    });
    let response = post(
        f.at("probe"),
        "/invocations",
        Some("NEW_SESSION"),
        body.to_string().as_bytes(),
    );
    ensure!(
        response.status == 200 && response.header("x-amzn-sagemaker-new-session-id").is_none(),
        "{} {}",
        response.status,
        response.text()
    );
    let metrics = get(f.at("probe"), "/metrics").text();
    ensure!(
        !metrics.contains("trident_sessions_"),
        "session metrics without sessions"
    );
    Ok(())
}

fn load(f: &Fixture, name: &str, model: &str) -> Result<(), Failed> {
    let parent = f.models_root.path().join(name);
    copy_model(model, &parent, "model");
    let url = parent.join("model").display().to_string();
    let body = json!({"model_name": name, "url": url}).to_string();
    let loaded = request(f.at("mme"), "POST", "/models", &[], body.as_bytes());
    ensure!(
        loaded.status == 200,
        "load {name}: {} {}",
        loaded.status,
        loaded.text()
    );
    Ok(())
}

fn multi_model_sessions_are_per_model_and_expire(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    load(f, "seq", "native_sequence_sum")?;
    load(f, "adder", "native_add_sub")?;
    let seq = open(at, "/models/seq/invoke")?;
    ensure!(step(at, "/models/seq/invoke", &seq, 4)? == 4, "mme step");
    // A session belongs to its model.
    let elsewhere = post(at, "/models/adder/invoke", Some(&seq), b"{}");
    ensure!(
        elsewhere.status == 400 && elsewhere.error().contains("another model"),
        "{} {}",
        elsewhere.status,
        elsewhere.text()
    );
    // A model without sequence batching takes sessions too (for plugins); no sequence reaches it.
    let adder = open(at, "/models/adder/invoke")?;
    let (twos, ones) = (vec![2; 16], vec![1; 16]);
    let add_sub = json!({"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": twos},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": ones},
    ]});
    let response = post(
        at,
        "/models/adder/invoke",
        Some(&adder),
        add_sub.to_string().as_bytes(),
    );
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    // Left idle, both expire with no traffic; the stateful one's sequence ends in the model.
    let deadline = Instant::now() + SHORT_EXPIRATION * 10;
    while metric(at, "trident_sessions_open")? > 0 {
        ensure!(Instant::now() < deadline, "sessions did not expire");
        std::thread::sleep(Duration::from_millis(100));
    }
    ensure!(
        metric(at, "trident_sessions_expired_total")? >= 2,
        "expired count"
    );
    let expired = post(
        at,
        "/models/seq/invoke",
        Some(&seq),
        add(1).to_string().as_bytes(),
    );
    ensure!(
        expired.status == 400 && expired.error().contains("not open"),
        "{} {}",
        expired.status,
        expired.text()
    );
    // A model's unload ends its open sessions.
    let again = open(at, "/models/seq/invoke")?;
    let unloaded = request(at, "DELETE", "/models/seq", &[], b"");
    ensure!(
        unloaded.status == 200,
        "{} {}",
        unloaded.status,
        unloaded.text()
    );
    let gone = post(
        at,
        "/models/seq/invoke",
        Some(&again),
        add(1).to_string().as_bytes(),
    );
    ensure!(
        gone.status == 400 || gone.status == 404,
        "{} {}",
        gone.status,
        gone.text()
    );
    ensure!(
        metric(at, "trident_sessions_open")? == 0,
        "the unloaded model's session is open"
    );
    Ok(())
}

/// Posts `values` to the session-history deployment, in session `id` when given; its answer.
fn history(f: &Fixture, id: Option<&str>, values: &[f64]) -> HttpResponse {
    post(
        f.at("history"),
        "/invocations",
        id,
        serde_json::to_string(values).unwrap().as_bytes(),
    )
}

fn history_of(response: &HttpResponse) -> Result<(Value, u64, Vec<f64>), Failed> {
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    let answer = response.json();
    let values = answer["history"]
        .as_array()
        .ok_or("no history")?
        .iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .collect();
    let turns = answer["turns"].as_u64().ok_or("no turns")?;
    Ok((answer["session_id"].clone(), turns, values))
}

/// The plugin store end to end: a Python adapter (`plugins/python/session_history`, built for
/// `trident:session`) keeps each session's history in the session's store while every call runs
/// in a fresh instance; two interleaved sessions keep their own; a write over the store's bound
/// is refused and the session keeps what it had; the stores are gone after close (the gauge of
/// their bytes), and outside a session the plugin keeps nothing.
fn a_python_plugin_keeps_each_sessions_history_in_its_store(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("history");
    let (a, b) = (open(at, "/invocations")?, open(at, "/invocations")?);
    let (id, turns, values) = history_of(&history(f, Some(&a), &[1.0, 2.0]))?;
    ensure!(
        id == json!(a) && turns == 1 && values == [1.0, 2.0],
        "{id} {turns} {values:?}"
    );
    let (_, turns, values) = history_of(&history(f, Some(&b), &[10.0]))?;
    ensure!(turns == 1 && values == [10.0], "b: {turns} {values:?}");
    let (_, turns, values) = history_of(&history(f, Some(&a), &[3.0]))?;
    ensure!(
        turns == 2 && values == [1.0, 2.0, 3.0],
        "a: {turns} {values:?}"
    );
    let held = metric(at, "trident_session_store_bytes")?;
    ensure!(held > 0, "the stores hold nothing");
    // Over the bound: refused, naming it; the session keeps its history.
    let big = vec![1.0; HISTORY_STORE_BYTES];
    let refused = history(f, Some(&a), &big);
    ensure!(
        refused.status == 400 && refused.error().contains("at most 512 bytes"),
        "{} {}",
        refused.status,
        refused.text()
    );
    let (_, turns, values) = history_of(&history(f, Some(&a), &[4.0]))?;
    ensure!(
        turns == 3 && values == [1.0, 2.0, 3.0, 4.0],
        "after the refusal: {turns} {values:?}"
    );
    // Outside a session: this request's values only, nothing kept.
    let (id, turns, values) = history_of(&history(f, None, &[7.0]))?;
    ensure!(
        id.is_null() && turns == 0 && values == [7.0],
        "{id} {turns} {values:?}"
    );
    // Closing a session drops its store; the other's stays.
    let closed = close(at, "/invocations", &a);
    ensure!(closed.status == 200, "{}", closed.text());
    let after_a = metric(at, "trident_session_store_bytes")?;
    ensure!(
        after_a > 0 && after_a < held,
        "after closing a: {after_a} of {held}"
    );
    let (_, turns, values) = history_of(&history(f, Some(&b), &[20.0]))?;
    ensure!(
        turns == 2 && values == [10.0, 20.0],
        "b after a closed: {turns} {values:?}"
    );
    let closed = close(at, "/invocations", &b);
    ensure!(closed.status == 200, "{}", closed.text());
    ensure!(
        metric(at, "trident_session_store_bytes")? == 0,
        "stores left"
    );
    // A new session starts empty.
    let c = open(at, "/invocations")?;
    let (_, turns, values) = history_of(&history(f, Some(&c), &[5.0]))?;
    ensure!(
        turns == 1 && values == [5.0],
        "a new session: {turns} {values:?}"
    );
    ensure!(close(at, "/invocations", &c).status == 200, "close c");
    Ok(())
}

/// An idle session expires with no traffic at all, and its sequence ends in the model: the core
/// then refuses to continue it without a start (seen from a deployment of the same model
/// without sessions).
fn expiry_ends_the_sequence_in_the_model_with_no_traffic(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("expiring");
    let id = open(at, "/invocations")?;
    ensure!(step(at, "/invocations", &id, 9)? == 9, "first step");
    // The deployment's first session has the first sequence id.
    let open_probe = probe_at(f.at("probe_expiring"), FIRST_SEQUENCE_ID);
    ensure!(
        open_probe.status == 200 && open_probe.json()["outputs"][0]["data"][0] == 9,
        "{} {}",
        open_probe.status,
        open_probe.text()
    );
    let deadline = Instant::now() + SHORT_EXPIRATION * 10;
    while metric(at, "trident_sessions_expired_total")? == 0 {
        ensure!(Instant::now() < deadline, "the session did not expire");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The end is sent after the session leaves the table: wait for the core to take it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ended = probe_at(f.at("probe_expiring"), FIRST_SEQUENCE_ID);
        if ended.status == 400 && ended.error().contains("START") {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the expired session's sequence is still open: {} {}",
            ended.status,
            ended.text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let expired = post(at, "/invocations", Some(&id), add(1).to_string().as_bytes());
    ensure!(
        expired.status == 400 && expired.error().contains("not open"),
        "{} {}",
        expired.status,
        expired.text()
    );
    Ok(())
}

/// Whether a session is a sequence, and its idle limit, are read off the model's configuration
/// in the core.
fn the_core_says_which_models_have_a_sequence_batcher(f: &Fixture) -> Result<(), Failed> {
    let batching = f.engine.sequence_batching("native_sequence_sum")?;
    ensure!(
        batching.map(|b| b.idle_limit) == Some(Duration::from_secs(60)),
        "the sequence model's batcher: {batching:?}"
    );
    ensure!(
        f.engine
            .sequence_batching("native_identity_fp32")?
            .is_none(),
        "the identity model has a sequence batcher"
    );
    ensure!(
        f.engine.sequence_batching("no_such_model").is_err(),
        "an unknown model has a configuration"
    );
    Ok(())
}

/// Loads test model `model` on the long-expiring multi-model deployment as `name`, its
/// configuration changed by `edit`.
fn load_edited(
    f: &Fixture,
    name: &str,
    model: &str,
    edit: impl Fn(String) -> String,
) -> Result<(), Failed> {
    let parent = f.models_root.path().join(name);
    copy_edited(model, &parent, "model", edit);
    let url = parent.join("model").display().to_string();
    let body = json!({"model_name": name, "url": url}).to_string();
    let loaded = request(f.at("mme_long"), "POST", "/models", &[], body.as_bytes());
    ensure!(
        loaded.status == 200,
        "load {name}: {} {}",
        loaded.status,
        loaded.text()
    );
    Ok(())
}

/// Triton drops a sequence idle for 1 s when the model sets no limit; a session of such a model
/// (Triton's defaults, as the README's example) keeps its state across a 3 s pause, on a
/// single-model endpoint and through a multi-model load, because the model's limit follows the
/// session expiration.
fn a_session_outlives_a_pause_past_tritons_default_idle_limit(f: &Fixture) -> Result<(), Failed> {
    load_edited(f, "idle_default", "native_sequence_sum", with_default_idle)?;
    let cases = [
        (f.at("default_idle"), "/invocations", "sequence_default"),
        (
            f.at("mme_long"),
            "/models/idle_default/invoke",
            "idle_default",
        ),
    ];
    let ids: Vec<String> = cases
        .iter()
        .map(|&(at, path, _)| open(at, path))
        .collect::<Result<_, _>>()?;
    for ((at, path, _), id) in cases.iter().zip(&ids) {
        ensure!(step(*at, path, id, 2)? == 2, "{path}: first step");
    }
    std::thread::sleep(Duration::from_secs(3));
    for ((at, path, model), id) in cases.iter().zip(&ids) {
        let sum = step(*at, path, id, 5)?;
        ensure!(
            sum == 7,
            "{path}: after a 3 s pause the sum is {sum}, not 7"
        );
        let limit = f.engine.sequence_batching(model)?.map(|b| b.idle_limit);
        ensure!(
            limit == Some(LONG_EXPIRATION + trident::sessions::idle::MARGIN),
            "{model}'s idle limit {limit:?}"
        );
        ensure!(close(*at, path, id).status == 200, "{path}: close");
    }
    let unloaded = request(f.at("mme_long"), "DELETE", "/models/idle_default", &[], b"");
    ensure!(unloaded.status == 200, "unload: {}", unloaded.text());
    Ok(())
}

/// The `Expires=` of a `NEW_SESSION` answer, as seconds from now.
fn expires_in(at: SocketAddr, path: &str) -> Result<(String, i64), Failed> {
    let response = post(
        at,
        path,
        Some("NEW_SESSION"),
        br#"{"requestType": "NEW_SESSION"}"#,
    );
    let header = response
        .header("x-amzn-sagemaker-new-session-id")
        .ok_or("no new session header")?;
    let (id, expires) = header.split_once("; Expires=").ok_or("no Expires")?;
    let body = response.json();
    ensure!(
        body["expires"] == expires,
        "the body's expiry {}",
        body["expires"]
    );
    let parse = |range: std::ops::Range<usize>| expires[range].parse::<i64>().unwrap_or(-1);
    let (year, month, day) = (parse(0..4), parse(5..7), parse(8..10));
    let seconds = parse(11..13) * 3600 + parse(14..16) * 60 + parse(17..19);
    // Days from the civil date (Howard Hinnant's days_from_civil).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs() as i64;
    Ok((id.to_owned(), days * 86_400 + seconds - now))
}

/// A model whose configuration sets an idle limit shorter than the expiration keeps it: its
/// sessions' `Expires` (and idle expiry) follow the model's 60 s, not the endpoint's 600 s.
fn a_models_shorter_idle_limit_shortens_its_sessions(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("sessions");
    let (id, seconds) = expires_in(at, "/invocations")?;
    ensure!(
        (55..=61).contains(&seconds),
        "a session of a model with a 60 s idle limit expires in {seconds} s"
    );
    ensure!(close(at, "/invocations", &id).status == 200, "close");
    // Without such a limit (raised to follow the expiration), the endpoint's expiration.
    let (id, seconds) = expires_in(f.at("default_idle"), "/invocations")?;
    ensure!(
        (595..=601).contains(&seconds),
        "the default-idle model's session expires in {seconds} s"
    );
    ensure!(
        close(f.at("default_idle"), "/invocations", &id).status == 200,
        "close"
    );
    Ok(())
}

/// When the core refuses a session's request because the sequence is gone (here the model was
/// sent the sequence's end behind the session's back), the session ends: the client reads a 400
/// saying so in SageMaker's terms, without the internal correlation id, and the id is closed.
fn a_session_whose_sequence_the_model_dropped_ends_with_a_clear_400(
    f: &Fixture,
) -> Result<(), Failed> {
    let at = f.at("sessions");
    let sequence = FIRST_SEQUENCE_ID + metric(at, "trident_sessions_created_total")?;
    let lost_before = metric(at, "trident_sessions_lost_total")?;
    let id = open(at, "/invocations")?;
    ensure!(step(at, "/invocations", &id, 4)? == 4, "first step");
    let body = json!({
        "parameters": {"sequence_id": sequence, "sequence_end": true},
        "inputs": [{"name": "INPUT", "datatype": "INT32", "shape": [1, 1], "data": [0]}],
    });
    let ended = post(
        f.at("probe"),
        "/invocations",
        None,
        body.to_string().as_bytes(),
    );
    ensure!(
        ended.status == 200 && ended.json()["outputs"][0]["data"][0] == 4,
        "ending the sequence directly: {} {}",
        ended.status,
        ended.text()
    );
    let refused = post(at, "/invocations", Some(&id), add(1).to_string().as_bytes());
    let message = refused.error();
    ensure!(
        refused.status == 400
            && message.contains("has ended")
            && message.contains("NEW_SESSION")
            && !message.contains(&sequence.to_string())
            && !message.contains("START"),
        "{} {}",
        refused.status,
        refused.text()
    );
    ensure!(
        metric(at, "trident_sessions_lost_total")? == lost_before + 1,
        "the lost count"
    );
    let again = post(at, "/invocations", Some(&id), add(1).to_string().as_bytes());
    ensure!(
        again.status == 400 && again.error().contains("not open"),
        "{} {}",
        again.status,
        again.text()
    );
    still_serves(f)
}

/// Streams `{"TAG": tag, "N": n}` in session `id` on the streaming deployment; the `[TAG, i]`
/// pairs of its events, in order.
fn stream(f: &Fixture, id: &str, tag: i32, n: i32) -> Result<Vec<(i64, i64)>, String> {
    let body = json!({"TAG": tag, "N": n}).to_string();
    let response = post(f.at("streams"), "/invocations", Some(id), body.as_bytes());
    if response.status != 200 {
        return Err(format!(
            "stream {tag}: {} {}",
            response.status,
            response.text()
        ));
    }
    response
        .text()
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| {
            let event: Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
            match event["OUT"].as_array().map(Vec::as_slice) {
                Some([tag, i]) => Ok((tag.as_i64().unwrap_or(-1), i.as_i64().unwrap_or(-1))),
                _ => Err(format!("an event without OUT: {data}")),
            }
        })
        .collect()
}

/// The streaming model's log, a line's fields after its time each: `<correlation id> <flags>
/// <TAG> <N>` for a request, `done <TAG>` for a stream's end.
fn stream_log(f: &Fixture) -> Vec<Vec<String>> {
    std::fs::read_to_string(&f.stream_log)
        .unwrap_or_default()
        .lines()
        .map(|line| line.split_whitespace().skip(1).map(str::to_owned).collect())
        .collect()
}

/// Where in the log the stream of `tag` ended, and where a request with `tag` arrived.
fn done_at(log: &[Vec<String>], tag: i32) -> Option<usize> {
    log.iter().position(|fields| {
        fields.first().is_some_and(|k| k == "done") && fields[1] == tag.to_string()
    })
}

fn request_at(log: &[Vec<String>], tag: i32, end: bool) -> Option<usize> {
    log.iter().position(|fields| {
        let flags: u32 = fields.get(1).and_then(|f| f.parse().ok()).unwrap_or(0);
        fields[0] != "done" && fields.get(2) == Some(&tag.to_string()) && (flags & 2 != 0) == end
    })
}

fn expect_events(events: &[(i64, i64)], tag: i64, n: i64) -> Result<(), Failed> {
    let expected: Vec<(i64, i64)> = (0..n).map(|i| (tag, i)).collect();
    ensure!(events == expected, "stream {tag}: {events:?}");
    Ok(())
}

/// Two streaming requests of one session, on a model that streams from a thread of its own:
/// the second reaches the model only after the first's last event (not at its first).
fn a_stream_holds_its_sessions_turn_to_its_last_event(f: &Fixture) -> Result<(), Failed> {
    let id = open(f.at("streams"), "/invocations")?;
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(|| stream(f, &id, 11, 5));
        std::thread::sleep(Duration::from_millis(250));
        let b = scope.spawn(|| stream(f, &id, 12, 5));
        (a.join().unwrap(), b.join().unwrap())
    });
    expect_events(&a?, 11, 5)?;
    expect_events(&b?, 12, 5)?;
    let log = stream_log(f);
    let (done, second) = (done_at(&log, 11), request_at(&log, 12, false));
    ensure!(
        done.is_some() && second.is_some() && done < second,
        "the second request reached the model before the first stream ended: {log:?}"
    );
    ensure!(
        close(f.at("streams"), "/invocations", &id).status == 200,
        "close"
    );
    Ok(())
}

/// A close during a stream answers once the stream has ended, and the END reaches the model
/// after the stream's last response.
fn a_close_waits_for_a_running_stream_and_its_end_follows_it(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("streams");
    let id = open(at, "/invocations")?;
    let started = Instant::now();
    let (events, closed, closed_after) = std::thread::scope(|scope| {
        let streaming = scope.spawn(|| stream(f, &id, 21, 10));
        std::thread::sleep(Duration::from_millis(300));
        let closed = close(at, "/invocations", &id);
        let closed_after = started.elapsed();
        (streaming.join().unwrap(), closed, closed_after)
    });
    expect_events(&events?, 21, 10)?;
    ensure!(
        closed.status == 200,
        "close: {} {}",
        closed.status,
        closed.text()
    );
    // Ten responses 100 ms apart: the close cannot answer before about 1 s.
    ensure!(
        closed_after >= Duration::from_millis(900),
        "the close answered {closed_after:?} into a 1 s stream"
    );
    let log = stream_log(f);
    // The END of this stream's session: the END request with its correlation id.
    let sequence = request_at(&log, 21, false).map(|at| log[at][0].clone());
    let end = log.iter().position(|fields| {
        Some(&fields[0]) == sequence.as_ref()
            && fields
                .get(1)
                .and_then(|f| f.parse::<u32>().ok())
                .is_some_and(|f| f & 2 != 0)
    });
    let done = done_at(&log, 21);
    ensure!(
        done.is_some() && end.is_some() && done < end,
        "the END reached the model before the stream ended: {log:?}"
    );
    Ok(())
}

/// A session whose stream outlasts its 2 s expiration is not idle while it streams: the next
/// request of the session, right after the stream, is served.
fn a_streaming_session_does_not_expire_mid_stream(f: &Fixture) -> Result<(), Failed> {
    let id = open(f.at("streams"), "/invocations")?;
    // Thirty responses 100 ms apart: 3 s, past the 2 s expiration.
    expect_events(&stream(f, &id, 31, 30)?, 31, 30)?;
    expect_events(&stream(f, &id, 32, 1)?, 32, 1)?;
    ensure!(
        close(f.at("streams"), "/invocations", &id).status == 200,
        "close"
    );
    Ok(())
}

/// A client that leaves mid-stream gives the session's turn back at once (its stream is
/// cancelled), and the session goes on.
fn a_stream_whose_client_leaves_gives_its_turn_back(f: &Fixture) -> Result<(), Failed> {
    use std::io::{Read, Write};
    let at = f.at("streams");
    let id = open(at, "/invocations")?;
    let body = json!({"TAG": 41, "N": 100}).to_string();
    let mut socket = std::net::TcpStream::connect(at)?;
    write!(
        socket,
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         {SESSION}: {id}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut first = [0u8; 256];
    let read = socket.read(&mut first)?;
    ensure!(
        String::from_utf8_lossy(&first[..read]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&first[..read])
    );
    drop(socket);
    let next = Instant::now();
    expect_events(&stream(f, &id, 42, 1)?, 42, 1)?;
    ensure!(
        next.elapsed() < Duration::from_secs(5),
        "the next request waited {:?} for a stream nobody reads (100 responses: 10 s)",
        next.elapsed()
    );
    ensure!(close(at, "/invocations", &id).status == 200, "close");
    Ok(())
}

/// Generate (one answer) in a session is a request of the session's sequence too.
fn generate_answers_run_in_the_sessions_sequence(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("generate");
    let id = open(at, "/invocations")?;
    for (value, expected) in [(3, 3), (4, 7)] {
        let body = json!({"INPUT": value}).to_string();
        let response = post(at, "/invocations", Some(&id), body.as_bytes());
        ensure!(
            response.status == 200 && response.json()["OUTPUT"] == json!(expected),
            "{} {}",
            response.status,
            response.text()
        );
    }
    ensure!(close(at, "/invocations", &id).status == 200, "close");
    Ok(())
}

/// An unload whose client leaves at once still ends the model's sessions, and a different
/// artifact loaded later under the same name never accepts an earlier load's session id.
fn an_abandoned_unload_ends_the_models_sessions_and_a_new_load_never_sees_them(
    f: &Fixture,
) -> Result<(), Failed> {
    use std::io::Write;
    let at = f.at("mme_long");
    load_edited(f, "tenant", "native_sequence_sum", with_default_idle)?;
    let id = open(at, "/models/tenant/invoke")?;
    ensure!(
        step(at, "/models/tenant/invoke", &id, 3)? == 3,
        "first step"
    );
    let open_before = metric(at, "trident_sessions_open")?;
    {
        let mut socket = std::net::TcpStream::connect(at)?;
        socket
            .write_all(b"DELETE /models/tenant HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")?;
        // The client leaves 0.2 s later, before the answer (the unload waits for the model).
        std::thread::sleep(Duration::from_millis(200));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(at, "/models/tenant").status != 404 {
        ensure!(
            Instant::now() < deadline,
            "the abandoned unload never finished"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    ensure!(
        metric(at, "trident_sessions_open")? == open_before - 1,
        "the unloaded model's session is still open"
    );
    // Another tenant's artifact under the same name: the old id is refused, stateful or not.
    for model in ["native_sequence_sum", "native_add_sub"] {
        let _ = std::fs::remove_dir_all(f.models_root.path().join("tenant"));
        load_edited(f, "tenant", model, |config| config)?;
        let old = post(
            at,
            "/models/tenant/invoke",
            Some(&id),
            add(1).to_string().as_bytes(),
        );
        ensure!(
            old.status == 400 && old.error().contains("not open"),
            "{model}: {} {}",
            old.status,
            old.text()
        );
        let unloaded = request(at, "DELETE", "/models/tenant", &[], b"");
        ensure!(unloaded.status == 200, "{}", unloaded.text());
    }
    Ok(())
}
