//! The python backend's stub processes, read from `/proc`: which are alive, which model
//! instance each serves, and the shared memory region each was given.

use std::collections::HashSet;
use std::path::Path;

/// A live stub process and the model instance it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubProcess {
    /// The stub's process id.
    pub pid: u32,
    /// Triton's instance name: `<model>_<index>` for a model that configures no instance
    /// group (Triton's default), `<model>_<group>_<index>` for one that does.
    pub instance: String,
    /// The name of the shared memory region the backend made for it (`/dev/shm/<name>`).
    pub shm_region: Option<String>,
}

impl StubProcess {
    /// Whether the stub serves an instance of `model`.
    pub fn serves(&self, model: &str) -> bool {
        is_instance_of(&self.instance, model)
    }
}

/// Whether Triton's instance name `instance` is one of `model`'s: `<model>_<index>` or
/// `<model>_<group>_<index>`.
pub fn is_instance_of(instance: &str, model: &str) -> bool {
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let Some(rest) = instance
        .strip_prefix(model)
        .and_then(|rest| rest.strip_prefix('_'))
    else {
        return false;
    };
    match rest.split_once('_') {
        None => numeric(rest),
        Some((group, index)) => numeric(group) && numeric(index),
    }
}

/// How the python backend names a stub's shared memory region by default; a UUID follows. A
/// supervised serving process extends it with a prefix of its own
/// (`shm-region-prefix-name`), so its supervisor can remove every region it made.
pub const SHM_REGION_PREFIX: &str = "triton_python_backend_shm_region_";

/// Where POSIX shared memory regions live as files on Linux.
const SHM_FOLDER: &str = "/dev/shm";

/// The shared memory region a stub's argument names, if it is one: the backend's prefix and
/// then only letters, digits, `-` and `_`, so it cannot name a file outside [`SHM_FOLDER`].
fn shm_region(argument: &str) -> Option<&str> {
    let uuid = argument.strip_prefix(SHM_REGION_PREFIX)?;
    let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    (!uuid.is_empty() && uuid.bytes().all(plain)).then_some(argument)
}

/// Removes the name of a dead stub's shared memory region. The python backend removes it when
/// it tears the instance down, which it never finishes for an instance whose process died, so
/// each region of a dead process would outlive trident in `/dev/shm` (16 MiB by default). The
/// pages go once no process maps them: trident's own mapping lasts as long as the core keeps
/// the dead instance. Removing a name does not touch a mapping; the backend never opens a
/// region again by name. Already gone is not an error.
pub fn remove_shm_region(name: &str) -> std::io::Result<bool> {
    let Some(name) = shm_region(name) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a python backend region: {name:?}"),
        ));
    };
    match std::fs::remove_file(Path::new(SHM_FOLDER).join(name)) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

/// Removes the name of every region in `/dev/shm` whose name starts with `prefix` (itself a
/// region name's start: [`SHM_REGION_PREFIX`] and then letters, digits, `-` and `_`); returns
/// how many. For a dead serving process's regions, however young its stubs were.
pub fn remove_regions_named(prefix: &str) -> std::io::Result<usize> {
    if shm_region(prefix).is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a python backend region prefix: {prefix:?}"),
        ));
    }
    let mut removed = 0;
    for entry in std::fs::read_dir(SHM_FOLDER)?.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|n| n.starts_with(prefix)) else {
            continue;
        };
        if remove_shm_region(name)? {
            removed += 1;
        }
    }
    Ok(removed)
}

/// The model an instance most likely belongs to, from its name alone: `<model>_<group>_<index>`
/// when both are numbers, else `<model>_<index>` (ambiguous for a model whose name ends in
/// `_<number>`: where the models are known, ask [`is_instance_of`]).
pub fn model_of_instance(instance: &str) -> Option<&str> {
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (rest, index) = instance.rsplit_once('_')?;
    if !numeric(index) || rest.is_empty() {
        return None;
    }
    match rest.rsplit_once('_') {
        Some((model, group)) if numeric(group) && !model.is_empty() => Some(model),
        _ => Some(rest),
    }
}

/// The processes this process started (every thread's children), and those orphaned to it
/// when it is a subreaper.
pub fn children() -> HashSet<u32> {
    children_in(Path::new("/proc/self/task"))
}

/// The children of process `pid` (every thread's).
pub fn children_of(pid: u32) -> HashSet<u32> {
    children_in(&Path::new("/proc").join(pid.to_string()).join("task"))
}

fn children_in(task_folder: &Path) -> HashSet<u32> {
    let Ok(tasks) = std::fs::read_dir(task_folder) else {
        return HashSet::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Whether `pid` has exited (a zombie not yet reaped) or is gone.
pub fn is_dead(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    // The state follows the command name, which is in parentheses and may contain spaces.
    stat.rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next())
        .is_none_or(|state| state == 'Z' || state == 'X')
}

/// Reaps `pid` when it is a child of this process that has exited and not been waited for (a
/// zombie): a python stub that died stays one of the serving process for good otherwise (the
/// python backend waits for a stub only when it stops it, and an instance a recovery replaced is
/// never stopped). Anything else (alive, gone, another's child) is left alone. Whether it
/// reaped one.
pub fn reap_if_zombie_child(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // After the command name: the state, then the parent's pid.
    let mut fields = stat
        .rsplit_once(") ")
        .map_or("", |(_, rest)| rest)
        .split(' ');
    let (state, parent) = (fields.next(), fields.next());
    if state != Some("Z") || parent != Some(std::process::id().to_string().as_str()) {
        return false;
    }
    let Some(child) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    matches!(
        rustix::process::waitpid(Some(child), rustix::process::WaitOptions::NOHANG),
        Ok(Some(_))
    )
}

/// The stub process `pid` is, if it is one: the stub's command line names the instance it
/// serves (`<stub> <model.py> <shm region> … <instance> <kind>`).
pub fn stub_process(pid: u32) -> Option<StubProcess> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut args = cmdline.split(|&b| b == 0).filter(|a| !a.is_empty());
    let program = args.next()?;
    if !String::from_utf8_lossy(program).contains("triton_python_backend_stub") {
        return None;
    }
    let args: Vec<&str> = args
        .filter_map(|arg| std::str::from_utf8(arg).ok())
        .collect();
    // `… <instance> <device kind>`: the instance is the argument before the last.
    let instance = (*args.iter().rev().nth(1)?).to_owned();
    model_of_instance(&instance)?;
    let shm_region = args
        .iter()
        .find_map(|arg| shm_region(arg))
        .map(str::to_owned);
    Some(StubProcess {
        pid,
        instance,
        shm_region,
    })
}

/// The live stub processes of this process.
pub fn live_stubs() -> Vec<StubProcess> {
    children()
        .into_iter()
        .filter(|&pid| !is_dead(pid))
        .filter_map(stub_process)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_name_their_model() {
        assert_eq!(model_of_instance("affine_0_0"), Some("affine"));
        assert_eq!(model_of_instance("my_model_2_11"), Some("my_model"));
        // No instance group configured (Triton's default): `<model>_<index>`.
        assert_eq!(model_of_instance("affine_0"), Some("affine"));
        assert_eq!(
            model_of_instance("stateful_stream_0"),
            Some("stateful_stream")
        );
        assert_eq!(model_of_instance("affine"), None);
        assert_eq!(model_of_instance("a_b_c"), None);
        assert_eq!(model_of_instance("_0"), None);
        assert_eq!(model_of_instance("DEFAULT"), None);
        for (instance, model) in [
            ("affine_0_0", "affine"),
            ("affine_3", "affine"),
            ("foo_1_0", "foo_1"),
            ("foo_1_0", "foo"),
            ("stateful_stream_0", "stateful_stream"),
        ] {
            assert!(is_instance_of(instance, model), "{instance} of {model}");
        }
        for (instance, model) in [
            ("affine_0_0", "affin"),
            ("affinex_0", "affine"),
            ("affine_a", "affine"),
            ("affine_0_0_0", "affine"),
            ("affine", "affine"),
        ] {
            assert!(!is_instance_of(instance, model), "{instance} of {model}");
        }
    }

    #[test]
    fn only_the_backends_region_names_are_taken() {
        let name = "triton_python_backend_shm_region_4855a2bf-e347-4d1c-9d3e-0123456789ab";
        assert_eq!(shm_region(name), Some(name));
        assert_eq!(shm_region("triton_python_backend_shm_region_"), None);
        assert_eq!(
            shm_region("triton_python_backend_shm_region_../../etc"),
            None
        );
        assert_eq!(shm_region("triton_python_backend_shm_region_a/b"), None);
        assert_eq!(shm_region("other_region_1234"), None);
        assert!(remove_shm_region("../etc/passwd").is_err());
        let missing = "triton_python_backend_shm_region_trident-test-never-made";
        assert!(matches!(remove_shm_region(missing), Ok(false)));
    }

    #[test]
    fn regions_are_removed_by_their_prefix_only() {
        let prefix = format!("{SHM_REGION_PREFIX}unit-{}-", std::process::id());
        let (mine, other) = (
            format!("{prefix}a1"),
            format!("{SHM_REGION_PREFIX}other-{}", std::process::id()),
        );
        for name in [&mine, &other] {
            std::fs::write(Path::new(SHM_FOLDER).join(name), b"x").unwrap();
        }
        assert_eq!(remove_regions_named(&prefix).unwrap(), 1);
        assert!(!Path::new(SHM_FOLDER).join(&mine).exists());
        assert!(Path::new(SHM_FOLDER).join(&other).exists());
        std::fs::remove_file(Path::new(SHM_FOLDER).join(&other)).unwrap();
        assert!(remove_regions_named("").is_err());
        assert!(remove_regions_named("../").is_err());
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        assert!(!is_dead(std::process::id()));
        assert!(is_dead(u32::MAX));
        assert_eq!(stub_process(std::process::id()), None);
    }
}
