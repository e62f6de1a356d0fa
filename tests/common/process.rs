//! trident as a process: a free loopback port, waiting until it is ready, and stopping it.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::http_client::request;

/// A free loopback port (for a moment).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A trident process the test started, ended when dropped; with the file its standard error
/// goes to, if the test did not keep it.
pub struct Running(pub Child, Option<tempfile::NamedTempFile>);

/// Lines of trident's log printed when a test fails: its own and the core's warnings and
/// errors, then the last lines of any kind.
const LOG_TAIL_LINES: usize = 200;
const LOG_LAST_LINES: usize = 30;

impl Running {
    /// A started trident whose standard error goes to `log`.
    pub fn logging(child: Child, log: tempfile::NamedTempFile) -> Running {
        Running(child, Some(log))
    }

    /// The file trident's standard error goes to.
    pub fn log(&self) -> &Path {
        self.1.as_ref().expect("trident's log is kept").path()
    }

    /// Keeps the whole log in the folder `TRIDENT_TEST_LOGS` names, if set (for a test that
    /// passed too: a loop of runs can be read afterwards).
    fn keep_log(&self) -> Vec<u8> {
        let Some(log) = &self.1 else {
            return Vec::new();
        };
        let bytes = std::fs::read(log.path()).unwrap_or_default();
        if let Some(folder) = std::env::var_os("TRIDENT_TEST_LOGS") {
            let kept = Path::new(&folder).join(format!("trident-{}.log", self.0.id()));
            let _ = std::fs::create_dir_all(&folder);
            match std::fs::write(&kept, &bytes) {
                Ok(()) => eprintln!("trident's whole log: {}", kept.display()),
                Err(error) => eprintln!("cannot keep trident's log in {}: {error}", kept.display()),
            }
        }
        bytes
    }

    /// Prints the end of trident's log and how the process stands (for a failing test), and
    /// keeps the whole log in the folder `TRIDENT_TEST_LOGS` names, if set.
    fn print_log(&mut self) {
        if self.1.is_none() {
            return;
        }
        let bytes = self.keep_log();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        let chosen = without_core_verbose(&lines);
        let chosen = &chosen[chosen.len().saturating_sub(LOG_TAIL_LINES)..];
        let last = &lines[lines.len().saturating_sub(LOG_LAST_LINES)..];
        let state = match self.0.try_wait() {
            Ok(Some(status)) => format!("exited: {status}"),
            Ok(None) => "running".to_owned(),
            Err(error) => format!("unknown: {error}"),
        };
        eprintln!(
            "--- trident's log (pid {}, {state}): its last {} lines other than the core's verbose ones ---\n{}\n--- its last {} lines ---\n{}\n--- end of trident's log ---",
            self.0.id(),
            chosen.len(),
            chosen.join("\n"),
            last.len(),
            last.join("\n"),
        );
    }
}

/// trident's own lines and the core's warnings and errors: the core's verbose entries, which
/// would fill a tail, left out. A line that does not start an entry continues the one before
/// (the core writes model configurations over many lines).
fn without_core_verbose<'a>(lines: &[&'a str]) -> Vec<&'a str> {
    let mut in_verbose = false;
    lines
        .iter()
        .copied()
        .filter(|line| {
            let bytes = line.as_bytes();
            let core_entry = matches!(bytes.first(), Some(b'I' | b'W' | b'E' | b'F'))
                && bytes.get(1).is_some_and(u8::is_ascii_digit);
            if core_entry {
                in_verbose = bytes[0] == b'I';
            } else if bytes.first().is_some_and(u8::is_ascii_digit) {
                in_verbose = false; // one of trident's lines, which start with the time
            }
            !in_verbose
        })
        .collect()
}

impl Drop for Running {
    /// SIGTERM first, so trident stops the core and its python stubs; SIGKILL only if it hangs.
    /// When the test is failing, the end of trident's log is printed with the failure (and the
    /// whole log kept in the folder `TRIDENT_TEST_LOGS` names, if set).
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_log();
        } else {
            self.keep_log();
        }
        if self.0.try_wait().ok().flatten().is_none() {
            super::send_signal(self.0.id(), "TERM");
            let deadline = Instant::now() + Duration::from_secs(30);
            while self.0.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn wait_ready(addr: SocketAddr, child: &mut Child) {
    wait_ready_with(addr, child, &[]);
}

/// [`wait_ready`], sending `headers` with each `/ping` (a restricted `health` category's).
pub fn wait_ready_with(addr: SocketAddr, child: &mut Child, headers: &[(&str, &str)]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("trident exited early: {status}");
        }
        if std::net::TcpStream::connect(addr).is_ok()
            && request(addr, "GET", "/ping", headers, b"").status == 200
        {
            return;
        }
        assert!(Instant::now() < deadline, "trident not ready in time");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts `command` (trident, or a shell that execs it with the arguments that follow) serving
/// `repository` on a loopback port it picks itself (`--port 0`), and waits until it is ready.
/// Its standard output is discarded; its log is kept in a temporary file, printed if the test
/// fails. The port is read from the log's `listening` line, so the command must log at `info`
/// (`RUST_LOG`): a port chosen by the test and bound later by trident could be taken meanwhile
/// by another test's process, which the test would then talk to.
pub fn serve_ready(
    command: Command,
    repository: impl AsRef<std::ffi::OsStr>,
) -> (Running, SocketAddr) {
    serve_ready_with(command, repository, &[])
}

/// [`serve_ready`] with more arguments for `trident serve`.
pub fn serve_ready_with(
    command: Command,
    repository: impl AsRef<std::ffi::OsStr>,
    args: &[&std::ffi::OsStr],
) -> (Running, SocketAddr) {
    let (mut running, addr) = start_listening(command, repository, args);
    wait_ready(addr, &mut running.0);
    (running, addr)
}

/// [`serve_ready_with`], waiting only until trident listens, not until it is ready (its models
/// may still load).
pub fn start_listening(
    mut command: Command,
    repository: impl AsRef<std::ffi::OsStr>,
    args: &[&std::ffi::OsStr],
) -> (Running, SocketAddr) {
    let log = tempfile::NamedTempFile::new().expect("a file for trident's log");
    let child = command
        .arg("serve")
        .arg("--model-repository")
        .arg(repository)
        .args(["--bind", "127.0.0.1", "--port", "0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("trident's log file"))
        .spawn()
        .expect("start trident");
    let mut running = Running(child, Some(log));
    let addr = listening_address(&mut running);
    (running, addr)
}

/// The address trident's log says it listens on (`listening address=…`), once it says so.
pub fn listening_address(running: &mut Running) -> SocketAddr {
    let log = running.log().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
        let found = text
            .lines()
            .filter(|line| line.contains(" listening "))
            .find_map(|line| line.split_once("address=")?.1.split_whitespace().next())
            .and_then(|address| address.parse().ok());
        if let Some(addr) = found {
            return addr;
        }
        if let Some(status) = running.0.try_wait().unwrap() {
            panic!("trident exited before listening: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "trident logged no `listening address=` line within 60 s (is RUST_LOG at info?)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `trident serve` on `repository` with `env` and nothing from the test's own SageMaker or
/// trident variables, ready on a free loopback port.
pub fn serve_with(repository: &Path, env: &[(&str, &std::ffi::OsStr)]) -> (Running, SocketAddr) {
    let mut command = super::command(env!("CARGO_BIN_EXE_trident"));
    for (key, _) in std::env::vars() {
        if key.starts_with("SAGEMAKER_") || key.starts_with("TRIDENT_") {
            command.env_remove(key);
        }
    }
    command.env("RUST_LOG", "info").envs(env.iter().copied());
    serve_ready(command, repository)
}

/// A single-model start of `repository` with the plugin manifest `plugins`, expected to be
/// refused: how trident ended (`None`: it still ran after two minutes, and was killed) and its
/// log.
pub fn start_refused(
    repository: &Path,
    plugins: &Path,
) -> (Option<std::process::ExitStatus>, String) {
    let log_file = tempfile::NamedTempFile::new().unwrap();
    let mut child = super::command(env!("CARGO_BIN_EXE_trident"))
        .env("SAGEMAKER_TRITON_PLUGINS", plugins)
        .env_remove("SAGEMAKER_MULTI_MODEL")
        .args(["serve", "--model-repository"])
        .arg(repository)
        .args(["--bind", "127.0.0.1", "--port", "0"])
        .stdout(Stdio::null())
        .stderr(log_file.reopen().unwrap())
        .spawn()
        .unwrap();
    // A start that is not refused would serve for ever: it is given two minutes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    (
        status,
        std::fs::read_to_string(log_file.path()).unwrap_or_default(),
    )
}

/// Runs the third-party client script `tests/clients/<script>` with `argument`, `input` as
/// JSON on its standard input, and returns the JSON it prints (in the virtual environment of
/// `scripts/install-test-clients`).
pub fn python_client(script: &str, argument: &str, input: &serde_json::Value) -> serde_json::Value {
    client_in("python", script, argument, input)
}

/// [`python_client`] in the virtual environment of Hugging Face's `transformers`
/// (`target/test-clients/hf`: its pins cannot share the first's `tokenizers`).
pub fn transformers_client(
    script: &str,
    argument: &str,
    input: &serde_json::Value,
) -> serde_json::Value {
    client_in("hf", script, argument, input)
}

fn client_in(
    venv: &str,
    script: &str,
    argument: &str,
    input: &serde_json::Value,
) -> serde_json::Value {
    use std::io::Write;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(format!("target/test-clients/{venv}/bin/python"));
    assert!(
        python.exists(),
        "no {}: run scripts/install-test-clients",
        python.display()
    );
    let mut child = Command::new(python)
        .arg(root.join("tests/clients").join(script))
        .arg(argument)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the client");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{script} printed {e}: {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

/// The children of process `pid` (every thread's).
pub fn children(pid: u32) -> Vec<u32> {
    trident::engine::processes::children_of(pid)
        .into_iter()
        .collect()
}

/// Whether `pid`'s command line contains `needle` (a zombie's is empty: false).
fn runs(pid: u32, needle: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
}

/// The python backend stubs among `pid`'s children (a zombie has no command line: not listed).
pub fn stub_children(pid: u32) -> Vec<u32> {
    children(pid)
        .into_iter()
        .filter(|&pid| runs(pid, "triton_python_backend_stub"))
        .collect()
}

/// The name `ps` shows for process `pid` (`/proc/<pid>/comm`).
pub fn process_name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|name| name.trim_end().to_owned())
        .unwrap_or_else(|e| panic!("process {pid}'s name: {e}"))
}

/// The environment process `pid` started with (`/proc/<pid>/environ`), one `NAME=VALUE` each.
pub fn process_environment(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_else(|e| panic!("process {pid}'s environment: {e}"))
        .split(|&b| b == 0)
        .map(|entry| String::from_utf8_lossy(entry).into_owned())
        .collect()
}

/// The serving process of the supervised trident `supervisor` (its child running trident), if
/// one runs now.
pub fn current_serving_process(supervisor: u32) -> Option<u32> {
    // By the name the serving process gives itself: the supervisor is a subreaper, and a stub
    // launcher (`trident confine-stub`) whose parent shell was killed is its child too.
    children(supervisor).into_iter().find(|&pid| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim() == "trident-serve")
    })
}

/// [`current_serving_process`], waiting up to 60 s for one.
pub fn serving_process(supervisor: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(pid) = current_serving_process(supervisor) {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "supervisor {supervisor} runs no serving process"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The python stubs of the supervised trident `supervisor`'s serving process now.
pub fn supervised_stubs(supervisor: u32) -> Vec<u32> {
    current_serving_process(supervisor)
        .map(stub_children)
        .unwrap_or_default()
}
