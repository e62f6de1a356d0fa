//! The default out-of-memory policy as a plugin: the substrings Triton's SageMaker frontend treats
//! as out-of-memory. Copy it and edit the list to change what your endpoint answers with 507.

wit_bindgen::generate!({ world: "oom-plugin", path: "../../wit" });

use exports::trident::plugin::lifecycle::Guest as Lifecycle;
use exports::trident::plugin::oom_classifier::Guest as OomClassifier;

/// An error message containing any of these means out-of-memory.
const MARKERS: [&str; 17] = [
    "CUDA out of memory",
    "CUDA_OUT_OF_MEMORY",
    "Out of memory",
    "Out Of Memory",
    "out of memory",
    "MemoryError",
    "OutOfMemory",
    "OOM",
    "Dst tensor is not initialized",
    "Src tensor is not initialized",
    "CNMEM_STATUS_OUT_OF_MEMORY",
    "CUDNN_STATUS_NOT_INITIALIZED",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "CUBLAS_STATUS_NOT_INITIALIZED",
    "Failed to allocate memory",
    "failed to allocate memory",
    "No space left on device",
];

struct Plugin;

impl OomClassifier for Plugin {
    fn is_out_of_memory(message: String) -> bool {
        MARKERS.iter().any(|marker| message.contains(marker))
    }
}

impl Lifecycle for Plugin {
    fn check_config() -> Result<(), String> {
        Ok(())
    }
}

export!(Plugin);
