//! trident as a process: a free loopback port, waiting until it is ready, and stopping it.

use std::net::{SocketAddr, TcpListener};
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

/// Lines of trident's log printed when a test fails.
const LOG_TAIL_LINES: usize = 200;

impl Running {
    /// A started trident whose standard error goes to `log`.
    pub fn logging(child: Child, log: tempfile::NamedTempFile) -> Running {
        Running(child, Some(log))
    }

    /// The file trident's standard error goes to.
    pub fn log(&self) -> &std::path::Path {
        self.1.as_ref().expect("trident's log is kept").path()
    }
}

impl Drop for Running {
    /// SIGTERM first, so trident stops the core and its python stubs; SIGKILL only if it hangs.
    /// When the test is failing, the end of trident's log is printed with the failure.
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(log) = &self.1
        {
            let text = std::fs::read_to_string(log.path()).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
            let state = match self.0.try_wait() {
                Ok(Some(status)) => format!("exited: {status}"),
                Ok(None) => "running".to_owned(),
                Err(error) => format!("unknown: {error}"),
            };
            eprintln!(
                "--- the last {} lines of trident's log (pid {}, {state}) ---\n{}\n--- end of trident's log ---",
                tail.len(),
                self.0.id(),
                tail.join("\n")
            );
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
    mut command: Command,
    repository: impl AsRef<std::ffi::OsStr>,
) -> (Running, SocketAddr) {
    let log = tempfile::NamedTempFile::new().expect("a file for trident's log");
    let child = command
        .arg("serve")
        .arg("--model-repository")
        .arg(repository)
        .args(["--bind", "127.0.0.1", "--port", "0"])
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("trident's log file"))
        .spawn()
        .expect("start trident");
    let mut running = Running(child, Some(log));
    let addr = listening_address(&mut running);
    wait_ready(addr, &mut running.0);
    (running, addr)
}

/// The address trident's log says it listens on (`listening address=…`), once it says so.
pub fn listening_address(running: &mut Running) -> SocketAddr {
    let log = running.log().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
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
pub fn serve_with(
    repository: &std::path::Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> (Running, SocketAddr) {
    let mut command = super::command(env!("CARGO_BIN_EXE_trident"));
    for (key, _) in std::env::vars() {
        if key.starts_with("SAGEMAKER_") || key.starts_with("TRIDENT_") {
            command.env_remove(key);
        }
    }
    command.env("RUST_LOG", "info").envs(env.iter().copied());
    serve_ready(command, repository)
}

/// Runs the third-party client script `tests/clients/<script>` with `argument`, `input` as
/// JSON on its standard input, and returns the JSON it prints (in the virtual environment of
/// `scripts/install-test-clients`).
pub fn python_client(script: &str, argument: &str, input: &serde_json::Value) -> serde_json::Value {
    use std::io::Write;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("target/test-clients/python/bin/python");
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
