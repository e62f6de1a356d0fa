//! The example adapters over the example model: CSV in, CSV or JSON out (through the Rust, the
//! Python and the JavaScript CSV request adapter); JSON Lines and `instances`; v2 bodies that bypass them; bad CSV;
//! which headers a plugin sees.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    csv_in_csv_out,
    python_csv_in_csv_out,
    javascript_csv_in_csv_out,
    python_response_writes_numbers_as_rust_does,
    csv_in_json_out,
    v2_requests_bypass_the_adapters,
    bad_csv_is_400_from_the_plugin,
    bad_csv_is_400_from_the_python_plugin,
    bad_csv_is_400_from_the_javascript_plugin,
    json_lines_and_instances,
    plugins_see_sagemaker_headers_and_only_allowed_others,
];

fn csv_in_csv_out(f: &Fixture) -> Result<(), Failed> {
    csv_round_trip(f, "csv")
}

/// The same CSV through the Python request and response adapters (componentize-py), the same
/// answers as the Rust pair.
fn python_csv_in_csv_out(f: &Fixture) -> Result<(), Failed> {
    csv_round_trip(f, "python")?;
    csv_to_json(f, "python")
}

/// `1,2,3\n4,5,6\n` through the server's CSV request adapter and the CSV response adapter.
fn csv_round_trip(f: &Fixture, server: &str) -> Result<(), Failed> {
    let response = send(
        f.at(server),
        "text/csv",
        Some("text/csv"),
        &[],
        "1,2,3\n4,5,6\n",
    );
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.header("content-type") == Some("text/csv"),
        "{:?}",
        response.headers
    );
    // affine: 2x + 1
    ensure!(
        response.text() == "3,5,7\n9,11,13\n",
        "{:?}",
        response.text()
    );
    Ok(())
}

fn csv_in_json_out(f: &Fixture) -> Result<(), Failed> {
    csv_to_json(f, "csv")
}

/// CSV through the server's CSV request adapter, answered as JSON and as JSON Lines.
fn csv_to_json(f: &Fixture, server: &str) -> Result<(), Failed> {
    let response = send(
        f.at(server),
        "text/csv",
        Some("application/json"),
        &[],
        "0.5\n-1\n",
    );
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        predictions(&response) == [[2.0], [-1.0]],
        "{}",
        response.text()
    );
    let lines = send(
        f.at(server),
        "text/csv",
        Some("application/jsonlines"),
        &[],
        "1,1\n",
    );
    ensure!(lines.text() == "[3,3]\n", "{:?}", lines.text());
    Ok(())
}

/// `{"predictions": [[...], ...]}` as numbers.
fn predictions(response: &common::http_client::HttpResponse) -> Vec<Vec<f64>> {
    let json = response.json();
    json["predictions"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|row| {
                    row.as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_f64().unwrap())
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn v2_requests_bypass_the_adapters(f: &Fixture) -> Result<(), Failed> {
    let body = json!({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 2], "data": [1, 2]}]});
    let response = send(
        f.at("csv"),
        "application/json",
        None,
        &[],
        &body.to_string(),
    );
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.json()["outputs"][0]["data"] == json!([3.0, 5.0]),
        "{}",
        response.text()
    );
    Ok(())
}

fn bad_csv_is_400_from_the_plugin(f: &Fixture) -> Result<(), Failed> {
    bad_csv_is_400(f, "csv")
}

/// The same CSV through the JavaScript request adapter (componentize-qjs), the same answers.
fn javascript_csv_in_csv_out(f: &Fixture) -> Result<(), Failed> {
    csv_round_trip(f, "js")?;
    csv_to_json(f, "js")
}

/// Numbers whose text is easy to get wrong (FP32 digits, no exponent, negative zero, a
/// tiny fraction, a large integer) written by the Python response adapter exactly as the Rust
/// one writes them, in CSV and JSON Lines.
fn python_response_writes_numbers_as_rust_does(f: &Fixture) -> Result<(), Failed> {
    let body = "0.1,1e20,-0.5,1.5e-7,16777217,-1.7e38\n0.3333333,7,1e-30,123456.79,-1,2.5\n";
    for accept in ["text/csv", "application/jsonlines", "application/json"] {
        let rust = send(f.at("csv"), "text/csv", Some(accept), &[], body);
        let python = send(f.at("python"), "text/csv", Some(accept), &[], body);
        ensure!(
            rust.status == 200 && python.status == 200,
            "{accept}: {} {} / {} {}",
            rust.status,
            rust.text(),
            python.status,
            python.text()
        );
        ensure!(
            rust.text() == python.text(),
            "{accept}: Rust {:?}, Python {:?}",
            rust.text(),
            python.text()
        );
    }
    Ok(())
}

fn bad_csv_is_400_from_the_python_plugin(f: &Fixture) -> Result<(), Failed> {
    bad_csv_is_400(f, "python")?;
    not_utf8_is_400(f, "python")
}

/// The JavaScript adapter's 400s, and numbers its parser would take that the other adapters
/// refuse (`Number()` reads hex, empty fields and `0b` literals).
fn bad_csv_is_400_from_the_javascript_plugin(f: &Fixture) -> Result<(), Failed> {
    bad_csv_is_400(f, "js")?;
    not_utf8_is_400(f, "js")?;
    for field in ["0x10", "0b1", "1_000", "1e", "."] {
        let response = send(f.at("js"), "text/csv", None, &[], &format!("1,{field}\n"));
        ensure!(
            response.status == 400 && response.error().contains("is not a valid FP32 number"),
            "{field:?}: {} {}",
            response.status,
            response.text()
        );
    }
    // An empty field between commas is not a number either.
    let response = send(f.at("js"), "text/csv", None, &[], "1,,2\n");
    ensure!(
        response.status == 400,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(get(f.at("js"), "/ping").status == 200, "not serving");
    Ok(())
}

/// A body that is not UTF-8 is a 400 that says so.
fn not_utf8_is_400(f: &Fixture, server: &str) -> Result<(), Failed> {
    let response = request(
        f.at(server),
        "POST",
        "/invocations",
        &[("Content-Type", "text/csv")],
        b"1,\xff\n",
    );
    ensure!(
        response.status == 400 && response.error().contains("not UTF-8"),
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(get(f.at(server), "/ping").status == 200, "not serving");
    Ok(())
}

/// Rows of unequal length, a field that is not a number and a body without rows, each a 400
/// worded by the plugin, and the server still serving.
fn bad_csv_is_400(f: &Fixture, server: &str) -> Result<(), Failed> {
    for (body, expected) in [
        ("1,2\n3\n", "line 2 has 1 fields"),
        ("1,x\n", "'x' is not a valid"),
        ("\n\n", "no rows"),
    ] {
        let response = send(f.at(server), "text/csv", None, &[], body);
        ensure!(
            response.status == 400,
            "{body:?}: {} {}",
            response.status,
            response.text()
        );
        ensure!(
            response.error().contains(expected),
            "{body:?}: {}",
            response.text()
        );
    }
    ensure!(get(f.at(server), "/ping").status == 200, "not serving");
    Ok(())
}

fn json_lines_and_instances(f: &Fixture) -> Result<(), Failed> {
    let lines = send(
        f.at("jsonl"),
        "application/jsonlines",
        Some("text/csv"),
        &[],
        "[1,2]\n[3,4]\n",
    );
    ensure!(lines.status == 200, "{} {}", lines.status, lines.text());
    ensure!(lines.text() == "3,5\n7,9\n", "{:?}", lines.text());
    let instances = send(
        f.at("jsonl"),
        "application/json",
        None,
        &[],
        r#"{"instances": [[0], [10]]}"#,
    );
    ensure!(
        instances.status == 200,
        "{} {}",
        instances.status,
        instances.text()
    );
    ensure!(
        predictions(&instances) == [[1.0], [21.0]],
        "{}",
        instances.text()
    );
    let bad = send(
        f.at("jsonl"),
        "application/json",
        None,
        &[],
        r#"{"rows": []}"#,
    );
    ensure!(bad.status == 400, "{} {}", bad.status, bad.text());
    Ok(())
}

fn plugins_see_sagemaker_headers_and_only_allowed_others(f: &Fixture) -> Result<(), Failed> {
    let response = send(
        f.at("hostile"),
        "text/csv",
        None,
        &[
            ("X-Amzn-SageMaker-Target-Variant", "echo"),
            ("X-Amzn-SageMaker-Custom-Attributes", "trace=on"),
            ("X-Amzn-SageMaker-Inference-Id", "id-7"),
            ("X-Tenant", "acme"),
            ("X-Secret", "hunter2"),
            ("X-Amzn-SageMaker-Model-Query-String", "lang=en&n=2"),
            ("X-Amzn-SageMaker-Model-Invocation-Path", "/v2/chat"),
        ],
        "1\n",
    );
    ensure!(
        response.status == 400,
        "{} {}",
        response.status,
        response.text()
    );
    let echo = response.error();
    for expected in [
        "route=/invocations",
        "model=affine",
        "custom=Some(\"trace=on\")",
        "variant=Some(\"echo\")",
        "id=Some(\"id-7\")",
        // SageMaker's query string and invocation path reach every plugin, unlisted.
        "headers=x-amzn-sagemaker-model-query-string=lang=en&n=2;\
         x-amzn-sagemaker-model-invocation-path=/v2/chat;x-tenant=acme ",
    ] {
        ensure!(echo.contains(expected), "{expected} missing from {echo}");
    }
    ensure!(
        !echo.contains("hunter2"),
        "the plugin saw a header it was not given: {echo}"
    );
    Ok(())
}
