//! The `trident` command line.

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
    Plugin(crate::plugins::cli::PluginCommand),
    /// Load the Triton core and report where it was found and its C API version.
    CheckTriton {
        /// A Triton installation (folder with lib/libtritonserver.so) or the library file itself.
        #[arg(long, env = "TRITON_HOME")]
        triton_home: Option<PathBuf>,
    },
}

/// What `ps` shows for a serving process a supervisor started (at most 15 bytes).
const SERVING_PROCESS_NAME: &std::ffi::CStr = c"trident-serve";

impl Cli {
    /// Runs the command; the error is what the binary reports before exiting 1.
    pub fn run(self) -> Result<ExitCode, Box<dyn std::error::Error + Send + Sync>> {
        match self.command {
            Command::Serve(args) => {
                let config = args.resolve()?;
                // The router's paths do not depend on the engine it runs on.
                config.check_routes(crate::http::routes::Router::<TritonEngine>::is_reserved)?;
                if let ProcessRole::Supervisor(limit) = config.process {
                    return crate::supervisor::run(&config, limit);
                }
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
            Command::Plugin(command) => command.run().map(|()| ExitCode::SUCCESS),
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
