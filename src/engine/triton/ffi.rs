//! The bindgen output for Triton's server C API, and nothing else (see `build.rs`).
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    unused_imports,
    unsafe_op_in_unsafe_fn,
    clippy::all,
    clippy::too_many_lines
)]

include!(concat!(env!("OUT_DIR"), "/tritonserver.rs"));
