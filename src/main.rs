//! The `trident` binary: a thin shell over the library.

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// Rust's allocations go to mimalloc: on the small-request path glibc's malloc, free and its
/// fastbin consolidation were about a seventh of an HTTP thread's time (bench/analysis.md).
/// Triton's core and backends keep their own allocator. The serving process runs with
/// `MIMALLOC_ARENA_EAGER_COMMIT=0` (set by the supervisor, and by the image for both processes)
/// so that memory it frees is given back (`scripts/idle-memory`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal: CloudWatch would show the escape codes.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match trident::cli::Cli::parse().run() {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error}");
            std::process::ExitCode::FAILURE
        }
    }
}
