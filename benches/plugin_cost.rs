//! The cost of one adapter call, small and 1 MB payloads, against the same payload decoded and
//! encoded natively (KServe v2 JSON, no plugin). Builds the example plugins, then prints a table:
//!
//!     cargo bench --bench plugin_cost
//!
//! Each row is measured after a warm-up, one call at a time, with a fresh instance per call as in
//! the server. For profiling, `-- small` (or `-- 1mb`) keeps one payload size, `-- x10`
//! multiplies the iterations and `-- gap` idles 250 µs between calls.

use std::time::{Duration, Instant};

use bytes::Bytes;
use trident::engine::{DataType, InferResponse, OutputTensor};
use trident::plugins::PluginHost;
use trident::plugins::convert::{invocation_to_wit, output_to_wit};
use trident::plugins::host::InferenceResult;
use trident::plugins::manifest::Manifest;
use trident::protocol::v2_request::{OutputEncoding, decode_infer_request};
use trident::protocol::v2_response::encode_infer_response;

#[path = "../tests/common/plugins.rs"]
mod guests;

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    (at(0.50), at(0.99))
}

fn measure(iterations: usize, mut call: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..iterations.min(50) {
        call();
    }
    // `-- gap`: idle 250 µs between calls, as a server between small requests does, so caches
    // and branch predictors are as cold as they are there.
    let gap = std::env::args().any(|a| a == "gap");
    let samples = (0..iterations)
        .map(|_| {
            if gap {
                std::thread::sleep(Duration::from_micros(250));
            }
            let started = Instant::now();
            call();
            started.elapsed()
        })
        .collect();
    percentiles(samples)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let manifest_path = dir.path().join("plugins.toml");
    let entry = |name: &str, wasm: &str, extra: &str| {
        format!(
            "[plugins.{name}]\npath = \"{}\"\nsha256 = \"{}\"\ntime_limit_ms = 5000\n{extra}\n",
            guests::guest(wasm).display(),
            guests::digest(wasm)
        )
    };
    std::fs::write(
        &manifest_path,
        format!(
            "{}{}[models.m]\nrequest = \"csv\"\nresponse = \"out\"\n",
            entry("csv", "csv_request", "content_types = [\"text/csv\"]"),
            entry("out", "csv_json_response", "")
        ),
    )
    .unwrap();
    let host = runtime
        .block_on(PluginHost::load(&Manifest::load(&manifest_path).unwrap()))
        .unwrap();
    let selection = host.select("m", None, None).unwrap();
    let (request_plugin, response_plugin) =
        (selection.request.unwrap(), selection.response.unwrap());

    let args: Vec<String> = std::env::args().skip(1).collect();
    let scale: usize = args
        .iter()
        .find_map(|a| a.strip_prefix('x')?.parse().ok())
        .unwrap_or(1);
    let wanted = |key: &str| {
        !args.iter().any(|a| a == "small" || a == "1mb") || args.iter().any(|a| a == key)
    };

    println!("| payload | path | p50 | p99 |");
    println!("|---|---|---|---|");
    for (key, label, columns, iterations) in [
        ("small", "small (3 FP32)", 3usize, 2000usize),
        ("1mb", "1 MB (262144 FP32)", 262_144, 60),
    ] {
        if !wanted(key) {
            continue;
        }
        let iterations = iterations * scale;
        let values: Vec<f32> = (0..columns).map(|i| i as f32 * 0.5 + 0.25).collect();
        let csv = values
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(",")
            + "\n";
        let v2 = serde_json::json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, columns], "data": values}]})
            .to_string();
        let invocation = trident::invocation::Invocation {
            content_type: Some("text/csv".into()),
            accept: Some("text/csv".into()),
            ..Default::default()
        };
        let wit = invocation_to_wit(
            "/invocations",
            "m",
            &invocation,
            &http::HeaderMap::new(),
            &[],
            csv.as_bytes(),
        );

        let (p50, p99) = measure(iterations, || {
            let adapted = runtime
                .block_on(host.adapt_request(&request_plugin, &wit))
                .unwrap()
                .unwrap();
            std::hint::black_box(adapted);
        });
        println!(
            "| {label} | CSV request adapter ({} B body) | {p50:?} | {p99:?} |",
            csv.len()
        );
        let v2_body = Bytes::from(v2.clone());
        let (p50, p99) = measure(iterations, || {
            std::hint::black_box(decode_infer_request("m", &v2_body, None).unwrap());
        });
        println!(
            "| {label} | v2 JSON decode, no plugin ({} B body) | {p50:?} | {p99:?} |",
            v2.len()
        );

        let data: Vec<u8> = values
            .iter()
            .flat_map(|v| (v * 2.0 + 1.0).to_le_bytes())
            .collect();
        let response = InferResponse {
            model_name: "m".into(),
            model_version: 1,
            id: None,
            parameters: Vec::new(),
            outputs: vec![OutputTensor {
                name: "OUTPUT0".into(),
                datatype: DataType::Fp32,
                shape: vec![1, columns as i64],
                data: Bytes::from(data),
            }],
        };
        let (p50, p99) = measure(iterations, || {
            let result = InferenceResult {
                model_name: response.model_name.clone(),
                model_version: "1".into(),
                outputs: response.outputs.iter().map(output_to_wit).collect(),
            };
            let reply = runtime
                .block_on(host.adapt_response(&response_plugin, &wit, &result))
                .unwrap()
                .unwrap();
            std::hint::black_box(reply);
        });
        println!("| {label} | CSV response adapter | {p50:?} | {p99:?} |");
        let (p50, p99) = measure(iterations, || {
            std::hint::black_box(
                encode_infer_response(&response, &OutputEncoding::default()).unwrap(),
            );
        });
        println!("| {label} | v2 JSON encode, no plugin | {p50:?} | {p99:?} |");
    }
}
