//! The `trident` command line: serving (this file) and the plugin author's and platform team's
//! tools (`plugin`), which the server never runs.

pub mod plugin;
pub mod settings;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::ServeArgs;
use crate::config::process::ProcessRole;
use crate::engine::triton::{self, ApiVersion, TritonEngine};

/// trident: NVIDIA Triton Inference Server as an AWS SageMaker inference container.
#[derive(Debug, Parser)]
#[command(version, about)]
pub struct Cli {
    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `trident`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve SageMaker's container contract (the container entrypoint: `docker run <image> serve`).
    Serve(Box<ServeArgs>),
    /// Plugin keys, signatures and inspection.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Boxes this process for a python model, then runs the python backend's stub
    /// (`scripts/install-triton`'s launcher script calls it; see `src/confine/`).
    #[command(hide = true)]
    ConfineStub {
        /// The real stub.
        stub: PathBuf,
        /// The stub's arguments, unchanged.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Print the configuration reference (every setting of `serve`) as Markdown.
    #[command(hide = true)]
    Settings,
    /// Load the Triton core and report where it was found and its C API version.
    CheckTriton {
        /// A Triton installation (folder with lib/libtritonserver.so) or the library file itself.
        #[arg(long, env = "TRITON_HOME")]
        triton_home: Option<PathBuf>,
    },
}

/// What `ps` shows for a serving process a supervisor started (at most 15 bytes).
const SERVING_PROCESS_NAME: &std::ffi::CStr = c"trident-serve";

/// Gives the serving process its empty working folder, the environment its python models'
/// launcher needs ([`crate::confine::export_for_stubs`]) and its box
/// ([`crate::confine::serving`]); called before its first thread.
fn confine_serving_process(config: &crate::config::Config) -> Result<(), String> {
    use crate::artifacts::staging::StagingArea;
    use crate::confine::serving;
    let staging = &config.artifacts.staging_dir;
    let launcher = match StagingArea::for_process(staging) {
        Ok(area) => {
            crate::confine::work_in(&area.working_folder())?;
            crate::confine::launcher_binary(area.folder())?
        }
        // The first model load reports it again, naming the setting.
        Err(error) => {
            tracing::warn!(%error, "the serving process keeps its working folder");
            std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?
        }
    };
    // The environment the core's stubs will inherit.
    crate::confine::export_for_stubs(
        &launcher,
        config.artifacts.python_isolation,
        &StagingArea::folder_under(staging),
    );
    let needs = config.serving_needs();
    serving::make_folders(&needs.writable);
    let isolation = config.artifacts.serving_isolation;
    let enforced = serving::confine(&serving::grants(&needs), isolation)?;
    let what = match enforced {
        serving::Enforced::Fully | serving::Enforced::Partly => {
            "writes only to the folders it was granted"
        }
        serving::Enforced::Not if isolation == crate::confine::Isolation::Off => "not confined",
        serving::Enforced::Not => "not confined (this kernel has no Landlock)",
    };
    tracing::info!(
        setting = %isolation,
        landlock = enforced.name(),
        writable = ?needs.writable,
        "the serving process {what}"
    );
    Ok(())
}

impl Cli {
    /// Runs the command; the error is what the binary reports before exiting 1.
    pub fn run(self) -> Result<ExitCode, Box<dyn std::error::Error + Send + Sync>> {
        match self.command {
            Command::Serve(args) => {
                let mut config = args.resolve()?;
                // Before the working folder changes ([`crate::confine::work_in`]).
                config.absolute_paths()?;
                // The router's paths do not depend on the engine it runs on.
                config.check_routes(crate::http::routes::Router::<TritonEngine>::is_reserved)?;
                if let ProcessRole::Supervisor(limit) = config.process {
                    return crate::supervisor::run(&config, limit);
                }
                crate::confine::serving_process_undumpable();
                confine_serving_process(&config)?;
                tracing::info!(
                    setting = %config.artifacts.python_isolation,
                    kernel = %config.artifacts.landlock,
                    "python models' processes: {}",
                    match (config.artifacts.python_isolation, config.artifacts.landlock.abi()) {
                        (crate::confine::PythonIsolation::Off, _) => "not confined",
                        (_, Some(_)) => "each confined in a box of its own",
                        (crate::confine::PythonIsolation::Required, None) => "refused (no Landlock)",
                        (_, None) => "run without Landlock (seccomp and no capabilities only)",
                    }
                );
                if let ProcessRole::Supervised(_) = config.process {
                    // Started through /proc/self/exe, the process would be named `exe` in `ps`
                    // and `top`; the name is a label only, so failing to set it is harmless.
                    if let Err(e) = rustix::thread::set_name(SERVING_PROCESS_NAME) {
                        tracing::debug!(error = %e, "naming the serving process failed");
                    }
                }
                // The control runtime: start-up, signals, the accept loop, the metrics port,
                // plugin reloads. Requests are served on the HTTP worker threads
                // (`http::workers`, `--thread-count` of them).
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("trident-control")
                    .enable_all()
                    .build()?
                    .block_on(crate::serve::run(config))?;
                Ok(ExitCode::SUCCESS)
            }
            Command::ConfineStub { stub, args } => Ok(crate::confine::stub::run(&stub, &args)),
            Command::Plugin(command) => command.run().map(|()| ExitCode::SUCCESS),
            Command::Settings => {
                settings::write_reference(&mut std::io::stdout().lock())?;
                Ok(ExitCode::SUCCESS)
            }
            Command::CheckTriton { triton_home } => {
                let triton = triton::library::load(triton_home.as_deref())?;
                let mut out = std::io::stdout().lock();
                writeln!(out, "Triton core: {}", triton.path().display())?;
                writeln!(
                    out,
                    "C API: {} (trident was built against {})",
                    triton.api_version(),
                    ApiVersion::BUILT_AGAINST
                )?;
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}
