//! A small blocking HTTP/1.1 client for tests: one request per connection, raw bytes allowed, so
//! malformed requests can be sent as they are.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A parsed response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `error` message of a JSON error body, checking its content type.
    pub fn error(&self) -> String {
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "error content type"
        );
        self.json()["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error message in {}", self.text()))
            .to_owned()
    }
}

/// Sends `method path` with `headers` and `body`; `Content-Length` and `Connection: close` are
/// added.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    raw(addr, &request_bytes(addr, method, path, headers, body))
}

fn request_bytes(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

pub fn get(addr: SocketAddr, path: &str) -> HttpResponse {
    request(addr, "GET", path, &[], b"")
}

pub fn post(addr: SocketAddr, path: &str, body: &[u8]) -> HttpResponse {
    request(addr, "POST", path, &[], body)
}

/// `POST /invocations` of `body` as `content_type`.
pub fn invoke(addr: SocketAddr, content_type: &str, body: &[u8]) -> HttpResponse {
    request(
        addr,
        "POST",
        "/invocations",
        &[("Content-Type", content_type)],
        body,
    )
}

pub fn post_json(addr: SocketAddr, path: &str, json: &serde_json::Value) -> HttpResponse {
    request(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        json.to_string().as_bytes(),
    )
}

/// Sends raw bytes and reads the response until the server closes the connection.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> HttpResponse {
    try_raw(addr, bytes).unwrap_or_else(|failure| panic!("{failure}"))
}

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoResponse {
    /// The connection was refused: nothing listened.
    Refused(String),
    /// Connected, but the connection ended (or failed) before a whole response came.
    Lost(String),
}

impl std::fmt::Display for NoResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoResponse::Refused(why) => write!(f, "connect: {why}"),
            NoResponse::Lost(why) => write!(f, "no response: {why}"),
        }
    }
}

/// [`raw`], telling a refused connection and a lost one apart instead of panicking.
pub fn try_raw(addr: SocketAddr, bytes: &[u8]) -> Result<HttpResponse, NoResponse> {
    let mut stream = TcpStream::connect(addr).map_err(|e| NoResponse::Refused(e.to_string()))?;
    let lost = |e: std::io::Error| NoResponse::Lost(e.to_string());
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(lost)?;
    stream.write_all(bytes).map_err(lost)?;
    let mut received = Vec::new();
    stream.read_to_end(&mut received).map_err(lost)?;
    if !received.windows(4).any(|w| w == b"\r\n\r\n") {
        return Err(NoResponse::Lost(format!(
            "{} bytes, no complete response head",
            received.len()
        )));
    }
    Ok(parse(&received))
}

/// [`request`], without panicking when no response comes.
pub fn try_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<HttpResponse, NoResponse> {
    try_raw(addr, &request_bytes(addr, method, path, headers, body))
}

/// Parses a whole response as received (chunked bodies are joined).
pub fn parse(received: &[u8]) -> HttpResponse {
    let end = received
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "no complete response head: {}",
                String::from_utf8_lossy(received)
            )
        });
    let head = String::from_utf8_lossy(&received[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = received[end + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        body = dechunk(&body);
    }
    HttpResponse {
        status,
        headers,
        body,
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size =
            usize::from_str_radix(std::str::from_utf8(&data[..line_end]).unwrap().trim(), 16)
                .expect("chunk size");
        data = &data[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}
