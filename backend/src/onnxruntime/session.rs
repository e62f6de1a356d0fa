//! One ONNX Runtime session, built from the model's file and the configuration's options.

use std::path::{Component, Path, PathBuf};

use ort::session::Session;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};

use crate::error::{BackendError, Code};

use super::config::{GraphLevel, SessionOptions};
use super::library;

/// The model file Triton's onnxruntime backend would open: `<version folder>/<file>`, and
/// `model.onnx` inside it where that is a folder. The file name must be one plain name (a
/// `default_model_filename` cannot leave the version folder).
pub fn model_path(version_folder: &Path, file: &str) -> Result<PathBuf, BackendError> {
    let mut components = Path::new(file).components();
    let plain = matches!(
        (components.next(), components.next()),
        (Some(Component::Normal(_)), None)
    );
    if !plain {
        return Err(BackendError::new(
            Code::InvalidArg,
            format!("default_model_filename '{file}' must name a file in the version folder"),
        ));
    }
    let path = version_folder.join(file);
    let path = if path.is_dir() {
        path.join("model.onnx")
    } else {
        path
    };
    if !path.is_file() {
        return Err(BackendError::new(
            Code::Unavailable,
            format!("unable to find '{}'", path.display()),
        ));
    }
    Ok(path)
}

/// Builds a session for the model at `path`.
pub fn open(path: &Path, options: &SessionOptions) -> Result<Session, BackendError> {
    let runtime = library::open()?;
    let failed = |e: &dyn std::fmt::Display| {
        BackendError::new(
            Code::InvalidArg,
            format!(
                "ONNX Runtime {} could not load {}: {e}",
                runtime.version,
                path.display()
            ),
        )
    };
    let builder = configure(
        Session::builder(&runtime.environment).map_err(|e| failed(&e))?,
        options,
    )
    .map_err(|e| failed(&e))?;
    let mut builder = builder;
    builder.commit_from_file(path).map_err(|e| failed(&e))
}

/// Applies the configuration's options to a fresh builder.
fn configure(
    builder: SessionBuilder,
    options: &SessionOptions,
) -> Result<SessionBuilder, ort::Error> {
    let level = match options.level {
        GraphLevel::Disabled => GraphOptimizationLevel::Disable,
        GraphLevel::Basic => GraphOptimizationLevel::Level1,
        GraphLevel::Extended => GraphOptimizationLevel::Level2,
        GraphLevel::All => GraphOptimizationLevel::All,
    };
    let mut builder = builder
        .with_optimization_level(level)?
        .with_parallel_execution(options.parallel)?;
    if options.intra_op_threads > 0 {
        builder = builder.with_intra_threads(options.intra_op_threads)?;
    }
    if options.inter_op_threads > 0 {
        builder = builder.with_inter_threads(options.inter_op_threads)?;
    }
    if let Some(pattern) = options.mem_pattern {
        builder = builder.with_memory_pattern(pattern)?;
    }
    if let Some(arena) = options.mem_arena {
        builder = builder.with_execution_providers([ort::ep::CPU::default()
            .with_arena_allocator(arena)
            .build()])?;
    }
    for (key, value) in &options.entries {
        builder = builder.with_config_entry(key, value)?;
    }
    Ok(builder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_file_stays_in_the_version_folder() {
        let folder = std::env::temp_dir().join(format!("trident-ort-path-{}", std::process::id()));
        std::fs::create_dir_all(folder.join("model.onnx")).unwrap();
        std::fs::write(folder.join("model.onnx/model.onnx"), b"x").unwrap();
        std::fs::write(folder.join("net.onnx"), b"x").unwrap();
        assert_eq!(
            model_path(&folder, "model.onnx").unwrap(),
            folder.join("model.onnx/model.onnx")
        );
        assert_eq!(
            model_path(&folder, "net.onnx").unwrap(),
            folder.join("net.onnx")
        );
        for hostile in ["../net.onnx", "/etc/passwd", "a/b.onnx", "", "."] {
            let error = model_path(&folder, hostile).unwrap_err();
            assert_eq!(error.code, Code::InvalidArg, "{hostile}");
        }
        let error = model_path(&folder, "missing.onnx").unwrap_err();
        assert!(
            error.message.contains("unable to find"),
            "{}",
            error.message
        );
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
