//! A request adapter that misbehaves in the way its `mode` config says:
//! `loop` spins forever, `hog` allocates 1 GiB, `trap` panics, `bad-tensor` returns a tensor whose
//! data disagrees with its shape, `huge-shape` one of shape `[0, 2^63-1]` and no data, `count` reports how many calls its instance has seen, `residue` writes 7 MiB of a pattern
//! (body `scribble`) or looks for it in all its memory (any other body), `snoop`
//! tries to read a file, the environment, a TCP connection
//! to `config.target` and a DNS lookup, and reports
//! what it got, `chatty` writes to stdout and stderr and then behaves, `echo` reports the
//! invocation it was given, `flood` logs through `host.log` until its deadline, `flood-stdout`
//! prints 128 KiB and then behaves, `tenth` makes the CSV adapter's tensor of an integer body
//! except for every tenth integer (a shadow candidate that differs on one request in ten).
//!
//! As a response adapter it also has modes for the reply's headers: `frame-lie` claims framing
//! and trident headers it must not set (a wrong content-length, chunked, close, the variant)
//! beside headers it may set, `many-headers` sends 100,000 headers, `big-header` one of 20 KiB,
//! `bad-attributes` custom attributes over SageMaker's 1024 characters.

wit_bindgen::generate!({ world: "adapter-plugin", path: "../../../wit" });

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::request_adapter::{Adapted, Guest as RequestAdapter, TensorRequest};
use exports::trident::plugin::response_adapter::{Guest as ResponseAdapter, InferenceResult};
use trident::plugin::host::{Level, config, log};
use trident::plugin::types::{Datatype, Header, Invocation, PluginError, Reply, Tensor};

struct Plugin;

fn ones(rows: i64) -> Tensor {
    Tensor {
        name: "INPUT0".into(),
        datatype: Datatype::Fp32,
        shape: vec![rows, 1],
        data: (0..rows).flat_map(|_| 1.0f32.to_le_bytes()).collect(),
    }
}

/// The "tenth" mode: the CSV adapter's tensor for a body of one integer n (`INPUT0`, FP32
/// `[1, 1]`), except that every tenth n (10, 20, ...) becomes n + 0.5: a shadow candidate that
/// differs from the CSV adapter on one request in ten.
fn tenth(body: &[u8]) -> Result<Adapted, PluginError> {
    let text = std::str::from_utf8(body).unwrap_or("").trim();
    let n: i64 = text
        .parse()
        .map_err(|_| PluginError::BadRequest(format!("'{text}' is not an integer")))?;
    let value = if n % 10 == 0 {
        n as f32 + 0.5
    } else {
        n as f32
    };
    Ok(Adapted::Tensors(TensorRequest {
        inputs: vec![Tensor {
            name: "INPUT0".into(),
            datatype: Datatype::Fp32,
            shape: vec![1, 1],
            data: value.to_le_bytes().to_vec(),
        }],
        outputs: Vec::new(),
    }))
}

fn header(name: &str, value: &str) -> Header {
    Header {
        name: name.into(),
        value: value.into(),
    }
}

/// The headers of a reply in the response modes.
fn reply_headers() -> Vec<Header> {
    match config("mode").as_deref() {
        Some("frame-lie") => vec![
            header("Content-Length", "1000"),
            header("Transfer-Encoding", "chunked"),
            header("Connection", "close"),
            header("Keep-Alive", "timeout=600"),
            header("Upgrade", "websocket"),
            header("Proxy-Authenticate", "Basic"),
            header("X-Trident-Variant", "a-lie"),
            header("Cache-Control", "no-store"),
            header("X-Amzn-SageMaker-Custom-Attributes", "score=0.9, trace=abc"),
        ],
        Some("many-headers") => (0..100_000)
            .map(|i| header(&format!("x-h-{i}"), "v"))
            .collect(),
        Some("big-header") => vec![header("x-big", &"a".repeat(20_000))],
        Some("bad-attributes") => vec![header(
            "X-Amzn-SageMaker-Custom-Attributes",
            &"a".repeat(1025),
        )],
        _ => Vec::new(),
    }
}

fn misbehave() -> Result<(), PluginError> {
    match config("mode").as_deref() {
        Some("loop") => {
            let mut x: u64 = 0;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        Some("sleep") => {
            // Waits in a host call (a WASI clock), where no guest code runs for the epoch to stop.
            std::thread::sleep(std::time::Duration::from_secs(3600));
            Err(PluginError::Internal("woke after an hour".into()))
        }
        Some("hog") => {
            let mut hoard: Vec<u8> = Vec::new();
            hoard.resize(1 << 30, 1);
            Err(PluginError::Internal(format!(
                "allocated {} bytes",
                hoard.len()
            )))
        }
        Some("trap") => panic!("hostile plugin panics on purpose"),
        Some("snoop") => {
            let file = std::fs::read("/etc/passwd").map(|b| b.len());
            let env: Vec<(String, String)> = std::env::vars().collect();
            let cwd = std::env::current_dir();
            // A listener the test owns: a connection there would prove network access.
            let net =
                config("target").map(|target| std::net::TcpStream::connect(target).map(|_| ()));
            let dns = std::net::ToSocketAddrs::to_socket_addrs("localhost:80").map(|a| a.count());
            Err(PluginError::Internal(format!(
                "snoop: file={file:?} env={} cwd={cwd:?} net={net:?} dns={dns:?}",
                env.len()
            )))
        }
        Some("count") => {
            // Counts calls in guest memory from check-config's 100: a reused instance would
            // report more than 101, one without the initialised state 1.
            let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            Err(PluginError::Internal(format!("count: calls={calls}")))
        }
        Some("greeting") => {
            // The asset check-config kept, changed by every call: each call must see it whole.
            let mut kept = GREETING.lock().unwrap();
            let seen = kept.clone();
            kept.push_str(" (changed by a call)");
            Err(PluginError::Internal(format!("greeting: {seen}")))
        }
        Some("flood") => loop {
            log(Level::Info, &"flood ".repeat(170));
        },
        Some("flood-stdout") => {
            for line in 0..64 {
                println!("{line:04} {}", "x".repeat(2043));
            }
            Ok(())
        }
        Some("chatty") => {
            println!("hello from the plugin's stdout");
            eprintln!("hello from the plugin's stderr");
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The residue pattern: byte `i` of every 64-byte block. Injective on 0..64 (37 is odd), so a
/// block is recognised from its first byte; computed, never stored, so the guest's own image
/// and code hold no block of it.
fn residue_byte(i: usize) -> u8 {
    (i as u8).wrapping_mul(37) ^ 0xA5
}

/// Blocks of the residue pattern anywhere in this instance's linear memory, after growing it by
/// 8 MiB (fresh pages, which must read as zeros). Reads memory the allocator does not own, as
/// an attacker would: in WebAssembly every address below the memory's size is readable.
fn residue_blocks() -> usize {
    core::arch::wasm32::memory_grow(0, 128);
    let size = core::arch::wasm32::memory_size(0) * 65536;
    let mut found = 0;
    let mut address = 1024;
    while address + 64 <= size {
        // SAFETY (test guest): `address..address + 64` lies below the memory's size.
        let block = unsafe { core::slice::from_raw_parts(address as *const u8, 64) };
        if let Some(phase) = (0..64).find(|&p| residue_byte(p) == block[0])
            && (0..64).all(|j| block[j] == residue_byte((phase + j) % 64))
        {
            found += 1;
        }
        address += 64;
    }
    found
}

impl RequestAdapter for Plugin {
    fn adapt_request(invocation: Invocation) -> Result<Adapted, PluginError> {
        if config("mode").as_deref() == Some("residue") {
            // `scribble`: 7 MiB of the pattern on the heap, then counted (the count proves the
            // scan finds it); anything else: only counted, in a fresh instance that may reuse
            // the scribbler's memory slot, where it must find none.
            if invocation.body.starts_with(b"scribble") {
                let area: Vec<u8> = (0..7usize << 20).map(|i| residue_byte(i % 64)).collect();
                std::hint::black_box(&area);
                return Err(PluginError::BadRequest(format!(
                    "residue: wrote={} found={}",
                    area.len(),
                    residue_blocks()
                )));
            }
            return Err(PluginError::BadRequest(format!(
                "residue: found={}",
                residue_blocks()
            )));
        }
        if config("mode").as_deref() == Some("tenth") {
            return tenth(&invocation.body);
        }
        if config("mode").as_deref() == Some("echo") {
            let headers: Vec<String> = invocation
                .headers
                .iter()
                .map(|h| format!("{}={}", h.name, h.value))
                .collect();
            // Headers first: a WebSocket close reason (123 bytes) keeps them.
            return Err(PluginError::BadRequest(format!(
                "echo: headers={} route={} model={} custom={:?} variant={:?} id={:?}",
                headers.join(";"),
                invocation.route,
                invocation.model,
                invocation.custom_attributes,
                invocation.target_variant,
                invocation.inference_id,
            )));
        }
        misbehave()?;
        let mut tensor = ones(2);
        match config("mode").as_deref() {
            Some("bad-tensor") => tensor.shape = vec![3, 7],
            // No data, an enormous shape: what killed the python backend's stub.
            Some("huge-shape") => {
                tensor.shape = vec![0, i64::MAX];
                tensor.data.clear();
            }
            _ => {}
        }
        Ok(Adapted::Tensors(TensorRequest {
            inputs: vec![tensor],
            outputs: Vec::new(),
        }))
    }
}

impl ResponseAdapter for Plugin {
    fn adapt_response(
        _invocation: Invocation,
        inference: InferenceResult,
    ) -> Result<Reply, PluginError> {
        misbehave()?;
        let body = match config("mode").as_deref() {
            Some("frame-lie") => b"hello".to_vec(),
            _ => format!("{} outputs", inference.outputs.len()).into_bytes(),
        };
        Ok(Reply {
            status: 200,
            content_type: "text/plain".into(),
            headers: reply_headers(),
            body,
        })
    }
}

/// The "count" mode's counter, started at 100 by check-config (warm state).
static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
/// The "greeting" mode's asset, read by check-config.
static GREETING: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

impl Lifecycle for Plugin {
    fn check_config() -> Result<(), String> {
        // The keys read in calls, read here too: trident refuses a key check-config did not read.
        let _ = (config("target"), config("spin_ms"));
        match config("mode").as_deref() {
            Some("refuse-config") => Err("mode refuse-config refuses every configuration".into()),
            Some("count") => {
                CALLS.store(100, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            Some("greeting") => {
                let bytes = trident::plugin::assets::get("greeting").ok_or("no greeting asset")?;
                *GREETING.lock().unwrap() = String::from_utf8_lossy(&bytes).into_owned();
                Ok(())
            }
            Some("print-at-load") => {
                println!("check-config prints");
                Ok(())
            }
            Some("spin-config") => {
                // Busy for `spin_ms` of its initialisation, then accepts: a slow but honest
                // check-config.
                let spin = config("spin_ms")
                    .and_then(|ms| ms.parse().ok())
                    .unwrap_or(0);
                let started = std::time::Instant::now();
                let mut turns = 0u64;
                while started.elapsed() < std::time::Duration::from_millis(spin) {
                    turns = std::hint::black_box(turns + 1);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

export!(Plugin);
