//! The check of restricted APIs (parsed at start by [`crate::config::restrictions`]): a request
//! to a restricted category must carry the header with its value, or gets 403.

use http::HeaderMap;

pub use crate::config::restrictions::{Category, Restriction};

/// The header a request lacks to reach `category`, if it is restricted and the request does
/// not carry the right value. Values are compared in constant time.
pub fn missing_header<'r>(
    restrictions: &'r [Restriction],
    category: Category,
    headers: &HeaderMap,
) -> Option<&'r str> {
    let restriction = restrictions.iter().find(|r| r.category == category)?;
    let given = headers
        .get(restriction.header.as_str())
        .map(|v| v.as_bytes())
        .unwrap_or(&[]);
    let matches = headers.contains_key(restriction.header.as_str())
        && constant_time_eq(given, restriction.value.as_bytes());
    (!matches).then_some(restriction.header.as_str())
}

/// Equality whose time depends only on the lengths, not on where the bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut difference = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        // black_box keeps the optimiser from turning the loop into an early exit.
        difference = std::hint::black_box(
            difference | (a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0)),
        );
    }
    difference == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::restrictions::parse_restrictions;

    #[test]
    fn checks_header_and_value() {
        let restrictions = parse_restrictions(["inference:x-key=abc"]).unwrap();
        let mut headers = HeaderMap::new();
        assert_eq!(
            missing_header(&restrictions, Category::Inference, &headers),
            Some("x-key")
        );
        assert_eq!(
            missing_header(&restrictions, Category::Health, &headers),
            None
        );
        headers.insert("x-key", "abd".parse().unwrap());
        assert!(missing_header(&restrictions, Category::Inference, &headers).is_some());
        headers.insert("x-key", "abcd".parse().unwrap());
        assert!(missing_header(&restrictions, Category::Inference, &headers).is_some());
        headers.insert("x-key", "abc".parse().unwrap());
        assert_eq!(
            missing_header(&restrictions, Category::Inference, &headers),
            None
        );
        let empty = parse_restrictions(["inference:x-key="]).unwrap();
        assert!(missing_header(&empty, Category::Inference, &HeaderMap::new()).is_some());
    }

    #[test]
    fn constant_time_equality() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"ab\0", b"ab"));
    }
}
