//! Text in, text streamed out, on the real core over HTTP on 127.0.0.1: the text-streaming
//! example (`examples/text-streaming`: a decoupled stand-in language model streaming token ids
//! behind the detokenize plugin, as `scripts/serve-example text-streaming` serves it). Each
//! event must carry exactly the text its ids add, and the texts of all events must be the text
//! of the whole sequence, as Hugging Face's Python `tokenizers` decodes it (whole, and step by
//! step with `DecodeStream`), for a tokenizer of each model family's layout. Then `generate`,
//! concurrent streams, streams cut short, and hostile prompts, each answered clearly and the
//! next stream served.

mod common;

use std::net::SocketAddr;
use std::path::Path;

use common::http_client::{HttpResponse, request};
use common::plugins::guest;
use common::process::{Running, python_client, serve_with};
use common::texts::{FAMILIES, corpus, train};
use serde_json::{Value, json};

const EXAMPLE: &str = "examples/text-streaming";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The example in `dir` with `tokenizer` (a file in `dir`): its model streaming without a
/// pause between ids, its manifest with the digests, `settings` added to the plugin's table;
/// trident serving it with the inference type `kind`.
fn serve(dir: &Path, tokenizer: &Path, kind: &str, settings: &str) -> (Running, SocketAddr) {
    serve_paced(dir, tokenizer, kind, settings, 0)
}

/// [`serve`] with the model pausing `delay_ms` before each id.
fn serve_paced(
    dir: &Path,
    tokenizer: &Path,
    kind: &str,
    settings: &str,
    delay_ms: u32,
) -> (Running, SocketAddr) {
    common::copy_dir(&root().join(EXAMPLE).join("models"), &dir.join("models"));
    let config = dir.join("models/token-stream/config.pbtxt");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "string_value: \"20\"",
            &format!("string_value: \"{delay_ms}\""),
        ),
    )
    .unwrap();
    std::fs::copy(guest("detokenize"), dir.join("detokenize.wasm")).unwrap();
    if tokenizer != dir.join("tokenizer.json") {
        std::fs::copy(tokenizer, dir.join("tokenizer.json")).unwrap();
    }
    let digest = |file: &str| {
        trident::plugins::platform::loading::sha256_hex(&std::fs::read(dir.join(file)).unwrap())
    };
    let manifest = std::fs::read_to_string(root().join(EXAMPLE).join("plugins.toml.in"))
        .unwrap()
        .replace("@DETOKENIZE@", &digest("detokenize.wasm"))
        .replace("@TOKENIZER@", &digest("tokenizer.json"))
        .replace(
            "time_limit_ms = 1000",
            &format!("time_limit_ms = 1000{settings}"),
        );
    let path = dir.join("plugins.toml");
    std::fs::write(&path, manifest).unwrap();
    serve_with(
        &dir.join("models"),
        &[
            ("SAGEMAKER_TRITON_PLUGINS", path.as_os_str()),
            ("SAGEMAKER_TRITON_INFERENCE_TYPE", kind.as_ref()),
        ],
    )
}

fn post(addr: SocketAddr, body: &Value) -> HttpResponse {
    request(
        addr,
        "POST",
        "/invocations",
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
}

/// The `text_output` of every event of a stream's answer.
fn pieces(answer: &HttpResponse) -> Vec<String> {
    assert_eq!(answer.status, 200, "{}", answer.text());
    let text = answer.text();
    text.split("\n\n")
        .filter(|event| !event.is_empty())
        .map(|event| {
            let payload = event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not an event: {event:?}"));
            let event: Value = serde_json::from_str(payload).unwrap();
            event["text_output"]
                .as_str()
                .unwrap_or_else(|| panic!("no text_output: {payload}"))
                .to_owned()
        })
        .collect()
}

/// Hugging Face's ids of each of `lines` (special tokens added), and what it decodes them to:
/// `(whole text, the text each id adds through DecodeStream)`, special tokens skipped.
fn hugging_face(
    tokenizer: &Path,
    pad: &str,
    lines: &[String],
) -> Vec<(Vec<u32>, String, Vec<String>)> {
    let batches: Vec<Vec<&String>> = lines.iter().map(|line| vec![line]).collect();
    let encoded = python_client(
        "texts.py",
        &format!("encode:{}", tokenizer.display()),
        &json!({"batches": batches, "max_length": 100_000, "truncation": false, "pad_token": pad}),
    );
    let ids: Vec<Vec<u32>> = encoded
        .as_array()
        .unwrap()
        .iter()
        .map(|batch| serde_json::from_value(batch["input_ids"][0].clone()).unwrap())
        .collect();
    let decoded = python_client(
        "texts.py",
        &format!("decode:{}", tokenizer.display()),
        &json!({"ids": ids, "skip_special": true}),
    );
    ids.into_iter()
        .zip(decoded.as_array().unwrap())
        .map(|(ids, decoded)| {
            let steps: Vec<String> = serde_json::from_value(decoded["steps"].clone()).unwrap();
            (ids, decoded["text"].as_str().unwrap().to_owned(), steps)
        })
        .collect()
}

/// `got` (a stream's pieces) is Hugging Face's: the whole text, and DecodeStream's steps that
/// add text, one event each (trident sends the text of ids still pending at the end, which
/// DecodeStream keeps back, as one more).
fn assert_streamed_like_hugging_face(got: &[String], whole: &str, steps: &[String], what: &str) {
    assert_eq!(got.concat(), whole, "{what}: {got:?}");
    let sent: Vec<&String> = steps.iter().filter(|step| !step.is_empty()).collect();
    let (stepped, rest) = got.split_at(sent.len().min(got.len()));
    assert_eq!(
        stepped.iter().collect::<Vec<_>>(),
        sent,
        "{what}: {got:?} vs {steps:?}"
    );
    assert!(rest.len() <= 1, "{what}: {got:?} vs {steps:?}");
}

/// 200 lines of the corpus (a third CJK, kana, Hangul, Arabic, Devanagari, Thai, emoji, combining
/// marks and special tokens written as text) streamed back id by id, through a tokenizer of each
/// family's layout: every event is DecodeStream's step, and together they are the whole text.
#[test]
fn streamed_text_is_the_whole_text_in_every_family() {
    let lines = corpus(200);
    for (family, pad) in FAMILIES {
        let dir = tempfile::tempdir().unwrap();
        let tokenizer = train(family, dir.path());
        let expected = hugging_face(&tokenizer, pad, &lines);
        let (_running, addr) = serve(dir.path(), &tokenizer, "generate_stream", "");
        for (line, (ids, whole, steps)) in lines.iter().zip(&expected) {
            let answer = post(addr, &json!({ "text_input": line }));
            let got = pieces(&answer);
            let what = format!("{family}: {line:?} ({} ids)", ids.len());
            assert_streamed_like_hugging_face(&got, whole, steps, &what);
        }
    }
}

/// `generate` answers the whole text at once; the body's other fields reach the model
/// (`max_tokens` stops it early), and streams running at once keep their states apart.
#[test]
fn generate_answers_the_whole_text_and_streams_keep_apart() {
    let lines = corpus(24);
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = train("llama", dir.path());
    let expected = hugging_face(&tokenizer, "<unk>", &lines);
    {
        let (_running, addr) = serve(dir.path(), &tokenizer, "generate", "");
        for (line, (_, whole, _)) in lines.iter().zip(&expected).take(6) {
            let answer = post(addr, &json!({ "text_input": line }));
            assert_eq!(answer.status, 200, "{}", answer.text());
            assert_eq!(
                answer.json()["text_output"].as_str(),
                Some(whole.as_str()),
                "{line:?}"
            );
            assert_eq!(
                answer.json()["model_name"],
                "token-stream",
                "{}",
                answer.text()
            );
        }
        // Five ids: the beginning of the sequence and four of the prompt's.
        let (ids, _, _) = &expected[1];
        let short = python_client(
            "texts.py",
            &format!("decode:{}", tokenizer.display()),
            &json!({"ids": [&ids[..5]], "skip_special": true}),
        );
        let answer = post(addr, &json!({ "text_input": lines[1], "max_tokens": 5 }));
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(
            answer.json()["text_output"],
            short[0]["text"],
            "{}",
            answer.text()
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let (_running, addr) = serve(dir.path(), &tokenizer, "generate_stream", "");
    std::thread::scope(|scope| {
        let streams: Vec<_> = lines
            .iter()
            .zip(&expected)
            .map(|(line, expected)| {
                scope.spawn(move || {
                    let got = pieces(&post(addr, &json!({ "text_input": line })));
                    assert_streamed_like_hugging_face(&got, &expected.1, &expected.2, line);
                })
            })
            .collect();
        for stream in streams {
            stream.join().unwrap();
        }
    });
}

/// A plugin reload (`POST /plugins/reload`) while streams run: each stream in flight ends
/// whole and right, in the plugins (and the instance) it started with, and the stream after it
/// is served by the reloaded set.
#[test]
fn streams_in_flight_end_whole_across_a_plugin_reload() {
    use std::time::{Duration, Instant};
    let lines = corpus(48);
    let prompts: Vec<String> = lines.chunks(24).map(|chunk| chunk.join(" ")).collect();
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = train("llama", dir.path());
    let expected = hugging_face(&tokenizer, "<unk>", &prompts);
    // 10 ms an id: each stream lasts seconds (the model runs one at a time: one streams across
    // the reload, the other waits in its queue), the reload well under a second.
    let (_running, addr) = serve_paced(dir.path(), &tokenizer, "generate_stream", "", 10);
    let (reloaded, ended) = std::thread::scope(|scope| {
        let streams: Vec<_> = prompts
            .iter()
            .zip(&expected)
            .map(|(prompt, expected)| {
                scope.spawn(move || {
                    let got = pieces(&post(addr, &json!({ "text_input": prompt })));
                    assert_streamed_like_hugging_face(&got, &expected.1, &expected.2, prompt);
                    Instant::now()
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let reload = request(addr, "POST", "/plugins/reload", &[], b"");
        assert_eq!(reload.status, 200, "{}", reload.text());
        let reloaded = Instant::now();
        let ended: Vec<Instant> = streams.into_iter().map(|s| s.join().unwrap()).collect();
        (reloaded, ended)
    });
    let shortest = expected.iter().map(|(ids, _, _)| ids.len()).min().unwrap();
    assert!(
        ended.iter().any(|end| *end > reloaded),
        "both streams ({shortest} ids and more) ended before the reload did: nothing was tested"
    );
    let got = pieces(&post(addr, &json!({ "text_input": prompts[0] })));
    assert_streamed_like_hugging_face(&got, &expected[0].1, &expected[0].2, "after the reload");
}

/// Prompts the plugin cannot take are answered with 400 naming what is wrong, and the next
/// stream is served; so is a stream whose client left after its first event.
#[test]
fn hostile_prompts_are_answered_clearly_and_the_next_stream_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = train("gpt2", dir.path());
    let (_running, addr) = serve(
        dir.path(),
        &tokenizer,
        "generate_stream",
        "\nconfig = { max_length = \"64\", max_text_bytes = \"65536\" }",
    );
    let good = json!({ "text_input": "Hello 👋🏽 world" });
    let expected = pieces(&post(addr, &good)).concat();
    assert_eq!(expected, "Hello 👋🏽 world");
    let long = "word ".repeat(100);
    let huge = "a".repeat(70_000);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "no prompt",
            br#"{"prompt": "x"}"#.to_vec(),
            "no field 'text_input'",
        ),
        (
            "a number",
            br#"{"text_input": 7}"#.to_vec(),
            "'text_input' is not a string",
        ),
        ("not JSON", b"text_input=x".to_vec(), "not JSON"),
        ("a list", br#"["x"]"#.to_vec(), "not a JSON object"),
        (
            "a lone surrogate",
            br#"{"text_input": "\ud800"}"#.to_vec(),
            "not JSON",
        ),
        (
            "too many tokens",
            json!({ "text_input": long }).to_string().into_bytes(),
            "this model takes at most 64",
        ),
        (
            "too many bytes",
            json!({ "text_input": huge }).to_string().into_bytes(),
            "at most 65536 bytes",
        ),
    ];
    for (what, body, says) in cases {
        let answer = request(
            addr,
            "POST",
            "/invocations",
            &[("Content-Type", "application/json")],
            &body,
        );
        assert_eq!(answer.status, 400, "{what}: {}", answer.text());
        assert!(answer.error().contains(says), "{what}: {}", answer.text());
        assert_eq!(
            pieces(&post(addr, &good)).concat(),
            expected,
            "after {what}"
        );
    }
    // A client that leaves after the first event: the next stream starts from nothing.
    for _ in 0..3 {
        use std::io::{Read, Write};
        let mut socket = std::net::TcpStream::connect(addr).unwrap();
        let body = json!({ "text_input": "leaving 終わり".repeat(50) }).to_string();
        write!(
            socket,
            "POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut first = [0u8; 64];
        let _ = socket.read(&mut first).unwrap();
        drop(socket);
        assert_eq!(
            pieces(&post(addr, &good)).concat(),
            expected,
            "after a client left"
        );
    }
    let ping = request(addr, "GET", "/ping", &[], b"");
    assert_eq!(ping.status, 200, "{}", ping.text());
}
