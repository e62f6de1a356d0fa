//! Content digests: the SHA-256 every plugin, asset and signature statement is pinned by.

use sha2::{Digest, Sha256};

/// The lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
