//! Text in, tensors and labels out, on the real core over HTTP on 127.0.0.1: the
//! text-classification example end to end (`examples/text-classification`: the stand-in BERT
//! classifier behind the tokenize and top-k-labels plugins, as `scripts/serve-example
//! text-classification` serves it), and the tokenize plugin against Hugging Face's Python
//! `tokenizers` id for id, for a tokenizer of each model family's layout. Tokenizers are trained
//! by `scripts/train_tokenizer.py` on the corpus it writes; what a client should get back is
//! computed in Python (`tests/clients/texts.py`), not by trident's code. Then hostile texts and
//! tokenizer files, each answered with a clear 4xx or refused at load naming the asset, and the
//! next request answered.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use common::http_client::{HttpResponse, request};
use common::plugins::{guest, sign, test_public_key};
use common::process::{Running, python_client, serve_with};
use common::texts::{FAMILIES, corpus, train};
use serde_json::{Value, json};

const EXAMPLE: &str = "examples/text-classification";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The example's files in `dir` as the serve script writes them (a BERT tokenizer trained
/// here), its manifest changed by `change`, signatures required and the plugins signed with
/// the test key (with their assets); the manifest's path.
fn write_example(dir: &Path, change: impl Fn(String) -> String) -> PathBuf {
    if !dir.join("models").exists() {
        common::copy_dir(&root().join(EXAMPLE).join("models"), &dir.join("models"));
    }
    if !dir.join("tokenizer.json").exists() {
        std::fs::copy(train("bert", dir), dir.join("tokenizer.json")).unwrap();
    }
    let mut manifest =
        std::fs::read_to_string(root().join(EXAMPLE).join("plugins.toml.in")).unwrap();
    for (file, placeholder) in [
        ("tokenize.wasm", "@TOKENIZE@"),
        ("top_k_labels.wasm", "@TOP_K_LABELS@"),
        ("config.json", "@LABELS@"),
        ("tokenizer.json", "@TOKENIZER@"),
    ] {
        let source = match file {
            "tokenizer.json" => dir.join(file),
            _ => match file.strip_suffix(".wasm") {
                Some(name) => guest(name),
                None => root().join(EXAMPLE).join(file),
            },
        };
        if source != dir.join(file) {
            std::fs::copy(&source, dir.join(file)).unwrap();
        }
        let digest =
            trident::plugins::platform::loading::sha256_hex(&std::fs::read(&source).unwrap());
        manifest = manifest.replace(placeholder, &digest);
    }
    sign(dir, "tokenize.wasm", &[("tokenizer", "tokenizer.json")]);
    sign(dir, "top_k_labels.wasm", &[("labels", "config.json")]);
    let manifest = format!(
        "require_signatures = true\ntrusted_keys = [\"{}\"]\n\n{manifest}",
        test_public_key()
    );
    let path = dir.join("plugins.toml");
    std::fs::write(&path, change(manifest)).unwrap();
    path
}

/// trident serving the example from a copy in `dir`.
fn start(dir: &Path) -> (Running, SocketAddr) {
    let path = write_example(dir, |manifest| manifest);
    serve_with(
        &dir.join("models"),
        &[("SAGEMAKER_TRITON_PLUGINS", path.as_os_str())],
    )
}

fn post(addr: SocketAddr, content_type: &str, extra: &[(&str, &str)], body: &[u8]) -> HttpResponse {
    let mut headers = vec![("Content-Type", content_type)];
    headers.extend_from_slice(extra);
    request(addr, "POST", "/invocations", &headers, body)
}

/// What a Python step answers for each of `texts` with the tokenizer at `tokenizer`:
/// `[[label, score], ...]`, both labels, best first.
fn expected(tokenizer: &Path, texts: &[&str]) -> Vec<Vec<(String, f64)>> {
    let answer = python_client(
        "texts.py",
        &format!("classify:{}", tokenizer.display()),
        &json!({"texts": texts, "max_length": 128, "labels": ["NEGATIVE", "POSITIVE"], "k": 2}),
    );
    serde_json::from_value(answer).unwrap()
}

/// `answer` (one text's `[{"label", "score"}, ...]`) is `expected`: the same labels in the same
/// order, each score within a float's rounding.
fn assert_agrees(answer: &Value, expected: &[(String, f64)], what: &str) {
    let entries = answer
        .as_array()
        .unwrap_or_else(|| panic!("{what}: {answer}"));
    assert_eq!(entries.len(), expected.len(), "{what}: {answer}");
    for (entry, (label, score)) in entries.iter().zip(expected) {
        assert_eq!(
            entry["label"].as_str(),
            Some(label.as_str()),
            "{what}: {answer}"
        );
        let got = entry["score"].as_f64().unwrap();
        assert!(
            (got - score).abs() < 1e-5,
            "{what}: {got} vs {score}: {answer}"
        );
    }
}

#[test]
fn the_example_answers_labels_as_a_python_tokenizer_step_would() {
    let dir = tempfile::tempdir().unwrap();
    let (_running, addr) = start(dir.path());
    let long = corpus(60).join(" ");
    let texts = [
        "A wonderful film, I loved the acting!",
        "Terrible plot. A waste of time...",
        "終わり良ければ全て良し 👋🏽 café",
        long.as_str(),
    ];
    let expected = expected(&dir.path().join("tokenizer.json"), &texts);
    for (text, expected) in texts.iter().zip(&expected) {
        let body = json!({ "inputs": text }).to_string();
        let answer = post(addr, "application/json", &[], body.as_bytes());
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_agrees(&answer.json(), expected, text);
        // The same text as text/plain.
        let answer = post(addr, "text/plain", &[], text.as_bytes());
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_agrees(&answer.json(), expected, text);
    }
    // Each class is the best of some line of the corpus: the answer depends on the ids.
    let lines = corpus(40);
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let best: std::collections::BTreeSet<String> =
        self::expected(&dir.path().join("tokenizer.json"), &lines)
            .into_iter()
            .map(|answer| answer[0].0.clone())
            .collect();
    assert_eq!(best.len(), 2, "{best:?}");

    // A list of texts is a batch, answered per text in order.
    let body = json!({ "inputs": texts }).to_string();
    let answer = post(addr, "application/json", &[], body.as_bytes());
    assert_eq!(answer.status, 200, "{}", answer.text());
    let answers = answer.json();
    let answers = answers.as_array().expect("a list per text");
    assert_eq!(answers.len(), texts.len(), "{answers:?}");
    for ((answer, expected), text) in answers.iter().zip(&expected).zip(texts) {
        assert_agrees(answer, expected, text);
    }

    // 64 texts, the README's most, on a model that takes 8 a request: run as eight requests
    // and answered as one, each text as it is answered alone. (The core refused the 9th text.)
    let many: Vec<&str> = lines.iter().copied().cycle().take(64).collect();
    let alone = self::expected(&dir.path().join("tokenizer.json"), &many);
    for count in [9, 17, 64] {
        let body = json!({ "inputs": &many[..count] }).to_string();
        let answer = post(addr, "application/json", &[], body.as_bytes());
        assert_eq!(answer.status, 200, "{count} texts: {}", answer.text());
        let answers = answer.json();
        let answers = answers.as_array().expect("a list per text");
        assert_eq!(answers.len(), count, "{answers:?}");
        for ((answer, expected), text) in answers.iter().zip(&alone).zip(&many) {
            assert_agrees(answer, expected, text);
        }
    }
    // Past the plugin's max_texts (64): refused before any text is tokenized.
    let body = json!({ "inputs": lines.iter().cycle().take(65).collect::<Vec<_>>() }).to_string();
    let answer = post(addr, "application/json", &[], body.as_bytes());
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert!(answer.text().contains("65"), "{}", answer.text());

    // Triton's classification strings, one label, asked for per request.
    let attributes = [(
        "X-Amzn-SageMaker-Custom-Attributes",
        "format=triton, top_k=1",
    )];
    let answer = post(addr, "text/plain", &attributes, texts[0].as_bytes());
    assert_eq!(answer.status, 200, "{}", answer.text());
    let strings: Vec<String> = serde_json::from_value(answer.json()).unwrap();
    assert_eq!(strings.len(), 1, "{strings:?}");
    assert!(
        strings[0].ends_with(&format!(":{}", expected[0][0].0)),
        "{strings:?}"
    );

    // Hugging Face's `parameters` in the body, as its toolkit's clients send them: the logits
    // as they are (`function_to_apply: none`), whose softmax is the default answer; their
    // sigmoid; one label (`top_k`); and a top_k past the configured k refused by name.
    let with = |parameters: Value| {
        let body = json!({ "inputs": texts[0], "parameters": parameters }).to_string();
        post(addr, "application/json", &[], body.as_bytes())
    };
    let raw = with(json!({ "function_to_apply": "none", "top_k": 2, "truncation": true }));
    assert_eq!(raw.status, 200, "{}", raw.text());
    let raw = raw.json();
    let logit = |rank: usize| raw[rank]["score"].as_f64().unwrap();
    assert_eq!(raw[0]["label"], expected[0][0].0.as_str(), "{raw}");
    let softmax = 1.0 / (1.0 + (logit(1) - logit(0)).exp());
    assert!(
        (softmax - expected[0][0].1).abs() < 1e-4,
        "{raw}: {softmax}"
    );
    let sigmoid = with(json!({ "function_to_apply": "sigmoid", "top_k": 1 }));
    assert_eq!(sigmoid.status, 200, "{}", sigmoid.text());
    let sigmoid = sigmoid.json();
    assert_eq!(sigmoid.as_array().map(Vec::len), Some(1), "{sigmoid}");
    let want = 1.0 / (1.0 + (-logit(0)).exp());
    assert!(
        (sigmoid[0]["score"].as_f64().unwrap() - want).abs() < 1e-4,
        "{sigmoid}"
    );
    let refused = with(json!({ "top_k": 1000 }));
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert!(
        refused.text().contains("parameters.top_k = 1000"),
        "{}",
        refused.text()
    );
    // And the next request is served.
    let answer = post(addr, "text/plain", &[], texts[0].as_bytes());
    assert_agrees(&answer.json(), &expected[0], texts[0]);
}

/// The identity model of `dir/models/ids`: three INT64 inputs of any shape back as outputs.
fn identity_model(dir: &Path) -> PathBuf {
    let models = dir.join("models");
    std::fs::create_dir_all(models.join("ids/1")).unwrap();
    let tensors = |kind: &str| {
        (0..3)
            .map(|i| format!("{{ name: \"{kind}{i}\", data_type: TYPE_INT64, dims: [ -1, -1 ] }}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    std::fs::write(
        models.join("ids/config.pbtxt"),
        format!(
            "backend: \"trident\"\ninput [ {} ]\noutput [ {} ]\nparameters {{ key: \"model\" value: {{ string_value: \"identity\" }} }}\n",
            tensors("INPUT"),
            tensors("OUTPUT")
        ),
    )
    .unwrap();
    models
}

/// The tokenize plugin with `tokenizer` (a file in `dir`), padding each request's texts to its longest and
/// truncating at 256, its three tensors the identity model's inputs; the manifest's path.
fn tokenize_manifest(dir: &Path, tokenizer: &Path, pad_token: &str, extra: &str) -> PathBuf {
    std::fs::copy(guest("tokenize"), dir.join("tokenize.wasm")).unwrap();
    let digest = |path: &Path| {
        trident::plugins::platform::loading::sha256_hex(&std::fs::read(path).unwrap())
    };
    let manifest = format!(
        "[plugins.tokenize]\npath = \"tokenize.wasm\"\nsha256 = \"{}\"\n\
         content_types = [\"text/plain\", \"application/json\"]\n\
         memory_limit_mb = 128\ntime_limit_ms = 2000\n\
         config = {{ input_ids = \"INPUT0\", attention_mask = \"INPUT1\", token_type_ids = \"INPUT2\", \
         padding = \"longest\", max_length = \"256\", pad_token = \"{pad_token}\"{extra} }}\n\
         assets = {{ tokenizer = {{ path = \"{}\", sha256 = \"{}\" }} }}\n\n\
         [models.\"*\"]\nrequest = \"tokenize\"\n",
        digest(&dir.join("tokenize.wasm")),
        tokenizer.file_name().unwrap().to_string_lossy(),
        digest(tokenizer),
    );
    let path = dir.join("plugins.toml");
    std::fs::write(&path, manifest).unwrap();
    path
}

/// The rows of `name` in an identity answer.
fn rows(answer: &Value, name: &str) -> Vec<Vec<i64>> {
    let output = answer["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no {name}: {answer}"));
    let shape: Vec<usize> = serde_json::from_value(output["shape"].clone()).unwrap();
    let data: Vec<i64> = serde_json::from_value(output["data"].clone()).unwrap();
    assert_eq!(shape.len(), 2, "{output}");
    data.chunks(shape[1].max(1)).map(<[i64]>::to_vec).collect()
}

/// Every row of an identity answer's three outputs is `expected`'s (`input_ids`,
/// `attention_mask`, `token_type_ids`, as Python printed them), and there are as many;
/// `which` names a row in a failure.
fn assert_rows(answer: &Value, expected: &Value, which: &dyn Fn(usize) -> String) {
    for (output, key) in [
        ("OUTPUT0", "input_ids"),
        ("OUTPUT1", "attention_mask"),
        ("OUTPUT2", "token_type_ids"),
    ] {
        let want: Vec<Vec<i64>> = serde_json::from_value(expected[key].clone()).unwrap();
        let got = rows(answer, output);
        for (row, (got, want)) in got.iter().zip(&want).enumerate() {
            assert_eq!(got, want, "{}: {key}", which(row));
        }
        assert_eq!(got.len(), want.len(), "{}: {key}", which(0));
    }
}

/// Every id, mask and type of 3,000 lines and 30 texts past the length (CJK, kana, Hangul, Arabic, Devanagari, Thai, emoji,
/// combining marks, odd whitespace, special tokens written as text) is Hugging Face's, for a
/// tokenizer of each family's layout: BERT's WordPiece, GPT-2's byte-level BPE, Llama 3's
/// byte-level BPE with its split pattern (lookahead included), Llama 2's SentencePiece BPE
/// with byte fallback, and T5's Unigram.
#[test]
fn tokenization_matches_hugging_face_id_for_id_in_every_family() {
    let mut lines = corpus(3000);
    // And texts past the length, which are truncated.
    let long: Vec<String> = lines
        .chunks(40)
        .take(30)
        .map(|chunk| chunk.join(" "))
        .collect();
    lines.extend(long);
    let batches: Vec<&[String]> = lines.chunks(60).collect();
    for (family, pad_token) in FAMILIES {
        let dir = tempfile::tempdir().unwrap();
        let tokenizer = train(family, dir.path());
        let models = identity_model(dir.path());
        let manifest = tokenize_manifest(dir.path(), &tokenizer, pad_token, ", max_texts = \"60\"");
        let expected = python_client(
            "texts.py",
            &format!("encode:{}", tokenizer.display()),
            &json!({"batches": batches, "max_length": 256, "pad_token": pad_token}),
        );
        let (_running, addr) = serve_with(
            &models,
            &[("SAGEMAKER_TRITON_PLUGINS", manifest.as_os_str())],
        );
        for (index, batch) in batches.iter().enumerate() {
            let body = json!({ "inputs": batch }).to_string();
            let answer = post(addr, "application/json", &[], body.as_bytes());
            assert_eq!(answer.status, 200, "{family}: {}", answer.text());
            assert_rows(&answer.json(), &expected[index], &|row| {
                format!("{family}: {:?}", batch[row])
            });
        }
    }
}

/// Text pairs (`{"text", "text_pair"}`, as Hugging Face's clients send them to NLI models and
/// cross-encoders) and a request's own `truncation` and `max_length` give the rows
/// `transformers`' fast tokenizer gives (5.25, `tokenizers` 0.23.3) for a tokenizer of each
/// family, id for id: pairs of corpus lines and of long texts cut longest-first at the plugin's
/// length and at an odd shorter one, `only_first` and `only_second`, `max_length` alone (cut as
/// the plugin's `truncation` says). Then
/// what transformers refuses, and what the plugin must, are 400s naming the cause, and the
/// next request is served.
#[test]
fn text_pairs_and_request_parameters_match_transformers_id_for_id() {
    let lines = corpus(240);
    let long: Vec<String> = lines.chunks(24).map(|chunk| chunk.join(" ")).collect();
    let short = |i: usize| lines[i].clone();
    let neighbours: Vec<(String, String)> = (0..24).map(|i| (short(i), short(i + 1))).collect();
    let long_pairs: Vec<(String, String)> = (0..long.len())
        .map(|i| match i % 3 {
            0 => (long[i].clone(), short(i)),
            1 => (short(i), long[i].clone()),
            _ => (long[i].clone(), long[(i + 1) % long.len()].clone()),
        })
        .collect();
    let long_first: Vec<(String, String)> = (0..8).map(|i| (long[i].clone(), short(i))).collect();
    let long_second: Vec<(String, String)> = (0..8).map(|i| (short(i), long[i].clone())).collect();
    // (pairs, the body's parameters, transformers' truncation and max_length)
    type Case<'a> = (&'a [(String, String)], Value, Value, usize);
    let cases: Vec<Case> = vec![
        (&neighbours, json!(null), json!("longest_first"), 256),
        (&long_pairs, json!(null), json!("longest_first"), 256),
        (
            &long_pairs,
            json!({"truncation": "longest_first", "max_length": 33}),
            json!("longest_first"),
            33,
        ),
        (
            &long_pairs,
            json!({"truncation": true, "max_length": 64}),
            json!(true),
            64,
        ),
        (
            &long_first,
            json!({"truncation": "only_first", "max_length": 64}),
            json!("only_first"),
            64,
        ),
        (
            &long_second,
            json!({"truncation": "only_second", "max_length": 64}),
            json!("only_second"),
            64,
        ),
        // max_length alone: cut as the plugin's `truncation` (true) says, where transformers 5
        // leaves a row longer without `truncation`.
        (
            &neighbours,
            json!({"max_length": 20}),
            json!("longest_first"),
            20,
        ),
    ];
    for (family, pad_token) in FAMILIES {
        let dir = tempfile::tempdir().unwrap();
        let tokenizer = train(family, dir.path());
        let models = identity_model(dir.path());
        let expected = common::process::transformers_client(
            "text_pairs.py",
            &tokenizer.display().to_string(),
            &json!({
                "pad_token": pad_token,
                "cases": cases.iter().map(|(pairs, _, truncation, max_length)| json!({
                    "pairs": pairs, "truncation": truncation, "max_length": max_length,
                })).collect::<Vec<_>>(),
            }),
        );
        // The host's `text.tokenize-pairs` (the default) and the sandbox's own tokenizer, the
        // latter for two families.
        let places: &[&str] = if matches!(family, "bert" | "llama3") {
            &["host", "sandbox"]
        } else {
            &["host"]
        };
        for tokenize_in in places {
            let manifest = tokenize_manifest(
                dir.path(),
                &tokenizer,
                pad_token,
                &format!(", tokenize_in = \"{tokenize_in}\""),
            );
            let (_running, addr) = serve_with(
                &models,
                &[("SAGEMAKER_TRITON_PLUGINS", manifest.as_os_str())],
            );
            for (index, (pairs, parameters, _, _)) in cases.iter().enumerate() {
                let inputs: Vec<Value> = pairs
                    .iter()
                    .map(|(text, pair)| json!({"text": text, "text_pair": pair}))
                    .collect();
                let mut body = json!({ "inputs": inputs });
                if !parameters.is_null() {
                    body["parameters"] = parameters.clone();
                }
                let answer = post(addr, "application/json", &[], body.to_string().as_bytes());
                let case = format!("{family} in the {tokenize_in}, case {index} ({parameters})");
                assert!(
                    expected[index].get("error").is_none(),
                    "{case}: {}",
                    expected[index]
                );
                assert_eq!(answer.status, 200, "{case}: {}", answer.text());
                assert_rows(&answer.json(), &expected[index], &|row| {
                    format!("{case}: pair {row}")
                });
            }
            // What is refused: by transformers too (a second text too short to take the cut), or by
            // the plugin's bounds; each names its cause, and the next request is served.
            let pair = |a: &str, b: &str| json!({"text": a, "text_pair": b});
            for (body, says) in [
                (
                    json!({"inputs": pair(&long[0], "short"), "parameters": {"truncation": "only_second", "max_length": 16}}),
                    "only_second",
                ),
                (
                    json!({"inputs": pair(&long[0], &long[1]), "parameters": {"truncation": false}}),
                    "tokens long",
                ),
                (
                    json!({"inputs": pair("a", "b"), "parameters": {"max_length": 100000}}),
                    "at most 256",
                ),
                (
                    json!({"inputs": {"text": "a", "text_pairs": "b"}}),
                    "text_pairs",
                ),
                (
                    json!({"inputs": [{"text": "a", "text_pair": ["b"]}]}),
                    "not a string",
                ),
                (
                    json!({"inputs": "a", "parameters": {"truncation": "sideways"}}),
                    "sideways",
                ),
            ] {
                let answer = post(addr, "application/json", &[], body.to_string().as_bytes());
                assert_eq!(answer.status, 400, "{family}: {body}: {}", answer.text());
                assert!(answer.text().contains(says), "{family}: {}", answer.text());
                let next = post(
                    addr,
                    "application/json",
                    &[],
                    json!({"inputs": pair("a", "b")}).to_string().as_bytes(),
                );
                assert_eq!(next.status, 200, "{family}: {}", next.text());
            }
        }
    }
}

/// Every hostile text of the issue sent to the example (allowed 1 MiB of text a request, so
/// that 100,000 special tokens get through to the tokenizer), each answered clearly and the
/// next request served, within the plugin's time and memory limits.
#[test]
fn hostile_texts_are_answered_clearly_and_the_next_request_is_served() {
    // The tokenizing done by the host (the plugin's default) and inside the plugin's sandbox.
    for tokenize_in in ["host", "sandbox"] {
        let dir = tempfile::tempdir().unwrap();
        // A 1 MiB word takes a few hundred milliseconds to tokenize on an idle core, and the
        // host holds its primitives to the call's deadline: the limit leaves room for a CI
        // machine running other suites beside this one.
        let path = write_example(dir.path(), |manifest| {
            manifest
                .replace(
                    "max_length = \"128\"",
                    &format!("max_length = \"128\", max_text_bytes = \"1048576\", tokenize_in = \"{tokenize_in}\""),
                )
                .replace("time_limit_ms = 1000", "time_limit_ms = 5000")
        });
        let (_running, addr) = serve_with(
            &dir.path().join("models"),
            &[("SAGEMAKER_TRITON_PLUGINS", path.as_os_str())],
        );
        hostile_texts_at(addr, tokenize_in);
    }
}

/// Every hostile text of the issue sent to `addr`, each answered clearly and the next request
/// served.
fn hostile_texts_at(addr: SocketAddr, tokenize_in: &str) {
    let one_word = "a".repeat(6_000_000);
    let under = "a".repeat(1_048_576);
    let specials = "[SEP]".repeat(100_000);
    let json_word = json!({ "inputs": "b".repeat(2_000_000) }).to_string();
    let many = json!({ "inputs": vec!["x"; 65] }).to_string();
    let mixed = format!(
        "{} {}",
        "ça va 👋🏽 終わり ".repeat(20_000),
        "[CLS]".repeat(50)
    );
    // (what, content type, body, status, what the answer must say)
    let cases: Vec<(&str, &str, Vec<u8>, u16, &str)> = vec![
        (
            "6 MB of one word",
            "text/plain",
            one_word.into_bytes(),
            400,
            "bytes of text per request",
        ),
        (
            "2 MB of one word in JSON",
            "application/json",
            json_word.into_bytes(),
            400,
            "at most 1048576 bytes",
        ),
        (
            "1 MiB of one word",
            "text/plain",
            under.into_bytes(),
            200,
            "",
        ),
        (
            "100,000 special tokens",
            "text/plain",
            specials.into_bytes(),
            200,
            "",
        ),
        (
            "scripts, emoji and special tokens",
            "text/plain",
            mixed.into_bytes(),
            200,
            "",
        ),
        (
            "invalid UTF-8",
            "text/plain",
            b"good \xc3\x28 bad".to_vec(),
            400,
            "not UTF-8: byte 5",
        ),
        (
            "a truncated character",
            "text/plain",
            "終".as_bytes()[..2].to_vec(),
            400,
            "not UTF-8",
        ),
        (
            "invalid UTF-8 in JSON",
            "application/json",
            b"{\"inputs\": \"\xff\"}".to_vec(),
            400,
            "not JSON",
        ),
        (
            "a lone surrogate",
            "application/json",
            br#"{"inputs": "\ud800"}"#.to_vec(),
            400,
            "not JSON",
        ),
        (
            "65 texts",
            "application/json",
            many.into_bytes(),
            400,
            "at most 64",
        ),
        (
            "no texts",
            "application/json",
            b"{\"inputs\": []}".to_vec(),
            400,
            "holds no text",
        ),
        (
            "numbers",
            "application/json",
            b"{\"inputs\": [1, 2]}".to_vec(),
            400,
            "is not a string",
        ),
        (
            "another charset",
            "text/plain; charset=latin-1",
            b"caf\xe9".to_vec(),
            415,
            "UTF-8",
        ),
    ];
    for (what, content_type, body, status, says) in cases {
        let started = std::time::Instant::now();
        let answer = post(addr, content_type, &[], &body);
        let took = started.elapsed();
        let what = format!("{tokenize_in}: {what}");
        assert_eq!(answer.status, status, "{what}: {}", answer.text());
        if status == 200 {
            assert_eq!(
                answer.json()[0]["label"]
                    .as_str()
                    .map(str::len)
                    .map(|n| n > 0),
                Some(true),
                "{what}: {}",
                answer.text()
            );
        } else {
            assert!(answer.error().contains(says), "{what}: {}", answer.text());
        }
        assert!(took < std::time::Duration::from_secs(5), "{what}: {took:?}");
        let next = post(addr, "text/plain", &[], b"a wonderful film");
        assert_eq!(next.status, 200, "after {what}: {}", next.text());
        assert!(
            next.json()[0]["label"].is_string(),
            "after {what}: {}",
            next.text()
        );
    }
    let ping = request(addr, "GET", "/ping", &[], b"");
    assert_eq!(ping.status, 200, "{}", ping.text());
}

/// The tokenize plugin checks the model before it is served: settings that do not fit its
/// inputs stop the start, naming the plugin, the model, what differs and the key to set.
#[test]
fn settings_that_do_not_fit_the_model_refuse_the_start() {
    for (change, says) in [
        (
            ("max_length = \"128\"", "max_length = \"256\""),
            "plugin 'tokenize' cannot serve model 'text-classifier': input 'input_ids' is shaped [-1, 128], and this plugin makes [-1, 256]",
        ),
        (
            (
                "max_length = \"128\"",
                "max_length = \"128\", token_type_ids = \"segment_ids\"",
            ),
            "it has no input 'segment_ids' (its inputs: input_ids, attention_mask, token_type_ids); set the plugin's `token_type_ids`",
        ),
        (
            (
                "max_length = \"128\"",
                "max_length = \"128\", token_type_ids = \"\"",
            ),
            "it takes input 'token_type_ids', which this plugin does not make (it makes input_ids, attention_mask)",
        ),
        (
            (
                "max_length = \"128\"",
                "max_length = \"128\", datatype = \"INT32\"",
            ),
            "input 'input_ids' is INT64, and this plugin makes INT32; set the plugin's `datatype`",
        ),
        (
            (
                "max_length = \"128\"",
                "max_length = \"128\", padding = \"sideways\"",
            ),
            "padding = 'sideways': give max_length or longest",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = write_example(dir.path(), |manifest| manifest.replace(change.0, change.1));
        let (status, log) = common::process::start_refused(&dir.path().join("models"), &path);
        assert!(
            status.is_some_and(|status| !status.success()),
            "{change:?}: trident started ({status:?}): {log}"
        );
        assert!(log.contains(says), "{change:?}: {log}");
    }
}

/// Tokenizer files the plugin cannot use refuse the load, naming the asset and what is wrong:
/// one too large to be an asset, one that is not JSON, one nested past any parser's depth, one
/// whose merges name tokens it does not have, one without the padding token, one with no
/// tokens, and settings it cannot truncate to.
#[test]
fn tokenizer_files_the_plugin_cannot_use_are_refused_at_load_naming_the_asset() {
    let bert = {
        let dir = tempfile::tempdir().unwrap();
        std::fs::read(train("bert", dir.path())).unwrap()
    };
    let mut huge = bert.clone();
    huge.extend(std::iter::repeat_n(b' ', 50 << 20));
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let bad_merges = json!({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}});
    let no_pad = json!({"model": {"type": "WordLevel", "vocab": {"a": 0, "<unk>": 1}, "unk_token": "<unk>"}});
    let empty = json!({"model": {"type": "WordLevel", "vocab": {}, "unk_token": "<unk>"}});
    // BERT's tokenizer with a backtracking pre-tokenizer (150 s over 256 KB, which nothing could
    // stop), and with a normalizer of 17 steps.
    let with = |key: &str, value: Value| {
        let mut file: Value = serde_json::from_slice(&bert).unwrap();
        file[key] = value;
        file.to_string().into_bytes()
    };
    let backtracking = with(
        "pre_tokenizer",
        json!({"type": "Split", "pattern": {"Regex": "((a+)+)\\2c"}, "behavior": "Isolated", "invert": false}),
    );
    let long = with(
        "normalizer",
        json!({"type": "Sequence", "normalizers": vec![json!({"type": "Lowercase"}); 17]}),
    );
    // (what, tokenizer.json, settings changed in the manifest, what the refusal says)
    let pad = ("pad_token = \"[PAD]\"", "pad_token = \"[PAD]\"");
    let short = (
        "max_length = \"256\", pad_token",
        "max_length = \"1\", pad_token",
    );
    type Case<'a> = (&'a str, Vec<u8>, (&'a str, &'a str), &'a str);
    let cases: Vec<Case> = vec![
        ("50 MB", huge, pad, "asset 'tokenizer'"),
        (
            "not JSON",
            b"hello".to_vec(),
            pad,
            "asset 'tokenizer': not a tokenizer.json this can read",
        ),
        (
            "nested",
            deep.into_bytes(),
            pad,
            "asset 'tokenizer': not a tokenizer.json this can read",
        ),
        (
            "merges of missing tokens",
            bad_merges.to_string().into_bytes(),
            pad,
            "asset 'tokenizer': not a tokenizer.json this can read",
        ),
        (
            "no padding token",
            no_pad.to_string().into_bytes(),
            pad,
            "pad_token = '[PAD]': the tokenizer has no such token",
        ),
        (
            "no tokens",
            empty.to_string().into_bytes(),
            pad,
            "asset 'tokenizer'",
        ),
        (
            "a backtracking pre-tokenizer",
            backtracking,
            pad,
            "its pre_tokenizer matches the regular expression \"((a+)+)\\\\2c\", which repeats a repetition",
        ),
        (
            "a normalizer of 17 steps",
            long,
            pad,
            "its normalizer has 17 steps; a tokenizer may have at most 16 per stage",
        ),
        (
            "too short to truncate",
            bert,
            short,
            "max_length = 1: the tokenizer adds 2 special tokens to every text",
        ),
    ];
    for (what, file, (from, to), says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let tokenizer = dir.path().join("tokenizer.json");
        std::fs::write(&tokenizer, &file).unwrap();
        let models = identity_model(dir.path());
        let manifest = tokenize_manifest(dir.path(), &tokenizer, "[PAD]", "");
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(text.contains(from), "{text}");
        std::fs::write(&manifest, text.replace(from, to)).unwrap();
        let (status, log) = common::process::start_refused(&models, &manifest);
        assert!(
            status.is_some_and(|status| !status.success()),
            "{what}: trident started ({status:?}): {log}"
        );
        assert!(
            log.contains("plugin 'tokenize'") && log.contains(says),
            "{what}: {log}"
        );
    }
}
