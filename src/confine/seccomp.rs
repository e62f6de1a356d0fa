//! The system calls a confined stub may not make, as a seccomp filter: each is answered `EPERM`.
//!
//! A deny-list over the calls that reach past the process's own box (tracing and other
//! processes' memory, mounts and namespaces, BPF and perf, keyrings, modules, the clock,
//! reboot, `open_by_handle_at`, `io_uring`, whose requests bypass this filter) and signals to
//! any process but the stub itself. Python and its native packages make too wide and changing a
//! set of calls for an allow-list to keep them working; the file system, the rest of what a
//! stub could reach, is Landlock's allow-list ([`super::stub`]). On x86-64 the x32 call numbers
//! (which a deny-list keyed by number would miss) are refused whole.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Calls refused whatever their arguments.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_pidfd_send_signal,
    libc::SYS_kcmp,
    libc::SYS_tkill,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_syslog,
    libc::SYS_vhangup,
];

/// `EPERM`, what a refused call answers.
const EPERM: u32 = libc::EPERM as u32;

/// The filter for a stub whose process id is `pid` (the launcher's, kept across its `exec`).
pub fn filter(pid: u32) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("no seccomp filter for this architecture: {e}"))?;
    let condition = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
    };
    let rule = |conditions| SeccompRule::new(conditions).map_err(|e| e.to_string());
    let pid = u64::from(pid);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|&call| (call, Vec::new())).collect();
    // kill(pid, sig): a signal to another process (or a group: 0, negative pids) is refused;
    // `kill(pid, 0)`, which only asks whether the process lives, stays: the stub asks it of the
    // serving process every second and ends when it fails.
    rules.insert(
        libc::SYS_kill,
        vec![rule(vec![
            condition(0, SeccompCmpOp::Ne, pid)?,
            condition(1, SeccompCmpOp::Ne, 0)?,
        ])?],
    );
    // The calls that name a thread group: only the stub's own.
    for call in [
        libc::SYS_tgkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
    ] {
        rules.insert(
            call,
            vec![rule(vec![condition(0, SeccompCmpOp::Ne, pid)?])?],
        );
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(EPERM),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let mut program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    if arch == TargetArch::x86_64 {
        program.splice(0..0, refuse_x32());
    }
    Ok(program)
}

/// Instructions that answer `EPERM` to every x32 call (numbers with bit 30 set), placed before
/// the filter (its jumps are relative, so they still land where they did).
fn refuse_x32() -> [seccompiler::sock_filter; 3] {
    const LOAD_NUMBER: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS, offset 0: seccomp_data.nr
    const JUMP_IF_AT_LEAST: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RETURN: u16 = 0x06; // BPF_RET | BPF_K
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    let op = |code, jt, jf, k| seccompiler::sock_filter { code, jt, jf, k };
    [
        op(LOAD_NUMBER, 0, 0, 0),
        op(JUMP_IF_AT_LEAST, 0, 1, X32_SYSCALL_BIT),
        op(RETURN, 0, 0, RET_ERRNO | EPERM),
    ]
}

/// Installs `program` on the calling thread (the launcher is single-threaded; its `exec`
/// keeps the filter, and every thread and child of the stub inherits it). Needs
/// `no_new_privs`.
pub fn install(program: &BpfProgram) -> Result<(), String> {
    seccompiler::apply_filter(program).map_err(|e| format!("seccomp: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_builds_for_this_architecture() {
        let program = filter(1234).expect("a filter");
        assert!(program.len() > REFUSED.len());
    }
}
