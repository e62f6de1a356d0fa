//! What the server refuses and how: unknown routes and methods, bodies over the limit or in too
//! many chunks, hostile shapes, bodies RapidJSON refuses, error bodies that name no server path,
//! restricted APIs; and that no client can grow the metrics by inventing model names.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    unknown_routes_are_404_and_wrong_methods_405,
    bodies_over_the_limit_are_413,
    bodies_in_too_many_chunks_are_400,
    hostile_shapes_are_400_and_the_model_keeps_serving,
    error_bodies_hide_server_paths,
    restricted_apis_need_their_header,
    bodies_rapidjson_refuses_get_tritons_words,
    invented_model_names_add_no_metrics_series,
];

fn unknown_routes_are_404_and_wrong_methods_405(f: &Fixture) -> Result<(), Failed> {
    for path in [
        "/",
        "/pingx",
        "/invocations/x",
        "/models/a/b/c",
        "/v2/models/native_add_sub/infer",
    ] {
        let response = get(f.at("sme"), path);
        ensure!(response.status == 404, "{path}: {}", response.status);
        ensure!(!response.error().is_empty(), "{path}");
    }
    let cases = [
        ("POST", "/ping", "GET"),
        ("GET", "/invocations", "POST"),
        ("PUT", "/models", "GET, POST"),
        ("POST", "/models/x", "GET, DELETE"),
        ("GET", "/models/x/invoke", "POST"),
        ("DELETE", "/execution-parameters", "GET"),
    ];
    for (method, path, allow) in cases {
        let response = request(f.at("sme"), method, path, &[], b"");
        ensure!(
            response.status == 405,
            "{method} {path}: {}",
            response.status
        );
        ensure!(
            response.header("allow") == Some(allow),
            "{method} {path}: {:?}",
            response.headers
        );
    }
    Ok(())
}

fn bodies_over_the_limit_are_413(f: &Fixture) -> Result<(), Failed> {
    let big = vec![b' '; 2048];
    let response = post(f.at("small"), "/invocations", &big);
    ensure!(
        response.status == 413,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(response.error().contains("1024"), "{}", response.text());
    // Chunked, without Content-Length: refused while reading.
    let mut chunked = format!(
        "POST /invocations HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        big.len()
    )
    .into_bytes();
    chunked.extend_from_slice(&big);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    let response = raw(f.at("small"), &chunked);
    ensure!(
        response.status == 413,
        "chunked: {} {}",
        response.status,
        response.text()
    );
    ensure_sums(
        &post_json(
            f.at("small"),
            "/invocations",
            &add_sub_json(&[1; 16], &[2; 16]),
        ),
        &[1; 16],
        &[2; 16],
    )
}

/// `body` sent chunked, `chunk` bytes per chunk.
fn chunked_request(body: &[u8], chunk: usize) -> Vec<u8> {
    let mut bytes = b"POST /invocations HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
        Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        .to_vec();
    for piece in body.chunks(chunk) {
        bytes.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        bytes.extend_from_slice(piece);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"0\r\n\r\n");
    bytes
}

/// More than 65,536 non-empty chunks is 400 with Triton's message, whatever the body; as many
/// as the bound allows are read as usual.
fn bodies_in_too_many_chunks_are_400(f: &Fixture) -> Result<(), Failed> {
    let request = add_sub_json(&[1; 16], &[2; 16]).to_string();
    // The same JSON, padded with whitespace to 65,537 bytes.
    let padded = |len: usize| format!("{request}{}", " ".repeat(len - request.len()));
    let response = raw(f.at("sme"), &chunked_request(padded(65_537).as_bytes(), 1));
    ensure!(
        response.status == 400,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error()
            == "Chunked request body exceeds maximum of 65536 non-empty chunks. Send fewer or \
                larger HTTP chunks.",
        "{}",
        response.text()
    );
    let at_the_bound = raw(f.at("sme"), &chunked_request(padded(65_536).as_bytes(), 1));
    ensure_sums(&at_the_bound, &[1; 16], &[2; 16])?;
    // One chunk, and a body with a length in many TCP writes, are not chunk-counted.
    ensure_sums(
        &raw(
            f.at("sme"),
            &chunked_request(padded(200_000).as_bytes(), 200_000),
        ),
        &[1; 16],
        &[2; 16],
    )
}

/// Shapes that hold no data but describe enormous tensors (the python backend's stub died of
/// `[0, 2^63-1]`), and negative dimensions: 400 naming the input and the shape, from v2 JSON
/// and the binary extension alike, and the model serves the next request.
fn hostile_shapes_are_400_and_the_model_keeps_serving(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("identity");
    let good = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1.5, -2.0]}]});
    let shapes = [
        json!([0, i64::MAX]),
        json!([i64::MAX, 0]),
        json!([0, 1_i64 << 41]),
        json!([0, 1 << 30, 1 << 30]),
        json!([1 << 21, 1 << 20]),
        json!([-1, 2]),
        json!([0, -5]),
    ];
    for shape in &shapes {
        let hostile =
            json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape, "data": []}]});
        let header = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": shape,
            "parameters": {"binary_data_size": 0}}]})
        .to_string();
        let binary = format!(
            "application/vnd.sagemaker-triton.binary+json;json-header-size={}",
            header.len()
        );
        let sent = [
            ("json", post_json(at, "/invocations", &hostile)),
            (
                "binary",
                request(
                    at,
                    "POST",
                    "/invocations",
                    &[("Content-Type", binary.as_str())],
                    header.as_bytes(),
                ),
            ),
        ];
        for (how, response) in sent {
            let wanted = format!(
                "input 'INPUT0' has an invalid shape {:?}",
                shape
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_i64().unwrap())
                    .collect::<Vec<_>>()
            );
            ensure!(
                response.status == 400 && response.error().contains(&wanted),
                "{shape} as {how}: {} {}",
                response.status,
                response.text()
            );
            let next = post_json(at, "/invocations", &good);
            ensure!(
                next.status == 200 && next.json()["outputs"][0]["data"] == json!([1.5, -2.0]),
                "after {shape} as {how}: {} {}",
                next.status,
                next.text()
            );
            ensure!(
                get(at, "/ping").status == 200,
                "ping after {shape} as {how}"
            );
        }
    }
    // Zero-element tensors within the bound still reach the model.
    let empty = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [0, 1 << 20], "data": []}]});
    let response = post_json(at, "/invocations", &empty);
    ensure!(
        response.status == 200 && response.json()["outputs"][0]["shape"] == json!([0, 1 << 20]),
        "{} {}",
        response.status,
        response.text()
    );
    Ok(())
}

fn error_bodies_hide_server_paths(f: &Fixture) -> Result<(), Failed> {
    let body =
        json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1.0]}]});
    let failed = post_json(f.at("failing"), "/invocations", &body);
    ensure!(failed.status >= 400, "exec_fail answered {}", failed.status);
    let error = failed.error();
    ensure!(
        error.contains("exec_fail: this model always fails"),
        "the model's own message is kept: {error}"
    );
    let repository = models_dir().display().to_string();
    ensure!(
        !error.contains(&repository) && !error.contains(env!("CARGO_MANIFEST_DIR")),
        "the error names a server folder: {error}"
    );
    ensure!(
        error.contains("<model repository>/exec_fail/1/model.py"),
        "the traceback keeps the file inside the repository: {error}"
    );
    let ping = get(f.at("failing"), "/ping");
    ensure!(ping.status == 200, "ping after: {}", ping.status);
    Ok(())
}

fn restricted_apis_need_their_header(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("restricted");
    let body = add_sub_json(&[1; 16], &[1; 16]).to_string();
    // (method, path, body, the header and value that open it)
    type Case<'a> = (&'a str, &'a str, &'a [u8], (&'a str, &'a str));
    // Every route of every category.
    let cases: [Case; 8] = [
        ("GET", "/ping", b"", ("x-health", "h1")),
        ("POST", "/invocations", body.as_bytes(), ("x-key", "k1")),
        ("GET", "/models", b"", ("x-admin", "let-me-in")),
        ("POST", "/models", b"{}", ("x-admin", "let-me-in")),
        ("GET", "/models/none", b"", ("x-admin", "let-me-in")),
        ("DELETE", "/models/none", b"", ("x-admin", "let-me-in")),
        ("POST", "/plugins/reload", b"", ("x-admin", "let-me-in")),
        ("POST", "/models/none/invoke", b"{}", ("x-key", "k1")),
    ];
    for (method, path, body, (header, value)) in cases {
        let refused = request(at, method, path, &[], body);
        ensure!(refused.status == 403, "{method} {path}: {}", refused.status);
        let error = refused.error();
        ensure!(
            error.contains("This API is restricted") && error.contains(header),
            "{error}"
        );
        let wrong = request(at, method, path, &[(header, "wrong-secret")], body);
        ensure!(
            wrong.status == 403,
            "{method} {path} with a wrong value: {}",
            wrong.status
        );
        ensure!(
            !wrong.text().contains("wrong-secret") && !wrong.text().contains(value),
            "the refusal echoes a header value: {}",
            wrong.text()
        );
        let allowed = request(at, method, path, &[(header, value)], body);
        ensure!(
            allowed.status != 403,
            "{method} {path} with the header: {}",
            allowed.status
        );
    }
    Ok(())
}

/// Every body Triton's RapidJSON refuses gets Triton 2.51's answer word for word (seen on its
/// frontend with these very bodies), whatever serde would have said first, and the numbers
/// RapidJSON bounds though serde takes them (`0e400`); the next request is served. `NaN` and
/// `Infinity`, which it takes, are taken (issue 43, case 6).
fn bodies_rapidjson_refuses_get_tritons_words(f: &Fixture) -> Result<(), Failed> {
    let at = |message: &str, offset: usize| {
        format!("failed to parse the request JSON buffer: {message} at {offset}")
    };
    let too_big = "Number too big to be stored in double.";
    let one = |data: &str, shape: &str| {
        format!(
            r#"{{"inputs":[{{"name":"INPUT0","datatype":"FP32","shape":{shape},"data":{data}}}]}}"#
        )
    };
    for (body, expected) in [
        ("[1,2".to_owned(), at("Missing a comma or ']' after an array element.", 4)),
        (one("[1e309]", "[1,1]"), at(too_big, 68)),
        (one("[0e400]", "[1,1]"), at(too_big, 68)),
        (one("[1]", "[1,0e400]"), at(too_big, 57)),
        (
            r#"{"parameters":{"x":0e400},"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[1]}]}"#.to_owned(),
            at(too_big, 19),
        ),
    ] {
        let response = post_body(f, body.as_bytes());
        ensure!(
            response.status == 400 && response.error() == expected,
            "{body}: {} {}",
            response.status,
            response.text()
        );
    }
    // Past the double range but within RapidJSON's bound: infinity, as Triton reads it.
    let inf = post_body(f, one("[9e308]", "[1,1]").as_bytes());
    ensure!(
        inf.status == 200 && inf.text().contains("Infinity"),
        "9e308: {} {}",
        inf.status,
        inf.text()
    );
    // Non-finite numbers, as Triton's reader takes them (RapidJSON's kParseNanAndInfFlag) and
    // Python's json.dumps writes them: in the data, with the datatype before or after it, and
    // in a field trident ignores; the answer writes them back as Triton does.
    let data = "[NaN,-NaN,Infinity,-Infinity,Inf,-Inf,1.5]";
    let after = format!(
        r#"{{"x":[NaN],"inputs":[{{"name":"INPUT0","data":{data},"shape":[1,7],"datatype":"FP32"}}]}}"#
    );
    for body in [one(data, "[1,7]"), after] {
        let response = post_body(f, body.as_bytes());
        ensure!(
            response.status == 200,
            "{body}: {} {}",
            response.status,
            response.text()
        );
        let text = response.text();
        ensure!(
            text.contains("[NaN,NaN,Infinity,-Infinity,Infinity,-Infinity,1.5]"),
            "{body}: {text}"
        );
    }
    // As Triton reads a body (issue 43, case 11): the first of a field given twice, a byte
    // order mark, `-0` as the integer 0; and a number past RapidJSON's bound in a field nobody
    // reads refuses the body.
    let twice = r#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2],"data":[-0,-0.0],"data":[7,7]}],"inputs":[]}"#;
    let marked = format!("\u{feff}{}", one("[2]", "[1,1]"));
    for (body, expected) in [(twice, "[0.0,-0.0]"), (marked.as_str(), "[2.0]")] {
        let response = post_body(f, body.as_bytes());
        ensure!(
            response.status == 200 && response.text().contains(expected),
            "{body}: {} {}",
            response.status,
            response.text()
        );
    }
    let ignored = format!(r#"{{"x":[1e400],{}"#, &one("[1]", "[1,1]")[1..]);
    let refused = post_body(f, ignored.as_bytes());
    ensure!(
        refused.status == 400 && refused.error() == at(too_big, 6),
        "{ignored}: {} {}",
        refused.status,
        refused.text()
    );
    // A word that starts as one and is not stays RapidJSON's invalid value.
    let bad = post_body(f, one("[Infinit]", "[1,1]").as_bytes());
    ensure!(
        bad.status == 400 && bad.error() == at("Invalid value.", 75),
        "Infinit: {} {}",
        bad.status,
        bad.text()
    );
    Ok(())
}

fn post_body(f: &Fixture, body: &[u8]) -> HttpResponse {
    let json = [("Content-Type", "application/json")];
    request(f.at("identity"), "POST", "/invocations", &json, body)
}

/// Sends `count` requests to `/models/<invented name>/invoke` on one kept-alive connection to
/// `addr`; each must be answered 404.
fn invent_names(addr: SocketAddr, count: usize, name_bytes: usize) -> Result<(), Failed> {
    use std::io::{BufRead, BufReader, Read, Write};
    let socket = std::net::TcpStream::connect(addr)?;
    socket.set_nodelay(true)?;
    let mut reader = BufReader::new(socket.try_clone()?);
    let mut writer = socket;
    for n in 0..count {
        let name = format!("{n:0>width$}", width = name_bytes);
        // One write per request: small writes would wait on delayed acknowledgements.
        let request = format!(
            "POST /models/{name}/invoke HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}"
        );
        writer.write_all(request.as_bytes())?;
        let mut status = String::new();
        reader.read_line(&mut status)?;
        ensure!(status.starts_with("HTTP/1.1 404"), "request {n}: {status}");
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            if line == "\r\n" {
                break;
            }
            if let Some((key, value)) = line.split_once(':')
                && key.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse()?;
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body)?;
    }
    Ok(())
}

/// Ten thousand requests naming invented models (404 even on a single-model endpoint) add no
/// series: `/metrics` stays under 20 KB, and a model that exists keeps its own label.
fn invented_model_names_add_no_metrics_series(f: &Fixture) -> Result<(), Failed> {
    let addr = f.at("identity");
    let good = br#"{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,1],"data":[1]}]}"#;
    ensure!(post_body(f, good).status == 200, "the default model");
    invent_names(addr, 10_000, 200)?;
    let metrics = get(addr, "/metrics").text();
    ensure!(
        metrics.len() < 20 * 1024,
        "/metrics holds {} bytes after 10,000 invented names",
        metrics.len()
    );
    ensure!(
        metrics.contains(r#"model="native_identity_fp32""#),
        "the default model lost its label"
    );
    ensure!(
        !metrics.contains("00000000000000000000"),
        "an invented name is a label"
    );
    Ok(())
}
