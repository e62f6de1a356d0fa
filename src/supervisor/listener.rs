//! The listening socket, handed from the supervisor to each serving process it starts.
//!
//! The supervisor binds it once and keeps it for its whole life, so the port never closes:
//! while no serving process accepts (a restart), connections wait in the kernel's backlog
//! instead of being refused. Each serving process gets it as its standard input, as inetd hands
//! a listening socket to a `wait` service: the one descriptor a child can be given with the
//! standard library alone (no `unsafe` outside the Triton layer). The serving process takes it
//! and puts `/dev/null` in its place, so the backends' processes it starts do not inherit it.

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Command, Stdio};

/// Gives `command` a copy of `listener` as its standard input.
pub fn hand_to(command: &mut Command, listener: &TcpListener) -> io::Result<()> {
    let copy: OwnedFd = listener.try_clone()?.into();
    command.stdin(Stdio::from(copy));
    Ok(())
}

/// The listener the supervisor handed this process as its standard input; standard input is
/// `/dev/null` afterwards. Fails clearly when standard input is not a listening socket.
pub fn take() -> io::Result<tokio::net::TcpListener> {
    let copy = io::stdin().as_fd().try_clone_to_owned()?;
    let listener = TcpListener::from(copy);
    let address = listener.local_addr().map_err(|error| {
        io::Error::new(
            error.kind(),
            format!("standard input is not the supervisor's listening socket: {error}"),
        )
    })?;
    listener.set_nonblocking(true)?;
    let null = std::fs::File::open("/dev/null")
        .map_err(|e| io::Error::new(e.kind(), format!("cannot open /dev/null: {e}")))?;
    rustix::stdio::dup2_stdin(&null)?;
    tracing::debug!(%address, "took the supervisor's listener");
    tokio::net::TcpListener::from_std(listener)
}
