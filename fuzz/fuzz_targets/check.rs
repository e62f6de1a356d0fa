//! Invariants every decoded request must hold, shared by the targets.

use trident::engine::InferRequest;
use trident::protocol::v2_request::element_count;

/// Every fixed-size input holds exactly shape × element size bytes; a BYTES input's elements
/// (4-byte length + bytes) exactly fill its buffer.
pub fn request_is_consistent(request: &InferRequest) {
    for input in &request.inputs {
        let count = element_count(&input.name, &input.shape).expect("accepted shapes are valid");
        match input.datatype.element_size() {
            Some(size) => assert_eq!(
                input.data.len(),
                count * size,
                "input {} has {} bytes for shape {:?}",
                input.name,
                input.data.len(),
                input.shape
            ),
            None => {
                let elements = trident::protocol::tensor_data::bytes_elements(&input.data)
                    .collect::<Result<Vec<_>, _>>()
                    .expect("accepted BYTES buffers are well formed");
                assert_eq!(elements.len(), count, "input {}", input.name);
            }
        }
    }
}
