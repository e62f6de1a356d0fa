//! Restricted APIs, in Triton's form `--http-restricted-api=<category>[,<category>...]:<header>=<value>`:
//! a request to a restricted category must carry that header with that value, or gets 403.

use http::HeaderMap;

/// The route groups a restriction can cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// `/models` load, list, get and unload.
    ModelRepository,
    /// `/invocations` and `/models/{name}/invoke`.
    Inference,
    /// `/ping`.
    Health,
}

impl Category {
    fn parse(name: &str) -> Option<Category> {
        match name.trim() {
            "model-repository" => Some(Category::ModelRepository),
            "inference" => Some(Category::Inference),
            "health" => Some(Category::Health),
            _ => None,
        }
    }
}

/// One restriction: requests in `category` need `header: value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restriction {
    pub category: Category,
    /// Lower-cased header name.
    pub header: String,
    pub value: String,
}

/// Parses every `--http-restricted-api` value; a category restricted twice is refused.
pub fn parse_restrictions<'a>(
    specs: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<Restriction>, String> {
    let mut restrictions: Vec<Restriction> = Vec::new();
    for spec in specs.into_iter().map(str::trim).filter(|s| !s.is_empty()) {
        let malformed = || {
            format!(
                "ERROR: malformed restricted API '{spec}': expected \
                 <category>[,<category>...]:<header>=<value> with categories model-repository, \
                 inference, health"
            )
        };
        let (categories, rule) = spec.split_once(':').ok_or_else(malformed)?;
        let (header, value) = rule.split_once('=').ok_or_else(malformed)?;
        let header = header.trim().to_ascii_lowercase();
        if header.is_empty() || http::HeaderName::from_bytes(header.as_bytes()).is_err() {
            return Err(malformed());
        }
        for name in categories.split(',') {
            let category = Category::parse(name).ok_or_else(malformed)?;
            if restrictions.iter().any(|r| r.category == category) {
                return Err(format!(
                    "ERROR: restricted API category '{}' is given more than once",
                    name.trim()
                ));
            }
            restrictions.push(Restriction {
                category,
                header: header.clone(),
                value: value.to_owned(),
            });
        }
    }
    Ok(restrictions)
}

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

    #[test]
    fn parses_triton_form() {
        let parsed =
            parse_restrictions(["model-repository,inference:X-Key=s3cret", "health:h=v=w"])
                .unwrap();
        assert_eq!(parsed.len(), 3);
        assert_eq!(parsed[0].header, "x-key");
        assert_eq!(parsed[1].category, Category::Inference);
        assert_eq!(parsed[2].value, "v=w");
    }

    #[test]
    fn refuses_malformed() {
        for spec in [
            "inference",
            "inference:novalue",
            "bogus:h=v",
            ":h=v",
            "inference:=v",
            "inference:b d=v",
        ] {
            assert!(parse_restrictions([spec]).is_err(), "{spec}");
        }
        assert!(parse_restrictions(["inference:a=1", "inference:b=2"]).is_err());
    }

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
