//! The cost of one adapter call, small and 1 MB payloads, against the same payload decoded and
//! encoded natively (KServe v2 JSON, no plugin). Builds the example plugins, then prints a table:
//!
//!     cargo bench --bench plugin_cost
//!
//! Each row is measured after a warm-up, one call at a time, with a fresh instance per call as in
//! the server; the last column is the process's CPU time per call, with what the call leaves to
//! the housekeeping thread (its store's drop, the next ready instance). A second table splits
//! one small request-adapter call into its phases: a store, an instance, the call, the drop
//! (the reset of the instance's memory slot). For profiling, `-- small` (or `-- 1mb`) keeps one payload size, `-- x10` multiplies the
//! iterations and `-- gap` idles 250 µs between calls, as a server between small requests does
//! (caches as cold as they are there). The phase table has the Rust CSV adapter and its Python
//! and JavaScript builds side by side (built with the `componentize-py` and `componentize-qjs` of
//! `scripts/install-guest-tools`), and a last table how long each takes to load, with an empty
//! compile cache and with the entry that load left. `-- stream` times one stream-adapter call
//! per event (the OpenAI chat plugin, and a pass-through adapter), in the instance its stream
//! keeps and in a fresh one, against no plugin. `-- keep=MIB`
//! has the phase table's pooled slots keep MIB resident between calls (trident keeps 8).
//! `-- image profile` runs the image plugin's work natively and in its sandbox 1,000 times
//! each, for `TRIDENT_PLUGIN_PERF_MAP=1 perf record` to compare function by function.

use std::time::{Duration, Instant};

use bytes::Bytes;
use trident::engine::{DataType, InferResponse, OutputTensor};
use trident::plugins::PluginHost;
use trident::plugins::platform::loading::Compiled;
use trident::plugins::platform::manifest::Manifest;
use trident::plugins::runtime::engine::{Pool, Runtime};
use trident::plugins::runtime::store::CallStore;
use trident::plugins::wit::bindings::request::RequestAdapterPluginPre;
use trident::plugins::wit::bindings::request::exports::trident::plugin::request_adapter::Adapted;
use trident::plugins::wit::bindings::types::Invocation as WitInvocation;
use trident::plugins::wit::convert::invocation_to_wit;
use trident::plugins::{PluginInvocation, StreamPosition};
use trident::protocol::v2_request::{OutputEncoding, decode_infer_request};
use trident::protocol::v2_response::encode_infer_response;
use wasmtime::component::Component;

// The tests' guest builders; the bench has no use for their signing helpers.
#[allow(dead_code)]
#[path = "../tests/common/plugins.rs"]
mod guests;

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    (at(0.50), at(0.99))
}

/// CPU time this process has used, all its threads together.
fn process_cpu() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

/// p50 and p99 of `call`, and the CPU time per call of the whole process: with what the call
/// left to the housekeeping thread (dropping its store, making the next instance), which runs
/// beside the caller as in the server.
fn measure(iterations: usize, mut call: impl FnMut()) -> (Duration, Duration, Duration) {
    for _ in 0..iterations.min(50) {
        call();
    }
    let gap = gap();
    let cpu_before = process_cpu();
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
    // Time for the housekeeping the last calls left.
    std::thread::sleep(Duration::from_millis(50));
    let cpu = process_cpu() - cpu_before;
    let (p50, p99) = percentiles(samples);
    (
        p50,
        p99,
        cpu / u32::try_from(iterations).unwrap_or(u32::MAX),
    )
}

fn gap() -> bool {
    std::env::args().any(|a| a == "gap")
}

/// `keep=MIB` on the command line: the phase table's pooled slots keep MIB of memory resident
/// between calls instead of trident's default.
fn keep_resident_mib() -> Option<usize> {
    std::env::args().find_map(|a| a.strip_prefix("keep=")?.parse().ok())
}

/// Minor page faults of the calling thread so far (`/proc/thread-self/stat`, field 10).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    // The command name may hold spaces; the fields after it are space-separated.
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(7).unwrap().parse().unwrap()
}

/// Mean time of each phase of a small call of the request adapter at `path`, each in a fresh
/// store as the server makes them: (store, instance, call, drop); then the mean minor page
/// faults of each phase, counted in rounds of their own (reading the counter takes longer than
/// some phases).
fn phases(
    runtime: &tokio::runtime::Runtime,
    iterations: u32,
    wit: &WitInvocation,
    path: &std::path::Path,
) -> ([Duration; 4], [f64; 4]) {
    let plugins = match keep_resident_mib() {
        Some(mib) => Runtime::with_keep_resident(64 << 20, None, Pool::Container, mib << 20),
        None => Runtime::new(64 << 20, None, Pool::Container),
    }
    .unwrap();
    let component = Component::from_file(plugins.engine(), path).unwrap();
    let pre = RequestAdapterPluginPre::new(plugins.linker().instantiate_pre(&component).unwrap())
        .unwrap();
    let limits = plugins.limits("csv", Default::default(), Default::default(), 64, 5000);
    let gap = gap();
    let mut total = [Duration::ZERO; 4];
    for round in 0..iterations + 50 {
        if gap {
            std::thread::sleep(Duration::from_micros(250));
        }
        let started = Instant::now();
        let mut call = CallStore::new(plugins.engine(), &limits);
        let stored = Instant::now();
        let instance = runtime
            .block_on(pre.instantiate_async(&mut call.store))
            .unwrap();
        let instantiated = Instant::now();
        let adapted = runtime
            .block_on(
                instance
                    .trident_plugin_request_adapter()
                    .call_adapt_request(&mut call.store, wit),
            )
            .unwrap();
        let called = Instant::now();
        // The success path is what is measured: a guest refusing the call would be faster.
        assert!(
            matches!(adapted, Ok(Adapted::Tensors(_))),
            "{}: {adapted:?}",
            path.display()
        );
        drop((adapted, instance, call));
        let dropped = Instant::now();
        if round >= 50 {
            for (slot, (from, to)) in total.iter_mut().zip([
                (started, stored),
                (stored, instantiated),
                (instantiated, called),
                (called, dropped),
            ]) {
                *slot += to - from;
            }
        }
    }
    let mut faults = [0u64; 4];
    let fault_rounds = 50;
    for _ in 0..fault_rounds {
        let started = minor_faults();
        let mut call = CallStore::new(plugins.engine(), &limits);
        let stored = minor_faults();
        let instance = runtime
            .block_on(pre.instantiate_async(&mut call.store))
            .unwrap();
        let instantiated = minor_faults();
        let adapted = runtime.block_on(
            instance
                .trident_plugin_request_adapter()
                .call_adapt_request(&mut call.store, wit),
        );
        let called = minor_faults();
        drop((adapted, instance, call));
        let dropped = minor_faults();
        for (slot, (from, to)) in faults.iter_mut().zip([
            (started, stored),
            (stored, instantiated),
            (instantiated, called),
            (called, dropped),
        ]) {
            *slot += to - from;
        }
    }
    (
        total.map(|phase| phase / iterations),
        faults.map(|count| count as f64 / f64::from(fault_rounds)),
    )
}

/// The component trident serves for the plugin at `path`: its state after `check-config`
/// written into it ([`trident::plugins::runtime::snapshot`]), kept beside it as `<name>.initialised.wasm`.
fn initialised(path: &std::path::Path) -> std::path::PathBuf {
    use trident::plugins::runtime::snapshot::{Initialized, initialize};
    let plugins = Runtime::new(64 << 20, None, Pool::Container).unwrap();
    let limits = plugins.limits("csv", Default::default(), Default::default(), 64, 5000);
    let wasm = std::fs::read(path).unwrap();
    let Ok(Initialized::Snapshot(snapshot)) =
        initialize(plugins.engine(), plugins.linker(), &limits, [7; 32], &wasm)
    else {
        panic!("{} cannot be initialised", path.display());
    };
    let out = path.with_extension("initialised.wasm");
    std::fs::write(&out, snapshot).unwrap();
    out
}

/// How long loading a manifest with the request adapter at `path` takes: first with an empty
/// compile cache of its own (everything compiled), then again (read from the cache).
fn load_times(runtime: &tokio::runtime::Runtime, path: &std::path::Path) -> (Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("plugins.toml");
    std::fs::write(
        &manifest,
        format!(
            "compile_cache = \"cache\"\n[plugins.csv]\npath = \"{}\"\nsha256 = \"{}\"\n",
            path.display(),
            trident::plugins::platform::loading::sha256_hex(&std::fs::read(path).unwrap())
        ),
    )
    .unwrap();
    let load = |expected: &dyn Fn(Compiled)| {
        let started = Instant::now();
        let host = runtime
            .block_on(PluginHost::load(&Manifest::load(&manifest).unwrap()))
            .unwrap();
        let elapsed = started.elapsed();
        expected(host.compiled());
        elapsed
    };
    // Cold, everything is compiled (the plugin, and its initialised state where it has one);
    // warm, everything is read from the cache.
    let cold = load(&|compiled: Compiled| {
        assert!(
            compiled.from_cache == 0 && compiled.compiled >= 1,
            "{compiled:?}"
        );
    });
    let warm = load(&|compiled: Compiled| {
        assert!(
            compiled.compiled == 0 && compiled.from_cache >= 1,
            "{compiled:?}"
        );
    });
    (cold, warm)
}

/// SageMaker's headers of a CSV request that accepts CSV.
fn csv_headers() -> trident::invocation::Invocation {
    trident::invocation::Invocation {
        content_type: Some("text/csv".into()),
        accept: Some("text/csv".into()),
        ..Default::default()
    }
}

/// A CSV invocation of `/invocations` for model `m`, in the interface's type (for the phases
/// measured below the host).
fn csv_invocation(body: &[u8]) -> WitInvocation {
    let headers = http::HeaderMap::new();
    invocation_to_wit("/invocations", "m", &csv_headers(), &headers, &[], body)
}

/// The same invocation as the host's hooks take it.
fn csv_plugin_invocation(body: &[u8]) -> PluginInvocation {
    let headers = http::HeaderMap::new();
    PluginInvocation::new(
        "/invocations",
        "m",
        &csv_headers(),
        &headers,
        &[],
        body,
        None,
    )
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
        !args
            .iter()
            .any(|a| a == "small" || a == "1mb" || a == "stream" || a == "image")
            || args.iter().any(|a| a == key)
    };

    if wanted("small") || wanted("1mb") {
        println!("| payload | path | p50 | p99 | CPU per call, housekeeping included |");
        println!("|---|---|---|---|---|");
    }
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
        let wit = csv_plugin_invocation(csv.as_bytes());

        let (p50, p99, busy) = measure(iterations, || {
            let adapted = runtime
                .block_on(host.adapt_request(&request_plugin, &wit))
                .unwrap()
                .unwrap();
            std::hint::black_box(adapted);
        });
        println!(
            "| {label} | CSV request adapter ({} B body) | {p50:?} | {p99:?} | {busy:?} |",
            csv.len()
        );
        let v2_body = Bytes::from(v2.clone());
        let (p50, p99, busy) = measure(iterations, || {
            std::hint::black_box(decode_infer_request("m", &v2_body, None).unwrap());
        });
        println!(
            "| {label} | v2 JSON decode, no plugin ({} B body) | {p50:?} | {p99:?} | {busy:?} |",
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
        let (p50, p99, busy) = measure(iterations, || {
            let reply = runtime
                .block_on(host.adapt_response(&response_plugin, &wit, &response))
                .unwrap()
                .unwrap();
            std::hint::black_box(reply);
        });
        println!("| {label} | CSV response adapter | {p50:?} | {p99:?} | {busy:?} |");
        let (p50, p99, busy) = measure(iterations, || {
            std::hint::black_box(
                encode_infer_response(&response, &OutputEncoding::default()).unwrap(),
            );
        });
        println!("| {label} | v2 JSON encode, no plugin | {p50:?} | {p99:?} | {busy:?} |");
    }
    if wanted("small") {
        let wit = csv_invocation(b"0.25,0.75,1.25\n");
        let iterations = |n: usize| u32::try_from(n * scale).unwrap_or(u32::MAX);
        let (rust, python) = (
            guests::guest("csv_request"),
            guests::python_guest("plugins/python/csv_request", "request-adapter-plugin"),
        );
        let guests = [
            ("Rust", rust.clone(), 2000),
            ("Rust, initialised", initialised(&rust), 2000),
            ("Python", python.clone(), 200),
            ("Python, initialised", initialised(&python), 200),
            (
                "JavaScript",
                guests::js_guest("plugins/js/csv_request", "request-adapter-plugin"),
                1000,
            ),
        ];
        let measured: Vec<([Duration; 4], [f64; 4])> = guests
            .iter()
            .map(|(_, path, n)| phases(&runtime, iterations(*n), &wit, path))
            .collect();
        println!();
        let labels: Vec<&str> = guests.iter().map(|(label, ..)| *label).collect();
        println!(
            "| one small CSV request-adapter call, by phase (mean time, mean minor page faults) | {} |",
            labels.join(" | ")
        );
        println!("|---|{}", "---|".repeat(labels.len()));
        for (index, phase) in [
            "a store (WASI context, resource table, limits)",
            "an instance (from the pre-instance, pooled slots)",
            "the call (lowering, guest code, lifting)",
            "dropping the store (the slot's memory reset)",
        ]
        .into_iter()
        .enumerate()
        {
            let cells: Vec<String> = measured
                .iter()
                .map(|(time, faults)| format!("{:?} ({:.0} faults)", time[index], faults[index]))
                .collect();
            println!("| {phase} | {} |", cells.join(" | "));
        }
        println!();
        // Loading initialises a plugin itself: the components as built are what is loaded.
        let built: Vec<_> = guests
            .iter()
            .filter(|(label, ..)| !label.ends_with("initialised"))
            .collect();
        let labels: Vec<&str> = built.iter().map(|(label, ..)| *label).collect();
        println!(
            "| loading the adapter (digest, initialisation, compile, pre-instance) | {} |",
            labels.join(" | ")
        );
        println!("|---|{}", "---|".repeat(labels.len()));
        let loads: Vec<(Duration, Duration)> = built
            .iter()
            .map(|(_, path, _)| load_times(&runtime, path))
            .collect();
        let cold: Vec<String> = loads
            .iter()
            .map(|(cold, _)| format!("{cold:.2?}"))
            .collect();
        let warm: Vec<String> = loads
            .iter()
            .map(|(_, warm)| format!("{warm:.2?}"))
            .collect();
        println!("| cold: an empty compile cache | {} |", cold.join(" | "));
        println!(
            "| warm: the entry the cold load left | {} |",
            warm.join(" | ")
        );
    }
    if wanted("stream") {
        stream_events(&runtime, scale);
    }
    if wanted("image") {
        image_calls(&runtime, scale);
    }
}

/// A 640x480 JPEG (a photo-like gradient with texture), made with `trident-imaging`'s encoder.
fn photo_jpeg() -> Vec<u8> {
    let pixels: Vec<u8> = (0..480u32)
        .flat_map(|y| {
            (0..640u32).flat_map(move |x| {
                let noise = ((x * 7919 + y * 104_729) % 31) as u8;
                [
                    200u8.wrapping_add(noise),
                    (x * 160 / 640) as u8 + noise,
                    (y / 4) as u8,
                ]
            })
        })
        .collect();
    let image = trident_imaging::image::RgbImage::from_raw(640, 480, pixels).unwrap();
    let mut out = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut out, trident_imaging::image::ImageFormat::Jpeg)
        .unwrap();
    out.into_inner()
}

/// The image plugins' cost per call (`plugins/image-tensor` on a 640x480 JPEG, `plugins/top-k-
/// labels` on 1,000 scores) against the same Rust code run natively (`trident-imaging`).
fn image_calls(runtime: &tokio::runtime::Runtime, scale: usize) {
    let dir = tempfile::tempdir().unwrap();
    let labels: String = (0..1000).map(|k| format!("class {k}\n")).collect();
    std::fs::write(dir.path().join("labels.txt"), &labels).unwrap();
    let labels_digest = trident::plugins::platform::loading::sha256_hex(labels.as_bytes());
    let manifest_path = dir.path().join("plugins.toml");
    let entry = |name: &str, wasm: &str, extra: &str| {
        format!(
            "[plugins.{name}]\npath = \"{}\"\nsha256 = \"{}\"\nmemory_limit_mb = 128\ntime_limit_ms = 5000\n{extra}\n",
            guests::guest(wasm).display(),
            guests::digest(wasm)
        )
    };
    std::fs::write(
        &manifest_path,
        format!(
            "{}{}{}[models.m]\nrequest = \"image\"\nresponse = \"labels\"\n[models.s]\nrequest = \"sandboxed\"\n",
            entry("image", "image_tensor", ""),
            entry("sandboxed", "image_tensor", "config = { decode_in = \"sandbox\" }"),
            entry(
                "labels",
                "top_k_labels",
                &format!(
                    "config = {{ softmax = \"true\" }}\nassets = {{ labels = {{ path = \"labels.txt\", sha256 = \"{labels_digest}\" }} }}"
                )
            ),
        ),
    )
    .unwrap();
    let host = runtime
        .block_on(PluginHost::load(&Manifest::load(&manifest_path).unwrap()))
        .unwrap();
    let selection = host.select("m", None, None).unwrap();
    let (image, top_k) = (selection.request.unwrap(), selection.response.unwrap());
    let jpeg = photo_jpeg();
    let invocation = trident::invocation::Invocation {
        content_type: Some("image/jpeg".into()),
        ..Default::default()
    };
    let wit = PluginInvocation::new(
        "/invocations",
        "m",
        &invocation,
        &http::HeaderMap::new(),
        &[],
        &jpeg,
        None,
    );
    let iterations = 200 * scale;
    println!();
    println!("| one call (640x480 JPEG, 1,000 scores) | p50 | p99 | CPU per call |");
    println!("|---|---|---|---|");
    let (p50, p99, busy) = measure(iterations, || {
        let adapted = runtime
            .block_on(host.adapt_request(&image, &wit))
            .unwrap()
            .unwrap();
        std::hint::black_box(adapted);
    });
    println!(
        "| image-tensor plugin (its default, `decode_in = \"host\"`: the host's images.to-tensor) | {p50:?} | {p99:?} | {busy:?} |"
    );
    let sandboxed = host.select("s", None, None).unwrap().request.unwrap();
    if std::env::args().any(|a| a == "profile") {
        // For `perf record` (with TRIDENT_PLUGIN_PERF_MAP=1, which names the guest's functions):
        // the same image through the native code and through the sandbox, 1,000 times each, so
        // that each function's samples compare one to one.
        for _ in 0..1000 {
            let native = trident_imaging::tensor_from_body(
                Some("image/jpeg"),
                &jpeg,
                &trident_imaging::Preprocess::default(),
                &trident_imaging::Limits::default(),
            );
            std::hint::black_box(native.unwrap());
            let adapted = runtime.block_on(host.adapt_request(&sandboxed, &wit));
            std::hint::black_box(adapted.unwrap().unwrap());
        }
        return;
    }
    let (p50, p99, busy) = measure(iterations, || {
        let adapted = runtime
            .block_on(host.adapt_request(&sandboxed, &wit))
            .unwrap()
            .unwrap();
        std::hint::black_box(adapted);
    });
    println!(
        "| image-tensor plugin with `decode_in = \"sandbox\"`: decode, resize, crop, normalize inside its sandbox | {p50:?} | {p99:?} | {busy:?} |"
    );
    // The image template of `trident plugin new`, in Python and JavaScript: the same work through
    // the host's native image primitives.
    for (language, wasm) in [
        (
            "Python",
            guests::python_guest("src/cli/plugin/templates/image", "request-adapter-plugin"),
        ),
        (
            "JavaScript",
            guests::js_guest("src/cli/plugin/templates/image", "request-adapter-plugin"),
        ),
    ] {
        let manifest_path = dir.path().join(format!("{language}.toml"));
        let digest =
            trident::plugins::platform::loading::sha256_hex(&std::fs::read(&wasm).unwrap());
        std::fs::write(
            &manifest_path,
            format!(
                "[plugins.image]\npath = \"{}\"\nsha256 = \"{digest}\"\nmemory_limit_mb = 128\ntime_limit_ms = 5000\n[models.m]\nrequest = \"image\"\n",
                wasm.display()
            ),
        )
        .unwrap();
        let host = runtime
            .block_on(PluginHost::load(&Manifest::load(&manifest_path).unwrap()))
            .unwrap();
        let plugin = host.select("m", None, None).unwrap().request.unwrap();
        let (p50, p99, busy) = measure(iterations, || {
            let adapted = runtime
                .block_on(host.adapt_request(&plugin, &wit))
                .unwrap()
                .unwrap();
            std::hint::black_box(adapted);
        });
        println!(
            "| {language} plugin from `trident plugin new --template image` (the host's images.to-tensor) | {p50:?} | {p99:?} | {busy:?} |"
        );
    }
    let (p50, p99, busy) = measure(iterations, || {
        let tensor = trident_imaging::tensor_from_body(
            Some("image/jpeg"),
            &jpeg,
            &trident_imaging::Preprocess::default(),
            &trident_imaging::Limits::default(),
        )
        .unwrap();
        std::hint::black_box(tensor);
    });
    println!(
        "| the same Rust code run natively (trident-imaging) | {p50:?} | {p99:?} | {busy:?} |"
    );
    let scores: Vec<u8> = (0..1000u32)
        .flat_map(|k| (((k * 7919) % 1000) as f32 / 100.0).to_le_bytes())
        .collect();
    let response = InferResponse {
        model_name: "m".into(),
        model_version: 1,
        id: None,
        parameters: Vec::new(),
        outputs: vec![OutputTensor {
            name: "OUTPUT0".into(),
            datatype: DataType::Fp32,
            shape: vec![1, 1000],
            data: Bytes::from(scores),
        }],
    };
    let (p50, p99, busy) = measure(iterations * 5, || {
        let reply = runtime
            .block_on(host.adapt_response(&top_k, &wit, &response))
            .unwrap()
            .unwrap();
        std::hint::black_box(reply);
    });
    println!(
        "| top-k-labels plugin: softmax, top 5, labels (in its sandbox) | {p50:?} | {p99:?} | {busy:?} |"
    );
}

/// The cost of one stream-adapter call per event (`trident:plugin@0.2.0`): the OpenAI chat
/// plugin turning a generate event into a `chat.completion.chunk`, and a stream adapter that
/// passes the event through, against trident framing the event itself (no plugin).
fn stream_events(runtime: &tokio::runtime::Runtime, scale: usize) {
    let dir = tempfile::tempdir().unwrap();
    let manifest_path = dir.path().join("plugins.toml");
    let mut text = String::new();
    for (name, wasm) in [("chat", "openai_chat"), ("pass", "hostile_stream")] {
        text += &format!(
            "[plugins.{name}]\npath = \"{}\"\nsha256 = \"{}\"\n\n",
            guests::guest(wasm).display(),
            guests::digest(wasm)
        );
    }
    text += "[models.chat]\nresponse = \"chat\"\n\n[models.pass]\nresponse = \"pass\"\n";
    std::fs::write(&manifest_path, text).unwrap();
    let host = runtime
        .block_on(PluginHost::load(&Manifest::load(&manifest_path).unwrap()))
        .unwrap();
    let body = br#"{"model": "echo-1", "messages": [{"role": "user", "content": "hello there"}], "stream": true}"#;
    let wit = PluginInvocation::new(
        "/invocations",
        "chat",
        &trident::invocation::Invocation {
            content_type: Some("application/json".into()),
            ..Default::default()
        },
        &http::HeaderMap::new(),
        &[],
        body,
        None,
    );
    let event = br#"{"model_name":"chat_stream","model_version":"1","TEXT":"hello "}"#;
    let position = StreamPosition {
        stream_id: "18ed490b81bed6c90000".into(),
        created: 1_780_000_000,
        index: 1,
    };
    let iterations = 2000 * scale;
    println!();
    println!(
        "| one stream event (a generate event, 64 B) | p50 | p99 | CPU per event, housekeeping included |"
    );
    println!("|---|---|---|---|");
    for (label, model) in [
        ("OpenAI chat plugin: event → chat.completion.chunk", "chat"),
        ("a stream adapter passing the event through", "pass"),
    ] {
        let plugin = host.select(model, None, None).unwrap().response.unwrap();
        let state = std::sync::Arc::new(trident::plugins::StreamState::new());
        // As a server's stream calls: the instance kept between them; and as past its budget.
        let kept = std::sync::Arc::new(trident::plugins::KeptInstance::new());
        for (instance, which) in [(Some(&kept), "kept instance"), (None, "fresh instance")] {
            let (p50, p99, busy) = measure(iterations, || {
                let payloads = runtime
                    .block_on(host.adapt_stream(
                        &plugin,
                        &wit,
                        &position,
                        Some(event.to_vec()),
                        &state,
                        instance,
                    ))
                    .unwrap()
                    .unwrap();
                std::hint::black_box(payloads);
            });
            println!("| {label}, {which} | {p50:?} | {p99:?} | {busy:?} |");
        }
    }
    let (p50, p99, busy) = measure(iterations, || {
        std::hint::black_box(trident::protocol::sse::event(event));
    });
    println!("| no plugin: trident frames the event | {p50:?} | {p99:?} | {busy:?} |");
}
