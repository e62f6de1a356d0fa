//! What the processes the core starts inherit from trident: standard input, output and error,
//! nothing else.
//!
//! Triton's backends start processes of their own (the python backend forks a stub per model
//! instance) without closing what the parent has open. Every descriptor trident opens itself is
//! close-on-exec already (Rust's standard library and tokio open them so), but descriptors
//! trident *inherited* without that flag (a pipe its parent forgot, a CI harness's log) would
//! otherwise live on in every stub: a reader waiting for such a pipe's end would wait as long as
//! the model is loaded. [`keep_from_child_processes`] marks them all close-on-exec before the
//! core starts; `tests/serve_cli.rs` checks what a stub holds.

/// The first descriptor after standard input, output and error.
const FIRST_AFTER_STDERR: libc::c_uint = 3;

/// Marks every open descriptor above standard error close-on-exec. Nothing is closed: trident
/// keeps using what it has open; only processes started from here on no longer inherit it.
pub(super) fn keep_from_child_processes() {
    // SAFETY: close_range takes three integers, no pointers; with CLOSE_RANGE_CLOEXEC it only
    // sets the close-on-exec flag of the open descriptors in the range and closes none. Called
    // as a system call, so no glibc version is required (its wrapper came in 2.34).
    let status = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            FIRST_AFTER_STDERR,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if status == 0 {
        return;
    }
    // Kernels before 5.11 have no CLOSE_RANGE_CLOEXEC: each open descriptor, one at a time.
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        tracing::warn!("cannot list open descriptors; backend processes may inherit some");
        return;
    };
    let descriptors: Vec<libc::c_int> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd >= FIRST_AFTER_STDERR as libc::c_int)
        .collect();
    for fd in descriptors {
        // SAFETY: fcntl with F_GETFD/F_SETFD takes a descriptor number and an int, no pointers;
        // on a number that is not open (the directory's own, closed after listing) it fails
        // with EBADF and changes nothing.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}
