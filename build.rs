//! Generates the Triton server C API bindings with bindgen.
//!
//! The declarations come from `src/engine/triton/tritonserver_api.h`, the project's own file for
//! the part of the API trident uses, or from the official `tritonserver.h` when
//! `TRITON_INCLUDE_DIR` names a Triton include folder (NVIDIA's container has
//! `/opt/tritonserver/include`). Both go through the same allow-list, and the output loads
//! `libtritonserver.so` at run time (bindgen's dynamic loading over `libloading`), so trident
//! builds on machines without Triton.

use std::env;
use std::path::PathBuf;

/// Every Triton function trident calls. The same list applies to both headers, and the loader
/// requires all of them to be present in the library it opens.
const FUNCTIONS: &[&str] = &[
    "TRITONSERVER_ApiVersion",
    "TRITONSERVER_DataTypeString",
    "TRITONSERVER_StringToDataType",
    "TRITONSERVER_DataTypeByteSize",
    "TRITONSERVER_ErrorDelete",
    "TRITONSERVER_ErrorCode",
    "TRITONSERVER_ErrorMessage",
    "TRITONSERVER_ParameterNew",
    "TRITONSERVER_ParameterDelete",
    "TRITONSERVER_MessageDelete",
    "TRITONSERVER_MessageSerializeToJson",
    "TRITONSERVER_ResponseAllocatorNew",
    "TRITONSERVER_ServerOptionsNew",
    "TRITONSERVER_ServerOptionsDelete",
    "TRITONSERVER_ServerOptionsSetServerId",
    "TRITONSERVER_ServerOptionsSetModelRepositoryPath",
    "TRITONSERVER_ServerOptionsSetModelControlMode",
    "TRITONSERVER_ServerOptionsSetStartupModel",
    "TRITONSERVER_ServerOptionsSetStrictModelConfig",
    "TRITONSERVER_ServerOptionsSetStrictReadiness",
    "TRITONSERVER_ServerOptionsSetExitTimeout",
    "TRITONSERVER_ServerOptionsSetExitOnError",
    "TRITONSERVER_ServerOptionsSetBufferManagerThreadCount",
    "TRITONSERVER_ServerOptionsSetModelLoadThreadCount",
    "TRITONSERVER_ServerOptionsSetModelLoadRetryCount",
    "TRITONSERVER_ServerOptionsSetModelNamespacing",
    "TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit",
    "TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize",
    "TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability",
    "TRITONSERVER_ServerOptionsSetLogInfo",
    "TRITONSERVER_ServerOptionsSetLogWarn",
    "TRITONSERVER_ServerOptionsSetLogError",
    "TRITONSERVER_ServerOptionsSetLogVerbose",
    "TRITONSERVER_ServerOptionsSetMetrics",
    "TRITONSERVER_ServerOptionsSetGpuMetrics",
    "TRITONSERVER_ServerOptionsSetCpuMetrics",
    "TRITONSERVER_ServerOptionsSetBackendDirectory",
    "TRITONSERVER_ServerOptionsSetRepoAgentDirectory",
    "TRITONSERVER_ServerOptionsSetBackendConfig",
    "TRITONSERVER_ServerNew",
    "TRITONSERVER_ServerDelete",
    "TRITONSERVER_ServerStop",
    "TRITONSERVER_ServerIsLive",
    "TRITONSERVER_ServerIsReady",
    "TRITONSERVER_ServerMetadata",
    "TRITONSERVER_ServerModelIsReady",
    "TRITONSERVER_ServerModelMetadata",
    "TRITONSERVER_ServerModelConfig",
    "TRITONSERVER_ServerModelTransactionProperties",
    "TRITONSERVER_ServerModelIndex",
    "TRITONSERVER_ServerRegisterModelRepository",
    "TRITONSERVER_ServerUnregisterModelRepository",
    "TRITONSERVER_ServerLoadModel",
    "TRITONSERVER_ServerLoadModelWithParameters",
    "TRITONSERVER_ServerUnloadModel",
    "TRITONSERVER_ServerUnloadModelAndDependents",
    "TRITONSERVER_ServerInferAsync",
    "TRITONSERVER_InferenceRequestNew",
    "TRITONSERVER_InferenceRequestDelete",
    "TRITONSERVER_InferenceRequestSetId",
    "TRITONSERVER_InferenceRequestSetTimeoutMicroseconds",
    "TRITONSERVER_InferenceRequestSetPriorityUInt64",
    "TRITONSERVER_InferenceRequestSetCorrelationId",
    "TRITONSERVER_InferenceRequestSetCorrelationIdString",
    "TRITONSERVER_InferenceRequestSetFlags",
    "TRITONSERVER_InferenceRequestAddInput",
    "TRITONSERVER_InferenceRequestAppendInputData",
    "TRITONSERVER_InferenceRequestAddRequestedOutput",
    "TRITONSERVER_InferenceRequestSetReleaseCallback",
    "TRITONSERVER_InferenceRequestSetResponseCallback",
    "TRITONSERVER_InferenceRequestSetStringParameter",
    "TRITONSERVER_InferenceRequestSetIntParameter",
    "TRITONSERVER_InferenceRequestSetBoolParameter",
    "TRITONSERVER_InferenceRequestSetDoubleParameter",
    "TRITONSERVER_InferenceRequestCancel",
    "TRITONSERVER_InferenceResponseDelete",
    "TRITONSERVER_InferenceResponseError",
    "TRITONSERVER_InferenceResponseModel",
    "TRITONSERVER_InferenceResponseId",
    "TRITONSERVER_InferenceResponseParameterCount",
    "TRITONSERVER_InferenceResponseParameter",
    "TRITONSERVER_InferenceResponseOutputCount",
    "TRITONSERVER_InferenceResponseOutput",
    "TRITONSERVER_InferenceResponseOutputClassificationLabel",
];

fn main() {
    println!("cargo:rerun-if-env-changed=TRITON_INCLUDE_DIR");
    let header = match env::var_os("TRITON_INCLUDE_DIR") {
        Some(dir) => {
            let header = PathBuf::from(dir).join("triton/core/tritonserver.h");
            assert!(
                header.is_file(),
                "TRITON_INCLUDE_DIR is set but {} does not exist",
                header.display()
            );
            header
        }
        None => PathBuf::from("src/engine/triton/tritonserver_api.h"),
    };
    println!("cargo:rerun-if-changed={}", header.display());
    println!(
        "cargo:rustc-env=TRITON_BINDINGS_HEADER={}",
        header.display()
    );

    // The official header only parses as C++ (a few declarations omit `struct`); ours is valid
    // in both. Parse both as C++ so the two paths see the same language.
    let mut builder = bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_args(["-x", "c++", "-std=c++11"])
        .allowlist_type("TRITONSERVER_.*")
        .allowlist_var("TRITONSERVER_API_VERSION_.*")
        .prepend_enum_name(false)
        .dynamic_library_name("TritonServerApi")
        .dynamic_link_require_all(true)
        .layout_tests(false)
        .generate_comments(false);
    for function in FUNCTIONS {
        builder = builder.allowlist_function(function);
    }
    let bindings = builder
        .generate()
        .unwrap_or_else(|e| panic!("bindgen failed on {}: {e}", header.display()));
    let out =
        PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("tritonserver.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
