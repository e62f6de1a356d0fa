//! The floor under every frontend: the same inference request through the Triton core in this
//! process, with no HTTP, no parsing and no encoding, as `scripts/bench` sends it over HTTP. What
//! a server's CPU per request is above this is its frontend's cost (`scripts/bench` prints that
//! row for trident and for Triton's own frontend).
//!
//!     cargo bench --bench engine_floor -- --repository tests/models --model native_add_sub \
//!         --body small.json [--concurrency 1] [--seconds 5]
//!
//! The body is a KServe v2 request (JSON, or binary with `--json-length N`) decoded once by
//! trident's decoder; each request is then a clone of it (its tensors shared, not copied),
//! submitted to the core with `concurrency` in flight from one thread, the way a serving thread
//! submits them. Prints one JSON line: requests per second, the process's CPU time per request
//! (µs, all its threads: the core's and this one) and context switches per request.
//!
//! `--image` makes the body an image (JPEG or PNG) instead: each request decodes it, resizes,
//! crops and normalizes it natively (`trident-imaging`, ImageNet's defaults, the code the
//! image-tensor plugin runs in its sandbox) into `INPUT0`, and after the answer picks the top
//! five of `OUTPUT0`: the floor under an image-classification endpoint.
//!
//! `--decode` times the decoding instead, with no core: the body's fields read in one pass
//! (`v2_envelope::one_pass`, what trident does) against serde's reading with each float input's
//! text decoded after it (what it did before), and the whole `decode_infer_request`.

/// The allocator trident's binary uses (`src/main.rs`): the floor allocates as the server does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use trident::engine::InferRequest;
use trident::engine::triton::{self, BackendSetting, CoreLogging, ModelControl, ServerConfig};
use trident::protocol::float_array;
use trident::protocol::v2_envelope::{self, TensorData};
use trident::protocol::v2_request::decode_infer_request;

struct Args {
    repository: PathBuf,
    model: String,
    body: PathBuf,
    json_length: Option<usize>,
    concurrency: usize,
    seconds: f64,
    decode: bool,
    image: bool,
}

fn args() -> Args {
    let mut args = Args {
        repository: PathBuf::from("tests/models"),
        model: String::new(),
        body: PathBuf::new(),
        json_length: None,
        concurrency: 1,
        seconds: 5.0,
        decode: false,
        image: false,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        // cargo passes `--bench` to every bench binary.
        if flag == "--bench" {
            continue;
        }
        if flag == "--decode" {
            args.decode = true;
            continue;
        }
        if flag == "--image" {
            args.image = true;
            continue;
        }
        let value = given
            .next()
            .unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--repository" => args.repository = value.into(),
            "--model" => args.model = value,
            "--body" => args.body = value.into(),
            "--json-length" => args.json_length = Some(value.parse().expect("--json-length")),
            "--concurrency" => args.concurrency = value.parse().expect("--concurrency"),
            "--seconds" => args.seconds = value.parse().expect("--seconds"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(!args.model.is_empty(), "--model is required");
    args
}

/// CPU time this process has used, all its threads together.
fn process_cpu() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

/// Context switches of every thread of this process so far.
fn context_switches() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten() {
        let Ok(task) = task else { continue };
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        for line in status.lines() {
            if let Some(n) = line
                .strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| line.strip_prefix("nonvoluntary_ctxt_switches:"))
            {
                total += n.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    total
}

/// What each request is: a clone of the decoded body, or (`--image`) the image made into a
/// tensor anew.
#[derive(Clone)]
enum Work {
    Request(Arc<InferRequest>),
    Image { model: String, body: Bytes },
}

impl Work {
    fn request(&self) -> InferRequest {
        match self {
            Work::Request(request) => InferRequest::clone(request),
            Work::Image { model, body } => {
                let tensor = trident_imaging::tensor_from_body(
                    None,
                    body,
                    &trident_imaging::Preprocess::default(),
                    &trident_imaging::Limits::default(),
                )
                .expect("the image decodes");
                InferRequest::new(model.as_str()).input(
                    "INPUT0",
                    trident::engine::DataType::Fp32,
                    tensor.shape,
                    tensor.data,
                )
            }
        }
    }

    /// What is done with an answer: for an image, the top five of its scores.
    fn answered(&self, response: &trident::engine::InferResponse) {
        if let Work::Image { .. } = self {
            let scores: Vec<f32> = response.outputs[0]
                .data
                .as_chunks::<4>()
                .0
                .iter()
                .map(|c| f32::from_le_bytes(*c))
                .collect();
            let mut order: Vec<usize> = (0..scores.len()).collect();
            order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]));
            std::hint::black_box(&order[..5]);
        }
    }
}

/// Runs requests, `concurrency` at a time (one task each, one request after another), until
/// `until`; how many completed.
async fn drive(
    server: &Arc<triton::Server>,
    work: &Work,
    concurrency: usize,
    until: Instant,
) -> u64 {
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (server, work) = (Arc::clone(server), work.clone());
        tasks.spawn(async move {
            let mut done = 0u64;
            while Instant::now() < until {
                let stream = server
                    .infer(work.request(), false)
                    .expect("the core takes the request");
                let response = stream.single().await.expect("the model answers");
                work.answered(&response);
                done += 1;
            }
            done
        });
    }
    tasks.join_all().await.into_iter().sum()
}

/// The median time of `run` over `rounds` calls.
fn median_time(rounds: usize, mut run: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[rounds / 2]
}

/// `--decode`: the one-pass reading against serde's two passes, and the whole decode.
fn time_decoding(args: &Args, body: &Bytes) {
    let json = &body[..args.json_length.unwrap_or(body.len())];
    let rounds = 50;
    let one_pass = median_time(rounds, || {
        std::hint::black_box(v2_envelope::one_pass(json).expect("the one-pass reader takes it"));
    });
    let two_passes = median_time(rounds, || {
        let envelope = v2_envelope::with_serde(json).expect("serde takes it");
        for input in &envelope.inputs {
            if let (Some(TensorData::Text(text)), Ok(dtype)) = (&input.data, input.datatype.parse())
            {
                std::hint::black_box(float_array::decode(text, dtype));
            }
        }
    });
    let whole = median_time(rounds, || {
        std::hint::black_box(decode_infer_request(&args.model, body, args.json_length).unwrap());
    });
    println!(
        "{{\"one_pass_us\": {:.1}, \"serde_then_data_us\": {:.1}, \"decode_infer_request_us\": {:.1}}}",
        one_pass.as_secs_f64() * 1e6,
        two_passes.as_secs_f64() * 1e6,
        whole.as_secs_f64() * 1e6
    );
}

fn main() {
    let args = args();
    let body = Bytes::from(std::fs::read(&args.body).expect("the body file reads"));
    if args.decode {
        time_decoding(&args, &body);
        return;
    }
    let work = if args.image {
        Work::Image {
            model: args.model.clone(),
            body: body.clone(),
        }
    } else {
        let (request, _) = decode_infer_request(&args.model, &body, args.json_length)
            .unwrap_or_else(|e| panic!("{}: {e}", args.body.display()));
        Work::Request(Arc::new(request))
    };
    let triton = triton::library::load(None).expect("the Triton core loads (scripts/setup)");
    let config = ServerConfig {
        model_repositories: vec![args.repository.clone()],
        model_control: ModelControl::Explicit {
            startup_models: vec![args.model.clone()],
        },
        backend_config: vec![
            BackendSetting::new("python", "shm-default-byte-size", 16 * 1024 * 1024),
            BackendSetting::new("python", "shm-growth-byte-size", 1024 * 1024),
        ],
        logging: CoreLogging {
            info: false,
            warn: false,
            error: true,
            verbose: 0,
        },
        ..ServerConfig::default()
    };
    let server = Arc::new(triton::Server::start(triton, &config).expect("the core starts"));
    // One thread, as one serving thread of trident's submits and receives.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let warm_up = Instant::now() + Duration::from_millis(500);
        drive(&server, &work, args.concurrency, warm_up).await;
        let (cpu, switches, started) = (process_cpu(), context_switches(), Instant::now());
        let until = started + Duration::from_secs_f64(args.seconds);
        let done = drive(&server, &work, args.concurrency, until).await;
        let elapsed = started.elapsed().as_secs_f64();
        let cpu_us = (process_cpu() - cpu).as_secs_f64() * 1e6 / done as f64;
        let switches = (context_switches() - switches) as f64 / done as f64;
        let rps = done as f64 / elapsed;
        // The one line scripts/bench reads.
        println!(
            "{{\"requests\": {done}, \"rps\": {rps:.1}, \"cpu_us\": {cpu_us:.1}, \"switches\": {switches:.2}}}"
        );
    });
    drop(server);
}
