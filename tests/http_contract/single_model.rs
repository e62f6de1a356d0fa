//! Single-model `/invocations` with `infer`: v2 JSON and binary bodies, exact answers, bad bodies
//! and models that cannot answer this route; `/ping` and `/execution-parameters`.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    ping_is_200_with_an_empty_body,
    infer_json_gives_exact_values,
    infer_binary_request_and_outputs,
    malformed_binary_headers_are_400_and_server_keeps_serving,
    bad_inference_bodies_are_400,
    unknown_default_model_is_404,
    decoupled_model_is_refused_on_infer,
    execution_parameters,
];

fn ping_is_200_with_an_empty_body(f: &Fixture) -> Result<(), Failed> {
    for server in ["sme", "live", "mme"] {
        let response = get(f.at(server), "/ping");
        ensure!(response.status == 200, "{server}: {}", response.status);
        ensure!(
            response.body.is_empty(),
            "{server}: body {}",
            response.text()
        );
    }
    Ok(())
}

fn infer_json_gives_exact_values(f: &Fixture) -> Result<(), Failed> {
    let a: Vec<i32> = common::pseudo_random(5, 16)
        .iter()
        .map(|&v| (v % 1000) as i32 - 500)
        .collect();
    let b: Vec<i32> = (0..16).map(|i| i * 3 - 7).collect();
    let response = post_json(f.at("sme"), "/invocations", &add_sub_json(&a, &b));
    ensure!(
        response.header("content-type") == Some("application/json"),
        "{:?}",
        response.headers
    );
    ensure_sums(&response, &a, &b)?;
    let json = response.json();
    ensure!(
        json["model_name"] == "native_add_sub" && json["model_version"] == "1",
        "{json}"
    );
    let difference = json["outputs"][1]["data"].as_array().ok_or("no OUTPUT1")?;
    ensure!(
        difference[0].as_i64() == Some(i64::from(a[0] - b[0])),
        "{json}"
    );
    Ok(())
}

/// A tritonclient-style binary request: JSON header, then raw tensors; binary output requested.
fn infer_binary_request_and_outputs(f: &Fixture) -> Result<(), Failed> {
    let values: Vec<f32> = (0..4096).map(|i| i as f32 * 0.25 - 100.0).collect();
    let tensor: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let header = json!({
        "inputs": [{"name": "INPUT0", "shape": [1, 4096], "datatype": "FP32",
                    "parameters": {"binary_data_size": tensor.len()}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": true}}]
    })
    .to_string();
    let mut body = header.clone().into_bytes();
    body.extend_from_slice(&tensor);
    let content_type = format!("{BINARY};json-header-size={}", header.len());
    let response = request(
        f.at("identity"),
        "POST",
        "/invocations",
        &[("Content-Type", &content_type)],
        &body,
    );
    ensure!(
        response.status == 200,
        "{}: {}",
        response.status,
        response.text()
    );
    let content_type = response.header("content-type").ok_or("no content type")?;
    let size: usize = content_type
        .strip_prefix(&format!("{BINARY};json-header-size="))
        .ok_or_else(|| format!("content type {content_type}"))?
        .parse()?;
    let json: Value = serde_json::from_slice(&response.body[..size])?;
    ensure!(
        json["outputs"][0]["parameters"]["binary_data_size"] == tensor.len(),
        "{json}"
    );
    ensure!(response.body[size..] == tensor[..], "binary output differs");

    // The same tensor as JSON comes back as JSON numbers equal to the float32 values.
    let response = post_json(
        f.at("identity"),
        "/invocations",
        &json!({"inputs": [{"name": "INPUT0", "shape": [1, 4096], "datatype": "FP32", "data": values}]}),
    );
    ensure!(response.status == 200, "{}", response.text());
    let data = response.json()["outputs"][0]["data"].clone();
    let back: Vec<f32> = data
        .as_array()
        .ok_or("no data")?
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    ensure!(back == values, "JSON round trip differs");
    Ok(())
}

fn malformed_binary_headers_are_400_and_server_keeps_serving(f: &Fixture) -> Result<(), Failed> {
    let body = br#"{"inputs":[]}"#;
    for content_type in [
        format!("text/plain;{BINARY};json-header-size=13"),
        format!("{BINARY};json-header-size=abc"),
        format!("{BINARY};json-header-size=-5"),
        format!("{BINARY};json-header-size=14"),
        format!("{BINARY};json-header-size=4294967296"),
        format!("{BINARY};json-header-size=99999999999999999999999999"),
    ] {
        let response = request(
            f.at("sme"),
            "POST",
            "/invocations",
            &[("Content-Type", &content_type)],
            body,
        );
        ensure!(
            response.status == 400,
            "{content_type}: {} {}",
            response.status,
            response.text()
        );
        ensure!(!response.error().is_empty(), "{content_type}: empty error");
        let ping = get(f.at("sme"), "/ping");
        ensure!(
            ping.status == 200,
            "ping after {content_type}: {}",
            ping.status
        );
    }
    Ok(())
}

fn bad_inference_bodies_are_400(f: &Fixture) -> Result<(), Failed> {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        // Triton's wording (RapidJSON's message and byte offset), as its frontend answers.
        (
            b"{\"inputs\":[".to_vec(),
            "failed to parse the request JSON buffer: Invalid value. at 11",
        ),
        (
            b"{\"inputs\":[{\"name\":".to_vec(),
            "failed to parse the request JSON buffer: Invalid value. at 19",
        ),
        (
            // RapidJSON reads `n` as the start of `null`: the error is where `null` stops.
            b"not json".to_vec(),
            "failed to parse the request JSON buffer: Invalid value. at 1",
        ),
        (
            b"{\"inputs\":[] \"id\":1}".to_vec(),
            "failed to parse the request JSON buffer: Missing a comma or '}' after an object member. at 13",
        ),
        (b"".to_vec(), "failed to parse"),
        (
            json!({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[1]}]}).to_string().into_bytes(),
            "elements",
        ),
        (
            add_sub_json(&[0; 16], &[0; 16]).to_string().replace("\"INT32\"", "\"FP32\"").into_bytes(),
            "FP32",
        ),
        (
            json!({"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,8],"data":[0,0,0,0,0,0,0,0]},
                             {"name":"INPUT1","datatype":"INT32","shape":[1,8],"data":[0,0,0,0,0,0,0,0]}]}).to_string().into_bytes(),
            "shape",
        ),
    ];
    for (body, expected) in cases {
        let response = post(f.at("sme"), "/invocations", &body);
        let shown = String::from_utf8_lossy(&body)
            .chars()
            .take(60)
            .collect::<String>();
        ensure!(
            response.status == 400,
            "{shown}: {} {}",
            response.status,
            response.text()
        );
        let error = response.error();
        ensure!(error.contains(expected), "{shown}: {error}");
    }
    ensure!(
        get(f.at("sme"), "/ping").status == 200,
        "not serving after bad bodies"
    );
    Ok(())
}

fn unknown_default_model_is_404(f: &Fixture) -> Result<(), Failed> {
    let response = post_json(
        f.at("mme"),
        "/invocations",
        &add_sub_json(&[0; 16], &[0; 16]),
    );
    ensure!(
        response.status == 404,
        "{} {}",
        response.status,
        response.text()
    );
    let error = response.error();
    ensure!(
        error.contains("unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"),
        "message: {error}"
    );
    Ok(())
}

fn decoupled_model_is_refused_on_infer(f: &Fixture) -> Result<(), Failed> {
    let body = json!({"inputs":[{"name":"N","datatype":"INT32","shape":[1],"data":[3]}]});
    let response = post_json(f.at("decoupled"), "/invocations", &body);
    ensure!(
        response.status == 501,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.error().contains("decoupled transaction policy"),
        "{}",
        response.text()
    );
    Ok(())
}

fn execution_parameters(f: &Fixture) -> Result<(), Failed> {
    let response = get(f.at("sme"), "/execution-parameters");
    ensure!(response.status == 200, "{}", response.status);
    ensure!(
        response.json()
            == json!({"MaxConcurrentTransforms":1,"BatchStrategy":"MULTI_RECORD","MaxPayloadInMB":6}),
        "{}",
        response.text()
    );
    Ok(())
}
