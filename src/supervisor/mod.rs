//! `trident serve`'s process model: a supervisor that keeps the endpoint up when the process
//! running the Triton core dies.
//!
//! The core and its backends run inside trident's process: a native backend's segfault, or an
//! abort in the python backend's shared-memory IPC when a stub is killed at the wrong moment,
//! ends that process and every model with it. So `trident serve` is two processes:
//!
//! - the **supervisor** (this module; no Triton inside it) resolves the configuration (the
//!   start-up checks exit 1 as before), binds the listening socket and keeps it for its whole
//!   life, owns SIGTERM, SIGINT and SIGHUP (forwarded), and runs
//! - the **serving process**: the same binary and arguments, told by `TRIDENT_SUPERVISOR_PID`
//!   that it is supervised. It takes the listener as its standard input ([`listener`]), ends
//!   when the supervisor does (parent-death signal), and writes down what a successor needs in
//!   the supervisor's state folder (a multi-model endpoint's loaded models:
//!   [`crate::mme::journal`]).
//!
//! When the serving process ends abnormally (any end the supervisor did not ask for once it has
//! served; before that, a signal or exit code [`RESTART_EXIT_CODE`], which it uses when the core
//! cannot bring a model back), the
//! supervisor ends and reaps what it left ([`leftovers`]: its backends' processes, orphaned to
//! the supervisor, a child subreaper, and their shared memory regions) and starts a new one on
//! the same socket, which loads every model that was loaded before it accepts a connection.
//! Meanwhile connections wait in the socket's backlog: none is refused. More than
//! `--max-restarts` abnormal ends within `--restart-window-secs` is a crash loop: the
//! supervisor exits 1 so SageMaker replaces the instance ([`restarts`]). The first serving
//! process ending with any other code before it serves (a model that fails to load at start)
//! ends the supervisor with that code, as an unsupervised trident would. As a container's PID 1 the
//! supervisor also reaps every process orphaned to it.

pub mod leftovers;
pub mod listener;
pub mod restarts;

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitStatus};
use tokio::signal::unix::{SignalKind, signal};

use crate::config::Config;
use crate::config::process::{RestartLimit, Supervision};
use leftovers::{Leftovers, reap_any};
use restarts::Restarts;

/// The exit code with which a serving process asks to be replaced (`EX_TEMPFAIL`).
pub const RESTART_EXIT_CODE: u8 = 75;

/// How long after the serving process's own grace period the supervisor waits for it to stop
/// after SIGTERM, before SIGKILL: what the serving process does after its drain (its sessions'
/// ENDs, at most 5 s, then the core's stop, at most 3 s; `serve.rs` checks that they fit) and
/// two seconds to exit. With the default grace (19 s) the supervisor's SIGKILL, if it comes,
/// comes at 29 s, before SageMaker's at 30 s.
pub const STOP_MARGIN: Duration = Duration::from_secs(10);

/// Why supervising stopped with an error.
pub type SuperviseError = Box<dyn std::error::Error + Send + Sync>;

/// Runs the supervisor until SIGTERM (or Ctrl-C) or a crash loop; the exit code is the serving
/// process's when it stopped on its own.
pub fn run(config: &Config, limit: RestartLimit) -> Result<ExitCode, SuperviseError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name("trident-supervisor")
        .build()?
        .block_on(supervise(config, limit))
}

async fn supervise(config: &Config, limit: RestartLimit) -> Result<ExitCode, SuperviseError> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| format!("cannot become the child subreaper of the serving process: {e}"))?;
    let mut signals = Signals::listen()?;
    let listener = bind(config.http.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", config.http.listen))?;
    tracing::info!(address = %listener.local_addr()?, "listening");
    let state = StateDir::create()?;
    let program = Program::this()?;
    let mut restarts = Restarts::new(limit);
    loop {
        let started = Instant::now();
        let supervision = Supervision {
            supervisor: std::process::id(),
            state_dir: state.path().to_owned(),
            restarts: restarts.total(),
        };
        let leftovers = Leftovers::of(supervision.shm_region_prefix());
        let serving = start(config, &program, &listener, &supervision)?;
        let ended = watch(
            serving,
            &mut signals,
            state.path(),
            config.http.shutdown_grace,
        )
        .await;
        let how = describe(ended.status);
        let served = is_serving(state.path(), serving);
        let abnormal = !ended.stopping && is_abnormal(ended.status, served, restarts.total());
        if abnormal {
            tracing::error!(
                pid = serving,
                how,
                served,
                served_seconds = started.elapsed().as_secs(),
                "the serving process ended abnormally"
            );
        } else {
            tracing::info!(how, "the serving process ended");
        }
        let cleaned = leftovers.clean();
        if cleaned != leftovers::Cleaned::default() {
            tracing::info!(
                processes = cleaned.processes,
                regions = cleaned.regions,
                unreaped = cleaned.unreaped,
                "ended what the serving process left: its processes and shared memory regions"
            );
        }
        if !abnormal {
            return Ok(exit_code(&ended));
        }
        match restarts.after_abnormal_end(Instant::now(), started.elapsed()) {
            Ok(pause) => {
                tracing::warn!(
                    pause_ms = pause.as_millis(),
                    restart = restarts.total(),
                    "starting a new serving process; connections wait until it serves"
                );
                if signals.stop_within(pause).await {
                    tracing::info!("stop signal received while restarting; exiting");
                    return Ok(ExitCode::SUCCESS);
                }
            }
            Err(crash_loop) => {
                tracing::error!(
                    "{crash_loop}: not restarting it again; trident exits so that the instance is replaced"
                );
                return Ok(ExitCode::FAILURE);
            }
        }
    }
}

/// Whether a serving process that ended with `status` when the supervisor had not asked it to
/// stop is to be replaced: every such end once it has `served` (a native library's `exit(1)`,
/// a SIGTERM sent to it alone, even an exit 0: the endpoint was serving and nothing asked it to
/// stop), a signal or [`RESTART_EXIT_CODE`] at any time, and any failure of a replacement. The
/// first process's own failure before it serves (a model that cannot load at start) is not: it
/// ends the supervisor with its code, as an unsupervised trident would.
fn is_abnormal(status: WaitStatus, served: bool, restarts: u32) -> bool {
    end_is_abnormal(status.signaled(), status.exit_status(), served, restarts)
}

/// [`is_abnormal`] for an end by a signal (`signaled`) or with exit `code`.
fn end_is_abnormal(signaled: bool, code: Option<i32>, served: bool, restarts: u32) -> bool {
    served
        || signaled
        || code == Some(i32::from(RESTART_EXIT_CODE))
        || (restarts > 0 && code != Some(0))
}

/// Connections the listener queues while no serving process accepts (a restart); the kernel
/// caps it at `net.core.somaxconn`.
const BACKLOG: u32 = 4096;

/// The listening socket, with room in its backlog for the connections that arrive during a
/// restart (the standard library's bind queues 128).
fn bind(address: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match address {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(BACKLOG)?.into_std()
}

/// The binary serving processes run: the one this supervisor was started from, even after the
/// file at its path is replaced or removed (an upgrade in place, a rebuild), through the
/// kernel's link to it (`/proc/self/exe`); and the path it was started as, for their `argv[0]`
/// and for errors.
struct Program {
    run: PathBuf,
    path: PathBuf,
}

impl Program {
    fn this() -> Result<Program, SuperviseError> {
        let path = std::env::current_exe()
            .map_err(|e| format!("cannot tell which binary this is (/proc/self/exe): {e}"))?;
        let link = PathBuf::from("/proc/self/exe");
        let run = if link.exists() { link } else { path.clone() };
        Ok(Program { run, path })
    }
}

/// mimalloc's setting for committing its arenas whole when reserved (its default on Linux).
const MIMALLOC_EAGER_COMMIT: &str = "MIMALLOC_ARENA_EAGER_COMMIT";

/// Starts a serving process: this binary with this process's arguments, the listener as its
/// standard input, and what it needs to know in its environment. Returns its pid; it is reaped
/// by [`reap_any`], never through `Child`.
fn start(
    config: &Config,
    program: &Program,
    listener: &TcpListener,
    supervision: &Supervision,
) -> Result<u32, SuperviseError> {
    let mut command = Command::new(&program.run);
    command
        .arg0(
            std::env::args_os()
                .next()
                .unwrap_or(program.path.clone().into()),
        )
        .args(std::env::args_os().skip(1))
        .envs(supervision.environment());
    // mimalloc's arenas committed eagerly keep what was freed resident (10 MiB of an idle
    // serving process, `scripts/idle-memory`); committed as used, they give it back, at no cost
    // measured per request (bench/analysis.md). A value the operator set is kept.
    if std::env::var_os(MIMALLOC_EAGER_COMMIT).is_none() {
        command.env(MIMALLOC_EAGER_COMMIT, "0");
    }
    // A port chosen from SAGEMAKER_SAFE_PORT_RANGE stays the same across restarts.
    if let Some(port) = config.http.metrics_port {
        command.env("TRIDENT_METRICS_PORT", port.to_string());
    }
    listener::hand_to(&mut command, listener)
        .map_err(|e| format!("cannot hand the listening socket to the serving process: {e}"))?;
    let child = command.spawn().map_err(|e| {
        format!(
            "cannot start the serving process ({}, the binary started as {}): {e}",
            program.run.display(),
            program.path.display()
        )
    })?;
    let pid = child.id();
    tracing::info!(
        pid,
        restarts = supervision.restarts,
        "serving process started"
    );
    Ok(pid)
}

/// How the serving process ended, and whether the supervisor had asked it to stop (and had to
/// kill it after its grace period).
struct Ended {
    status: WaitStatus,
    stopping: bool,
    killed: bool,
}

/// Waits for the serving process `serving` to end: forwards SIGTERM/SIGINT (then SIGKILL if it
/// outlives its grace period) and SIGHUP to it, and reaps every orphan that ends meanwhile. A
/// SIGHUP waits until the serving process serves ([`serving_marker`]): one that reached it
/// while it loads would end it.
async fn watch(serving: u32, signals: &mut Signals, state: &Path, grace: Duration) -> Ended {
    let (mut stopping, mut killed, mut hangup_held) = (false, false, false);
    let mut kill_at: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let Signals {
        child,
        terminate,
        interrupt,
        hangup,
    } = signals;
    loop {
        if let Some((_, status)) = reap_any().into_iter().find(|&(pid, _)| pid == serving) {
            return Ended {
                status,
                stopping,
                killed,
            };
        }
        let stop = tokio::select! {
            _ = child.recv() => None,
            _ = terminate.recv() => Some("SIGTERM"),
            _ = interrupt.recv() => Some("SIGINT"),
            _ = hangup.recv() => {
                hangup_held = true;
                None
            }
            _ = tick.tick() => {
                if kill_at.is_some_and(|at| Instant::now() >= at) {
                    tracing::warn!(pid = serving, "the serving process outlived its grace period; killing it");
                    send(serving, Signal::KILL);
                    (kill_at, killed) = (None, true);
                }
                None
            }
        };
        if hangup_held && !stopping && is_serving(state, serving) {
            send(serving, Signal::HUP);
            hangup_held = false;
        }
        if let Some(signal) = stop {
            tracing::info!(
                signal,
                "stopping: the serving process finishes in-flight requests"
            );
            send(serving, Signal::TERM);
            stopping = true;
            kill_at.get_or_insert(Instant::now() + grace + STOP_MARGIN);
        }
    }
}

fn send(pid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    if let Err(error) = rustix::process::kill_process(pid, signal) {
        tracing::warn!(%error, ?signal, "signalling the serving process failed");
    }
}

/// The signals the supervisor acts on, listened for before any child starts.
struct Signals {
    child: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> std::io::Result<Signals> {
        Ok(Signals {
            child: signal(SignalKind::child())?,
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// Waits `pause`, reaping orphans; true if SIGTERM or SIGINT came first.
    async fn stop_within(&mut self, pause: Duration) -> bool {
        let sleep = tokio::time::sleep(pause);
        tokio::pin!(sleep);
        loop {
            reap_any();
            tokio::select! {
                _ = self.terminate.recv() => return true,
                _ = self.interrupt.recv() => return true,
                _ = self.child.recv() => {}
                _ = self.hangup.recv() => {}
                () = &mut sleep => return false,
            }
        }
    }
}

/// Tells how a process ended, for a log line.
pub fn describe(status: WaitStatus) -> String {
    if let Some(code) = status.exit_status() {
        return format!("exit code {code}");
    }
    match status.terminating_signal() {
        Some(signal) => format!("killed by signal {signal} ({})", signal_name(signal)),
        None => "ended".to_owned(),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "another signal",
    }
}

/// The supervisor's exit code for a serving process that ended so: its exit code, or 1; but
/// 0 when the supervisor asked it to stop and it ended by that SIGTERM itself (it was still
/// starting: a stop then means not to start, and nothing was served).
fn exit_code(ended: &Ended) -> ExitCode {
    let terminated = ended.status.terminating_signal() == Some(Signal::TERM.as_raw());
    if ended.stopping && !ended.killed && terminated {
        return ExitCode::SUCCESS;
    }
    match ended.status.exit_status() {
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    }
}

/// The file in the state folder by which the serving process says it serves: its pid.
const SERVING_MARKER: &str = "serving";

/// Where the serving process writes that it serves.
pub fn serving_marker(state: &Path) -> PathBuf {
    state.join(SERVING_MARKER)
}

/// In the serving process: says to the supervisor that it serves (its signals can be
/// forwarded). A failure is logged: the supervisor then holds SIGHUP for good.
pub fn say_serving(supervision: &Supervision) {
    let marker = serving_marker(&supervision.state_dir);
    if let Err(error) = std::fs::write(&marker, std::process::id().to_string()) {
        tracing::warn!(%error, file = %marker.display(), "cannot tell the supervisor this process serves; SIGHUP will not reach it");
    }
}

/// Whether the serving process `pid` has said it serves.
fn is_serving(state: &Path, pid: u32) -> bool {
    std::fs::read_to_string(serving_marker(state)).is_ok_and(|text| text.trim() == pid.to_string())
}

/// The supervisor's private folder for what a restarted serving process needs, removed when
/// the supervisor exits.
struct StateDir(PathBuf);

impl StateDir {
    /// A new folder only this user may enter, under the temporary folder; never one that
    /// exists already (another user could have made it).
    fn create() -> Result<StateDir, SuperviseError> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let mut builder = std::fs::DirBuilder::new();
        builder.mode(0o700);
        let mut attempt = 0u32;
        loop {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let path = base.join(format!("trident-{}-{nanos:x}", std::process::id()));
            match builder.create(&path) {
                Ok(()) => return Ok(StateDir(path)),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 => {
                    attempt += 1;
                }
                Err(error) => {
                    return Err(format!(
                        "cannot make the supervisor's state folder {}: {error}",
                        path.display()
                    )
                    .into());
                }
            }
        }
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.0) {
            tracing::debug!(%error, folder = %self.0.display(), "removing the state folder");
        }
    }
}

/// In the serving process: ends it when the supervisor ends (SIGTERM, so it drains), and checks
/// that the supervisor is its parent still (it may have ended before the signal was set).
pub fn follow_supervisor(supervision: &Supervision) -> std::io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(Signal::TERM))?;
    let parent = rustix::process::getppid().map(|pid| pid.as_raw_nonzero().get());
    if parent != i32::try_from(supervision.supervisor).ok() {
        return Err(std::io::Error::other(format!(
            "the supervisor (pid {}) is not this process's parent",
            supervision.supervisor
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_folder_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let state = StateDir::create().unwrap();
        let path = state.path().to_owned();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::write(path.join("models.json"), b"{}").unwrap();
        drop(state);
        assert!(!path.exists());
    }

    #[test]
    fn every_end_after_serving_is_replaced() {
        let exited = |code| (false, Some(code));
        let signalled = (true, None);
        // Once it served: any end the supervisor did not ask for.
        for (signaled, code) in [exited(0), exited(1), exited(75), signalled] {
            assert!(end_is_abnormal(signaled, code, true, 0), "{code:?}");
        }
        // The first start, before serving: only a signal or the restart code.
        let first = |(signaled, code)| end_is_abnormal(signaled, code, false, 0);
        assert!(!first(exited(1)));
        assert!(!first(exited(0)));
        assert!(first(exited(75)));
        assert!(first(signalled));
        // A replacement that fails before serving.
        assert!(end_is_abnormal(false, Some(1), false, 2));
        assert!(!end_is_abnormal(false, Some(0), false, 2));
    }

    #[test]
    fn signals_are_named() {
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(6), "SIGABRT");
        assert_eq!(signal_name(64), "another signal");
    }
}
