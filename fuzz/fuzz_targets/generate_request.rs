//! Triton's generate extension: a flat JSON object mapped onto a model's inputs by name.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trident::engine::DataType;
use trident::protocol::generate::{InputSpec, decode_generate_request};

mod check;

fn spec(name: &str, datatype: DataType, shape: &[i64]) -> InputSpec {
    InputSpec {
        name: name.into(),
        datatype,
        shape: shape.to_vec(),
    }
}

fuzz_target!(|data: &[u8]| {
    let inputs = [
        spec("text_input", DataType::Bytes, &[1]),
        spec("max_tokens", DataType::Int32, &[1]),
        spec("temperature", DataType::Fp32, &[1]),
        spec("ids", DataType::Int64, &[-1]),
        spec("mask", DataType::Bool, &[1, -1]),
        spec("half", DataType::Fp16, &[-1]),
    ];
    if let Ok(request) = decode_generate_request("m", data, &inputs) {
        check::request_is_consistent(&request);
    }
});
