//! Replies a plugin writes itself: framing and trident's own headers stay trident's; oversized
//! header sets are a 500.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    reply_framing_and_trident_headers_stay_trident_s,
    oversized_reply_headers_are_a_500,
];

/// One response read off a connection that stays open.
struct Exchange {
    status: String,
    /// Lower-cased names, in the order sent.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Sends a request on a connection it keeps open and reads one response by its
/// `Content-Length`.
fn keep_alive_exchange(
    stream: &mut std::net::TcpStream,
    variant: &str,
) -> Result<Exchange, Failed> {
    use std::io::{BufRead, Read, Write};
    let request = format!(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\n\
         X-Amzn-SageMaker-Target-Variant: {variant}\r\nContent-Length: 2\r\n\r\n1\n"
    );
    stream.write_all(request.as_bytes())?;
    let mut reader = std::io::BufReader::new(stream.try_clone()?);
    let mut status = String::new();
    reader.read_line(&mut status)?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').ok_or("a malformed header line")?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .ok_or("no content-length")?
        .1
        .parse()?;
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Exchange {
        status: status.trim_end().to_owned(),
        headers,
        body,
    })
}

/// A reply claiming a length, chunking, a closed connection and a variant: the client gets the
/// 5-byte body with its true length on a connection that stays usable, the variant trident
/// chose, and the headers the plugin may set (custom attributes among them).
fn reply_framing_and_trident_headers_stay_trident_s(f: &Fixture) -> Result<(), Failed> {
    let dropped_before = counters_of(f, "frame_lie").1;
    let mut stream = std::net::TcpStream::connect(f.at("hostile"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    for _ in 0..2 {
        let Exchange {
            status,
            headers,
            body,
        } = keep_alive_exchange(&mut stream, "frame-lie")?;
        ensure!(status.contains(" 200 "), "{status}");
        ensure!(body == b"hello", "{:?}", String::from_utf8_lossy(&body));
        let values = |name: &str| -> Vec<&str> {
            headers
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .collect()
        };
        ensure!(values("content-length") == ["5"], "{headers:?}");
        for name in [
            "transfer-encoding",
            "connection",
            "keep-alive",
            "upgrade",
            "proxy-authenticate",
        ] {
            ensure!(values(name).is_empty(), "{name} passed: {headers:?}");
        }
        ensure!(values("x-trident-variant") == ["frame-lie"], "{headers:?}");
        ensure!(values("cache-control") == ["no-store"], "{headers:?}");
        ensure!(
            values("x-amzn-sagemaker-custom-attributes") == ["score=0.9, trace=abc"],
            "{headers:?}"
        );
        ensure!(values("content-type") == ["text/plain"], "{headers:?}");
    }
    // The same connection goes on serving: the second exchange above, and a v2 request.
    let dropped = counters_of(f, "frame_lie").1 - dropped_before;
    ensure!(
        dropped == 14,
        "{dropped} headers counted as dropped (7 per reply)"
    );
    still_fine(f)
}

/// Header blocks over the bound, and custom attributes over SageMaker's: a 500 naming the
/// plugin, and the server serves on.
fn oversized_reply_headers_are_a_500(f: &Fixture) -> Result<(), Failed> {
    for (mode, expected) in [
        ("many-headers", "100000 headers (at most 64)"),
        ("big-header", "bytes of headers (at most 16384)"),
        (
            "bad-attributes",
            "x-amzn-sagemaker-custom-attributes header",
        ),
    ] {
        let response = with_variant(f, mode);
        ensure!(
            response.status == 500,
            "{mode}: {} {}",
            response.status,
            response.text()
        );
        let plugin = mode.replace('-', "_");
        ensure!(
            response.error().contains(&format!("plugin '{plugin}'"))
                && response.error().contains(expected),
            "{mode}: {}",
            response.text()
        );
        still_fine(f)?;
    }
    Ok(())
}
