//! KServe v2 inference requests: all JSON, and with binary tensors after a JSON header whose
//! length comes from the first two bytes (all dtypes, shapes, `binary_data_size` offsets). What
//! the one-pass reader takes, serde's reading takes too, with the same fields.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use trident::protocol::float_array;
use trident::protocol::v2_envelope::{self, TensorData};
use trident::protocol::v2_request::decode_infer_request;

mod check;

/// The one-pass reader gives serde's fields, its decoded data the float decoder's reading of
/// serde's text, or declines.
fn readers_agree(json: &[u8]) {
    let Some(fast) = v2_envelope::one_pass(json) else {
        return;
    };
    let slow = v2_envelope::with_serde(json).expect("serde takes what the one-pass reader takes");
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
    if let Ok((request, _)) = decode_infer_request("m", &whole, None) {
        check::request_is_consistent(&request);
    }
    if let [a, b, rest @ ..] = data {
        let json_len = usize::from(u16::from_le_bytes([*a, *b])).min(rest.len());
        let body = Bytes::copy_from_slice(rest);
        if let Ok((request, _)) = decode_infer_request("m", &body, Some(json_len)) {
            check::request_is_consistent(&request);
        }
    }
});
