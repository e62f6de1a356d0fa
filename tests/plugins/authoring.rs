//! The authoring loop: `trident plugin new` projects in the three languages build as they are
//! and pass the golden cases they come with, and `trident plugin run` calls one hook of a plugin
//! without Triton, with the server's limits.

use super::*;

/// This module's checks, in the order they run.
pub(super) const CHECKS: &[Check<Fixture>] = checks![
    plugin_run_prints_tensors_replies_and_refusals,
    plugin_new_projects_build_as_they_are_and_run,
    plugin_new_image_projects_make_the_image_tensor_plugins_tensor,
    plugin_new_text_projects_make_the_tokenize_plugins_tensors,
    plugin_new_pipeline_projects_pass_their_cases_and_pass_refusals_on,
    bicubic_and_lanczos_resize_as_pillow_does,
    a_hugging_face_processor_config_makes_transformers_tensors,
    letterbox_and_grayscale_as_ultralytics_and_pillow_make_them,
];

/// `trident plugin ...` (the binary) with `args`: whether it succeeded, its stdout and stderr.
fn trident_plugin(args: &[&OsStr]) -> Result<(bool, String, String), Failed> {
    let output = common::command(env!("CARGO_BIN_EXE_trident"))
        .arg("plugin")
        .args(args)
        .output()?;
    Ok((
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

/// The first tensor `trident plugin run` printed, as JSON.
fn first_tensor(stdout: &str) -> Result<Option<serde_json::Value>, Failed> {
    Ok(stdout
        .lines()
        .find(|line| line.trim_start().starts_with('{'))
        .map(serde_json::from_str::<serde_json::Value>)
        .transpose()?)
}

/// A project from `trident plugin new NAME --lang LANGUAGE --template TEMPLATE` in `scratch`,
/// built with the tool its README names (the pinned ones `scripts/install-guest-tools`
/// installs); the component it built.
fn new_project(
    scratch: &Path,
    language: &str,
    name: &str,
    template: &str,
) -> Result<PathBuf, Failed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tools = root.join("target/guest-tools");
    let (ok, stdout, stderr) = trident_plugin(&[
        "new".as_ref(),
        name.as_ref(),
        "--lang".as_ref(),
        language.as_ref(),
        "--template".as_ref(),
        template.as_ref(),
        "--dir".as_ref(),
        scratch.as_os_str(),
    ])?;
    ensure!(ok && stdout.contains("created"), "{stdout}{stderr}");
    let project = scratch.join(name);
    let output = format!("{name}.wasm");
    let world = match template {
        "pipeline" => "pipeline-plugin",
        _ => "request-adapter-plugin",
    };
    let mut build = match language {
        "rust" => {
            let mut cargo = common::command(std::env::var("CARGO").unwrap_or("cargo".into()));
            cargo
                .args([
                    "build",
                    "--release",
                    "--target",
                    "wasm32-wasip2",
                    "--target-dir",
                ])
                .arg(root.join("target/plugins"));
            cargo
        }
        "python" => {
            let mut tool = common::command(tools.join("python/bin/componentize-py"));
            tool.args([
                "-d",
                "wit",
                "-w",
                world,
                "componentize",
                "-p",
                ".",
                "app",
                "-o",
                &output,
            ]);
            tool
        }
        _ => {
            let mut tool = common::command(tools.join("js/node_modules/.bin/componentize-qjs"));
            tool.args([
                "--wit", "wit", "--js", "app.js", "--world", world, "--sync", "--output", &output,
            ]);
            tool
        }
    };
    let status = build.current_dir(&project).status()?;
    ensure!(
        status.success(),
        "building the {language} project {name} failed"
    );
    Ok(if language == "rust" {
        root.join("target/plugins/wasm32-wasip2/release")
            .join(name.replace('-', "_") + ".wasm")
    } else {
        project.join(output)
    })
}

/// A project per language from `trident plugin new`, built with the tool its README names (the
/// pinned ones `scripts/install-guest-tools` installs), run on numbers and on a word.
fn plugin_new_projects_build_as_they_are_and_run(_: &Fixture) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    for language in ["rust", "python", "js"] {
        let wasm = new_project(
            scratch.path(),
            language,
            &format!("my-{language}"),
            "numbers",
        )?;
        let body = scratch.path().join("numbers.txt");
        std::fs::write(&body, "1, 2.5 3\n")?;
        let run = |body: &Path| {
            trident_plugin(&[
                "run".as_ref(),
                wasm.as_os_str(),
                "--hook".as_ref(),
                "request".as_ref(),
                "--body".as_ref(),
                body.as_os_str(),
            ])
        };
        let (ok, stdout, stderr) = run(&body)?;
        ensure!(
            ok && first_tensor(&stdout)?
                == Some(
                    json!({"name": "INPUT0", "datatype": "FP32", "shape": [1, 3], "data": [1.0, 2.5, 3.0]})
                ),
            "{language}: {stdout}{stderr}"
        );
        std::fs::write(&body, "1, two\n")?;
        let (ok, _, stderr) = run(&body)?;
        ensure!(
            !ok && stderr.contains("400: 'two' is not a number"),
            "{language}: {stderr}"
        );
        // The golden cases the project comes with pass, as its README says to run them.
        let project = scratch.path().join(format!("my-{language}"));
        let readme = std::fs::read_to_string(project.join("README.md"))?;
        ensure!(
            readme.contains("trident plugin test") && readme.contains("--cases cases.toml"),
            "{language}: {readme}"
        );
        let (ok, stdout, stderr) = trident_plugin(&[
            "test".as_ref(),
            wasm.as_os_str(),
            "--cases".as_ref(),
            project.join("cases.toml").as_os_str(),
            // Time to spare for Python and JavaScript on a loaded machine.
            "--time-limit-ms".as_ref(),
            "5000".as_ref(),
        ])?;
        ensure!(
            ok && stdout
                .contains("  ok    three numbers\n  ok    a word is refused\n2 passed, 0 failed"),
            "{language}: {stdout}{stderr}"
        );
    }
    Ok(())
}

/// The pipeline template in each language, built as its README says, passes the golden cases
/// it comes with (the model stood in for, given the `--model` the README names) and, run
/// without that `--model`, answers the host's refusal of its call with 403 naming the model.
fn plugin_new_pipeline_projects_pass_their_cases_and_pass_refusals_on(
    _: &Fixture,
) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let refused = scratch.path().join("refused.toml");
    std::fs::write(
        &refused,
        "[[case]]\nname = \"a model it may not call\"\nhook = \"pipeline\"\n\
         content_type = \"application/json\"\nbody = \"[1, 2]\"\n\
         expect = { status = 403, json = { error = \"model 'affine': model 'affine' may not be called: this plugin's manifest entry names no model (models = [...])\" } }\n",
    )?;
    for language in ["rust", "python", "js"] {
        let name = format!("pipe-{language}");
        let wasm = new_project(scratch.path(), language, &name, "pipeline")?;
        let project = scratch.path().join(&name);
        let readme = std::fs::read_to_string(project.join("README.md"))?;
        ensure!(
            readme.contains("--cases cases.toml --model affine"),
            "{language}: {readme}"
        );
        let test = |cases: &Path, models: &[&str]| {
            // Time to spare for Python and JavaScript on a loaded machine.
            let mut args: Vec<&OsStr> = vec![
                "test".as_ref(),
                wasm.as_os_str(),
                "--cases".as_ref(),
                cases.as_os_str(),
                "--time-limit-ms".as_ref(),
                "5000".as_ref(),
            ];
            for model in models {
                args.extend(["--model".as_ref(), OsStr::new(model)]);
            }
            trident_plugin(&args)
        };
        let (ok, stdout, stderr) = test(&project.join("cases.toml"), &["affine"])?;
        ensure!(
            ok && stdout.contains("2 passed, 0 failed"),
            "{language}: {stdout}{stderr}"
        );
        let (ok, stdout, stderr) = test(&refused, &[])?;
        ensure!(
            ok && stdout.contains("1 passed, 0 failed"),
            "{language}: {stdout}{stderr}"
        );
    }
    Ok(())
}

/// The image template in each language, built as its README says, makes the tensor the shipped
/// image-tensor plugin makes of the same image and settings, number for number (both are
/// trident's native image code), and answers a broken image with the same 400.
fn plugin_new_image_projects_make_the_image_tensor_plugins_tensor(
    _: &Fixture,
) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let image = trident_imaging::image::RgbImage::from_fn(97, 61, |x, y| {
        trident_imaging::image::Rgb([(x * 2) as u8, (y * 4) as u8, ((x + y) % 256) as u8])
    });
    let png = scratch.path().join("photo.png");
    image.save(&png)?;
    let broken = scratch.path().join("broken.png");
    let bytes = std::fs::read(&png)?;
    std::fs::write(&broken, &bytes[..bytes.len() / 2])?;
    let run = |wasm: &Path, body: &Path| {
        trident_plugin(&[
            "run".as_ref(),
            wasm.as_os_str(),
            "--hook".as_ref(),
            "request".as_ref(),
            "--body".as_ref(),
            body.as_os_str(),
            "--content-type".as_ref(),
            "image/png".as_ref(),
            "--config".as_ref(),
            "size=16".as_ref(),
            "--config".as_ref(),
            "resize_shorter=20".as_ref(),
            "--memory-limit-mb".as_ref(),
            "128".as_ref(),
            "--time-limit-ms".as_ref(),
            "10000".as_ref(),
        ])
    };
    let (ok, stdout, stderr) = run(&guest("image_tensor"), &png)?;
    ensure!(ok, "image-tensor: {stdout}{stderr}");
    let expected = first_tensor(&stdout)?.ok_or("image-tensor printed no tensor")?;
    ensure!(expected["shape"] == json!([1, 3, 16, 16]), "{expected}");
    let (ok, _, expected_refusal) = run(&guest("image_tensor"), &broken)?;
    ensure!(
        !ok && expected_refusal.contains("400: "),
        "{expected_refusal}"
    );
    for language in ["rust", "python", "js"] {
        let wasm = new_project(
            scratch.path(),
            language,
            &format!("image-{language}"),
            "image",
        )?;
        let (ok, stdout, stderr) = run(&wasm, &png)?;
        ensure!(
            ok && first_tensor(&stdout)?.as_ref() == Some(&expected),
            "{language}: {stdout}{stderr}"
        );
        let (ok, _, stderr) = run(&wasm, &broken)?;
        let refusal = |text: &str| {
            text.lines()
                .find(|l| l.contains("400: "))
                .map(str::to_owned)
        };
        ensure!(
            !ok && refusal(&stderr).is_some()
                && refusal(&stderr).map(|r| r.split("400: ").nth(1).map(str::to_owned))
                    == refusal(&expected_refusal)
                        .map(|r| r.split("400: ").nth(1).map(str::to_owned)),
            "{language}: {stderr} (expected {expected_refusal})"
        );
    }
    Ok(())
}

/// The text template in each language, built as its README says, makes the tensors the shipped
/// tokenize plugin makes of the same text, tokenizer and settings, id for id (both are trident's
/// native text code), and answers a text that is not UTF-8 with 400.
fn plugin_new_text_projects_make_the_tokenize_plugins_tensors(_: &Fixture) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let tokenizer = common::texts::train("bert", scratch.path());
    let body = scratch.path().join("text.txt");
    std::fs::write(&body, "Hello, wonderful 👋🏽 world: 終わり")?;
    let broken = scratch.path().join("broken.txt");
    std::fs::write(&broken, b"caf\xe9")?;
    let asset = format!("tokenizer={}", tokenizer.display());
    let run = |wasm: &Path, body: &Path| {
        trident_plugin(&[
            "run".as_ref(),
            wasm.as_os_str(),
            "--hook".as_ref(),
            "request".as_ref(),
            "--body".as_ref(),
            body.as_os_str(),
            "--content-type".as_ref(),
            "text/plain".as_ref(),
            "--asset".as_ref(),
            asset.as_ref(),
            "--config".as_ref(),
            "max_length=16".as_ref(),
            "--memory-limit-mb".as_ref(),
            "128".as_ref(),
            "--time-limit-ms".as_ref(),
            "10000".as_ref(),
        ])
    };
    let tensors = |stdout: &str| -> Vec<serde_json::Value> {
        stdout
            .lines()
            .filter(|line| line.trim_start().starts_with('{'))
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    };
    let (ok, stdout, stderr) = run(&guest("tokenize"), &body)?;
    ensure!(ok, "tokenize: {stdout}{stderr}");
    let expected = tensors(&stdout);
    ensure!(
        expected.len() == 3 && expected[0]["shape"] == json!([1, 16]),
        "{stdout}"
    );
    for language in ["rust", "python", "js"] {
        let wasm = new_project(
            scratch.path(),
            language,
            &format!("text-{language}"),
            "text",
        )?;
        let (ok, stdout, stderr) = run(&wasm, &body)?;
        ensure!(
            ok && tensors(&stdout) == expected,
            "{language}: {stdout}{stderr} (expected {expected:?})"
        );
        let (ok, _, stderr) = run(&wasm, &broken)?;
        ensure!(
            !ok && stderr.contains("400: the body is not UTF-8"),
            "{language}: {stderr}"
        );
    }
    Ok(())
}

/// `trident plugin run` (the binary) on the three languages' examples: the tensors a request
/// adapter makes, the reply a response adapter writes, a plugin's 400, a loop stopped at the
/// given time limit, and a response hook without outputs.
fn plugin_run_prints_tensors_replies_and_refusals(_: &Fixture) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let body = scratch.path().join("body.csv");
    std::fs::write(&body, "1,2\n3,4\n")?;
    let outputs = scratch.path().join("outputs.json");
    std::fs::write(
        &outputs,
        r#"{"outputs": [{"name": "OUTPUT0", "datatype": "FP32", "shape": [2, 2], "data": [1.5, 2, 3, 0.1]}]}"#,
    )?;
    // Runs that are not about the time limit get a generous one: a Python or JavaScript
    // guest's first instance on a loaded machine can outlast the default 100 ms, and the run
    // then fails at its load instead of showing what the check wants.
    let run = |plugin: &Path, args: &[&str]| {
        let mut all: Vec<&OsStr> = vec!["run".as_ref(), plugin.as_os_str()];
        all.extend(args.iter().map(OsStr::new));
        if !args.contains(&"--time-limit-ms") {
            all.extend([OsStr::new("--time-limit-ms"), OsStr::new("10000")]);
        }
        trident_plugin(&all)
    };
    let body_arg = body.to_str().unwrap();
    let request_args = [
        "--hook",
        "request",
        "--body",
        body_arg,
        "--content-type",
        "text/csv",
    ];
    let js = common::plugins::js_guest("plugins/js/csv_request", "request-adapter-plugin");
    let python =
        common::plugins::python_guest("plugins/python/csv_request", "request-adapter-plugin");
    for plugin in [guest("csv_request"), python.clone(), js] {
        let mut args = request_args.to_vec();
        args.extend(["--config", "datatype=INT32", "--config", "outputs=OUTPUT0"]);
        let (ok, stdout, stderr) = run(&plugin, &args)?;
        ensure!(
            ok && first_tensor(&stdout)?
                == Some(
                    json!({"name": "INPUT0", "datatype": "INT32", "shape": [2, 2], "data": [1, 2, 3, 4]})
                )
                && stdout.contains("outputs: OUTPUT0"),
            "{}: {stdout}{stderr}",
            plugin.display()
        );
    }

    std::fs::write(&body, "1,x\n")?;
    let (ok, _, stderr) = run(&python, &request_args)?;
    ensure!(
        !ok && stderr.contains("400: line 1: 'x' is not a valid FP32 number"),
        "{stderr}"
    );

    std::fs::write(&body, "loop")?;
    let hostile = common::plugins::js_guest("tests/guests/js/hostile", "request-adapter-plugin");
    let mut args = request_args.to_vec();
    args.extend(["--time-limit-ms", "1000"]);
    let (ok, _, stderr) = run(&hostile, &args)?;
    ensure!(
        !ok && stderr.contains("504: plugin 'plugin' exceeded its time limit of 1000 ms"),
        "{stderr}"
    );

    let out = common::plugins::python_guest(
        "plugins/python/csv_json_response",
        "response-adapter-plugin",
    );
    let response_args = [
        "--hook", "response", "--body", body_arg, "--accept", "text/csv",
    ];
    let mut args = response_args.to_vec();
    args.extend(["--outputs", outputs.to_str().unwrap()]);
    let (ok, stdout, stderr) = run(&out, &args)?;
    ensure!(
        ok && stdout.contains("status: 200\ncontent-type: text/csv\n\n1.5,2\n3,0.1\n"),
        "{stdout}{stderr}"
    );
    let (ok, _, stderr) = run(&out, &response_args)?;
    ensure!(!ok && stderr.contains("--outputs FILE"), "{stderr}");

    // The generate hooks of 0.2.0, with the chat plugin.
    let chat = guest("openai_chat");
    std::fs::write(
        &body,
        r#"{"model": "m", "messages": [{"role": "user", "content": "hi there"}], "stream": true}"#,
    )?;
    std::fs::write(&outputs, r#"[{"TEXT": "Echo: "}, {"TEXT": "hi"}]"#)?;
    let outputs_arg = outputs.to_str().unwrap();
    let (ok, stdout, stderr) = run(&chat, &["--hook", "generate-request", "--body", body_arg])?;
    ensure!(
        ok && stdout.contains("stream: yes")
            && stdout.contains(r#""PROMPT":"user: hi there\nassistant:""#),
        "{stdout}{stderr}"
    );
    let generate = ["--body", body_arg, "--outputs", outputs_arg];
    let (ok, stdout, stderr) = run(&chat, &[&["--hook", "stream"][..], &generate].concat())?;
    let events: Vec<&str> = stdout.lines().filter(|l| l.starts_with("data: ")).collect();
    ensure!(
        ok && events.len() == 4
            && events[1].contains(r#""delta":{"content":"hi"}"#)
            && events[3] == "data: [DONE]",
        "{stdout}{stderr}"
    );
    let (ok, stdout, stderr) = run(
        &chat,
        &[&["--hook", "generate-response"][..], &generate].concat(),
    )?;
    ensure!(
        ok && stdout.contains(r#""content":"Echo: hi""#) && stdout.contains("chat.completion"),
        "{stdout}{stderr}"
    );
    std::fs::write(&body, r#"{"messages": []}"#)?;
    let (ok, _, stderr) = run(&chat, &["--hook", "generate-request", "--body", body_arg])?;
    ensure!(
        !ok && stderr.contains("400: 'messages' must be a non-empty list"),
        "{stderr}"
    );
    Ok(())
}

/// `image_tensor.wasm`'s request hook on the image at `path` through `trident plugin run`, with
/// `extra` arguments (`--config KEY=VALUE`, `--asset NAME=PATH`): whether it succeeded, its
/// stdout and stderr.
fn run_image_tensor(
    path: &str,
    content_type: &str,
    extra: &[&str],
) -> Result<(bool, String, String), Failed> {
    let wasm = guest("image_tensor");
    let mut args: Vec<&OsStr> = [
        "run",
        wasm.to_str().unwrap(),
        "--hook",
        "request",
        "--body",
        path,
        "--content-type",
        content_type,
        "--time-limit-ms",
        "10000",
    ]
    .into_iter()
    .map(OsStr::new)
    .collect();
    args.extend(extra.iter().map(OsStr::new));
    trident_plugin(&args)
}

/// The tensor [`run_image_tensor`] printed (it must have succeeded): its shape and values.
fn printed_tensor(
    (ok, stdout, stderr): (bool, String, String),
    what: &str,
) -> Result<(serde_json::Value, Vec<f64>), Failed> {
    ensure!(ok, "{what}: {stderr}");
    let tensor = first_tensor(&stdout)?.ok_or("no tensor printed")?;
    Ok((
        tensor["shape"].clone(),
        serde_json::from_value(tensor["data"].clone())?,
    ))
}

/// The tensor `image_tensor.wasm` makes of the image at `path`, its 8-bit values as they are
/// (scale 1, mean 0, std 1), with the `config` entries given (`KEY=VALUE`): its shape and
/// values.
fn image_tensor_of(
    path: &str,
    content_type: &str,
    config: &[&str],
) -> Result<(serde_json::Value, Vec<f64>), Failed> {
    let mut args = vec![
        "--config",
        "scale=1",
        "--config",
        "mean=0,0,0",
        "--config",
        "std=1,1,1",
    ];
    for entry in config {
        args.extend(["--config", entry]);
    }
    printed_tensor(
        run_image_tensor(path, content_type, &args)?,
        &format!("{config:?} on {path}"),
    )
}

/// The value of `got` farthest from `want`'s, in units of `level(index)`: how far, and where
/// (a NaN is as far as can be); an error where the lengths differ.
fn farthest(
    got: &[f64],
    want: &[f64],
    level: impl Fn(usize) -> f64,
) -> Result<(f64, usize), Failed> {
    ensure!(
        got.len() == want.len(),
        "{} values, expected {}",
        got.len(),
        want.len()
    );
    Ok(got
        .iter()
        .zip(want)
        .enumerate()
        .map(|(i, (g, w))| {
            let apart = (g - w).abs() / level(i);
            (if apart.is_nan() { f64::INFINITY } else { apart }, i)
        })
        .fold((0.0_f64, 0), |a, b| if b.0 > a.0 { b } else { a }))
}

/// A letterbox (`resize = "letterbox"`, `resample = "opencv_bilinear"`) equal to what
/// ultralytics' `LetterBox` makes with OpenCV (within one level: OpenCV's fixed-point weights),
/// on a landscape photo enlarged, a portrait one and one shrunk by 2.3; and `channels = "L"`
/// equal to Pillow's grayscale of the same crop (within one level: Pillow converts before it
/// resizes, trident after). A letterbox's margins are 114 exactly.
fn letterbox_and_grayscale_as_ultralytics_and_pillow_make_them(_: &Fixture) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let images = common::process::python_client(
        "images.py",
        &format!("make:{}", scratch.path().display()),
        &serde_json::Value::Null,
    );
    for (name, content_type) in [
        ("cool.png", "image/png"),
        ("tall.png", "image/png"),
        ("large.png", "image/png"),
    ] {
        let path = images[name].as_str().ok_or(format!("no {name}"))?;
        let expected =
            common::process::python_client("images.py", "letterboxed:640x480", &json!([path]));
        let expected: Vec<f64> = serde_json::from_value(expected[0].clone())?;
        let (shape, got) = image_tensor_of(
            path,
            content_type,
            &[
                "size=640x480",
                "resize=letterbox",
                "resample=opencv_bilinear",
                "layout=NHWC",
            ],
        )?;
        ensure!(shape == json!([1, 480, 640, 3]), "{name}: {shape}");
        let (worst, at) = farthest(&got, &expected, |_| 1.0)?;
        let within = worst <= 1.01;
        ensure!(
            within,
            "{name} letterboxed: value {at} (row {}) is {} where ultralytics' is {}",
            at / (640 * 3),
            got[at],
            expected[at]
        );
        let gray = common::process::python_client("images.py", "gray:", &json!([path]));
        let gray: Vec<f64> = serde_json::from_value(gray[0].clone())?;
        let (shape, got) = image_tensor_of(path, content_type, &["channels=L"])?;
        ensure!(shape == json!([1, 1, 224, 224]), "{name}: {shape}");
        let (worst, at) = farthest(&got, &gray, |_| 1.0)?;
        let within = worst <= 1.01;
        ensure!(
            within,
            "{name} gray: value {at} is {} where Pillow's is {}",
            got[at],
            gray[at]
        );
    }
    Ok(())
}

/// The image plugin's `resample` (bilinear, bicubic, Lanczos) against Pillow's filters, as
/// torchvision's Resize(256) and CenterCrop(224) run them on a PIL image, on photos Pillow made
/// (a PNG, and JPEGs whose decoders agree to a level or two): every 8-bit value of the crop,
/// shown by `trident plugin run` with the normalization undone (scale 1, mean 0, std 1).
fn bicubic_and_lanczos_resize_as_pillow_does(_: &Fixture) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let images = common::process::python_client(
        "images.py",
        &format!("make:{}", scratch.path().display()),
        &serde_json::Value::Null,
    );
    // Pillow's passes round to 8 bits with fixed-point weights: one level apart at most for
    // the PNG; a JPEG's two decoders differ by a level or two before any resize.
    for (name, content_type, most) in [
        ("cool.png", "image/png", 1.01),
        ("warm.jpg", "image/jpeg", 3.0),
    ] {
        let path = images[name].as_str().ok_or("no image")?;
        for filter in ["bicubic", "lanczos", "bilinear"] {
            let expected = common::process::python_client(
                "images.py",
                &format!("resampled:{filter}"),
                &json!([path]),
            );
            let expected: Vec<f64> = serde_json::from_value(expected[0].clone())?;
            let resample = format!("resample={filter}");
            let (shape, got) = image_tensor_of(path, content_type, &[&resample, "layout=NHWC"])?;
            ensure!(shape == json!([1, 224, 224, 3]), "{name} {filter}: {shape}");
            let (worst, at) = farthest(&got, &expected, |_| 1.0)?;
            let within = worst <= most;
            ensure!(
                within,
                "{name} {filter}: value {at} is {} where Pillow's is {} ({worst} levels apart)",
                got[at],
                expected[at]
            );
        }
    }
    Ok(())
}

/// The image plugin driven by a model's `preprocessor_config.json` alone (the asset
/// `preprocessor_config`, no image keys in the config) makes the tensor `transformers`' own
/// processor makes of the same photo (`AutoImageProcessor.from_pretrained` on the folder, its
/// PIL backend), within one 8-bit level of each value: for each family read (ViT, CLIP,
/// ConvNeXt, DeiT, BEiT), as transformers saves them and as older files on the Hub hold them,
/// on a landscape, a portrait and a larger photo whose centre crops fall on half pixels. And a
/// processor trident does not read, or a manifest key the file also sets, is refused by name.
fn a_hugging_face_processor_config_makes_transformers_tensors(_: &Fixture) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let saved =
        |class: &str, kwargs: serde_json::Value| json!({ "class": class, "kwargs": kwargs });
    let imagenet = (json!([0.485, 0.456, 0.406]), json!([0.229, 0.224, 0.225]));
    let processors = json!({
        "vit": saved("ViTImageProcessor", json!({})),
        "vit_lanczos_200x160": saved("ViTImageProcessor", json!({
            "resample": 1, "size": {"height": 160, "width": 200}
        })),
        "vit_hub": {
            "do_normalize": true, "do_resize": true, "feature_extractor_type": "ViTFeatureExtractor",
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 2, "size": 224
        },
        "clip": saved("CLIPImageProcessor", json!({})),
        "clip_hub": {
            "crop_size": 224, "do_center_crop": true, "do_normalize": true, "do_resize": true,
            "feature_extractor_type": "CLIPFeatureExtractor",
            "image_mean": [0.48145466, 0.4578275, 0.40821073],
            "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3, "size": 224
        },
        "convnext_384": saved("ConvNextImageProcessor", json!({})),
        "convnext_hub": {
            "crop_pct": 0.875, "do_normalize": true, "do_resize": true,
            "feature_extractor_type": "ConvNextFeatureExtractor", "image_mean": imagenet.0,
            "image_std": imagenet.1, "resample": 3, "size": 224
        },
        "deit": saved("DeiTImageProcessor", json!({})),
        "deit_hub": {
            "crop_size": 224, "do_center_crop": true, "do_normalize": true, "do_resize": true,
            "feature_extractor_type": "DeiTFeatureExtractor", "image_mean": imagenet.0,
            "image_std": imagenet.1, "resample": 3, "size": 256
        },
        "beit": saved("BeitImageProcessor", json!({})),
        "beit_hub": {
            "crop_size": 224, "do_center_crop": false, "do_normalize": true, "do_resize": true,
            "feature_extractor_type": "BeitFeatureExtractor", "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5], "reduce_labels": false, "resample": 2, "size": 224
        },
    });
    let reference = common::process::transformers_client(
        "hf_processors.py",
        &scratch.path().display().to_string(),
        &json!({ "processors": processors }),
    );
    let run = |config: &str, image: &str, extra: &[&str]| {
        let asset = format!("preprocessor_config={config}");
        let mut args = vec!["--asset", asset.as_str()];
        args.extend(extra);
        run_image_tensor(image, "image/png", &args)
    };
    let images: Vec<String> = serde_json::from_value(reference["images"].clone())?;
    let by_name = reference["processors"].as_object().ok_or("no processors")?;
    ensure!(by_name.len() == 11, "{} processors", by_name.len());
    for (name, processor) in by_name {
        let config = processor["config"].as_str().ok_or("no config")?;
        let levels: Vec<f64> = serde_json::from_value(processor["levels"].clone())?;
        for (image, expected) in images
            .iter()
            .zip(processor["tensors"].as_array().ok_or("")?)
        {
            let (shape, got) =
                printed_tensor(run(config, image, &[])?, &format!("{name} on {image}"))?;
            ensure!(
                shape == expected["shape"],
                "{name} on {image}: shaped {shape}, transformers' {}",
                expected["shape"]
            );
            let want: Vec<f64> = serde_json::from_value(expected["data"].clone())?;
            let plane = want.len() / 3;
            // Within one level (and float rounding) of each value, in its channel's units.
            let (worst, at) = farthest(&got, &want, |i| levels[i / plane])?;
            let within = worst <= 1.01;
            ensure!(
                within,
                "{name} on {image} ({}): value {at} is {} where transformers' is {} ({worst:.2} levels)",
                processor["class"],
                got[at],
                want[at]
            );
        }
    }
    // Refusals: a manifest key the file sets, a processor trident does not read.
    let vit = by_name["vit"]["config"].as_str().ok_or("")?;
    let (ok, _, stderr) = run(vit, &images[0], &["--config", "size=256"])?;
    ensure!(
        !ok && stderr.contains("config key `size` is also set by the preprocessor_config asset"),
        "{stderr}"
    );
    let detr = scratch.path().join("detr.json");
    std::fs::write(&detr, r#"{"image_processor_type": "DetrImageProcessor"}"#)?;
    let (ok, _, stderr) = run(detr.to_str().unwrap(), &images[0], &[])?;
    ensure!(
        !ok && stderr.contains("its processor DetrImageProcessor is not one trident reads"),
        "{stderr}"
    );
    Ok(())
}
