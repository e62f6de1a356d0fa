//! The metrics port, chosen at start: configuration, even though it binds to find a free one.

/// The metrics port: the flag's, else the first free port of `SAGEMAKER_SAFE_PORT_RANGE`
/// (`lo-hi`) other than `main_port`; `None` when neither is given.
pub fn choose_port(
    flag: Option<u16>,
    safe_range: Option<&str>,
    main_port: u16,
) -> Result<Option<u16>, String> {
    if let Some(port) = flag {
        return Ok(Some(port));
    }
    let Some(range) = safe_range.filter(|r| !r.trim().is_empty()) else {
        return Ok(None);
    };
    let (lo, hi) = range
        .trim()
        .split_once('-')
        .and_then(|(lo, hi)| {
            Some((
                lo.trim().parse::<u16>().ok()?,
                hi.trim().parse::<u16>().ok()?,
            ))
        })
        .filter(|(lo, hi)| lo <= hi)
        .ok_or_else(|| {
            format!("ERROR: SAGEMAKER_SAFE_PORT_RANGE must be <low>-<high>, got '{range}'")
        })?;
    (lo..=hi)
        .filter(|&port| port != main_port)
        .find(|&port| std::net::TcpListener::bind(("0.0.0.0", port)).is_ok())
        .map(Some)
        .ok_or_else(|| format!("ERROR: no free port in SAGEMAKER_SAFE_PORT_RANGE {range}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_choice() {
        assert_eq!(choose_port(Some(9000), Some("1-2"), 8080), Ok(Some(9000)));
        assert_eq!(choose_port(None, None, 8080), Ok(None));
        assert!(choose_port(None, Some("abc"), 8080).is_err());
        assert!(choose_port(None, Some("10-5"), 8080).is_err());
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let chosen = choose_port(None, Some(&format!("{free}-{free}")), 8080);
        assert!(matches!(chosen, Ok(Some(p)) if p == free) || chosen.is_err());
    }
}
