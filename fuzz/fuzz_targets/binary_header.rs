//! The SageMaker binary content type (`json-header-size=N`) and the request it splits: the first
//! byte says how much of the rest is the Content-Type header, the remainder is the body.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use trident::protocol::binary_header::json_header_size;
use trident::protocol::v2_request::decode_infer_request;

mod check;

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let (content_type, body) = rest.split_at(usize::from(split).min(rest.len()));
    if let Ok(Some(size)) = json_header_size(Some(content_type), body.len()) {
        assert!(
            size <= body.len(),
            "header size {size} beyond a {}-byte body",
            body.len()
        );
        let body = Bytes::copy_from_slice(body);
        if let Ok((request, _)) = decode_infer_request("m", &body, Some(size)) {
            check::request_is_consistent(&request);
        }
    }
});
