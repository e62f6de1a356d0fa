//! Generates the bindings to Triton's backend API with bindgen and links the backend against the
//! Triton core it will run in.
//!
//! The declarations come from `tritonbackend_api.h`, the project's own file for the part of the
//! API the backend uses. Unlike trident (which opens the core at run time), a backend is a
//! library the core itself opens, and its calls into the core resolve when it is loaded: the
//! backend records the core's library as a dependency (`DT_NEEDED`, by the core's soname), which
//! the dynamic loader matches with the core already in the process. So building the backend
//! needs the core's library: `$TRITON_HOME/lib`, `$TRITON_RUNTIME_DIR/lib`, `/opt/tritonserver/lib`
//! or the repository's `triton-runtime/lib` (scripts/install-triton), the first that has
//! `libtritonserver.so`.

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let header = manifest.join("tritonbackend_api.h");
    println!("cargo:rerun-if-changed={}", header.display());
    println!(
        "cargo:rerun-if-changed={}",
        manifest
            .join("../src/engine/triton/tritonserver_api.h")
            .display()
    );
    let bindings = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_args(["-x", "c++", "-std=c++11"])
        .allowlist_function("TRITONBACKEND_.*")
        .allowlist_function("TRITONSERVER_Error(New|Delete|Code|Message)")
        .allowlist_function("TRITONSERVER_Message(Delete|SerializeToJson|NewFromSerializedJson)")
        .allowlist_type("TRITONBACKEND_.*")
        .allowlist_type("TRITONSERVER_(DataType|MemoryType|Error_Code|RequestFlag|RequestReleaseFlag|ResponseCompleteFlag|InstanceGroupKind)")
        .allowlist_var("TRITONBACKEND_API_VERSION_.*")
        .prepend_enum_name(false)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .unwrap_or_else(|e| panic!("bindgen failed on {}: {e}", header.display()));
    let out =
        PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("tritonbackend.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));

    let lib = core_library_folder(&manifest);
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=tritonserver");
    // The unit tests are an executable linked against the core, which must find it to start: the
    // run path names the folder linked against. scripts/build-backend rewrites the installed
    // library's run path to Triton's layout (<home>/backends/trident/ beside <home>/lib/).
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
}

/// The folder holding the core library to link against.
fn core_library_folder(manifest: &Path) -> PathBuf {
    for variable in ["TRITON_HOME", "TRITON_RUNTIME_DIR"] {
        println!("cargo:rerun-if-env-changed={variable}");
    }
    let mut candidates = Vec::new();
    if let Some(home) = env::var_os("TRITON_HOME").filter(|v| !v.is_empty()) {
        candidates.push(PathBuf::from(home).join("lib"));
    }
    if let Some(runtime) = env::var_os("TRITON_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        candidates.push(PathBuf::from(runtime).join("lib"));
    }
    candidates.push(PathBuf::from("/opt/tritonserver/lib"));
    candidates.push(manifest.join("../triton-runtime/lib"));
    for folder in &candidates {
        if folder.join("libtritonserver.so").is_file() {
            println!(
                "cargo:rerun-if-changed={}",
                folder.join("libtritonserver.so").display()
            );
            return folder.clone();
        }
    }
    panic!(
        "the backend links against the Triton core, and no libtritonserver.so was found in {}; \
         run scripts/install-triton or set TRITON_HOME",
        candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
}
