//! A request adapter that misbehaves in the way its `mode` config says:
//! `loop` spins forever, `hog` allocates 1 GiB, `trap` panics, `bad-tensor` returns a tensor whose
//! data disagrees with its shape, `count` reports how many calls its instance has seen, `snoop`
//! tries to read a file, the environment, a TCP connection
//! to `config.target` and a DNS lookup, and reports
//! what it got, `chatty` writes to stdout and stderr and then behaves, `echo` reports the
//! invocation it was given.

wit_bindgen::generate!({ world: "adapter-plugin", path: "../../../wit" });

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::request_adapter::{Adapted, Guest as RequestAdapter, TensorRequest};
use exports::trident::plugin::response_adapter::{Guest as ResponseAdapter, InferenceResult};
use trident::plugin::host::config;
use trident::plugin::types::{Datatype, Invocation, PluginError, Reply, Tensor};

struct Plugin;

fn ones(rows: i64) -> Tensor {
    Tensor {
        name: "INPUT0".into(),
        datatype: Datatype::Fp32,
        shape: vec![rows, 1],
        data: (0..rows).flat_map(|_| 1.0f32.to_le_bytes()).collect(),
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
        Some("hog") => {
            let mut hoard: Vec<u8> = Vec::new();
            hoard.resize(1 << 30, 1);
            Err(PluginError::Internal(format!("allocated {} bytes", hoard.len())))
        }
        Some("trap") => panic!("hostile plugin panics on purpose"),
        Some("snoop") => {
            let file = std::fs::read("/etc/passwd").map(|b| b.len());
            let env: Vec<(String, String)> = std::env::vars().collect();
            let cwd = std::env::current_dir();
            // A listener the test owns: a connection there would prove network access.
            let net = config("target").map(|target| std::net::TcpStream::connect(target).map(|_| ()));
            let dns = std::net::ToSocketAddrs::to_socket_addrs("localhost:80").map(|a| a.count());
            Err(PluginError::Internal(format!(
                "snoop: file={file:?} env={} cwd={cwd:?} net={net:?} dns={dns:?}",
                env.len()
            )))
        }
        Some("count") => {
            // Counts calls in guest memory: a reused instance would report more than 1.
            static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            Err(PluginError::Internal(format!("count: calls={calls}")))
        }
        Some("chatty") => {
            println!("hello from the plugin's stdout");
            eprintln!("hello from the plugin's stderr");
            Ok(())
        }
        _ => Ok(()),
    }
}

impl RequestAdapter for Plugin {
    fn adapt_request(invocation: Invocation) -> Result<Adapted, PluginError> {
        if config("mode").as_deref() == Some("echo") {
            let headers: Vec<String> = invocation.headers.iter().map(|h| format!("{}={}", h.name, h.value)).collect();
            return Err(PluginError::BadRequest(format!(
                "echo: route={} model={} custom={:?} variant={:?} id={:?} headers={}",
                invocation.route,
                invocation.model,
                invocation.custom_attributes,
                invocation.target_variant,
                invocation.inference_id,
                headers.join(";")
            )));
        }
        misbehave()?;
        let mut tensor = ones(2);
        if config("mode").as_deref() == Some("bad-tensor") {
            tensor.shape = vec![3, 7];
        }
        Ok(Adapted::Tensors(TensorRequest { inputs: vec![tensor], outputs: Vec::new() }))
    }
}

impl ResponseAdapter for Plugin {
    fn adapt_response(_invocation: Invocation, inference: InferenceResult) -> Result<Reply, PluginError> {
        misbehave()?;
        Ok(Reply {
            status: 200,
            content_type: "text/plain".into(),
            headers: Vec::new(),
            body: format!("{} outputs", inference.outputs.len()).into_bytes(),
        })
    }
}

impl Lifecycle for Plugin {
    fn check_config() -> Result<(), String> {
        match config("mode").as_deref() {
            Some("refuse-config") => Err("mode refuse-config refuses every configuration".into()),
            _ => Ok(()),
        }
    }
}

export!(Plugin);
