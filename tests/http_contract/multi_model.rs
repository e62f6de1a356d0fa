//! The multi-model endpoint routes under `/models`: load, list (paged), get, invoke, unload; bad
//! URLs and bodies, the target-model header, ensembles, out of memory, concurrency, and `/ping`
//! after a failed load.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    mme_load_list_get_invoke_unload,
    mme_list_pages,
    mme_refuses_bad_urls_and_bodies,
    mme_target_model_header_is_remembered,
    mme_ensemble_is_detected,
    mme_out_of_memory_is_507_and_failures_400,
    mme_concurrent_loads_invokes_unloads,
    mme_load_finishes_when_the_client_leaves,
    unloaded_models_leave_no_metrics_series,
    ping_ready_fails_but_live_passes_after_a_failed_load,
];

/// Puts test model `model` at `<root>/<hash>/model` (config.pbtxt at the url root).
fn place(f: &Fixture, hash: &str, model: &str) -> String {
    let url = f.models_root.path().join(hash).join("model");
    std::fs::create_dir_all(url.parent().unwrap()).unwrap();
    copy_model(model, url.parent().unwrap(), "model");
    f.served(&url)
}

/// Names loaded, invoked and unloaded leave no series on `/metrics` (issue 43, case 8: 1,000
/// names grew it from 12.7 KB to 3.18 MB): after 30 cycles of distinct names it has no series
/// it did not have before but a few of fixed sets (a status, an outcome); a failed load leaves
/// none either.
fn unloaded_models_leave_no_metrics_series(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let url = place(f, "cycled", "native_add_sub");
    get(at, "/metrics"); // its own series exist from here on
    let before = get(at, "/metrics").text();
    for n in 0..30 {
        let name = format!("cycled_{n}");
        let loaded = load(at, &name, &url, None);
        ensure!(loaded.status == 200, "load {name}: {}", loaded.text());
        invoke_sums(at, &name)?;
        let unloaded = request(at, "DELETE", &format!("/models/{name}"), &[], b"");
        ensure!(unloaded.status == 200, "unload {name}: {}", unloaded.text());
    }
    let failed = load(at, "cycled_bad", "/nowhere", None);
    ensure!(failed.status >= 400, "{}", failed.text());
    let after = get(at, "/metrics").text();
    ensure!(
        !after.contains("cycled"),
        "series of unloaded models remain"
    );
    // New series may only be of a fixed set (a status, an outcome), never per model.
    let series = |text: &str| -> std::collections::HashSet<String> {
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.rsplit_once(' ').map(|(series, _)| series.to_owned()))
            .collect()
    };
    let (before, after) = (series(&before), series(&after));
    let added: Vec<&String> = after.difference(&before).collect();
    ensure!(
        added
            .iter()
            .all(|s| !s.contains("model=") || s.contains("model=\"\"")),
        "series added by loads and unloads: {added:?}"
    );
    Ok(())
}

fn load(at: SocketAddr, name: &str, url: &str, target: Option<&str>) -> HttpResponse {
    let body = json!({"model_name": name, "url": url}).to_string();
    let mut headers = vec![("Content-Type", "application/json")];
    if let Some(target) = target {
        headers.push(("X-Amzn-SageMaker-Target-Model", target));
    }
    request(at, "POST", "/models", &headers, body.as_bytes())
}

fn invoke_sums(at: SocketAddr, name: &str) -> Result<(), Failed> {
    let a: Vec<i32> = (0..16).collect();
    let b = vec![10; 16];
    ensure_sums(
        &post_json(at, &format!("/models/{name}/invoke"), &add_sub_json(&a, &b)),
        &a,
        &b,
    )
}

fn listed(at: SocketAddr) -> Vec<(String, String)> {
    let json = get(at, "/models").json();
    json["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["modelName"].as_str().unwrap().into(),
                m["modelUrl"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn mme_load_list_get_invoke_unload(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let root = f.models_root.path();
    let url = place(f, "adder1", "native_add_sub");
    let response = load(at, "adder1", &url, None);
    ensure!(
        response.status == 200 && response.body.is_empty(),
        "load: {} {}",
        response.status,
        response.text()
    );
    let repository = f.served(&root.join("adder1"));
    ensure!(
        listed(at) == [("adder1".to_string(), repository.clone())],
        "{:?}",
        listed(at)
    );
    let got = get(at, "/models/adder1");
    ensure!(got.status == 200, "get {}", got.status);
    ensure!(
        got.json() == json!({"modelName": "adder1", "modelUrl": repository}),
        "{}",
        got.text()
    );
    invoke_sums(at, "adder1")?;

    let again = load(at, "adder1", &url, None);
    ensure!(
        again.status == 409,
        "second load: {} {}",
        again.status,
        again.text()
    );

    let started = Instant::now();
    let unloaded = request(at, "DELETE", "/models/adder1", &[], b"");
    ensure!(
        unloaded.status == 200 && unloaded.body.is_empty(),
        "unload: {} {}",
        unloaded.status,
        unloaded.text()
    );
    ensure!(
        started.elapsed() < Duration::from_secs(20),
        "unload took {:?}",
        started.elapsed()
    );
    ensure!(listed(at).is_empty(), "{:?}", listed(at));
    for (method, path) in [
        ("GET", "/models/adder1"),
        ("DELETE", "/models/adder1"),
        ("POST", "/models/adder1/invoke"),
    ] {
        let response = request(at, method, path, &[], b"{}");
        ensure!(
            response.status == 404,
            "{method} {path}: {}",
            response.status
        );
    }
    // Nothing leaked: the same url loads again under the same name.
    ensure!(
        load(at, "adder1", &url, None).status == 200,
        "reload failed"
    );
    invoke_sums(at, "adder1")?;
    ensure!(
        request(at, "DELETE", "/models/adder1", &[], b"").status == 200,
        "second unload"
    );
    Ok(())
}

fn mme_list_pages(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme_paged");
    let names = ["page_a", "page_b", "page_c"];
    for name in names {
        let response = load(at, name, &place(f, name, "native_identity_fp32"), None);
        ensure!(response.status == 200, "load {name}: {}", response.text());
    }
    let first = get(at, "/models").json();
    ensure!(
        first["models"].as_array().map(Vec::len) == Some(2),
        "{first}"
    );
    let token = first["nextPageToken"]
        .as_str()
        .ok_or("no nextPageToken")?
        .to_owned();
    let second = get(at, &format!("/models?next_page_token={token}")).json();
    ensure!(
        second["models"].as_array().map(Vec::len) == Some(1),
        "{second}"
    );
    ensure!(second.get("nextPageToken").is_none(), "{second}");
    let mut seen: Vec<String> = first["models"]
        .as_array()
        .unwrap()
        .iter()
        .chain(second["models"].as_array().unwrap())
        .map(|m| m["modelName"].as_str().unwrap().to_owned())
        .collect();
    seen.sort();
    ensure!(seen == names, "{seen:?}");
    for name in names {
        ensure!(
            request(at, "DELETE", &format!("/models/{name}"), &[], b"").status == 200,
            "unload {name}"
        );
    }
    Ok(())
}

fn mme_refuses_bad_urls_and_bodies(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let root = f.models_root.path();
    let good = place(f, "urlcheck", "native_add_sub");
    let outside = tempfile::tempdir()?;
    copy_model("native_add_sub", outside.path(), "model");
    std::fs::create_dir_all(root.join("escape"))?;
    std::os::unix::fs::symlink(outside.path().join("model"), root.join("escape/model"))?;
    let r = f.served(root);
    for url in [
        format!("{r}/urlcheck/model/../../../etc/model"),
        format!("{r}/../x/model"),
        "/dev/shm/abc/model".to_string(),
        "/proc/self/cwd/model".to_string(),
        format!("{}/model", outside.path().display()),
        format!("{r}/urlcheck"),
        format!("{r}/url-check/model"),
        format!("{r}/escape/model"),
        format!("{r}/missing/model"),
        "relative/model".to_string(),
    ] {
        let response = load(at, "urlcheck", &url, None);
        ensure!(
            response.status == 400,
            "{url}: {} {}",
            response.status,
            response.text()
        );
        ensure!(!response.error().is_empty(), "{url}");
    }
    for body in [
        r#"{"model_name":"urlcheck","url""#.to_string(),
        r#"{"model_name":5,"url":"x"}"#.to_string(),
        format!(r#"{{"model_name":"urlcheck","url":["{good}"]}}"#),
        r#"{"url":"x"}"#.to_string(),
        "[]".to_string(),
        String::new(),
        // Names the routes cannot address (issue 43, case 12): they loaded, and could never
        // be invoked or unloaded.
        format!(r#"{{"model_name":"a/b","url":"{good}"}}"#),
        format!(r#"{{"model_name":"a b","url":"{good}"}}"#),
        format!(r#"{{"model_name":"..","url":"{good}"}}"#),
    ] {
        let response = request(at, "POST", "/models", &[], body.as_bytes());
        ensure!(
            response.status == 400,
            "{body}: {} {}",
            response.status,
            response.text()
        );
        ensure!(get(at, "/ping").status == 200, "not serving after {body}");
    }
    // NVIDIA's SageMaker QA: 65,536 one-byte chunks of `A` (the most chunks a body may have)
    // are read, and refused in Triton's words.
    let mut chunked = b"POST /models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
        Transfer-Encoding: chunked\r\n\r\n"
        .to_vec();
    for _ in 0..65_536 {
        chunked.extend_from_slice(b"1\r\nA\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let response = common::http_client::raw(at, &chunked);
    ensure!(
        response.status == 400
            && response.error() == "failed to parse the request JSON buffer: Invalid value. at 0",
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(listed(at).is_empty(), "{:?}", listed(at));
    // The good url still loads after all that.
    ensure!(
        load(at, "urlcheck", &good, None).status == 200,
        "good url refused"
    );
    ensure!(
        request(at, "DELETE", "/models/urlcheck", &[], b"").status == 200,
        "unload"
    );
    Ok(())
}

fn mme_target_model_header_is_remembered(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let url = place(f, "targeted", "native_add_sub");
    let response = load(at, "targeted", &url, Some("my-model.tar.gz"));
    ensure!(response.status == 200, "{}", response.text());
    ensure!(
        f.engine()
            .model_state("my-model.tar.gz")?
            .is_some_and(|s| s == ModelState::Ready),
        "not loaded under the target name"
    );
    ensure!(
        listed(at).iter().any(|(n, _)| n == "targeted"),
        "{:?}",
        listed(at)
    );
    invoke_sums(at, "targeted")?;
    // Naming another target model than the one loaded under the name is 400 (Triton's newest
    // frontend), for invoke and unload alike; the right one, or none, is served.
    let body = add_sub_json(&[1; 16], &[2; 16]).to_string();
    for (target, status) in [("other.tar.gz", 400), ("my-model.tar.gz", 200)] {
        let headers = [
            ("Content-Type", "application/json"),
            ("X-Amzn-SageMaker-Target-Model", target),
        ];
        let invoked = request(
            at,
            "POST",
            "/models/targeted/invoke",
            &headers,
            body.as_bytes(),
        );
        ensure!(
            invoked.status == status,
            "invoke as {target}: {} {}",
            invoked.status,
            invoked.text()
        );
    }
    let wrong = [("X-Amzn-SageMaker-Target-Model", "other.tar.gz")];
    let refused = request(at, "DELETE", "/models/targeted", &wrong, b"");
    ensure!(
        refused.status == 400 && refused.error().contains("other.tar.gz"),
        "unload as another target: {} {}",
        refused.status,
        refused.text()
    );
    invoke_sums(at, "targeted")?;
    let started = Instant::now();
    let unloaded = request(at, "DELETE", "/models/targeted", &[], b"");
    ensure!(unloaded.status == 200, "{}", unloaded.text());
    ensure!(
        started.elapsed() < Duration::from_secs(20),
        "unload waited {:?}",
        started.elapsed()
    );
    ensure!(
        f.engine().model_state("my-model.tar.gz")? != Some(ModelState::Ready),
        "still loaded"
    );
    Ok(())
}

fn mme_ensemble_is_detected(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let url = f.models_root.path().join("ens1/model");
    copy_model("native_add_sub", &url, "adder_step");
    std::fs::create_dir_all(url.join("pipeline/1"))?;
    std::fs::write(
        url.join("pipeline/config.pbtxt"),
        r#"platform: "ensemble"
max_batch_size: 0
input [ { name: "A", data_type: TYPE_INT32, dims: [ -1, 16 ] }, { name: "B", data_type: TYPE_INT32, dims: [ -1, 16 ] } ]
output [ { name: "SUM", data_type: TYPE_INT32, dims: [ -1, 16 ] } ]
ensemble_scheduling { step [ { model_name: "adder_step", model_version: -1,
  input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" }
  output_map { key: "OUTPUT0" value: "A_PLUS_B" } },
  { model_name: "adder_step", model_version: -1,
  input_map { key: "INPUT0" value: "A_PLUS_B" } input_map { key: "INPUT1" value: "B" }
  output_map { key: "OUTPUT0" value: "SUM" } } ] }
"#,
    )?;
    let response = load(at, "ens1", &f.served(&url), None);
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        listed(at) == [("ens1".to_string(), f.served(&url))],
        "{:?}",
        listed(at)
    );
    let body = json!({"inputs": [
        {"name": "A", "datatype": "INT32", "shape": [1, 16], "data": vec![2; 16]},
        {"name": "B", "datatype": "INT32", "shape": [1, 16], "data": vec![3; 16]}]});
    let response = post_json(at, "/models/ens1/invoke", &body);
    ensure!(
        response.status == 200,
        "{} {}",
        response.status,
        response.text()
    );
    ensure!(
        response.json()["outputs"][0]["data"] == json!(vec![8; 16]),
        "{}",
        response.text()
    );
    // The steps' parameters arrive merged; each key is answered once.
    let repeated = common::duplicate_keys(&response.text());
    ensure!(
        repeated.is_empty(),
        "keys {repeated:?} repeated in {}",
        response.text()
    );
    ensure!(
        request(at, "DELETE", "/models/ens1", &[], b"").status == 200,
        "unload"
    );
    Ok(())
}

fn mme_out_of_memory_is_507_and_failures_400(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let oom = load(at, "oom1", &place(f, "oom1", "oom_init"), None);
    ensure!(oom.status == 507, "oom: {} {}", oom.status, oom.text());
    ensure!(oom.error().contains("CUDA out of memory"), "{}", oom.text());
    let failing = load(at, "flaky", &place(f, "flaky_bad", "init_fail"), None);
    ensure!(
        failing.status == 400,
        "failing: {} {}",
        failing.status,
        failing.text()
    );
    ensure!(
        failing.error().contains("refuses to initialise"),
        "{}",
        failing.text()
    );
    ensure!(listed(at).is_empty(), "{:?}", listed(at));
    // The same name loads a correct model afterwards: the failed load left nothing behind.
    let good = load(at, "flaky", &place(f, "flaky_good", "native_add_sub"), None);
    ensure!(good.status == 200, "good: {} {}", good.status, good.text());
    invoke_sums(at, "flaky")?;
    // Invoke errors on the MME path are 400.
    let bad = post(at, "/models/flaky/invoke", b"{oops");
    ensure!(bad.status == 400, "bad invoke: {}", bad.status);
    ensure!(
        request(at, "DELETE", "/models/flaky", &[], b"").status == 200,
        "unload"
    );
    Ok(())
}

fn mme_concurrent_loads_invokes_unloads(f: &Fixture) -> Result<(), Failed> {
    let at = f.at("mme");
    let names: Vec<String> = (0..4).map(|i| format!("conc{i}")).collect();
    let urls: Vec<String> = names
        .iter()
        .map(|n| place(f, n, "native_add_sub"))
        .collect();
    // Load all at once.
    let outcomes: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = names
            .iter()
            .zip(&urls)
            .map(|(n, u)| s.spawn(move || load(at, n, u, None).status))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    ensure!(outcomes.iter().all(|&s| s == 200), "loads: {outcomes:?}");
    // Invoke two while unloading the other two.
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (i, name) in names.iter().enumerate() {
            handles.push(s.spawn(move || {
                if i % 2 == 0 {
                    (0..5).try_for_each(|_| {
                        invoke_sums(at, name).map_err(|e| format!("{name}: {e:?}"))
                    })
                } else {
                    let status = request(at, "DELETE", &format!("/models/{name}"), &[], b"").status;
                    if status == 200 {
                        Ok(())
                    } else {
                        Err(format!("unload {name}: {status}"))
                    }
                }
            }));
        }
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for result in results {
        result.map_err(Failed::from)?;
    }
    let mut left: Vec<String> = listed(at).into_iter().map(|(n, _)| n).collect();
    left.sort();
    ensure!(left == ["conc0", "conc2"], "{left:?}");
    for name in ["conc0", "conc2"] {
        ensure!(
            request(at, "DELETE", &format!("/models/{name}"), &[], b"").status == 200,
            "unload {name}"
        );
    }
    ensure!(listed(at).is_empty(), "{:?}", listed(at));
    Ok(())
}

/// A client that sends a load and hangs up at once: the load still completes, so the name is
/// not left reserved and the model can be listed, used and unloaded.
fn mme_load_finishes_when_the_client_leaves(f: &Fixture) -> Result<(), Failed> {
    use std::io::Write;
    let at = f.at("mme");
    let url = place(f, "leaver", "native_add_sub");
    let body = json!({"model_name": "leaver", "url": url}).to_string();
    let mut stream = std::net::TcpStream::connect(at)?;
    write!(
        stream,
        "POST /models HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    std::thread::sleep(Duration::from_millis(50));
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !listed(at).iter().any(|(n, _)| n == "leaver") {
        ensure!(
            Instant::now() < deadline,
            "the abandoned load never completed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    invoke_sums(at, "leaver")?;
    ensure!(
        request(at, "DELETE", "/models/leaver", &[], b"").status == 200,
        "unload"
    );
    Ok(())
}

fn ping_ready_fails_but_live_passes_after_a_failed_load(f: &Fixture) -> Result<(), Failed> {
    let error = f.runtime.block_on(f.engine().load_model("init_fail")).err();
    ensure!(error.is_some(), "init_fail loaded");
    let ready = get(f.at("sme"), "/ping");
    ensure!(ready.status == 400, "ready-mode ping: {}", ready.status);
    ensure!(ready.error().contains("not ready"), "{}", ready.text());
    let live = get(f.at("live"), "/ping");
    ensure!(live.status == 200, "live-mode ping: {}", live.status);
    Ok(())
}
