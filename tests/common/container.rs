//! trident's image run as SageMaker runs it (`scripts/image run`: the entrypoint with `serve`,
//! PID 1 of its own PID and mount namespaces, the model read-only under `/opt/ml`, the host's
//! network), for the tests of the image and the contract checks against it.
//!
//! The image comes from `TRIDENT_TEST_IMAGE` (scripts/image test sets it after building); without
//! it, the tests that need one are reported ignored.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::http_client::try_request;
use super::process::free_port;

/// The variable naming the image under test.
pub const IMAGE_VARIABLE: &str = "TRIDENT_TEST_IMAGE";

/// SageMaker's limit from SIGTERM to SIGKILL.
pub const STOP_LIMIT: Duration = Duration::from_secs(30);

/// The image under test, if one is named.
pub fn image() -> Option<String> {
    std::env::var(IMAGE_VARIABLE).ok().filter(|s| !s.is_empty())
}

/// `scripts/image`, by its path in the repository.
pub fn image_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/image")
}

/// The image's root file system, unpacked (read it, never write it).
pub fn root_of(image: &str) -> PathBuf {
    let output = super::command(image_script())
        .args(["rootfs", image])
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/image runs");
    assert!(
        output.status.success(),
        "scripts/image rootfs {image} failed"
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// What the container finds under `/opt/ml`.
pub enum Volume<'a> {
    /// A single model's repository at `/opt/ml/model`.
    Model(&'a Path),
    /// Multi-model artifacts at `/opt/ml/models`.
    Models(&'a Path),
}

/// A running container; stopped as `docker stop` would (SIGTERM, SIGKILL after 30 s) when dropped.
pub struct Container {
    script: Child,
    /// The host's PID of the container's PID 1.
    pub pid1: u32,
    /// The port trident listens on (`SAGEMAKER_BIND_TO_PORT`), on the host's loopback.
    pub port: u16,
    /// When PID 1 started (the pid file appeared).
    pub started: Instant,
    status: Option<ExitStatus>,
    logs: tempfile::TempDir,
}

impl Container {
    /// Runs `image` with `volume` and `env` (besides the port), and waits for PID 1 to exist.
    pub fn start(image: &str, volume: Volume, env: &[(&str, &str)]) -> Container {
        let logs = tempfile::tempdir().unwrap();
        let pid_file = logs.path().join("pid1");
        let port = free_port();
        let mut command = super::command(image_script());
        command.arg("run").arg("--pid-file").arg(&pid_file);
        match volume {
            Volume::Model(path) => command.arg("--model").arg(path),
            Volume::Models(path) => command.arg("--models").arg(path),
        };
        command
            .arg("-e")
            .arg(format!("SAGEMAKER_BIND_TO_PORT={port}"));
        for (name, value) in env {
            command.arg("-e").arg(format!("{name}={value}"));
        }
        let log = std::fs::File::create(logs.path().join("log")).unwrap();
        let script = command
            .arg(image)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("scripts/image run starts");
        let mut container = Container {
            script,
            pid1: 0,
            port,
            started: Instant::now(),
            status: None,
            logs,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(pid) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|text| text.trim().parse().ok())
            {
                container.pid1 = pid;
                container.started = Instant::now();
                return container;
            }
            if let Ok(Some(status)) = container.script.try_wait() {
                panic!(
                    "the container ended ({status}) before PID 1 started:\n{}",
                    container.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no PID 1 after 120 s:\n{}",
                container.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// trident's address on the host's loopback.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Waits until `/ping` answers 200 (with `headers`), up to `within`; the time from PID 1's
    /// start.
    pub fn wait_healthy(&mut self, headers: &[(&str, &str)], within: Duration) -> Duration {
        let deadline = Instant::now() + within;
        loop {
            if try_request(self.addr(), "GET", "/ping", headers, b"").is_ok_and(|r| r.status == 200)
            {
                return self.started.elapsed();
            }
            if let Ok(Some(status)) = self.script.try_wait() {
                panic!(
                    "the container ended ({status}) before /ping was 200:\n{}",
                    self.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "/ping not 200 within {within:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything the container wrote (trident's log, the core's).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.logs.path().join("log")).unwrap_or_default()
    }

    /// SIGTERM to PID 1, as SageMaker stops a container; PID 1's exit status and how long it
    /// took, or the time it was still running after [`STOP_LIMIT`] (then it gets SIGKILL).
    pub fn stop(&mut self) -> Result<(ExitStatus, Duration), Duration> {
        if let Some(status) = self.status {
            return Ok((status, Duration::ZERO));
        }
        let sent = Instant::now();
        super::send_signal(self.pid1, "TERM");
        while sent.elapsed() < STOP_LIMIT {
            if let Ok(Some(status)) = self.script.try_wait() {
                self.status = Some(status);
                return Ok((status, sent.elapsed()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        super::send_signal(self.pid1, "KILL");
        self.status = self.script.wait().ok();
        Err(sent.elapsed())
    }

    /// The processes in the container's PID namespace, seen from the host: (host PID, state
    /// letter, command name).
    pub fn processes(&self) -> Vec<(u32, char, String)> {
        let Ok(namespace) = std::fs::read_link(format!("/proc/{}/ns/pid", self.pid1)) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if std::fs::read_link(entry.path().join("ns/pid"))
                .ok()
                .as_ref()
                != Some(&namespace)
            {
                continue;
            }
            // /proc/<pid>/stat: `pid (comm) state ...`; comm may hold spaces and parentheses.
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let state = stat[close + 1..].trim_start().chars().next().unwrap_or('?');
            found.push((pid, state, stat[open + 1..close].to_string()));
        }
        found
    }

    /// A file inside the running container (through PID 1's root).
    pub fn path(&self, inside: &str) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root", self.pid1)).join(inside.trim_start_matches('/'))
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("container log (end):\n{}", tail(&self.log(), 60));
        }
        if self.status.is_none() {
            let _ = self.stop();
        }
    }
}

/// The last `lines` lines of `text`.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
