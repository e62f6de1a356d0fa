//! The default out-of-memory policy: which engine errors a SageMaker multi-model endpoint answers
//! with 507 (Insufficient Storage), so SageMaker unloads models and retries elsewhere.
//!
//! This is the list Triton's SageMaker frontend uses. It is the built-in fallback; a configured
//! OOM plugin replaces it.

/// Substrings that mark an error message as out-of-memory.
pub const OUT_OF_MEMORY_MARKERS: [&str; 17] = [
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

/// Whether an engine error message looks like the model ran out of memory.
pub fn is_out_of_memory(message: &str) -> bool {
    OUT_OF_MEMORY_MARKERS
        .iter()
        .any(|marker| message.contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_marker_is_out_of_memory_anywhere_in_the_message() {
        for marker in OUT_OF_MEMORY_MARKERS {
            assert!(is_out_of_memory(marker));
            assert!(is_out_of_memory(&format!(
                "load failed: {marker} (device 0)"
            )));
        }
    }

    #[test]
    fn near_misses_are_not() {
        for message in [
            "",
            "out of range",
            "Oom",
            "oom",
            "CUDA out-of-memory",
            "memory error",
            "No space left",
            "failed to allocate",
        ] {
            assert!(!is_out_of_memory(message), "{message}");
        }
    }
}
