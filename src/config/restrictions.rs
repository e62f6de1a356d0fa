//! Restricted APIs, in Triton's form `--http-restricted-api=<category>[,<category>...]:<header>=<value>`,
//! parsed once at start: a request to a restricted category must carry that header with that
//! value (checked per request by `http::restricted`), or gets 403.

/// The route groups a restricted API can cover (Triton's `--http-restricted-api` categories);
/// each row of the router (`http::routes`) names the one that guards it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    /// `/models` load, list, get and unload, and `/plugins/reload`.
    ModelRepository,
    /// `/invocations`, `/models/{name}/invoke`, the bidirectional stream and OpenAI's chat
    /// completions.
    Inference,
    /// `/ping` and the metrics path.
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
    /// The route group restricted.
    pub category: Category,
    /// Lower-cased header name.
    pub header: String,
    /// The value the header must have, exactly as given.
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
}
