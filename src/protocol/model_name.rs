//! Which model names the routes can address.

/// Whether `/models/{name}` and `/models/{name}/invoke` can address `name`: the routes match
/// the path's segment as it is, with no percent-decoding (as Triton's frontend), so a name must
/// be made of the characters a path segment carries unencoded (RFC 3986's unreserved
/// characters, sub-delimiters, `:` and `@`), and not be empty, `.` or `..`, which clients fold
/// away.
pub fn is_addressable(name: &str) -> bool {
    let addressable =
        |byte: u8| byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&byte);
    !name.is_empty() && name != "." && name != ".." && name.bytes().all(addressable)
}
