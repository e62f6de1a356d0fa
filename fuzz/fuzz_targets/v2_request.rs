//! KServe v2 inference requests: all JSON, and with binary tensors after a JSON header whose
//! length comes from the first two bytes (all dtypes, shapes, `binary_data_size` offsets). What
//! the one-pass reader takes, serde's reading takes too, with the same fields (but for what
//! only Triton's reader and the one-pass reader take: non-finite numbers, a field twice). Decoding a body
//! allocates at most a small multiple of its length at any time (the resource budget: a
//! reservation per input as large as the rest of the body once made 100,000 one-element inputs
//! cost 168 GB of address space).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use peak_alloc::PeakAlloc;
use trident::protocol::float_array;
use trident::protocol::v2_envelope::{self, TensorData};
use trident::protocol::v2_request::decode_infer_request;

mod check;

#[global_allocator]
static ALLOCATED: PeakAlloc = PeakAlloc;

/// The most decoding a body of `len` bytes may hold allocated at once: the request's structures
/// for its smallest inputs (about 10 bytes each per byte of JSON) and FP64 data from one-digit
/// numbers (4 bytes per 2 of text) with its buffer's doubling, and a fixed allowance.
fn budget(len: usize) -> usize {
    32 * len + 256 * 1024
}

/// Runs `decode` over a body of `len` bytes and checks its peak allocation against [`budget`].
fn within_budget(len: usize, decode: impl FnOnce()) {
    ALLOCATED.reset_peak_usage();
    let before = ALLOCATED.current_usage();
    decode();
    let peak = ALLOCATED.peak_usage().saturating_sub(before);
    assert!(
        peak <= budget(len),
        "decoding {len} bytes held {peak} bytes at once (budget {})",
        budget(len)
    );
}

/// The one-pass reader gives serde's fields, its decoded data the float decoder's reading of
/// serde's text, or declines.
fn readers_agree(json: &[u8]) {
    let Some(fast) = v2_envelope::one_pass(json) else {
        return;
    };
    // serde reads JSON strictly: non-finite numbers and a field given twice (Triton's reader
    // takes both; the first of a field counts) are the one-pass reader's alone.
    if json.windows(3).any(|w| w == b"NaN" || w == b"Inf") {
        return;
    }
    let slow = match v2_envelope::with_serde(json) {
        Ok(slow) => slow,
        Err(error) if error.to_string().contains("duplicate field") => return,
        Err(error) => panic!("serde refused what the one-pass reader takes: {error}"),
    };
    assert_eq!(fast.inputs.len(), slow.inputs.len());
    for (fast, slow) in fast.inputs.iter().zip(&slow.inputs) {
        match (&fast.data, &slow.data) {
            (Some(TensorData::Decoded(bytes, count)), Some(TensorData::Text(raw))) => {
                let dtype = fast
                    .datatype
                    .parse()
                    .expect("decoded data has a float type");
                let decoded = float_array::decode(raw, dtype).expect("the float decoder takes it");
                assert_eq!((&decoded.0, decoded.1), (bytes, *count));
            }
            _ => assert_eq!(fast, slow),
        }
    }
    assert_eq!(
        (fast.id, fast.parameters, fast.outputs),
        (slow.id, slow.parameters, slow.outputs)
    );
}

fuzz_target!(|data: &[u8]| {
    readers_agree(data);
    let whole = Bytes::copy_from_slice(data);
    within_budget(data.len(), || {
        if let Ok((request, _)) = decode_infer_request("m", &whole, None) {
            check::request_is_consistent(&request);
        }
    });
    if let [a, b, rest @ ..] = data {
        let json_len = usize::from(u16::from_le_bytes([*a, *b])).min(rest.len());
        let body = Bytes::copy_from_slice(rest);
        within_budget(rest.len(), || {
            if let Ok((request, _)) = decode_infer_request("m", &body, Some(json_len)) {
                check::request_is_consistent(&request);
            }
        });
    }
});
