//! The python backend's stub processes of this process, read from `/proc`: which are alive,
//! and which model instance each serves.

use std::collections::HashSet;

/// A live stub process and the model instance it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubProcess {
    pub pid: u32,
    /// Triton's instance name, `<model>_<group>_<index>`.
    pub instance: String,
    pub model: String,
}

/// The model an instance belongs to: Triton names instances `<model>_<group>_<index>`.
pub fn model_of_instance(instance: &str) -> Option<&str> {
    let (rest, index) = instance.rsplit_once('_')?;
    let (model, group) = rest.rsplit_once('_')?;
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (numeric(index) && numeric(group) && !model.is_empty()).then_some(model)
}

/// The processes this process started (every thread's children).
pub fn children() -> HashSet<u32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
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

/// The stub process `pid` is, if it is one: the stub's command line names the instance it
/// serves (`<stub> <model.py> <shm region> … <instance> <kind>`).
pub fn stub_process(pid: u32) -> Option<StubProcess> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut args = cmdline.split(|&b| b == 0).filter(|a| !a.is_empty());
    let program = args.next()?;
    if !String::from_utf8_lossy(program).contains("triton_python_backend_stub") {
        return None;
    }
    let instance = args
        .filter_map(|arg| std::str::from_utf8(arg).ok())
        .rfind(|arg| model_of_instance(arg).is_some())?
        .to_owned();
    let model = model_of_instance(&instance)?.to_owned();
    Some(StubProcess {
        pid,
        instance,
        model,
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
        assert_eq!(model_of_instance("affine"), None);
        assert_eq!(model_of_instance("affine_0"), None);
        assert_eq!(model_of_instance("a_b_c"), None);
        assert_eq!(model_of_instance("_0_0"), None);
        assert_eq!(model_of_instance("DEFAULT"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_made_up_one_is_not() {
        assert!(!is_dead(std::process::id()));
        assert!(is_dead(u32::MAX));
        assert_eq!(stub_process(std::process::id()), None);
    }
}
