//! The engine layer against the real Triton core: one in-process server for the whole binary,
//! started before the tests and stopped after them, serving the Python models in `tests/models`.

#[macro_use]
mod common;

use std::time::{Duration, Instant};

use libtest_mimic::Failed;
use trident::engine::triton::{
    ApiVersion, BackendSetting, ModelControl, Server, ServerConfig, TransactionPolicy,
};
use trident::engine::{DataType, ErrorCode, InferRequest};

use common::{copy_model, i32_bytes, i32_values, models_dir, pseudo_random, triton};

struct Fixture {
    server: Server,
    runtime: tokio::runtime::Runtime,
    /// A second repository, on the command line from the start, for load/unload tests.
    _extra: tempfile::TempDir,
}

fn main() -> std::process::ExitCode {
    let checks: &[common::Check<Fixture>] = checks![
        core_reports_a_supported_api_version,
        server_is_live_and_ready,
        datatypes_match_the_core,
        add_sub_returns_exact_values,
        requested_outputs_and_id_are_honoured,
        identity_returns_a_megabyte_unchanged,
        decoupled_model_sends_n_responses,
        transaction_policy_is_reported,
        model_config_and_metadata_are_json,
        explicit_load_and_unload,
        second_repository_with_name_mapping,
        failed_load_is_a_typed_error,
        bad_requests_are_typed_errors,
        dropping_a_stream_cancels_the_request,
        the_model_index_is_read_safely_while_repositories_change,
    ];
    common::run_checks(start(), checks)
}

fn start() -> Fixture {
    let triton = triton();
    let extra = tempfile::tempdir().unwrap();
    copy_model("identity_fp32", extra.path(), "probe_identity");
    let config = ServerConfig {
        model_repositories: vec![models_dir(), extra.path().to_path_buf()],
        model_control: ModelControl::Explicit {
            startup_models: vec![
                "add_sub".into(),
                "identity_fp32".into(),
                "repeat_int32".into(),
            ],
        },
        backend_config: vec![
            BackendSetting::new("python", "shm-default-byte-size", 16 * 1024 * 1024),
            BackendSetting::new("python", "shm-growth-byte-size", 1024 * 1024),
        ],
        exit_timeout: Duration::from_secs(10),
        ..ServerConfig::default()
    };
    let server = Server::start(triton, &config).expect("the Triton core starts");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    Fixture {
        server,
        runtime,
        _extra: extra,
    }
}

fn core_reports_a_supported_api_version(_: &Fixture) -> Result<(), Failed> {
    let triton = triton();
    ensure!(
        triton.api_version().supports(ApiVersion::BUILT_AGAINST),
        "core {} vs built {}",
        triton.api_version(),
        ApiVersion::BUILT_AGAINST
    );
    ensure!(
        triton.path().ends_with("lib/libtritonserver.so"),
        "{:?}",
        triton.path()
    );
    Ok(())
}

fn server_is_live_and_ready(f: &Fixture) -> Result<(), Failed> {
    ensure!(f.server.is_live()?, "server not live");
    ensure!(f.server.is_ready()?, "server not ready");
    for model in ["add_sub", "identity_fp32", "repeat_int32"] {
        ensure!(f.server.model_is_ready(model, None)?, "{model} not ready");
    }
    ensure!(
        !f.server.model_is_ready("probe_identity", None)?,
        "probe loaded too early"
    );
    let metadata = f.server.metadata()?;
    // Triton reports the server id trident gives it.
    ensure!(metadata["name"] == "trident", "metadata: {metadata}");
    ensure!(metadata["version"].is_string(), "metadata: {metadata}");
    Ok(())
}

fn datatypes_match_the_core(_: &Fixture) -> Result<(), Failed> {
    let triton = triton();
    for dtype in DataType::ALL {
        let name = triton.datatype_name(dtype);
        ensure!(name == dtype.as_str(), "{dtype:?}: core calls it {name}");
        ensure!(
            triton.parse_datatype(dtype.as_str()) == Some(dtype),
            "core parses {} differently",
            dtype.as_str()
        );
        let size = triton.datatype_byte_size(dtype) as usize;
        ensure!(
            dtype.element_size().unwrap_or(0) == size,
            "{dtype:?}: core size {size}"
        );
    }
    ensure!(
        triton.parse_datatype("NOT_A_TYPE").is_none(),
        "invalid name parsed"
    );
    Ok(())
}

fn add_sub_request(a: &[i32], b: &[i32]) -> InferRequest {
    let rows = (a.len() / 16) as i64;
    InferRequest::new("add_sub")
        .input("INPUT0", DataType::Int32, [rows, 16], i32_bytes(a))
        .input("INPUT1", DataType::Int32, [rows, 16], i32_bytes(b))
}

fn add_sub_returns_exact_values(f: &Fixture) -> Result<(), Failed> {
    for (seed, rows) in [(7u64, 1usize), (11, 3)] {
        let random = pseudo_random(seed, 32 * rows);
        let a: Vec<i32> = random[..16 * rows]
            .iter()
            .map(|&v| (v % 20001) as i32 - 10000)
            .collect();
        let b: Vec<i32> = random[16 * rows..]
            .iter()
            .map(|&v| (v % 20001) as i32 - 10000)
            .collect();
        let response = f.runtime.block_on(async {
            f.server
                .infer(add_sub_request(&a, &b), false)?
                .single()
                .await
        })?;
        ensure!(
            response.model_name == "add_sub",
            "model {}",
            response.model_name
        );
        ensure!(
            response.model_version == 1,
            "version {}",
            response.model_version
        );
        let sum = response.output("OUTPUT0").ok_or("no OUTPUT0")?;
        let difference = response.output("OUTPUT1").ok_or("no OUTPUT1")?;
        for output in [sum, difference] {
            ensure!(output.datatype == DataType::Int32, "{:?}", output.datatype);
            ensure!(
                output.shape == [rows as i64, 16],
                "shape {:?}",
                output.shape
            );
        }
        let expected_sum: Vec<i32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let expected_difference: Vec<i32> = a.iter().zip(&b).map(|(x, y)| x - y).collect();
        ensure!(i32_values(&sum.data) == expected_sum, "wrong sums");
        ensure!(
            i32_values(&difference.data) == expected_difference,
            "wrong differences"
        );
    }
    Ok(())
}

fn requested_outputs_and_id_are_honoured(f: &Fixture) -> Result<(), Failed> {
    let a: Vec<i32> = (0..16).collect();
    let b = vec![1; 16];
    let mut request = add_sub_request(&a, &b).output("OUTPUT1");
    request.id = Some("request-42".into());
    let response = f
        .runtime
        .block_on(async { f.server.infer(request, false)?.single().await })?;
    ensure!(
        response.id.as_deref() == Some("request-42"),
        "id {:?}",
        response.id
    );
    let names: Vec<&str> = response.outputs.iter().map(|o| o.name.as_str()).collect();
    ensure!(names == ["OUTPUT1"], "outputs {names:?}");
    ensure!(
        i32_values(&response.outputs[0].data) == (-1..15).collect::<Vec<_>>(),
        "values"
    );
    Ok(())
}

fn identity_returns_a_megabyte_unchanged(f: &Fixture) -> Result<(), Failed> {
    let count = 262_144; // 1 MiB of FP32
    let values: Vec<f32> = pseudo_random(3, count)
        .iter()
        .map(|&v| v as f32 / 7.0)
        .collect();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let request = InferRequest::new("identity_fp32").input(
        "INPUT0",
        DataType::Fp32,
        [1, count as i64],
        bytes.clone(),
    );
    let response = f
        .runtime
        .block_on(async { f.server.infer(request, false)?.single().await })?;
    let output = response.output("OUTPUT0").ok_or("no OUTPUT0")?;
    ensure!(
        output.shape == [1, count as i64],
        "shape {:?}",
        output.shape
    );
    ensure!(
        output.datatype == DataType::Fp32,
        "dtype {:?}",
        output.datatype
    );
    ensure!(output.data[..] == bytes[..], "data differs");
    Ok(())
}

fn decoupled_model_sends_n_responses(f: &Fixture) -> Result<(), Failed> {
    for n in [0, 1, 5, 32] {
        let request =
            InferRequest::new("repeat_int32").input("N", DataType::Int32, [1], i32_bytes(&[n]));
        let values = f.runtime.block_on(async {
            let mut stream = f.server.infer(request, false)?;
            let mut values = Vec::new();
            while let Some(response) = stream.next().await {
                let response = response?;
                let out = response.output("OUT").ok_or("no OUT")?;
                values.extend(i32_values(&out.data));
            }
            Ok::<_, Failed>(values)
        })?;
        ensure!(
            values == (0..n).collect::<Vec<_>>(),
            "n={n}: got {values:?}"
        );
    }
    Ok(())
}

fn transaction_policy_is_reported(f: &Fixture) -> Result<(), Failed> {
    let decoupled = f.server.model_transaction_policy("repeat_int32", None)?;
    ensure!(decoupled == TransactionPolicy::Decoupled, "{decoupled:?}");
    let one = f.server.model_transaction_policy("add_sub", None)?;
    ensure!(one == TransactionPolicy::OneToOne, "{one:?}");
    Ok(())
}

fn model_config_and_metadata_are_json(f: &Fixture) -> Result<(), Failed> {
    let config = f.server.model_config("add_sub", None)?;
    ensure!(config["backend"] == "python", "config: {config}");
    ensure!(
        config["input"].as_array().map(Vec::len) == Some(2),
        "config: {config}"
    );
    let metadata = f.server.model_metadata("repeat_int32", None)?;
    ensure!(metadata["inputs"][0]["name"] == "N", "metadata: {metadata}");
    ensure!(
        metadata["inputs"][0]["datatype"] == "INT32",
        "metadata: {metadata}"
    );
    Ok(())
}

/// Polls the model index until `model` is unavailable with reason `unloaded`.
fn wait_unloaded(f: &Fixture, model: &str) -> Result<(), Failed> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let index = f.server.model_index(false)?;
        let entry = index.iter().find(|e| e.name == model);
        if entry.is_some_and(|e| {
            e.state.as_deref() == Some("UNAVAILABLE") && e.reason.as_deref() == Some("unloaded")
        }) {
            return Ok(());
        }
        ensure!(Instant::now() < deadline, "{model} not unloaded: {entry:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn explicit_load_and_unload(f: &Fixture) -> Result<(), Failed> {
    f.server.load_model("probe_identity")?;
    ensure!(
        f.server.model_is_ready("probe_identity", None)?,
        "not ready after load"
    );
    let ready: Vec<String> = f
        .server
        .model_index(true)?
        .into_iter()
        .map(|e| e.name)
        .collect();
    ensure!(
        ready.iter().any(|n| n == "probe_identity"),
        "ready index: {ready:?}"
    );

    let request = InferRequest::new("probe_identity").input(
        "INPUT0",
        DataType::Fp32,
        [1, 2],
        [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    let response = f
        .runtime
        .block_on(async { f.server.infer(request, false)?.single().await })?;
    ensure!(response.outputs[0].data.len() == 8, "output size");

    f.server.unload_model("probe_identity", true)?;
    wait_unloaded(f, "probe_identity")?;
    ensure!(
        !f.server.model_is_ready("probe_identity", None)?,
        "still ready after unload"
    );
    Ok(())
}

fn second_repository_with_name_mapping(f: &Fixture) -> Result<(), Failed> {
    let repository = tempfile::tempdir()?;
    copy_model("add_sub", repository.path(), "folder_x");
    f.server
        .register_model_repository(repository.path(), &[("folder_x", "mapped_adder")])?;
    let outcome = (|| {
        f.server.load_model("mapped_adder")?;
        let a: Vec<i32> = (100..116).collect();
        let b: Vec<i32> = (0..16).collect();
        let mut request = add_sub_request(&a, &b);
        request.model_name = "mapped_adder".into();
        let response = f
            .runtime
            .block_on(async { f.server.infer(request, false)?.single().await })?;
        ensure!(
            response.model_name == "mapped_adder",
            "{}",
            response.model_name
        );
        let sums = i32_values(&response.output("OUTPUT0").ok_or("no OUTPUT0")?.data);
        ensure!(
            sums == (0..16).map(|i| 100 + 2 * i).collect::<Vec<_>>(),
            "sums {sums:?}"
        );
        f.server.unload_model("mapped_adder", true)?;
        wait_unloaded(f, "mapped_adder")
    })();
    f.server.unregister_model_repository(repository.path())?;
    outcome?;

    // Once unregistered, the name is unknown again.
    let error = f
        .server
        .load_model("mapped_adder")
        .err()
        .ok_or("loaded after unregister")?;
    ensure!(
        error.message.contains("mapped_adder"),
        "{:?}: {}",
        error.code,
        error.message
    );
    // Registering the same path twice is ALREADY_EXISTS, which the MME maps to 409.
    f.server.register_model_repository(repository.path(), &[])?;
    let twice = f.server.register_model_repository(repository.path(), &[]);
    f.server.unregister_model_repository(repository.path())?;
    let error = twice.err().ok_or("second registration succeeded")?;
    ensure!(
        error.code == ErrorCode::AlreadyExists,
        "{:?}: {}",
        error.code,
        error.message
    );
    Ok(())
}

fn failed_load_is_a_typed_error(f: &Fixture) -> Result<(), Failed> {
    let error = f
        .server
        .load_model("init_fail")
        .err()
        .ok_or("init_fail loaded")?;
    ensure!(
        error
            .message
            .contains("init_fail: this model refuses to initialise"),
        "message: {}",
        error.message
    );
    ensure!(error.code == ErrorCode::InvalidArg, "code {:?}", error.code);
    ensure!(
        !f.server.model_is_ready("init_fail", None)?,
        "failed model is ready"
    );
    let index = f.server.model_index(false)?;
    let entry = index
        .iter()
        .find(|e| e.name == "init_fail")
        .ok_or("not in index")?;
    ensure!(entry.state.as_deref() == Some("UNAVAILABLE"), "{entry:?}");
    Ok(())
}

fn bad_requests_are_typed_errors(f: &Fixture) -> Result<(), Failed> {
    let unknown =
        InferRequest::new("no_such_model").input("X", DataType::Int32, [1], i32_bytes(&[1]));
    let error = f
        .runtime
        .block_on(async { f.server.infer(unknown, false)?.single().await })
        .err();
    let error = error.ok_or("unknown model answered")?;
    ensure!(
        error.code == ErrorCode::NotFound,
        "{:?}: {}",
        error.code,
        error.message
    );

    // INT64 where the model wants INT32.
    let wrong_type = InferRequest::new("add_sub")
        .input("INPUT0", DataType::Int64, [1, 16], vec![0u8; 128])
        .input("INPUT1", DataType::Int32, [1, 16], vec![0u8; 64]);
    let error = f
        .runtime
        .block_on(async { f.server.infer(wrong_type, false)?.single().await })
        .err();
    let error = error.ok_or("wrong dtype answered")?;
    ensure!(
        error.code == ErrorCode::InvalidArg,
        "{:?}: {}",
        error.code,
        error.message
    );
    ensure!(
        error.message.contains("INT64"),
        "message: {}",
        error.message
    );

    // Data shorter than the shape says.
    let short = InferRequest::new("add_sub")
        .input("INPUT0", DataType::Int32, [1, 16], vec![0u8; 60])
        .input("INPUT1", DataType::Int32, [1, 16], vec![0u8; 64]);
    let error = f
        .runtime
        .block_on(async { f.server.infer(short, false)?.single().await })
        .err();
    let error = error.ok_or("short data answered")?;
    ensure!(
        error.code == ErrorCode::InvalidArg,
        "{:?}: {}",
        error.code,
        error.message
    );

    // A shape the model does not accept.
    let wrong_shape = InferRequest::new("add_sub")
        .input("INPUT0", DataType::Int32, [1, 8], vec![0u8; 32])
        .input("INPUT1", DataType::Int32, [1, 8], vec![0u8; 32]);
    let error = f
        .runtime
        .block_on(async { f.server.infer(wrong_shape, false)?.single().await })
        .err();
    let error = error.ok_or("wrong shape answered")?;
    ensure!(
        error.code == ErrorCode::InvalidArg,
        "{:?}: {}",
        error.code,
        error.message
    );

    // The model is unharmed.
    ensure!(
        f.server.model_is_ready("add_sub", None)?,
        "add_sub not ready after bad requests"
    );
    Ok(())
}

fn dropping_a_stream_cancels_the_request(f: &Fixture) -> Result<(), Failed> {
    let request =
        InferRequest::new("repeat_int32").input("N", DataType::Int32, [1], i32_bytes(&[100_000]));
    let mut stream = f.server.infer(request, false)?;
    f.runtime.block_on(async {
        let first = stream.next().await.ok_or("no response")??;
        ensure!(first.output("OUT").is_some(), "first response without OUT");
        Ok::<_, Failed>(())
    })?;
    ensure!(stream.in_flight(), "released after one of 100000 responses");
    stream.cancel();
    // Cancelling ends the request long before 100000 responses; draining must finish quickly.
    let started = Instant::now();
    let count = f.runtime.block_on(async {
        let mut count = 1;
        while let Some(item) = stream.next().await {
            if item.is_err() {
                break;
            }
            count += 1;
        }
        count
    });
    ensure!(count < 100_000, "cancel ignored: {count} responses");
    ensure!(
        started.elapsed() < Duration::from_secs(30),
        "cancel took {:?}",
        started.elapsed()
    );
    Ok(())
}

/// The core walks its set of repositories for the model index without a lock of its own while
/// unregistering erases from that set (model_repository_manager.cc, r24.10), so an index read
/// racing an unregister stats freed memory: "failed to stat file <garbage>", or worse. trident
/// reads the index under a shared hold and changes the set under an exclusive one
/// (`Server::repositories`). Here three threads read the index while another registers and
/// unregisters repositories as fast as it can; every read must succeed and name only models
/// that exist.
fn the_model_index_is_read_safely_while_repositories_change(f: &Fixture) -> Result<(), Failed> {
    let roots: Vec<tempfile::TempDir> = (0..4)
        .map(|_| tempfile::tempdir())
        .collect::<Result<_, _>>()?;
    for (index, root) in roots.iter().enumerate() {
        copy_model(
            "identity_fp32",
            root.path(),
            &format!("churn_folder{index}"),
        );
    }
    let known: Vec<String> = (0..4).map(|index| format!("churn_model{index}")).collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let run_for = Duration::from_secs(3);
    std::thread::scope(|scope| -> Result<(), Failed> {
        let readers: Vec<_> = (0..3)
            .map(|_| {
                scope.spawn(|| -> Result<usize, String> {
                    let mut reads = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let index = f.server.model_index(false).map_err(|e| e.message)?;
                        for entry in index {
                            if entry.name.starts_with("churn") && !known.contains(&entry.name) {
                                return Err(format!(
                                    "an unknown model in the index: {:?}",
                                    entry.name
                                ));
                            }
                        }
                        reads += 1;
                    }
                    Ok(reads)
                })
            })
            .collect();
        let started = Instant::now();
        let mut changes = 0;
        let changed = (|| -> Result<(), Failed> {
            while started.elapsed() < run_for {
                for (index, root) in roots.iter().enumerate() {
                    let folder = format!("churn_folder{index}");
                    f.server
                        .register_model_repository(root.path(), &[(&folder, &known[index])])?;
                    f.server.unregister_model_repository(root.path())?;
                    changes += 2;
                }
            }
            Ok(())
        })();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut reads = 0;
        for reader in readers {
            reads += reader.join().expect("a reader").map_err(Failed::from)?;
        }
        changed?;
        ensure!(reads > 0 && changes > 0, "{reads} reads, {changes} changes");
        Ok(())
    })
}
