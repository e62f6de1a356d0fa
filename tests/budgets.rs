//! The resource budget, measured on `trident serve` as a process (docs/serving.md, "Budgets"): hostile
//! bodies of the worst shapes found cost the serving process a small multiple of what is in
//! flight, are refused with 400, and leave it serving with its memory at rest where it was:
//! on `/invocations` (v2 JSON, the binary header, generate) and on a multi-model endpoint's
//! `/models/{name}/invoke`; and artifacts built to make their own check expensive.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use common::http_client::{HttpResponse, NoResponse, request, try_request};
use common::process::{serve_ready, serving_process};

fn trident() -> Command {
    let mut command = common::command(env!("CARGO_BIN_EXE_trident"));
    for (key, _) in std::env::vars() {
        if key.starts_with("SAGEMAKER_") || key.starts_with("TRIDENT_") {
            command.env_remove(key);
        }
    }
    command.env("RUST_LOG", "info");
    command
}

/// SageMaker's request limit, trident's default body limit.
const BODY_LIMIT: usize = 6 * 1024 * 1024;

/// A field of `/proc/<pid>/status` in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
        * 1024
}

/// Resets the peak resident set of `pid` to its present one (`VmHWM`, `clear_refs` 5).
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

/// `head`, then `item(0)`, `item(1)`, … separated by commas, as many as fit under the body
/// limit with `tail` after them.
fn fill(head: &[u8], item: impl Fn(usize) -> String, tail: &[u8]) -> Vec<u8> {
    let mut body = head.to_vec();
    for n in 0.. {
        let item = item(n);
        if body.len() + item.len() + tail.len() + 1 > BODY_LIMIT {
            break;
        }
        if n > 0 {
            body.push(b',');
        }
        body.extend_from_slice(item.as_bytes());
    }
    body.extend_from_slice(tail);
    body
}

/// A JSON body of one-element FP32 inputs, as many as fit under the body limit, with each
/// input's `datatype` before its `data` (the one-pass reader decodes as it reads) or after it.
fn many_inputs(datatype_first: bool) -> Vec<u8> {
    let input = |n| {
        if datatype_first {
            format!(r#"{{"name":"I{n}","datatype":"FP32","shape":[1],"data":[1.5]}}"#)
        } else {
            format!(r#"{{"name":"I{n}","data":[1.5],"shape":[1],"datatype":"FP32"}}"#)
        }
    };
    fill(br#"{"inputs":["#, input, b"]}")
}

/// One FP64 input whose data is one-digit numbers: 8 bytes decoded per 2 of text, under a
/// shape that does not match (refused once decoded).
fn dense_fp64() -> Vec<u8> {
    let head = br#"{"inputs":[{"name":"INPUT0","datatype":"FP64","shape":[1,1],"data":["#;
    fill(head, |_| "7".to_owned(), b"]}]}")
}

/// One good input and as many requested outputs as fit.
fn many_outputs() -> Vec<u8> {
    let head =
        br#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[1]}],"outputs":["#;
    fill(head, |n| format!(r#"{{"name":"O{n}"}}"#), b"]}")
}

/// Inputs whose tensors come from the binary part (`binary_data_size` 0), each with its own
/// `parameters` object: the binary-header route. The body is all JSON header.
fn many_binary_inputs() -> Vec<u8> {
    let input = |n| {
        format!(
            r#"{{"name":"I{n}","datatype":"FP32","shape":[0],"parameters":{{"binary_data_size":0}}}}"#
        )
    };
    fill(br#"{"inputs":["#, input, b"]}")
}

/// A hostile body: its shape's name, its bytes and the headers it needs beyond its type.
type Hostile = (&'static str, Vec<u8>, Vec<(&'static str, String)>);

/// Sends each of `hostile`, `rounds` times, from a thread of its own, all at once, with the
/// serving process's peak resident set reset first: each must be answered 400, its error
/// passing `check` (given the shape's name). The peak must grow by less than 10× the bodies in
/// flight. Returns the resident set before, the peak, and the bytes in flight.
fn refused_within_budget(
    serving: u32,
    hostile: &[Hostile],
    rounds: usize,
    send: impl Fn(&Hostile) -> Result<HttpResponse, NoResponse> + Sync,
    check: impl Fn(&str, &str) + Sync,
) -> (u64, u64, usize) {
    let at_rest = status_bytes(serving, "VmRSS");
    reset_peak(serving);
    let in_flight = hostile.iter().map(|(_, body, _)| body.len()).sum::<usize>() * rounds;
    std::thread::scope(|scope| {
        let clients: Vec<_> = (0..rounds)
            .flat_map(|_| hostile.iter())
            .map(|body| {
                let (send, check) = (&send, &check);
                scope.spawn(move || {
                    let shape = body.0;
                    let response =
                        send(body).unwrap_or_else(|e| panic!("{shape}: no answer: {e:?}"));
                    assert_eq!(response.status, 400, "{shape}: {}", response.text());
                    check(shape, &response.error());
                })
            })
            .collect();
        for client in clients {
            client.join().unwrap();
        }
    });
    let peak = status_bytes(serving, "VmHWM");
    assert!(
        peak.saturating_sub(at_rest) < 10 * in_flight as u64,
        "peak resident set {} MiB over {} MiB at rest, for {} MiB in flight",
        peak >> 20,
        at_rest >> 20,
        in_flight >> 20
    );
    (at_rest, peak, in_flight)
}

fn good(addr: SocketAddr) -> u16 {
    let body = br#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2],"data":[1,2]}]}"#;
    let response = request(
        addr,
        "POST",
        "/invocations",
        &[("Content-Type", "application/json")],
        body,
    );
    if response.status == 200 {
        assert_eq!(
            response.json()["outputs"][0]["data"],
            serde_json::json!([1.0, 2.0])
        );
    }
    response.status
}

/// Twenty concurrent bodies of the worst shapes (issue 43's case 1: 100,000 one-element inputs
/// reserved the rest of the body each, 168 GB of address space, and two at once aborted the
/// serving process): each is refused with 400 naming what is wrong, the serving process's peak
/// resident set grows by less than 10× the bodies in flight, its resident set comes back within
/// 10 MB of where it was once ordinary traffic resumes, and the next request succeeds.
#[test]
fn twenty_hostile_bodies_at_once_cost_a_small_multiple_of_themselves() {
    let repository = tempfile::tempdir().unwrap();
    common::copy_model("native_identity_fp32", repository.path(), "identity");
    let (running, addr) = serve_ready(trident(), repository.path());
    let serving = serving_process(running.0.id());
    assert_eq!(good(addr), 200);
    let binary = many_binary_inputs();
    let binary_header = binary.len().to_string();
    let bodies: Vec<Hostile> = vec![
        ("datatype first", many_inputs(true), vec![]),
        ("data first", many_inputs(false), vec![]),
        ("dense FP64", dense_fp64(), vec![]),
        ("many outputs", many_outputs(), vec![]),
        (
            "binary header",
            binary,
            vec![("Inference-Header-Content-Length", binary_header)],
        ),
    ];
    let started = Instant::now();
    let send = |(_, body, extra): &Hostile| {
        let mut headers = vec![("Content-Type", "application/json")];
        headers.extend(extra.iter().map(|(k, v)| (*k, v.as_str())));
        try_request(addr, "POST", "/invocations", &headers, body)
    };
    let check = |shape: &str, error: &str| {
        assert!(
            ["inputs", "outputs", "elements"]
                .iter()
                .any(|w| error.contains(w)),
            "{shape}: {error}"
        );
    };
    let (at_rest, peak, in_flight) = refused_within_budget(serving, &bodies, 4, send, check);
    eprintln!(
        "20 hostile bodies ({} MiB in all) refused in {:?}",
        in_flight >> 20,
        started.elapsed()
    );
    assert_eq!(good(addr), 200, "the request after them");
    assert_eq!(
        serving_process(running.0.id()),
        serving,
        "the serving process was replaced"
    );
    // Back to serving ordinary traffic (health checks on a few connections at once, so every
    // serving thread sees some): mimalloc gives freed memory back on the allocating thread's
    // next activity after its purge delay (1 s), never from an idle thread (docs/serving.md, "Budgets").
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..25 {
                        assert_eq!(request(addr, "GET", "/ping", &[], b"").status, 200);
                    }
                });
            }
        });
        let now = status_bytes(serving, "VmRSS");
        if now <= at_rest + 10 * 1024 * 1024 {
            eprintln!(
                "resident set: {} MiB at rest, {} MiB at the peak, {} MiB after",
                at_rest >> 20,
                peak >> 20,
                now >> 20
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "resident set {} MiB after the bodies, {} MiB before",
            now >> 20,
            at_rest >> 20
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A generate body of as many keys as fit, each naming no input (each would be a request
/// parameter the core builds an object for), and one of a nesting as deep as fits.
fn hostile_generate_bodies() -> Vec<(&'static str, Vec<u8>)> {
    let keys = fill(b"{", |n| format!(r#""k{n}":1"#), br#","INPUT0":[[1]]}"#);
    let depth = BODY_LIMIT / 2 - 32;
    let mut deep = br#"{"INPUT0":"#.to_vec();
    deep.extend(std::iter::repeat_n(b'[', depth));
    deep.extend(std::iter::repeat_n(b']', depth));
    deep.push(b'}');
    vec![("many keys", keys), ("deep", deep)]
}

/// The generate route under hostile bodies at once (ten of each shape): refused with 400 naming
/// the limit, within the same budget as the v2 route, the next request served.
#[test]
fn hostile_generate_bodies_cost_a_small_multiple_of_themselves() {
    let repository = tempfile::tempdir().unwrap();
    common::copy_model("native_identity_fp32", repository.path(), "identity");
    let mut command = trident();
    command.env("SAGEMAKER_TRITON_INFERENCE_TYPE", "generate");
    let (running, addr) = serve_ready(command, repository.path());
    let serving = serving_process(running.0.id());
    let generate = |body: &[u8]| {
        try_request(
            addr,
            "POST",
            "/invocations",
            &[("Content-Type", "application/json")],
            body,
        )
    };
    let ok = generate(br#"{"INPUT0":[[1.5,2]]}"#).unwrap();
    assert_eq!(ok.status, 200, "{}", ok.text());
    let bodies: Vec<Hostile> = hostile_generate_bodies()
        .into_iter()
        .map(|(shape, body)| (shape, body, vec![]))
        .collect();
    let check = |shape: &str, error: &str| {
        assert!(
            error.contains("parameters") || error.contains("recursion limit"),
            "{shape}: {error}"
        );
    };
    refused_within_budget(serving, &bodies, 10, |(_, body, _)| generate(body), check);
    let after = generate(br#"{"INPUT0":[[1.5,2]]}"#).unwrap();
    assert_eq!(
        after.status,
        200,
        "the request after them: {}",
        after.text()
    );
    assert_eq!(serving_process(running.0.id()), serving);
}

/// A multi-model endpoint: its repository, its models root, the process and its address.
fn multi_model_endpoint() -> (
    tempfile::TempDir,
    tempfile::TempDir,
    common::process::Running,
    SocketAddr,
) {
    let root = tempfile::tempdir().unwrap();
    let repository = tempfile::tempdir().unwrap();
    let mut command = trident();
    command.env("SAGEMAKER_MULTI_MODEL", "true");
    let args = [
        std::ffi::OsStr::new("--models-root"),
        root.path().as_os_str(),
        std::ffi::OsStr::new("--multi-model-repository"),
        repository.path().as_os_str(),
    ];
    let (running, addr) = common::process::serve_ready_with(command, repository.path(), &args);
    (repository, root, running, addr)
}

/// A multi-model endpoint's invoke route under the worst v2 bodies (two of each at once):
/// refused with 400, within the budget, the model serving after them.
#[test]
fn hostile_bodies_on_a_multi_model_invoke_cost_a_small_multiple_of_themselves() {
    // Declared first, dropped last: the server stops before its folders go.
    let (_repository, root, running, addr) = multi_model_endpoint();
    let url = root.path().join("tenant/model");
    common::copy_model("native_identity_fp32", &url, "identity");
    let body = serde_json::json!({"model_name": "tenant", "url": url}).to_string();
    let loaded = request(addr, "POST", "/models", &[], body.as_bytes());
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    let invoke = |body: &[u8]| {
        try_request(
            addr,
            "POST",
            "/models/tenant/invoke",
            &[("Content-Type", "application/json")],
            body,
        )
    };
    let good = br#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[3]}]}"#;
    assert_eq!(invoke(good).unwrap().status, 200);
    let serving = serving_process(running.0.id());
    let bodies: Vec<Hostile> = [
        many_inputs(true),
        many_inputs(false),
        dense_fp64(),
        many_outputs(),
    ]
    .into_iter()
    .map(|body| ("v2", body, vec![]))
    .collect();
    refused_within_budget(serving, &bodies, 2, |(_, body, _)| invoke(body), |_, _| {});
    assert_eq!(invoke(good).unwrap().status, 200, "the request after them");
    assert_eq!(serving_process(running.0.id()), serving);
}

/// Issue 56's case 6: artifacts built to make the check itself expensive, loaded on a
/// multi-model endpoint all at once: a 16 MiB `config.pbtxt` of one-letter unknown fields (it
/// cost 1.24 GiB resident, most of it kept), a warm-up input of 1 GiB of zeros and one of 2^33
/// elements (each accepted, for the core to allocate per instance). Each is refused with 400
/// naming its configuration, the serving process's peak resident set grows by less than
/// 64 MiB for all of them, and a clean artifact loads and serves after them.
#[test]
fn artifacts_built_to_make_the_check_expensive_are_refused_within_budget() {
    // Declared first, dropped last: the server stops before its folders go.
    let (_repository, root, running, addr) = multi_model_endpoint();
    let artifact = |name: &str, config: &[u8]| {
        let url = root.path().join(name).join("model");
        common::copy_model("native_identity_fp32", &url, "m");
        std::fs::write(url.join("m/config.pbtxt"), config).unwrap();
        url
    };
    let base = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/models/native_identity_fp32/config.pbtxt"),
    )
    .unwrap();
    let mut huge = base.clone();
    while huge.len() < 16 << 20 {
        huge.extend_from_slice(b"a: 1\n");
    }
    let warmup = |dims: &str| {
        let mut config = base.clone();
        config.extend_from_slice(
            format!(
                "model_warmup [ {{ name: \"w\" batch_size: 1 inputs {{ key: \"INPUT0\" value: \
                 {{ data_type: TYPE_FP32 dims: [ {dims} ] zero_data: true }} }} }} ]\n"
            )
            .as_bytes(),
        );
        config
    };
    let cases = [
        ("huge", artifact("huge", &huge)),
        ("gib", artifact("gib", &warmup("268435456"))),
        ("elements", artifact("elements", &warmup("8589934592"))),
    ];
    let serving = serving_process(running.0.id());
    let at_rest = status_bytes(serving, "VmRSS");
    reset_peak(serving);
    std::thread::scope(|scope| {
        for (name, url) in &cases {
            scope.spawn(move || {
                let body = serde_json::json!({"model_name": name, "url": url}).to_string();
                let response = request(addr, "POST", "/models", &[], body.as_bytes());
                assert_eq!(response.status, 400, "{name}: {}", response.text());
                assert!(
                    response.text().contains("config.pbtxt"),
                    "{name}: {}",
                    response.text()
                );
            });
        }
    });
    let peak = status_bytes(serving, "VmHWM");
    assert!(
        peak.saturating_sub(at_rest) < 64 << 20,
        "peak resident set {} MiB over {} MiB at rest",
        peak >> 20,
        at_rest >> 20
    );
    let clean = artifact("clean", &base);
    let body = serde_json::json!({"model_name": "clean", "url": clean}).to_string();
    let loaded = request(addr, "POST", "/models", &[], body.as_bytes());
    assert_eq!(loaded.status, 200, "{}", loaded.text());
    let good = br#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[3]}]}"#;
    let served = request(addr, "POST", "/models/clean/invoke", &[], good);
    assert_eq!(served.status, 200, "{}", served.text());
    assert_eq!(serving_process(running.0.id()), serving);
}
