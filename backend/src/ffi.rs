//! The generated bindings to Triton's backend API (`tritonbackend_api.h`, through bindgen in
//! `build.rs`), resolved against the core when Triton loads the backend.
#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unused_imports,
    missing_docs,
    clippy::all
)]

include!(concat!(env!("OUT_DIR"), "/tritonbackend.rs"));
