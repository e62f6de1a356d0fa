//! Shared helpers for tests that run the real Triton core.
#![allow(dead_code)]

pub mod configs;
pub mod container;
pub mod http_client;
pub mod plugins;
pub mod process;
pub mod servers;
pub mod texts;

/// `assert!` for trials: returns a failure message instead of panicking.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+).into());
        }
    };
}

/// A list of [`Check`]s named after their functions: `checks![ping_is_200, infer_json]`.
#[macro_export]
macro_rules! checks {
    ($($check:ident),* $(,)?) => {
        &[$((stringify!($check), $check)),*]
    };
}

/// A named check against a shared fixture.
pub type Check<F> = (&'static str, fn(&F) -> Result<(), libtest_mimic::Failed>);

/// Runs `checks` one at a time against one fixture (one Triton core per test binary: readiness
/// and the model index are shared), then drops the fixture (stopping the core) before exiting.
pub fn run_checks<F: Send + Sync + 'static>(
    fixture: F,
    checks: &[Check<F>],
) -> std::process::ExitCode {
    run_checks_ignoring(fixture, checks, &[])
}

/// [`run_checks`], with the checks `ignored` names reported ignored rather than run.
pub fn run_checks_ignoring<F: Send + Sync + 'static>(
    fixture: F,
    checks: &[Check<F>],
    ignored: &[&str],
) -> std::process::ExitCode {
    let mut args = libtest_mimic::Arguments::from_args();
    args.test_threads = Some(1);
    let fixture = std::sync::Arc::new(fixture);
    let trials = checks
        .iter()
        .map(|&(name, check)| {
            let fixture = std::sync::Arc::clone(&fixture);
            libtest_mimic::Trial::test(name, move || check(&fixture))
                .with_ignored_flag(ignored.contains(&name))
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    drop(fixture);
    conclusion.exit_code()
}

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use trident::engine::triton::{self, Triton};

/// A command for a child process of a test, with the null device as its standard input: never
/// the test process's own, which is whatever the harness left there (every child a test starts
/// is made here, or sets it the same way).
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut command = Command::new(program);
    command.stdin(Stdio::null());
    command
}

/// Sends `signal` (a name such as `TERM` or `KILL`) to `pid`, a process the test started;
/// whether `kill` succeeded.
pub fn send_signal(pid: u32, signal: &str) -> bool {
    command("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .is_ok_and(|status| status.success())
}

/// The test models (Python backend) kept under `tests/models`.
pub fn models_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/models")
}

/// The Triton core, loaded the way trident loads it; a missing runtime fails loudly, with the
/// command that installs it.
pub fn triton() -> &'static Triton {
    triton::library::load(None).unwrap_or_else(|e| {
        panic!("these tests need the real Triton core: {e}\n(run scripts/install-triton first)")
    })
}

/// A real core over `repositories`, with `startup_models` loaded, set up as `trident serve` sets
/// it up (python backend shared memory, namespacing), behind the engine interface.
pub fn start_engine(repositories: Vec<PathBuf>, startup_models: &[&str]) -> triton::TritonEngine {
    let config = triton::ServerConfig {
        model_repositories: repositories,
        model_control: triton::ModelControl::Explicit {
            startup_models: startup_models.iter().map(|m| m.to_string()).collect(),
        },
        backend_config: vec![
            triton::BackendSetting::new("python", "shm-default-byte-size", 16 * 1024 * 1024),
            triton::BackendSetting::new("python", "shm-growth-byte-size", 1024 * 1024),
        ],
        model_namespacing: true,
        exit_timeout: std::time::Duration::from_secs(10),
        ..triton::ServerConfig::default()
    };
    let server = triton::Server::start(triton(), &config).expect("the Triton core starts");
    triton::TritonEngine::new(server)
}

/// The tokio runtime the HTTP servers of a test binary run on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Serves `state` on 127.0.0.1 (any free port) for the rest of the process; returns the address.
pub fn serve<E: trident::engine::Engine>(
    runtime: &tokio::runtime::Runtime,
    state: std::sync::Arc<trident::http::AppState<E>>,
) -> std::net::SocketAddr {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    let grace = std::time::Duration::from_secs(1);
    runtime.spawn(trident::http::serve(
        listener,
        state,
        std::future::pending(),
        grace,
    ));
    address
}

/// Copies the test model `model` into `repository/folder`.
pub fn copy_model(model: &str, repository: &Path, folder: &str) {
    copy_dir(&models_dir().join(model), &repository.join(folder));
}

/// Copies folder `from` to `to`, leaving out `__pycache__` folders.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "__pycache__" {
                copy_dir(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// INT32 values to little-endian bytes.
pub fn i32_bytes(values: &[i32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian bytes to INT32 values.
pub fn i32_values(bytes: &[u8]) -> Vec<i32> {
    assert_eq!(
        bytes.len() % 4,
        0,
        "INT32 data must be a multiple of 4 bytes"
    );
    bytes
        .as_chunks::<4>()
        .0
        .iter()
        .map(|c| i32::from_le_bytes(*c))
        .collect()
}

/// A deterministic pseudo-random sequence (xorshift), so expected answers are computed, not typed.
pub fn pseudo_random(seed: u64, count: usize) -> Vec<u32> {
    let mut state = seed.max(1);
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u32
        })
        .collect()
}

/// The keys that appear more than once in one object, anywhere in the JSON text `json`
/// (`serde_json::Value` keeps only the last of them, so it cannot tell).
pub fn duplicate_keys(json: &str) -> Vec<String> {
    use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
    use std::cell::RefCell;

    struct Keys<'a>(&'a RefCell<Vec<String>>);
    impl<'de> DeserializeSeed<'de> for Keys<'_> {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Keys<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Keys(self.0))?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !seen.insert(key.clone()) {
                    self.0.borrow_mut().push(key);
                }
                map.next_value_seed(Keys(self.0))?;
            }
            Ok(())
        }
    }

    let found = RefCell::new(Vec::new());
    let mut deserializer = serde_json::Deserializer::from_str(json);
    Keys(&found)
        .deserialize(&mut deserializer)
        .expect("valid JSON");
    found.into_inner()
}

/// The pids of python backend stubs whose command line contains `needle` (a model's path or
/// instance name).
pub fn stub_pids(needle: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline.contains("triton_python_backend_stub") && cmdline.contains(needle) {
            pids.push(pid);
        }
    }
    pids
}

/// The python stubs on this machine that serve an instance of `model` (by the instance name
/// their command line ends with). For a multi-model endpoint whose artifacts load from private
/// copies, where the artifact's own path is not in the command line.
pub fn model_stub_pids(model: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|&pid| {
            trident::engine::processes::stub_process(pid).is_some_and(|stub| stub.serves(model))
        })
        .collect()
}

/// The file of the shared memory region stub `pid`'s command line names (`/dev/shm/<name>`).
pub fn stub_shm_region(pid: u32) -> Option<PathBuf> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let region = cmdline
        .split(|&b| b == 0)
        .filter_map(|arg| std::str::from_utf8(arg).ok())
        .find(|arg| arg.starts_with("triton_python_backend_shm_region_"))?;
    Some(Path::new("/dev/shm").join(region))
}

/// How a model came back after its processes were killed under traffic.
#[derive(Debug)]
pub struct Recovered {
    /// From the kill to the first request that succeeded with `/ping` healthy again.
    pub took: std::time::Duration,
    /// The statuses the traffic got meanwhile, in no particular order.
    pub statuses: Vec<u16>,
}

/// Kills `stubs` with `signal` while `threads` threads send `request` (each returns a status),
/// then waits up to `bound` for the model to be back: a process `live_stubs` lists that it did
/// not list before the kill (the model was reloaded: a model that lost one process of several
/// still answers from the others before anything noticed), a request that succeeds and `ping`
/// answering 200; then checks that 20 requests in a row succeed. Every request meanwhile must be
/// answered.
pub fn kill_under_traffic(
    stubs: &[u32],
    live_stubs: &dyn Fn() -> Vec<u32>,
    signal: &str,
    threads: usize,
    request: &(dyn Fn() -> u16 + Sync),
    ping: &dyn Fn() -> u16,
    bound: std::time::Duration,
) -> Result<Recovered, String> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    let stop = AtomicBool::new(false);
    let statuses = Mutex::new(Vec::new());
    let outcome = std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let status = request();
                    statuses.lock().unwrap().push(status);
                }
            });
        }
        // Traffic first, then the kill.
        std::thread::sleep(Duration::from_millis(500));
        let before = live_stubs();
        let killed = Instant::now();
        for &pid in stubs {
            if !send_signal(pid, signal) {
                stop.store(true, Ordering::Relaxed);
                return Err(format!("kill -{signal} {pid} failed"));
            }
        }
        // The kill takes effect before the first check.
        std::thread::sleep(Duration::from_millis(200));
        let outcome = loop {
            let reloaded = live_stubs().iter().any(|pid| !before.contains(pid));
            if reloaded && request() == 200 && ping() == 200 {
                break Ok(killed.elapsed());
            }
            if killed.elapsed() > bound {
                break Err(format!(
                    "not recovered within {bound:?}; /ping {}; processes {:?}, before the kill {before:?}",
                    ping(),
                    live_stubs()
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        };
        stop.store(true, Ordering::Relaxed);
        outcome
    });
    let took = outcome?;
    for n in 0..20 {
        let status = request();
        if status != 200 {
            return Err(format!("request {n} after recovery: {status}"));
        }
    }
    if ping() != 200 {
        return Err("/ping after recovery is not 200".into());
    }
    Ok(Recovered {
        took,
        statuses: statuses.into_inner().unwrap(),
    })
}
