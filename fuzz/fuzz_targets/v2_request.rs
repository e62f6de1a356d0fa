//! KServe v2 inference requests: all JSON, and with binary tensors after a JSON header whose
//! length comes from the first two bytes (all dtypes, shapes, `binary_data_size` offsets).
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use trident::protocol::v2_request::decode_infer_request;

mod check;

fuzz_target!(|data: &[u8]| {
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
